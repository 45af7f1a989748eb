"""Serving techniques: speculative decoding / MTP, mixed steps (chunked prefill), disaggregation."""

import math

import pytest

import llm_roofline as lr
from llm_roofline import serving as S

H100 = lr.get_accelerator("h100")
PEAK, BW = H100.peak("bf16"), H100.bandwidth
L8 = lr.get_model("llama-3-8b")  # d 4096, 32 layers, 32 heads of 128, 8 KV heads, MLP 14336
BODY = L8.n_params - L8.param_counts()["embedding"]  # weights a pass reads in full


def test_expected_tokens_per_step():
    assert S.expected_tokens(3, 0.8) == pytest.approx(1 + 0.8 + 0.64 + 0.512)
    assert S.expected_tokens(3, 1.0) == 4 and S.expected_tokens(5, 0.0) == 1
    with pytest.raises(ValueError, match="alpha"):
        S.expected_tokens(3, 1.5)
    with pytest.raises(ValueError, match="gamma"):
        S.expected_tokens(0, 0.5)


def test_speculative_verification_by_hand():
    """Batch 1, gamma 3, context 1024, no draft cost: the verify pass feeds 4 tokens that read
    the weights once; every kernel with bytes is memory-bound at 4 tokens, and the element-wise
    work (RoPE, residual adds, SwiGLU) is fused into its neighbours."""
    d, kvd, n, t = 4096, 1024, 32, 4
    moved = (2 * BODY  # every weight but the embedding, once
             + t * d * 2  # the 4 embedding rows gathered
             + n * 2 * (1023 + t) * kvd * 2  # the cache read: 1023 cached plus 4 new keys
             + n * 2 * t * kvd * 2)  # the 4 new keys and values written
    spec = S.speculative(L8, H100, 1, 1024, 3, 0.8, draft=None)
    assert spec.verify_s == pytest.approx(moved / BW, rel=1e-9)
    assert spec.step_s == spec.verify_s and spec.draft_s == 0
    tokens = 1 + 0.8 + 0.64 + 0.512
    assert spec.tpot_s == pytest.approx(spec.step_s / tokens)
    assert spec.throughput_tok_s == pytest.approx(tokens / spec.step_s)
    assert spec.speedup > 2.5  # four tokens' work for about one step's bytes


def test_speculative_draft_costs_count():
    mtp = S.speculative(L8, H100, 1, 1024, 2, 0.7)  # default: an MTP module
    one_layer = lr.ModelConfig(name="one layer", vocab_size=128256, hidden_size=4096,
                               intermediate_size=14336, n_layers=1, n_heads=32, n_kv_heads=8,
                               head_dim=128, max_context=8192)
    by_steps = sum(lr.decode_step(one_layer, H100, 1, c).time_s for c in (1024, 1025))
    assert mtp.draft_s == pytest.approx(by_steps, rel=1e-12)
    small = S.speculative("llama-3-70b", H100, 1, 1024, 4, 0.7, draft="llama-3-8b", n_gpus=8)
    drafts = sum(lr.decode_step(L8, H100, 1, 1024 + i, n_gpus=8).time_s for i in range(4))
    assert small.draft_s == pytest.approx(drafts, rel=1e-12)
    # at a large batch the verify pass turns the weight matmuls compute-bound: no gain
    big = S.speculative("llama-3-70b", H100, 512, 1024, 4, 0.7, draft="llama-3-8b", n_gpus=8)
    assert big.speedup < 1 < small.speedup


def test_a_mixed_step_reads_the_weights_once():
    """32 decode tokens and a 64-token chunk: 96 tokens, every weight matmul still memory-bound,
    so the mixed step is both steps alone less one read of the weights."""
    mixed = S.mixed_step(L8, H100, 32, 1024, 64)
    assert mixed.time_s == pytest.approx(mixed.decode_only_s + mixed.chunk_only_s - 2 * BODY / BW,
                                         rel=1e-9)
    assert {r["bound"] for r in mixed.breakdown() if r["op"].endswith("_proj")} == {"memory"}
    alone = S.mixed_step(L8, H100, 0, 1024, 64)
    assert alone.time_s == pytest.approx(alone.chunk_only_s)


