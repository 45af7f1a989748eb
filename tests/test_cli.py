"""The command line: what it shows adds up, sweeps, listings, strict JSON, one-line errors."""

import json
import re
import subprocess
import sys

import pytest

import llm_roofline as lr
from llm_roofline.cli import SIGNIFICANT_FIGURES, _time, main

GIB = 2**30
JSON_REL = 10.0 ** (1 - SIGNIFICANT_FIGURES)  # --json rounds: a bound on its relative error


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def strict_json(text):
    def refuse(constant):
        raise AssertionError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def memory_lines(out):
    """The memory table of a report: {label: GiB}."""
    rows = {}
    for label in ("weights", "KV cache", "activations", "runtime reserve", "free", "capacity"):
        match = re.search(rf"^  {label} +(-?[\d.]+)", out, re.M)
        rows[label] = float(match.group(1))
    return rows


# The issue's case: Llama-3-70B in FP8 on 2 x H100, 32 users with 7,680-token prompts.
SEVENTY_B = ("estimate", "--model", "llama-3-70b", "--gpu", "h100", "--n-gpus", "2", "--dtype",
             "fp8", "--batch", "32", "--prompt", "7680", "--output", "256")


def test_memory_adds_up_to_the_capacity_and_the_verdict_follows(capsys):
    code, out, _ = run(capsys, *SEVENTY_B)
    assert code == 0
    rows = memory_lines(out)
    parts = rows["weights"] + rows["KV cache"] + rows["activations"] + rows["runtime reserve"]
    assert parts + rows["free"] == pytest.approx(rows["capacity"], abs=0.02)  # printed to 0.01
    est = lr.estimate("llama-3-70b", "h100", 32, 7680, 256, weight_dtype="fp8", n_gpus=2)
    assert rows["free"] == pytest.approx(est.memory.free / GIB, abs=0.005)
    assert (rows["free"] >= 0) == est.fits
    verdict = out.split("\n\n")[1]  # the verdict comes before the tables
    assert verdict.startswith("FITS" if est.fits else "DOES NOT FIT")


def test_a_model_that_does_not_fit_says_what_would_and_labels_latencies(capsys):
    argv = ("estimate", "--model", "llama-3-70b", "--gpu", "h100", "--dtype", "fp8",
            "--batch", "32", "--prompt", "2048", "--output", "256")
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "DOES NOT FIT" in out and "IF IT FIT" in out
    needed = lr.vram.gpus_needed("llama-3-70b", "h100", 32, 2048, 256, weight_dtype="fp8")
    assert needed == 2 and "--n-gpus 2 " in out
    most = lr.vram.max_batch("llama-3-70b", "h100", 2048, 256, weight_dtype="fp8")
    assert f"--batch {most} " in out
    result = strict_json(run(capsys, *argv, "--json")[1])
    assert result["fits"] is False and result["would_fit"]["n_gpus"] == 2
    code, out, _ = run(capsys, *argv, "--n-gpus", "2")  # the advice works
    assert code == 0 and out.split("\n\n")[1].startswith("FITS") and "IF IT FIT" not in out


def test_precisions_are_always_printed(capsys):
    _, out, _ = run(capsys, *SEVENTY_B)
    est = lr.estimate("llama-3-70b", "h100", 32, 7680, 256, weight_dtype="fp8", n_gpus=2)
    assert " ".join(f"precisions: {est.precision}".split()) in " ".join(out.split())
    assert "KV cache bf16" in est.precision and "fp8" in est.compute_dtype
    assert "KV cache bf16 by default, whatever --dtype is" in out
    _, out, _ = run(capsys, *SEVENTY_B, "--kv-dtype", "fp8")
    assert "KV cache fp8" in out and "by default" not in out
    _, out, _ = run(capsys, *SEVENTY_B, "--compute-dtype", "bf16")  # weight-only FP8 (W8A16)
    assert "math bf16" in out


def test_every_line_fits_a_terminal_and_a_page(capsys):
    for argv in (SEVENTY_B, (*SEVENTY_B[:-6], "--dtype", "int4"), ("estimate", "--model",
                 "deepseek-v3", "--gpu", "h200", "--n-gpus", "8")):
        _, out, _ = run(capsys, *argv)
        assert max(map(len, out.splitlines())) <= 82, max(out.splitlines(), key=len)


