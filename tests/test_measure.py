"""measure.py: structure and sanity only (positive, finite, the right keys), never speed."""

import json
import math

import pytest

from llm_roofline import measure as M


def test_each_figure_is_positive_and_finite():
    for value in (M.copy_bandwidth(4, repeats=2), M.matvec_bandwidth(4, repeats=2),
                  M.matmul_peak(64, repeats=2)):
        assert isinstance(value, float) and math.isfinite(value) and value > 0


def test_median_seconds_warms_up_once_then_times_each_repeat():
    calls = []
    seconds = M.median_seconds(lambda: calls.append(1), repeats=3)
    assert len(calls) == 4 and isinstance(seconds, float) and seconds >= 0


def test_measure_host_is_plain_json_data():
    host = M.measure_host(bandwidth_mb=4, matmul_n=64, repeats=1)
    assert set(host) == {"copy_GBps", "matvec_GBps", "matmul_GFLOPS", "bandwidth_mb", "matmul_n",
                         "repeats", "cpu_count", "blas"}
    assert (host["bandwidth_mb"], host["matmul_n"], host["repeats"]) == (4, 64, 1)
    assert json.loads(json.dumps(host)) == host


def test_blas_info_reports_what_it_knows():
    info = M.blas_info()
    assert {"library", "version", "kernel", "threads", "env"} <= set(info)
    assert all(k.startswith("OPENBLAS") for k in info["env"])
    if info["threads"] is not None:
        assert info["threads"] >= 1


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: M.copy_bandwidth(0), "size_mb"),
        (lambda: M.matvec_bandwidth(2.5), "size_mb"),
        (lambda: M.matmul_peak(True), "n"),
        (lambda: M.matmul_peak(16, repeats=0), "repeats"),
    ],
)
def test_bad_sizes_are_rejected(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---- sizes are checked before anything is allocated (issue 14) ---------------------------


@pytest.mark.parametrize("call", [
    lambda: M.copy_bandwidth(10**9),
    lambda: M.matvec_bandwidth(10**9),
    lambda: M.copy_bandwidth(M.MAX_SIZE_MB + 1),
])
def test_sizes_beyond_the_upper_bound_are_a_value_error_not_a_memory_error(call):
    with pytest.raises(ValueError, match="size_mb must be an integer from 1 to 2,048"):
        call()


def test_sizes_beyond_the_memory_available_name_the_limit(monkeypatch):
    monkeypatch.setattr(M, "available_bytes", lambda: 100 * 10**6)
    # half of 100 MB for the arrays; copy has two of them: at most 25 MB each
    with pytest.raises(ValueError, match=r"size_mb must be at most 25 MB here: 2 array\(s\) of 60 MB"):
        M.copy_bandwidth(60)
    with pytest.raises(ValueError, match="at most 50 MB here: 1 array"):
        M.matvec_bandwidth(60)
    with pytest.raises(ValueError, match="n=4096: each matrix must be at most 16 MB"):
        M.matmul_peak(4096)  # three 67 MB matrices (4096**2 * 4 bytes), rounded up to 68 MB


def test_timed_seconds_refuses_an_unknown_statistic_and_dtype():
    with pytest.raises(ValueError, match="statistic"):
        M.timed_seconds(lambda: None, 2, "mean")
    with pytest.raises(ValueError, match="dtype"):
        M.matmul_peak(16, dtype="fp16")


def test_timed_seconds_min_is_at_most_the_median():
    calls = []
    fast = M.timed_seconds(lambda: calls.append(1), 5, "min")
    assert len(calls) == 6 and 0 <= fast


def test_dram_size_is_twice_the_cache_within_bounds(monkeypatch):
    monkeypatch.setattr(M, "available_bytes", lambda: 10**11)
    monkeypatch.setattr(M, "last_level_cache_bytes", lambda: 32 * 2**20)  # 2 x 33.5 MB < 256
    assert M.dram_size_mb() == 256
    monkeypatch.setattr(M, "last_level_cache_bytes", lambda: 480 * 2**20)  # 2 x 503.3 MB
    assert M.dram_size_mb() == 1006
    monkeypatch.setattr(M, "last_level_cache_bytes", lambda: 2 * 2**30)  # capped
    assert M.dram_size_mb() == 1024
    monkeypatch.setattr(M, "available_bytes", lambda: 400 * 10**6)  # a quarter: 100 MB
    assert M.dram_size_mb() == 100


def test_measure_roofline_is_plain_data_from_its_sweep():
    host = M.measure_roofline(sweep_mb=(1,), dram_mb=2, copy_mb=1, matmul_n=32, repeats=1,
                              progress=False)
    assert set(host["read_sweep"]) == {"1", "2"}
    assert host["read_GBps"] == host["read_sweep"]["2"]
    assert host["cache_GBps"] == max(host["read_sweep"].values())
    assert (host["dtype"], host["read_mb"], host["copy_mb"], host["matmul_n"]) == ("fp32", 2, 1, 32)
    assert json.loads(json.dumps(host)) == host
    with pytest.raises(ValueError, match="sweep_mb"):
        M.measure_roofline(sweep_mb=(0,), progress=False)


def test_progress_outside_a_notebook_counts_without_printing(capsys):
    bar = M.Progress(2, show=True)
    for _ in range(3):
        bar.step("x")
    assert bar.done == 2 and capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="total"):
        M.Progress(0)


