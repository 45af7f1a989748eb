"""Bad model input gives a one-line ValueError naming the field and its value, never a traceback.

config.json fields are checked one by one (issue 14): string booleans and numbers, nulls, zeros,
huge and nested values; config files and folders (issue 8: named from the config itself);
built-in model names with suggestions for near misses.
"""

import json
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llm_roofline as lr
from llm_roofline.models import SUPPORTED_MODEL_TYPES, ModelConfig, get_model, load_config, model_info


def _llama(**overrides):
    config = {"model_type": "llama", "vocab_size": 1000, "hidden_size": 256,
              "intermediate_size": 688, "num_hidden_layers": 4, "num_attention_heads": 4,
              "num_key_value_heads": 4, "max_position_embeddings": 2048}
    return config | overrides


def _refused(config, *words):
    with pytest.raises(ValueError) as info:
        ModelConfig.from_hf_config(config)
    message = str(info.value)
    assert "\n" not in message and len(message) < 400, message
    for word in words:
        assert word in message, (word, message)
    return message


# --- config.json fields ------------------------------------------------------------------------
@pytest.mark.parametrize("field", ["tie_word_embeddings", "attention_bias"])
@pytest.mark.parametrize("value", ["false", "true", 0, 1, "no"])
def test_string_and_number_booleans_are_refused(field, value):
    _refused(_llama(**{field: value}), f"config.json {field}", repr(value))


def test_real_booleans_are_read():
    untied = ModelConfig.from_hf_config(_llama(tie_word_embeddings=False))
    tied = ModelConfig.from_hf_config(_llama(tie_word_embeddings=True))
    assert untied.n_params - tied.n_params == 1000 * 256  # the head: 14.96 vs 13.98 GiB case
    assert not ModelConfig.from_hf_config(_llama(attention_bias=False)).qkv_bias


@pytest.mark.parametrize("field", ["hidden_size", "vocab_size", "num_hidden_layers",
                                   "num_attention_heads", "intermediate_size",
                                   "max_position_embeddings", "head_dim", "num_key_value_heads"])
@pytest.mark.parametrize("value", ["4096", 4096.0, 0, -4, True, [4], 10**30])
def test_every_size_must_be_a_json_integer_in_range(field, value):
    _refused(_llama(**{field: value}), f"config.json {field}")


def test_zero_heads_is_an_error_not_a_division_by_zero():
    _refused(_llama(num_attention_heads=0, head_dim=None), "num_attention_heads", "got 0")


def test_a_huge_vocabulary_is_refused_before_any_overflow():
    _refused(_llama(vocab_size=10**30), "vocab_size", "1,099,511,627,776")


@pytest.mark.parametrize("value", [None, "abc", "10000", math.inf, math.nan, -1.0, 0, [1e4]])
def test_rope_theta_is_a_positive_finite_number(value):
    _refused(_llama(rope_theta=value), "config.json rope_theta")


def test_numbers_that_are_numbers_are_read():
    cfg = ModelConfig.from_hf_config(_llama(rope_theta=500000, rms_norm_eps=1e-5))
    assert (cfg.rope_theta, cfg.norm_eps) == (500000.0, 1e-5)
    assert ModelConfig.from_hf_config(_llama()).rope_theta == 10000.0  # absent: the default


@pytest.mark.parametrize("value", [math.inf, 0.0, "1e-6", None])
def test_norm_eps_is_checked(value):
    _refused(_llama(rms_norm_eps=value), "rms_norm_eps")


def test_long_and_nested_values_are_shortened():
    message = _refused(_llama(hidden_size="x" * 100_000), "hidden_size", "100002 characters")
    assert len(message) < 300
    nested = []
    for _ in range(100_000):
        nested = [nested]
    _refused(_llama(hidden_size=nested), "hidden_size")
    _refused(_llama(model_type="y" * 10_000), "model_type", "characters")


def test_the_activation_is_read_and_checked():
    assert ModelConfig.from_hf_config(_llama(hidden_act="silu")).mlp_activation == "silu"
    _refused(_llama(hidden_act="relu"), "hidden_act", "'relu'")
    _refused(_llama(hidden_act=5), "hidden_act")


