"""The calculator's activation memory, against a hand count of each model's working set.

``estimate._activation_elements_per_token(cfg, n_gpus)`` is the elements one prompt token
needs at once in one layer: the residual stream and its normed copy (``2 * hidden``) plus the
wider of the attention block's projections (this GPU's share of the heads) and the MLP's
intermediate (gate and up, ``2 * width`` per expert a token uses). Each number below is
worked out from the published config by hand.
"""

import importlib

import pytest

from llm_roofline.models import get_model

# the module, not the function the package re-exports under its name
E = importlib.import_module("llm_roofline.vram")


@pytest.mark.parametrize(
    ("name", "n_gpus", "elements"),
    [
        # Llama-3-70B: hidden 8192, 64 query and 8 KV heads of 128, MLP width 28672.
        # attention (64 + 2*8) * 128 = 10240 < MLP 2 * 28672 = 57344
        ("llama-3-70b", 1, 2 * 8192 + 2 * 28672),
        # 8 GPUs: 8 query heads and 1 KV head each: (8 + 2) * 128 = 1280 < 57344 / 8 = 7168
        ("llama-3-70b", 8, 2 * 8192 + 7168),
        # Llama-2-7B (MHA): attention (32 + 2*32) * 128 = 12288 < MLP 2 * 11008 = 22016
        ("llama-2-7b", 1, 2 * 4096 + 22016),
        # Mixtral: no dense layer; 2 experts of 14336 per token: 57344 > attention 6144
        ("mixtral-8x7b", 1, 2 * 4096 + 57344),
        # DeepSeek-V3 (MLA): 128 heads x (q 192 + k_nope 128 + v 128) + latent 512 + rope 64
        # = 57920, wider than the dense MLP 2 * 18432 and 9 experts x 2 x 2048 (both 36864)
        ("deepseek-v3", 1, 2 * 7168 + 128 * 448 + 576),
        # 8 GPUs: the heads split (16 x 448 = 7168), the latent stays whole (576)
        ("deepseek-v3", 8, 2 * 7168 + 7168 + 576),
    ],
)
def test_activation_elements_per_token_by_hand(name, n_gpus, elements):
    assert E.activation_elements_per_token(get_model(name), n_gpus) == elements


def test_memory_activations_by_hand():
    # Llama-3-70B, 2 prompts of 1,000 tokens in one chunk (2,000 tokens <= 8,192), bf16:
    # 2,000 tokens x 73,728 elements x 2 bytes, plus the last position's fp32 logits
    # (2 sequences x 128,256 vocabulary x 4 bytes)
    mem = E.memory(get_model("llama-3-70b"), "h100", 2, 1000, 10)
    assert mem.activations == 2000 * 73_728 * 2 + 2 * 128_256 * 4 == 295_938_048
    # the prefill chunk caps the tokens held at once: a pass packs whole prompts, 4 of 2,000
    # tokens in 8,192, so 8,000 tokens (not 8 x 2,000 = 16,000; not 8,192)
    mem = E.memory(get_model("llama-3-70b"), "h100", 8, 2000, 10)
    assert mem.activations == 8000 * 73_728 * 2 + 8 * 128_256 * 4
