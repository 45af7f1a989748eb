"""Figures and tables of chapters 1 and 2: they draw what they are given, and refuse bad input."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from llm_roofline.counts import Cost  # noqa: E402
from llm_roofline.course.ch01 import decode_share, snapshot  # noqa: E402
from llm_roofline.course.ch02 import op_intensity, phase_rows, two_regimes  # noqa: E402
from llm_roofline.course.exercises import check  # noqa: E402
from llm_roofline.course.plots import PHASE_COLORS, timeline  # noqa: E402

PASSES = [{"phase": "prefill", "seconds": 0.2}, {"phase": "decode", "seconds": 0.05},
          {"phase": "decode", "seconds": 0.04}]
FLOPS = [8e9, 1e8, 1e8]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_timeline_blocks_are_as_wide_as_the_time_and_as_tall_as_the_rate():
    ax = timeline(PASSES, FLOPS)
    blocks = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(blocks) == 3
    # by hand: starts at 0, 200 and 250 ms; rates 8e9/0.2, 1e8/0.05, 1e8/0.04 FLOP/s in GFLOP/s
    assert [b.get_x() for b in blocks] == pytest.approx([0.0, 200.0, 250.0])
    assert [b.get_width() for b in blocks] == pytest.approx([200.0, 50.0, 40.0])
    assert [b.get_height() for b in blocks] == pytest.approx([40.0, 2.0, 2.5])
    assert ax.get_xlim() == pytest.approx((0.0, 290.0))
    assert matplotlib.colors.to_hex(blocks[0].get_facecolor()) == PHASE_COLORS["prefill"]
    assert matplotlib.colors.to_hex(blocks[1].get_facecolor()) == PHASE_COLORS["decode"]
    assert "GFLOP/s" in ax.get_ylabel() and "ms" in ax.get_xlabel()
    assert timeline(PASSES, FLOPS, log=True).get_yscale() == "log"


@pytest.mark.parametrize(
    "passes, flops, match",
    [([], [], "at least one"),
     (PASSES, FLOPS[:2], "one value per pass"),
     ([{"phase": "training", "seconds": 1.0}], [1.0], "phase"),
     ([{"phase": "decode", "seconds": 0.0}], [1.0], r"seconds'\] must be a finite number > 0"),
     ([{"phase": "decode"}], [1.0], "seconds"),
     ([{"phase": "decode", "seconds": 1.0}], [-1.0], r"flops\[0\]")],
)
def test_timeline_rejects_bad_input(passes, flops, match):
    with pytest.raises(ValueError, match=match):
        timeline(passes, flops)


def test_decode_share_plots_percentages_with_a_threshold():
    ax = decode_share([1, 10, 100], [0.0, 0.5, 0.9], label="x")
    line = ax.get_lines()[0]
    assert list(line.get_ydata()) == [0.0, 50.0, 90.0]
    assert list(line.get_xdata()) == [1, 10, 100]
    assert ax.get_lines()[1].get_ydata()[0] == pytest.approx(95.0)  # the dashed threshold
    assert ax.get_xscale() == "log"
    assert len(decode_share([1, 2], [0.1, 0.2], threshold=None).get_lines()) == 1
    with pytest.raises(ValueError, match="one length"):
        decode_share([1, 2], [0.5])
    with pytest.raises(ValueError, match=r"shares\[1\]"):
        decode_share([1, 2], [0.5, 1.5])


PRE = {"q_proj": Cost(1000, 30, 10), "kv_read": Cost(0, 50, 0), "residual": Cost(0, 0, 0)}
DEC = {"q_proj": Cost(10, 15, 5), "kv_read": Cost(0, 60, 0), "residual": Cost(0, 0, 0)}


def test_phase_rows_side_by_side_with_intensities_and_totals():
    rows = phase_rows(PRE, DEC, flop_unit="kFLOP", byte_unit="B")
    assert [r["operation"] for r in rows] == ["q_proj", "kv_read", "total"]  # residual: nothing
    q, kv, tot = rows
    assert q["prefill kFLOP"] == 1.0 and q["prefill B"] == 40 and q["prefill FLOP/byte"] == 25.0
    assert q["decode kFLOP"] == 0.01 and q["decode B"] == 20 and q["decode FLOP/byte"] == 0.5
    assert kv["prefill FLOP/byte"] == 0.0
    assert tot["prefill B"] == 90 and tot["decode B"] == 80
    assert tot["prefill FLOP/byte"] == pytest.approx(1000 / 90)
    no_bytes = phase_rows({"a": Cost(5, 0, 0)}, {"a": Cost(1, 0, 0)}, totals=False)
    assert no_bytes[0]["prefill FLOP/byte"] is None and len(no_bytes) == 1
    with pytest.raises(ValueError, match="same operations"):
        phase_rows(PRE, {"q_proj": DEC["q_proj"]})
    with pytest.raises(ValueError, match="flop_unit"):
        phase_rows(PRE, DEC, flop_unit="PFLOP")


def test_op_intensity_places_each_operation_at_its_intensity():
    ax = op_intensity(PRE, DEC, ridge=10.0)
    prefill, decode = ax.get_lines()[:2]
    assert list(prefill.get_xdata()) == [25.0] and list(decode.get_xdata()) == [0.5]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["q_proj"]  # kv_read: no FLOPs
    assert ax.get_lines()[2].get_xdata()[0] == 10.0  # the ridge
    assert "ridge point" in " ".join(t.get_text() for t in ax.texts)
    with pytest.raises(ValueError, match="ops names"):
        op_intensity(PRE, DEC, ops=["gate_proj"])
    with pytest.raises(ValueError, match="decode lacks"):
        op_intensity(PRE, {"q_proj": Cost(0, 0, 0), "kv_read": DEC["kv_read"]})


class FakeTally:
    """Two phases' totals and times, as a Tally reports them."""

    passes = [{"phase": "prefill", "batch": 2, "n_new": 8, "n_past": 0, "seconds": 0.25},
              {"phase": "decode", "batch": 2, "n_new": 1, "n_past": 8, "seconds": 0.5},
              {"phase": "decode", "batch": 2, "n_new": 1, "n_past": 9, "seconds": 0.25}]
    _totals = {"prefill": Cost(3_000_000_000, 40_000_000, 10_000_000),
               "decode": Cost(500_000_000, 900_000_000, 100_000_000)}

    def total(self, phase):
        return self._totals[phase]

    def seconds(self, phase=None):
        return sum(p["seconds"] for p in self.passes if phase in (None, p["phase"]))


