"""The floor (the busiest resource) against the kernel-by-kernel time, by hand and by sweep."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import llm_roofline as lr
from llm_roofline import measured as M
from llm_roofline.calculator import _mean_of_envelope, decode_step
from test_estimate import simulate_window

H100 = lr.get_accelerator("H100")
A100 = lr.get_accelerator("A100")

# Llama-3-8B: the published parameter count and its shapes
PARAMS = 8_030_261_248
VOCAB, HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 128_256, 4096, 32, 32, 8, 128


def test_batch_one_decode_floor_by_hand():
    """One H100, batch 1, context 1,024: the step reads every weight but the embedding table
    (one row of it), 2 bytes each, and 1,023 cached tokens' keys and values; its FLOPs are
    2 per weight plus attention, far below the ridge: the floor is the bytes over 3.35 TB/s."""
    weights = 2 * (PARAMS - VOCAB * HIDDEN + HIDDEN)
    kv_per_token = 2 * LAYERS * KV_HEADS * HEAD_DIM * 2  # K and V, bf16: 131,072 bytes
    step_bytes = weights + 1023 * kv_per_token + kv_per_token  # read 1,023, write 1
    flops = 2 * (PARAMS - VOCAB * HIDDEN) + 2 * 2 * LAYERS * HEADS * HEAD_DIM * 1024
    by_hand = max(flops / 989e12, step_bytes / 3.35e12)
    assert by_hand == step_bytes / 3.35e12  # memory
    step = decode_step("llama-3-8b", H100, 1, 1024)
    assert step.floor_s == pytest.approx(by_hand, rel=2e-3)
    assert step.resources()["limit"] == "memory"
    assert step.resources()["compute"] == pytest.approx(flops / 989e12, rel=2e-2)
    # every kernel is limited by its bytes (the element-wise work, fused, by its bytes alone):
    # kernel by kernel equals the floor
    assert {r["bound"] for r in step.breakdown()} == {"memory", "element-wise"}
    assert step.time_s == pytest.approx(step.floor_s, rel=1e-12)


def test_prefill_floor_by_hand():
    """A 2,048-token prompt: 2 FLOPs per weight per token for the body, the LM head on the
    last position only, and causal attention; compute-bound at 989 TFLOP/s."""
    n = 2048
    body = PARAMS - 2 * VOCAB * HIDDEN
    attention = 2 * 2 * LAYERS * HEADS * HEAD_DIM * n * (n + 1) / 2
    flops = 2 * body * n + 2 * VOCAB * HIDDEN + attention
    est = lr.estimate("llama-3-8b", H100, 1, n, 2)
    busy = est.resources("prefill")
    assert busy["limit"] == "compute"
    assert est.ttft_floor_s == pytest.approx(flops / 989e12, rel=1e-2)
    assert busy["floor"] == busy["compute"] <= est.ttft_s


def test_one_kernel_kind_makes_the_two_times_equal():
    """On one GPU the floor is max(sum of math, sum of bytes) and the kernel-by-kernel time the
    sum of each kernel's max: they differ by the kernels the other resource limits. Make every
    kernel memory-bound (a peak so high, 1e19 FLOP/s, the largest a chip may claim, that the math
    shows only in the kernels that move no bytes) and they agree to a part in a million."""
    fast = lr.hardware.Accelerator(
        name="all-memory", vendor="test", architecture="test", memory_bytes=80 * 2**30,
        memory_type="HBM", bandwidth=3.35e12, peaks={"bf16": 1e19}, interconnect=None,
        interconnect_bandwidth=None, sources={})
    for step in (decode_step("llama-3-8b", fast, 8, 4096), decode_step("llama-3-8b", fast, 1, 9)):
        # kernels with no bytes (rotary, residual) take next to nothing on both counts
        assert step.floor_s == pytest.approx(step.time_s, rel=1e-6)
    est = lr.estimate("llama-3-8b", fast, 8, 512, 64)
    assert est.tpot_floor_s == pytest.approx(est.tpot_s, rel=1e-6)
    assert est.ttft_floor_s == pytest.approx(est.ttft_s, rel=1e-6)


SWEEP = [("llama-3-8b", "H100", 1), ("llama-3-70b", "H100", 8), ("llama-3-70b", "A100", 8),
         ("llama-3-70b", "MI300X", 4), ("mixtral-8x7b", "H200", 2), ("deepseek-v3", "H200", 8),
         ("llama-2-7b", "RTX 4090", 2), ("llama-3-70b", "H100", 16)]


@pytest.mark.parametrize(("model", "gpu", "n"), SWEEP)
def test_the_floor_is_never_above_the_kernel_by_kernel_time(model, gpu, n):
    rng = np.random.default_rng(7)
    batch = rng.integers(1, 2049, 300)
    batch[:20] = 1
    prompt = rng.integers(1, 2049, 300)
    output = rng.integers(1, 2049, 300)
    for dtype in ("bf16", "fp8"):
        est = lr.estimate(model, gpu, batch, prompt, output, n_gpus=n, weight_dtype=dtype)
        assert np.all(est.tpot_floor_s <= est.tpot_s * (1 + 1e-12))
        assert np.all(est.ttft_floor_s <= est.ttft_s * (1 + 1e-12))
        for phase in ("prefill", "decode"):
            busy = est.resources(phase)
            largest = np.maximum.reduce([busy[k] for k in ("compute", "memory", "interconnect",
                                                            "network")])
            assert np.all(busy["floor"] >= largest * (1 - 1e-12))
        step = decode_step(model, gpu, batch, prompt, n_gpus=n, weight_dtype=dtype)
        assert np.all(step.floor_s <= step.time_s * (1 + 1e-12))


@pytest.mark.parametrize(("batch", "prompt", "output"), [
    (1024, 1024, 400),  # compute and memory cross within the steps
    (1, 2048, 300), (300, 100, 1), (64, 5, 2)])
def test_the_tpot_floor_is_the_exact_mean_of_the_steps_floors(batch, prompt, output):
    est = lr.estimate("llama-3-70b", H100, batch, prompt, output, n_gpus=8)
    steps = [decode_step("llama-3-70b", H100, batch, c, n_gpus=8).floor_s
             for c in range(prompt + 1, prompt + max(output, 2))]
    assert est.tpot_floor_s == pytest.approx(np.mean(steps), rel=1e-12)


def test_the_first_case_crosses():
    """The mean of the envelope differs from the envelope of the means there."""
    first = decode_step("llama-3-70b", H100, 1024, 1025, n_gpus=8).resources()
    last = decode_step("llama-3-70b", H100, 1024, 1423, n_gpus=8).resources()
    assert first["limit"] == "compute" and last["limit"] == "memory"


def test_the_mean_of_an_envelope_by_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        lines = [tuple(rng.normal(size=2)) for _ in range(3)]
        j = np.arange(n)
        span = max(n - 1, 1)
        values = np.max([a + (b - a) * j / span for a, b in lines], axis=0)
        assert _mean_of_envelope(lines, n) == pytest.approx(values.mean(), abs=1e-12)


def test_a_windowed_floor_is_averaged_step_by_step(monkeypatch):
    simulate_window(monkeypatch, 500)
    est = lr.estimate("llama-3-8b", H100, 300, 300, 400)
    steps = [decode_step("llama-3-8b", H100, 300, c).floor_s for c in range(301, 700)]
    assert est.tpot_floor_s == pytest.approx(np.mean(steps), rel=1e-12)


# --- tensor parallelism -------------------------------------------------------------------------
def test_interconnect_busy_time_by_hand():
    """Llama-3-70B on 8 GPUs, a decode step of 1,024 tokens: 2 x 80 + 1 all-reduces of
    1,024 x 8,192 bf16 values (16 MiB; the embedding's is the one more), and the all-gather of
    1,024 x 128,256 bf16 logits. H100's NVSwitch reduces in the switch: each GPU sends and
    receives an all-reduce's message once, at 450 GB/s each way; A100's ring sends 2 x 7/8 of
    it, at 300 GB/s. An all-gather cannot be reduced: each GPU receives 7/8 of the logits."""
    message, logits = 1024 * 8192 * 2, 1024 * 128256 * 2
    h100 = decode_step("llama-3-70b", H100, 1024, 1024, n_gpus=8).resources()
    assert h100["interconnect"] == pytest.approx(
        161 * message / 450e9 + 7 / 8 * logits / 450e9, rel=1e-12)
    a100 = decode_step("llama-3-70b", A100, 1024, 1024, n_gpus=8).resources()
    assert a100["interconnect"] == pytest.approx(
        161 * 2 * 7 / 8 * message / 300e9 + 7 / 8 * logits / 300e9, rel=1e-12)
    assert h100["latency"] == a100["latency"] == pytest.approx(162 * 3e-6)
    # the kernel-by-kernel time pays the rings, one collective after another, on both
    ring = 161 * (2 * 7 / 8 * message / 450e9 + 3e-6) + 7 / 8 * logits / 450e9 + 3e-6
    step = decode_step("llama-3-70b", H100, 1024, 1024, n_gpus=8)
    assert step.allreduce_s == pytest.approx(ring, rel=1e-12)


def test_the_latency_rule():
    """One sequence: the latencies add to the floor. Two or more: they only join the max."""
    one = decode_step("llama-3-70b", H100, 1, 1024, n_gpus=8).resources()
    largest = max(one[k] for k in ("compute", "memory", "interconnect", "network"))
    assert one["floor"] == pytest.approx(largest + 162 * 3e-6, rel=1e-12)
    assert one["latency_added"] == pytest.approx(162 * 3e-6)
    two = decode_step("llama-3-70b", H100, 2, 1024, n_gpus=8).resources()
    largest = max(two[k] for k in ("compute", "memory", "interconnect", "network"))
    assert two["floor"] == pytest.approx(max(largest, 162 * 3e-6), rel=1e-12)
    assert two["latency_added"] == 0
    # a small model on many GPUs: the latency chain is the floor
    cfg = lr.ModelConfig(name="tiny", vocab_size=100, hidden_size=64, intermediate_size=128,
                         n_layers=4, n_heads=8, n_kv_heads=8, head_dim=8)
    tiny = decode_step(cfg, H100, 2, 16, n_gpus=8).resources()
    assert tiny["limit"] == "latency" and tiny["floor"] == pytest.approx(10 * 3e-6)


def test_the_issues_example():
    """Llama-3-70B on 8 x H100, batch 1,024, context 1,024: the floor is the math's 18.3 ms;
    kernel by kernel the compute kernels alone take 30.8 ms, the ring collectives 11.5 more."""
    step = decode_step("llama-3-70b", H100, 1024, 1024, n_gpus=8)
    busy = step.resources()
    assert busy["limit"] == "compute"
    assert 1e3 * step.floor_s == pytest.approx(18.34, abs=0.01)
    assert 1e3 * (step.time_s - step.allreduce_s) == pytest.approx(30.8, abs=0.05)
    assert 1e3 * step.allreduce_s == pytest.approx(11.5, abs=0.05)


# --- published measurements ---------------------------------------------------------------------
def test_no_published_row_beats_the_floor():
    """Every usable row of the data stays at or above the floor; and, per engine, how many
    beat the kernel-by-kernel time (none today: no engine in the data overlaps enough)."""
    comparisons = M.compare()
    assert len(comparisons) == 84
    assert [c.row.number for c in comparisons if c.beats_floor] == []
    assert all(c.headroom >= 1 - 1e-12 for c in comparisons)
    beat_kernel_by_kernel = collections.Counter(c.row.family for c in comparisons
                                                if c.beats_bound)
    assert beat_kernel_by_kernel == {}
    table = {r["engine"].split(" (")[0]: r for r in M.engines_table(comparisons)}
    assert all(r["beat it"] == 0 for r in table.values())
    assert all(r["of floor"] <= r["attained"] + 1e-12 for r in table.values())