def test_the_amortised_line_only_where_it_is_true(capsys):
    _, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--gpu", "h100")
    assert "amortised" not in out and "1 user," in out
    _, out, _ = run(capsys, "estimate", "--model", "llama-3-8b", "--gpu", "h100", "--batch", "8")
    assert "amortised: no user waits this little" in out


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(10.57968, "10.58 s"), (1.0, "1.00 s"), (0.2429, "243 ms"), (0.04567, "45.7 ms"),
     (0.001, "1 ms"), (0.000717, "717 us"), (4.2e-6, "4.2 us")],
)
def test_times_print_in_the_unit_that_reads_best(seconds, text):
    assert _time(seconds) == text


def test_a_sweep_prints_one_row_per_point(capsys):
    argv = ("estimate", "--model", "llama-3-8b", "--gpu", "h100", "--batch", "1,8,32,128")
    code, out, _ = run(capsys, *argv)
    assert code == 0
    rows = [line for line in out.splitlines() if re.match(r"^ +\d", line)]
    assert [int(r.split()[0].replace(",", "")) for r in rows] == [1, 8, 32, 128]
    results = strict_json(run(capsys, *argv, "--json")[1])
    assert [r["batch"] for r in results] == [1, 8, 32, 128]
    for r in results:
        est = lr.estimate("llama-3-8b", "h100", r["batch"], 2048, 256)
        assert r["tpot_kernel_s"] == pytest.approx(est.tpot_kernel_s, rel=JSON_REL)
        assert r["throughput_kernel_tok_s"] == pytest.approx(r["batch"] / r["tpot_kernel_s"],
                                                             rel=JSON_REL)
    grid = strict_json(run(capsys, "estimate", "--model", "llama-3-8b", "--gpu", "h100",
                           "--batch", "1,2", "--prompt", "128,256", "--output", "16", "--json")[1])
    assert [(r["batch"], r["prompt_len"]) for r in grid] == [(1, 128), (1, 256), (2, 128), (2, 256)]


def test_config_folder_and_the_models_own_name(capsys, tmp_path):
    config = json.loads(lr.models._MODELS.joinpath("qwen2.5-7b.json").read_text())
    snapshot = tmp_path / "models--Qwen--Qwen2.5-7B" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({**config, "_name_or_path": "Qwen/Qwen2.5-7B"}))
    result = strict_json(run(capsys, "estimate", "--config", str(snapshot), "--gpu", "a100",
                             "--json", "--batch", "4", "--mbu", "0.7", "--queue", "0.1")[1])
    assert result["model"] == "Qwen/Qwen2.5-7B"  # the config's own name, not "config"
    est = lr.estimate(lr.get_model("qwen2.5-7b"), "a100", 4, 2048, 256, mbu=0.7, queue_s=0.1)
    assert result["tpot_kernel_s"] == pytest.approx(est.tpot_kernel_s, rel=JSON_REL)
    assert result["ttft_kernel_s"] == pytest.approx(est.ttft_kernel_s, rel=JSON_REL)
    assert result["memory_gib_per_gpu"]["capacity"] == 80  # an A100 80GB holds 80 GiB
    plain = tmp_path / "my-model"
    plain.mkdir()
    (plain / "config.json").write_text(json.dumps({k: v for k, v in config.items()
                                                    if k not in ("_name_or_path", "architectures")}))
    assert strict_json(run(capsys, "estimate", "--config", str(plain / "config.json"), "--gpu",
                           "a100", "--json")[1])["model"] == "my-model"


