"""Bad input, third round (issue 33): the course tools and the edges.

One test per class of the issue, each with its reproducing call: files overwritten (every
writer hashed before and after), silently wrong, tracebacks, hangs, unclear messages, valid input
refused and invalid input accepted. Every refusal is one line naming the argument or option, the
value and what is allowed; every writer goes through ``validate``'s one gate.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

import llm_roofline as lr
import llm_roofline.course.exercises  # noqa: F401  (every chapter registers its checks)
from llm_roofline import hardware, machine, realistic, serving, validate
from llm_roofline.course import assignments, registry, slides, student
from llm_roofline.models import load_config
from test_bad_input import one_line

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
PYTHON = sys.executable
H100 = hardware.get_accelerator("h100")
CHAPTER = "03_roofline"
DECKS = ROOT / "slides"


def tiny_deck(chapter: str = CHAPTER) -> str:
    """A deck source of 12 slides without figures, for ``chapter``."""
    return (f"---\nchapter: {chapter}\ntitle: A deck\n---\n\n# A deck\n- one objective\n"
            + "".join(f"\n---\n\n## Slide {i}\n- a point\n" for i in range(2, 13)))


def deck_folder(folder: Path, chapter: str = CHAPTER) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{chapter[:2]}.md").write_text(tiny_deck(chapter))
    return folder




def hashes(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (links not followed) and its SHA-256."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif path.is_symlink() or not path.is_dir():
            out[str(path.relative_to(folder))] = "special"
    return out


def cli(*argv, stdin=None, timeout=120, **kwargs):
    """Run ``python <argv>`` in a subprocess; (exit code, stdout, stderr)."""
    run = subprocess.run([PYTHON, *argv], capture_output=True, text=True, timeout=timeout,
                         cwd=kwargs.pop("cwd", ROOT), **kwargs)
    return run.returncode, run.stdout, run.stderr


def assert_one_error_line(code, err, *match, exit_code=2):
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == exit_code and len(lines) == 1, (code, err)
    for m in match:
        assert m in lines[0], (m, lines[0])


@pytest.fixture
def chapters(tmp_path):
    """A folder holding one chapter notebook (a copy) and an instructor's own files."""
    folder = tmp_path / "nbs"
    folder.mkdir()
    shutil.copy(NOTEBOOKS / f"{CHAPTER}.ipynb", folder)
    (folder / "nbgrader_config.py").write_text("c = get_config()  # the instructor's own\n")
    (folder / f"{CHAPTER}.slides.html").write_text("<html>my own deck</html>\n")
    return folder


# ---- files overwritten: every writer, hashed before and after ---------------------------------

def test_the_nbgrader_course_never_overwrites_its_source_or_a_foreign_file(chapters, tmp_path):
    before = hashes(tmp_path)
    one_line(lambda: assignments.write_course(chapters, chapters, release=False),
             "course folder", "overlaps the source")
    # the source chapter inside the course folder it would rewrite
    course = tmp_path / "course"
    (course / "source" / CHAPTER).mkdir(parents=True)
    shutil.copy(NOTEBOOKS / f"{CHAPTER}.ipynb", course / "source" / CHAPTER)
    before = hashes(tmp_path)
    one_line(lambda: assignments.write_course(course / "source" / CHAPTER, course, [CHAPTER],
                                              release=False), "overlaps")
    assert hashes(tmp_path) == before
    code, _, err = cli("-m", "llm_roofline.course.assignments", str(chapters), str(chapters))
    assert_one_error_line(code, err, "overlaps")
    assert hashes(tmp_path) == before

    # a foreign nbgrader_config.py in a fresh course folder: refused, then --force
    other = tmp_path / "other"
    other.mkdir()
    (other / "nbgrader_config.py").write_text("# mine\n")
    before = hashes(other)
    one_line(lambda: assignments.write_course(chapters, other, [CHAPTER], release=False),
             "nbgrader_config.py", "not written by this tool", "--force")
    assert hashes(other) == before
    assignments.write_course(chapters, other, [CHAPTER], release=False, force=True)
    assert assignments.MARK in (other / "nbgrader_config.py").read_text()
    # its own files are replaced on a re-run, atomically (no temporary file left)
    assignments.write_course(chapters, other, [CHAPTER], release=False)
    assert not [p for p in other.rglob(".*.tmp")]


