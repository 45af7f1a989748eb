"""formulas.py: the article's identities, symbolically and in numbers, and op_costs's contract."""

import dataclasses
import itertools

import numpy as np
import pytest
import sympy as sp

from llm_roofline import counts
from llm_roofline import formulas as F
from llm_roofline.hardware import get_accelerator
from llm_roofline.models import ModelConfig, get_model, list_models

CFG = ModelConfig("t", vocab_size=1000, hidden_size=64, intermediate_size=160, n_layers=3,
                  n_heads=8, n_kv_heads=2, head_dim=8, max_context=512)


# --- Cost ----------------------------------------------------------------------------------
def test_cost_arithmetic():
    a, b = counts.Cost(10, 3, 2), counts.Cost(5, 1, 4)
    assert a + b == counts.Cost(15, 4, 6)
    assert (a + b).bytes == 10
    assert a.intensity == 2.0
    assert counts.total([a, b]) == counts.total({"x": a, "y": b}) == a + b
    assert counts.total([]) == counts.Cost(0, 0, 0)


@pytest.mark.parametrize("args", [(-1, 0, 0), (1.5, 0, 0), (True, 0, 0), (0, "8", 0)])
def test_cost_rejects_bad_fields(args):
    with pytest.raises(ValueError, match="Cost"):
        counts.Cost(*args)


def test_cost_intensity_without_bytes():
    with pytest.raises(ValueError, match="no bytes"):
        _ = counts.Cost(5, 0, 0).intensity


def test_ops_are_unique_and_cover_the_named_groups():
    assert len(set(F.OPS)) == len(F.OPS) == 21
    assert set(F.LINEAR_OPS) | set(F.ATTENTION_OPS) < set(F.OPS)
    assert set(counts.op_costs(CFG, 1, 4)) == set(F.OPS)


# --- the article's identities, symbolically --------------------------------------------------
def test_linear_intensity_is_tokens_at_two_bytes_per_parameter():
    assert sp.simplify(F.linear_intensity_expr() - F.B * F.L) == 0
    assert sp.simplify(F.linear_intensity_expr(1) - 2 * F.B * F.L) == 0  # fp8 weights


def test_kv_intensity_is_the_head_ratio_independent_of_batch_and_context():
    i_kv = F.kv_intensity_expr()
    assert sp.simplify(i_kv - F.n_heads / F.n_kv_heads) == 0
    assert not i_kv.free_symbols & {F.B, F.L_ctx, F.L, F.n_layers, F.head_dim}
    assert i_kv.subs({F.n_heads: 32, F.n_kv_heads: 32}) == 1  # MHA
    assert i_kv.subs({F.n_heads: 32, F.n_kv_heads: 4}) == 8  # Llama 3 GQA, 8:1


def test_kv_read_and_attention_flops_are_the_articles_formulas():
    article = 2 * F.n_layers * F.n_kv_heads * F.head_dim * F.L_ctx * F.B * F.b_kv
    assert sp.expand(F.kv_read_bytes_expr() - article) == 0
    article = 4 * F.n_layers * F.n_heads * F.head_dim * F.L_ctx * F.B
    for causal in (True, False):
        assert sp.expand(F.at_decode(F.attention_flops_expr(causal)) - article) == 0


def test_causal_prefill_does_about_half_the_attention_flops():
    causal, full = (F.at_prefill(F.attention_flops_expr(c)) for c in (True, False))
    assert sp.expand(full - 4 * F.n_layers * F.n_heads * F.head_dim * F.B * F.L**2) == 0
    assert sp.expand(causal - 2 * F.n_layers * F.n_heads * F.head_dim * F.B * F.L * (F.L + 1)) == 0
    assert sp.limit(causal / full, F.L, sp.oo) == sp.Rational(1, 2)


def test_causal_pairs_match_a_brute_force_count():
    for n_new, n_past in itertools.product(range(1, 6), range(4)):
        count = sum(1 for i in range(n_new) for j in range(n_past + n_new) if j <= n_past + i)
        at = {F.n_new: n_new, F.n_past: n_past}
        assert F.attention_pairs_expr(True).subs(at) == count
        assert F.attention_pairs_expr(False).subs(at) == n_new * (n_past + n_new)