def test_unsupported_model_types_list_the_supported_ones():
    message = _refused(_llama(model_type="gpt2"), "'gpt2'")
    assert all(t in message for t in SUPPORTED_MODEL_TYPES)
    assert {"gemma2", "gemma3", "gemma3_text", "mistral"} <= set(SUPPORTED_MODEL_TYPES)
    _refused(_llama(model_type=None), "model_type None")


def test_name_fields_are_checked():
    _refused(_llama(_name_or_path=5), "_name_or_path")
    assert ModelConfig.from_hf_config(_llama(_name_or_path="org/m")).name == "org/m"


_FIELDS = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
           "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings",
           "rope_theta", "rms_norm_eps", "tie_word_embeddings", "attention_bias", "hidden_act",
           "model_type", "_name_or_path"]
_ANYTHING = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
    st.text(max_size=20), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(), st.none()),
)


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(_FIELDS), value=_ANYTHING)
def test_any_value_of_any_field_gives_a_config_or_a_clear_error(field, value):
    try:
        cfg = ModelConfig.from_hf_config(_llama(**{field: value}))
    except ValueError as err:
        assert "\n" not in str(err) and len(str(err)) < 500
    else:
        assert cfg.n_params > 0 and math.isfinite(cfg.rope_theta)


# --- ModelConfig itself ----------------------------------------------------------------------
_BASE = dict(name="m", vocab_size=100, hidden_size=32, intermediate_size=64, n_layers=2,
             n_heads=4, n_kv_heads=2, head_dim=8)


@pytest.mark.parametrize(("field", "value"), [
    ("gated_mlp", "no"), ("tie_embeddings", "false"), ("qkv_bias", 1), ("post_norms", None),
    ("norm_eps", math.inf), ("norm_eps", 0.0), ("rope_theta", "abc"), ("rope_theta", math.nan),
    ("hidden_size", 32.0), ("n_heads", 0), ("vocab_size", 10**30), ("name", ""),
    ("mlp_activation", "relu"), ("sliding_window", True),
])
def test_model_config_refuses_bad_fields(field, value):
    with pytest.raises(ValueError, match=field) as info:
        ModelConfig(**(_BASE | {field: value}))
    assert "\n" not in str(info.value)


def test_model_config_takes_numpy_numbers_as_plain_ones():
    cfg = ModelConfig(**(_BASE | {"hidden_size": np.int64(32), "gated_mlp": np.True_,
                                  "rope_theta": np.float64(1e4)}))
    assert type(cfg.hidden_size) is int and cfg.gated_mlp is True and type(cfg.rope_theta) is float
    assert cfg == ModelConfig(**_BASE) and hash(cfg) == hash(ModelConfig(**_BASE))


# --- config files and folders ------------------------------------------------------------------
def _write(path, config):
    path.write_text(json.dumps(config))
    return path


def test_a_file_or_a_snapshot_folder_loads_named_from_the_config(tmp_path):
    stored = json.loads(lr.models._MODELS.joinpath("llama-3-8b.json").read_text())
    assert "_name_or_path" not in stored
    folder = tmp_path / "my-download"
    folder.mkdir()
    _write(folder / "config.json", stored)
    by_folder, by_file = load_config(folder), load_config(str(folder / "config.json"))
    assert by_folder == by_file
    assert by_folder.name == "my-download"  # the download's folder: never "config"
    assert by_folder.n_params == get_model("llama-3-8b").n_params
    _write(folder / "config.json", stored | {"_name_or_path": "meta-llama/Meta-Llama-3-8B"})
    assert load_config(folder).name == "meta-llama/Meta-Llama-3-8B"
    assert load_config(_write(tmp_path / "llama3.json", stored)).name == "llama3"
    # a Hugging Face cache snapshot: models--org--name/snapshots/<commit>/config.json
    snap = tmp_path / "models--meta-llama--Meta-Llama-3-8B" / "snapshots" / "62bd457b"
    snap.mkdir(parents=True)
    _write(snap / "config.json", stored)
    assert load_config(snap).name == "meta-llama/Meta-Llama-3-8B"


