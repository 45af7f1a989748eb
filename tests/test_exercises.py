"""Answer checks: right within tolerance, wrong with direction and hint, never the answer."""

import math

import pytest

from llm_roofline.course import registry
from llm_roofline.course.exercises import check, list_exercises
from llm_roofline.course.registry import register


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
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
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
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    register("test-1", lambda: 2.0, unit="s", hint="h", rtol=0.1)
    assert check("test-1", 2.15) and not check("test-1", 2.3)
    with pytest.raises(ValueError, match="already registered"):
        register("test-1", lambda: 2.0, unit="s", hint="h")
    with pytest.raises(ValueError, match="rtol"):
        register("test-2", lambda: 2.0, unit="s", hint="h", rtol=1.5)


@pytest.mark.parametrize("id", list_exercises())
@pytest.mark.parametrize("answer", [1e-320, 5e-324, 10**400, -1e-320])
def test_absurd_sizes_give_a_clear_error_for_every_exercise(id, answer):
    # a subnormal, the smallest float, an integer beyond float's range: never an
    # OverflowError or ZeroDivisionError from inside the check
    with pytest.raises(ValueError, match="answer must be a (finite )?number in"):
        check(id, answer)


def test_sizes_far_off_but_in_range_still_get_a_band():
    assert "too high by a factor of about 10,000,000,000,000" in str(check("roofline-1", 590.7e13))
    assert "too low by a factor of about" in str(check("roofline-1", 1e-99))
    with pytest.raises(ValueError, match="answer must be a number"):
        check("roofline-1", True)


def test_sound_hand_estimate_of_tpot_is_accepted():
    # calculator-4 by hand: Llama-3-70B's 70.55e9 parameters at 1 byte (FP8), split over 2
    # GPUs, plus 64 caches at the average context 1024 + 256/2 tokens of
    # 2 (K, V) x 80 layers x 8 heads x 128 x 1 byte = 163,840 bytes per token, also split:
    hand = (70.55e9 / 2 + 64 * (1024 + 128) * 163_840 / 2) / 3.35e12 * 1e3
    assert abs(hand - 12.33) < 0.01
    assert check("calculator-4", hand)
    assert not check("calculator-4", 10.53)  # the weights alone: the caches are a sixth


@pytest.mark.parametrize(
    "id, wrong, says",
    [
        ("roofline-1", 295.3, "BF16 ridge"),           # 989.4e12 / 3.35e12
        ("roofline-1", 1181.4, "sparsity"),            # 2 x 1978.9e12 / 3.35e12
        ("roofline-3", 206, "round up"),               # floor of 989.4e12 / 4.8e12 = 206.1
        ("roofline-4", 4.0, "scale"),                  # 2 bytes / 0.5 bytes, without scales
        ("calculator-1", 343.6, "query heads"),        # 8 x 42.95 GB
        ("calculator-4", 12.7 / 64, "divided the step time by the batch"),
        ("calculator-5", 71.1 / 8, "per GPU"),         # 128 x 320 / 576 / 8
    ],
)
def test_a_typical_mistake_gets_its_own_explanation(id, wrong, says):
    verdict = check(id, wrong)
    assert not verdict and says in str(verdict)


def test_register_rejects_bad_mistakes(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    with pytest.raises(ValueError, match="each mistake must be"):
        register("test-m", lambda: 2.0, unit="s", hint="h", mistakes=[(4.0, "not callable")])


def test_roofline_5_serial_kernel_by_hand():
    # W8A8 decode on an H100 SXM: 1,978.9 dense FP8 TFLOPS over 3.35 TB/s is a ridge of 590.72
    # FLOPs/byte. A serial kernel at I = k * ridge gets k / (1 + k) of the peak: 3/4 at k = 3,
    # I = 1,772.1; with 1-byte weights I = 2B, so B = 886.07, and a whole batch is 887.
    intensity = 3 * 1978.9e12 / 3.35e12
    assert abs(intensity - 1772.15) < 0.01
    assert math.ceil(intensity / 2) == 887
    assert check("roofline-5", 887)
    nine = check("roofline-5", 9 * 1978.9e12 / 3.35e12 / 2)  # the 90 % intensity of the text
    assert not nine and "90 %" in str(nine) and "887" not in str(nine)
    assert not check("roofline-5", intensity)  # the intensity, not the batch


def test_chapter_9_checks_by_hand():
    # scale-1: one BF16 message of 1,024 tokens x 8192 numbers x 2 bytes = 16,777,216 bytes;
    # a ring of 8 sends 2 x 7/8 of it from each GPU: 29.36 MB. In-switch reduction: 16.78 MB.
    ring = 2 * 7 / 8 * 1024 * 8192 * 2 / 1e6
    assert abs(ring - 29.36) < 0.01
    assert check("scale-1", 29.4)
    switch = check("scale-1", 16.78)
    assert not switch and "switch" in str(switch)
    # scale-2: per cached token a head does 2 x 576 + 2 x 512 = 2,176 FLOPs; 16 heads of 128
    # on each of 8 GPUs, against FlashMLA's 656-byte FP8 latent: 34,816 / 656 = 53.07.
    assert check("scale-2", 16 * 2176 / 656)
    assert not check("scale-2", 128 * 2176 / 656)  # one GPU running every head
    assert not check("scale-2", 16 * 2176 / 576)  # the latent at one byte a number
    # scale-4: per GPU, not the node's eight
    assert not check("scale-4", 8 * 4421.6)
