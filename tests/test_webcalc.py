"""The exporter of the website's calculator (llm_roofline.webcalc): the JavaScript it prints is the
library's formulas, its data is the library's data, and (with node) the page's arithmetic equals
``estimate``. The browser test of the page itself is tests/test_calculator_page.py."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import types

import numpy as np
import pytest

from conftest import ROOT
from llm_roofline import counts, estimate, formulas, get_accelerator, get_model
from llm_roofline.course import webcalc
from llm_roofline.models import list_models
from llm_roofline.parallel import Layout, dp_ep_decode_step, dp_ep_estimate
from llm_roofline.vram import max_batch

CALCULATOR_JS = ROOT / "book" / "_calculator" / "calculator.js"
MATH = types.SimpleNamespace(pow=pow, min=min, max=max)  # what sympy.jscode's output calls


@pytest.fixture(scope="module")
def data():
    return webcalc.data()


def _py(js_function: str):
    """A Python function from one exported JavaScript function (its return expression is valid
    Python once ``Math`` is bound): a check that needs no JavaScript engine."""
    args, body = re.fullmatch(r"function \(([^)]*)\) \{ return (.*); \}", js_function).groups()
    names = [a.strip() for a in args.split(",")]
    code = compile(body, "<exported>", "eval")
    scope = {"Math": MATH, "__builtins__": {}}
    return lambda *values: eval(code, scope, dict(zip(names, values, strict=True)))


@pytest.mark.parametrize("name", list_models())
def test_exported_expressions_are_the_formulas(name):
    cfg = get_model(name)
    passes = webcalc.model_passes(name)
    for absorbed, key in ((False, "prefill"), (True, "decode")):
        fn = _py(passes.get(key, passes["prefill"]))
        for b, n, p in ((1, 1, 0), (3, 1, 4095), (2, 517, 0), (64, 1, 30000), (1, 8192, 100)):
            rows = fn(b, n, p)
            ops = counts.op_elements(cfg, b, n, p, absorbed=absorbed)
            assert len(rows) == len(ops)
            for row, (op, (flops, weights, kv, _act)) in zip(rows, ops.items(), strict=True):
                for got, want in zip(row, (flops, weights, kv), strict=True):
                    assert got == pytest.approx(float(want), rel=1e-12, abs=0), (name, key, op)
    kv_cache = _py(passes["kvCache"])
    for context in (1, 511, 512, 513, 4096, 4097, cfg.max_context):
        assert kv_cache(context) == cfg.kv_cache_elements(context)


def test_exported_counts_by_hand():
    """Llama-2-7B (32 layers, d 4096, 32 heads of 128, d_ff 11008): one decode step after 99 tokens."""
    rows = dict(zip(formulas.ops_for(get_model("llama-2-7b")),
                    _py(webcalc.model_passes("llama-2-7b")["prefill"])(1, 1, 99), strict=True))
    assert rows["q_proj"] == [2 * 4096 * 4096 * 32, 4096 * 4096 * 32, 0]
    assert rows["kv_read"] == [0, 0, 2 * 32 * 128 * 100 * 32]  # keys and values of 100 tokens
    assert rows["gate_proj"][:2] == [2 * 4096 * 11008 * 32, 4096 * 11008 * 32]
    assert rows["lm_head"][:2] == [2 * 4096 * 32000, 4096 * 32000]


def test_breaks_are_where_a_window_fills():
    """Gemma-3-1B's windowed layers hold 512 tokens: a decode step's attention stops growing once
    512 keys are cached (n_past = 511); full-attention models have no break."""
    assert webcalc._breaks(get_model("gemma-3-1b")) == [511, 512]
    assert webcalc._breaks(get_model("mistral-7b-v0.1")) == [4095, 4096]
    assert webcalc._breaks(get_model("llama-3-8b")) == []
    # between breaks every op's counts are affine in n_past: second differences vanish
    cfg = get_model("gemma-3-1b")
    past = np.arange(0, 2000)
    for flops, _weights, kv, _act in counts.op_elements(cfg, 3, 1, past, absorbed=True).values():
        for series in (flops, kv):
            second = np.diff(series, 2)  # second[i] spans n_past = i .. i + 2
            kinks = set(np.flatnonzero(second != 0) + 1)
            assert kinks <= {511, 512}


def test_data_is_the_librarys(data):
    h100, a100 = data["accelerators"]["NVIDIA H100 SXM"], data["accelerators"]["NVIDIA A100 SXM 80GB"]
    assert h100["memoryBytes"] == 80 * 2**30 and h100["bandwidth"] == 3350e9
    # inside one NVLink node: a ring moves 2 (n - 1) / n of the message over half of 900 GB/s
    slope, intercept = h100["tp"][8]["allreduce"]
    assert slope == pytest.approx(2 * 7 / 8 / 450e9, rel=1e-12) and intercept == pytest.approx(3e-6)
    chip = get_accelerator("h100-sxm")
    for n in (2, 8, 16, 64):
        slope, intercept = h100["tp"][n]["allreduce"]
        for m in (1e3, 1e6, 3e8):
            assert slope * m + intercept == pytest.approx(chip.allreduce_s(n, m), rel=1e-12)
    assert h100["auto"]["fp8_e4m3"] == ["fp8", 1978.9e12] and h100["auto"]["int4"][0] == "bf16"
    assert a100["auto"]["fp8_e4m3"] == ["bf16", 312e12]  # no fp8 math on Ampere
    assert a100["compute"]["fp8_e4m3"] == _error(lambda: estimate(
        "llama-2-7b", "a100", 1, 1, 1, compute_dtype="fp8_e4m3"))
    assert data["accelerators"]["Apple M4 Max"]["tp"][2]["error"] == _error(lambda: estimate(
        "llama-2-7b", "Apple M4 Max", 1, 1, 1, n_gpus=2))
    assert data["models"]["llama-3-8b"]["tp"][7]["error"] == _error(lambda: estimate(
        "llama-3-8b", "h100", 1, 1, 1, n_gpus=7))
    llama = data["models"]["llama-3-8b"]
    # 8 KV heads: 2 per GPU of 4, 1 per GPU of 8, and still 1 (replicated) per GPU of 16
    assert [llama["tp"][n]["kvShare"] for n in (4, 8, 16)] == [2 / 8, 1 / 8, 1 / 8]
    assert llama["contextError"].format("8,193") == _error(lambda: estimate(
        "llama-3-8b", "h100", 1, 8000, 193))
    assert data["messages"]["batch"].format(0) == _error(lambda: estimate("llama-2-7b", "h100", 0, 1, 1))
    assert data["sizes"]["weight"]["int4"] == 0.5 + 2 / 128 and data["sizes"]["head"]["int4"] == 2
    # every divisor of a built-in model's query heads (llama-2-13b's 40 bring 5, 10, 20, 40)
    assert data["gpuCounts"] == [1, 2, 4, 5, 7, 8, 10, 14, 16, 20, 28, 32, 40, 64, 128]


def _error(call) -> str:
    with pytest.raises(ValueError) as info:
        call()
    return str(info.value)


def test_javascript_is_small_and_complete(tmp_path):
    path = webcalc.write(tmp_path)
    text = path.read_text()
    assert text.startswith("// Generated by llm_roofline.webcalc")
    assert len(text.encode()) < 220_000  # 18 chips, 14 formats, 9 data-parallel degrees
    for name in list_models():
        assert f'"{name}": {{prefill: function (B, n_new, n_past)' in text


def test_sphinx_hook_loads_the_files_on_the_calculator_page_only():
    added = []
    app = types.SimpleNamespace(add_css_file=lambda f, **k: added.append(f),
                                add_js_file=lambda f, **k: added.append((f, k)))
    webcalc._on_page(app, "book/index", "page.html", {}, None)
    assert added == []
    webcalc._on_page(app, "book/calculator", "page.html", {}, None)
    assert added == ["calculator.css", ("calculator-data.js", {"defer": "defer"}),
                     ("calculator.js", {"defer": "defer"})]


# --- the page's arithmetic against the library (shared with the browser test) -----------------
def random_settings(seed: int, count: int, data: dict) -> list[dict]:
    """Settings as the page's controls hold them (strings), every model, chip and precision
    drawn; about one in five is a combination the library refuses. Prompts of a model with a
    long context are often longer than the default ``prefill_chunk`` (split into pieces) or
    exactly one chunk; short ones with a batch pack several prompts into each pass."""
    rng = random.Random(seed)
    models, chips, dtypes = list(data["models"]), list(data["accelerators"]), data["dtypes"]
    chunk = data["defaults"]["prefill_chunk"]
    out = []
    for i in range(count):
        model = models[i % len(models)]
        m = data["models"][model]
        limit = m["maxContext"]
        long = (rng.choice([chunk, chunk + 1, rng.randint(chunk + 1, limit - 1)])
                if limit > chunk + 2 else rng.randint(1, limit - 1))
        prompt = rng.choice([1, 7, 128, 512, 2048, rng.randint(1, limit - 1), long])
        output = rng.choice([1, 2, 64, 256, rng.randint(1, max(1, limit - prompt))])
        allowed = [n for n in data["gpuCounts"] if "error" not in m["tp"][n]]
        n = rng.choice(data["gpuCounts"]) if rng.random() < 0.1 else rng.choice([1, *allowed[:5]])
        if rng.random() < 0.05:
            output = limit - prompt + rng.randint(1, 50)  # past the context limit
        out.append({
            "model": model, "gpu": chips[(i // len(models)) % len(chips)] if i < 84
            else rng.choice(chips), "n": str(n),
            "weight": rng.choice(dtypes), "kv": rng.choice(dtypes),
            "compute": "auto" if rng.random() < 0.8 else rng.choice(dtypes),
            "batch": str(rng.choice([1, 2, 8, 32, 100, 256, 1024, rng.randint(1, 5000)])),
            "prompt": str(prompt), "output": str(output),
            "mbu": str(rng.choice([1, 0.8, 0.55, 0.05])), "mfu": str(rng.choice([1, 0.6, 0.35])),
        })
    return out


def library(setting: dict):
    """``estimate`` and ``max_batch`` for a page setting, or the library's error message."""
    s = setting
    options = dict(weight_dtype=s["weight"], kv_dtype=s["kv"], n_gpus=int(s["n"]),
                   compute_dtype=None if s["compute"] == "auto" else s["compute"],
                   mbu=float(s["mbu"]), mfu=float(s["mfu"]))
    try:
        e = estimate(s["model"], s["gpu"], int(s["batch"]), int(s["prompt"]), int(s["output"]),
                     **options)
    except ValueError as err:
        return str(err), None
    mb = max_batch(s["model"], s["gpu"], int(s["prompt"]), int(s["output"]),
                   weight_dtype=s["weight"], kv_dtype=s["kv"], n_gpus=int(s["n"]))
    return e, mb


