"""Bad and extreme input, thrown at every public entry point (hypothesis).

Each property asserts that a call either raises a one-line ``ValueError`` or returns a finite,
valid result: never another exception, never NaN or infinity, never a negative size. The
calculator's invariants are checked over the whole valid range.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import llm_roofline as lr
from llm_roofline import counts, hardware, kv, machine, measure, measured, realistic, roofline, serving, sla
from llm_roofline.cli import main
from llm_roofline.course import exercises, registry, student
from llm_roofline.models import ModelConfig
from llm_roofline.tiny import KVCache, TinyLlama

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Anything a user might pass where a number is expected.
anything = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.complex_numbers(), st.text(max_size=8), st.just(2**63), st.just(-(2**63)),
    st.just(10**400), st.just(5e-324), st.just(1e300), st.just(np.int64(7)), st.just(np.float32(3)),
    st.lists(st.integers(-3, 10), max_size=3),
)


def one_line_error(call):
    """Run ``call``; a ValueError must be one line; return the result or None."""
    try:
        return call()
    except ValueError as err:
        text = str(err)
        assert text and "\n" not in text and len(text) < 600, text
        return None


def finite(x) -> bool:
    return bool(np.all(np.isfinite(np.asarray(x, dtype=float))))


MODELS = lr.list_models()
GPUS = ["h100", "a100", "h200", "mi300x", "b200", "rtx4090"]


@FAST
@given(batch=anything, prompt=anything, output=anything, mbu=anything)
def test_estimate_gives_a_clear_error_or_a_finite_answer(batch, prompt, output, mbu):
    est = one_line_error(lambda: lr.estimate("llama-3-8b", "h100", batch, prompt, output, mbu=mbu))
    if est is not None:
        for value in (est.ttft_s, est.tpot_s, est.throughput_tok_s, est.memory.used,
                      est.memory.free):
            assert finite(value)
        assert np.all(np.asarray(est.memory.kv_cache) >= 0)
        assert np.all(np.asarray(est.tpot_s) > 0)


@FAST
@given(batch=anything, context=anything)
def test_decode_step_gives_a_clear_error_or_a_finite_answer(batch, context):
    step = one_line_error(lambda: lr.decode_step("llama-3-8b", "h100", batch, context))
    if step is not None:
        assert finite(step.time_s) and np.all(np.asarray(step.time_s) > 0)


@FAST
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS),
       batch=st.integers(1, 4096), prompt=st.integers(1, 4096), output=st.integers(1, 2048),
       dtype=st.sampled_from(["bf16", "fp8", "int4"]))
def test_the_calculators_invariants_hold_over_the_valid_range(model, gpu, batch, prompt, output,
                                                              dtype):
    cfg = lr.get_model(model)
    assume(prompt + output <= cfg.max_context)
    est = lr.estimate(model, gpu, [batch, batch + 1], [prompt, prompt], [output, output],
                      weight_dtype=dtype)
    tpot, memory = np.asarray(est.tpot_s), np.asarray(est.memory.used)
    assert tpot[1] >= tpot[0] * (1 - 1e-12)  # TPOT never falls with batch
    assert memory[1] > memory[0]  # memory grows with batch
    assert np.allclose(est.throughput_tok_s, np.array([batch, batch + 1]) / tpot, rtol=1e-12)
    assert list(est.fits) == list(np.asarray(est.memory.free) >= 0)  # fits agrees with memory
    longer = lr.estimate(model, gpu, batch, prompt, min(output + 1, cfg.max_context - prompt),
                         weight_dtype=dtype)
    assert longer.memory.used >= est.memory.used[0]  # memory grows with context


# --- configs -------------------------------------------------------------------------------
BASE = json.loads(lr.models._MODELS.joinpath("llama-3-8b.json").read_text())
FIELDS = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "vocab_size", "max_position_embeddings", "rope_theta",
          "rms_norm_eps", "tie_word_embeddings", "head_dim", "attention_bias", "model_type"]


@FAST
@given(field=st.sampled_from(FIELDS), value=st.one_of(anything, st.dictionaries(st.text(max_size=3),
                                                                               st.integers())))
def test_a_config_with_any_bad_field_gives_a_clear_error_naming_it(field, value):
    config = {**BASE, field: value}
    cfg = one_line_error(lambda: ModelConfig.from_hf_config(config))
    if cfg is None:
        return
    # accepted: then it is a valid model whose sizes are finite and positive
    assert cfg.n_params > 0 and cfg.kv_elements_per_token > 0
    assert math.isfinite(cfg.rope_theta) and math.isfinite(cfg.norm_eps)
    assert isinstance(cfg.tie_embeddings, bool)


@FAST
@given(batch=anything, n_new=anything, n_past=anything)
def test_op_costs_gives_a_clear_error_or_exact_non_negative_counts(batch, n_new, n_past):
    costs = one_line_error(lambda: counts.op_costs(lr.get_model("llama-3-8b"), batch, n_new,
                                                     n_past))
    if costs is not None:
        assert all(c.flops >= 0 and c.bytes >= 0 for c in costs.values())


@FAST
@given(id=st.sampled_from(exercises.list_exercises()), answer=anything)
def test_answer_checks_give_a_clear_error_or_a_verdict(id, answer):
    verdict = one_line_error(lambda: exercises.check(id, answer))
    if verdict is not None:
        assert isinstance(bool(verdict), bool) and str(verdict)


@FAST
@given(intensity=anything, peak=anything, bandwidth=anything)
def test_roofline_gives_a_clear_error_or_a_finite_answer(intensity, peak, bandwidth):
    value = one_line_error(lambda: roofline.attainable(intensity, peak, bandwidth))
    if value is not None:
        assert finite(value)


# --- the command line ------------------------------------------------------------------------
options = st.sampled_from(["--batch", "--prompt", "--output", "--n-gpus", "--mbu", "--mfu",
                           "--queue", "--dtype", "--kv-dtype"])
values = st.one_of(st.integers(-5, 2**70).map(str), st.floats(allow_nan=True).map(str),
                   st.sampled_from(["", "x", "1,2", "1,,2", "fp8", "int4", "5e-324", "inf", "0"]))


@settings(max_examples=120, deadline=None)
@given(extra=st.lists(st.tuples(options, values), max_size=3), as_json=st.booleans())
def test_the_cli_exits_0_with_strict_json_or_2_with_one_line(extra, as_json):
    argv = ["estimate", "--model", "llama-3-8b", "--gpu", "h100"]
    for option, value in extra:
        argv += [option, value]
    if as_json:
        argv.append("--json")
    out_buf, err_buf = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out_buf), contextlib.redirect_stderr(err_buf):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
    out, err = out_buf.getvalue(), err_buf.getvalue()
    assert code in (0, 2)
    if code == 2:
        assert out == "" and err.count("\n") == 1 and err.startswith("llm_roofline: error:")
    elif as_json:
        def refuse(constant):
            raise AssertionError(f"not strict JSON: {constant}")

        json.loads(out, parse_constant=refuse)
    else:
        assert "nan" not in out.lower().split() and "inf" not in out.lower()


@pytest.mark.parametrize("name", ["llama3-70b", "llama_3_70b", " llama-3-70b", "LLAMA-3-70B"])
def test_near_miss_model_names_are_found_or_suggested(name):
    try:
        assert lr.get_model(name).name == "llama-3-70b"
    except ValueError as err:
        assert "llama-3-70b" in str(err)


# --- entry points that bypassed validate (files, accelerators, helpers) ---------------------
# Any JSON a file may hold, NaN and huge numbers included.
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-2**70, 2**70),
              st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8)
# Anything a user may pass where a flag (True or False) is expected.
flags = st.one_of(st.booleans(), st.sampled_from(["no", "yes", "false", "", None, 0, 1, 0.0,
                                                  np.bool_(True), [], [False]]))
# Paths: odd names, devices, folders, bytes, non-paths.
paths = st.one_of(
    st.text(max_size=300), st.binary(max_size=20),
    st.sampled_from(["/dev/zero", "/dev/null", "/dev/urandom", "/", ".", "", " ", "\x00",
                     "x" * 300 + ".json", "/no/such/file.json"]),
    anything)
# File contents: text, JSON, binary.
contents = st.one_of(st.binary(max_size=200), st.text(max_size=200),
                     json_values.map(lambda v: json.dumps(v, allow_nan=True)))

_ACCELERATORS = json.loads((Path(hardware.__file__).parent / "data" / "accelerators.json")
                           .read_text())["accelerators"]
_FIELD_PATHS = [("name",), ("vendor",), ("architecture",), ("memory_gib",), ("memory_type",),
                ("bandwidth_gb_s",), ("peak_tflops",), ("peak_tflops", "bf16"),
                ("peak_tflops", "fp8"), ("interconnect",), ("interconnect", "bandwidth_gb_s"),
                ("interconnect", "latency_us"), ("interconnect", "domain_size"),
                ("interconnect", "link_gb_s"), ("network",), ("network", "bandwidth_gb_s"),
                ("network", "latency_us"), ("sources",), ("notes",), ("aliases",), ("typo",)]
numbers_of_any_size = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                                st.integers(-2**70, 2**70), st.just(5e-324), st.just(1e308))


def _accelerator_file(directory: str, record) -> Path:
    path = Path(directory) / "chips.json"
    path.write_text(json.dumps({"accelerators": [record]}, allow_nan=True))
    return path


def _assert_usable(chip):
    assert chip.bandwidth > 0 and chip.memory_bytes > 0 and chip.domain_size >= 1
    assert all(math.isfinite(p) and p > 0 for p in chip.peaks.values())
    assert chip.collective_latency_s >= 0 and chip.network_latency_s >= 0
    est = lr.estimate("llama-3-8b", chip, 1, 128, 16, weight_dtype="bf16",
                      compute_dtype=chip.precisions[0] if chip.precisions[0] in (
                          "bf16", "fp16", "fp32") else None) if chip.has("bf16") else None
    if est is not None:
        assert finite(est.ttft_s) and finite(est.tpot_s) and est.tpot_s > 0


@FAST
@given(chip=st.sampled_from(range(len(_ACCELERATORS))), where=st.sampled_from(_FIELD_PATHS),
       value=st.one_of(json_values, numbers_of_any_size))
def test_an_accelerator_file_with_any_bad_field_is_refused_or_usable(chip, where, value):
    record = copy.deepcopy(_ACCELERATORS[chip])
    target = record
    for key in where[:-1]:
        if not isinstance(target.get(key), dict):
            return
        target = target[key]
    target[where[-1]] = value
    with tempfile.TemporaryDirectory() as directory:
        path = _accelerator_file(directory, record)
        chips = one_line_error(lambda: hardware.load_accelerators(path))
        if chips is not None:
            for c in chips:
                _assert_usable(c)
        out_buf, err_buf = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out_buf), contextlib.redirect_stderr(err_buf):
            try:
                code = main(["estimate", "--model", "llama-3-8b", "--gpu",
                             _ACCELERATORS[chip]["name"], "--gpu-file", str(path), "--json"])
            except SystemExit as exit_:
                code = exit_.code
        assert code in (0, 2)
        if code == 2:
            assert err_buf.getvalue().count("\n") == 1


@FAST
@given(n_gpus=anything, message=st.one_of(anything, st.lists(numbers_of_any_size, max_size=3)),
       across=flags, gpu=st.sampled_from(GPUS))
def test_accelerator_methods_give_a_clear_error_or_a_finite_time(n_gpus, message, across, gpu):
    chip = lr.get_accelerator(gpu)
    for call in (lambda: chip.allreduce_s(n_gpus, message),
                 lambda: chip.send_s(message, across_nodes=across),
                 lambda: chip.group_bandwidth(n_gpus), lambda: chip.nodes(n_gpus)):
        value = one_line_error(call)
        if value is not None:
            assert finite(value) and np.all(np.asarray(value) >= 0)


@FAST
@given(path=paths)
def test_every_file_reader_gives_a_clear_error_for_any_path(path):
    with tempfile.TemporaryDirectory() as directory:  # whatever is written lands here
        for read in (lr.models.load_config, hardware.load_accelerators, measured.load,
                     lambda p: student.write_student_edition(p, Path(directory) / "out")):
            if path is None and read is measured.load:
                continue  # None is the library's own csv
            one_line_error(lambda read=read: read(path))


@FAST
@given(content=contents)
def test_every_file_reader_gives_a_clear_error_or_a_valid_result_for_any_content(content):
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        for name in ("config.json", "chips.json", "m.csv", "src/a.ipynb"):
            path = folder / name
            path.parent.mkdir(exist_ok=True)
            (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
        one_line_error(lambda: lr.models.load_config(folder / "config.json"))
        one_line_error(lambda: hardware.load_accelerators(folder / "chips.json"))
        one_line_error(lambda: measured.load(folder / "m.csv"))
        written = one_line_error(lambda: student.write_student_edition(folder / "src",
                                                                       folder / "out"))
        if written is None:
            assert not (folder / "out").exists()
        else:
            for out in written:  # strict JSON, no solution cell
                json.loads(out.read_text(), parse_constant=lambda c: 1 / 0)


@FAST
@given(nb=st.one_of(json_values, st.fixed_dictionaries(
    {"cells": st.lists(st.fixed_dictionaries(
        {"cell_type": st.sampled_from(["code", "markdown"]),
         "metadata": st.one_of(json_values, st.fixed_dictionaries({"tags": json_values}))}),
        max_size=3)})))
def test_strip_solutions_gives_a_clear_error_or_a_notebook_without_solutions(nb):
    out = one_line_error(lambda: student.strip_solutions(nb))
    if out is not None:
        for cell in out["cells"]:
            assert student.SOLUTION_TAG not in cell.get("metadata", {}).get("tags", [])


_OPTION_NAMES = ["weight_dtype", "kv_dtype", "n_gpus", "mbu", "mfu", "compute_dtype", "act_dtype",
                 "queue_s", "reserve_fraction", "prefill_chunk", "kv_dtpye", "bogus", "realistic",
                 "engine", "draft"]
option_dicts = st.dictionaries(st.sampled_from(_OPTION_NAMES), anything, max_size=2)


@FAST
@given(options=option_dicts, batch=anything)
def test_serving_and_sla_options_give_a_clear_error_or_a_finite_answer(options, batch):
    for call in (lambda: sla.ttft_joining("llama-3-8b", "h100", batch, 512, 64, **options),
                 lambda: serving.mixed_step("llama-3-8b", "h100", batch, 512, 64, **options),
                 lambda: serving.speculative("llama-3-8b", "h100", batch, 512, 3, 0.7,
                                             **options),
                 lambda: lr.vram.max_prompt_len("llama-3-8b", "h100", batch, 64, **options)):
        value = one_line_error(call)
        if value is not None:
            times = [getattr(value, f) for f in ("time_s", "tpot_s", "step_s")
                     if hasattr(value, f)] or [value]
            assert all(finite(t) and np.all(np.asarray(t) >= 0) for t in times)


@FAST
@given(grouped=flags, tp=anything, kv_dtype=anything, model=st.one_of(st.sampled_from(MODELS),
                                                                       anything))
def test_kv_helpers_give_a_clear_error_or_a_finite_answer(grouped, tp, kv_dtype, model):
    value = one_line_error(lambda: kv.attention_intensity(model, kv_dtype=kv_dtype,
                                                          grouped=grouped, tp=tp))
    if value is not None:
        assert finite(value) and value > 0 and isinstance(grouped, bool | np.bool_)


MICRO = machine.chapter_models()["micro"]
config_changes = st.dictionaries(
    st.sampled_from(["sliding_window", "mlp_activation", "post_norms", "qk_norm", "gated_mlp",
                     "max_context", "vocab_size"]),
    st.one_of(st.booleans(), st.integers(0, 64), st.sampled_from(["silu", "gelu_tanh"])),
    max_size=2)


@FAST
@given(cfg=st.one_of(anything, st.sampled_from(MODELS), config_changes), batch=anything,
       max_len=anything, temperature=anything, seed=anything, n_new=anything)
def test_the_tiny_model_gives_a_clear_error_or_finite_tokens(cfg, batch, max_len, temperature,
                                                             seed, n_new):
    if isinstance(cfg, dict):
        cfg = one_line_error(lambda: dataclasses.replace(MICRO, **cfg))
        if cfg is None:
            return
    model = one_line_error(lambda: TinyLlama.random(cfg, seed=0))
    one_line_error(lambda: KVCache.empty(cfg, batch, max_len))
    if model is None:
        return
    assert cfg.mlp_activation == "silu" and not (cfg.sliding_window or cfg.post_norms
                                                 or cfg.qk_norm)
    tokens = one_line_error(lambda: model.generate(np.array([[1, 2]]) % cfg.vocab_size, n_new,
                                                   temperature=temperature, seed=seed))
    if tokens is not None:
        assert tokens.shape[1] == 2 + n_new and np.all((tokens >= 0)
                                                        & (tokens < cfg.vocab_size))


@FAST
@given(id=st.one_of(anything, st.sampled_from(registry.list_exercises() or ["x"])),
       answer=anything, rtol=anything, unit=anything)
def test_answer_registry_gives_a_clear_error_or_a_verdict(id, answer, rtol, unit):
    verdict = one_line_error(lambda: registry.check(id, answer))
    if verdict is not None:
        assert isinstance(id, str) and not isinstance(answer, str | bytes | bool)
    name = f"property-{len(registry.list_exercises())}"
    one_line_error(lambda: registry.register(name, lambda: 1.0, unit=unit, hint="h", rtol=rtol))
    registry._REGISTRY.pop(name, None)  # leave the registry as it was


rows = st.lists(st.dictionaries(st.sampled_from(["phase", "op", "flops", "bytes_read",
                                                 "bytes_written", "seconds", "calls"]),
                                anything, max_size=7), max_size=3)


@FAST
@given(predicted=anything, measured_value=anything, engine=anything, profile_rows=rows,
       cfg=st.one_of(anything, st.sampled_from(MODELS)), batch=anything)
def test_measurement_helpers_give_a_clear_error_or_a_finite_answer(predicted, measured_value,
                                                                   engine, profile_rows, cfg,
                                                                   batch):
    error = one_line_error(lambda: realistic.relative_error(predicted, measured_value))
    if error is not None:
        assert math.isfinite(error)
    family = one_line_error(lambda: measured.family(engine))
    if family is not None:
        assert isinstance(family, str)
    for call in (lambda: machine.per_call(profile_rows), lambda: machine.totals(profile_rows),
                 lambda: machine.rows_steps(profile_rows)):
        value = one_line_error(call)
        if isinstance(value, dict):
            assert all(finite(v) for v in value.values() if not isinstance(v, dict))
    size = one_line_error(lambda: machine.footprint_bytes(cfg, batch, 64))
    if size is not None:
        assert size > 0


@FAST
@given(repeats=anything, statistic=anything, size=anything)
def test_benchmarks_give_a_clear_error_before_they_start(repeats, statistic, size):
    assume(not (isinstance(repeats, int | np.integer) and 1 <= repeats <= 1000
                and isinstance(size, int | np.integer) and 1 <= size <= 65536))
    one_line_error(lambda: measure.timed_seconds(lambda: None, repeats, statistic))
    one_line_error(lambda: measure.copy_bandwidth(size, repeats=repeats, statistic=statistic))
    one_line_error(lambda: measure.matmul_peak(size, repeats=repeats))


number_texts = st.one_of(st.text(alphabet="0123456789_.eE+-infa\u0663 ,", max_size=8),
                         st.sampled_from(["-inf", "-nan", "-1e3", "1__0", "_1", "1_000",
                                          "\u0661\u0662", "0x10", "1e400", "-0"]))


@settings(max_examples=120, deadline=None)
@given(option=st.sampled_from(["--batch", "--prompt", "--output", "--n-gpus", "--mbu", "--mfu",
                               "--queue"]), text=number_texts)
def test_the_cli_reads_ascii_numbers_only_and_errs_in_one_line(option, text):
    out_buf, err_buf = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out_buf), contextlib.redirect_stderr(err_buf):
        try:
            code = main(["estimate", "--model", "llama-3-8b", "--gpu", "h100", option, text,
                         "--json"])
        except SystemExit as exit_:
            code = exit_.code
    assert code in (0, 2)
    if code == 0:
        assert text.isascii() and "__" not in text and not text.startswith("_")
    else:
        err = err_buf.getvalue()
        assert err.count("\n") == 1 and "argument --" not in err and "expected one" not in err
        assert option in err


@settings(max_examples=60, deadline=None)
@given(argv=st.lists(st.one_of(st.text(max_size=10), st.sampled_from(["--force", "-h2", "--x"])),
                     max_size=3))
def test_the_student_cli_errs_in_one_line(argv):
    assume("-h" not in argv and "--help" not in argv and "--h" not in argv)
    err_buf = io.StringIO()
    with tempfile.TemporaryDirectory() as directory:
        cwd = os.getcwd()
        os.chdir(directory)  # nothing it writes lands in the repository
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err_buf):
                try:
                    student.main(argv)
                    code = 0
                except SystemExit as exit_:
                    code = exit_.code
        finally:
            os.chdir(cwd)
    assert code in (0, 2)
    if code == 2:
        assert err_buf.getvalue().count("\n") == 1


# --- the chapters' figures, tables and prose checks ------------------------------------------
def _figure_calls(ax):
    from llm_roofline.course import ch01, ch03, ch04, ch05, ch06, ch07, prose, widgets

    return {
        "decode_share output_lens": lambda v: ch01.decode_share(v, [0.5, 0.6], ax=ax),
        "decode_share threshold": lambda v: ch01.decode_share([1, 10], [0.5, 0.6], ax=ax,
                                                              threshold=v),
        "roofline_grid chips": lambda v: ch03.roofline_grid(chips=v, dtypes=("bf16",)),
        "roofline_grid batch": lambda v: ch03.roofline_grid(chips=("h100",), batch=v),
        "intensity_vs_tokens": lambda v: ch04.intensity_vs_tokens(v, {"a": [1.0, 2.0]}, ax=ax),
        "attainable_vs_batch": lambda v: ch04.attainable_vs_batch([1, 2], {"a": v}, ax=ax),
        "kv_step_bars batch": lambda v: ch05.kv_step_bars(ax, v, 128),
        "kv_step_bars ylim": lambda v: ch05.kv_step_bars(ax, 1, 128, ylim=v),
        "latency_throughput": lambda v: ch06.latency_throughput(ax, "llama-3-8b", "h100", 64,
                                                                16, v),
        "client_timeline": lambda v: ch06.client_timeline(ax, arrive_s=0.001, step_s=0.01,
                                                          prefill_s=v, tpot_s=0.01),
        "experts_read": lambda v: ch07.experts_read(largest=v),
        "dashboard": lambda v: ch07.dashboard(batch=v, ax=ax),
        "html_table": lambda v: widgets.html_table(v),
        "table": lambda v: hardware.table(names=v),
        "roofline.plot": lambda v: roofline.plot(["h100"], imax=v, ax=ax),
        "explore": lambda v: roofline.explore("h100", "bf16", v, ax=ax),
        "plot_roofline": lambda v: machine.plot_roofline(ax, 1e12, v),
        "fmt_like": lambda v: prose.fmt_like(v, "1,234.5"),
        "fmt_like text": lambda v: prose.fmt_like(1.0, v),
    }


_FIGURES = list(_figure_calls(None))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(_FIGURES), value=st.one_of(anything, json_values))
def test_figures_tables_and_prose_checks_give_a_clear_error_or_draw(which, value):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        ax = plt.figure().add_subplot()
        one_line_error(lambda: _figure_calls(ax)[which](value))
    finally:
        plt.close("all")


# --- save and load: every accelerator the library accepts reads back -------------------------
def _within(kind):
    lo, hi = hardware.LIMITS[kind]
    scale = hardware._SCALE[kind]
    return st.floats(lo * scale, hi * scale, allow_nan=False, allow_infinity=False)


@FAST
@given(memory=_within("memory_gib"), bandwidth=_within("bandwidth_gb_s"),
       peaks=st.dictionaries(st.sampled_from(["bf16", "fp16", "fp8", "int8", "fp32"]),
                             _within("peak_tflops"), min_size=1, max_size=3),
       link=st.one_of(st.none(), st.tuples(_within("bandwidth_gb_s"), _within("latency_us"),
                                           st.integers(1, 2**20))),
       name=st.text(min_size=1, max_size=100).filter(lambda t: t.strip() and t.isprintable()))
def test_every_accelerator_the_library_accepts_saves_and_reads_back(memory, bandwidth, peaks,
                                                                     link, name):
    chip = one_line_error(lambda: hardware.Accelerator(
        name=name, vendor="measured", architecture="x", memory_bytes=memory, memory_type="DRAM",
        bandwidth=bandwidth, peaks=peaks, interconnect=None if link is None else "link",
        interconnect_bandwidth=None if link is None else link[0], sources={},
        collective_latency_s=0.0 if link is None else link[1],
        domain_size=1 if link is None else link[2]))
    assume(chip is not None)
    with tempfile.TemporaryDirectory() as directory:
        path = machine.save_accelerator(chip, Path(directory) / "chip.json")
        (back,) = hardware.load_accelerators(path)
    assert back.name == chip.name and back.domain_size == chip.domain_size
    for a, b in ((back.memory_bytes, chip.memory_bytes), (back.bandwidth, chip.bandwidth),
                 *((back.peaks[k], chip.peaks[k]) for k in chip.peaks)):
        assert a == pytest.approx(b, rel=1e-5)
