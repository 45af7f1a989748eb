"""ModelConfig: built-in configs against published sizes, exact counts, config.json parsing."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import llm_roofline as lr
from llm_roofline.formulas import ops_for
from llm_roofline.models import ModelConfig, get_model, list_models, model_info

BUILT_IN = [
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3-8b",
    "llama-3-70b",
    "mistral-7b",
    "mixtral-8x7b",
    "qwen2.5-7b",
    "qwen2.5-72b",
    "deepseek-v3",
    "mistral-7b-v0.1",
    "gemma-2-9b",
    "gemma-3-1b",
    "llama-3.1-405b",
    "qwen3-235b-a22b",
    "gpt-oss-120b",
    "deepseek-r1",
]


def test_the_issue_models_are_built_in():
    assert set(BUILT_IN) <= set(list_models())
    assert lr.list_models() == list_models()


@pytest.mark.parametrize("name", BUILT_IN)
def test_parameter_count_matches_published_size_within_half_a_percent(name):
    published = model_info(name)["params"]
    assert get_model(name).n_params == pytest.approx(published, rel=0.005)


def test_mixtral_active_parameters_match_published_within_1_percent():
    assert get_model("mixtral-8x7b").n_active_params == pytest.approx(12.9e9, rel=0.01)


def test_deepseek_v3_total_and_active():
    cfg = get_model("deepseek-v3")
    assert cfg.n_params == pytest.approx(671e9, rel=0.001)
    # The library's convention: every component a token uses, the embedding table and the LM
    # head included, plus 8 of the 256 routed experts of each MoE layer.
    counts = cfg.param_counts()
    used = sum(v for k, v in counts.items() if k != "routed_experts")
    assert cfg.n_active_params == used + counts["routed_experts"] * 8 // 256 == 37_552_282_624
    # the published "37B activated", rounded: 1.5 % below our count
    assert cfg.n_active_params == pytest.approx(37e9, rel=0.02)


@pytest.mark.parametrize("name", BUILT_IN)
def test_params_by_op_add_up_and_name_real_ops(name):
    cfg = get_model(name)
    by_op = cfg.params_by_op()
    assert sum(by_op.values()) == cfg.n_params
    assert set(by_op) <= set(ops_for(cfg))
    attention = set(by_op) - {"embed", "attn_norm", "post_attn_norm", "mlp_norm", "router",
                              "gate_proj", "up_proj", "down_proj", "post_mlp_norm", "final_norm",
                              "lm_head"}
    assert sum(by_op[op] for op in attention) == cfg.n_layers * cfg.attention_params()


def test_llama_2_7b_exact_count():
    # 2 * 32000 * 4096 (embedding, head) + 32 * (4 * 4096^2 + 3 * 4096 * 11008 + 2 * 4096) + 4096
    assert get_model("llama-2-7b").n_params == 6_738_415_616
    # Llama-2-13B by hand: embeddings and head, 40 layers of attention, MLP and two norms
    per_layer = 4 * 5120**2 + 3 * 5120 * 13824 + 2 * 5120
    assert get_model("llama-2-13b").n_params == 2 * 32000 * 5120 + 40 * per_layer + 5120
    assert get_model("llama-2-13b").n_params == 13_015_864_320


def test_dense_model_active_equals_total():
    for name in ("llama-3-8b", "qwen2.5-72b"):
        cfg = get_model(name)
        assert cfg.n_active_params == cfg.n_params
        assert not cfg.is_moe and not cfg.is_mla


def test_mixtral_counts_by_component():
    cfg = get_model("mixtral-8x7b")
    counts = cfg.param_counts()
    assert counts["mlp"] == 0 and counts["shared_experts"] == 0
    assert counts["routed_experts"] == 32 * 8 * 3 * 4096 * 14336
    assert counts["router"] == 32 * 4096 * 8
    assert cfg.n_active_params == cfg.n_params - counts["routed_experts"] * 6 // 8


def test_deepseek_v3_structure():
    cfg = get_model("deepseek-v3")
    assert cfg.is_moe and cfg.is_mla
    assert (cfg.first_dense_layers, cfg.n_moe_layers) == (3, 58)
    assert cfg.head_dim == 192
    counts = cfg.param_counts()
    assert counts["mlp"] == 3 * 3 * 7168 * 18432
    assert counts["shared_experts"] == 58 * 3 * 7168 * 2048
    assert counts["routed_experts"] == 58 * 256 * 3 * 7168 * 2048
    attention = (
        7168 * 1536 + 1536 + 1536 * 128 * 192  # queries through the q LoRA
        + 7168 * (512 + 64) + 512 + 512 * 128 * (128 + 128)  # latent, rope key, up-projection
        + 128 * 128 * 7168  # output
    )
    assert cfg.attention_params() == attention


def test_qwen_has_qkv_biases():
    cfg = get_model("qwen2.5-7b")
    assert cfg.qkv_bias
    no_bias = ModelConfig(**{**cfg.__dict__, "qkv_bias": False})
    assert cfg.n_params - no_bias.n_params == 28 * (28 * 128 + 2 * 4 * 128)


@pytest.mark.parametrize(
    ("name", "kv_bytes"),
    [
        ("llama-2-7b", 2 * 32 * 32 * 128 * 2),  # MHA: 32 KV heads
        ("llama-2-13b", 2 * 40 * 40 * 128 * 2),  # MHA: 40 KV heads
        ("llama-2-70b", 2 * 80 * 8 * 128 * 2),  # GQA: 8 KV heads, not 64 query heads
        ("llama-3-70b", 327_680),
        ("qwen2.5-7b", 2 * 28 * 4 * 128 * 2),
        ("mixtral-8x7b", 2 * 32 * 8 * 128 * 2),
        ("deepseek-v3", 61 * (512 + 64) * 2),  # MLA: the compressed latent and the rope key
    ],
)
def test_kv_cache_bytes_per_token(name, kv_bytes):
    assert get_model(name).kv_cache_bytes_per_token("bf16") == kv_bytes
    if name != "deepseek-v3":  # an FP8 latent is not half of it (below)
        assert get_model(name).kv_cache_bytes_per_token("fp8") == kv_bytes // 2


def test_fp8_latent_cache_is_flashmla_656_bytes_for_every_caller():
    """DeepSeek-V3's FP8 latent, as FlashMLA stores it: 512 FP8 numbers, 512 / 128 = 4 FP32
    scales and 64 BF16 rope numbers, 656 bytes a token a layer (not 576), 61 layers. The
    model's per-token size, the memory planner's and the traffic model's agree on it."""
    from llm_roofline import kv
    from llm_roofline.deployment import kv_bytes_per_element

    cfg = get_model("deepseek-v3")
    by_hand = 61 * (512 * 1 + 4 * 4 + 64 * 2)
    assert by_hand == 40_016
    assert cfg.kv_cache_bytes_per_token("fp8") == by_hand
    assert cfg.kv_elements_per_token * kv_bytes_per_element(cfg, "fp8") == pytest.approx(by_hand)
    per_token = kv.step_traffic(cfg, 1, 1001, kv_dtype="fp8")["kv"] / 1001
    assert per_token == pytest.approx(by_hand)
    assert cfg.kv_cache_bytes_per_token("bf16") == 61 * 576 * 2


