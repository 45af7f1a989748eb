"""Bad and extreme input thrown at the course tools and the writers' gate (hypothesis).

Each property: the call raises a one-line ``ValueError`` or does what it is asked, and never
changes a file it was not asked to write (every file of the sandbox outside the destination is
hashed before and after). The sandbox holds the hostile neighbours of issue 33: a FIFO, a
dangling link, a link to ``/dev/zero``, a file where a folder should be, a foreign file of an
output's name, the source folder itself. Paths are made relative to the sandbox, so that no
example can reach outside it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import shutil
import tempfile
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llm_roofline as lr
import llm_roofline.course.exercises  # noqa: F401  (every chapter registers its checks)
from llm_roofline import realistic, validate
from llm_roofline.course import assignments, registry, slides, student

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "notebooks" / "03_roofline.ipynb"

WRITERS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Names inside the sandbox, hostile and ordinary, and what a user might pass instead of a name.
NAMES = ["src", "src/sub", ".", "", " ", "dest", "dest/deeper", "file", "file/sub", "fifo",
         "dangling", "zero", "foreign", "foreign/03_roofline.ipynb", "x" * 300, "a\x00b", "src/..",
         "dest/../src"]
paths = st.one_of(
    st.sampled_from(NAMES),
    # any text, kept inside the sandbox: no leading "/" and no ".." component
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12).map(
        lambda t: "/".join("__" if part == ".." else part for part in t.lstrip("/").split("/"))),
    st.sampled_from([None, 3, 2.5, b"dest", ["dest"], Path("dest"), Path("src")]),
)
# A destination: often a folder holding the user's own files of the outputs' names, or a new one.
dests = st.one_of(st.sampled_from(["foreign", "dest", "fresh/new", "foreign/presets.json"]), paths)
sources = st.one_of(st.just("src"), paths)
flags = st.one_of(st.booleans(), st.sampled_from(["yes", "", None, 0, 1, np.bool_(True)]))
anything = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8), st.just(10**400), st.just(5e-324), st.just(1e308),
    st.decimals(allow_nan=True, allow_infinity=True), st.fractions(),
    st.lists(st.integers(-3, 10), max_size=3),
)


@contextlib.contextmanager
def sandbox():
    """A temporary folder, the current folder while it is open, holding two notebooks in
    ``src/``, a foreign file of each output's name in ``foreign/``, and hostile neighbours."""
    with tempfile.TemporaryDirectory() as directory, contextlib.chdir(directory):
        box = Path(directory)
        (box / "src").mkdir()
        shutil.copy(CHAPTER, box / "src")
        (box / "src" / "01_tiny.ipynb").write_text(json.dumps(
            {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
                {"cell_type": "markdown", "metadata": {"tags": ["slide"]}, "source": "# Tiny"},
                {"cell_type": "markdown", "metadata": {"tags": ["solution"]}, "source": "no"}]}))
        (box / "decks").mkdir()
        (box / "decks" / "01.md").write_text(
            "---\nchapter: 01_tiny\ntitle: Tiny\n---\n\n# Tiny\n- one objective\n"
            + "".join(f"\n---\n\n## Slide {i}\n- a point\n" for i in range(2, 13)))
        (box / "file").write_text("a file where a folder may be asked for")
        os.mkfifo(box / "fifo")
        (box / "dangling").symlink_to(box / "nowhere")
        (box / "zero").symlink_to("/dev/zero")
        (box / "foreign").mkdir()
        for name in ("03_roofline.ipynb", "01_tiny.ipynb", "nbgrader_config.py",
                     "03_roofline.slides.html", "01_tiny.slides.html", "presets.json"):
            (box / "foreign" / name).write_text("the user's own file\n")
        yield box


def hashes(box: Path, skip: Path | None = None) -> dict[str, str]:
    """Every entry of the sandbox, links not followed, but for those under ``skip``."""
    out = {}
    for path in sorted(box.rglob("*")):
        if skip is not None and (path == skip or skip in path.parents):
            continue
        if path.is_symlink():
            out[str(path)] = "link:" + os.readlink(path)
        elif path.is_file():
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[str(path)] = "folder" if path.is_dir() else "special"
    return out


def assert_written_only_into(box: Path, before: dict, target: Path, force) -> None:
    """Nothing outside ``target`` changed, and a file inside it that was there before (the
    user's own: no writer's mark) changed only with ``force`` true."""
    after = hashes(box)
    forced = isinstance(force, bool | np.bool_) and bool(force)
    for name, digest in before.items():
        path = Path(name)
        inside = path.parent.resolve() == target or target in path.parent.resolve().parents
        if after.get(name) != digest:
            assert inside and forced, f"{name} changed (force={force!r}, destination {target})"


def one_line_error(call):
    """Run ``call``; a ValueError must be one line; return the result or None."""
    try:
        return call()
    except ValueError as err:
        text = str(err)
        assert text and "\n" not in text and len(text) < 700, text
        return None


@WRITERS
@given(src=sources, dest=dests, force=flags)
def test_the_student_edition_writes_only_its_destination(src, dest, force):
    with sandbox() as box:
        before = hashes(box)
        written = one_line_error(lambda: student.write_student_edition(src, dest, force=force))
        if written is None:
            assert hashes(box) == before
        else:
            target = Path(dest).resolve()
            assert_written_only_into(box, before, target, force)
            assert all(Path(p).resolve().parent == target for p in written)
            assert all(student.MARK in Path(p).read_text() for p in written)


