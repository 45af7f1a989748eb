"""Element sizes: exact values, name forgiveness, group-scale overhead, bad input."""

from fractions import Fraction

import pytest

from llm_roofline.dtypes import bytes_per_element, canonical, list_dtypes, nbytes


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
    with pytest.raises(ValueError, match="unknown dtype 'fp6'.*bf16.*int4"):
        bytes_per_element("fp6")
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
