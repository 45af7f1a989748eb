"""The best batch under a TPOT and TTFT limit, against hand computations."""

import math

import pytest

import llm_roofline as lr
from llm_roofline.sla import best_batch, ttft_joining

H100 = lr.get_accelerator("h100")
PEAK, BW = H100.peak("bf16"), H100.bandwidth
L8 = lr.get_model("llama-3-8b")  # d 4096, 32 layers, 32 heads of 128, 8 KV heads, MLP 14336
BODY = L8.n_params - L8.param_counts()["embedding"]  # weights a pass reads in full
LOOSE = 1e6  # a limit (seconds) nothing reaches


def hand_tpot(batch: int, context: int) -> float:
    """One decode step of Llama-3-8B below the critical batch (every kernel with bytes is
    memory-bound): the weights once, each sequence's embedding row, its cache (context - 1
    cached keys and values plus the new ones) read and the new ones written; the element-wise
    work (RoPE, residual adds, SwiGLU) fused into its neighbours, costing no time of its own."""
    d, kvd, n = 4096, 1024, 32
    moved = 2 * BODY + batch * (d * 2 + n * 2 * context * kvd * 2 + n * 2 * kvd * 2)
    return moved / BW


def test_hand_tpot_is_the_calculators():
    """The hand formula is exact (so the next test's batch can be solved by hand)."""
    for b in (1, 37, 100):
        assert lr.estimate(L8, H100, b, 1024, 2).tpot_s == pytest.approx(hand_tpot(b, 1025), rel=1e-9)


def test_tpot_limit_by_hand():
    """TPOT(B) = a + c B below the critical batch: the largest B with a + c B <= 8 ms."""
    a = hand_tpot(0, 1025)
    c = hand_tpot(1, 1025) - a
    expected = math.floor((0.008 - a) / c)
    assert 50 < expected < 100  # memory-bound, and far from an integer edge:
    assert 0.05 < (0.008 - a) / c - expected < 0.95
    choice = best_batch(L8, H100, 1024, 2, tpot_max_s=0.008, ttft_max_s=LOOSE)
    assert choice.batch == expected == choice.tpot_batch
    assert choice.limited_by == "tpot"
    assert choice.tpot_s == pytest.approx(hand_tpot(expected, 1025), rel=1e-9)
    assert choice.throughput_tok_s == pytest.approx(expected / choice.tpot_s)
    assert choice.memory_batch > expected


def test_ttft_limit_of_a_burst():
    """A burst's TTFT is the prefill of all B prompts: about B x (2 x body FLOPs x prompt +
    causal attention FLOPs) / peak; the chosen batch is the last one within the limit."""
    p, n, heads, dh = 1024, 32, 32, 128
    lm_head = L8.vocab_size * 4096
    flops_per_prompt = 2 * (BODY - lm_head) * p + 2 * lm_head + 4 * n * heads * dh * p * (p + 1) / 2
    by_hand = 1.0 * PEAK / flops_per_prompt
    choice = best_batch(L8, H100, p, 64, tpot_max_s=LOOSE, ttft_max_s=1.0)
    assert choice.limited_by == "ttft" and choice.batch == choice.ttft_batch
    assert choice.batch == pytest.approx(by_hand, rel=0.05)
    assert lr.estimate(L8, H100, choice.batch, p, 64).ttft_s <= 1.0
    assert lr.estimate(L8, H100, choice.batch + 1, p, 64).ttft_s > 1.0


def test_memory_limit():
    choice = best_batch(L8, H100, 4096, 1024, tpot_max_s=LOOSE, ttft_max_s=LOOSE,
                        arrival="joining")
    assert choice.limited_by == "memory"
    assert choice.batch == choice.memory_batch == lr.max_batch(L8, H100, 4096, 1024)
    assert choice.ttft_s == pytest.approx(ttft_joining(L8, H100, choice.batch, 4096, 1024))


def test_the_roof_begins_at_the_ridge():
    """Once every weight matmul is compute-bound, each kernel's time grows as B (all but the
    norms' weights, a few hundred kB), so B / TPOT stops growing by more than ````sla.ROOF_TOLERANCE``:
    the first batch of the roof is the first B >= peak / bandwidth."""
    choice = best_batch(L8, H100, 128, 128, tpot_max_s=LOOSE, ttft_max_s=LOOSE,
                        arrival="joining")
    assert choice.limited_by == "roof"
    assert choice.batch == math.ceil(989.4e12 / 3.35e12) == 296
    assert choice.memory_batch > 296


def test_nothing_meets_the_limit():
    choice = best_batch(L8, H100, 1024, 64, tpot_max_s=1e-3, ttft_max_s=LOOSE)
    assert (choice.batch, choice.limited_by, choice.throughput_tok_s) == (0, "none", 0.0)
    assert choice.tpot_s == pytest.approx(hand_tpot(1, 1024 + 32), rel=1e-2)


def test_joining_ttft_of_a_lone_request_is_its_prefill():
    assert ttft_joining(L8, H100, 1, 2048, 128) == pytest.approx(
        lr.estimate(L8, H100, 1, 2048, 128).ttft_s, rel=1e-12)
    assert ttft_joining(L8, H100, 1, 2048, 128, queue_s=0.5) == pytest.approx(
        lr.estimate(L8, H100, 1, 2048, 128, queue_s=0.5).ttft_s, rel=1e-12)
    assert ttft_joining(L8, H100, 64, 2048, 128) > ttft_joining(L8, H100, 1, 2048, 128)


@pytest.mark.parametrize("kwargs, field", [
    (dict(tpot_max_s=0.0, ttft_max_s=1.0), "tpot_max_s"),
    (dict(tpot_max_s=0.05, ttft_max_s=float("nan")), "ttft_max_s"),
    (dict(tpot_max_s=0.05, ttft_max_s=1.0, arrival="bursty"), "arrival"),
])
def test_bad_input(kwargs, field):
    with pytest.raises(ValueError, match=field):
        best_batch(L8, H100, 1024, 64, **kwargs)
    with pytest.raises(ValueError, match="prompt_len"):
        best_batch(L8, H100, 0, 64, tpot_max_s=0.05, ttft_max_s=1.0)