def test_the_course_config_has_no_absolute_root():
    text = assignments._CONFIG.format(mark=assignments.MARK)
    assert "CourseDirectory.root" not in text.replace("No CourseDirectory.root", "")


def test_the_student_edition_replaces_only_its_own_notebooks(chapters, tmp_path):
    dest = tmp_path / "student"
    written = student.write_student_edition(chapters, dest)
    assert json.loads(written[0].read_text())["metadata"]["written_by"] == student.MARK
    student.write_student_edition(chapters, dest)  # its own: replaced
    (dest / f"{CHAPTER}.ipynb").write_text("my notes")
    before = hashes(tmp_path)
    one_line(lambda: student.write_student_edition(chapters, dest), "--force")
    one_line(lambda: student.write_student_edition(chapters, chapters), "overlaps")
    assert hashes(tmp_path) == before
    student.write_student_edition(chapters, dest, force=True)
    assert not [p for p in dest.iterdir() if p.name.startswith(".")]


def test_the_slides_never_replace_a_foreign_file_nor_write_into_their_source(chapters, tmp_path):
    decks = deck_folder(tmp_path / "decks")
    before = hashes(tmp_path)
    one_line(lambda: slides.build(decks, chapters, chapters), "out", "overlaps")
    one_line(lambda: slides.build(decks, chapters, decks), "out", "overlaps")
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{CHAPTER}.slides.html").write_text("<html>mine</html>")
    before = hashes(tmp_path)
    one_line(lambda: slides.build(decks, chapters, out, execute=False), "deck", "--force")
    code, _, err = cli("-m", "llm_roofline.course.slides", str(decks), str(chapters), str(chapters))
    assert_one_error_line(code, err, "overlaps")
    assert hashes(tmp_path) == before  # and nothing installed (npm never ran)
    assert slides.MARK in slides.deck_html(slides.parse_deck(tiny_deck()))


def test_a_fitted_preset_never_replaces_an_unrelated_file(tmp_path):
    keep = tmp_path / "keep.json"
    keep.write_text('{"mine": 1}\n')
    before = hashes(tmp_path)
    start = time.perf_counter()
    code, _, err = cli("-m", "llm_roofline.realistic", "--fit", "--out", str(keep))
    assert_one_error_line(code, err, "--out", "--force")
    assert "RuntimeWarning" not in err and hashes(tmp_path) == before
    assert time.perf_counter() - start < 60, "refused before the fit, not after"
    one_line(lambda: realistic.write(tmp_path), "path", "folder")
    assert realistic.MARK == "llm_roofline.realistic --fit"


def test_a_saved_accelerator_never_replaces_a_foreign_file(tmp_path):
    notes = tmp_path / "notes.json"
    notes.write_text(json.dumps({"about": "x", "accelerators": []}))
    before = hashes(tmp_path)
    one_line(lambda: machine.save_accelerator(H100, notes), "path", "force=True")
    assert hashes(tmp_path) == before
    saved = machine.save_accelerator(H100, tmp_path / "chip.json")
    machine.save_accelerator(H100, saved)  # its own file: a notebook re-run saves again
    assert hardware.load_accelerators(saved) == [H100]


@pytest.mark.parametrize("call", [
    lambda p: student.write_student_edition(NOTEBOOKS, p / ("x" * 300)),
    lambda p: machine.save_accelerator(H100, p / ("x" * 300 + ".json")),
    lambda p: assignments.write_course(NOTEBOOKS, p / ("x" * 300), release=False),
    lambda p: slides.build(DECKS, NOTEBOOKS, p / ("x" * 300)),
    lambda p: realistic.write(p / ("x" * 300)),
], ids=["student", "save_accelerator", "course", "slides", "realistic"])
def test_every_writer_refuses_a_name_too_long_in_one_line(tmp_path, call):
    before = hashes(tmp_path)
    one_line(lambda: call(tmp_path), "bytes long", "at most 255")
    assert hashes(tmp_path) == before