def test_chunk_size_trades_ttft_against_tpot():
    runs = [S.chunked_prefill(L8, H100, 64, 2048, 4096, c) for c in (256, 1024, 4096)]
    assert [r.chunks for r in runs] == [16, 4, 1]
    assert runs[0].ttft_s > runs[1].ttft_s > runs[2].ttft_s  # fewer weight reads
    assert runs[0].tpot_during_s < runs[1].tpot_during_s < runs[2].tpot_during_s
    assert all(r.tpot_during_s > r.tpot_without_s for r in runs)
    assert runs[0].tpot_without_s == pytest.approx(lr.decode_step(L8, H100, 64, 2048).time_s)


def test_disaggregation_is_a_plain_comparison():
    kw = dict(weight_dtype="fp8", kv_dtype="fp8")
    d = S.disaggregated("llama-3-70b", H100, 64, 4096, 512, prefill_gpus=4, decode_gpus=4, **kw)
    # the prompt's cache: 4096 tokens x 80 layers x 8 KV heads x 128 x 2 (k, v) x 1 byte, sent
    # by each of the 4 prefill GPUs in parallel over NVLink (450 GB/s each way), plus 3 us
    kv = 4096 * 80 * 8 * 128 * 2
    assert d.kv_transfer_s == pytest.approx(kv / 4 / 450e9 + 3e-6)
    split = lr.estimate("llama-3-70b", H100, 64, 4096, 512, n_gpus=4, **kw)
    assert d.split_tpot_s == pytest.approx(split.tpot_s)
    assert d.colocated_stall_s > d.colocated_tpot_s  # co-located users wait for the prompt
    assert d.split_fits and d.colocated_fits
    assert math.isfinite(d.split_ttft_s) and d.split_ttft_s > d.kv_transfer_s


def test_the_verify_pass_computes_every_positions_logits(monkeypatch):
    """A prefill samples one token per sequence, so its LM head runs at the last position
    (counts' default); a verify pass checks every draft, so it needs all gamma + 1 logits."""
    calls = []
    original = S._step_s

    def spy(s, batch, n_new, n_past, **kw):
        calls.append((batch, n_new, kw.get("logits_tokens")))
        return original(s, batch, n_new, n_past, **kw)

    monkeypatch.setattr(S, "_step_s", spy)
    S.speculative("llama-3-8b", H100, 256, 1024, 3, 0.7, draft=None)
    assert calls[0] == (256, 4, 256 * 4)


def test_a_mixed_step_has_a_floor_below_its_kernel_by_kernel_time():
    """The floor overlaps math and memory: at 512-token chunks beside 64 decoding users the
    step is memory-bound as a whole (its floor about the bytes' time), although some of its
    kernels are compute-bound one by one (so the kernel-by-kernel time is longer)."""
    from llm_roofline import get_model, serving

    cfg = get_model("llama-3-8b")
    step = serving.mixed_step(cfg, "H100", 64, 2048, 512)
    # by hand: the weights once, 2 x 8.03e9 bytes, plus 64 caches of 2,048 tokens x 131,072
    # bytes, over 3.35e12 B/s: 4.79 + 5.13 = 9.9 ms... less the embedding table the lookup
    # does not read (128,256 x 4,096 x 2 bytes = 1.05 GB, 0.31 ms): about 9.6 ms
    by_hand = (2 * 8.03e9 - 2 * 128256 * 4096 + 64 * 2048 * 131072) / 3.35e12
    assert step.floor_s < step.time_s
    assert step.floor_s == pytest.approx(by_hand, rel=0.03)
    chunked = serving.chunked_prefill(cfg, "H100", 64, 2048, 4096, 512)
    assert chunked.tpot_during_floor_s < chunked.tpot_during_s
    assert chunked.ttft_floor_s < chunked.ttft_s