def _load_refused(path, *words):
    with pytest.raises(ValueError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message and len(message) < 400, message
    for word in words:
        assert word in message, (word, message)


def test_bad_paths_and_files_are_named(tmp_path):
    _load_refused("", "empty")
    _load_refused("   ", "empty")
    _load_refused(tmp_path / "nope.json", "no such file", "nope.json")
    _load_refused(tmp_path, "holds no config.json", tmp_path.name)
    (tmp_path / "empty.json").write_text("")
    _load_refused(tmp_path / "empty.json", "empty.json", "is empty")
    (tmp_path / "model.safetensors").write_bytes(b"\x00\x01\xff\xfe" * 100)
    _load_refused(tmp_path / "model.safetensors", "model.safetensors", "not a text file")
    (tmp_path / "bad.json").write_text("{hidden_size: 4096}")
    _load_refused(tmp_path / "bad.json", "bad.json", "not valid JSON")
    (tmp_path / "list.json").write_text("[1, 2]")
    _load_refused(tmp_path / "list.json", "list.json", "list")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    _load_refused(tmp_path / "deep.json", "deep.json", "too deeply")
    (tmp_path / "deep2.json").write_text(json.dumps(_llama())[:-1] + ', "x": ' + "[" * 100_000
                                         + "]" * 100_000 + "}")
    _load_refused(tmp_path / "deep2.json", "deep2.json", "too deeply")
    _write(tmp_path / "strings.json", _llama(hidden_size="4096"))
    _load_refused(tmp_path / "strings.json", "strings.json", "config.json hidden_size", "'4096'")
    _load_refused(5, "file or folder")
    _load_refused(str(tmp_path / "a\x00b.json"), "not a valid path")
    with open(tmp_path / "huge.json", "wb") as f:  # sparse: no disk written
        f.truncate(lr.models.MAX_CONFIG_BYTES + 1)
    _load_refused(tmp_path / "huge.json", "huge.json", "too large")
    deep = tmp_path / ("d" * 150)
    deep.mkdir()
    _load_refused(deep / "x.json", "no such file", "/x.json")  # a long path keeps its end


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_named(tmp_path):
    path = _write(tmp_path / "locked.json", _llama())
    path.chmod(0)
    try:
        _load_refused(path, "locked.json", "cannot read")
    finally:
        path.chmod(0o644)


# --- built-in names ------------------------------------------------------------------------------
@pytest.mark.parametrize("spelling", ["llama3-70b", "llama_3_70b", " llama-3-70b", "Llama-3-70B"])
def test_model_names_ignore_case_and_separators(spelling):
    assert get_model(spelling) == get_model("llama-3-70b")
    assert model_info(spelling)["hf_repo"] == "meta-llama/Meta-Llama-3-70B"


@pytest.mark.parametrize(("spelling", "suggested"), [
    ("llama-3-7b", "llama-3-70b"), ("lama-3-8b", "llama-3-8b"), ("deepseek-v2", "deepseek-v3"),
    ("gemma-2-9", "gemma-2-9b"),
])
def test_near_misses_get_suggestions(spelling, suggested):
    with pytest.raises(ValueError, match="did you mean") as info:
        get_model(spelling)
    assert repr(suggested) in str(info.value)
    with pytest.raises(ValueError, match="did you mean"):
        model_info(spelling)


def test_a_far_miss_lists_the_built_ins():
    with pytest.raises(ValueError, match="; known: ") as info:
        get_model("x" * 100_000)
    assert "gemma-3-1b" in str(info.value) and len(str(info.value)) < 600


def test_rope_theta_inside_rope_parameters_is_read():
    """transformers 5 writes rope_theta inside rope_parameters; it must not become 10000."""
    config = json.loads(lr.models._MODELS.joinpath("llama-3-8b.json").read_text())
    theta = config.pop("rope_theta")
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    assert ModelConfig.from_hf_config(config).rope_theta == theta == 500000.0
    config["rope_parameters"]["rope_theta"] = "abc"
    with pytest.raises(ValueError, match="rope_parameters.rope_theta"):
        ModelConfig.from_hf_config(config)