# ---- the host as an accelerator (llm_roofline.machine) -----------------------------------

from llm_roofline import hardware  # noqa: E402
from llm_roofline import machine as H  # noqa: E402

HOST = {  # a made-up measurement with round numbers
    "read_GBps": 20.0, "cache_GBps": 100.0, "copy_GBps": 15.0, "matmul_GFLOPS": 300.0,
    "dtype": "fp32", "read_sweep": {"1": 100.0, "64": 50.0, "1000": 20.0}, "read_mb": 1000,
    "matmul_n": 1536, "repeats": 3, "statistic": "min", "cpu": "Test CPU", "cpu_count": 4,
    "memory_bytes": 16 * 2**30, "blas": {"library": "openblas", "version": "0.3", "threads": 4},
}


def test_host_accelerator_has_the_measured_roofline():
    chip = H.host_accelerator(HOST, name="test box")
    assert (chip.name, chip.memory_type, chip.precisions) == ("test box", "DRAM", ("fp32",))
    assert chip.bandwidth == 20e9 and chip.peak("fp32") == 300e9
    assert chip.ridge("fp32") == 15.0  # 300 GFLOP/s / 20 GB/s
    assert chip.memory_bytes == 16 * 2**30
    assert "matvec_bandwidth of 1000 MB, best of 3" in chip.sources["bandwidth_gb_s"]
    assert "15.0 GB/s" in chip.notes and "4 threads" in chip.notes
    with pytest.raises(ValueError, match="fp32"):
        chip.peak("bf16")  # the host has only the precision it was measured in


@pytest.mark.parametrize("bad", [None, {"read_GBps": 1.0}, [HOST]])
def test_host_accelerator_refuses_what_measure_did_not_return(bad):
    with pytest.raises(ValueError, match="host must be the dict"):
        H.host_accelerator(bad)
    with pytest.raises(ValueError, match="name"):
        H.host_accelerator(HOST, name="  ")


def test_saved_accelerator_reads_back_and_is_in_the_library_schema(tmp_path):
    chip = H.host_accelerator(HOST, name="test box")
    path = H.save_accelerator(chip, tmp_path / "box.json")
    record = json.loads(path.read_text())["accelerators"][0]
    assert record["bandwidth_gb_s"] == 20.0 and record["peak_tflops"] == {"fp32": 0.3}
    assert record["memory_gib"] == 16.0 and record["interconnect"] is None
    (back,) = H.load_accelerators(path)
    assert back == chip  # round figures survive the 6 significant digits exactly
    # the library's own reader of data/accelerators.json takes the record unchanged
    assert hardware._from_record(record) == chip


def test_saved_figures_keep_six_significant_digits(tmp_path):
    chip = H.host_accelerator(HOST | {"read_GBps": 27.6964718, "matmul_GFLOPS": 395.0324377})
    (back,) = H.load_accelerators(H.save_accelerator([chip], tmp_path / "h.json"))
    assert back.bandwidth == 27.6965e9 and back.peak("fp32") == 0.395032e12