SCALARS = ("ttft_s", "tpot_s", "throughput_tok_s", "decode_bytes", "decode_flops", "allreduce_s",
           "bandwidth_utilisation", "e2e_s", "ttft_floor_s", "tpot_floor_s",
           "throughput_floor_tok_s", "e2e_floor_s")
MEMORY = ("weights", "kv_cache", "activations", "reserve", "capacity", "free")
RESOURCES = ("compute", "memory", "interconnect", "network", "latency", "latency_added", "floor",
             "kernel_by_kernel")  # Estimate.resources(phase), and its "limit"
LABELS = ("fits", "prefill_bound", "decode_bound", "compute_dtype", "head_dtype",
          "attention_dtype", "nodes", "n_gpus")


def _rel(a: float, b: float) -> float:
    return 0.0 if a == b else abs(a - b) / max(abs(a), abs(b))


def prefill_kinds(settings: list[dict], chunk: int) -> dict[str, int]:
    """How many settings the library accepts whose prefill splits a prompt longer than
    ``chunk`` into pieces (``long``), and how many pack several whole prompts into each of
    several passes (``packed``): the two kinds of ``Setup.prefill_passes``' groups."""
    kinds = {"long": 0, "packed": 0}
    for s in settings:
        if isinstance(library(s)[0], str):
            continue
        b, p = int(s["batch"]), int(s["prompt"])
        kinds["long"] += p > chunk
        kinds["packed"] += p <= chunk and 2 <= chunk // p < b
    return kinds


