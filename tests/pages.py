"""Read the book's executable pages as cells, and find the numbers their prose states.

An executable page is a chapter notebook (``notebooks/*.ipynb``) or a MyST page with code
cells (``book/*.md`` holding ```` ```{code-cell} ````). Both become a list of :class:`Cell`.

The rule the tests enforce (CONTRIBUTING.md, "Numbers in prose"): every number in a page's
prose appears in one of its code cells, either as the text of a ``states(value, "text")``
call or as a literal (an input such as ``batch=32`` or ``2048``). Not numbers of the prose:
anything in code spans, code blocks, roles (``{cite}``, ``{term}``, ``{doc}``...), URLs and
link targets, HTML tags, directive option lines and labels; list markers and the section
numbers of headings; numbers inside names (``H100``, ``Llama-3-70B``, ``fp8``, ``32K``,
"RTX 4090", "Llama 3"); labels such as "exercise 2.3", "chapter 7", "section 3"; citation
years ("et al., 2022", "(2019)"). In math, integers of one or two digits are a formula's constants (the 2 of
``2mkn``, ``2^{30}``) and exempt; a number in math with a decimal point or three or more
digits is a value, and follows the rule.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Cell:
    kind: str  # "markdown" or "code"
    source: str
    outputs: list = field(default_factory=list)
    tags: tuple = ()


def _text(src) -> str:
    return src if isinstance(src, str) else "".join(src)


def is_executable_md(path: Path) -> bool:
    return path.suffix == ".md" and "```{code-cell}" in path.read_text()


def executable_pages() -> list[Path]:
    """Every chapter notebook and every MyST page with code cells, as paths."""
    pages = sorted((ROOT / "notebooks").glob("*.ipynb"))
    return pages + [p for p in sorted((ROOT / "book").glob("*.md")) if is_executable_md(p)]


def read_cells(path: Path) -> list[Cell]:
    """The page as cells, in order (for a notebook, with its outputs if it has any)."""
    if path.suffix == ".ipynb":
        nb = json.loads(path.read_text())
        return [Cell(c["cell_type"], _text(c["source"]), c.get("outputs", []),
                     tuple(c.get("metadata", {}).get("tags", []))) for c in nb["cells"]]
    text = path.read_text()
    if text.startswith("---\n"):  # front matter (jupytext, kernelspec)
        text = text[text.index("\n---\n", 4) + 5:]
    cells, markdown = [], []
    lines = iter(text.splitlines())
    for line in lines:
        m = re.match(r"^(`{3,})\{code-cell\}", line)
        if not m:
            markdown.append(line)
            continue
        cells.append(Cell("markdown", "\n".join(markdown)))
        markdown, code, tags = [], [], ()
        for inner in lines:
            if inner.strip() == m.group(1):
                break
            if inner.startswith(":tags:"):
                tags = tuple(re.findall(r"[\w-]+", inner[len(":tags:"):]))
            elif not (not code and re.match(r"^:\w[\w-]*:", inner)):
                code.append(inner)
        cells.append(Cell("code", "\n".join(code), tags=tags))
    cells.append(Cell("markdown", "\n".join(markdown)))
    return [c for c in cells if c.source.strip() or c.kind == "code"]


# --- what a code cell states -------------------------------------------------------------

def _python(source: str) -> str:
    """The cell without IPython magics and shell escapes, so that it parses as Python."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def stated_texts(source: str) -> set[str]:
    """The texts of every ``states(value, "text")`` call in a code cell."""
    try:
        tree = ast.parse(_python(source))
    except SyntaxError:
        return set(re.findall(r"states\([^\n]*?,\s*[\"']([^\"']+)[\"']\s*\)", source))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and len(node.args) >= 2:
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            arg = node.args[1]
            if name == "states" and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.add(arg.value.strip())
    return found


def literal_values(source: str) -> set[float]:
    """The values of every number literal in a code cell (``32_768``, ``1e3``, ``0.9``)."""
    values = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(_python(source)).readline):
            if tok.type == tokenize.NUMBER and not tok.string.endswith(("j", "J")):
                values.add(float(ast.literal_eval(tok.string)))
    except (tokenize.TokenError, SyntaxError, ValueError):
        for text in re.findall(r"(?<![\w.])\d[\d_]*(?:\.\d+)?(?:e[-+]?\d+)?", source):
            values.add(float(text.replace("_", "")))
    return values


