"""The book's three-way check: what the tiny model tallies as it runs equals formulas.py, exactly.

The tally applies formulas' conventions to the arrays each operation really reads and writes,
so these tests check shapes, element sizes, passes and which (query, key) pairs are computed;
they do not count executed instructions (see the formulas module docstring).
"""

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from llm_roofline import counts
from llm_roofline import formulas as F
from llm_roofline.models import ModelConfig
from llm_roofline.tiny import Tally, TinyLlama

BASE = ModelConfig("count", vocab_size=101, hidden_size=48, intermediate_size=80, n_layers=2,
                   n_heads=6, n_kv_heads=2, head_dim=8, max_context=40)
CONFIGS = {
    "gqa": BASE,
    "mha-tied": dataclasses.replace(BASE, n_kv_heads=6, tie_embeddings=True),
    "mqa-bias": dataclasses.replace(BASE, n_kv_heads=1, qkv_bias=True, n_layers=3),
}
# storage dtype -> (weight_dtype, kv_dtype, act_dtype) in formulas' names
DTYPES = {np.float32: ("fp32", "fp32", "fp32"), np.float16: ("fp16", "fp16", "fp32")}


def run_counted(cfg, dtype, skip_masked, batch, prompt_len, n_decode, logits="all"):
    """Prefill then decode steps, one fresh tally per pass: [(phase, n_past, n_new, costs)].

    ``logits``: the prefill's LM head at every position (a forward pass) or at the last."""
    model = TinyLlama.random(cfg, seed=0, dtype=dtype, skip_masked=skip_masked)
    toks = np.random.default_rng(1).integers(0, cfg.vocab_size, (batch, prompt_len + n_decode))
    out = []
    tally = Tally()
    _, cache = model.prefill(toks[:, :prompt_len], max_len=prompt_len + n_decode, tally=tally,
                             logits=logits)
    out.append(("prefill", 0, prompt_len, tally.costs("prefill")))
    for j in range(n_decode):
        tally = Tally()
        model.decode(toks[:, prompt_len + j], cache, tally=tally)
        out.append(("decode", prompt_len + j, 1, tally.costs("decode")))
    return model, out


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("skip_masked", [False, True], ids=["masked", "causal"])
@pytest.mark.parametrize("batch, prompt_len", [(1, 7), (3, 12)])
@pytest.mark.parametrize("logits", ["last", "all"])
def test_every_op_of_every_pass_equals_op_costs(name, dtype, skip_masked, batch, prompt_len,
                                                logits):
    cfg = CONFIGS[name]
    w, kv, act = DTYPES[dtype]
    _, passes = run_counted(cfg, dtype, skip_masked, batch, prompt_len, n_decode=3,
                            logits=logits)
    for phase, n_past, n_new, counted in passes:
        analytic = counts.op_costs(cfg, batch, n_new, n_past, weight_dtype=w, kv_dtype=kv,
                                   act_dtype=act, causal=skip_masked, logits=logits)
        assert counted == analytic, (phase, n_past)


def test_tally_sums_phases_over_a_generate_call():
    cfg = CONFIGS["gqa"]
    model = TinyLlama.random(cfg, seed=0)
    tally = Tally()
    model.generate(np.ones((2, 5), int), 4, tally=tally)  # prefill, then 3 decode steps
    decode = [counts.op_costs(cfg, 2, 1, p, weight_dtype="fp32", causal=False) for p in (5, 6, 7)]
    assert tally.costs("decode") == {op: counts.total(d[op] for d in decode) for op in F.OPS}
    prefill = counts.op_costs(cfg, 2, 5, 0, weight_dtype="fp32", causal=False)
    assert tally.total() == counts.total(prefill) + counts.total(counts.total(d) for d in decode)
    # the default: the LM head at each prompt's last position, as op_costs counts by default
    assert tally.costs("prefill")["lm_head"].flops == 2 * 2 * cfg.hidden_size * cfg.vocab_size
    every = Tally()
    same = model.generate(np.ones((2, 5), int), 4, tally=every, logits="all")
    np.testing.assert_array_equal(same, model.generate(np.ones((2, 5), int), 4))
    prefill_all = counts.op_costs(cfg, 2, 5, 0, weight_dtype="fp32", causal=False, logits="all")
    assert every.costs("prefill") == prefill_all
    assert every.costs("prefill")["lm_head"].flops == 5 * tally.costs("prefill")["lm_head"].flops


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("batch", [1, 4])
def test_the_articles_identities_counted(name, batch):
    cfg = CONFIGS[name]
    L = 9
    _, passes = run_counted(cfg, np.float32, True, batch, L, n_decode=2)
    d, H, G, dh, N = cfg.hidden_size, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.n_layers
    f, V = cfg.intermediate_size, cfg.vocab_size
    # the matrices: per layer q, k, v, o and three of the MLP; then the head (or tied embedding)
    weight_params = N * (d * H * dh + 2 * d * G * dh + H * dh * d + 3 * d * f) + V * d
    weight_bytes = 4 * weight_params
    d_in = {"q_proj": d, "k_proj": d, "v_proj": d, "o_proj": H * dh, "gate_proj": d,
            "up_proj": d, "down_proj": cfg.intermediate_size, "lm_head": d}
    bias_elements = N * (H + 2 * G) * dh if cfg.qkv_bias else 0  # q, k, v biases
    for phase, n_past, n_new, c in passes:
        tokens = batch * n_new
        # linear FLOPs = 2 x matrix parameters x tokens (+ one add per bias element)
        lin_flops = sum(c[op].flops for op in F.LINEAR_OPS)
        assert lin_flops == 2 * weight_params * tokens + tokens * bias_elements
        # weight bytes: every matrix read once per pass, whatever the number of tokens
        act_in = 4 * tokens * sum(d_in[op] * (1 if op == "lm_head" else N) for op in F.LINEAR_OPS)
        lin_read = sum(c[op].bytes_read for op in F.LINEAR_OPS)
        assert lin_read - act_in == weight_bytes + 4 * bias_elements
        L_ctx = n_past + n_new
        attn = sum(c[op].flops for op in F.ATTENTION_OPS)
        if phase == "decode":
            assert c["kv_read"].bytes_read == 2 * N * G * dh * L_ctx * batch * 4
            assert attn == 4 * N * H * dh * L_ctx * batch
            # I_KV = n_heads / n_kv_heads at 2 bytes per element; here 4 bytes: half of it
            assert Fraction(attn, c["kv_read"].bytes_read) == Fraction(H, 2 * G)
            symbolic = F.at_decode(F.attention_flops_expr()).subs(
                {F.n_layers: N, F.n_heads: H, F.head_dim: dh, F.L_ctx: L_ctx, F.B: batch})
            assert attn == symbolic
        else:  # causal prefill: L(L+1)/2 pairs per head, about half of the L x L block
            assert attn == 2 * N * H * dh * batch * L * (L + 1)
            symbolic = F.at_prefill(F.attention_flops_expr(causal=True)).subs(
                {F.n_layers: N, F.n_heads: H, F.head_dim: dh, F.L: L, F.B: batch})
            assert attn == symbolic


