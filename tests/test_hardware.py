"""Accelerator specs: the article's numbers, lookups, growth ratios, sources, bad input."""

import json
from importlib import resources

import pytest

from llm_roofline.hardware import Accelerator, get_accelerator, growth, list_accelerators, table


def test_article_ridge_points():
    a100, h100 = get_accelerator("A100"), get_accelerator("H100")
    assert a100.peak("bf16") == 312.0e12 and a100.bandwidth == 2039e9
    assert h100.peak("bf16") == 989.4e12 and h100.bandwidth == 3350e9
    assert round(a100.ridge("bf16"), 1) == 153.0
    assert round(h100.ridge("bf16"), 1) == 295.3


def test_anchor_chips_and_their_ridges():
    # hand-checked: ridge = dense BF16 peak / bandwidth
    h20, tpu = get_accelerator("H20"), get_accelerator("TPU v5e")
    assert (h20.peak("bf16"), h20.bandwidth, h20.memory_type) == (148e12, 4.0e12, "HBM3")
    assert round(h20.ridge("bf16")) == 37  # 148e12 / 4.0e12 = 37.0: the decode-first chip
    assert h20.ridge("bf16") < get_accelerator("A100").ridge("bf16") / 4  # against the trend
    assert (tpu.peak("bf16"), tpu.bandwidth) == (197e12, 819e9)
    assert round(tpu.ridge("bf16")) == 241 and 235 < tpu.ridge("bf16") < 245  # "about 240"
    assert not tpu.has("fp8") and not tpu.has("fp16")
    l40s, a100_40 = get_accelerator("L40S"), get_accelerator("A100 40GB")
    assert (l40s.peak("bf16"), l40s.bandwidth) == (362.05e12, 864e9)
    assert round(l40s.ridge("bf16"), 1) == 419.0  # 362.05 / 0.864
    assert a100_40.peaks == get_accelerator("A100").peaks and a100_40.bandwidth == 1555e9
    assert round(a100_40.ridge("bf16"), 1) == 200.6
    gb200 = get_accelerator("GB200 NVL72")
    assert gb200 is get_accelerator("GB200") is not get_accelerator("B200")
    assert (gb200.peak("bf16"), gb200.peak("fp8"), gb200.bandwidth) == (2500e12, 5000e12, 8e12)
    assert round(gb200.ridge("bf16"), 1) == 312.5 and gb200.domain_size == 72
    assert gb200.nodes(72) == 1 and gb200.nodes(73) == 2


def test_other_chips():
    h200, b200 = get_accelerator("H200"), get_accelerator("B200")
    assert h200.peaks == get_accelerator("H100").peaks  # same compute as the H100
    assert (h200.memory_bytes, h200.bandwidth, h200.memory_type) == (141 * 2**30, 4.8e12, "HBM3e")
    assert (b200.peak("bf16"), b200.bandwidth) == (2250e12, 8e12)
    assert get_accelerator("MI300X").peak("bf16") == 1307.4e12
    assert get_accelerator("H100").peak("fp8") == 1978.9e12  # FP8 doubles the peak (to rounding)


@pytest.mark.parametrize(
    ("name", "gib"),
    [("A100", 80), ("H100", 80), ("H200", 141), ("B200", 180), ("MI300X", 192), ("RTX 4090", 24),
     ("M4 Max", 128), ("A100 40GB", 40), ("H20", 96), ("L40S", 48), ("GB200", 186), ("TPU v5e", 16)],
)
def test_memory_capacity_is_binary(name, gib):
    # vendors write "80GB" for 80 GiB of HBM: an A100 80GB has 81,920 MiB
    assert get_accelerator(name).memory_bytes == gib * 2**30
    assert get_accelerator("A100").memory_bytes == 81_920 * 2**20


@pytest.mark.parametrize(
    "name, link", [("A100", 600e9), ("H100", 900e9), ("H200", 900e9), ("B200", 1800e9),
                   ("MI300X", 896e9), ("M4 Max", None), ("A100 40GB", 600e9), ("H20", 900e9),
                   ("L40S", 64e9), ("GB200", 1800e9), ("TPU v5e", 200e9)],
)
def test_interconnect(name, link):
    assert get_accelerator(name).interconnect_bandwidth == link


