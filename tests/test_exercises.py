"""Answer checks: right within tolerance, wrong with direction and hint, never the answer."""

import pytest

from llm_roofline import exercises
from llm_roofline.exercises import check, list_exercises, register


def test_roofline_exercises_are_registered():
    assert {"roofline-1", "roofline-2", "roofline-3", "roofline-4"} <= set(list_exercises())


@pytest.mark.parametrize(
    "id, right, wrong",
    [("roofline-1", 590.7, 295.3), ("roofline-2", 130.5, 312.0), ("roofline-3", 207, 206),
     ("roofline-4", 3.879, 2.0)],
)
def test_right_and_wrong_answers(id, right, wrong):
    assert check(id, right)
    verdict = check(id, wrong)
    assert not verdict and "Hint:" in str(verdict)
    assert f"{right}" not in str(verdict)


def test_verdict_says_how_far_off_without_the_answer():
    low = str(check("roofline-1", 295.3))
    assert "too low by a factor of about 2.0" in low and "590" not in low
    units = str(check("roofline-2", 130_496))
    assert "too high by a factor of about 1,000" in units
    assert "too high by" in str(check("roofline-4", 4.0))
    assert "not positive" in str(check("roofline-2", 0))


def test_bad_input():
    with pytest.raises(ValueError, match="unknown exercise 'roofline-99'; known: .*roofline-1"):
        check("roofline-99", 1.0)
    with pytest.raises(ValueError, match="answer must be a number in FLOPs/byte"):
        check("roofline-1", "lots")
    with pytest.raises(ValueError, match="finite"):
        check("roofline-1", float("nan"))


def test_register_rejects_duplicates_and_bad_tolerance(monkeypatch):
    monkeypatch.setattr(exercises, "_REGISTRY", dict(exercises._REGISTRY))
    register("test-1", lambda: 2.0, unit="s", hint="h", rtol=0.1)
    assert check("test-1", 2.15) and not check("test-1", 2.3)
    with pytest.raises(ValueError, match="already registered"):
        register("test-1", lambda: 2.0, unit="s", hint="h")
    with pytest.raises(ValueError, match="rtol"):
        register("test-2", lambda: 2.0, unit="s", hint="h", rtol=1.5)
