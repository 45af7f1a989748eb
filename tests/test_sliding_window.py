"""Sliding-window attention: Mistral-7B v0.1 (every layer) and Gemma 2/3 (local and global layers).

Every count is against a hand count from the published configs: a windowed layer's cache holds
at most the window, and its query ``i`` (at position ``p``) attends to ``min(p + 1, W)`` keys.
"""

import itertools
import json

import numpy as np
import pytest
import sympy as sp

import llm_roofline as lr
from llm_roofline import counts
from llm_roofline import formulas as F
from llm_roofline.models import LAYER_TYPES, ModelConfig, get_model, list_models

SLIDING, FULL = "sliding_attention", "full_attention"


def _stored(name):
    return json.loads(lr.models._MODELS.joinpath(f"{name}.json").read_text())


# --- loading the published configs ------------------------------------------------------------
def test_mistral_v0_1_loads_with_its_window():
    config = _stored("mistral-7b-v0.1")
    assert config["sliding_window"] == 4096 and config["model_type"] == "mistral"
    cfg = get_model("mistral-7b-v0.1")
    assert (cfg.sliding_window, cfg.n_windowed_layers, cfg.layer_types) == (4096, 32, ())
    assert cfg.attention_layers == "all 32 windowed (4,096 tokens)"
    # 2 x 32000 x 4096 + 32 x (2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336 + 2 x 4096) + 4096
    assert cfg.n_params == 7_241_732_096


def test_gemma_2_9b_loads_alternating_local_and_global_layers():
    cfg = get_model("gemma-2-9b")
    assert cfg.layer_types == (SLIDING, FULL) * 21  # layer 0 local, layer 1 global, ...
    assert cfg.attention_layers == "21 of 42 windowed (4,096 tokens), 21 global"
    assert (cfg.head_dim, cfg.n_heads, cfg.n_kv_heads) == (256, 16, 8)  # 16 x 256 != 3584
    assert cfg.tie_embeddings and cfg.post_norms and not cfg.qk_norm
    assert cfg.mlp_activation == "gelu_tanh" and cfg.gated_mlp
    # tied table 256000 x 3584; per layer q, o 3584 x 4096, k, v 3584 x 2048, GeGLU 3 x 3584 x
    # 14336, four norms of 3584; one final norm
    per_layer = 2 * 3584 * 4096 + 2 * 3584 * 2048 + 3 * 3584 * 14336 + 4 * 3584
    assert cfg.n_params == 256000 * 3584 + 42 * per_layer + 3584 == 9_241_705_984
    assert cfg.param_counts()["norms"] == (4 * 42 + 1) * 3584


def test_gemma_3_1b_loads_five_local_layers_per_global_one():
    cfg = get_model("gemma-3-1b")
    globals_ = [i for i, t in enumerate(cfg.layer_types) if t == FULL]
    assert globals_ == [5, 11, 17, 23] and cfg.n_windowed_layers == 22
    assert cfg.sliding_window == 512 and cfg.qk_norm and cfg.post_norms
    # per layer: q, o 1152 x 1024, k, v 1152 x 256, q and k norms of 256, GeGLU 3 x 1152 x 6912,
    # four norms of 1152
    per_layer = 2 * 1152 * 1024 + 2 * 1152 * 256 + 2 * 256 + 3 * 1152 * 6912 + 4 * 1152
    assert cfg.n_params == 262144 * 1152 + 26 * per_layer + 1152 == 999_885_952
    assert cfg.params_by_op()["q_norm"] == cfg.params_by_op()["k_norm"] == 26 * 256


@pytest.mark.parametrize("name", ["gemma-2-9b", "gemma-3-1b", "mistral-7b-v0.1"])
def test_published_parameter_count_within_half_a_percent(name):
    assert get_model(name).n_params == pytest.approx(lr.models.model_info(name)["params"], rel=0.005)


def test_a_layer_types_list_is_read_as_it_stands():
    config = _stored("gemma-3-1b")
    types = [FULL] * 13 + [SLIDING] * 13
    cfg = ModelConfig.from_hf_config({**config, "layer_types": types})
    assert cfg.layer_types == tuple(types) and cfg.n_windowed_layers == 13
    # the newer name of the pattern field, and a pattern of 2 (every other layer global)
    del config["sliding_window_pattern"]
    assert get_model("gemma-3-1b") == ModelConfig.from_hf_config(
        {**config, "_sliding_window_pattern": 6}, name="gemma-3-1b")
    assert ModelConfig.from_hf_config({**config, "sliding_window_pattern": 2}).n_windowed_layers == 13
    with pytest.raises(ValueError, match="layer_types"):
        ModelConfig.from_hf_config({**config, "layer_types": [SLIDING] * 25})
    with pytest.raises(ValueError, match="layer_types"):
        ModelConfig.from_hf_config({**config, "layer_types": ["local"] * 26})


