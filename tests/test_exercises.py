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
    assert "too low by a factor of about 2" in low and "590" not in low
    units = str(check("roofline-2", 130_496))  # GFLOPS where TFLOPS are asked
    assert "too high by a factor of about 1,000" in units
    assert "not positive" in str(check("roofline-2", 0))


@pytest.mark.parametrize(
    "ratio, band",
    [(1.032, "a little too high (within 10 %)"), (0.95, "a little too low (within 10 %)"),
     (1.3, "too high by 10 to 50 %"), (0.7, "too low by 10 to 50 %"),
     (2.4, "too high by a factor of about 2"), (0.5, "too low by a factor of about 2"),
     (6.0, "too high by a factor of 3 to 10"), (0.2, "too low by a factor of 3 to 10"),
     (25.0, "an order of magnitude too high"), (0.05, "an order of magnitude too low"),
     (40.0, "too high by a factor of about 100"), (1e-6, "too low by a factor of about 1,000,000")],
)
def test_feedback_comes_in_coarse_bands(monkeypatch, ratio, band):
    monkeypatch.setattr(exercises, "_REGISTRY", dict(exercises._REGISTRY))
    register("test-band", lambda: 1000.0, unit="s", hint="h")
    verdict = str(check("test-band", 1000.0 * ratio))
    assert f"is {band} (tolerance 1 %)" in verdict
    # two answers in the same band read the same: the message cannot be inverted
    assert verdict.split(" is ")[1] == str(check("test-band", 1000.0 * ratio * 1.001)).split(
        " is ")[1]


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
