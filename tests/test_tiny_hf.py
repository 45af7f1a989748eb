"""The tiny model loads real Hugging Face Llama weights and gives transformers' own logits.

Each test builds a small ``LlamaForCausalLM`` with ``transformers`` (a test-only dependency,
in requirements-dev.txt, with a CPU build of ``torch``), loads its ``state_dict()`` into
``TinyLlama`` through ``ModelConfig.from_hf_config(config.to_dict())``, and compares the
logits of a prefill and of several decode steps with the model's own forward pass (with its
own KV cache). Tied and untied embeddings; multi-head, grouped-query and multi-query
attention; ``head_dim`` different from ``hidden_size / num_attention_heads``; Qwen2's biases.

Without torch and transformers the module is skipped on a developer's machine, but fails in CI
(``CI`` set), where requirements-dev.txt must have installed them.
"""

import dataclasses
import json
import os

import numpy as np
import pytest

try:
    import torch
    from safetensors.numpy import load_file
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
except ImportError:
    if os.environ.get("CI"):
        raise  # CI installs requirements-dev.txt: these tests must run there
    pytest.skip("needs torch and transformers (pip install -r requirements-dev.txt)",
                allow_module_level=True)

from llm_roofline.models import ModelConfig
from llm_roofline.tiny import TinyLlama

HIDDEN, HEADS = 32, 4
ATTENTION = {  # n_kv_heads, head_dim: MHA with hidden/heads, GQA and MQA with another head_dim
    "MHA": (4, 8),
    "GQA-head_dim-12": (2, 12),
    "MQA-head_dim-16": (1, 16),
}
PROMPT, STEPS, BATCH = 7, 4, 2
# Largest difference allowed, as a fraction of the largest logit. Seen: up to 9.5e-7 in
# float32, 3.0e-7 in float64 (36 models, 3 seeds), where transformers still computes the
# RMSNorm statistic and the RoPE angles in float32; a wrong head layout, RoPE pairing or cache
# position differs by O(1).
TOL = {torch.float64: 1.5e-6, torch.float32: 4e-6}


FAMILIES = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}


def hf_llama(attention: str, tied: bool, dtype, seed: int = 0, family: str = "llama"):
    """A transformers Llama (or Qwen2: biases on q, k, v) with random weights of O(1) logits,
    norm weights included."""
    n_kv_heads, head_dim = ATTENTION[attention]
    config_class, model_class = FAMILIES[family]
    config = config_class(
        vocab_size=101, hidden_size=HIDDEN, intermediate_size=72, num_hidden_layers=2,
        num_attention_heads=HEADS, num_key_value_heads=n_kv_heads, head_dim=head_dim,
        max_position_embeddings=64, rope_theta=500.0, rms_norm_eps=1e-5,
        tie_word_embeddings=tied,
    )
    torch.manual_seed(seed)
    model = model_class(config).to(dtype).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, 1.0 / p.shape[-1] ** 0.5)
    return model


def tiny_config(model) -> ModelConfig:
    config = model.config.to_dict()
    # transformers 5 writes rope_theta inside rope_parameters; from_hf_config reads the
    # top-level key of the config.json files on the Hub
    return ModelConfig.from_hf_config(config, name="hf-model")


def hf_logits(model, ids):
    """transformers' logits for a prefill of PROMPT tokens, then one decode step per token."""
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(ids[:, :PROMPT]), use_cache=True)
        logits, cache = [out.logits.numpy()], out.cache
        for j in range(PROMPT, ids.shape[1]):
            out = model(input_ids=torch.from_numpy(ids[:, j:j + 1]), cache=cache, use_cache=True)
            logits.append(out.logits.numpy())
            cache = out.cache
    return logits


def tiny_logits(tiny, ids):
    logits, cache = tiny.prefill(ids[:, :PROMPT], max_len=ids.shape[1])
    steps = [logits]
    for j in range(PROMPT, ids.shape[1]):
        step, cache = tiny.decode(ids[:, j], cache)
        steps.append(step[:, None])
    return steps


def assert_same_logits(tiny_steps, hf_steps, tol):
    assert len(tiny_steps) == len(hf_steps) == 1 + STEPS
    scale = max(np.abs(h).max() for h in hf_steps)
    assert scale > 1  # O(1) logits: a real comparison, not of near-zero numbers
    for i, (t, h) in enumerate(zip(tiny_steps, hf_steps, strict=True)):
        assert t.shape == h.shape and t.dtype == h.dtype, i
        np.testing.assert_allclose(t, h, rtol=0, atol=tol * scale, err_msg=f"pass {i}")
    argmax = [t.argmax(-1) for t in tiny_steps]
    assert all((a == h.argmax(-1)).all() for a, h in zip(argmax, hf_steps, strict=True))