def compare(setting: dict, values: dict) -> float:
    """Assert the page's raw numbers equal the library's to 1e-9; return the largest difference."""
    e, mb = library(setting)
    if isinstance(e, str):
        assert values.get("error") == e, (setting, values.get("error"), e)
        return 0.0
    assert "error" not in values, (setting, values["error"])
    worst = 0.0
    pairs = [(k, values[k], getattr(e, k)) for k in SCALARS]
    pairs += [(k, values["memory"][k], getattr(e.memory, k)) for k in MEMORY]
    for phase in ("prefill", "decode"):
        busy, page_busy = e.resources(phase), values["resources"][phase]
        assert page_busy["limit"] == busy["limit"], (setting, phase, page_busy, busy)
        pairs += [(f"{phase} {k}", page_busy[k], busy[k]) for k in RESOURCES]
        rows, page = e.breakdown(phase), values["breakdown"][phase]
        assert [r["op"] for r in page] == [r["op"] for r in rows], (setting, phase)
        for want, got in zip(rows, page, strict=True):
            assert got["bound"] == want["bound"] and (got["intensity"] is None) == (want["intensity"] is None)
            assert got.get("math") == want.get("math"), (setting, phase, want["op"])
            pairs += [(f"{phase} {want['op']} {k}", got[k], want[k])
                      for k in ("flops", "bytes", "time_s", "share", "intensity") if want[k] is not None]
    for name, got, want in pairs:
        d = _rel(got, float(want))
        assert d <= 1e-9, (name, got, want, setting)
        worst = max(worst, d)
    for k in LABELS:
        assert values[k] == getattr(e, k), (k, values[k], getattr(e, k), setting)
    assert values["max_batch"] == mb, setting
    return worst


