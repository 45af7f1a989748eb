"""Element sizes: exact values, name forgiveness, group-scale overhead, bad input."""

from fractions import Fraction

import pytest

from llm_roofline.dtypes import (
    bytes_per_element,
    canonical,
    list_dtypes,
    math_class,
    mla_cache_bytes_per_element,
    nbytes,
    nominal_bits,
)


@pytest.mark.parametrize(
    "name, size",
    [("fp32", 4), ("bf16", 2), ("fp16", 2), ("fp8_e4m3", 1), ("fp8_e5m2", 1), ("int8", 1),
     ("int4", Fraction(1, 2))],
)
def test_sizes(name, size):
    assert bytes_per_element(name) == size
    assert isinstance(bytes_per_element(name), Fraction)


@pytest.mark.parametrize(
    "name, expected",
    [("BF16", "bf16"), ("bfloat16", "bf16"), ("fp8", "fp8_e4m3"), ("FP8-E4M3", "fp8_e4m3"),
     ("fp8-e5m2", "fp8_e5m2"), ("float8_e4m3fn", "fp8_e4m3"), (" Float16 ", "fp16"),
     ("INT4", "int4")],
)
def test_names_forgive_case_and_punctuation(name, expected):
    assert canonical(name) == expected


def test_group_scales_are_spread_over_the_group():
    int4_g128 = bytes_per_element("int4", group_size=128, scale_dtype="fp16")
    assert int4_g128 == Fraction(1, 2) + Fraction(2, 128)
    assert bytes_per_element("int8", group_size=64, scale_dtype="fp32") == 1 + Fraction(4, 64)


def test_awq_stores_a_zero_point_beside_each_scale():
    """AWQ (int4_zp): 4 bits a weight, and per group of 128 a 16-bit scale and a 4-bit zero:
    1/2 + (2 + 1/2)/128 = 0.51953125 bytes a weight, against 0.515625 for symmetric int4."""
    assert bytes_per_element("awq", 128) == Fraction(1, 2) + Fraction(5, 2 * 128) == 0.51953125
    assert float(bytes_per_element("gptq", 128)) == 0.515625
    assert canonical("AWQ") == "int4_zp" and bytes_per_element("int4_zp") == Fraction(1, 2)
    assert nbytes(256, "int4_zp", group_size=128) == 128 + 2 * (2 + Fraction(1, 2))


def test_nbytes_is_exact_and_counts_started_groups():
    assert nbytes(4096 * 4096, "bf16") == 33_554_432
    assert nbytes(3, "int4") == Fraction(3, 2)
    assert nbytes(256, "int4", group_size=128) == 128 + 2 * 2
    assert nbytes(129, "int4", group_size=128) == Fraction(129, 2) + 2 * 2  # two groups started
    # A whole number of groups costs exactly n x bytes_per_element.
    assert nbytes(128 * 1000, "int4", 128) == 128 * 1000 * bytes_per_element("int4", 128)


def test_unknown_dtype_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown dtype 'fp5'.*bf16.*int4"):
        bytes_per_element("fp5")
    with pytest.raises(ValueError, match="dtype must be a string"):
        canonical(16)
    assert "fp8_e4m3" in list_dtypes()


@pytest.mark.parametrize("bad", [0, -128, 1.5, True])
def test_bad_group_size(bad):
    with pytest.raises(ValueError, match="group_size"):
        bytes_per_element("int4", group_size=bad)


@pytest.mark.parametrize("bad", [-1, 2.0, None])
def test_bad_element_count(bad):
    with pytest.raises(ValueError, match="n \\(number of elements\\)"):
        nbytes(bad, "bf16")


# --- block-scaled 4-, 6- and 8-bit floating point ------------------------------------------
# Hand sizes from the format definitions (NVIDIA's NVFP4 note, 2025; OCP Microscaling Formats
# v1.0, 2023): bits of a value plus the bits of its block's scale spread over the block.
@pytest.mark.parametrize(
    "name, bits",
    [("nvfp4", 4 + 8 / 16),    # E2M1 values, one FP8 E4M3 scale per 16: 4.5 bits
     ("mxfp4", 4 + 8 / 32),    # E2M1 values, one E8M0 scale per 32: 4.25 bits
     ("mxfp6", 6 + 8 / 32),    # E2M3 values, one E8M0 scale per 32: 6.25 bits
     ("mxfp8", 8 + 8 / 32),    # E4M3 values, one E8M0 scale per 32: 8.25 bits
     ("fp4", 4), ("fp6", 6)],  # the bare elements: no scale
)
def test_block_scaled_sizes_by_hand(name, bits):
    assert bytes_per_element(name) * 8 == Fraction(bits)
    assert isinstance(bytes_per_element(name), Fraction)


def test_block_scaled_nbytes_count_started_blocks_and_the_tensor_scale():
    # a 4096 x 4096 matrix in NVFP4: 8,388,608 B of values, 1,048,576 FP8 scales, one FP32
    n = 4096 * 4096
    assert nbytes(n, "nvfp4") == n // 2 + n // 16 + 4 == 9_437_188
    assert nbytes(n, "mxfp4") == n // 2 + n // 32 == 8_912_896
    assert nbytes(n, "mxfp8") == n + n // 32
    assert nbytes(17, "nvfp4") == Fraction(17, 2) + 2 + 4  # two blocks started
    assert nbytes(0, "nvfp4") == 0
    with pytest.raises(ValueError, match="group_size must be None for nvfp4.*16"):
        bytes_per_element("nvfp4", group_size=128)


def test_math_class_and_nominal_bits_name_w4a4_and_w4a16():
    assert {math_class(n) for n in ("nvfp4", "mxfp4", "fp4", "NVFP4")} == {"fp4"}
    assert math_class("mxfp6") == "fp6" and math_class("mxfp8") == "fp8"
    assert math_class("fp8") == "fp8" and math_class("bf16") == "bf16"
    assert [nominal_bits(n) for n in ("nvfp4", "mxfp4", "int4", "mxfp6", "mxfp8", "bf16")] == [
        4, 4, 4, 6, 8, 16]
    assert canonical("MX-FP4") == "mxfp4" and canonical("float4_e2m1fn_x2") == "fp4_e2m1"


def test_flashmla_fp8_latent_cache_is_656_bytes_a_token_a_layer():
    """FlashMLA's FP8 cache of DeepSeek-V3 (kv_lora_rank 512, rope 64): 512 FP8 numbers,
    512/128 = 4 FP32 scales, 64 BF16 rope numbers: 512 + 16 + 128 = 656 bytes, not 576."""
    per_number = mla_cache_bytes_per_element("fp8", 512, 64)
    assert per_number * 576 == 512 * 1 + 4 * 4 + 64 * 2 == 656
    assert mla_cache_bytes_per_element("bf16", 512, 64) == 2