def token_ids(vocab):
    return np.random.default_rng(1).integers(0, vocab, (BATCH, PROMPT + STEPS))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("attention", ATTENTION)
def test_state_dict_gives_transformers_logits(attention, tied, dtype):
    model = hf_llama(attention, tied, dtype)
    cfg = tiny_config(model)
    assert (cfg.n_kv_heads, cfg.head_dim, cfg.tie_embeddings) == (*ATTENTION[attention], tied)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    assert "lm_head.weight" in state  # listed even when tied: the case of issue 8
    tiny = TinyLlama(cfg, state)
    ids = token_ids(cfg.vocab_size)
    assert_same_logits(tiny_logits(tiny, ids), hf_logits(model, ids), TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_qwen2_with_qkv_biases(tied, dtype):
    model = hf_llama("GQA-head_dim-12", tied, dtype, family="qwen2")
    cfg = tiny_config(model)
    assert cfg.qkv_bias and cfg.head_dim == 12
    tiny = TinyLlama(cfg, {k: v.numpy() for k, v in model.state_dict().items()})
    ids = token_ids(cfg.vocab_size)
    assert_same_logits(tiny_logits(tiny, ids), hf_logits(model, ids), TOL[dtype])


def test_a_saved_snapshot_loads(tmp_path):
    """save_pretrained's config.json and model.safetensors, read back without torch."""
    model = hf_llama("GQA-head_dim-12", True, torch.float32, seed=2)
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    tiny = TinyLlama(ModelConfig.from_hf_config(config), load_file(tmp_path / "model.safetensors"))
    ids = token_ids(tiny.cfg.vocab_size)
    assert_same_logits(tiny_logits(tiny, ids), hf_logits(model, ids), TOL[torch.float32])


def test_an_untied_head_is_refused_by_a_tied_config():
    model = hf_llama("GQA-head_dim-12", False, torch.float32)
    cfg = dataclasses.replace(tiny_config(model), tie_embeddings=True)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match="lm_head.weight differs from model.embed_tokens.weight"):
        TinyLlama(cfg, state)


@pytest.mark.parametrize("logits", ["last", "all"])
@pytest.mark.parametrize("attention", ["MHA", "GQA-head_dim-12"])
def test_generate_does_transformers_generates_flops(attention, logits):
    """transformers' ``generate`` computes the LM head at each prompt's last position only
    (``logits_to_keep=1``); ``logits_to_keep=0`` asks for every position. The tiny model's
    ``generate`` makes the same tokens, and its tallied matmul FLOPs (the linear layers and
    the attention's two products) equal what ``torch.utils.flop_counter.FlopCounterMode``
    counts in transformers' eager attention (which multiplies the whole masked block, as the
    tiny model does with ``skip_masked=False``), pass by pass summed, exactly."""
    from torch.utils.flop_counter import FlopCounterMode

    from llm_roofline import counts
    from llm_roofline import formulas as F
    from llm_roofline.tiny import Tally

    model = hf_llama(attention, False, torch.float32)
    model.config._attn_implementation = "eager"
    cfg = tiny_config(model)
    tiny = TinyLlama(cfg, {k: v.numpy() for k, v in model.state_dict().items()},
                     skip_masked=False)
    ids = token_ids(cfg.vocab_size)[:, :PROMPT]
    options = {} if logits == "last" else {"logits_to_keep": 0}
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = model.generate(torch.from_numpy(ids), attention_mask=torch.ones(ids.shape),
                             max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False,
                             pad_token_id=0, **options)
    tally = Tally()
    tokens = tiny.generate(ids, STEPS, tally=tally, logits=logits)
    np.testing.assert_array_equal(tokens, out.numpy())
    matmuls = set(F.LINEAR_OPS) | {"attn_scores", "attn_values"}
    counted = sum(c.flops for phase in ("prefill", "decode")
                  for op, c in tally.costs(phase).items() if op in matmuls)
    assert counted == counter.get_total_flops()
    head = sum(counter.get_flop_counts()["LlamaForCausalLM.lm_head"].values())
    positions = BATCH * (PROMPT if logits == "all" else 1) + BATCH * (STEPS - 1)
    assert head == 2 * positions * HIDDEN * cfg.vocab_size
    # and the analytic count: op_costs of the prefill with the same logits setting
    prefill = counts.op_costs(cfg, BATCH, PROMPT, weight_dtype="fp32", causal=False,
                              logits=logits)
    assert tally.costs("prefill") == prefill
