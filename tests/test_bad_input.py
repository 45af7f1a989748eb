"""Bad input, one test per class of bug: a one-line ``ValueError`` (exit code 2 and one line on
the command line) naming the value and what is allowed, never another exception, a hang,
exhausted memory, a silently wrong or non-finite number, or a changed file."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest

import llm_roofline as lr
from llm_roofline import (
    hardware,
    kv,
    machine,
    measure,
    measured,
    realistic,
    roofline,
    serving,
    sla,
    validate,
    vram,
)
from llm_roofline.course import student
from llm_roofline.course.exercises import check
from llm_roofline.course.registry import register
from llm_roofline.models import ModelConfig, get_model, load_config
from llm_roofline.tiny import KVCache, TinyLlama
from llm_roofline.tiny.model import weight_shapes
from test_cli import run

DATA = Path(hardware.__file__).parent / "data"
MICRO = machine.chapter_models()["micro"]
H100 = hardware.get_accelerator("h100")


def one_line(call, *match: str) -> str:
    """``call()`` must raise a one-line ValueError containing every ``match``; its message."""
    with pytest.raises(ValueError) as info:
        call()
    text = str(info.value)
    assert text and "\n" not in text and len(text) < 600, text
    for m in match:
        assert m in text, (m, text)
    return text


def refused(capsys, *argv, match: str = "") -> str:
    code, out, err = run(capsys, *argv)
    assert code == 2 and not out, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llm_roofline: error: "), err
    assert match in lines[0], (match, lines[0])
    return lines[0]


# ---- files: a size cap that holds for devices, pipes and folders ---------------------------

def _readers():
    return {
        "load_config": load_config,
        "load_accelerators": hardware.load_accelerators,
        "measured.load": measured.load,
        "validate.read_json": lambda p: validate.read_json("data", p),
    }


@pytest.mark.parametrize("reader", ["load_config", "load_accelerators", "measured.load",
                                    "validate.read_json"])
@pytest.mark.parametrize("path", ["/dev/zero", "/dev/urandom", "missing.json", "folder",
                                  "x" * 300 + ".json", "fifo"])
def test_every_file_reader_caps_what_it_reads_and_names_the_path(tmp_path, reader, path):
    read = _readers()[reader]
    if path == "folder":
        path = tmp_path / "folder"
        (path / "sub").mkdir(parents=True)
    elif path == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
    elif not path.startswith("/dev/"):
        path = tmp_path / path
    one_line(lambda: read(path))


def test_a_writer_stuck_pipe_does_not_hang_the_reader(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # keep a reader so a writer may open it
    writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        one_line(lambda: load_config(fifo), "pipe.json")
    finally:
        os.close(writer)
        os.close(fd)


@pytest.mark.parametrize("text, reason", [
    ('{"a": NaN}', "NaN"), ('{"a": Infinity}', "Infinity"),
    ("[" * 100_000 + "]" * 100_000, "too deeply"), ('{"a": ' + "9" * 5000 + "}", "digits"),
    ("\x00\x01", "not a text file"), ("", "empty"), ("{", "not valid JSON"),
])
def test_json_files_are_strict_and_name_the_file(tmp_path, text, reason):
    path = tmp_path / "f.json"
    path.write_text(text)
    for read in (load_config, hardware.load_accelerators,
                 lambda p: student.write_student_edition(p.parent, tmp_path / "out")):
        target = path
        if read is not load_config and read is not hardware.load_accelerators:
            target = tmp_path / "nb" / "a.ipynb"
            target.parent.mkdir(exist_ok=True)
            target.write_text(text)
        one_line(lambda read=read, target=target: read(target), reason)
    assert not (tmp_path / "out").exists()


def test_a_config_number_too_long_to_read_names_the_file(tmp_path):
    config = json.loads((DATA / "models" / "llama-3-8b.json").read_text())
    path = tmp_path / "big.json"
    path.write_text(json.dumps(config).replace('"vocab_size": 128256', '"vocab_size": ' + "9" * 5000))
    one_line(lambda: load_config(path), "big.json", "digits")


# ---- loops and allocations: capped before they start ----------------------------------------

def test_loops_and_allocations_are_capped_before_they_start():
    big = ModelConfig("big", vocab_size=2**20, hidden_size=2**16, intermediate_size=2**18,
                      n_layers=2**10, n_heads=2**9, n_kv_heads=2**9, head_dim=128)
    one_line(lambda: TinyLlama.random(big), "memory")
    one_line(lambda: KVCache.empty(get_model("llama-3-8b"), 2**40, 8), "memory")
    one_line(lambda: serving.chunked_prefill("llama-3-8b", "h100", 1, 100, 10**6, 1),
             "prompt_len", "8,192")
    one_line(lambda: serving.chunked_prefill("llama-3-8b", "h100", 1, 100, 8192, 1),
             "chunk", "from 8 to")
    one_line(lambda: measure.copy_bandwidth(1, repeats=10**12), "repeats", "1,000")
    one_line(lambda: measure.matvec_bandwidth(1, repeats=10**12), "repeats")
    one_line(lambda: measure.timed_seconds(lambda: None, 10**12), "repeats")
    one_line(lambda: measure.matmul_peak(10**6), "n", "16,384")


def test_best_batch_bisects_when_more_batches_fit_than_it_sweeps(monkeypatch):
    kwargs = dict(tpot_max_s=0.05, ttft_max_s=2.0)
    swept = sla.best_batch("llama-3-8b", "h100", 1024, 256, **kwargs)
    monkeypatch.setattr(sla, "MAX_SWEEP", 4)
    assert sla.best_batch("llama-3-8b", "h100", 1024, 256, **kwargs) == swept
    tiny = ModelConfig("t", vocab_size=1, hidden_size=1, intermediate_size=1, n_layers=1,
                       n_heads=1, n_kv_heads=1, head_dim=1)
    monkeypatch.undo()
    choice = sla.best_batch(tiny, "h100", 1, 1, tpot_max_s=1, ttft_max_s=1)
    assert choice.batch >= 1 and np.isfinite(choice.throughput_tok_s)


# ---- the accelerator file: every field checked as the built-in data is ----------------------

def _record(mutate):
    data = json.loads((DATA / "accelerators.json").read_text())
    record = copy.deepcopy(next(r for r in data["accelerators"] if r["name"] == H100.name))
    mutate(record)
    return record


BAD_FIELDS = {
    "bandwidth 0": (lambda r: r.update(bandwidth_gb_s=0), "bandwidth_gb_s"),
    "bandwidth 5e-324": (lambda r: r.update(bandwidth_gb_s=5e-324), "bandwidth_gb_s"),
    "peak 0": (lambda r: r["peak_tflops"].update(bf16=0), "peak_tflops"),
    "peak negative": (lambda r: r["peak_tflops"].update(bf16=-1), "peak_tflops"),
    "peak unknown precision": (lambda r: r["peak_tflops"].update(fp7=1), "fp7"),
    "peak a string": (lambda r: r["peak_tflops"].update(bf16="989"), "peak_tflops"),
    "memory negative": (lambda r: r.update(memory_gib=-80), "memory_gib"),
    "memory a bool": (lambda r: r.update(memory_gib=True), "memory_gib"),
    "domain 0": (lambda r: r["interconnect"].update(domain_size=0), "domain_size"),
    "domain fractional": (lambda r: r["interconnect"].update(domain_size=1.5), "domain_size"),
    "latency negative": (lambda r: r["interconnect"].update(latency_us=-1000), "latency_us"),
    "latency missing": (lambda r: r["interconnect"].pop("latency_us"), "latency_us"),
    "network latency negative": (lambda r: r["network"].update(latency_us=-1), "latency_us"),
    "name a number": (lambda r: r.update(name=5), "name"),
    "name too long": (lambda r: r.update(name="g" * 5000), "5002 characters"),
    "name on two lines": (lambda r: r.update(name="a\nb"), "name"),
    "vendor missing": (lambda r: r.pop("vendor"), "vendor"),
    "a typo": (lambda r: r.update(bandwith_gb_s=1), "bandwith_gb_s"),
    "aliases a string": (lambda r: r.update(aliases="h100"), "aliases"),
    "sources a list": (lambda r: r.update(sources=[]), "sources"),
    "interconnect a list": (lambda r: r.update(interconnect=[]), "interconnect"),
}


@pytest.mark.parametrize("case", BAD_FIELDS)
def test_every_field_of_an_accelerator_file_is_checked(tmp_path, capsys, case):
    mutate, field = BAD_FIELDS[case]
    path = tmp_path / "chip.json"
    path.write_text(json.dumps({"accelerators": [_record(mutate)]}))
    one_line(lambda: hardware.load_accelerators(path), field, "chip.json")
    refused(capsys, "estimate", "--model", "llama-3-8b", "--gpu", "h100", "--gpu-file", str(path),
            match=field)


@pytest.mark.parametrize("document", [[], {}, {"accelerators": []}, {"accelerators": {}},
                                      {"accelerators": [5]}, 5, "x"])
def test_an_accelerator_file_of_the_wrong_shape_is_refused(tmp_path, document):
    path = tmp_path / "chip.json"
    path.write_text(json.dumps(document))
    one_line(lambda: hardware.load_accelerators(path), "chip.json")


@pytest.mark.parametrize("field, value", [
    ("bandwidth", 0.0), ("bandwidth", float("nan")), ("bandwidth", 5e-324), ("memory_bytes", -1.0),
    ("peaks", {"bf16": 0.0}), ("peaks", {}), ("name", 5), ("domain_size", 0),
    ("collective_latency_s", -1e-3), ("interconnect_bandwidth", None), ("notes", None),
])
def test_an_accelerator_is_checked_however_it_is_made(field, value):
    one_line(lambda: dataclasses.replace(H100, **{field: value}), field)


@pytest.mark.parametrize("name", hardware.list_accelerators())
def test_save_and_load_round_trip_every_built_in_chip_and_its_aliases(tmp_path, capsys, name):
    chip = hardware.get_accelerator(name)
    path = machine.save_accelerator(chip, tmp_path / "chip.json")
    assert hardware.load_accelerators(path) == [chip]
    for alias in hardware.aliases(chip):
        assert hardware.find_accelerator(alias, path) == chip
    code, _, err = run(capsys, "estimate", "--model", "llama-3-8b", "--gpu",
                       hardware.aliases(chip)[0], "--gpu-file", str(path), "--json")
    assert code == 0, err


def test_saving_never_replaces_what_is_not_an_accelerator_file(tmp_path):
    precious = tmp_path / "notes.txt"
    precious.write_text("precious")
    one_line(lambda: machine.save_accelerator(H100, precious), "force=True")
    assert precious.read_text() == "precious"
    one_line(lambda: machine.save_accelerator(H100, tmp_path), "folder")
    one_line(lambda: machine.save_accelerator(H100, tmp_path / "no" / "x.json"), "does not exist")
    one_line(lambda: machine.save_accelerator(H100, precious, force="yes"), "force")
    one_line(lambda: machine.save_accelerator("h100", tmp_path / "x.json"), "Accelerator")
    saved = machine.save_accelerator(H100, tmp_path / "chip.json")
    machine.save_accelerator(H100, saved)  # a notebook re-run saves again
    machine.save_accelerator(H100, precious, force=True)
    assert hardware.load_accelerators(precious) == [H100]


# ---- numbers of the wrong kind: bytes, booleans, options -----------------------------------

@pytest.mark.parametrize("message", [-1e6, float("nan"), float("inf"), None, "2", True, [],
                                     [1.0, -1.0], 2.0**70])
def test_message_sizes_are_finite_non_negative_numbers(message):
    one_line(lambda: H100.allreduce_s(8, message), "message_bytes")
    one_line(lambda: H100.send_s(message, across_nodes=False), "message_bytes")
    one_line(lambda: H100.send_s(message, across_nodes=True), "message_bytes")


@pytest.mark.parametrize("flag", ["no", "yes", None, 0, 1, "false"])
def test_flags_are_true_or_false_not_truthy(tmp_path, flag):
    one_line(lambda: kv.attention_intensity("llama-3-8b", grouped=flag), "grouped")
    one_line(lambda: H100.send_s(1e6, across_nodes=flag), "across_nodes")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.ipynb").write_text(json.dumps({"cells": []}))
    one_line(lambda: student.write_student_edition(tmp_path / "src", tmp_path / "d", force=flag),
             "force")
    one_line(lambda: TinyLlama.random(MICRO, skip_masked=flag), "skip_masked")


@pytest.mark.parametrize("call, option", [
    (lambda: sla.ttft_joining("llama-3-8b", "h100", 2, 100, 100, bogus=3), "bogus"),
    (lambda: sla.ttft_joining("llama-3-8b", "h100", 2, 100, 100, kv_dtpye="fp8"), "kv_dtype"),
    (lambda: sla.best_batch("llama-3-8b", "h100", 100, 100, tpot_max_s=1, ttft_max_s=1,
                            realistic=True), "realistic"),
    (lambda: serving.mixed_step("llama-3-8b", "h100", 1, 100, 10, realistic=True), "realistic"),
    (lambda: serving.speculative("llama-3-8b", "h100", 1, 100, 2, 0.5, queue_s=1), "queue_s"),
    (lambda: serving.chunked_prefill("llama-3-8b", "h100", 1, 100, 100, 10, bogus=1), "bogus"),
    (lambda: serving.disaggregated("llama-3-8b", "h100", 1, 100, 10, prefill_gpus=1,
                                   decode_gpus=1, n_gpus=8), "n_gpus"),
    (lambda: vram.max_prompt_len("llama-3-8b", "h100", 1, 10, mbu=0.5), "mbu"),
    (lambda: realistic.estimate("llama-3-8b", "h100", 1, 10, 10, bogus=1), "bogus"),
    (lambda: realistic.estimate("llama-3-8b", "h100", 1, 10, 10, preset="vllm"), "preset"),
])
def test_unknown_options_are_refused_not_ignored(call, option):
    one_line(call, option)


# ---- models: the wrong kind of config, and what the tiny model does not run -----------------

@pytest.mark.parametrize("cfg", ["llama-3-8b", None, {}, 5, MICRO.__dict__])
def test_a_config_that_is_not_a_model_config_is_refused(cfg):
    one_line(lambda: TinyLlama.random(cfg), "ModelConfig")
    one_line(lambda: weight_shapes(cfg), "ModelConfig")
    one_line(lambda: KVCache.empty(cfg, 1, 8), "ModelConfig")
    if not isinstance(cfg, str):
        one_line(lambda: machine.footprint_bytes(cfg, 1, 1), "ModelConfig")


@pytest.mark.parametrize("change", [dict(sliding_window=4), dict(mlp_activation="gelu_tanh"),
                                    dict(post_norms=True), dict(qk_norm=True),
                                    dict(gated_mlp=False)])
def test_the_tiny_model_refuses_what_it_would_run_as_plain_llama(change):
    one_line(lambda: TinyLlama.random(dataclasses.replace(MICRO, **change)),
             next(iter(change)))


def test_the_tiny_model_refuses_non_finite_weights_and_samples_without_nan():
    model = TinyLlama.random(MICRO)
    weights = dict(model.w)
    weights["model.norm.weight"] = weights["model.norm.weight"] * np.nan
    one_line(lambda: TinyLlama(MICRO, weights), "model.norm.weight")
    prompt = np.array([[1, 2]])
    greedy = model.generate(prompt, 3)
    for t in (5e-324, 1e-300):
        assert np.array_equal(model.generate(prompt, 3, temperature=t, seed=0), greedy)
    one_line(lambda: model.generate(prompt, 3, temperature=float("nan")), "temperature")


@pytest.mark.parametrize("value", [False, 0.0, [], "8", 1.5, -1])
def test_a_deepseek_expert_count_of_the_wrong_kind_is_refused_not_read_as_dense(value):
    config = json.loads((DATA / "models" / "deepseek-v3.json").read_text())
    config["n_routed_experts"] = value
    one_line(lambda: ModelConfig.from_hf_config(config), "n_routed_experts")


# ---- answer checks and the student edition --------------------------------------------------

@pytest.mark.parametrize("id", [["roofline-1"], None, 5, {"roofline-1"}])
def test_answer_check_ids_are_names(id):
    one_line(lambda: check(id, 1.0), "exercise id")


@pytest.mark.parametrize("answer", ["5", b"5", "nan", None, [1.0], True, 1 + 2j])
def test_answers_are_numbers_not_strings(answer):
    one_line(lambda: check("roofline-1", answer), "answer")


@pytest.mark.parametrize("kwargs, field", [
    (dict(rtol="0.1"), "rtol"), (dict(rtol=float("nan")), "rtol"), (dict(rtol=1), "rtol"),
    (dict(unit=5), "unit"), (dict(hint=None), "hint"), (dict(mistakes="x"), "mistakes"),
])
def test_register_checks_its_arguments(kwargs, field):
    args = dict(unit="u", hint="h") | kwargs
    one_line(lambda: register("bad-input-1", lambda: 1.0, **args), field)
    one_line(lambda: register(["x"], lambda: 1.0, unit="u", hint="h"), "exercise id")
    one_line(lambda: register("bad-input-2", 5, unit="u", hint="h"), "expected")


@pytest.mark.parametrize("tags", [None, 5, "nosolution", "solution", [5], {"solution": 1}])
def test_student_edition_tags_are_a_list_of_strings(tags):
    nb = {"cells": [{"cell_type": "code", "metadata": {"tags": tags}, "source": ""}]}
    one_line(lambda: student.strip_solutions(nb), "tags")
    kept = {"cells": [{"cell_type": "code", "metadata": {"tags": ["nosolution"]}, "source": ""}]}
    assert len(student.strip_solutions(kept)["cells"]) == 1  # an exact tag, not a substring


def test_student_edition_refuses_destinations_it_cannot_write(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.ipynb").write_text(json.dumps({"cells": []}))
    a_file = tmp_path / "file"
    a_file.write_text("x")
    one_line(lambda: student.write_student_edition(src, a_file / "sub"), "not a folder")
    (tmp_path / "d" / "a.ipynb").mkdir(parents=True)
    one_line(lambda: student.write_student_edition(src, tmp_path / "d", force=True), "not a file")
    assert a_file.read_text() == "x" and (tmp_path / "d" / "a.ipynb").is_dir()


def test_the_student_command_line_errs_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        student.main([])
    _, err = capsys.readouterr()
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("llm_roofline.course.student: error: ")


# ---- measurements, calibration, machine ----------------------------------------------------

def test_measurement_and_calibration_helpers_refuse_what_has_no_answer():
    one_line(lambda: measured.family(None), "engine")
    one_line(lambda: measured.family(5), "engine")
    one_line(lambda: realistic.relative_error(1, 0), "measured_value")
    one_line(lambda: realistic.relative_error(float("nan"), 1), "predicted")
    one_line(lambda: realistic.relative_error("1", 1), "predicted")
    one_line(lambda: realistic.summary([]), "results")
    one_line(lambda: realistic.summary([{}]), "results")
    one_line(lambda: machine.per_call([{}]), "rows")
    one_line(lambda: machine.per_call([{"op": "x", "seconds": float("nan"), "calls": 1}]), "seconds")
    one_line(lambda: machine.totals([]), "rows")
    one_line(lambda: machine.rows_steps(None), "rows")


# ---- roofline: no 0 or infinity from positive finite inputs -------------------------------

@pytest.mark.parametrize("call", [
    lambda: roofline.ridge_point(5e-324, 1e308), lambda: roofline.ridge_point(1e308, 5e-324),
    lambda: roofline.efficiency(1e-300, 1e300, 1e-10), lambda: roofline.attainable(1e-300, 1e-300, 1e-300),
])
def test_roofline_results_that_leave_float_range_are_refused(call):
    one_line(call, "float64")


# ---- messages: one line, the value shortened, the range once -------------------------------

def test_messages_are_one_line_with_the_value_shortened():
    one_line(lambda: hardware.get_accelerator(np.zeros((3, 3))), "array([[0., 0., 0.], [0.")
    one_line(lambda: get_model(np.zeros((3, 3))), "array(")
    text = one_line(lambda: hardware.get_accelerator("g" * 5000), "(5002 characters)")
    assert text.count("g" * 100) == 0
    one_line(lambda: serving.speculative(ModelConfig("s", 16, 16, 16, 1, 1, 1, 16, max_context=4),
                                         "h100", 1, 1, 8, 0.5), "gamma", "from 1 to 3")


@pytest.mark.parametrize("call", [lambda: get_model("nope"), lambda: hardware.get_accelerator("nope"),
                                  lambda: check("nope-1", 1.0),
                                  lambda: realistic.estimate("llama-3-8b", "h100", 1, 1, 1,
                                                             engine="nope")])
def test_unknown_names_get_one_message_format(call):
    text = one_line(call, "unknown ", "'nope")
    assert "; known: " in text and "Known" not in text


@pytest.mark.parametrize("argv, match", [
    (["--n-gpus", "0"], "--n-gpus must be an integer from 1 to 1,048,576"),
    (["--n-gpus", "2097152"], "--n-gpus must be an integer from 1 to 1,048,576"),
    (["--queue", "1e300"], "--queue must be"),
    (["--mbu", "-inf"], "--mbu must be"),
    (["--mfu", "-1e3"], "--mfu must be"),
    (["--batch", "1__0"], "--batch takes whole numbers"),
    (["--batch", "_1"], "--batch takes whole numbers"),
    (["--batch", "\u0663"], "--batch takes whole numbers"),
    (["--mbu", "\u0661"], "--mbu takes a number"),
    (["--mbu", "0x1"], "--mbu takes a number"),
    (["--kv-dtype", ""], "unknown dtype ''"),
    (["--dtype", ""], "unknown dtype ''"),
    (["--prompt", "100000"], "--prompt + --output = 100,256 tokens exceeds"),
    (["--gpu-file", "/dev/zero"], "/dev/zero"),
])
def test_the_command_line_speaks_with_one_voice(capsys, argv, match):
    base = ["estimate", "--model", "llama-3-8b", "--gpu", "h100"]
    text = refused(capsys, *base, *argv, match=match)
    assert "argument --" not in text  # the flag is named once
    if "--config" not in argv:
        refused(capsys, "estimate", "--config", "/dev/zero", "--gpu", "h100", match="/dev/zero")


def test_the_command_line_accepts_python_style_numbers(capsys):
    code, _, err = run(capsys, "estimate", "--model", "llama-3-8b", "--gpu", "h100", "--batch",
                       "1_0", "--mbu", "5e-1", "--queue", ".5", "--json")
    assert code == 0, err


# ---- the chapters' figures and tables: their arguments checked before anything is drawn -----

def _chapter_calls():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from llm_roofline.course import ch01, ch02, ch03, ch04, ch05, ch06, ch07, plots, widgets

    ax = plt.figure().add_subplot()
    return [
        (lambda: ch01.decode_share(None, [0.5]), "output_lens"),
        (lambda: ch01.decode_share([1], [0.5], ax="x"), "ax"),
        (lambda: ch01.snapshot(None), "tally"),
        (lambda: ch02.phase_rows(None, {}), "prefill"),
        (lambda: ch02.op_intensity({"x": 1}, {"x": 1}), "formulas.Cost"),
        (lambda: ch02.two_regimes(ax="x"), "ax"),
        (lambda: ch03.roofline_grid(chips=None), "chips"),
        (lambda: ch03.roofline_grid(dtypes=None), "dtypes"),
        (lambda: ch03.roofline_grid(chips=["h100"] * 100), "at most 12"),
        (lambda: ch04.intensity_vs_tokens({}, {"a": [1, 2]}), "tokens"),
        (lambda: ch04.attainable_vs_batch([1, 2], {"a": 5}), "scheme"),
        (lambda: ch04.phases_on_roofline(None, "h100", 1, 8), "model"),
        (lambda: ch04.op_points({1: None}), "costs"),
        (lambda: ch05.kv_step_bars(None, 1, 8), "ax"),
        (lambda: ch05.kv_step_bars(ax, np.arange(3), 8), "batch"),
        (lambda: ch06.latency_throughput(ax, "llama-3-8b", "h100", 64, 16, None), "batches"),
        (lambda: ch06.latency_throughput(ax, "llama-3-8b", "h100", 64, 16, [1, 2], bogus=1),
         "bogus"),
        (lambda: ch06.latency_throughput(ax, "llama-3-8b", "h100", 64, 16, [1, 2],
                                         annotate=[3]), "annotate"),
        (lambda: ch06.client_timeline(ax, arrive_s=0.0, step_s=None, prefill_s=0.1,
                                      tpot_s=0.01), "step_s"),
        (lambda: ch06.client_timeline(ax, arrive_s=0.0, step_s=0.01, prefill_s=0.1,
                                      tpot_s=10**19), "tpot_s"),
        (lambda: ch06.chunk_tradeoff(ax, [1], "x"), "results"),
        (lambda: ch07.experts_read(models=None), "models"),
        (lambda: ch07.experts_read(models=["nope"]), "unknown model"),
        (lambda: ch07.dashboard(ax="x"), "ax"),
        (lambda: widgets.html_table(-1), "rows"),
        (lambda: widgets.html_table([{"a": 1.0}], floatfmt=None), "fmt"),
        (lambda: widgets.scrubber(None, [1]), "draw"),
        (lambda: widgets.scrubber(lambda ax, v: None, list(range(1000))), "200 frames"),
        (lambda: plots.timeline(None, [1.0]), "passes"),
        (lambda: hardware.table(precisions=None), "precisions"),
        (lambda: hardware.table(precisions=("fp7",)), "fp7"),
        (lambda: hardware.growth(names=-1), "names"),
        (lambda: roofline.plot(None), "accelerators"),
        (lambda: roofline.plot(["h100"], imin=None), "imin"),
        (lambda: roofline.plot(["h100"], operations={"a": (1, 2, 3)}), "operation"),
        (lambda: roofline.explore("h100", "bf16", [1.0, 2.0]), "intensity"),
        (lambda: machine.plot_roofline(None, 1e12, 1e11), "ax"),
        (lambda: machine.plot_roofline(ax, 1e12, 1e11, points=None), "points"),
        (lambda: machine.plot_roofline(ax, 1e12, 1e11, cache_bandwidth="x"), "cache_bandwidth"),
        (lambda: machine.profile(None, 1, 8, 1), "TinyLlama"),
    ]


def test_the_chapters_figures_and_tables_check_their_arguments():
    import matplotlib.pyplot as plt

    try:
        for call, match in _chapter_calls():
            one_line(call, match)
    finally:
        plt.close("all")


def test_sweeps_are_capped_before_their_arrays_are_made(capsys):
    one_line(lambda: lr.estimate("llama-3-8b", "h100", np.ones(validate.MAX_POINTS + 1, int), 8, 8),
             "batch", "at most 1,048,576")
    one_line(lambda: validate.reals("x", np.ones(validate.MAX_POINTS + 1)), "x")
    batches = ",".join(map(str, range(1, 41)))
    prompts = ",".join(map(str, range(100, 3100, 100)))
    refused(capsys, "estimate", "--model", "llama-3-8b", "--gpu", "h100", "--batch", batches,
            "--prompt", prompts, match="1,200 points")