def test_masked_prefill_counts_the_whole_block():
    cfg = CONFIGS["gqa"]
    _, passes = run_counted(cfg, np.float32, False, 2, 10, n_decode=0)
    c = passes[0][3]
    attn = sum(c[op].flops for op in F.ATTENTION_OPS)
    assert attn == 4 * cfg.n_layers * cfg.n_heads * cfg.head_dim * 2 * 10 * 10


def hand_count(cfg, batch, n, past, causal, logits="all"):
    """Every operation's (FLOPs, bytes read, bytes written) for one float32 pass, written out
    from the conventions (2 per multiply-add, 4 per norm element, 3 per RoPE element, 6 per
    softmax score, 5 per SwiGLU element, 1 per add, 7 per vocabulary entry sampled) without
    formulas.py."""
    d, f, V = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    N, H, G, dh = cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    T, S = batch * n, past + n  # new tokens, keys after the pass
    # (query, key) pairs per head and sequence: the whole n x S block, or the causal part
    pairs = n * past + n * (n + 1) // 2 if causal else n * S
    scores = batch * H * pairs
    e = 4  # bytes per float32
    logits_at = T if logits == "all" else batch  # positions whose logits the pass computes
    norm = (N * 4 * T * d, N * e * (T * d + d), N * e * T * d)

    def linear(d_in, d_out, layers=N, bias=False, tokens=T):  # a bias: one add per output
        b, t = (d_out if bias else 0), tokens
        return (layers * (2 * t * d_in * d_out + t * b), layers * e * (t * d_in + d_in * d_out + b),
                layers * e * t * d_out)

    return {
        "embed": (0, e * T * d, e * T * d),
        "attn_norm": norm,
        "q_proj": linear(d, H * dh, bias=cfg.qkv_bias),
        "k_proj": linear(d, G * dh, bias=cfg.qkv_bias),
        "v_proj": linear(d, G * dh, bias=cfg.qkv_bias),
        "rope": (N * 3 * T * (H + G) * dh, N * e * (T * (H + G) * dh + 2 * n * dh),
                 N * e * T * (H + G) * dh),
        "kv_write": (0, N * e * 2 * T * G * dh, N * e * 2 * T * G * dh),
        "kv_read": (0, N * e * 2 * batch * G * S * dh, 0),
        "attn_scores": (N * 2 * dh * scores, N * e * T * H * dh, N * e * scores),
        "softmax": (N * 6 * scores, N * e * scores, N * e * scores),
        "attn_values": (N * 2 * dh * scores, N * e * scores, N * e * T * H * dh),
        "o_proj": linear(H * dh, d),
        "residual": (2 * N * T * d, 2 * N * e * 2 * T * d, 2 * N * e * T * d),
        "mlp_norm": norm,
        "gate_proj": linear(d, f),
        "up_proj": linear(d, f),
        "mlp_act": (N * 5 * T * f, N * e * 2 * T * f, N * e * T * f),
        "down_proj": linear(f, d),
        "final_norm": (4 * T * d, e * (T * d + d), e * T * d),
        "lm_head": linear(d, V, layers=1, tokens=T if logits == "all" else batch),
        # softmax (6) and top-p's cumulative sum (1) per vocabulary entry at each position with
        # logits: reads the logits, writes the probabilities
        "sampling": (7 * logits_at * V, e * logits_at * V, e * logits_at * V),
    }


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("skip_masked", [False, True], ids=["masked", "causal"])
@pytest.mark.parametrize("logits", ["last", "all"])
def test_every_op_equals_a_hand_count(name, skip_masked, logits):
    cfg = CONFIGS[name]
    _, passes = run_counted(cfg, np.float32, skip_masked, 3, 7, n_decode=2, logits=logits)
    for phase, n_past, n_new, counted in passes:
        expected = hand_count(cfg, 3, n_new, n_past, causal=skip_masked, logits=logits)
        got = {op: (c.flops, c.bytes_read, c.bytes_written) for op, c in counted.items()}
        assert got == expected, phase