@pytest.mark.parametrize("gated", [True, False])
def test_linear_flops_are_two_per_matrix_parameter_per_token(gated):
    e = F.op_expressions(gated_mlp=gated, logits="all")
    flops = sum(e[op][0] for op in F.LINEAR_OPS)
    assert sp.expand(flops - 2 * F.linear_params_expr(gated_mlp=gated) * F.B * F.n_new) == 0
    assert F.linear_flops_expr() == 2 * F.N * F.B * F.L
    # by default the LM head runs at each sequence's last position: B tokens, not B * n_new
    last = F.op_expressions(gated_mlp=gated)
    head = 2 * F.vocab * F.d_model
    assert sp.expand(sum(last[op][0] for op in F.LINEAR_OPS) - flops
                     - head * F.B * (1 - F.n_new)) == 0
    assert F.at_decode(last["lm_head"][0]) == F.at_decode(e["lm_head"][0]) == head * F.B


@pytest.mark.parametrize("gated, bias", [(True, False), (False, True)])
def test_a_dense_model_has_the_dense_expressions(gated, bias):
    """op_costs substitutes model_expressions for every model; for a dense one those are
    op_expressions, the formulas the book derives from."""
    dense = F.op_expressions(gated_mlp=gated, qkv_bias=bias)
    assert F.model_expressions(gated_mlp=gated, qkv_bias=bias) == dense
    assert F.ops_for(CFG) == F.OPS == tuple(dense)


# --- the article's numbers -------------------------------------------------------------------
def test_case_a_prefill_and_case_b_decode():
    h100 = get_accelerator("h100-sxm")
    prefill = F.linear_intensity_expr().subs({F.B: 1, F.L: 2048})
    assert prefill == 2048
    assert round(2048 / h100.ridge("bf16"), 1) == 6.9  # "almost 7x above the ridge"
    decode = int(F.linear_intensity_expr().subs({F.B: 1, F.L: 1}))
    assert decode == 1
    attainable = min(h100.peak("bf16"), decode * h100.bandwidth)
    assert attainable == 3.35e12
    assert round(100 * attainable / h100.peak("bf16"), 2) == 0.34
    assert F.linear_intensity_expr().subs({F.B: 32, F.L: 1}) == 32 < h100.ridge("bf16")


# --- op_costs ---------------------------------------------------------------------------------
def test_op_costs_by_hand():
    c = counts.op_costs(CFG, batch=2, n_new=5, n_past=7, weight_dtype="bf16")
    T, S = 2 * 5, 7 + 5
    assert c["q_proj"] == counts.Cost(3 * 2 * T * 64 * 64, 3 * (64 * 64 + T * 64) * 2, 3 * T * 64 * 2)
    assert c["kv_read"] == counts.Cost(0, 3 * 2 * 2 * S * 2 * 8 * 2, 0)
    causal_pairs = 5 * 7 + 5 * 6 // 2
    assert c["attn_scores"].flops == 3 * 2 * 8 * 2 * 8 * causal_pairs
    assert c["lm_head"] == counts.Cost(2 * 2 * 64 * 1000, (1000 * 64 + 2 * 64) * 2, 2 * 1000 * 2)
    every = counts.op_costs(CFG, batch=2, n_new=5, n_past=7, weight_dtype="bf16", logits="all")
    assert every["lm_head"] == counts.Cost(2 * T * 64 * 1000, (1000 * 64 + T * 64) * 2,
                                           T * 1000 * 2)
    # the sampler's softmax and top-p follow the logits: 7 FLOPs per vocabulary entry
    assert c["sampling"] == counts.Cost(7 * 2 * 1000, 2 * 1000 * 2, 2 * 1000 * 2)
    assert every["sampling"] == counts.Cost(7 * T * 1000, T * 1000 * 2, T * 1000 * 2)
    assert {k: v for k, v in every.items() if k not in ("lm_head", "sampling")} == {
        k: v for k, v in c.items() if k not in ("lm_head", "sampling")}
    with pytest.raises(ValueError, match="logits must be 'last' or 'all'"):
        counts.op_costs(CFG, 2, 5, logits="first")
    assert c["embed"] == counts.Cost(0, T * 64 * 2, T * 64 * 2)