# ---- silently wrong --------------------------------------------------------------------------

def test_a_hugging_face_cache_snapshot_is_named_for_its_repository(tmp_path):
    repo = tmp_path / "hub" / "models--meta-llama--Meta-Llama-3-8B"
    (repo / "blobs").mkdir(parents=True)
    (repo / "snapshots" / "0123abc").mkdir(parents=True)
    config = json.loads((Path(lr.__file__).parent / "data" / "models" / "llama-3-8b.json").read_text())
    config.pop("_name_or_path", None)
    (repo / "blobs" / "9f2e").write_text(json.dumps(config))
    (repo / "snapshots" / "0123abc" / "config.json").symlink_to("../../blobs/9f2e")
    for path in (repo / "snapshots" / "0123abc" / "config.json", repo / "snapshots" / "0123abc"):
        assert load_config(path).name == "meta-llama/Meta-Llama-3-8B"


@pytest.mark.parametrize("field,value", [("overlap", 1e308), ("overlap", float("nan")),
                                         ("mbu_attention", 7.0), ("mfu_decode", float("inf")),
                                         ("layer_overhead_us", -1.0), ("request_overhead_ms", 1e300)])
def test_a_preset_is_checked_as_user_input(field, value):
    default = realistic.load_presets()["default"]
    one_line(lambda: dataclasses.replace(default, **{field: value}), field, "default")


# ---- tracebacks ------------------------------------------------------------------------------

def test_the_command_line_with_a_closed_or_full_output_says_so_in_one_line():
    code, _, err = cli("-c", "import os, sys; os.close(1); sys.stdout = None; "
                       "from llm_roofline.cli import main; sys.exit(main(['models']))")
    assert_one_error_line(code, err, "standard output is closed", exit_code=1)
    for command in ("models", "gpus"):
        run = subprocess.run(f"{PYTHON} -m llm_roofline {command} >&-", shell=True,
                             capture_output=True, text=True, timeout=120)
        assert_one_error_line(run.returncode, run.stderr, "closed", exit_code=1)
    if Path("/dev/full").exists():
        with open("/dev/full", "w") as full:
            run = subprocess.run([PYTHON, "-m", "llm_roofline", "gpus"], stdout=full,
                                 stderr=subprocess.PIPE, text=True, timeout=120)
        assert_one_error_line(run.returncode, run.stderr, "No space left", exit_code=1)


def test_the_course_commands_name_a_missing_folder_a_broken_notebook_and_a_file(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "01_x.ipynb").write_text("{not json")
    decks = deck_folder(tmp_path / "decks", "01_x")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for module in ("assignments", "slides"):
        name = f"llm_roofline.course.{module}"
        first = [str(decks)] if module == "slides" else []
        code, _, err = cli("-m", name, *first, str(tmp_path / "missing"), str(tmp_path / "course"))
        assert_one_error_line(code, err, "missing", "does not exist")
        code, _, err = cli("-m", name, *first, str(broken), str(tmp_path / "course"))
        assert_one_error_line(code, err, "01_x.ipynb", "not valid JSON")
        code, _, err = cli("-m", name, *first, str(NOTEBOOKS), str(a_file))
        assert_one_error_line(code, err, "file", "not a folder")
    assert not (tmp_path / "course").exists()


@pytest.mark.parametrize("call,match", [
    (lambda: slides.png_record(None), "data"),
    (lambda: slides.png_record(3.5), "data"),
    (lambda: slides.parse_deck(None), "text"),
    (lambda: slides.parse_deck("# A deck"), "front matter"),
    (lambda: slides.chapter_figures({"cells": [1]}), "cell 0"),
    (lambda: slides.chapter_figures({"cells": [{"cell_type": "code", "source": 3}]}), "cell 0"),
    (lambda: slides.build(DECKS, NOTEBOOKS, "/tmp/x", jobs=0), "jobs"),
    (lambda: slides.build(DECKS, NOTEBOOKS, "/tmp/x", only=["99_nothing"]), "99_nothing"),
    (lambda: slides.build(DECKS, NOTEBOOKS, "/tmp/x", only="03_roofline"), "only"),
    (lambda: slides.build(DECKS, NOTEBOOKS, "/tmp/x", execute="no"), "execute"),
    (lambda: realistic.fit(None), "rows"),
    (lambda: realistic.fit([None]), "rows"),
    (lambda: realistic.predict_row(None), "row"),
    (lambda: assignments.write_course(NOTEBOOKS, "/tmp/x", ["../etc"], release=False), "chapters"),
    (lambda: assignments.write_course(NOTEBOOKS, "/tmp/x", "03_roofline", release=False),
     "chapters"),
    (lambda: assignments.write_course(NOTEBOOKS, "/tmp/x", ["99_none"], release=False), "99_none"),
], ids=lambda x: "" if callable(x) else x)
def test_the_course_tools_answer_bad_arguments_in_one_line(call, match):
    one_line(call, match)