def test_group_bandwidth_of_a_switch_and_of_a_mesh():
    h100, mi300x = get_accelerator("H100"), get_accelerator("MI300X")
    assert [h100.group_bandwidth(n) for n in (2, 4, 8)] == [900e9] * 3  # NVLink switch
    # Infinity Fabric mesh: one 128 GB/s link to each peer in the group
    assert [mi300x.group_bandwidth(n) for n in (2, 4, 8)] == [128e9, 384e9, 896e9]
    assert get_accelerator("M4 Max").group_bandwidth(2) is None


def test_growth_claim_of_the_article():
    rows = {r["accelerator"]: r for r in growth("A100", "bf16")}
    h100, b200 = rows["NVIDIA H100 SXM"], rows["NVIDIA B200"]
    assert round(h100["compute ratio"], 2) == 3.17 and round(h100["bandwidth ratio"], 2) == 1.64
    assert round(b200["compute ratio"], 1) == 7.2 and round(b200["bandwidth ratio"], 1) == 3.9
    assert rows["NVIDIA A100 SXM 80GB"]["compute ratio"] == 1.0


@pytest.mark.parametrize("name", ["H100", "h100-sxm", "H100 SXM5", "nvidia h100 sxm", "H100_SXM"])
def test_lookup_forgives_case_and_punctuation(name):
    assert get_accelerator(name).name == "NVIDIA H100 SXM"


def test_lookup_of_an_accelerator_returns_it():
    chip = get_accelerator("A100")
    assert get_accelerator(chip) is chip
    assert isinstance(chip, Accelerator)
    assert hash(chip) == hash(get_accelerator("a100 sxm4"))


def test_unknown_name_suggests_close_ones():
    with pytest.raises(ValueError, match="'H10'; did you mean 'NVIDIA H100 SXM'"):
        get_accelerator("H10")
    with pytest.raises(ValueError, match="known: .*Apple M4 Max"):
        get_accelerator("Gaudi 3")
    with pytest.raises(ValueError, match="must be a name"):
        get_accelerator(100)


def test_missing_precision_names_what_the_chip_has():
    with pytest.raises(ValueError, match="A100 SXM 80GB has no 'fp8' peak.*bf16, fp16, int8, int4"):
        get_accelerator("A100").peak("fp8")
    with pytest.raises(ValueError, match="M4 Max has no 'int8'"):
        get_accelerator("M4 Max").ridge("int8")
    with pytest.raises(ValueError, match="H100 SXM has no 'fp6' peak"):
        get_accelerator("H100").peak("fp6")
    with pytest.raises(ValueError, match="unknown dtype"):
        get_accelerator("H100").peak("fp5")
    assert get_accelerator("H100").peak("fp8_e5m2") == get_accelerator("H100").peak("FP8")


def test_every_chip_is_complete_and_sourced():
    raw = json.loads(resources.files("llm_roofline").joinpath("data/accelerators.json").read_text())
    required = {"A100", "H100", "H200", "B200", "MI300X", "RTX 4090", "M4 Max", "A100 40GB", "H20",
                "L40S", "GB200", "TPU v5e", "B300", "GB300", "MI325X", "MI355X", "GH200",
                "TPU v6e"}
    assert {get_accelerator(n).name for n in required} <= set(list_accelerators())
    for record in raw["accelerators"]:
        fields = {"memory_gib", "bandwidth_gb_s", "peak_tflops", "interconnect",
                  "interconnect_latency", "network"}
        if (record["interconnect"] or {}).get("in_switch_reduction"):
            fields.add("in_switch_reduction")  # a switch that sums an all-reduce needs a source
        assert set(record["sources"]) == fields
        assert all(len(s) > 20 for s in record["sources"].values())
        chip = get_accelerator(record["name"])
        assert chip.memory_bytes > 0 and chip.bandwidth > 0 and "bf16" in chip.peaks