def test_decode_step_matches_the_article_for_llama_3_8b():
    cfg = get_model("llama-3-8b")
    L_ctx, batch = 4096, 8
    c = counts.op_costs(cfg, batch, 1, L_ctx - 1, weight_dtype="bf16")
    kv = 2 * 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * L_ctx * batch
    assert c["kv_read"].bytes_read == kv
    attn = sum(c[op].flops for op in F.ATTENTION_OPS)
    assert attn == 4 * cfg.n_layers * cfg.n_heads * cfg.head_dim * L_ctx * batch
    assert attn / kv == cfg.n_heads / cfg.n_kv_heads == 4
    # weights-only intensity is B; counting activation traffic too it is a little less
    lin = counts.total(c[op] for op in F.LINEAR_OPS)
    weight_bytes = 2 * (lin.flops // (2 * batch))
    assert lin.flops / weight_bytes == batch
    assert batch * 0.9 < lin.intensity < batch


def test_weights_are_read_once_per_pass():
    p = F.linear_params_expr().subs({F.n_layers: 3, F.d_model: 64, F.d_ff: 160, F.n_heads: 8,
                                     F.n_kv_heads: 2, F.head_dim: 8, F.vocab: 1000})
    for batch, n in [(1, 1), (4, 16)]:
        c = counts.op_costs(CFG, batch, n, weight_dtype="fp32", act_dtype="bf16", logits="all")
        lin_read = sum(c[op].bytes_read for op in F.LINEAR_OPS)
        # bf16 inputs: q, k, v, gate, up (d_model each), o (n_heads*head_dim), down (d_ff); head
        inputs = 2 * batch * n * (3 * (5 * 64 + 8 * 8 + 160) + 64)
        assert lin_read - inputs == 4 * p


def test_dtypes_default_and_split():
    bf16 = counts.op_costs(CFG, 2, 1, 30, weight_dtype="bf16")
    split = counts.op_costs(CFG, 2, 1, 30, weight_dtype="bf16", kv_dtype="bf16", act_dtype="bf16")
    assert bf16 == split
    fp8_kv = counts.op_costs(CFG, 2, 1, 30, weight_dtype="bf16", kv_dtype="fp8")
    assert 2 * fp8_kv["kv_read"].bytes_read == bf16["kv_read"].bytes_read
    assert fp8_kv["q_proj"] == bf16["q_proj"]
    int4 = counts.op_costs(CFG, 1, 1, weight_dtype="int4", act_dtype="bf16")
    assert int4["lm_head"].bytes_read == 1000 * 64 // 2 + 64 * 2


def test_gated_and_bias_variants():
    plain = dataclasses.replace(CFG, gated_mlp=False)
    c = counts.op_costs(plain, 1, 4)
    assert c["gate_proj"] == counts.Cost(0, 0, 0)
    assert c["mlp_act"].flops == 3 * 4 * 4 * 160
    biased = counts.op_costs(dataclasses.replace(CFG, qkv_bias=True), 1, 4)
    base = counts.op_costs(CFG, 1, 4)
    assert biased["q_proj"].flops - base["q_proj"].flops == 3 * 4 * 64
    assert biased["k_proj"].bytes_read - base["k_proj"].bytes_read == 3 * 16 * 2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"batch": 0, "n_new": 1}, "batch"),
        ({"batch": 1, "n_new": 0}, "n_new"),
        ({"batch": 1, "n_new": 1, "n_past": -1}, "n_past"),
        ({"batch": True, "n_new": 1}, "batch"),
        ({"batch": 1, "n_new": 2.0}, "n_new"),
        ({"batch": 2**63, "n_new": 1}, "batch"),
        ({"batch": 1 + 0j, "n_new": 1}, "batch"),
        ({"batch": 1, "n_new": 500, "n_past": 13}, "max_context"),
        ({"batch": 1, "n_new": 1, "weight_dtype": "fp12"}, "weight_dtype"),
        ({"batch": 1, "n_new": 1, "kv_dtype": "fp12"}, "kv_dtype"),
        ({"batch": 1, "n_new": 1, "act_dtype": "fp12"}, "act_dtype"),
    ],
)
def test_op_costs_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        counts.op_costs(CFG, **kwargs)


def test_op_costs_takes_numpy_integers():
    assert counts.op_costs(CFG, np.int64(2), np.int32(3), np.uint8(4)) == counts.op_costs(CFG, 2, 3, 4)


# --- one source: parameters and the weight bytes of every op ------------------------------------
@pytest.mark.parametrize("name", list_models())
def test_each_ops_weight_traffic_is_its_parameter_count(name):
    """At one token, each op reads each of its parameters once, exactly; the exceptions are
    spelled out by hand: the embedding gathers one row, an MoE pass reads its k routed experts
    and the shared ones, and a tied head still reads the (embedding's) matrix."""
    cfg = get_model(name)
    params = cfg.params_by_op()
    d = cfg.hidden_size
    elements = counts.op_elements(cfg, 1, 1, 0, absorbed=True)
    assert set(params) <= set(elements) and tuple(elements) == F.ops_for(cfg)
    for op, (_, weights, _, _) in elements.items():
        expected = params.get(op, 0)
        if op == "embed":
            expected = d
        elif op == "lm_head":
            expected = cfg.vocab_size * d
        elif cfg.is_moe and op in ("gate_proj", "up_proj", "down_proj"):
            dense = cfg.first_dense_layers * d * cfg.intermediate_size
            used = cfg.n_experts_per_token + cfg.n_shared_experts
            expected = dense + cfg.n_moe_layers * used * d * cfg.moe_intermediate_size
        assert weights == expected, op