def test_a_png_record_of_a_truncated_or_foreign_png_is_none():
    assert slides.png_record(b"\x89PNG\r\n\x1a\n12") is None
    assert slides.png_record("!!not base64!!") is None
    assert slides.png_record(b"") is None


# ---- hangs -----------------------------------------------------------------------------------

def test_the_largest_sweep_allowed_finishes_in_a_few_seconds():
    from llm_roofline import cli as command

    axis = ",".join(str(i) for i in range(1, 11))
    assert command.MAX_POINTS == 100
    before = os.times()
    code, out, err = cli("-m", "llm_roofline", "estimate", "--model", "llama-3-8b", "--gpu",
                         "h100", "--batch", axis, "--prompt", axis, "--output", "1", timeout=300)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system
                                                           - before.children_system)
    rows = [line for line in out.splitlines() if re.match(r"\s+\d", line)]  # one row a point
    assert code == 0 and len(rows) == 100, err
    assert cpu < 8, f"the 100-point sweep took {cpu:.1f} s of CPU"
    code, _, err = cli("-m", "llm_roofline", "estimate", "--model", "llama-3-8b", "--gpu",
                       "h100", "--batch", axis, "--prompt", axis, "--output", "1,2")
    assert_one_error_line(code, err, "200 points", "at most 100")


def test_a_fifo_named_like_a_notebook_never_blocks_a_writer(tmp_path):
    folder = tmp_path / "nbs"
    folder.mkdir()
    shutil.copy(NOTEBOOKS / f"{CHAPTER}.ipynb", folder)
    os.mkfifo(folder / "04_pipe.ipynb")
    script = ("import sys; from llm_roofline.course import assignments, student\n"
              "try:\n"
              f"    assignments.write_course({str(folder)!r}, {str(tmp_path / 'c')!r}, "
              "['04_pipe'], release=False)\n"
              "except ValueError as e: print(e)\n"
              f"print(len(student.write_student_edition({str(folder)!r}, "
              f"{str(tmp_path / 's')!r})))\n")
    code, out, err = cli("-c", script, timeout=120)
    assert code == 0, err
    assert "is a FIFO" in out.splitlines()[0] and out.splitlines()[1] == "1"


# ---- unclear ---------------------------------------------------------------------------------

@pytest.mark.parametrize("call,match", [
    (lambda: lr.estimate("llama-3-8b", "h100", 1, 8, 8, compute_dtype="int4"), "compute_dtype 'int4'"),
    (lambda: lr.estimate("llama-3-8b", "h100", 1, 8, 8, attention_dtype="int4"),
     "attention_dtype 'int4'"),
    (lambda: serving.disaggregated("llama-3-8b", "h100", 1, 8, 8, prefill_gpus=8, decode_gpus=1),
     "prefill_gpus + decode_gpus (9 GPUs)"),
    (lambda: serving.disaggregated("llama-3-8b", "h100", 1, 8, 8, prefill_gpus=3, decode_gpus=1),
     "prefill_gpus (3 GPUs)"),
    (lambda: serving.speculative("llama-3-8b", "h100", 1, 64, 4, 0.6, draft="llama-9"), "draft"),
    (lambda: serving.speculative("llama-3-8b", "h100", 1, 64, 4, 0.6, draft=3), "draft"),
    (lambda: realistic.estimate("llama-3-8b", "h100", 1, 8, 8, preset=dataclasses.replace(
        realistic.load_presets()["default"], mbu_attention=0)), "mbu_attention"),
    (lambda: hardware.load_accelerators("a\x00b"), "'a\\x00b'"),
    (lambda: load_config("a\x00b"), "'a\\x00b'"),
    (lambda: student.write_student_edition(NOTEBOOKS, "a\x00b"), "destination 'a\\x00b'"),
], ids=lambda x: "" if callable(x) else x)
def test_messages_name_the_argument_the_user_passed(call, match):
    one_line(call, match)