def test_snapshot_reads_a_tally_as_a_profile():
    rows = {r[""]: (r["prefill"], r["decode"]) for r in snapshot(FakeTally())}
    assert rows["forward passes"] == ("1", "2")
    assert rows["tokens per pass"] == ("16", "2")  # batch x new tokens
    assert rows["time (ms)"] == ("250.0", "750.0")
    assert rows["share of the call"] == ("25 %", "75 %")
    assert rows["GFLOP"] == ("3.00", "0.50")
    assert rows["achieved GFLOP/s"] == ("12.00", "0.67")  # 3 / 0.25, 0.5 / 0.75
    assert rows["MB moved"] == ("50", "1,000")
    assert rows["achieved GB/s"] == ("0.20", "1.33")  # 0.05 / 0.25, 1.0 / 0.75
    lone = FakeTally()
    lone.passes = FakeTally.passes[:1]
    with pytest.raises(ValueError, match="both phases.*decode"):
        snapshot(lone)


def test_two_regimes_names_both_products():
    texts = " ".join(t.get_text() for t in two_regimes().texts)
    assert "GEMM" in texts and "GEMV" in texts and "KV cache" in texts


# the answer checks of chapters 1 and 2, against hand computations -----------------------


def test_phases_3_is_the_causal_fraction_of_64_tokens():
    # sum_{i=0}^{63} (i + 1) = 64 * 65 / 2 = 2080 of 64 * 64 = 4096 pairs
    assert check("phases-3", 2080 / 4096)
    assert not check("phases-3", 0.5)


