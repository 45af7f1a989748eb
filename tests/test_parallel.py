"""Parallel layouts: pipeline stages, expert spreading, the TP x PP x EP search."""

import math

import pytest

import llm_roofline as lr
from llm_roofline.parallel import Layout, expert_load, layout_needed, parallel_estimate

H100 = lr.get_accelerator("h100")


def test_layout_checks():
    assert Layout(8, 2, 8).gpus == 16 and str(Layout(4, 2)) == "TP4 x PP2 x EP1 (8 GPUs)"
    with pytest.raises(ValueError, match="ep"):
        Layout(8, 1, 4)
    with pytest.raises(ValueError, match="tp"):
        Layout(0)
    with pytest.raises(ValueError, match="n_gpus"):
        parallel_estimate("llama-3-70b", H100, 1, 128, 8, Layout(2), n_gpus=2)


def test_stage_memory_by_hand():
    """Llama-3-70B on TP2 x PP2: each GPU holds 40 of the 80 layers at half width, the larger
    end of the model (final norm and half the LM head), and half of its 40 layers' cache."""
    d, ff, vocab, kv = 8192, 28672, 128256, 1024
    per_layer = (d * (d + kv + kv + d) + 3 * d * ff) / 2 + 2 * d  # norms are replicated
    weights = 2 * (40 * per_layer + d + vocab * d / 2)
    cache = 4 * 2304 * 40 * 2 * kv * 2 / 2  # 4 users x 2,304 tokens, k and v, bf16, half the heads
    est = parallel_estimate("llama-3-70b", H100, 4, 2048, 256, Layout(2, 2))
    assert est.memory.weights == pytest.approx(weights, rel=1e-12)
    assert est.memory.kv_cache == pytest.approx(cache, rel=1e-12)
    assert est.fits and est.nodes == 1


def test_one_stage_is_the_tensor_parallel_estimate():
    plain = lr.estimate("llama-3-70b", H100, 16, 1024, 64, n_gpus=4, weight_dtype="fp8")
    one = parallel_estimate("llama-3-70b", H100, 16, 1024, 64, Layout(4), weight_dtype="fp8")
    assert one.tpot_s == pytest.approx(plain.tpot_s) and one.ttft_s == pytest.approx(plain.ttft_s)
    assert one.memory.used == pytest.approx(plain.memory.used)
    assert one.bubble_fraction == 0 and one.transfer_s == 0 and one.expert_load == 1


def test_pipeline_bubble_and_transfers_across_nodes():
    est = parallel_estimate("deepseek-v3", H100, 256, 1024, 64, Layout(8, 2, 8), weight_dtype="fp8")
    assert est.nodes == 2 and est.microbatches == 2
    assert est.bubble_fraction == pytest.approx(1 / 3)  # (pp - 1) / (m + pp - 1)
    # one stage boundary, crossing the nodes: each of 8 ranks sends its slice of 128 tokens'
    # hidden states (7168 x 2 bytes) over its 50 GB/s (each way) NIC, plus 5 us
    assert est.transfer_s == pytest.approx(128 * 7168 * 2 / 8 / 50e9 + 5e-6)
    four = parallel_estimate("deepseek-v3", H100, 256, 1024, 64, Layout(8, 4, 8),
                             weight_dtype="fp8")
    assert four.bubble_fraction == pytest.approx(3 / 7)
    assert four.memory.used < est.memory.used  # capacity, not speed, is what stages add


def test_expert_load_by_hand():
    # 256 tokens to 8 of 256 experts over 8 GPUs: mean 256 pairs per GPU
    var = 256 * 8 * (1 / 8) * (7 / 8) * (248 / 255)
    assert expert_load("deepseek-v3", 256, 8) == pytest.approx(
        (256 + math.sqrt(var) * math.sqrt(2 * math.log(8))) / 256)
    assert expert_load("llama-3-70b", 256, 8) == 1.0  # dense
    balanced = parallel_estimate("deepseek-v3", H100, 256, 1024, 64, Layout(8, 2, 8),
                                 weight_dtype="fp8")
    skewed = parallel_estimate("deepseek-v3", H100, 256, 1024, 64, Layout(8, 2, 8),
                               weight_dtype="fp8", balanced=False)
    assert skewed.tpot_s > balanced.tpot_s


def test_layout_needed_answers_with_the_fewest_gpus():
    layout = layout_needed("deepseek-v3", H100, 1, 1024, 128)
    assert layout == Layout(4, 5, 4) and layout.tp <= H100.domain_size
    assert parallel_estimate("deepseek-v3", H100, 1, 1024, 128, layout).fits
    for smaller in (Layout(8, 2, 8), Layout(4, 4, 4), Layout(2, 9, 2)):
        assert not parallel_estimate("deepseek-v3", H100, 1, 1024, 128, smaller).fits
    assert layout_needed("llama-3-8b", H100, 1, 1024, 128) == Layout(1, 1, 1)
    assert layout_needed("llama-3-70b", "m4 max", 1, 1024, 128) is None