def test_load_config_says_what_config_json_is(tmp_path):
    fifo, dangling, device = tmp_path / "fifo", tmp_path / "dangling", tmp_path / "device"
    for folder in (fifo, dangling, device):
        folder.mkdir()
    os.mkfifo(fifo / "config.json")
    (dangling / "config.json").symlink_to(tmp_path / "nowhere.json")
    (device / "config.json").symlink_to("/dev/zero")
    one_line(lambda: load_config(fifo), "FIFO")
    one_line(lambda: load_config(dangling), "dangling link")
    one_line(lambda: load_config(device), "device")
    one_line(lambda: load_config(dangling / "config.json"), "dangling link")


def test_python_m_realistic_prints_no_runpy_warning():
    code, out, err = cli("-W", "error::RuntimeWarning", "-m", "llm_roofline.realistic")
    assert_one_error_line(code, err, "--fit")
    assert "RuntimeWarning" not in err and "found in sys.modules" not in err


# ---- valid input refused ---------------------------------------------------------------------

@pytest.mark.parametrize("id", [i for i in registry.list_exercises()
                                if not i.startswith("machine-")])
def test_a_decimal_or_fraction_answer_is_read_like_a_float(id):
    expected = float(registry._REGISTRY[id].expected())
    assert registry.check(id, Decimal(repr(expected))).correct
    assert registry.check(id, Fraction(expected)).correct
    one_line(lambda: registry.check(id, Decimal("NaN")), "answer")
    one_line(lambda: registry.check(id, Decimal("sNaN")), "answer")
    one_line(lambda: registry.check(id, Decimal("Infinity")), "answer")


def test_decimal_and_fraction_fields_are_read_like_floats():
    assert validate.real("x", Decimal("0.5")) == 0.5
    assert validate.fraction("mbu", Fraction(1, 2)) == 0.5
    assert list(validate.reals("x", [Decimal("1.5"), Fraction(1, 4)])) == [1.5, 0.25]
    default = realistic.load_presets()["default"]
    assert dataclasses.replace(default, overlap=Decimal("0.25")).overlap == 0.25
    est = lr.estimate("llama-3-8b", "h100", 1, 128, 8, mbu=Decimal("0.5"), mfu=Fraction(1, 2))
    assert est.tpot_s == lr.estimate("llama-3-8b", "h100", 1, 128, 8, mbu=0.5, mfu=0.5).tpot_s


# ---- invalid input accepted ------------------------------------------------------------------

def test_an_empty_destination_is_not_the_current_folder(tmp_path):
    code, _, err = cli("-m", "llm_roofline.course.student", str(NOTEBOOKS), "", cwd=tmp_path)
    assert_one_error_line(code, err, "destination", "''")
    assert list(tmp_path.iterdir()) == []


def test_the_slides_refuse_a_missing_folder_and_zero_jobs_before_npm(tmp_path):
    one_line(lambda: slides.build(DECKS, tmp_path / "missing", tmp_path / "out"), "does not exist")
    one_line(lambda: slides.build(tmp_path / "missing", NOTEBOOKS, tmp_path / "out"), "decks",
             "does not exist")
    one_line(lambda: slides.build(DECKS, NOTEBOOKS, tmp_path / "out", jobs=0), "jobs")
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line(lambda: slides.build(empty, NOTEBOOKS, tmp_path / "out"), "no deck sources")
    code, _, err = cli("-m", "llm_roofline.course.slides", str(DECKS), str(NOTEBOOKS),
                       str(tmp_path / "out"), "--jobs", "0")
    assert_one_error_line(code, err, "--jobs")
    assert not (tmp_path / "out").exists()
