"""The bibliography style of the book: entries labelled by author and year, as the text cites them.

The text cites author-year (``bibtex_reference_style: author_year`` in _config.yml), so the list
of references is labelled the same way, "[Williams et al., 2009]", sorted by author, year and
title, with braces of corporate names ({NVIDIA}) ignored when sorting. Two works of one author in
one year carry the letter in their ``year`` field (2024a, 2024b), so text and list agree.
Use it as ``:style: author_year`` in the bibliography directive.
"""

from __future__ import annotations

from pybtex.plugin import register_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting.author_year_title import SortingStyle as AuthorYearTitle


def _last(person) -> str:
    return " ".join(person.prelast_names + person.last_names).replace("{", "").replace("}", "")


def author_year_label(entry) -> str:
    """'Williams et al., 2009', 'Pope and Douglas, 2022', 'NVIDIA, 2024a', as the text cites them."""
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_last(p) for p in persons if _last(p) != "others"]
    if not names:
        who = entry.fields.get("title", entry.key)
    elif len(names) == 1 and len(persons) == 1:
        who = names[0]
    elif len(names) == 2 and len(persons) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabels(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        for entry in sorted_entries:
            yield author_year_label(entry)


class BracelessSorting(AuthorYearTitle):
    def person_key(self, person) -> str:
        return super().person_key(person).replace("{", "").replace("}", "")


class AuthorYearStyle(PlainStyle):
    default_label_style = "author_year"
    default_sorting_style = "author_year_title_braceless"


register_plugin("pybtex.style.labels", "author_year", AuthorYearLabels)
register_plugin("pybtex.style.sorting", "author_year_title_braceless", BracelessSorting)
register_plugin("pybtex.style.formatting", "author_year", AuthorYearStyle)


def setup(app):
    return {"parallel_read_safe": True, "parallel_write_safe": True}