def test_listings(capsys):
    code, out, _ = run(capsys, "models")
    assert code == 0
    for name in lr.list_models():
        assert name in out
    assert "671.03B" in out and "37.55B" in out
    code, out, _ = run(capsys, "gpus")
    assert code == 0 and "NVIDIA H100 SXM" in out and "989.4 TF" in out
    assert " 141GiB " in out and "H100 PCIe" in out  # binary capacity; what 'H100' means
    for alias in ("4090", "H100", "MI300X"):  # the aliases that work are listed
        assert re.search(rf"also: .*\b{alias}\b", out), alias
        assert lr.get_accelerator(alias)
    for alias in ("H20", "L40S", "GB200", "A100 40GB", "TPU v5e"):  # the anchors' chips
        assert re.search(rf"also: .*\b{alias}\b", out), alias
    assert "link: NVLink 5 (72-GPU domain), 1800 GB/s" in out and "link: none" in out
    assert max(map(len, out.splitlines())) <= 82  # a terminal's width


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["estimate", "--model", "llama-9", "--gpu", "h100"], "unknown model 'llama-9'"),
        (["estimate", "--model", "llama3-70b", "--gpu", "h101"], "unknown accelerator"),
        (["estimate", "--model", "llama-3-70b", "--gpu", "h100", "--batch", "0"], "--batch"),
        (["estimate", "--model", "llama-3-70b", "--gpu", "h100", "--batch", "x"], "--batch"),
        (["estimate", "--model", "llama-3-8b", "--gpu", "h200", "--batch", str(2**41)],
         "--batch"),
        (["estimate", "--model", "llama-3-8b", "--gpu", "h200", "--prompt",
          "9223372036854775808"], "--prompt"),
        (["estimate", "--model", "llama-3-8b", "--gpu", "h100", "--mbu", "5e-324"], "--mbu"),
        (["estimate", "--model", "llama-3-8b", "--gpu", "h100", "--mfu", "nan"], "--mfu"),
        (["estimate", "--model", "llama-3-8b", "--gpu", "h100", "--queue", "-1"], "--queue"),
        (["estimate", "--model", "llama-3-70b", "--gpu", "h100", "--n-gpus", "3"], "--n-gpus (3 GPUs)"),
        (["estimate", "--model", "llama-3-70b", "--gpu", "h100", "--prompt", "9000"],
         "max_context"),
        (["estimate", "--model", "llama-3-70b", "--gpu", "h100", "--dtype", "fp7"], "fp7"),
        (["estimate", "--gpu", "h100"], "--model"),
        (["estimate", "--config", "/no/such/config.json", "--gpu", "h100"], "no such file"),
        (["estimate", "--config", "", "--gpu", "h100"], "config path is empty"),
        (["frobnicate"], "invalid choice"),
        ([], "COMMAND"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("llm_roofline: error:") and message in err
    assert len(err) < 600  # a long bad value is shortened (the list of 18 chips is ~430)


def test_a_huge_batch_is_priced_exactly_not_overflowed(capsys):
    """The issue's 2**36 users: once a negative KV cache that 'fits'; now an exact, huge one."""
    result = strict_json(run(capsys, "estimate", "--model", "llama-3-8b", "--gpu", "h200",
                             "--batch", "68719476736", "--json")[1])
    per_token = 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 KV heads of 128, 2 bytes
    assert result["memory_gib_per_gpu"]["kv_cache"] == pytest.approx(
        68719476736 * (2048 + 256) * per_token / GIB, rel=1e-12)  # whole GiB: printed whole
    assert result["fits"] is False and result["memory_gib_per_gpu"]["free"] < 0


def test_model_names_get_suggestions(capsys):
    for name in ("llama3-70b", "llama_3_70b", " llama-3-70b"):
        code, out, err = run(capsys, "estimate", "--model", name, "--gpu", "h100", "--json")
        assert code == 0 and strict_json(out)["model"] == "llama-3-70b" or "llama-3-70b" in err


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"num_attention_heads": 0}, "num_attention_heads"),
        ({"hidden_size": "4096"}, "hidden_size"),
        ({"rope_theta": None}, "rope_theta"),
        ({"rope_theta": "abc"}, "rope_theta"),
        ({"vocab_size": 10**30}, "vocab_size"),
        ({"tie_word_embeddings": "false"}, "tie_word_embeddings"),
    ],
)
def test_a_bad_config_names_its_field(capsys, tmp_path, change, field):
    config = json.loads(lr.models._MODELS.joinpath("llama-3-8b.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, **change}))
    code, out, err = run(capsys, "estimate", "--config", str(path), "--gpu", "h100")
    assert code == 2 and out == "" and err.count("\n") == 1 and field in err


def test_unreadable_configs_name_the_path(capsys, tmp_path):
    cases = {"deep.json": "[" * 100_000 + "]" * 100_000, "bad.json": "{not json"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "binary.json").write_bytes(bytes(range(256)))
    for name in ("deep.json", "bad.json", "binary.json"):
        code, _, err = run(capsys, "estimate", "--config", str(tmp_path / name), "--gpu", "h100")
        assert code == 2 and err.count("\n") == 1 and name in err, err
    code, _, err = run(capsys, "estimate", "--config", str(tmp_path), "--gpu", "h100")
    assert code == 2 and "holds no config.json" in err


def test_help_gives_every_option_its_unit_default_and_an_example(capsys):
    code, out, _ = run(capsys, "estimate", "--help")
    assert code == 0
    text = " ".join(out.split())  # unwrapped
    for option in ("--model", "--config", "--gpu", "--dtype", "--kv-dtype", "--batch", "--prompt",
                   "--output", "--n-gpus", "--mbu", "--mfu", "--queue", "--json"):
        assert option in text
    for dtype in lr.dtypes.list_dtypes():  # every accepted precision is named
        assert dtype in text
    for words in ("users (default: 1)", "tokens (default: 2048)", "seconds (default: 0)",
                  "KV heads or be a multiple of them", "examples:", "deepseek_v3"):
        assert words in text, words
    for command in ("models", "gpus"):
        code, out, _ = run(capsys, command, "--help")
        assert code == 0 and f"llm-roofline {command}" in out


def test_python_dash_m_entry_point():
    done = subprocess.run([sys.executable, "-m", "llm_roofline", "estimate", "--model",
                           "mistral-7b", "--gpu", "h100", "--json"], capture_output=True, text=True)
    assert done.returncode == 0 and strict_json(done.stdout)["model"] == "mistral-7b"
    done = subprocess.run([sys.executable, "-m", "llm_roofline", "gpus", "--bogus"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1


def test_a_chip_without_interconnect_does_not_advise_more_of_them(capsys):
    argv = ("estimate", "--model", "llama-3-70b", "--gpu", "m4max")
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "DOES NOT FIT" in out and "--n-gpus" not in out
    assert "no interconnect" in out
    assert strict_json(run(capsys, *argv, "--json")[1])["would_fit"]["n_gpus"] is None
    code, _, err = run(capsys, *argv, "--n-gpus", "2")
    assert code == 2 and "no interconnect" in err


def test_realistic_is_a_labelled_calibrated_prediction_beside_the_bound(capsys):
    argv = ("estimate", "--model", "llama-3-8b", "--gpu", "h100", "--batch", "8")
    code, out, _ = run(capsys, *argv, "--realistic", "--engine", "vllm")
    assert code == 0 and "calibrated prediction (preset vLLM), not a floor" in out
    assert "kernel-by-kernel at MBU = MFU = 1" in out
    result = strict_json(run(capsys, *argv, "--realistic", "--json")[1])
    r = lr.estimate("llama-3-8b", "h100", 8, 2048, 256, realistic=True)
    assert result["kind"] == r.label
    assert result["tpot_predicted_s"] == pytest.approx(r.estimate.tpot_s, rel=JSON_REL)
    assert result["tpot_kernel_s"] == pytest.approx(r.bound.tpot_kernel_s, rel=JSON_REL)
    assert result["tpot_floor_s"] == pytest.approx(r.bound.tpot_floor_s, rel=JSON_REL)
    assert result["tpot_predicted_s"] > result["tpot_kernel_s"]  # slower than the peaks'
    assert not any(k in result for k in ("ttft_s", "tpot_s", "bound"))  # no unnamed time
    for bad, says in ((("--realistic", "--mbu", "0.7"), "drop --mbu"),
                      (("--engine", "vllm"), "add --realistic"),
                      (("--realistic", "--engine", "nim"), "unknown engine")):
        code, out, err = run(capsys, *argv, *bad)
        assert code == 2 and out == "" and says in err


def test_a_measured_machine_saved_to_a_file_is_an_accelerator_for_the_cli(capsys, tmp_path):
    from llm_roofline import machine

    host = {"read_GBps": 20.0, "cache_GBps": 100.0, "copy_GBps": 15.0, "matmul_GFLOPS": 300.0,
            "dtype": "fp32", "read_sweep": {"1000": 20.0}, "read_mb": 1000, "matmul_n": 1536,
            "repeats": 3, "statistic": "min",
            "cpu": "Test CPU", "cpu_count": 4, "memory_bytes": 16 * 2**30, "blas": {}}
    path = machine.save_accelerator(machine.host_accelerator(host, name="my laptop"),
                                    tmp_path / "mine.json")
    argv = ("estimate", "--model", "llama-3-8b", "--gpu-file", str(path), "--dtype", "fp32",
            "--compute-dtype", "fp32", "--json")
    result = strict_json(run(capsys, *argv, "--gpu", "my laptop")[1])
    assert result["accelerator"] == "my laptop"
    # batch 1 decode reads the 8.03B fp32 weights (less the embedding) at 20 GB/s: about 1.5 s
    assert result["tpot_kernel_s"] == pytest.approx(7.5e9 * 4 / 20e9, rel=0.02)
    code, _, err = run(capsys, *argv, "--gpu", "h100")
    assert code == 2 and "my laptop" in err  # names what the file holds
    code, _, err = run(capsys, "estimate", "--model", "llama-3-8b", "--gpu", "x", "--gpu-file",
                       str(tmp_path / "none.json"))
    assert code == 2 and "cannot read accelerator file" in err


def test_the_floor_beside_the_kernel_by_kernel_time(capsys):
    """Both times for TTFT and TPOT, each labelled, both in --json; the floor never above."""
    argv = ("estimate", "--model", "llama-3-70b", "--gpu", "h100", "--n-gpus", "8",
            "--batch", "64")
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "kernel-by-kernel" in out and "floor" in out
    lines = out.splitlines()
    header = lines.index(next(x for x in lines if x.split() == ["floor", "by-kernel"]))
    assert lines[header - 1].split() == ["kernel-"]  # the column reads kernel-by-kernel
    assert lines[header - 1].index("kernel-") == lines[header].index("by-kernel")
    est = lr.estimate("llama-3-70b", "h100", 64, 2048, 256, n_gpus=8)
    tpot = next(x for x in out.splitlines() if x.startswith("  TPOT, each user"))
    assert tpot.split()[3:7] == [*_time(est.tpot_floor_s).split(),
                                 *_time(est.tpot_kernel_s).split()]
    ttft = next(x for x in out.splitlines() if x.startswith("  TTFT, whole batch"))
    assert ttft.split()[3:7] == [*_time(est.ttft_floor_s).split(),
                                 *_time(est.ttft_kernel_s).split()]
    result = strict_json(run(capsys, *argv, "--json")[1])
    assert result["tpot_floor_s"] == pytest.approx(est.tpot_floor_s, rel=JSON_REL)
    assert result["ttft_floor_s"] == pytest.approx(est.ttft_floor_s, rel=JSON_REL)
    assert result["throughput_floor_tok_s"] == pytest.approx(64 / est.tpot_floor_s, rel=JSON_REL)
    assert result["tpot_kernel_s"] == pytest.approx(est.tpot_kernel_s, rel=JSON_REL)
    assert result["e2e_kernel_s"] == pytest.approx(est.e2e_kernel_s, rel=JSON_REL)
    assert result["tpot_floor_s"] < result["tpot_kernel_s"]
    assert result["ttft_floor_s"] < result["ttft_kernel_s"]
    assert result["throughput_floor_tok_s"] > result["throughput_kernel_tok_s"]
    assert not any(k in result for k in ("ttft_s", "tpot_s", "throughput_tok_s", "e2e_s"))


def test_the_breakdown_names_each_resource_and_the_floor(capsys):
    argv = ("estimate", "--model", "llama-3-70b", "--gpu", "h100", "--n-gpus", "8",
            "--batch", "1024", "--prompt", "1024", "--breakdown")
    code, out, _ = run(capsys, *argv)
    assert code == 0
    text = " ".join(out.split())
    assert text.count("busy per resource: math") == 2
    assert "is the math's busy time" in text  # a prefill of a million tokens: the math
    result = strict_json(run(capsys, *argv, "--json")[1])
    est = lr.estimate("llama-3-70b", "h100", 1024, 1024, 256, n_gpus=8)
    for phase in ("prefill", "decode"):
        busy = result["resources"][phase]
        assert busy == {k: pytest.approx(v, rel=JSON_REL) if not isinstance(v, str) else v
                        for k, v in est.resources(phase).items()}
        assert busy["floor"] >= max(busy[k] for k in ("compute", "memory", "interconnect",
                                                       "network"))
        assert busy["floor"] <= busy["kernel_by_kernel"]


def _reals(x):
    """Every real number (not bool, not int) in a parsed JSON value."""
    if isinstance(x, dict):
        for v in x.values():
            yield from _reals(v)
    elif isinstance(x, list):
        for v in x:
            yield from _reals(v)
    elif isinstance(x, float):
        yield x


def _significant_digits(x: float) -> int:
    """Digits of the mantissa Python prints, leading and trailing zeros dropped: 1.0 has 1,
    1.0000000000000002 has 17, 0.0304043 has 6."""
    mantissa = repr(abs(x)).lower().split("e")[0].replace(".", "")
    return len(mantissa.strip("0")) or 1


@pytest.mark.parametrize("extra", [
    (),
    ("--batch", "1,8,32,128"),
    ("--batch", "64", "--breakdown"),
    ("--realistic", "--batch", "8"),
    ("--mbu", "0.7", "--mfu", "0.45", "--queue", "0.1", "--dtype", "int4"),
    ("--model", "llama-3-70b", "--gpu", "4090"),  # does not fit
    ("--model", "deepseek-v3", "--gpu", "h200", "--n-gpus", "8", "--dtype", "fp8"),
])
def test_json_reals_carry_no_float_noise(capsys, extra):
    argv = ["estimate", "--model", "llama-3-8b", "--gpu", "h100", "--json"]
    if "--model" in extra:
        argv = argv[:1] + ["--json"]
    code, out, _ = run(capsys, *argv, *extra)
    assert code == 0
    reals = list(_reals(strict_json(out)))
    assert len(reals) >= 15
    for x in reals:  # a whole number is an exact count (FLOPs, bytes, GiB of capacity)
        assert x.is_integer() or _significant_digits(x) <= SIGNIFICANT_FIGURES, x


def test_the_issues_noise_is_gone(capsys):
    """Batch 1 decode keeps the memory 100 % busy: it was 1.0000000000000002."""
    out = run(capsys, "estimate", "--model", "llama-3-8b", "--gpu", "h100", "--json")[1]
    assert '"bandwidth_utilisation": 1.0,' in out
    assert _significant_digits(1.0000000000000002) == 17 and _significant_digits(0.0304043) == 6


def test_help_lists_every_spelling_of_a_precision(capsys):
    """The README's --dtype fp8 is in --help, with every other spelling canonical() reads."""
    from llm_roofline import dtypes

    _, out, _ = run(capsys, "estimate", "--help")
    text = " ".join(out.split())
    dtype_help = text[text.index("--dtype DTYPE weight precision"):text.index("--compute-dtype DTYPE ")]
    spellings = [*dtypes.list_dtypes(), *dtypes._ALIASES]  # the table canonical() reads
    assert "fp8" in spellings and len(spellings) >= 19
    for name in spellings:
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", dtype_help), name
        code, out, err = run(capsys, "estimate", "--model", "llama-3-8b", "--gpu", "h100",
                             "--dtype", name, "--compute-dtype", "bf16", "--json")
        assert code == 0, err  # each spelling the help lists is taken
    assert "same spellings as --dtype" in text


def test_the_readmes_library_example_runs_and_names_its_times():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    example = next(b for b in blocks if "lr.estimate(" in b)
    namespace = {}
    exec(example, namespace)  # noqa: S102  (the README's own code)
    est = namespace["est"]
    assert "ttft_kernel_s" in example and "ttft_floor_s" in example
    assert est.ttft_floor_s <= est.ttft_kernel_s and est.tpot_floor_s <= est.tpot_kernel_s


_UNIT = (r"(?:tokens?|GPUs?|users?|requests?|seconds|s|ms|us|GiB|GB/s|GB|bytes|points"
         r"|attention heads|KV heads|weights|nodes?|%)(?![\w/])")
_NUMBER = r"\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?"


def unitless_numbers(message: str) -> list[str]:
    """The numbers of a message that name no unit. Not counted: the echo of the bad value
    (after ", got"), quoted names ('llama-3-70b'), an example of the syntax ("(e.g. 1,8)"), a
    flag's value ("--batch 30"), digits inside a name (fp8, W4A16, n_gpus). A number passes
    when a unit follows it, or follows the number it ranges to ("from 1 to 8 GPUs", "23.3 of
    80.0 GiB"), or when its clause names the unit first ("a number of seconds >= 0") or says
    it is a fraction (a dimensionless share: "a fraction of the peak from 0.001 to 1")."""
    text = re.sub(r", got .*$", "", message)
    text = re.sub(r"'[^']*'", "''", text)
    text = re.sub(r"\(e\.g\. [^)]*\)", "", text)
    text = re.sub(rf"--[a-z-]+ {_NUMBER}", "", text)
    bad = []
    for m in re.finditer(rf"(?<![\w.*'-]){_NUMBER}(?![\w*])", text):
        after, clause = text[m.end():], re.split(r"[;:(]", text[:m.start()])[-1]
        if re.match(rf"\s*(?:(?:to|of|and) {_NUMBER} )?{_UNIT}", after):
            continue
        if re.search(rf"\bof {_UNIT}|fraction", clause):
            continue
        bad.append(m.group())
    return bad


def test_the_unit_check_can_fail():
    assert unitless_numbers("... with the reserve, and a GPU has 24.0") == ["24.0"]
    assert unitless_numbers("max_context = 8192") == ["8192"]
    assert unitless_numbers("n_gpus (3) must divide n_heads (64) of 'llama-3-70b'") == ["3", "64"]
    assert unitless_numbers("n_gpus (3 GPUs) must divide n_heads (64 attention heads) of "
                            "'llama-3-70b', got 3") == []


CLI = ("estimate", "--model", "llama-3-70b", "--gpu", "h100")


@pytest.mark.parametrize("argv", [
    (*CLI, "--batch", "0"), (*CLI, "--prompt", "9000"), (*CLI, "--output", "0"),
    (*CLI, "--n-gpus", "3"), (*CLI, "--n-gpus", "0"), (*CLI, "--mbu", "5"), (*CLI, "--queue", "-1"),
    ("estimate", "--model", "qwen2.5-7b", "--gpu", "h100", "--n-gpus", "14"),
    (*CLI, "--batch", ",".join(map(str, range(1, 40))), "--prompt", ",".join(map(str, range(1, 40)))),
])
def test_every_number_in_an_error_carries_its_unit(capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == 2 and re.search(r"\d", err)
    assert unitless_numbers(err.strip()) == [], err


def test_every_number_in_the_verdict_and_the_advice_carries_its_unit(capsys):
    lines = []
    for argv in (("estimate", "--model", "llama-3-70b", "--gpu", "4090"), SEVENTY_B,
                 ("estimate", "--model", "llama-3-8b", "--gpu", "h100"),
                 ("estimate", "--model", "llama-3-70b", "--gpu", "m4max")):
        out = run(capsys, *argv)[1]
        verdict = out.split("\n\n")[1].splitlines()
        assert verdict[0].startswith(("FITS", "DOES NOT FIT"))
        lines += verdict
    assert any("a GPU has" in line for line in lines) and any("--n-gpus" in x for x in lines)
    for line in lines:
        assert unitless_numbers(line) == [], line


def _message(call) -> str:
    with pytest.raises(ValueError) as caught:
        call()
    return str(caught.value)


@pytest.mark.parametrize("call", [
    lambda: lr.estimate("llama-3-70b", "h100", 0, 1, 1),
    lambda: lr.estimate("llama-3-70b", "h100", 1, 0, 1),
    lambda: lr.estimate("llama-3-70b", "h100", [1, 2], 9000, 1),
    lambda: lr.estimate("llama-3-70b", "h100", 1, 1, 1, n_gpus=3),
    lambda: lr.estimate("llama-3-70b", "h100", 1, 1, 1, n_gpus=0),
    lambda: lr.estimate("qwen2.5-7b", "h100", 1, 1, 1, n_gpus=14),
    lambda: lr.estimate("llama-3-70b", "h100", 1, 1, 1, mbu=2),
    lambda: lr.estimate("llama-3-70b", "h100", 1, 1, 1, queue_s=-1),
    lambda: lr.estimate("llama-3-70b", "h100", 1, 1, 1, reserve_fraction=2),
    lambda: lr.estimate("llama-3-70b", "h100", 1, 1, 1, prefill_chunk=2),
    lambda: lr.estimate("llama-3-70b", "h100", 1, 1, 1, weight_group_size=0),
    lambda: lr.vram.max_prompt_len("llama-3-8b", "h100", 0, 1),
    lambda: lr.vram.max_prompt_len("llama-3-8b", "h100", 1, 10**6),
    lambda: lr.vram.gpus_needed("llama-3-8b", "h100", 1, 1, 1, max_gpus=0),
    lambda: lr.calculator.decode_step("llama-3-8b", "h100", 1, 10**6),
])
def test_every_number_in_a_library_message_carries_its_unit(call):
    """The messages of deployment, vram and calculator that hold a number (the brief's grep)."""
    message = _message(call)
    assert re.search(r"\d", message.split(", got")[0]), message
    assert unitless_numbers(message) == [], message
