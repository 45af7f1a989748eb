"""The serving frontier (issue 29): 4-bit formats in the calculator, the 2025-26 chips, the
FlashMLA cache, data-parallel attention with expert parallelism. Every expected number is a hand
computation from a datasheet or a format's definition, written out here."""

import pytest

import llm_roofline as lr
from llm_roofline import kv as kv_module
from llm_roofline.deployment import setup


def test_w4a4_on_fp4_tensor_cores_and_w4a16_without_them():
    """NVFP4 weights on a B200 multiply on its FP4 tensor cores (W4A4, 9 PFLOP/s dense); on an
    H100, which has no FP4 math, they are dequantised to BF16 (W4A16, 989.4 TFLOP/s)."""
    b200 = setup("llama-3-70b", "B200", weight_dtype="nvfp4")
    assert b200.compute_dtype == "fp4" and b200.peak == 9000e12
    assert "W4A4" in b200.precision and "weights and activations" in b200.precision
    h100 = setup("llama-3-70b", "H100", weight_dtype="nvfp4")
    assert h100.compute_dtype == "bf16" and h100.peak == pytest.approx(989.4e12)
    assert "weight-only, W4A16" in h100.precision
    # an FP8 activation path on the H100 is W4A8, chosen explicitly
    assert "W4A8" in setup("llama-3-70b", "H100", weight_dtype="mxfp4", compute_dtype="fp8").precision
    # bytes: 4.5 bits a weight for NVFP4, 4.25 for MXFP4, in the body; the head stays BF16
    assert b200.sizes["weight"] == 4.5 / 8 and b200.sizes["head"] == 2
    assert setup("llama-3-70b", "B200", weight_dtype="mxfp4").sizes["weight"] == 4.25 / 8


def test_4_bit_kv_cache_and_activations_are_formats_too():
    s = setup("llama-3-70b", "B200", kv_dtype="nvfp4", act_dtype="mxfp8")
    assert s.sizes["kv"] == 9 / 16 and s.sizes["act"] == 33 / 32


def test_fp8_mla_cache_is_counted_as_flashmla_stores_it():
    """DeepSeek-V3, 61 layers: FP8 latent cache 656 B a token a layer (512 FP8 + 4 FP32 scales
    + 64 BF16 rope), 61 x 656 = 40,016 B a token; BF16: 61 x 576 x 2 = 70,272 B."""
    cfg = lr.get_model("deepseek-v3")
    for kv, per_token in (("fp8", 61 * 656), ("bf16", 61 * 576 * 2)):
        s = setup(cfg, "H200", kv_dtype=kv)
        assert cfg.kv_elements_per_token * s.sizes["kv"] == pytest.approx(per_token)
    mem = lr.memory("deepseek-v3", "H200", 1, 1000, 24, n_gpus=8, weight_dtype="fp8",
                    kv_dtype="fp8")
    assert mem.kv_cache == pytest.approx(1024 * 61 * 656)
    # the MLA decode attention's intensity over an FP8 cache: 484 FLOPs/byte counted at
    # 576 B, 424.6 at 656 B (FLOPs of one token's scores and values over one cached token)
    assert kv_module.attention_intensity("deepseek-v3", kv_dtype="fp8") == pytest.approx(
        kv_module.attention_intensity("deepseek-v3", kv_dtype="bf16") * 2 * 576 / 656)
