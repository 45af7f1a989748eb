"""The TTFT/TPOT chapter's answer checks, against hand computations."""

import pytest

import llm_roofline.course.ch06  # noqa: F401  (registers ttft-1 ... ttft-5)
from llm_roofline.course.exercises import check, list_exercises


def test_registered():
    assert {f"ttft-{i}" for i in range(1, 6)} <= set(list_exercises())


@pytest.mark.parametrize("id, right, wrong", [
    ("ttft-1", 2 * 8.030261248e9 * 4096 / 989.4e12 * 1e3, 66.5 / 4),  # 8.03B parameters
    ("ttft-2", 16.02, 16.02 / 48),  # the step, not the step over the batch
    ("ttft-4", 1 + 0.6 + 0.36 + 0.216 + 0.1296, 5),
    ("ttft-5", 80 * 64 * 32768 * 32769 / 2 / 3.9e12 * 1e3, 80 * 64 * 32768**2 / 3.9e12 * 1e3),
])
def test_right_and_wrong(id, right, wrong):
    assert check(id, right)
    assert not check(id, wrong)


def test_sla_answer_is_exact():
    verdict = check("ttft-3", 110)
    assert verdict and not check("ttft-3", 109) and not check("ttft-3", 111)