def test_phases_1_is_about_the_batch():
    # Llama-3-70B down_proj, batch 16, bf16: 2*16*28672*8192 FLOPs over
    # 2*(28672*8192 + 16*28672 + 16*8192) bytes
    flops = 2 * 16 * 28672 * 8192
    nbytes = 2 * (28672 * 8192 + 16 * 28672 + 16 * 8192)
    assert check("phases-1", flops / nbytes)
    assert not check("phases-1", 16 * 1.05)


def test_paradox_4_accepts_the_two_flops_per_parameter_estimate():
    # 12.4 ms x 0.824 x 989.4 TFLOPS over 2 FLOPs x the layers' parameters: 8,030,261,248
    # less the embedding and the LM head, 128,256 x 4,096 each (the head runs once per prompt)
    work = 12.4e-3 * 0.824 * 989.4e12
    estimate = work / (2 * (8_030_261_248 - 2 * 128_256 * 4096))
    assert check("paradox-4", estimate)
    assert not check("paradox-4", estimate / 2)
    # the whole parameter count charges the LM head at all 629 positions: too few tokens
    assert not check("paradox-4", work / (2 * 8_030_261_248))


@pytest.mark.parametrize("id", ["paradox-1", "paradox-2", "paradox-3", "phases-2", "phases-4"])
def test_the_other_checks_answer_and_do_not_leak(id):
    verdict = check(id, 1e-3)
    assert not verdict and "Hint:" in str(verdict)


def test_phases_2_is_the_first_prompt_past_the_ridge():
    # I(L) = 2 L d f / (2 (d f + L d + L f)) >= ridge  <=>  L >= ridge d f / (d f - ridge (d + f))
    d, f, ridge = 4096, 14336, 989.4e12 / 3.35e12
    crossing = ridge * d * f / (d * f - ridge * (d + f))
    assert 325 < crossing < 326
    assert check("phases-2", 326) and not check("phases-2", 295)


def test_paradox_1_accepts_the_hand_estimate_in_which_the_model_size_cancels():
    # TTFT / TPOT ~ (2 N L / peak) / (2 N / bandwidth) = L x bandwidth / peak = 2048 / 295.3
    by_hand = 1 + 19 * 2048 * 3.35e12 / 989.4e12  # 132.8
    assert check("paradox-1", by_hand)
    assert not check("paradox-1", 1 + 2048 * 3.35e12 / 989.4e12)  # forgot s / (1 - s) = 19


def test_step_split_parts_a_decode_step_into_bytes_and_overhead():
    from types import SimpleNamespace

    from llm_roofline.course.ch01 import step_split

    passes = [{"phase": "prefill", "seconds": 1.0}] + [{"phase": "decode", "seconds": 0.004}] * 2
    tally = SimpleNamespace(
        passes=passes,
        total=lambda phase: SimpleNamespace(bytes=2 * 40e6),  # 40 MB a step
        rows=lambda: [{"phase": "decode", "calls": 100}, {"phase": "prefill", "calls": 50}],
    )
    split = step_split(tally, 20.0)  # 40 MB at 20 GB/s: 2 ms of the 4 ms step
    assert split["step_ms"] == pytest.approx(4.0) and split["memory_ms"] == pytest.approx(2.0)
    assert split["rest_ms"] == pytest.approx(2.0) and split["calls"] == 50
    assert split["us_per_call"] == pytest.approx(40.0) and split["achieved_gb_s"] == pytest.approx(10.0)
    assert step_split(tally, 1e3)["rest_ms"] == pytest.approx(4.0 - 0.04)
    with pytest.raises(ValueError, match="bandwidth_gb_s"):
        step_split(tally, 0)
    with pytest.raises(ValueError, match="tally"):
        step_split("a tally", 10.0)