def test_explicit_head_dim_is_used_not_hidden_over_heads():
    # Mistral-NeMo-like: hidden 5120, 32 heads, but head_dim 128 (not 160)
    config = _llama_dict(
        hidden_size=5120, num_attention_heads=32, num_key_value_heads=8, head_dim=128
    )
    cfg = ModelConfig.from_hf_config(config)
    assert cfg.head_dim == 128
    assert cfg.kv_cache_bytes_per_token("bf16") == 2 * 4 * 8 * 128 * 2
    assert ModelConfig.from_hf_config({**config, "head_dim": None}).head_dim == 160


def test_tied_embeddings_drop_the_head():
    untied = ModelConfig.from_hf_config(_llama_dict())
    tied = ModelConfig.from_hf_config(_llama_dict(tie_word_embeddings=True))
    assert untied.n_params - tied.n_params == 1000 * 256


def test_mqa_and_missing_kv_heads():
    assert ModelConfig.from_hf_config(_llama_dict(num_key_value_heads=1)).group_size == 4
    mha = _llama_dict()
    del mha["num_key_value_heads"]
    assert ModelConfig.from_hf_config(mha).n_kv_heads == 4
    assert ModelConfig.from_hf_config(_llama_dict(num_key_value_heads=None)).n_kv_heads == 4


