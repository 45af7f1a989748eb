"""The calibrated prediction: its presets, its identities, its place between bound and data."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from importlib import resources

import numpy as np
import pytest

import llm_roofline as lr
from llm_roofline import measured as M
from llm_roofline import realistic as R

ZERO = R.Preset(name="test", mbu=1.0, mbu_weight_only=1.0, mbu_attention=1.0, mfu_prefill=1.0,
                mfu_decode=1.0, mfu_attention=1.0, rocm_factor=1.0, overlap=0.0,
                layer_overhead_us=0.0, collective_us=0.0, request_overhead_ms=0.0)


def test_overlap_runs_from_the_kernel_by_kernel_time_to_the_floor():
    """At the peaks with no fixed costs, overlap 0 gives the calculator's kernel-by-kernel time
    and overlap 1 its floor (one decode step, one GPU: compute-bound matmuls beside the
    memory-bound attention, so the two differ); in between, the straight line."""
    at_peak = lr.estimate("llama-3-8b", "h100", 512, 1024, 2)
    assert at_peak.tpot_floor_s < 0.9 * at_peak.tpot_s
    for overlap, expected in ((0.0, at_peak.tpot_s), (1.0, at_peak.tpot_floor_s),
                              (0.25, 0.75 * at_peak.tpot_s + 0.25 * at_peak.tpot_floor_s)):
        r = R.estimate("llama-3-8b", "h100", 512, 1024, 2,
                       preset=dataclasses.replace(ZERO, overlap=overlap))
        assert r.estimate.tpot_s == pytest.approx(expected, rel=1e-12)


@pytest.fixture(scope="module")
def rows():
    return M.load()


# --- the presets and their provenance -----------------------------------------------------------
def test_presets_are_fractions_and_overheads():
    presets = R.load_presets()
    assert "default" in presets
    for p in presets.values():
        for name in R.PARAMETERS[:R._FRACTIONS]:
            assert 0 < getattr(p, name) <= 1, (p.name, name)
        for name in R.PARAMETERS[R._FRACTIONS:]:
            assert getattr(p, name) >= 0, (p.name, name)
        assert p.rows >= R.MIN_ROWS and p.sources >= 1


def test_the_data_file_names_the_data_it_was_fitted_on():
    document = json.loads(resources.files("llm_roofline").joinpath("data/realistic.json").read_text())
    csv = resources.files("llm_roofline").joinpath("data/measured/measured-inference.csv").read_bytes()
    assert document["data"]["sha256"] == hashlib.sha256(csv).hexdigest()
    assert document["data"]["usable_rows"] == len(M.usable())


def test_the_fit_is_reproducible(rows):
    """Refitting the library's data gives the stored presets (to the 6 digits stored)."""
    fitted = R.fit_presets(rows)
    stored = R.load_presets()
    assert set(fitted) == set(stored)
    for name in stored:
        assert fitted[name].values() == pytest.approx(stored[name].values(), rel=1e-3, abs=1e-4)


# --- exact identities of the prediction ----------------------------------------------------------
def test_with_perfect_efficiency_and_no_overhead_it_is_the_bound():
    r = R.estimate("llama-3-8b", "h100", 4, 512, 64, preset=ZERO)
    b = lr.estimate("llama-3-8b", "h100", 4, 512, 64)
    assert r.estimate.tpot_s == pytest.approx(b.tpot_s, rel=1e-12)
    assert r.estimate.ttft_s == pytest.approx(b.ttft_s, rel=1e-12)
    assert r.bound == b


def test_fixed_overheads_add_exactly():
    """Llama-3-8B has 32 layers: 10 us per layer is 0.32 ms per pass; on 2 GPUs, 5 us per
    collective, 2 per layer and 2 per pass, is 0.33 ms more; 2 ms per request goes to the TTFT
    only."""
    p = dataclasses.replace(ZERO, layer_overhead_us=10.0, collective_us=5.0,
                            request_overhead_ms=2.0)
    r = R.estimate("llama-3-8b", "h100", 8, 256, 32, n_gpus=2, preset=p)
    b = lr.estimate("llama-3-8b", "h100", 8, 256, 32, n_gpus=2)
    assert r.estimate.tpot_s - b.tpot_s == pytest.approx(32 * 10e-6 + 66 * 5e-6, rel=1e-9)
    assert r.estimate.ttft_s - b.ttft_s == pytest.approx(32 * 10e-6 + 66 * 5e-6 + 2e-3,
                                                          rel=1e-9)
    assert r.estimate.throughput_tok_s == pytest.approx(8 / r.estimate.tpot_s)


