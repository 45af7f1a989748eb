"""The student edition keeps every exercise and drops every solution."""

import json

import pytest

from conftest import notebooks
from llm_roofline.student import strip_solutions, write_student_edition


def _nb(*cells):
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": list(cells)}


def _cell(kind, source, tags=(), **extra):
    return {"cell_type": kind, "source": source, "metadata": {"tags": list(tags)}, **extra}


def test_drops_tagged_cells_and_clears_outputs():
    nb = _nb(
        _cell("markdown", "````{exercise-start}\n:label: ex-a\n````"),
        _cell("code", "x = 1", outputs=[{"output_type": "stream", "text": "1"}], execution_count=3),
        _cell("markdown", "````{solution-start} ex-a\n````", tags=["solution"]),
        _cell("code", "answer = 42", tags=["solution"], outputs=[], execution_count=None),
        _cell("markdown", "````{solution-end}\n````", tags=["solution"]),
    )
    out = strip_solutions(nb)
    assert [c["source"] for c in out["cells"]] == [nb["cells"][0]["source"], "x = 1"]
    assert out["cells"][1]["outputs"] == [] and out["cells"][1]["execution_count"] is None
    assert len(nb["cells"]) == 5, "the input notebook is left unchanged"


def test_rejects_what_is_not_a_notebook():
    with pytest.raises(ValueError, match="cells"):
        strip_solutions({"metadata": {}})


def test_empty_folder_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no notebooks"):
        write_student_edition(tmp_path, tmp_path / "out")


@pytest.mark.skipif(not notebooks(), reason="no chapter notebooks yet")
def test_student_edition_of_the_book(tmp_path):
    written = write_student_edition(notebooks()[0].parent, tmp_path)
    assert len(written) == len(notebooks())
    for path in written:
        text = path.read_text()
        assert "{solution-start}" not in text
        original = json.loads((notebooks()[0].parent / path.name).read_text())
        assert text.count("{exercise-start}") == json.dumps(original).count("{exercise-start}")