@WRITERS
@given(notebooks=sources, root=dests, chapters=st.one_of(
    st.none(), st.lists(st.sampled_from(["03_roofline", "01_tiny", "99_x", "../src/03_roofline",
                                         "", "fifo"]), max_size=2), anything),
       force=flags)
def test_the_nbgrader_course_writes_only_its_folder(notebooks, root, chapters, force):
    with sandbox() as box:
        before = hashes(box)
        course = one_line_error(lambda: assignments.write_course(notebooks, root, chapters,
                                                                 release=False, force=force))
        if course is None:
            assert hashes(box) == before
        else:
            target = Path(root).resolve()
            assert_written_only_into(box, before, target, force)
            assert assignments.MARK in (target / "nbgrader_config.py").read_text()


@WRITERS
@given(decks=st.one_of(st.just("decks"), paths), notebooks=sources, out=dests,
       only=st.one_of(st.none(), st.lists(st.sampled_from(
           ["03_roofline", "01_tiny", "01", "01_tiny.ipynb", "99_x", ""]), max_size=2), anything),
       execute=flags, jobs=st.one_of(st.none(), anything), force=flags)
def test_the_slides_write_only_their_folder(monkeypatch_module, decks, notebooks, out, only,
                                            execute, jobs, force):
    with sandbox() as box:
        before = hashes(box)
        decks = one_line_error(lambda: slides.build(decks, notebooks, out, only, execute=False,
                                                    jobs=jobs, force=force))
        if decks is None:
            assert hashes(box) == before
        else:
            target = Path(out).resolve()
            assert_written_only_into(box, before, target, force)
            assert decks and all(slides.MARK in Path(d).read_text() for d in decks)


@pytest.fixture(scope="module")
def monkeypatch_module():
    """The slides' build without npm or MathJax: the gate is what is tested."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(slides, "install_reveal", lambda out: out)
        patch.setattr(slides, "install_mathjax", lambda out: out)
        yield


@WRITERS
@given(path=dests, text=st.text(max_size=50), force=flags, marker=st.sampled_from(["MARK", ""]))
def test_the_writers_gate_writes_only_its_file(path, text, force, marker):
    with sandbox() as box:
        before = hashes(box)

        def write():
            target = validate.destination("path", path, folder=False)
            return validate.write_output("path", target, f"MARK {text}", marker=marker or "MARK",
                                         force=force)

        written = one_line_error(write)
        if written is None:
            assert hashes(box) == before
        else:
            with open(written, encoding="utf-8", newline="") as f:
                assert f.read() == f"MARK {text}"
            assert_written_only_into(box, before, Path(written).parent.resolve(), force)
            assert not list(Path(written).parent.glob(".*.tmp"))


@FAST
@given(data=st.one_of(st.binary(max_size=64), st.text(max_size=64), anything,
                      st.binary(max_size=40).map(lambda b: b"\x89PNG\r\n\x1a\n" + b)))
def test_png_records_give_a_clear_error_none_or_a_record(data):
    record = one_line_error(lambda: slides.png_record(data))
    assert record is None or isinstance(record, dict)


lines = st.sampled_from(["---", "# Title", "## A slide", "- a point", "Note:", "chapter: 04_x",
                         "title: T", "![Figure 4.2. x](figure:4.2)", "![x](figure:4.2)",
                         "![Figure 4.2. x](plot.png)", "{term}`x`", "```", "chapter: [1]", ""])


@FAST
@given(text=st.one_of(anything, st.lists(st.one_of(lines, st.text(max_size=12)), max_size=14).map(
    "\n".join)))
def test_a_deck_source_gives_a_clear_error_or_a_deck(text):
    deck = one_line_error(lambda: slides.parse_deck(text, "slides/04.md"))
    if deck is not None:
        assert deck.slides and deck.slides[0].number == 1
        assert all(s.figure is None or s.caption for s in deck.slides)


@FAST
@given(id=st.sampled_from([i for i in registry.list_exercises() if not i.startswith("machine-")]),
       answer=anything)
def test_answer_checks_read_numbers_of_any_kind(id, answer):
    verdict = one_line_error(lambda: registry.check(id, answer))
    if isinstance(answer, Decimal | Fraction) and math.isfinite(validate.as_float(answer)):
        value = float(answer)
        if value == 0 or 1e-30 <= abs(value) <= 1e30:
            assert verdict is not None  # read like the float it is
            assert verdict.correct == registry.check(id, value).correct


_PRESET_FIELDS = realistic.PARAMETERS + ("rows", "sources", "name")


@FAST
@given(field=st.sampled_from(_PRESET_FIELDS), value=anything)
def test_a_preset_with_any_field_is_refused_or_predicts_a_finite_time(field, value):
    default = realistic.load_presets()["default"]
    preset = one_line_error(lambda: dataclasses.replace(default, **{field: value}))
    if preset is not None:
        r = realistic.estimate("llama-3-8b", "h100", 4, 512, 64, preset=preset)
        assert math.isfinite(r.estimate.ttft_s) and r.estimate.ttft_s > 0
        assert math.isfinite(r.estimate.tpot_s) and r.estimate.tpot_s > 0


@FAST
@given(mbu=anything, mfu=anything)
def test_the_calculator_reads_decimal_and_fraction_efficiencies(mbu, mfu):
    est = one_line_error(lambda: lr.estimate("llama-3-8b", "h100", 2, 128, 16, mbu=mbu, mfu=mfu))
    if est is not None:
        assert math.isfinite(est.tpot_s) and est.tpot_s > 0