@pytest.mark.parametrize("value", [0, -8, 2.5, "8", True])
def test_bad_kv_heads_are_not_read_as_multi_head(value):
    with pytest.raises(ValueError, match="num_key_value_heads"):
        ModelConfig.from_hf_config(_llama_dict(num_key_value_heads=value))


def test_a_window_that_never_binds_changes_nothing():
    mistral = json.loads(lr.models._MODELS.joinpath("mistral-7b.json").read_text())
    assert mistral["sliding_window"] is None  # v0.3: full attention
    # a window the context never reaches, or one the config turns off, changes nothing
    far = ModelConfig.from_hf_config({**mistral, "sliding_window": 32768}, name="mistral-7b")
    assert far == get_model("mistral-7b") and far.sliding_window == 0
    qwen = json.loads(lr.models._MODELS.joinpath("qwen2.5-7b.json").read_text())
    assert qwen["use_sliding_window"] is False and qwen["sliding_window"] == 131072
    short = {**qwen, "sliding_window": 4096}
    assert ModelConfig.from_hf_config(short, name="qwen2.5-7b") == get_model("qwen2.5-7b")
    # turned on, Qwen2 windows the layers from max_window_layers on: 28 of 28 means none
    assert qwen["max_window_layers"] == 28
    assert ModelConfig.from_hf_config({**short, "use_sliding_window": True}).sliding_window == 0
    on = ModelConfig.from_hf_config({**short, "use_sliding_window": True, "max_window_layers": 20})
    assert on.layer_types == ("full_attention",) * 20 + ("sliding_attention",) * 8
    assert on.n_windowed_layers == 8


def _llama_dict(**overrides):
    config = {
        "model_type": "llama",
        "vocab_size": 1000,
        "hidden_size": 256,
        "intermediate_size": 688,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "max_position_embeddings": 2048,
    }
    config.update(overrides)
    return config


@pytest.mark.parametrize(
    "field",
    ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
     "num_attention_heads", "max_position_embeddings"],
)
def test_missing_field_names_it(field):
    config = _llama_dict()
    del config[field]
    with pytest.raises(ValueError, match=field):
        ModelConfig.from_hf_config(config)


def test_bad_configs_raise_value_error():
    with pytest.raises(ValueError, match="model_type 'gpt2'"):
        ModelConfig.from_hf_config({**_llama_dict(), "model_type": "gpt2"})
    with pytest.raises(ValueError, match="n_kv_heads"):
        ModelConfig.from_hf_config(_llama_dict(num_key_value_heads=3))
    with pytest.raises(ValueError, match="hidden_size"):
        ModelConfig.from_hf_config(_llama_dict(hidden_size=-256))
    with pytest.raises(ValueError, match="head_dim"):
        ModelConfig.from_hf_config(_llama_dict(hidden_size=250))
    with pytest.raises(ValueError, match="n_experts_per_token"):
        ModelConfig.from_hf_config(
            {**_llama_dict(), "model_type": "mixtral", "num_local_experts": 2,
             "num_experts_per_tok": 3}
        )
    with pytest.raises(ValueError, match="moe_layer_freq"):
        config = json.loads(lr.models._MODELS.joinpath("deepseek-v3.json").read_text())
        ModelConfig.from_hf_config({**config, "moe_layer_freq": 2})
    with pytest.raises(ValueError, match="dict"):
        ModelConfig.from_hf_config("config.json")