def test_loading_a_malformed_file_is_a_value_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"accelerators": [{"name": "x"}]}')
    with pytest.raises(ValueError, match="not an accelerator data file"):
        H.load_accelerators(bad)
    with pytest.raises(ValueError, match="cannot read"):
        H.load_accelerators(tmp_path / "missing.json")


def test_bandwidth_at_is_the_smallest_swept_size_that_holds_the_working_set():
    assert H.bandwidth_at(HOST, 0.5e6) == 100e9
    assert H.bandwidth_at(HOST, 1e6) == 100e9
    assert H.bandwidth_at(HOST, 2e6) == 50e9
    assert H.bandwidth_at(HOST, 64e6) == 50e9
    assert H.bandwidth_at(HOST, 65e6) == 20e9
    assert H.bandwidth_at(HOST, 5e9) == 20e9  # beyond the sweep: main memory
    with pytest.raises(ValueError, match="nbytes"):
        H.bandwidth_at(HOST, 0)
    noisy = HOST | {"read_sweep": {"1": 100.0, "4": 0.5, "64": 50.0, "1000": 20.0}}
    assert H.bandwidth_at(noisy, 2e6) == 50e9  # the disturbed 4 MB run reads as the 64 MB level
    assert H.bandwidth_at(noisy, 1e6) == 100e9


def test_predict_is_the_roofline_time_of_each_row():
    row = {"phase": "decode", "op": "q_proj", "flops": 2 * 10**9, "bytes_read": 10**9,
           "bytes_written": 0, "seconds": 0.1, "calls": 2}
    (p,) = H.predict([row], HOST)
    # compute 2e9 / 300e9 = 6.7 ms; memory 1e9 / 20e9 = 50 ms: memory-bound, 50 ms
    assert p["intensity"] == 2.0 and p["bound"] == "memory"
    assert p["predicted_s"] == pytest.approx(0.05) and p["error"] == pytest.approx(-0.5)
    (p,) = H.predict([row], HOST, footprint=2e6)  # in the 64 MB level: 1e9 / 50e9 = 20 ms
    assert p["predicted_s"] == pytest.approx(0.02)
    (p,) = H.predict([row], HOST, overhead={"q_proj": 0.01})  # + 2 calls x 10 ms
    assert p["predicted_s"] == pytest.approx(0.07) and p["error"] == pytest.approx(-0.3)
    compute = row | {"flops": 3 * 10**10}  # 100 ms of compute > 50 ms of memory
    (p,) = H.predict([compute], HOST)
    assert p["bound"] == "compute" and p["predicted_s"] == pytest.approx(0.1)


def test_totals_sum_per_phase():
    rows = [
        {"phase": "prefill", "op": "q_proj", "flops": 10**9, "bytes_read": 10**8,
         "bytes_written": 10**7, "seconds": 0.01, "calls": 1, "predicted_s": 0.005},
        {"phase": "decode", "op": "q_proj", "flops": 10**8, "bytes_read": 3 * 10**8,
         "bytes_written": 0, "seconds": 0.03, "calls": 4, "predicted_s": 0.03},
        {"phase": "decode", "op": "lm_head", "flops": 10**7, "bytes_read": 10**8,
         "bytes_written": 0, "seconds": 0.01, "calls": 4, "predicted_s": 0.01},
    ]
    tot = H.totals(rows)
    assert tot["prefill"]["bytes"] == 110_000_000 and tot["prefill"]["error"] == pytest.approx(-0.5)
    assert tot["decode"]["flops"] == 110_000_000 and tot["decode"]["seconds"] == pytest.approx(0.04)
    assert tot["decode"]["error"] == pytest.approx(0.0)


def test_footprint_is_weights_plus_kv_cache():
    micro = H.chapter_models()["micro"]
    # per layer q 16x16, k and v 8x16, o 16x16, gate and up 32x16, down 16x32, two norms of 16:
    per_layer = 256 + 128 + 128 + 256 + 512 + 512 + 512 + 32
    params = 2 * per_layer + 64 * 16 + 64 * 16 + 16  # embed, lm_head, final norm
    kv_per_token = 2 * 2 * 1 * 8  # K and V, 2 layers, 1 KV head, head_dim 8
    assert H.footprint_bytes(micro, 2, 10) == (params + 2 * 10 * kv_per_token) * 4 == 29_504