def test_half_the_bandwidth_doubles_a_memory_bound_step():
    """Batch 1 decode of Llama-3-8B on an H100: every kernel that moves bytes is memory-bound,
    so halving every MBU doubles their time; the kernels without bytes (RoPE, softmax, the
    activation) keep theirs."""
    half = dataclasses.replace(ZERO, mbu=0.5, mbu_attention=0.5)
    r = R.estimate("llama-3-8b", "h100", 1, 128, 16, preset=half)
    rows = lr.estimate("llama-3-8b", "h100", 1, 128, 16).breakdown("decode")
    moving = sum(row["time_s"] for row in rows if row["bytes"] > 0)
    still = sum(row["time_s"] for row in rows if row["bytes"] == 0)
    assert r.estimate.tpot_s == pytest.approx(2 * moving + still, rel=1e-9)


def test_rocm_factor_scales_every_efficiency_on_amd_only():
    p = dataclasses.replace(ZERO, mbu=0.8, mbu_attention=0.6, mfu_decode=0.5, mfu_prefill=0.4,
                            mfu_attention=0.4, rocm_factor=0.5)
    halved = dataclasses.replace(p, mbu=0.4, mbu_attention=0.3, mfu_decode=0.25,
                                 mfu_prefill=0.2, mfu_attention=0.2, rocm_factor=1.0)
    on_amd = R.estimate("llama-3-70b", "mi300x", 64, 512, 64, preset=p, weight_dtype="fp8")
    same = R.estimate("llama-3-70b", "mi300x", 64, 512, 64, preset=halved, weight_dtype="fp8")
    assert on_amd.estimate.tpot_s == pytest.approx(same.estimate.tpot_s, rel=1e-12)
    assert on_amd.estimate.ttft_s == pytest.approx(same.estimate.ttft_s, rel=1e-12)
    on_nvidia = R.estimate("llama-3-70b", "h200", 64, 512, 64, preset=p, weight_dtype="fp8")
    plain = R.estimate("llama-3-70b", "h200", 64, 512, 64,
                       preset=dataclasses.replace(p, rocm_factor=1.0), weight_dtype="fp8")
    assert on_nvidia.estimate.tpot_s == plain.estimate.tpot_s


def test_it_is_labelled_a_calibrated_prediction():
    r = R.estimate("llama-3-8b", "h100", 1, 128, 128)
    assert r.kind == "calibrated prediction"
    assert "calibrated prediction" in r.label and "not a floor" in r.label
    assert r.preset.name == "default"
    assert R.estimate("llama-3-8b", "h100", 1, 128, 128, engine="vllm").preset.name == "vLLM"


def test_arrays_broadcast_as_in_the_calculator():
    r = R.estimate("llama-3-8b", "h100", np.array([1, 8, 64]), 128, 128)
    one = R.estimate("llama-3-8b", "h100", 8, 128, 128)
    assert r.estimate.tpot_s[1] == pytest.approx(one.estimate.tpot_s, rel=1e-12)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"mbu": 0.5}, "mbu is set by the calibrated preset"),
    ({"mfu": 0.5}, "mfu is set by the calibrated preset"),
    ({"engine": "NIM"}, "engine 'NIM': no calibrated preset"),
    ({"engine": "vllmm"}, "unknown engine 'vllmm'; did you mean 'vLLM'"),
    ({"batch": 0}, "batch must be an integer"),
])
def test_bad_input(kwargs, match):
    args = dict(model="llama-3-8b", accelerator="h100", batch=1, prompt_len=128, output_len=16)
    with pytest.raises(ValueError, match=match):
        R.estimate(**(args | kwargs))


# --- between the bound and the data's slow tail ---------------------------------------------------
SLOW_TAIL = 2.5
"""The calibrated prediction is never slower than the slowest measured row of the same setting
by more than this factor (the worst in the data is NeMo's 8-GPU e2e row, about 2x)."""


