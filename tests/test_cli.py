"""The command line: tables, JSON, listings, and one-line errors with exit code 2."""

import json
import subprocess
import sys

import pytest

import llm_roofline as lr
from llm_roofline.calculator import gpus_needed
from llm_roofline.cli import main


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def test_estimate_table(capsys):
    code, out, _ = run(capsys, "estimate", "--model", "llama-3-70b", "--gpu", "h100-sxm",
                       "--dtype", "fp8", "--batch", "32", "--prompt", "2048", "--output", "256",
                       "--kv-dtype", "fp8", "--n-gpus", "2")
    assert code == 0
    est = lr.estimate("llama-3-70b", "h100-sxm", 32, 2048, 256, weight_dtype="fp8",
                      kv_dtype="fp8", n_gpus=2)
    assert "2 x NVIDIA H100 SXM" in out and "fits" in out
    assert f"{est.tpot_s * 1e3:10.2f} ms" in out
    assert f"{est.throughput_tok_s:10.1f} tokens/s" in out


def test_estimate_json_matches_the_library(capsys, tmp_path):
    path = tmp_path / "qwen.json"
    path.write_text(lr.models._MODELS.joinpath("qwen2.5-7b.json").read_text())
    code, out, _ = run(capsys, "estimate", "--config", str(path), "--gpu", "a100", "--json",
                       "--batch", "4", "--mbu", "0.7", "--queue", "0.1")
    assert code == 0
    result = json.loads(out)
    est = lr.estimate(lr.get_model("qwen2.5-7b"), "a100", 4, 2048, 256, mbu=0.7, queue_s=0.1)
    assert result["model"] == "qwen"
    assert result["tpot_s"] == pytest.approx(est.tpot_s)
    assert result["ttft_s"] == pytest.approx(est.ttft_s)
    assert result["memory_gib_per_gpu"]["kv_cache"] == pytest.approx(est.memory.kv_cache / 2**30)
    assert result["memory_gib_per_gpu"]["capacity"] == 80  # an A100 80GB holds 80 GiB
    assert result["fits"] is True and result["decode_bound"] == "memory"


def test_listings(capsys):
    code, out, _ = run(capsys, "models")
    assert code == 0
    for name in lr.list_models():
        assert name in out
    assert "671.03B" in out and "37.55B" in out
    code, out, _ = run(capsys, "gpus")
    assert code == 0 and "NVIDIA H100 SXM" in out and "989.4 TF" in out
    assert " 141GiB " in out and "H100 PCIe" in out  # binary capacity; what 'H100' means


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["estimate", "--model", "llama-9", "--gpu", "h100"], "unknown model 'llama-9'"),
        (["estimate", "--model", "llama-3-70b", "--gpu", "h101"], "unknown accelerator"),
        (["estimate", "--model", "llama-3-70b", "--gpu", "h100", "--batch", "0"], "batch"),
        (["estimate", "--model", "llama-3-70b", "--gpu", "h100", "--batch", "x"], "--batch"),
        (["estimate", "--model", "llama-3-70b", "--gpu", "h100", "--n-gpus", "3"], "n_gpus"),
        (["estimate", "--model", "llama-3-70b", "--gpu", "h100", "--prompt", "9000"],
         "max_context"),
        (["estimate", "--model", "llama-3-70b", "--gpu", "h100", "--dtype", "fp7"], "fp7"),
        (["estimate", "--gpu", "h100"], "--model"),
        (["estimate", "--config", "/no/such/config.json", "--gpu", "h100"], "cannot read"),
        (["frobnicate"], "invalid choice"),
        ([], "COMMAND"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("llm_roofline: error:") and message in err


def test_bad_config_json_names_the_missing_field(capsys, tmp_path):
    config = json.loads(lr.models._MODELS.joinpath("llama-3-8b.json").read_text())
    del config["num_attention_heads"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, _, err = run(capsys, "estimate", "--config", str(path), "--gpu", "h100")
    assert code == 2 and "num_attention_heads" in err
    path.write_text("{not json")
    code, _, err = run(capsys, "estimate", "--config", str(path), "--gpu", "h100")
    assert code == 2 and "not valid JSON" in err


def test_help_explains_every_option(capsys):
    code, out, _ = run(capsys, "estimate", "--help")
    assert code == 0
    for option in ("--model", "--config", "--gpu", "--dtype", "--kv-dtype", "--batch", "--prompt",
                   "--output", "--n-gpus", "--mbu", "--mfu", "--queue", "--json"):
        assert option in out


def test_python_dash_m_entry_point():
    done = subprocess.run([sys.executable, "-m", "llm_roofline", "estimate", "--model",
                           "mistral-7b", "--gpu", "h100", "--json"], capture_output=True, text=True)
    assert done.returncode == 0 and json.loads(done.stdout)["model"] == "mistral-7b"
    done = subprocess.run([sys.executable, "-m", "llm_roofline", "gpus", "--bogus"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1


def test_a_model_that_does_not_fit_says_how_many_gpus_it_needs(capsys):
    argv = ("estimate", "--model", "llama-3-70b", "--gpu", "h100-sxm", "--dtype", "fp8",
            "--batch", "32", "--prompt", "2048", "--output", "256")
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "DOES NOT FIT" in out
    needed = gpus_needed("llama-3-70b", "h100-sxm", 32, 2048, 256, weight_dtype="fp8",
                         kv_dtype="bf16")
    assert needed == 2
    assert "GPUs needed to fit               2" in out
    code, out, _ = run(capsys, *argv, "--json")
    assert json.loads(out)["gpus_needed"] == 2
    code, out, _ = run(capsys, *argv, "--n-gpus", "2")  # the advice works
    assert code == 0 and "fits" in out and "DOES NOT FIT" not in out


def test_a_chip_without_interconnect_does_not_advise_more_of_them(capsys):
    argv = ("estimate", "--model", "llama-3-70b", "--gpu", "m4max")
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "DOES NOT FIT" in out and "GPUs needed" not in out
    assert "does not fit on one, and this accelerator has no interconnect" in out
    code, out, _ = run(capsys, *argv, "--json")
    assert json.loads(out)["gpus_needed"] is None
    code, _, err = run(capsys, *argv, "--n-gpus", "2")
    assert code == 2 and "no interconnect" in err


def test_n_gpus_help_states_the_kv_head_rule(capsys):
    code, out, _ = run(capsys, "estimate", "--help")
    assert code == 0 and "KV heads or be a multiple of them" in " ".join(out.split())  # unwrapped