def test_table_rows():
    rows = table(("bf16", "fp8"))
    assert [r["accelerator"] for r in rows] == list_accelerators()
    a100 = rows[0]
    assert a100["bandwidth (GB/s)"] == 2039 and a100["bf16 peak (TFLOPS)"] == 312
    assert a100["memory (GiB)"] == 80
    assert a100["fp8 peak (TFLOPS)"] is None and a100["fp8 ridge (FLOPs/byte)"] is None
    with pytest.raises(ValueError, match="unknown dtype"):
        table(("fp5",))


@pytest.mark.parametrize(("name", "latency_us", "domain", "network_gb_s"), [
    ("A100", 3, 8, 50), ("H100", 3, 8, 100), ("H200", 3, 8, 100), ("B200", 3, 8, 100),
    ("MI300X", 3, 8, 100), ("RTX 4090", 4, 8, None), ("M4 Max", 0, 1, None),
    ("A100 40GB", 3, 8, 50), ("H20", 3, 8, 100), ("GB200", 3, 72, 100), ("L40S", 4, 8, None),
    ("TPU v5e", 1, 256, None), ("B300", 3, 8, 200), ("GB300", 3, 72, 200),
    ("MI325X", 3, 8, 100), ("MI355X", 3, 8, 100), ("GH200", 3, 256, None), ("TPU v6e", 1, 256, None),
])
def test_collective_latency_domain_and_network(name, latency_us, domain, network_gb_s):
    chip = get_accelerator(name)
    assert chip.collective_latency_s == pytest.approx(latency_us * 1e-6)
    assert chip.domain_size == domain
    assert chip.network_bandwidth == (network_gb_s * 1e9 if network_gb_s else None)


def test_allreduce_and_send_times():
    h100 = get_accelerator("H100")
    assert h100.allreduce_s(1, 1e6) == 0.0
    # a ring of 8 inside the node: 2 * 7/8 of the message each way at 450 GB/s, plus 3 us
    assert h100.allreduce_s(8, 1e6) == pytest.approx(2 * 7 / 8 * 1e6 / 450e9 + 3e-6)
    assert h100.send_s(1e6, across_nodes=False) == pytest.approx(1e6 / 450e9 + 3e-6)
    assert h100.send_s(1e6, across_nodes=True) == pytest.approx(1e6 / 50e9 + 5e-6)
    with pytest.raises(ValueError, match="no interconnect"):
        get_accelerator("M4 Max").nodes(2)
    with pytest.raises(ValueError, match="n_gpus"):
        h100.nodes(0)


@pytest.mark.parametrize(("name", "in_switch"), [
    ("A100", False), ("H100", True), ("H200", True), ("B200", True), ("MI300X", False),
    ("RTX 4090", False), ("M4 Max", False), ("GB200", True), ("GB300", True), ("B300", True),
    ("MI355X", False)])
def test_in_switch_reduction_only_behind_nvlink_sharp_switches(name, in_switch):
    """NVLink SHARP: the third-generation NVSwitch (HGX H100/H200) and NVLink 5's switch
    (B200) sum an all-reduce themselves; A100's NVSwitch, MI300X's mesh and PCIe do not."""
    assert get_accelerator(name).in_switch_reduction is in_switch


def test_allreduce_floor_by_hand():
    """8 H100s, a 16 MiB message: in the switch each GPU sends m once over 450 GB/s each way;
    a ring (A100, 300 GB/s each way) sends 2 x 7/8 m; both with 3 us of latency."""
    m = 16 * 2**20
    link, network, latency = get_accelerator("H100").allreduce_floor(8, m)
    assert link == pytest.approx(m / 450e9) and network == 0 and latency == pytest.approx(3e-6)
    link, _, _ = get_accelerator("A100").allreduce_floor(8, m)
    assert link == pytest.approx(2 * 7 / 8 * m / 300e9)
    # across two nodes of 8: the network carries each GPU's 1/8 shard, 2 x 1/2 of it each way
    link, network, latency = get_accelerator("H100").allreduce_floor(16, m)
    chip = get_accelerator("H100")
    assert network == pytest.approx(m / 8 / (chip.network_bandwidth / 2))
    assert latency == pytest.approx(chip.collective_latency_s + chip.network_latency_s)
    # the ring's time (the kernel-by-kernel one) is never below the floor's link time
    assert get_accelerator("H100").allreduce_s(8, m) > m / 450e9 + 3e-6