def test_profile_keeps_one_prefill_and_the_decode_steps():
    from llm_roofline.tiny import TinyLlama

    model = TinyLlama.random(H.chapter_models()["micro"], seed=0)
    rows = H.profile(model, 2, 5, 3, runs=2)
    calls = {(r["phase"], r["op"]): r["calls"] for r in rows}
    assert calls[("prefill", "lm_head")] == 1 and calls[("decode", "lm_head")] == 3
    assert H.rows_steps(rows) == 3 and all(r["batch"] == 2 and r["prompt_len"] == 5 for r in rows)
    overhead = H.per_call(rows)
    assert set(overhead) == {r["op"] for r in rows} and all(v >= 0 for v in overhead.values())


# ---- chapter 8's answer checks --------------------------------------------------------------


def test_machine_answer_checks(monkeypatch):
    from llm_roofline.course import ch08 as XM
    from llm_roofline.course.exercises import check

    monkeypatch.setitem(XM._STATE, "host", None)  # restored after the test
    # L's q_proj at batch 1: 2 x 1024 x 1024 FLOPs over (x 4 KiB + W 4 MiB) read + y 4 KiB written
    # batch 4: the fp32 weights (4 x 1024^2 bytes) and 4 x 1024 fp32 inputs and outputs
    assert check("machine-1", 4 * 1024**2 + 2 * 4 * 4 * 1024)
    with pytest.raises(ValueError, match="course.ch08.use"):
        check("machine-2", 15)
    XM.use(HOST)
    assert check("machine-2", 15.0)  # 300 GFLOP/s / 20 GB/s
    assert check("machine-3", 30) and not check("machine-3", 29)  # I = B / 2 >= 15
    assert not check("machine-5", 1.0)
    with pytest.raises(ValueError, match="host must be the dict"):
        XM.use({"read_GBps": 1})


# ---- careful timing: warmed buffers, best of several, the spread, a disturbed run -----------


def test_timing_warms_up_loops_short_calls_and_keeps_the_best():
    calls = []
    t = M.timing(lambda: calls.append(1), repeats=4, min_seconds=0.001)
    # one warm-up call, then calibration and 4 samples of `inner` calls each
    assert t["samples"] == 4 and t["inner"] > 1 and len(calls) > 4 * t["inner"]
    assert 0 < t["seconds"] <= t["median_s"] and t["spread"] == pytest.approx(
        t["median_s"] / t["seconds"] - 1)


def test_timing_times_a_long_call_alone_and_a_list_in_turn():
    import time

    order = []
    fns = [lambda i=i: (order.append(i), time.sleep(1e-4)) for i in range(3)]
    t = M.timing(fns, repeats=2)
    assert t["inner"] == 1 and t["samples"] == 6  # each call of each buffer is a sample
    assert order == [0, 1, 2] * 3 and t["seconds"] >= 1e-4
    with pytest.raises(ValueError, match="fn must be a function"):
        M.timing([], repeats=2)
    with pytest.raises(ValueError, match="min_seconds"):
        M.timing(lambda: None, min_seconds=0)


def test_disturbance_names_the_wide_spreads_and_a_high_load():
    assert M.disturbance({"copy": 0.05, "matmul": 0.2}) is None
    message = M.disturbance({"copy": 0.05, "matmul": 0.9})
    assert message.startswith("This run was disturbed") and "matmul (+90%)" in message
    assert "copy" not in message
    assert "load average was 5.0 on 2 CPUs" in M.disturbance({}, load=5.0, cpus=2)
    assert M.disturbance({}, load=1.0, cpus=2) is None


def test_blas_threads_sets_and_restores_the_count():
    before = M.blas_info()["threads"]
    with M.blas_threads(1):
        inside = M.blas_info()["threads"]
    assert M.blas_info()["threads"] == before
    if before is not None:  # an OpenBLAS whose count can be read and set
        assert inside == 1
    with pytest.raises(ValueError, match="threads"):
        M.blas_threads(0)