def test_the_multimodal_gemma3_wrapper_reads_its_text_config():
    text = {k: v for k, v in _stored("gemma-3-1b").items() if k != "architectures"}
    outer = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
             "text_config": text, "vision_config": {"hidden_size": 1152}}
    assert ModelConfig.from_hf_config(outer, name="gemma-3-1b") == get_model("gemma-3-1b")
    with pytest.raises(ValueError, match="text_config"):
        ModelConfig.from_hf_config({"model_type": "gemma3", "text_config": "none"})


def test_model_config_checks_its_window_fields():
    base = dict(name="w", vocab_size=10, hidden_size=8, intermediate_size=8, n_layers=2,
                n_heads=2, n_kv_heads=1, head_dim=4)
    with pytest.raises(ValueError, match="sliding_window"):
        ModelConfig(**base, layer_types=(SLIDING, FULL))  # windowed layers need a window
    with pytest.raises(ValueError, match="layer_types"):
        ModelConfig(**base, sliding_window=4, layer_types=(SLIDING,))
    with pytest.raises(ValueError, match="sliding_window"):
        ModelConfig(**base, sliding_window=-1)
    assert ModelConfig(**base, sliding_window=4, layer_types=[SLIDING, FULL]).layer_types == (
        SLIDING, FULL)
    assert set(LAYER_TYPES) == {SLIDING, FULL}


# --- the KV cache -------------------------------------------------------------------------------
def test_mistral_v0_1_cache_holds_the_window():
    cfg = get_model("mistral-7b-v0.1")
    # at 8,192 tokens: 32 layers x 8 KV heads x 128 x (key, value) x 4,096 held tokens
    assert cfg.kv_cache_elements(8192) == 32 * 8 * 128 * 2 * 4096 == 268_435_456
    assert cfg.kv_cache_elements(1000) == 32 * 8 * 128 * 2 * 1000  # within the window: all
    contexts = np.array([[1], [4096], [4097], [32768]])
    assert np.array_equal(cfg.kv_cache_elements(contexts),
                          32 * 8 * 128 * 2 * np.array([[1], [4096], [4096], [4096]]))


def test_gemma_caches_hold_global_layers_whole_and_local_ones_to_the_window():
    g2 = get_model("gemma-2-9b")
    per_layer = 8 * 256 * 2  # 8 KV heads of 256, key and value
    assert g2.kv_cache_elements(8192) == per_layer * (21 * 8192 + 21 * 4096)
    assert g2.kv_cache_elements(4096) == per_layer * 42 * 4096
    g3 = get_model("gemma-3-1b")
    assert g3.kv_cache_elements(32768) == 256 * 2 * (4 * 32768 + 22 * 512)
    assert np.array_equal(g3.kv_cache_elements(np.array([100, 32768])),
                          [256 * 2 * 26 * 100, 256 * 2 * (4 * 32768 + 22 * 512)])


@pytest.mark.parametrize("name", list_models())
def test_the_cache_is_what_a_decode_step_reads(name):
    """kv_cache_elements and formulas' kv_read agree for every built-in model and context."""
    cfg = get_model(name)
    contexts = np.array([1, 511, 512, 513, 4096, 4097, cfg.max_context])
    read = counts.op_elements(cfg, 1, 1, contexts - 1, absorbed=True)["kv_read"][2]
    assert np.array_equal(read, cfg.kv_cache_elements(contexts))


# --- attention over the window ---------------------------------------------------------------
def test_windowed_pairs_match_a_brute_force_count():
    causal_pairs, keys_read, block = (
        sp.lambdify([F.n_new, F.n_past, F.window], e)
        for e in (F.attention_pairs_expr(True, windowed=True), F.keys_read_expr(windowed=True),
                  F.attention_pairs_expr(False, windowed=True))
    )
    for n_new, n_past, w in itertools.product(range(1, 7), range(6), range(1, 8)):
        causal = sum(min(n_past + i + 1, w) for i in range(n_new))
        keys = {max(0, n_past + i - w + 1) + j for i in range(n_new)
                for j in range(min(n_past + i + 1, w))}
        assert causal_pairs(n_new, n_past, w) == causal
        assert keys_read(n_new, n_past, w) == len(keys)
        assert block(n_new, n_past, w) == n_new * len(keys)
    at = {F.n_new: 5, F.n_past: 3, F.window: 4}  # and exactly, in SymPy: 4 + 4 + 4 + 4 + 4
    assert F.attention_pairs_expr(True, windowed=True).xreplace(at) == 20