def test_prediction_lies_between_the_bound_and_the_slow_tail(rows):
    usable = M.usable(rows)
    settings: dict[tuple, list[M.Row]] = {}
    for r in usable:
        key = (r.model, r.accelerator, r.n_gpus, r.batch, r.input_len, r.output_len, r.metric,
               r.weight_dtype)
        settings.setdefault(key, []).append(r)
    for r in usable:
        predicted, bound = R.predict_row(r), M.bound(r)
        same = [x.value for x in settings[(r.model, r.accelerator, r.n_gpus, r.batch, r.input_len,
                                           r.output_len, r.metric, r.weight_dtype)]]
        if r.metric in M.TIMES:  # times: never shorter than the bound, nor far longer
            assert predicted >= bound * (1 - 1e-9), r.number
            assert predicted <= max(same) * SLOW_TAIL, r.number
        else:  # speeds
            assert predicted <= bound * (1 + 1e-9), r.number
            assert predicted >= min(same) / SLOW_TAIL, r.number


# --- cross-validation on synthetic data with a known answer ---------------------------------------
def test_leave_one_source_out_by_hand():
    """A fitter that predicts the mean of its training values: holding out source 'a' (values 1
    and 3) leaves 'b' (6) and 'c' (12): prediction 9 for both; and so on."""
    values = {"a": [1.0, 3.0], "b": [6.0], "c": [12.0]}
    template = next(r for r in M.usable() if r.number == 1)
    rows = [dataclasses.replace(template, number=i, source=s, value=v) for i, (s, v) in
            enumerate(((s, v) for s, vs in values.items() for v in vs), start=1)]

    def fitter(train):
        mean = float(np.mean([r.value for r in train]))
        return {"default": dataclasses.replace(ZERO, name="default", mbu=mean / 100)}

    def predictor(row, preset):
        return preset.mbu * 100

    results = R.cross_validate(rows, fitter=fitter, predictor=predictor)
    assert [d["predicted"] for d in results] == pytest.approx([9.0, 9.0, 16 / 3, 10 / 3])
    assert [d["held_out"] for d in results] == ["a", "a", "b", "c"]
    assert [d["error"] for d in results] == pytest.approx([8.0, 2.0, 16 / 18 - 1, 10 / 36 - 1])
    overall = R.summary(results)[0]
    assert overall["family"] == "all" and overall["rows"] == 4
    assert overall["within"] == pytest.approx(1 / 4)  # only 16/18 - 1 = -11 % is within 30 %
    assert overall["median_abs_error"] == pytest.approx((1 - 10 / 36 + 2.0) / 2)


def test_cross_validation_recovers_a_known_preset(rows):
    """Rows whose 'measured' values the model itself made with a known preset, spread over three
    sources: fitting on two sources (with a negligible prior) predicts the third, exactly but
    for the rows that alone pin the decode attention's MFU: where no training row's attention
    comes near its compute roof, that parameter sits on a plateau, and the two FP8 Llama-2-70B
    rows of one fold land within 5 %."""
    known = dataclasses.replace(ZERO, name="default", mbu=0.6, mbu_weight_only=0.5,
                                mbu_attention=0.7, mfu_prefill=0.45, mfu_decode=0.3, overlap=0.3,
                                layer_overhead_us=12.0, collective_us=20.0,
                                request_overhead_ms=3.0)
    chosen = [r for r in M.usable(rows) if r.modern and r.accelerator != "MI300X"]
    synthetic = [dataclasses.replace(r, value=R.predict_row(r, known), source=f"s{i % 3}")
                 for i, r in enumerate(chosen)]
    results = R.cross_validate(synthetic, fitter=lambda train: {"default": R.fit(train, weight=1e-6)})
    errors = np.abs([d["error"] for d in results])
    assert len(results) == len(chosen) > 60
    assert np.mean(errors < 1e-3) > 0.95 and np.max(errors) < 0.05