# --- the numbers of the prose ------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.,\-−])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w.]\d|\d|[A-Za-wyz_]|-[A-Za-z])")
_LABELLED = re.compile(
    r"\b(?:exercises?|chapters?|sections?|parts?|steps?|cases?|points?|figures?|tables?|"
    r"appendix|eq\.|equations?|issue|§)\s*\d+(?:\.\d+)*(?:\s*(?:,|and|or|to)\s*\d+(?:\.\d+)*)*",
    re.I,
)
_NAMED = re.compile(  # a product or model family and its number: "RTX 4090", "Llama 3", "GPT 4"
    r"\b(?:RTX|GTX|Radeon|Instinct|Llama|Qwen|GPT|PaLM|Gemma|Gemini|DeepSeek|Mistral|Mixtral)\s+\d+(?:\.\d+)?"
)
_YEAR = re.compile(r"(?:et al\.,?\s*|\(\s*)(?:19|20)\d\d[a-z]?\b")
_ROLE = re.compile(r"\{[\w:-]+\}`[^`]*`")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_MATH_BLOCK = re.compile(r"\$\$.+?\$\$|\\begin\{(\w+\*?)\}.+?\\end\{\1\}", re.S)
_MATH_INLINE = re.compile(r"(?<![\\$])\$(?!\$)(.+?)(?<![\\$])\$")


def _strip_fences(text: str) -> str:
    """Drop code blocks (keeping the prose inside directives), directive fences and option lines.

    A bare fence closes the innermost open directive whose fence it repeats; anywhere else it opens a
    code block, as does a fence with a language (```python) or a {code-cell} or {math} directive."""
    out, fence, directives = [], None, []
    for line in text.splitlines():
        m = re.match(r"^\s*(`{3,}|~{3,}|:{3,})(.*)$", line)
        if fence is None and m:
            mark, info = m.group(1), m.group(2).strip()
            if not info and directives and mark == directives[-1]:
                directives.pop()  # the end of a directive: the prose inside it was kept
            elif mark[0] == "`" and (not info.startswith("{") or info.startswith(("{code", "{math"))):
                fence = mark  # ```python, ``` or {code-cell}: code, skipped whole
            else:
                directives.append(mark)
            out.append("")  # a fence line: its name and arguments are not prose
            continue
        if fence is not None:
            if line.strip() == fence:
                fence = None
            out.append("")
            continue
        if re.match(r"^\s*:[\w-]+:", line) or re.match(r"^\s*\(.*\)=\s*$", line):
            out.append("")  # directive options, targets
            continue
        out.append(line)
    return "\n".join(out)


def _blank(match: re.Match) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))


def prose_numbers(markdown: str) -> list[tuple[str, str]]:
    """Every number the markdown states, as ``(text, sentence)``, with the exemptions above."""
    text = _strip_fences(markdown)
    text = _CODE_SPAN.sub(_blank, text)
    text = _ROLE.sub(_blank, text)
    text = re.sub(r"<[^>\n]+>", _blank, text)  # HTML tags
    text = re.sub(r"\]\([^)\s]*\)", lambda m: "]" + " " * (len(m.group(0)) - 1), text)  # link targets
    text = re.sub(r"https?://\S+", _blank, text)
    text = re.sub(r"(?m)^(\s*#+\s*)(\d+(\.\d+)*\.?)", lambda m: m.group(1) + " " * len(m.group(2)),
                  text)  # section numbers of headings
    text = re.sub(r"(?m)^(\s*)\d+[.)](\s)", lambda m: m.group(1) + "  " + m.group(2), text)  # list markers
    text = _LABELLED.sub(_blank, text)
    text = _NAMED.sub(_blank, text)
    text = _YEAR.sub(_blank, text)
    found = []

    def math_values(m: re.Match) -> str:
        for n in _NUMBER.finditer(m.group(0).replace("{,}", ",")):  # 57{,}344: a thousands separator
            if n.group(2) or len(n.group(1).replace(",", "")) >= 3:
                found.append((n.group(0), _sentence(text, m.start() + n.start())))
        return _blank(m)

    text = _MATH_BLOCK.sub(math_values, text)
    text = _MATH_INLINE.sub(math_values, text)
    for n in _NUMBER.finditer(text):
        found.append((n.group(0), _sentence(text, n.start())))
    return found


def _sentence(text: str, at: int) -> str:
    start = max(text.rfind(". ", 0, at), text.rfind("\n\n", 0, at), 0)
    end = min([i for i in (text.find(". ", at), text.find("\n\n", at)) if i >= 0] or [len(text)])
    return " ".join(text[start:end + 1].split()).lstrip(". ")[:160]


def value_of(number: str) -> float:
    return float(number.replace(",", ""))


def unbacked_numbers(path: Path) -> list[tuple[str, str]]:
    """The prose numbers of a page that no code cell of it states or holds as a literal."""
    cells = read_cells(path)
    code = [c.source for c in cells if c.kind == "code"]
    texts = set().union(*(stated_texts(s) for s in code)) if code else set()
    values = set().union(*(literal_values(s) for s in code)) if code else set()
    missing = []
    for cell in cells:
        if cell.kind != "markdown":
            continue
        for number, sentence in prose_numbers(cell.source):
            if number in texts or value_of(number) in values:
                continue
            missing.append((number, sentence))
    return missing
