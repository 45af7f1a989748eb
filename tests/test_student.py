"""The student edition keeps every exercise and drops every solution."""

import json

import pytest

from conftest import notebooks
from llm_roofline.course.student import main, strip_solutions, write_student_edition


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


# --- nothing is lost: the writer's file safety (issue 14, "Files") ------------------------------

def _write_nb(path, *cells):
    path.write_text(json.dumps(_nb(*cells)))
    return path


def _book(folder):
    folder.mkdir(parents=True, exist_ok=True)
    _write_nb(folder / "01_a.ipynb", _cell("markdown", "# A"),
              _cell("code", "answer = 42", tags=["solution"], outputs=[], execution_count=None))
    _write_nb(folder / "02_b.ipynb", _cell("markdown", "# B"))
    return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.mark.parametrize("dest", [".", "sub", ".."], ids=["same", "inside", "parent"])
def test_refuses_to_write_over_its_sources(tmp_path, dest):
    src = tmp_path / "nb"
    before = _book(src)
    with pytest.raises(ValueError, match="overlaps"):
        write_student_edition(src, src / dest)
    assert {p.name: p.read_bytes() for p in src.iterdir()} == before, "the sources changed"


def test_cli_refuses_src_src_with_exit_2(tmp_path, capsys):
    src = tmp_path / "nb"
    before = _book(src)
    with pytest.raises(SystemExit) as exit_info:
        main([str(src), str(src)])
    assert exit_info.value.code == 2
    assert "overlaps" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in src.iterdir()} == before
    assert json.loads((src / "01_a.ipynb").read_text())["cells"][1]["source"] == "answer = 42"


def test_same_named_file_is_kept_without_force(tmp_path):
    src, dest = tmp_path / "nb", tmp_path / "student"
    _book(src)
    dest.mkdir()
    (dest / "02_b.ipynb").write_text("my own notes")
    with pytest.raises(ValueError, match=r"02_b\.ipynb.*--force"):
        write_student_edition(src, dest)
    assert (dest / "02_b.ipynb").read_text() == "my own notes"
    assert not (dest / "01_a.ipynb").exists(), "nothing is written when one file is refused"
    written = write_student_edition(src, dest, force=True)
    assert [p.name for p in written] == ["01_a.ipynb", "02_b.ipynb"]
    assert json.loads((dest / "02_b.ipynb").read_text())["cells"][0]["source"] == "# B"


@pytest.mark.parametrize("bad", ["{not json", '{"metadata": {}}', '{"cells": [3]}', "\udcff"],
                         ids=["json", "no-cells", "bad-cell", "not-utf8"])
def test_invalid_notebook_is_named_and_nothing_is_half_written(tmp_path, bad):
    src, dest = tmp_path / "nb", tmp_path / "student"
    _book(src)
    if bad == "\udcff":
        (src / "03_bad.ipynb").write_bytes(b"\xff\xfe{")
    else:
        (src / "03_bad.ipynb").write_text(bad)
    with pytest.raises(ValueError, match=r"03_bad\.ipynb is not a valid notebook"):
        write_student_edition(src, dest)
    assert not dest.exists() or not any(dest.iterdir()), "a partial edition was left behind"


def test_cli_names_the_invalid_notebook(tmp_path, capsys):
    src, dest = tmp_path / "nb", tmp_path / "student"
    _book(src)
    (src / "03_bad.ipynb").write_text("{not json")
    with pytest.raises(SystemExit) as exit_info:
        main([str(src), str(dest)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "03_bad.ipynb is not a valid notebook" in err and "Traceback" not in err
    assert not dest.exists() or not any(dest.iterdir())


def test_missing_source_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        write_student_edition(tmp_path / "nowhere", tmp_path / "out")