def test_the_calculator_gives_the_calibrated_prediction_on_request():
    r = lr.estimate("llama-3-8b", "h100", 8, 2048, 256, realistic=True, engine="vllm")
    direct = R.estimate("llama-3-8b", "h100", 8, 2048, 256, engine="vllm")
    assert r.kind == "calibrated prediction" and r.estimate.tpot_s == direct.estimate.tpot_s
    assert r.estimate.tpot_s > r.bound.tpot_s == lr.estimate("llama-3-8b", "h100", 8, 2048, 256).tpot_s
    with pytest.raises(ValueError, match="not both"):
        lr.estimate("llama-3-8b", "h100", 8, 2048, 256, realistic=True, mbu=0.7)
    with pytest.raises(ValueError, match="pass realistic=True"):
        lr.estimate("llama-3-8b", "h100", 8, 2048, 256, engine="vllm")
    with pytest.raises(ValueError, match="realistic must be true or false"):
        lr.estimate("llama-3-8b", "h100", 8, 2048, 256, realistic="yes")


def test_it_says_when_it_extrapolates_to_the_new_chips_and_formats():
    """No fitted row ran on Blackwell or stores 4-bit floats (the MLPerf v5.1 B200 rows have no
    batch and are not fitted): a prediction there says so, naming the chip, the weight format
    and the math; an H100 in FP8, which the rows cover, does not."""
    assert not any(r.weight_dtype in ("nvfp4", "mxfp4") for r in M.usable())
    assert "B200" not in {r.accelerator for r in M.usable()}
    b200 = R.estimate("llama-3-70b", "B200", 64, 1000, 200, weight_dtype="nvfp4",
                      compute_dtype="nvfp4", kv_dtype="fp8")
    assert b200.extrapolates and len(b200.extrapolation) == 3
    assert "B200" in b200.extrapolation[0]
    assert b200.extrapolation[1].startswith("nvfp4 weights")
    assert b200.extrapolation[2].startswith("nvfp4 math")
    mi355 = R.estimate("llama-3-70b", "MI355X", 64, 1000, 200, weight_dtype="mxfp4",
                       compute_dtype="mxfp4", kv_dtype="fp8")
    assert {line.split(" ")[0] for line in mi355.extrapolation[1:]} == {"mxfp4"}
    h100 = R.estimate("llama-3-70b", "H100", 64, 1000, 200, weight_dtype="fp8", kv_dtype="fp8")
    assert h100.extrapolation == ()


def test_a_ttft_under_a_client_concurrency_waits_in_a_queue():
    """Closed-loop clients whose prefills queue for one engine behind the other clients' (M/D/1):
    with x = TTFT + the decode part of the cycle D and k = c - 1 other clients, their load is
    k S / x and TTFT - S = k S^2 / (2 (x - k S)), a quadratic in x whose larger root is the
    answer. _queued finds it by bisection. One client never waits."""
    import math

    for service, tpot, clients, output in ((1.0, 0.1, 2, 11), (0.4, 0.03, 50, 500),
                                            (0.4, 0.02, 5, 500), (0.05, 0.01, 100, 20)):
        d = (output - 1) * (tpot + (clients - 1) / output * service)
        k = clients - 1
        a, b_, c_ = 2, -2 * (k * service + d + service), \
            2 * k * service * (d + service) - k * service ** 2
        x = (-b_ + math.sqrt(b_ * b_ - 4 * a * c_)) / (2 * a)
        assert R._queued(service, tpot, clients, output) == pytest.approx(x - d, rel=1e-9)
    assert R._queued(0.2, 0.05, 1, 100) == pytest.approx(0.2, rel=1e-12)


def test_the_queue_applies_to_the_ttft_rows_under_concurrency_only(rows):
    """NIM's TTFT rows at 5, 25 and 50 clients queue; at one client, and every other metric,
    the prediction is the plain one; the fit's fast surrogate agrees with the exact path."""
    nim = [r for r in M.usable(rows) if r.family == "NIM"]
    queued = [r.number for r in nim if R._clients(r)]
    assert queued == [86, 87, 90]
    preset = R.load_presets()["default"]
    stack = R._Stack([R._costs(r) for r in nim])
    exact = [R.predict_row(r, preset) for r in nim]
    assert stack.predict(preset.values()) == pytest.approx(exact, rel=1e-6)
    alone = next(r for r in nim if r.number == 85)  # the same prompt at one client
    for r in nim:
        if r.number in queued:
            assert R.predict_row(r, preset) > R.predict_row(alone, preset)