def test_unknown_model_names_the_built_ins():
    with pytest.raises(ValueError, match="llama-3-70b"):
        get_model("llama-4-9000b")


@given(
    layers=st.integers(1, 8),
    kv=st.integers(1, 8),
    group=st.integers(1, 8),
    head_dim=st.sampled_from([16, 32, 64, 128]),
    hidden=st.integers(8, 512),
    ff=st.integers(8, 2048),
    vocab=st.integers(2, 5000),
    tie=st.booleans(),
)
def test_dense_count_equals_the_hand_formula(layers, kv, group, head_dim, hidden, ff, vocab, tie):
    heads = kv * group
    cfg = ModelConfig.from_hf_config(
        _llama_dict(
            num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
            head_dim=head_dim, hidden_size=hidden, intermediate_size=ff, vocab_size=vocab,
            tie_word_embeddings=tie,
        )
    )
    attn = 2 * hidden * heads * head_dim + 2 * hidden * kv * head_dim
    per_layer = attn + 3 * hidden * ff + 2 * hidden
    expected = (1 if tie else 2) * vocab * hidden + layers * per_layer + hidden
    assert cfg.n_params == cfg.n_active_params == expected
    assert cfg.kv_elements_per_token == 2 * layers * kv * head_dim


@given(
    field=st.sampled_from(["hidden_size", "num_hidden_layers", "vocab_size", "intermediate_size"]),
    value=st.integers(-10, 0),
)
def test_non_positive_sizes_raise(field, value):
    with pytest.raises(ValueError):
        ModelConfig.from_hf_config(_llama_dict(**{field: value}))


def test_the_2025_models_by_hand():
    """Each count from its config.json by hand.

    Qwen3-235B-A22B: 94 layers of attention (q and o 4096 x 64 x 128, k and v 4096 x 4 x 128,
    q/k norms of 128) and 128 experts of 3 x 4096 x 1536, top 8; gpt-oss-120b: 36 layers,
    attention 2880 x 64 x 64 (q, o) and 2880 x 8 x 64 (k, v) with biases, 128 experts of
    3 x 2880 x 2880, top 4, every other layer a 128-token window."""
    qwen = get_model("qwen3-235b-a22b")
    attention = 94 * (2 * 4096 * 64 * 128 + 2 * 4096 * 4 * 128 + 2 * 128)
    experts = 94 * 128 * 3 * 4096 * 1536
    assert qwen.param_counts()["attention"] == attention
    assert qwen.param_counts()["routed_experts"] == experts
    assert qwen.n_active_params == pytest.approx(22.2e9, rel=0.01) and qwen.qk_norm
    oss = get_model("gpt-oss-120b")
    assert oss.param_counts()["routed_experts"] == 36 * 128 * 3 * 2880 * 2880
    assert oss.param_counts()["attention"] == 36 * (2 * 2880 * 4096 + 2 * 2880 * 512
                                                    + 4096 + 2 * 512)
    assert oss.sliding_window == 128 and oss.n_windowed_layers == 18
    assert oss.layer_types[:2] == ("sliding_attention", "full_attention")
    # the published 5.13B active leaves the 0.58B embedding out
    embedding = 201088 * 2880
    assert oss.n_active_params - embedding == pytest.approx(5.13e9, rel=0.001)
    r1, v3 = get_model("deepseek-r1"), get_model("deepseek-v3")
    assert r1.param_counts() == v3.param_counts() and r1.kv_elements_per_token == 61 * 576
    big = get_model("llama-3.1-405b")
    assert big.n_params == 126 * (2 * 16384**2 + 2 * 16384 * 1024 + 3 * 16384 * 53248
                                  + 2 * 16384) + 2 * 128256 * 16384 + 16384