def _weight_elements(c32, c16):
    """Elements of weights an op reads: its bytes at fp32 weights less those at bf16, halved."""
    return {op: (c32[op].bytes_read - c16[op].bytes_read) // 2 for op in c32}


def test_moe_and_latent_attention_ops_by_hand():
    """DeepSeek-V3, one decode step at context 4,096, batch 1 (absorbed MLA), exact integers."""
    cfg = get_model("deepseek-v3")
    bf16 = counts.op_costs(cfg, 1, 1, 4095, weight_dtype="bf16")
    fp32 = counts.op_costs(cfg, 1, 1, 4095, weight_dtype="fp32", kv_dtype="bf16", act_dtype="bf16")
    weights = _weight_elements(fp32, bf16)
    # the router: a 7,168 x 256 matrix in each of the 58 MoE layers, read once
    assert weights["router"] == 58 * 7168 * 256
    assert bf16["router"] == counts.Cost(58 * 2 * 7168 * 256, 58 * (7168 * 256 + 7168) * 2, 58 * 256 * 2)
    # kv_b_proj: 512 -> 128 heads x (128 nope + 128 value) in each of the 61 layers
    assert weights["kv_b_proj"] == 61 * 512 * 128 * 256
    # absorbed: the query's nope part (128 x 128) and the latent output (128 x 512) go through it
    assert bf16["kv_b_proj"] == counts.Cost(
        61 * 2 * 128 * 512 * 256,
        61 * (512 * 128 * 256 + 128 * (128 + 512)) * 2,
        61 * 128 * (512 + 128) * 2,
    )
    # the experts: 3 dense layers of 18,432, then 8 routed + 1 shared expert of 2,048 each
    for op in ("gate_proj", "up_proj", "down_proj"):
        assert weights[op] == 3 * 7168 * 18432 + 58 * 9 * 7168 * 2048
    assert sum(weights.values()) == 37_552_282_624 - 129_280 * 7168 + 7168  # active - table + row
    # naive form (prefill of 16 tokens): kv_b_proj up-projects all 16 latents, same weights
    naive = counts.op_costs(cfg, 1, 16, 0)
    assert naive["kv_b_proj"] == counts.Cost(
        61 * 2 * 16 * 512 * 128 * 256, 61 * 512 * 128 * 256 * 2, 61 * 16 * 128 * 256 * 2)


def test_mixtral_router_and_experts_by_hand():
    cfg = get_model("mixtral-8x7b")
    bf16 = counts.op_costs(cfg, 1, 1, 99)
    fp32 = counts.op_costs(cfg, 1, 1, 99, weight_dtype="fp32", kv_dtype="bf16", act_dtype="bf16")
    weights = _weight_elements(fp32, bf16)
    assert weights["router"] == 32 * 4096 * 8
    assert weights["up_proj"] == 32 * 2 * 4096 * 14336  # top-2 of 8 experts
    # a batch of 64 tokens touches on average 8 x (1 - (3/4)**64) experts per layer
    many = counts.op_elements(cfg, 64, 1, 99)["up_proj"][1]
    assert many == pytest.approx(32 * 8 * (1 - 0.75**64) * 4096 * 14336, rel=1e-12)


def test_param_counts_are_the_same_table_by_component():
    for name in list_models():
        cfg = get_model(name)
        assert sum(cfg.param_counts().values()) == sum(cfg.params_by_op().values()) == cfg.n_params
        assert tuple(cfg.param_counts()) == counts.PARAM_COMPONENTS


def test_norm_parameters_by_hand():
    # Llama-3-8B: two norms of 4,096 per layer (32 layers) and the final norm
    assert get_model("llama-3-8b").param_counts()["norms"] == (2 * 32 + 1) * 4096
    # DeepSeek-V3: the same over 61 layers; MLA's q_a_norm (1,536) and kv_a_norm (512) are
    # the attention block's
    ds = get_model("deepseek-v3").params_by_op()
    assert (ds["attn_norm"], ds["mlp_norm"], ds["final_norm"]) == (61 * 7168, 61 * 7168, 7168)
    assert (ds["q_a_norm"], ds["kv_a_norm"]) == (61 * 1536, 61 * 512)