# Dense peaks of the 2025-26 chips, by hand from each datasheet's own figures (TFLOP/s per
# chip). NVIDIA quotes FP4/FP8/BF16 for a whole board or rack, mostly with 2:4 sparsity: the
# dense per-GPU peak is the figure / GPUs (/ 2 where it is a sparse one).
@pytest.mark.parametrize(("name", "precision", "tflops"), [
    ("B200", "fp4", 144_000 / 8 / 2),     # HGX B200: FP4 144 PFLOPS sparse for 8 GPUs
    ("B200", "fp6", 72_000 / 8 / 2),      # FP8/FP6 72 PFLOPS sparse for 8
    ("GB200", "fp4", 1_440_000 / 72 / 2),  # GB200 NVL72: FP4 1,440 PFLOPS sparse for 72
    ("B300", "fp4", 108_000 / 8),         # HGX B300: FP4 108 PFLOPS dense for 8
    ("B300", "fp8", 72_000 / 8 / 2),
    ("B300", "bf16", 36_000 / 8 / 2),
    ("GB300", "fp4", 1_080_000 / 72),     # GB300 NVL72: FP4 1,080 PFLOPS dense for 72
    ("GB300", "fp8", 720_000 / 72 / 2),
    ("GB300", "bf16", 360_000 / 72 / 2),
    ("MI325X", "bf16", 1307.4), ("MI325X", "fp8", 2614.9),  # dense, AMD's data sheet
    ("MI355X", "bf16", 2516.6), ("MI355X", "fp8", 5033.2),
    ("MI355X", "fp4", 10066.3), ("MI355X", "fp6", 10066.3),  # MXFP4 = MXFP6 rate on CDNA 4
    ("GH200", "bf16", 1979 / 2), ("GH200", "fp8", 3958 / 2),  # GH200: sparse figures
    ("TPU v6e", "bf16", 918), ("TPU v6e", "int8", 1836),
])
def test_2025_chip_peaks_by_hand(name, precision, tflops):
    assert get_accelerator(name).peak(precision) == pytest.approx(tflops * 1e12, rel=1e-3)


@pytest.mark.parametrize(("name", "gib", "gb_s"), [
    ("B300", 288, 8000), ("GB300", 288, 8000), ("MI325X", 256, 6000), ("MI355X", 288, 8000),
    ("GH200", 144, 4900), ("TPU v6e", 32, 1640)])
def test_2025_chip_memory_by_hand(name, gib, gb_s):
    chip = get_accelerator(name)
    assert chip.memory_bytes == gib * 2**30 and chip.bandwidth == gb_s * 1e9


def test_4_bit_formats_share_the_fp4_peak_and_a_chip_without_it_has_none():
    """NVFP4 and MXFP4 run on the same FP4 tensor cores; an H100, an MI325X and a TPU have
    none (W4A16 there runs its math at BF16, or FP8), so they have no FP4 peak to price."""
    b200 = get_accelerator("B200")
    assert b200.peak("nvfp4") == b200.peak("mxfp4") == b200.peak("fp4") == 9000e12
    assert b200.peak("mxfp8") == b200.peak("fp8")
    for name in ("H100", "H200", "MI300X", "MI325X", "TPU v6e", "GH200", "A100"):
        assert not get_accelerator(name).has("fp4") and not get_accelerator(name).has("nvfp4")
    with pytest.raises(ValueError, match="H100 SXM has no 'nvfp4' peak"):
        get_accelerator("H100").peak("nvfp4")
    # Blackwell Ultra has (almost) no INT8 tensor math: the data gives it none
    assert not get_accelerator("B300").has("int8")


def test_gb200_reduces_in_the_switch_like_b200():
    """The same NVLink 5 switch: a 16 MiB all-reduce over 72 GPUs sends m each way once,
    not a ring's 2 x 71/72 m (about 2x less)."""
    m = 16 * 2**20
    link, _, _ = get_accelerator("GB200").allreduce_floor(72, m)
    assert link == pytest.approx(m / 900e9)