def test_blas_thread_count_follows_blas_threads():
    """The count the tiny model splits its element-wise work by is the BLAS's own, read by
    threadpoolctl (or OpenBLAS) independently."""
    before = M.blas_info()["threads"]
    if before is None:  # no OpenBLAS to ask: one thread
        assert M.blas_thread_count() == 1
        return
    assert M.blas_thread_count() == before
    with M.blas_threads(1):
        assert M.blas_thread_count() == 1
    with M.blas_threads(3):
        assert M.blas_thread_count() == M.blas_info()["threads"] == 3
    assert M.blas_thread_count() == before


def test_measure_roofline_reports_spreads_load_threads_and_a_warning():
    host = M.measure_roofline(sweep_mb=(1,), dram_mb=8, copy_mb=4, matmul_n=32, repeats=2,
                              progress=False, threads=1)
    assert set(host["spread"]) == {"read 1 MB", "read 8 MB", "copy", "matmul"}
    assert all(v >= 0 for v in host["spread"].values()) and host["threads"] == 1
    assert set(host["load"]) == {"before", "after"}
    assert host["disturbed"] is None or host["disturbed"].startswith("This run was disturbed")
    assert json.loads(json.dumps(host)) == host


def test_profile_counts_exactly_and_times_every_operation_alone():
    from llm_roofline import counts
    from llm_roofline.tiny import TinyLlama

    cfg = H.chapter_models()["S"]
    model = TinyLlama.random(cfg, seed=0)
    rows = H.profile(model, 1, 8, 2, runs=2, min_seconds=1e-4, threads=1)
    by = {(r["phase"], r["op"]): r for r in rows}
    # the counts are the tally's, so they equal the analytic count of each pass exactly
    pre = counts.op_costs(cfg, 1, 8, weight_dtype="fp32", causal=False, logits="last")
    for op, c in pre.items():
        if c.flops or c.bytes:
            r = by["prefill", op]
            assert (r["flops"], r["bytes_read"], r["bytes_written"]) == (
                c.flops, c.bytes_read, c.bytes_written)
    assert by["decode", "lm_head"]["calls"] == 2 and by["decode", "q_proj"]["calls"] == 2 * 2
    for r in rows:
        assert r["seconds"] == pytest.approx(r["per_call_s"] * r["calls"]) and r["spread"] >= 0
        assert r["seconds"] > 0
    passes = H.pass_times(model, 1, 8, 2, runs=2, min_seconds=1e-4, threads=1)
    assert passes["decode"]["seconds"] == pytest.approx(2 * passes["decode"]["per_step_s"])
    assert passes["prefill"]["seconds"] > 0 and passes["prefill"]["spread"] >= 0
    with pytest.raises(ValueError, match="skip_masked"):
        H.profile(TinyLlama.random(cfg, seed=0, skip_masked=True), 1, 8, 2)


def test_the_chapter_warns_beside_the_numbers_when_a_run_was_disturbed(capsys):
    from llm_roofline.course import ch08

    quiet = HOST | {"spread": {"copy": 0.01, "matmul": 0.02}, "load": {"before": 0.1}}
    assert ch08.warn_if_disturbed(quiet) is None
    assert capsys.readouterr().out.startswith("Quiet run")
    busy = HOST | {"spread": {"copy": 0.01, "matmul": 0.6}, "load": {"before": 0.1}}
    assert "matmul (+60%)" in ch08.warn_if_disturbed(busy)
    assert capsys.readouterr().out.startswith("WARNING. This run was disturbed")
    passes = {"prefill": {"spread": 0.0}, "decode": {"spread": 2.0}}
    assert "whole decode (+200%)" in ch08.warn_if_disturbed(passes)


def test_the_reference_run_names_its_machine_and_holds_exact_counts():
    from llm_roofline import counts
    from llm_roofline.course import ch08

    ref = ch08.load_reference()
    m = ref["machine"]
    assert m["name"] and m["cpu"] and m["logical_cpus"] >= 1 and m["memory_bytes"] > 2**30
    assert set(m["load_average"]) == {"before", "after"}
    settings = ref["settings"]
    cfg = H.chapter_models()["L"]
    pre = counts.op_costs(cfg, 1, settings["prompt"], weight_dtype="fp32", causal=False,
                          logits="last")
    rows = {r["op"]: r for r in ref["rows"] if r["phase"] == "prefill"}
    assert all(rows[op]["flops"] == c.flops for op, c in pre.items() if c.flops)
    summary = ch08.phase_summary(H.predict(ref["rows"], ref["host"]), ref["passes"])
    assert set(summary) == {"prefill", "decode"}


