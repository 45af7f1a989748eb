"""The chapter-4 answer checks: each expected value against a hand computation."""

import pytest

import llm_roofline.course.ch04  # registers bound-1 ... bound-4
from llm_roofline.course.exercises import check


def test_bound_1_exact_gemm_intensity_of_a_down_projection():
    # Llama-3-8B down_proj: k = 14336 in, n = 4096 out; m = 512 tokens; everything 2 bytes
    m, k, n = 512, 14336, 4096
    expected = 2 * m * k * n / (2 * (k * n + m * k + m * n))
    assert round(expected, 2) == 441.11
    assert check("bound-1", expected)
    assert not check("bound-1", 512)  # I = B x L ignores the activations


def test_bound_2_smallest_width_that_can_cross_the_b200_ridge():
    ridge = 2250e12 / 8000e9  # B200, dense BF16
    assert check("bound-2", 2 * ridge)
    assert not check("bound-2", ridge)


def test_bound_3_critical_batch_of_int4_group_32_on_the_h200():
    ridge = 989.4e12 / 4800e9  # H200 SXM, dense BF16 (weight-only int4 runs BF16 math)
    per_weight = 0.5 + 2 / 32
    assert check("bound-3", ridge * per_weight / 2)
    assert not check("bound-3", ridge / 4)  # forgetting the scales: 11 % low


def test_bound_4_decode_step_intensity_with_the_kv_cache():
    # Llama-3-70B: 80 layers, d = 8192, 64 query / 8 KV heads of 128, d_ff = 28672, V = 128256
    N, d, H, G, dh, f, V = 80, 8192, 64, 8, 128, 28672, 128256
    B, S = 64, 4096
    p_linear = N * (d * (2 * H * dh + 2 * G * dh) + 3 * d * f) + V * d
    pairs = N * B * H * S  # (query, key) scores of the step, all layers
    flops = 2 * B * p_linear + 4 * dh * pairs + 6 * pairs  # linear, scores and values, softmax
    # weights, the KV cache, and the unfused scores: written, read and written by the
    # softmax, read by the values (2 bytes each)
    moved = 2 * p_linear + 2 * 2 * N * G * dh * S * B + 4 * 2 * pairs
    # the other activations (norms, residuals, projections' inputs and outputs) add 1 to 2 %
    counted = llm_roofline.course.ch04._bound_4()
    assert 0.98 * flops / moved < counted < flops / moved
    assert check("bound-4", counted)
    assert round(flops / moved) == 41 and not check("bound-4", 64)


@pytest.mark.parametrize("answer", ["many", float("nan")])
def test_bad_answers_say_what_is_wanted(answer):
    with pytest.raises(ValueError, match="answer must be a"):
        check("bound-1", answer)