def test_a_window_wider_than_the_context_is_full_attention():
    at = {F.window: 10**6}
    for causal in (True, False):
        full, windowed = (F.attention_pairs_expr(causal, w).subs(at) for w in (False, True))
        for n_new, n_past in [(1, 0), (7, 3), (100, 900)]:
            assert full.subs({F.n_new: n_new, F.n_past: n_past}) == windowed.subs(
                {F.n_new: n_new, F.n_past: n_past})


def test_mistral_v0_1_decode_and_prefill_by_hand():
    cfg = get_model("mistral-7b-v0.1")
    # decode at context 8,192, batch 2: every layer reads 4,096 keys and values
    c = counts.op_costs(cfg, 2, 1, 8191)
    assert c["kv_read"].bytes_read == 2 * 32 * 8 * 128 * 4096 * 2 * 2
    assert sum(c[op].flops for op in F.ATTENTION_OPS) == 4 * 32 * 32 * 128 * 4096 * 2
    # within the window, the same as full attention
    full = counts.op_costs(get_model("mistral-7b"), 2, 1, 4095)
    assert counts.op_costs(cfg, 2, 1, 4095)["kv_read"].bytes_read == full["kv_read"].bytes_read
    # causal prefill of 8,192 tokens: query i sees min(i + 1, 4096) keys
    pairs = 4096 * 4097 // 2 + (8192 - 4096) * 4096
    c = counts.op_costs(cfg, 1, 8192, 0)
    assert c["attn_scores"].flops == 32 * 32 * 2 * 128 * pairs
    assert c["softmax"].flops == 32 * 32 * 6 * pairs
    assert c["kv_read"].bytes_read == 2 * 32 * 8 * 128 * 8192 * 2  # the pass holds all 8,192


def test_gemma_2_decode_by_hand():
    cfg = get_model("gemma-2-9b")
    c = counts.op_costs(cfg, 1, 1, 8191)  # context 8,192
    per_key = 2 * 8 * 256 * 2  # key and value, 8 KV heads of 256, bf16
    assert c["kv_read"].bytes_read == per_key * (21 * 8192 + 21 * 4096)
    assert sum(c[op].flops for op in F.ATTENTION_OPS) == 4 * 16 * 256 * (21 * 8192 + 21 * 4096)
    # the extra norms: 4 FLOPs per element of the 3,584-wide hidden state, in each of 42 layers
    assert c["post_attn_norm"] == c["post_mlp_norm"] == c["attn_norm"] == counts.Cost(
        42 * 4 * 3584, 42 * 2 * (3584 + 3584), 42 * 2 * 3584)
    # GeGLU: tanh-GELU (9) and the product with up (1) per element of the 14,336 intermediate
    assert c["mlp_act"].flops == 42 * 10 * 14336
    ops = F.ops_for(cfg)
    assert ops.index("o_proj") < ops.index("post_attn_norm") < ops.index("residual")
    assert ops.index("down_proj") + 1 == ops.index("post_mlp_norm")


def test_gemma_3_qk_norms_by_hand():
    cfg = get_model("gemma-3-1b")
    c = counts.op_costs(cfg, 3, 1, 99)
    # 3 tokens x 4 query heads x 256 (1 KV head x 256 for k), 26 layers, weights of 256
    assert c["q_norm"] == counts.Cost(26 * 4 * 3 * 1024, 26 * 2 * (3 * 1024 + 256), 26 * 2 * 3 * 1024)
    assert c["k_norm"] == counts.Cost(26 * 4 * 3 * 256, 26 * 2 * (3 * 256 + 256), 26 * 2 * 3 * 256)
    assert F.ops_for(cfg).index("k_norm") + 1 == F.ops_for(cfg).index("rope")


def test_op_elements_stay_vectorised_and_equal_op_costs():
    cfg = get_model("gemma-2-9b")
    batch, past = np.array([[1], [4]]), np.array([0, 4095, 4096, 8191])
    elements = counts.op_elements(cfg, batch, 1, past, absorbed=True)
    for op in ("kv_read", "attn_scores", "softmax"):
        assert elements[op][0].shape == (2, 4)
    for b, p in [(1, 0), (4, 4096), (1, 8191)]:
        costs = counts.op_costs(cfg, b, 1, p, weight_dtype="bf16")
        i, j = list(batch[:, 0]).index(b), list(past).index(p)
        for op in ("kv_read", "attn_scores", "attn_values"):
            f, w, kv, act = (x[i, j] for x in elements[op])
            assert costs[op].flops == f and costs[op].bytes == 2 * (w + kv + act)


def test_symbolic_windowed_expressions_reduce_to_the_global_ones():
    e = F.model_expressions(windowed=True)
    g = F.model_expressions()
    for op in ("kv_read", "attn_scores", "softmax", "attn_values"):
        for x, y in zip(e[op], g[op], strict=True):
            assert sp.simplify(x.subs(F.n_local, 0) - y) == 0