# ---- bad input (issue 33): one clear ValueError each --------------------------------------


def test_predict_refuses_an_unmeasured_row_and_one_that_moves_nothing():
    row = {"phase": "decode", "op": "q_proj", "flops": 10, "bytes_read": 8, "bytes_written": 0,
           "seconds": 0.1, "calls": 1}
    assert H.predict([row], HOST)[0]["error"] == pytest.approx(8 / 20e9 / 0.1 - 1)
    with pytest.raises(ValueError, match=r"rows\[0\]\['seconds'\] must be a measured time above 0"):
        H.predict([row | {"seconds": 0}], HOST)
    with pytest.raises(ValueError, match=r"rows\[0\] \('q_proj'\) moves no bytes"):
        H.predict([row | {"bytes_read": 0}], HOST)


def test_tally_seconds_refuses_an_unknown_phase():
    from llm_roofline.tiny import Tally

    assert Tally().seconds() == 0 and Tally().seconds("decode") == 0
    with pytest.raises(ValueError, match="phase must be one of"):
        Tally().seconds("bogus")


def test_generate_and_profile_refuse_sizes_that_would_run_on():
    import dataclasses

    from llm_roofline.tiny import TinyLlama
    from llm_roofline.tiny.model import MAX_NEW_TOKENS

    micro = H.chapter_models()["micro"]
    huge = TinyLlama.random(dataclasses.replace(micro, max_context=2**40), seed=0)
    with pytest.raises(ValueError, match=f"n_new must be an integer from 1 to {MAX_NEW_TOKENS:,}"):
        huge.generate([[1, 2]], 10**6)
    model = TinyLlama.random(micro, seed=0)
    with pytest.raises(ValueError, match="batch must be an integer from 1 to 65,536"):
        H.profile(model, 10**6, 4, 2)
    with pytest.raises(ValueError, match="batch x prompt_len must be at most 65,536 tokens"):
        H.profile(model, 1000, 500, 2)
    with pytest.raises(ValueError, match="size_mb must be an integer from 1 to 2,048"):
        M.copy_bandwidth(size_mb=3000)


def test_the_cache_check_reads_the_process_limit_not_the_machine(monkeypatch):
    from llm_roofline.tiny import KVCache

    cfg = H.chapter_models()["L"]
    monkeypatch.setattr(M, "available_bytes", lambda: 10**12)  # a machine with 1 TB free
    monkeypatch.setattr(M, "process_limit_bytes", lambda: M._process_bytes() + 10**8)
    assert M.memory_free_bytes() <= 10**8
    with pytest.raises(ValueError, match="this process may still allocate"):
        KVCache.empty(cfg, 64, 512)  # 2 x 4 x 64 x 4 x 512 x 64 x 4 bytes = 268 MB
    monkeypatch.setattr(M, "process_limit_bytes", lambda: None)
    assert M.memory_free_bytes() == 10**12


def test_a_decode_step_does_not_ask_the_system_for_memory(monkeypatch):
    """A pass's working memory under 64 MiB is not checked against the system (the question
    costs about 1 % of a decode step); a larger allocation still is (the test above)."""
    from llm_roofline.tiny import TinyLlama
    from llm_roofline.tiny import model as tiny_model

    model = TinyLlama.random(H.chapter_models()["micro"], seed=0)
    logits, cache = model.prefill([[1, 2, 3]], max_len=8)

    def asked():
        raise AssertionError("a decode step asked the system for its free memory")

    monkeypatch.setattr(M, "memory_free_bytes", asked)
    model.decode([4], cache)  # a few kB of activations: not asked
    with pytest.raises(AssertionError, match="asked the system"):
        tiny_model._fits("a large pass", tiny_model.SMALL_ALLOCATION)


def test_the_process_limit_is_read_from_rlimit_as(monkeypatch):
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda which: (5 * 2**30, resource.RLIM_INFINITY))
    limit = M.process_limit_bytes()
    assert limit is not None and limit <= 5 * 2**30