NODE_RUNNER = r"""
const fs = require("fs");
require(process.argv[1]);
const calc = require(process.argv[2]);
const out = JSON.parse(fs.readFileSync(0, "utf8")).map((s) => {
  try { const e = calc.estimate(s); e.max_batch = calc.maxBatch(s); return e; }
  catch (err) { if (err instanceof calc.CalcError) return {error: err.message}; throw err; }
});
process.stdout.write(JSON.stringify(out));
"""


def run_under_node(node: str, tmp_path, settings: list[dict]) -> list[dict]:
    """calculator.js's estimate() and maxBatch() for each setting, run by ``node`` on freshly
    exported data; a refused setting gives ``{"error": message}``."""
    data_js = webcalc.write(tmp_path)
    proc = subprocess.run([node, "-e", NODE_RUNNER, str(data_js), str(CALCULATOR_JS)],
                          input=json.dumps(settings), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_page_arithmetic_equals_the_library_under_node(tmp_path, data):
    """calculator.js's estimate() run by node (if installed) for 120 random settings, prompts
    longer than the prefill's chunk and batches packed several prompts per pass among them."""
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        pytest.skip("node is not installed; tests/test_calculator_page.py checks the same in Chromium")
    settings = random_settings(13, 120, data)
    results = run_under_node(node, tmp_path, settings)
    worst = max(compare(s, v) for s, v in zip(settings, results, strict=True))
    assert sum("error" in v for v in results) >= 5  # the refused combinations were exercised
    kinds = prefill_kinds(settings, data["defaults"]["prefill_chunk"])
    assert kinds["long"] >= 5 and kinds["packed"] >= 5, kinds  # both kinds of prefill passes
    print(json.dumps({"settings": len(settings), "largest_relative_difference": worst} | kinds))


# --- data-parallel attention x expert parallelism (parallel.dp_ep_estimate) ----------------------
def dp_settings(seed: int, count: int, data: dict) -> list[dict]:
    """Settings with ``dp > 1`` as the page holds them: mostly mixtures of experts with
    ``ep = dp`` (inside one node and across nodes), some ``ep = 1`` and dense models (plain data
    parallelism), and refused ones (``ep`` neither 1 nor ``dp``, a dense model with ``ep > 1``,
    a chip with no interconnect). DeepSeek-V3 DP8 x EP8 on 8 x H100 comes first."""
    rng = random.Random(seed)
    moe = [m for m in data["models"] if data["models"][m]["dp"]["moe"]]
    models, chips, dtypes = list(data["models"]), list(data["accelerators"]), data["dtypes"]
    out = [{"model": "deepseek-v3", "gpu": "NVIDIA H100 SXM", "n": "1", "dp": "8", "ep": "8",
            "weight": "fp8_e4m3", "kv": "fp8_e4m3", "compute": "auto", "batch": "256",
            "prompt": "2048", "output": "256", "mbu": "1", "mfu": "1"}]
    for i in range(count - 1):
        model = moe[i % len(moe)] if rng.random() < 0.8 else rng.choice(models)
        limit = data["models"][model]["maxContext"]
        dp = rng.choice(data["dpCounts"][1:])
        ep = dp if rng.random() < 0.75 else rng.choice([1, 1, rng.choice(data["dpCounts"])])
        prompt = rng.choice([1, 128, 2048, rng.randint(1, limit - 1)])
        out.append({
            "model": model, "gpu": rng.choice(chips) if rng.random() < 0.3 else rng.choice(
                ["NVIDIA H100 SXM", "NVIDIA H200 SXM", "NVIDIA B200", "AMD Instinct MI300X"]),
            "n": "1", "dp": str(dp), "ep": str(ep),
            "weight": rng.choice(dtypes), "kv": rng.choice(dtypes),
            "compute": "auto" if rng.random() < 0.85 else rng.choice(dtypes),
            "batch": str(rng.choice([1, 7, 64, 256, 1000, rng.randint(1, 5000)])),
            "prompt": str(prompt),
            "output": str(rng.choice([1, 2, 64, rng.randint(1, max(1, limit - prompt))])),
            "mbu": str(rng.choice([1, 0.8, 0.5])), "mfu": str(rng.choice([1, 0.6])),
        })
    return out


def library_dp(setting: dict):
    """``dp_ep_estimate`` for a page setting with ``dp > 1``, or the library's error message."""
    s = setting
    options = dict(weight_dtype=s["weight"], kv_dtype=s["kv"],
                   compute_dtype=None if s["compute"] == "auto" else s["compute"],
                   mbu=float(s["mbu"]), mfu=float(s["mfu"]))
    try:
        layout = Layout(dp=int(s["dp"]), ep=int(s["ep"]))
        return dp_ep_estimate(s["model"], s["gpu"], int(s["batch"]), int(s["prompt"]),
                              int(s["output"]), layout, **options)
    except ValueError as err:
        return str(err)


DP_SCALARS = ("ttft_s", "ttft_floor_s", "tpot_s", "tpot_floor_s", "throughput_tok_s",
              "throughput_floor_tok_s", "all_to_all_bytes")


def compare_dp(setting: dict, values: dict) -> float:
    """Assert the page's numbers for a DP x EP setting equal ``dp_ep_estimate``'s to 1e-9."""
    e = library_dp(setting)
    if isinstance(e, str):
        assert values.get("error") == e, (setting, values.get("error"), e)
        return 0.0
    assert "error" not in values, (setting, values["error"])
    pairs = [(k, values[k], getattr(e, k)) for k in DP_SCALARS]
    pairs += [(k, values["memory"][k], getattr(e.memory, k)) for k in MEMORY]
    pairs += [(f"decode {k}", values["resources"]["decode"][k], e.decode_resources[k])
              for k in ("compute", "memory", "interconnect", "network", "latency")]
    worst = 0.0
    for name, got, want in pairs:
        d = _rel(got, float(want))
        assert d <= 1e-9, (name, got, want, setting)
        worst = max(worst, d)
    assert (values["fits"], values["nodes"], values["batch_per_gpu"]) == (
        e.fits, e.nodes, e.batch_per_gpu), setting
    return worst


def _dp_fits(s: dict, batch: int) -> bool:
    return dp_ep_estimate(s["model"], s["gpu"], batch, int(s["prompt"]), int(s["output"]),
                          Layout(dp=int(s["dp"]), ep=int(s["ep"])), weight_dtype=s["weight"],
                          kv_dtype=s["kv"]).fits


def _compare_step(s: dict, values: dict) -> None:
    """The page's per-kernel table of a single decode step against ``dp_ep_decode_step``'s rows
    (the kernels that do anything, then the all-to-all where there is one)."""
    step = dp_ep_decode_step(
        s["model"], s["gpu"], values["batch_per_gpu"], int(s["prompt"]) + 1,
        Layout(dp=int(s["dp"]), ep=int(s["ep"])), weight_dtype=s["weight"], kv_dtype=s["kv"],
        compute_dtype=None if s["compute"] == "auto" else s["compute"], mbu=float(s["mbu"]),
        mfu=float(s["mfu"]))
    want = [r for r in step.breakdown() if r["flops"] > 0 or r["bytes"] > 0]
    got = values["breakdown"]["decode"]
    assert [r["op"] for r in got] == [r["op"] for r in want], s
    for g, w in zip(got, want, strict=True):
        for k in ("flops", "bytes", "time_s"):
            assert _rel(g[k], w[k]) <= 1e-9, (s, w["op"], k, g[k], w[k])
    assert _rel(values["tpot_s"], step.time_s) <= 1e-9 and _rel(values["tpot_floor_s"], step.floor_s) <= 1e-9


def test_dp_ep_arithmetic_equals_the_library_under_node(tmp_path, data):
    """calculator.js's estimate() with ``dp > 1`` against ``parallel.dp_ep_estimate`` for 80
    settings, DeepSeek-V3 DP8 x EP8 on 8 x H100 among them; and its largest batch against the
    library's memory: the batch fits, one more sequence does not."""
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        pytest.skip("node is not installed; tests/test_calculator_page.py checks the page in Chromium")
    settings = dp_settings(29, 80, data)
    results = run_under_node(node, tmp_path, settings)
    worst = max(compare_dp(s, v) for s, v in zip(settings, results, strict=True))
    errors = [v["error"] for v in results if "error" in v]
    assert any(e.startswith("Layout.ep must be 1 or dp") for e in errors)  # each kind refused
    assert any("is dense" in e for e in errors)
    accepted = [(s, v) for s, v in zip(settings, results, strict=True) if "error" not in v]
    assert sum(v["all_to_all_bytes"] > 0 and v["nodes"] > 1 for _, v in accepted) >= 5  # across nodes
    assert sum(s["ep"] == "1" for s, _ in accepted) >= 3  # plain data parallelism
    one_step = [(s, v) for s, v in accepted if s["output"] == "2"]  # one decode step, at p + 1
    assert len(one_step) >= 3
    for s, v in one_step:
        _compare_step(s, v)
    for s, v in accepted[:12]:
        dp, mb = int(s["dp"]), v["max_batch"]
        assert mb % dp == 0
        if mb:
            assert _dp_fits(s, mb), s
        assert not _dp_fits(s, mb + 1), s
    print(json.dumps({"settings": len(settings), "refused": len(errors),
                      "largest_relative_difference": worst}))


def test_dp_ep_deepseek_v3_on_eight_h100(data):
    """DeepSeek-V3 DP8 x EP8 on 8 x H100 by hand: each GPU holds 256 / 8 = 32 routed experts,
    so its weights are the model's less 7/8 of the routed experts' 653.9 B parameters; a token
    copy of the dispatch is 7168 FP8 bytes and 56 FP32 scales, of the combine 7168 BF16 ones."""
    m = data["models"]["deepseek-v3"]["dp"]
    assert (m["experts"], m["k"], m["moeLayers"]) == (256, 8, 58)
    assert m["dispatch"] == 7168 + 7168 // 128 * 4 and m["combine"] == 2 * 7168
    assert m["matrix"] == 7168 * 2048
    assert m["routedParams"] == 58 * 256 * 3 * 7168 * 2048
    link = data["accelerators"]["NVIDIA H100 SXM"]["ep"]
    assert link[8] == [450e9, None, 3e-6]  # one node of 8: half of NVLink's 900 GB/s each way
    assert link[16][:2] == [450e9, 50e9]  # two nodes: the network's 400 Gb/s each way too
    assert data["models"]["llama-3-8b"]["dp"]["epErrors"][8] == _error(
        lambda: dp_ep_estimate("llama-3-8b", "h100", 8, 1, 1, Layout(dp=8, ep=8)))
