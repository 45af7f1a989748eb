"""Published measurements of real engines against the calculator's floor and kernel-by-kernel time.

``load()`` reads ``data/measured/measured-inference.csv`` (124 published rows, sources in the
file and in its README) into typed ``Row`` objects: each mapped to a ``ModelConfig`` (from the
data's ``model-configs.json``), an accelerator of the library, the weight / KV-cache / math
precisions and an engine family, or marked not reproducible with the reason (speculative
decoding, no batch, ambiguous units, a GPU or a number format the library lacks).

``bound(row)`` is the calculator's kernel-by-kernel answer for the row's metric with
``mbu = mfu = 1`` (an old name: it is not a bound, an engine that overlaps its kernels can beat
it), ``floor(row)`` the floor's (the busiest resource; no engine can beat it), both using the
definition the source gives:

- ``decode_tokens_per_s_per_user`` at batch 1: generated tokens / wall time of the whole call
  (``output_len / e2e``, the prefill included) for sources that time the whole ``generate``
  call (gpt-fast, Qwen, lmdeploy), ``1 / TPOT`` for decode-only benchmarks (llama-bench ``tg``,
  MLC llm-perf-bench, llm-awq);
- ``output_throughput``: ``batch * output_len / e2e`` (static batches, prefill included; the
  per-GPU variant divides by ``n_gpus``); at batch 1 for SGLang's ``bench_one_batch`` the
  decode speed ``1 / TPOT``;
- ``ttft``: the prefill of the row's batch; under a client concurrency (NIM) the prefill of the
  request's own prompt, which is the least a request waits;
- ``itl``: the decode step of the batch (``TPOT``); under a client concurrency ``c`` of a
  continuously batching server, the step plus the prefills of the other ``c - 1`` requests'
  successors spread over their output: ``TPOT + (c - 1) / c * TTFT(c prompts) / out`` (one
  request of ``c`` arrives every ``out / c`` steps); ``e2e_latency``: ``TTFT + (out - 1) TPOT``.

``compare(rows)`` gives one ``Comparison`` per usable row: the kernel-by-kernel value
(``bound``), the floor, measured, their ratio (``attained``: measured speed over the
kernel-by-kernel speed, or the kernel-by-kernel time over the measured time; above 1 where the
engine overlaps enough to beat it), and for batch-1 decode the achieved MBU, for prefill (TTFT)
the achieved MFU.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

from . import validate
from .calculator import Estimate, estimate
from .hardware import get_accelerator
from .models import ModelConfig

__all__ = [
    "COLUMNS", "FAMILIES", "METRICS", "MODERN", "Comparison", "Row", "bound", "bound_estimate",
    "break_even_prompt", "ceiling", "ceiling_compare", "compare", "dp_compare", "engines_table",
    "family", "floor", "floor_value", "load", "model_config", "not_reproducible",
    "plot_against_bound", "predicted_value", "reasons_summary", "reasons_table", "rounding",
    "usable",
]

COLUMNS = ("model", "precision", "gpu", "n_gpus", "engine", "batch", "input_len", "output_len",
           "metric", "value", "unit", "source", "notes")
METRICS = {  # metric -> units a row may give it in
    "decode_tokens_per_s_per_user": ("tok/s", "tok/s/user"),
    "output_throughput": ("tok/s",),
    "output_throughput_per_gpu": ("tok/s/GPU",),
    "ttft": ("ms", "s"),
    "itl": ("ms", "s"),
    "e2e_latency": ("ms", "s"),
    "gpu_memory": ("GB",),
    "prefill_throughput": ("tok/s",),
}
TIMES = {"ttft", "itl", "e2e_latency"}  # lower is better; the others: higher is better

FAMILIES = ("vLLM", "SGLang", "TensorRT-LLM", "NIM", "lmdeploy", "gpt-fast", "others")
MODERN = frozenset(FAMILIES[:-1])
"""The engine families the calibrated estimate is judged on (tuned, modern serving engines)."""

_DATA = "data/measured"

# the csv's GPU strings (their start, case-insensitive) -> the library's accelerator, or None
_GPUS = (
    ("A100 (PCIe)", None),
    ("A100-SXM4-80GB", "A100"),
    ("A100-SXM4-40GB", "A100 40GB"),
    ("A100-80GB", "A100"),
    ("H100-SXM5-80GB", "H100"),
    ("H100-80GB", "H100"),
    ("H200-SXM-141GB", "H200"),
    ("B200-180GB", "B200"),
    ("MI300X-192GB", "MI300X"),
    ("RTX 4090", "RTX 4090"),
    ("L40S", "L40S"),
)
_GPU_NOTES = {
    "A100-80GB (SXM/PCIe": "form factor not stated: bound at the SXM part's figures, the faster",
    "A100-80GB": "form factor not stated: bound at the SXM part's figures, the faster",
    "H100-80GB (form": "form factor not stated: bound at the SXM part's figures, the faster",
    "H200-SXM-141GB (not stated": "GPU type not stated in the source (H200 likely)",
    "A100-SXM4-80GB (power-limited": "power-capped at 330 W: the bound is the uncapped chip's",
}


@dataclass(frozen=True)
class Row:
    """One measured row, typed, with its mapping to the calculator.

    ``number`` counts data rows from 1 (line ``number + 1`` of the csv). ``batch``,
    ``input_len`` and ``output_len`` are None where the source gives none. ``reason`` is None for
    a row the calculator reproduces, else why not. ``definition`` says how the row's metric is
    computed from an ``Estimate`` (see the module docs); ``concurrency``: the batch is a client
    concurrency of a continuously batching server, not a static batch.
    """

    number: int
    model: str
    precision: str
    gpu: str
    n_gpus: int
    engine: str
    batch: int | None
    input_len: int | None
    output_len: int | None
    metric: str
    value: float
    unit: str
    source: str
    notes: str
    family: str = ""
    config: ModelConfig | None = field(default=None, repr=False, compare=False)
    accelerator: str | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    compute_dtype: str | None = None
    weight_group_size: int = 128
    definition: str = ""
    concurrency: bool = False
    mapping_notes: tuple[str, ...] = ()
    reason: str | None = None

    @property
    def usable(self) -> bool:
        """Whether the calculator reproduces this row (``reason`` is None)."""
        return self.reason is None

    @property
    def modern(self) -> bool:
        """Whether the engine is one of ``MODERN``."""
        return self.family in MODERN

    @property
    def label(self) -> str:
        """A short description for tables: model, precision, GPUs, batch, lengths."""
        batch = "?" if self.batch is None else self.batch
        return (f"{self.model} {self.precision.split(' (')[0]} on {self.n_gpus}x {self.gpu.split(' (')[0]}, "
                f"batch {batch}, {self.input_len}/{self.output_len}")

    def options(self) -> dict:
        """Keyword arguments of ``calculator.estimate`` for this row (precisions, GPUs)."""
        return {"weight_dtype": self.weight_dtype, "kv_dtype": self.kv_dtype,
                "compute_dtype": self.compute_dtype, "weight_group_size": self.weight_group_size,
                "n_gpus": self.n_gpus}

    def sizes(self) -> tuple[int, int, int]:
        """(batch, prompt_len, output_len) the estimate runs at (see ``definition``)."""
        batch = 1 if self.metric == "ttft" and self.concurrency else self.batch
        prompt = max(self.input_len, 1)  # llama-bench's tg128 starts from an empty prompt
        output = self.output_len if self.output_len else 1  # TTFT needs no output length
        return batch, prompt, output


def _read_text(path: str | Path | None) -> str:
    if path is None:
        return resources.files("llm_roofline").joinpath(f"{_DATA}/measured-inference.csv").read_text()
    raw = validate.read_bytes("measurements csv", path)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"measurements csv: {validate._shown(path)} is not a text file "
                         "(UTF-8)") from None


@cache
def _configs() -> dict:
    text = resources.files("llm_roofline").joinpath(f"{_DATA}/model-configs.json").read_text()
    return json.loads(text)["models"]


@cache
def model_config(name: str) -> ModelConfig:
    """The ``ModelConfig`` of a model key of the csv, from the data's ``model-configs.json``.

    GPT-J (a family ``from_hf_config`` does not read) is translated field by field: 16 heads of
    256, a 4 x wide GELU MLP without a gate, untied embeddings; its parallel attention + MLP
    block moves the same bytes and does the same FLOPs as a sequential one.
    """
    configs = _configs()
    if name not in configs:
        raise ValueError(f"model {name!r} has no config in model-configs.json; known: "
                         f"{', '.join(configs)}")
    config = configs[name]["config"]
    if config.get("model_type") == "gptj":
        return ModelConfig(
            name=name, vocab_size=config["vocab_size"], hidden_size=config["n_embd"],
            intermediate_size=4 * config["n_embd"], n_layers=config["n_layer"],
            n_heads=config["n_head"], n_kv_heads=config["n_head"],
            head_dim=config["n_embd"] // config["n_head"], max_context=config["n_positions"],
            tie_embeddings=False, gated_mlp=False, mlp_activation="gelu_tanh")
    return ModelConfig.from_hf_config(config, name=name)


def family(engine: str) -> str:
    """The engine family of an ``engine`` string: one of ``FAMILIES`` (or its own name).

    ``'NVIDIA NIM 1.8.0'`` -> ``'NIM'``; NeMo, HF transformers, MLC-LLM, llm-awq, ExLlamaV2 and
    llama.cpp keep their own names (all counted under ``'others'``).
    """
    engine = validate.text("engine", engine)
    for prefix, name in (("gpt-fast", "gpt-fast"), ("lmdeploy", "lmdeploy"), ("NeMo", "NeMo"),
                         ("TensorRT-LLM", "TensorRT-LLM"), ("NVIDIA NIM", "NIM"), ("vLLM", "vLLM"),
                         ("SGLang", "SGLang"), ("HF transformers", "HF transformers"),
                         ("MLC-LLM", "MLC-LLM"), ("llm-awq", "llm-awq"),
                         ("ExLlamaV2", "ExLlamaV2"), ("llama.cpp", "llama.cpp")):
        if engine.startswith(prefix):
            return name
    return engine.split(" ")[0]


def _precision(text: str) -> tuple[str, str, str | None, int] | str:
    """(weights, KV cache, math or None, group) of a csv precision, or why it is not modelled.

    The KV cache is 16-bit for 16-bit and integer weight-only models (the engines' default);
    for FP8 checkpoints whose source leaves it open it is taken as FP8, the reading with fewer
    bytes, so that the bound stays a bound either way (NVIDIA's and AMD's FP8 checkpoints of
    these rows ship FP8 KV-cache scales; row 76 beats a 16-bit-KV ceiling). Int8 and int4
    weight-only formats run 16-bit math (W8A16, W4A16); FP8 runs FP8 math (W8A8).
    """
    t = text.lower()
    if "nvfp4" in t:
        # W4A4 on the FP4 tensor cores, the faster reading where a source leaves the
        # activations' format open; KV cache as for FP8 checkpoints: FP8 where unstated
        return "nvfp4", "fp8", "nvfp4", 16
    if "q8_0" in t or "q4_0" in t or "gguf" in t:
        if "q4_0" in t:
            return "int4", "fp16", "bf16", 32  # 4 bits + one fp16 scale per 32: exactly Q4_0
        if "q8_0" in t:
            return "int8", "fp16", "bf16", 128
        return "fp16", "fp16", None, 128
    kv = "fp8" if "fp8 kv" in t else "bf16"
    if t.startswith("fp8"):
        return "fp8", "fp8", None, 128  # KV unstated: the fewer bytes, so the bound stays one
    if "int8" in t:
        return "int8", kv, "bf16", 128
    if "int4" in t or "4-bit" in t:
        group = 32 if "group 32" in t else 128
        # AWQ stores a 4-bit zero point per group beside the scale; the others are read as
        # symmetric (GPTQ's sym=True, as Qwen's GPTQ-Int4 checkpoints are)
        return ("int4_zp" if "awq" in t else "int4"), kv, "bf16", group
    if t.startswith(("bf16", "not stated")):
        return "bf16", "bf16", None, 128
    if t.startswith(("fp16", "f16")):
        return "fp16", "bf16", None, 128
    return f"precision {text!r} is not one the loader maps"


def _definition(r: dict, fam: str) -> str:
    """How the row's metric follows from an Estimate (module docs)."""
    metric = r["metric"]
    if metric == "decode_tokens_per_s_per_user":
        decode_only = fam in ("llama.cpp", "MLC-LLM", "ExLlamaV2", "llm-awq") and "Qwen" not in r["source"]
        return "1/tpot" if decode_only else "output/e2e"
    if metric == "output_throughput":
        if fam == "SGLang" and r["batch"] == "1":
            return "1/tpot"
        return "batch*output/e2e"
    if metric == "output_throughput_per_gpu":
        return "batch*output/e2e/n_gpus"
    if metric == "itl" and "concurrency" in r["notes"] and r["batch"] not in ("", "1"):
        return "tpot+prefills"  # continuous batching: the others' prefills share the steps
    return {"ttft": "ttft", "itl": "tpot", "e2e_latency": "e2e", "gpu_memory": "memory",
            "prefill_throughput": "batch*input/ttft"}[metric]


def _not_reproducible(r: dict, fam: str) -> str | None:
    """The reason a row cannot be compared with the bound, or None (the data's quality flags)."""
    notes, metric = r["notes"], r["metric"]
    if "speculative" in notes.lower():
        return ("speculative decoding (MTP, 3 draft layers): several tokens per step, not plain "
                "decode")
    if metric == "gpu_memory":
        return "a memory measurement, not a speed or a time (the roofline bounds times)"
    if not r["batch"]:
        return ("batch not reported (max-throughput run, the scheduler chose it): bounded only by "
                "the infinite-batch ceiling")
    if "ambiguous whether per-GPU or total" in notes and r["n_gpus"] != "1":
        return "ambiguous unit: the table's header says 'out tok/s' but it may be per GPU (TP > 1)"
    if "max TP/PP/DP config" in notes and r["n_gpus"] != "1":
        return "parallel layout not given ('max TP/PP/DP config' over 8 GPUs)"
    if "attention_dp" in notes or "attention DP" in notes:
        return ("attention data parallelism with expert parallelism: a layout the calculator "
                "does not model (it models tensor parallelism)")
    if "FLAGGED" in notes:
        return ("flagged by the source's readers: the 13B latency is lower than the 7B's "
                "(NVIDIA/NeMo discussion #8455)")
    if (fam == "HF transformers" or "Qwen" in r["source"]) and int(r["input_len"] or 0) > 1 \
            and metric == "decode_tokens_per_s_per_user":
        return ("ambiguous definition: the Qwen2.5 page does not say whether prompt tokens are "
                f"counted in its speed (up to {(int(r['input_len']) + 2048) / 2048:.0f}x apart at "
                f"this prompt)")
    return None


def _parse(raw: dict, number: int) -> dict:
    """Check one csv row's fields; raise naming the row and the field."""
    where = f"row {number} (line {number + 1})"
    out = {}
    for name in COLUMNS:
        value = raw.get(name)
        if value is None:
            raise ValueError(f"{where}: field {name!r} is missing")
        out[name] = value.strip()
    for name in ("model", "precision", "gpu", "engine", "metric", "unit", "source", "n_gpus", "value"):
        if not out[name]:
            raise ValueError(f"{where}: field {name!r} is empty")
    if out["metric"] not in METRICS:
        raise ValueError(f"{where}: field 'metric' is {validate.shorten(out['metric'], 40)}; "
                         f"allowed: {', '.join(METRICS)}")
    if out["unit"] not in METRICS[out["metric"]]:
        raise ValueError(f"{where}: field 'unit' is {validate.shorten(out['unit'], 40)} for {out['metric']}; "
                         f"allowed: {', '.join(METRICS[out['metric']])}")
    try:
        value = float(out["value"])
    except ValueError:
        raise ValueError(f"{where}: field 'value' is {validate.shorten(out['value'], 40)}, "
                         "not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where}: field 'value' is {validate.shorten(out['value'], 40)}; "
                         "it must be a positive number")
    ints = {}
    for name, minimum, optional in (("n_gpus", 1, False), ("batch", 1, True),
                                    ("input_len", 0, True), ("output_len", 1, True)):
        text = out[name]
        if not text and optional:
            ints[name] = None
            continue
        if not text.isdigit() or int(text) < minimum:
            raise ValueError(f"{where}: field {name!r} is {text!r}; it must be a whole number "
                             f">= {minimum}" + (" or empty" if optional else ""))
        ints[name] = int(text)
    return out | ints | {"value": value}


def load(path: str | Path | None = None) -> list[Row]:
    """Every row of the measurements csv (the library's copy, or ``path``), typed and mapped.

    A malformed row (a missing or empty field, a value that is not a positive number, an
    unknown metric or unit, a non-integer count) raises ``ValueError`` naming its row number
    and field. Rows the calculator cannot reproduce are returned too, with ``reason`` set.
    """
    try:
        return _load(_read_text(path))
    except csv.Error as err:
        raise ValueError(f"measurements csv: not a valid csv ({err})") from None


def _load(text: str) -> list[Row]:
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"measurements csv: header lacks column(s) {', '.join(missing)}; "
                         f"expected {','.join(COLUMNS)}")
    rows = []
    for number, raw in enumerate(reader, start=1):
        if None in raw:  # more fields than the header
            raise ValueError(f"row {number} (line {number + 1}): {len(raw[None])} field(s) past "
                             f"the last column 'notes'")
        rows.append(_row(raw, _parse(raw, number), number))
    return rows


def _row(raw: dict, p: dict, number: int) -> Row:
    fam = family(p["engine"])
    base = dict(number=number, model=p["model"], precision=p["precision"], gpu=p["gpu"],
                n_gpus=p["n_gpus"], engine=p["engine"], batch=p["batch"],
                input_len=p["input_len"], output_len=p["output_len"], metric=p["metric"],
                value=p["value"], unit=p["unit"], source=p["source"], notes=p["notes"], family=fam)
    reason = _not_reproducible(raw, fam)
    chip = next((name for start, name in _GPUS if p["gpu"].lower().startswith(start.lower())), "")
    notes = tuple(text for start, text in _GPU_NOTES.items() if p["gpu"].startswith(start))[:1]
    if chip is None or chip == "":
        reason = reason or f"GPU not in the library's accelerator data: {_gpu_name(p['gpu'])}"
        chip = None
    precision = _precision(p["precision"])
    if isinstance(precision, str):
        reason = reason or precision
        precision = (None, None, None, 128)
    try:
        config = model_config(p["model"])
    except ValueError as err:
        config, reason = None, reason or str(err)
    if reason is None and p["input_len"] is None:
        reason = "input length not given"
    if reason is None and p["output_len"] is None and p["metric"] != "ttft":
        reason = "output length not given"
    weights, kv, math_dtype, group = precision
    return Row(**base, config=config, accelerator=chip, weight_dtype=weights, kv_dtype=kv,
               compute_dtype=math_dtype, weight_group_size=group,
               definition=_definition(raw, fam), concurrency="concurrency" in p["notes"],
               mapping_notes=notes, reason=reason)


def _gpu_name(gpu: str) -> str:
    """'L40S 48GB', 'A100 (PCIe)': the csv's GPU without its parenthesised remarks, but PCIe."""
    return gpu if gpu.endswith("(PCIe)") else gpu.split(" (")[0]


def usable(rows: list[Row] | None = None) -> list[Row]:
    """The rows the calculator reproduces."""
    return [r for r in (load() if rows is None else rows) if r.usable]


def not_reproducible(rows: list[Row] | None = None) -> list[Row]:
    """The rows it does not, each with its ``reason``."""
    return [r for r in (load() if rows is None else rows) if not r.usable]


# --- the bound per row ------------------------------------------------------------------------
def predicted_value(row: Row, est: Estimate) -> float:
    """The row's metric, in the row's unit, from an ``Estimate`` at ``row.sizes()``."""
    b, _, o = row.sizes()
    scale = {"ms": 1e3, "s": 1.0}.get(row.unit, 1.0)
    d = row.definition
    value = {
        "1/tpot": lambda: 1 / est.tpot_s,
        "output/e2e": lambda: o / est.e2e_s,
        "batch*output/e2e": lambda: b * o / est.e2e_s,
        "batch*output/e2e/n_gpus": lambda: b * o / est.e2e_s / row.n_gpus,
        "ttft": lambda: est.ttft_s * scale,
        "tpot": lambda: est.tpot_s * scale,
        "tpot+prefills": lambda: (est.tpot_s + (b - 1) / b * est.ttft_s / o) * scale,
        "e2e": lambda: est.e2e_s * scale,
    }
    if d not in value:
        raise ValueError(f"row {row.number}: metric {row.metric!r} has no roofline definition")
    return float(value[d]())


def bound_estimate(row: Row, **overrides) -> Estimate:
    """The calculator's ``Estimate`` for a usable row, at ``mbu = mfu = 1`` unless overridden."""
    if not row.usable:
        raise ValueError(f"row {row.number} is not reproducible: {row.reason}")
    b, p, o = row.sizes()
    return estimate(row.config, row.accelerator, b, p, o, **(row.options() | overrides))


def bound(row: Row) -> float:
    """The kernel-by-kernel value of the row's metric (``mbu = mfu = 1``), in the row's unit."""
    return predicted_value(row, bound_estimate(row))


def floor_value(row: Row, est: Estimate) -> float:
    """The row's metric at the floor (``Estimate.ttft_floor_s``, ``tpot_floor_s``), row's unit.

    An inter-token latency under a client concurrency (``tpot+prefills``) is at least the
    larger of the decode step's floor and the others' prefills' share of a step: the engine
    may overlap the two, so their sum would not be a floor."""
    if row.definition == "tpot+prefills":
        b, _, o = row.sizes()
        scale = {"ms": 1e3, "s": 1.0}[row.unit]
        return float(max(est.tpot_floor_s, (b - 1) / b * est.ttft_floor_s / o) * scale)
    return predicted_value(row, _Floors(ttft_s=est.ttft_floor_s, tpot_s=est.tpot_floor_s,
                                        e2e_s=est.e2e_floor_s))


def floor(row: Row) -> float:
    """The floor of the row's metric (``mbu = mfu = 1``): no engine can do better, row's unit."""
    return floor_value(row, bound_estimate(row))


@dataclass(frozen=True)
class _Floors:
    """The floor's times under the names ``predicted_value`` reads."""

    ttft_s: float
    tpot_s: float
    e2e_s: float


def rounding(row: Row) -> float:
    """Half a unit of the last digit the source published: the tolerance of the bound test.

    The csv keeps the source's digits (``22`` ms from ``0.022`` s, ``93.89`` tok/s).
    """
    text = f"{row.value!r}"
    decimals = len(text.split(".")[1]) if "." in text and not text.endswith(".0") else 0
    return 0.5 * 10.0 ** -decimals


@dataclass(frozen=True)
class Comparison:
    """One usable row against the floor and the kernel-by-kernel time (``bound``, old name).

    ``attained``: the fraction of the kernel-by-kernel speed the engine reaches (measured speed /
    kernel-by-kernel speed, or kernel-by-kernel time / measured time): above 1 only where the
    engine overlaps kernels. ``floor``: the floor's value of the metric, which no row may beat
    (``beats_floor``); ``headroom``: the kernel-by-kernel time over the floor's time (at least
    1), how much an engine could gain by overlap. ``mbu``: for
    batch-1 decode rows, the achieved memory-bandwidth utilisation, the bytes a decode step
    must read per GPU over (the measured time per token x the chip's bandwidth); ``mfu``: for
    TTFT rows, the prefill FLOPs per GPU over (the measured TTFT x the chip's peak). None where
    they do not apply.
    """

    row: Row
    bound: float
    measured: float
    attained: float
    mbu: float | None
    mfu: float | None
    floor: float | None = None

    @property
    def beats_bound(self) -> bool:
        """Whether the row is faster than the kernel-by-kernel value by more than the source's
        rounding: the engine overlapped enough to beat a plain engine at peak."""
        return self._faster_than(self.bound)

    @property
    def beats_floor(self) -> bool:
        """Whether the row is faster than the floor by more than the source's rounding (never)."""
        return self._faster_than(self.floor)

    @property
    def headroom(self) -> float:
        """Kernel-by-kernel time over the floor's time (at least 1)."""
        return self.bound / self.floor if self.row.metric in TIMES else self.floor / self.bound

    def _faster_than(self, value: float) -> bool:
        tol = rounding(self.row)
        if self.row.metric in TIMES:
            return self.measured + tol < value
        return self.measured - tol > value


def compare(rows: list[Row] | None = None) -> list[Comparison]:
    """A ``Comparison`` of every usable row (the library's data unless ``rows``)."""
    out = []
    for row in usable(rows):
        est = bound_estimate(row)
        b = predicted_value(row, est)
        attained = b / row.value if row.metric in TIMES else row.value / b
        mbu = mfu = None
        if row.batch == 1 and row.metric in ("decode_tokens_per_s_per_user", "output_throughput"):
            mbu = est.decode_bytes / (1 / row.value) / get_accelerator(row.accelerator).bandwidth
        if row.metric == "ttft":
            flops = sum(r["flops"] for r in est.breakdown("prefill"))
            chip = get_accelerator(row.accelerator)
            seconds = row.value * (1e-3 if row.unit == "ms" else 1.0)
            mfu = flops / seconds / chip.peak(est.compute_dtype)
        out.append(Comparison(row=row, bound=b, measured=row.value, attained=attained,
                              mbu=mbu, mfu=mfu, floor=floor_value(row, est)))
    return out


# The rows served with data-parallel attention and expert parallelism, as the library expresses
# each (parallel.dp_ep_estimate): row -> (chip, sequences, prompt, layout (dp, ep), options, what).
# Rows 117-118 ran EP72 and EP32 with EPLB's redundant experts (288 in all); 72 does not divide
# the 256 routed experts, and EP64 holds as many a GPU (4) as EP72 with 288.
_DP_ROWS = {
    82: ("H200", 1024, 1024, (8, 8), dict(weight_dtype="fp8", kv_dtype="fp8"), "decode"),
    83: ("B200", 7168, 1024, (8, 8), dict(weight_dtype="fp8", expert_dtype="nvfp4",
                                          kv_dtype="fp8"), "decode"),
    117: ("H100", 256 * 64, 2000, (64, 64), dict(weight_dtype="fp8", kv_dtype="bf16"), "decode"),
    118: ("H100", 128, 4096, (32, 32), dict(weight_dtype="fp8", kv_dtype="bf16"), "prefill"),
}


def dp_compare(rows: list[Row] | None = None) -> list[Comparison]:
    """A ``Comparison`` of each row served with data-parallel attention and expert parallelism
    (the tensor-parallel calculator cannot express it, so ``compare`` leaves it out), against
    ``parallel.dp_ep_estimate``'s floor and kernel-by-kernel time of the layout it ran.

    DeepSeek-V3's node-limited routing (4 nodes a token). A decode row's floor and
    kernel-by-kernel value are the decode's alone (``batch`` over a decode step's time, the
    mean over the output; per GPU for a per-GPU metric): the prefill of each request only adds
    time, so no engine beats that floor. A prefill row's are its prompt tokens over the TTFT.
    Rows 117-118 ran EP72 and EP32 with 32 redundant experts; the library expresses EP72 as
    EP64, which holds as many experts a GPU.
    """
    from .parallel import Layout, dp_ep_estimate

    if rows is not None:
        rows = validate.sequence("rows", rows, what="measured.Row")
        bad = next((r for r in rows if not isinstance(r, Row)), None)
        if bad is not None:
            raise ValueError(f"rows must be a list of measured.Row (from measured.load()), got "
                             f"{validate.shorten(bad)} in it")
    out = []
    for row in load() if rows is None else rows:
        if row.number not in _DP_ROWS or row.model != "DeepSeek-V3":
            continue
        chip, batch, prompt, (dp, ep), options, phase = _DP_ROWS[row.number]
        output = row.output_len or 2
        e = dp_ep_estimate("deepseek-v3", chip, batch, prompt, output, Layout(dp=dp, ep=ep),
                           node_limit=4, **options)
        if phase == "prefill":
            tokens = batch * prompt
            floor, kernels = tokens / e.ttft_floor_s, tokens / e.ttft_s
        else:
            floor, kernels = e.throughput_floor_tok_s, e.throughput_tok_s
            if row.metric == "output_throughput_per_gpu":
                floor, kernels = floor / dp, kernels / dp
        out.append(Comparison(row=row, bound=kernels, measured=row.value,
                              attained=row.value / kernels, mbu=None, mfu=None, floor=floor))
    return out


# Rows served as independent replicas, or in a layout the tensor-parallel calculator cannot
# express (data-parallel attention): row -> replicas. The ceiling of such a row is
# the replicas' sum, each replica on n_gpus / replicas GPUs; with one GPU a replica it is the
# eight GPUs' own floors added, which no layout over them can beat (an unbounded batch reads each
# weight once for infinitely many tokens, so only the math and the cache remain, and
# communication only adds). MLPerf Inference v5.1 on eight B200 (rows 119-124): Llama-2-70B
# ran eight one-GPU replicas, Llama-3.1-405B two of TP2 x PP2, DeepSeek-R1 attention DP with
# its experts over the eight GPUs. DeepSeek-R1 is priced all in NVFP4, its experts' and dense
# MLPs' format: its attention projections ran at a higher precision, so the ceiling is a
# little looser than the run's formats give, never lower.
_REPLICAS = {119: 8, 120: 8, 121: 8,
             122: 8,  # two TP2 x PP2 replicas: bounded by eight GPUs' floors (405B fits none alone)
             123: 8, 124: 8}
_HUGE = 2**24  # requests: an unbounded batch (memory is not enforced)


def _ceiling_estimate(row: Row, **overrides) -> tuple[Estimate, int, int]:
    """(estimate at an unbounded batch, replicas, prompt) of a row without a batch."""
    if row.batch is not None or row.metric not in ("output_throughput", "output_throughput_per_gpu"):
        raise ValueError(f"row {row.number}: the ceiling is for throughput rows without a batch")
    if row.config is None or row.accelerator is None or row.weight_dtype is None:
        raise ValueError(f"row {row.number}: {row.reason}")
    replicas = _REPLICAS.get(row.number, 1)
    prompt = row.input_len if row.input_len is not None else 1
    prompt = overrides.pop("prompt_len", prompt)
    opts = row.options() | {"n_gpus": row.n_gpus // replicas} | overrides
    est = estimate(row.config, row.accelerator, _HUGE, max(prompt, 1), row.output_len, **opts)
    return est, replicas, prompt


def ceiling(row: Row, *, kernels: bool = False, **overrides) -> float:
    """For a max-throughput row without a batch: the infinite-batch ceiling of its throughput.

    Throughput ``batch * output / e2e`` grows with the batch (the weights are read once per step
    for everyone), so its supremum over all batches, whatever the scheduler chose, is the limit
    at a huge batch (here 2**24 requests; memory is not enforced), at the floor (no engine beats
    it), or kernel by kernel with ``kernels=True``; in the row's unit. A row served as
    independent replicas (MLPerf's, ``_REPLICAS``) sums its replicas. Where the source states
    no prompt length, the ceiling is taken at the least prompt, one token: a longer prompt only
    adds work, so no prompt can raise it. ``overrides``: ``calculator.estimate`` options (another
    format, ``prompt_len``) for what-ifs.
    """
    est, replicas, _ = _ceiling_estimate(row, **overrides)
    total = replicas * _HUGE * row.output_len / (est.e2e_s if kernels else est.e2e_floor_s)
    return total / row.n_gpus if row.metric == "output_throughput_per_gpu" else total


def break_even_prompt(row: Row, *, longest: int | None = None, **overrides) -> int:
    """For a row without a stated prompt length: the longest mean prompt (tokens) at which its
    ceiling (``ceiling``, with ``overrides`` such as another format) still reaches the
    measurement; 0 if even a one-token prompt does not, ``longest`` if every prompt up to it
    does (by default the model's context less the output). Past it, a floor priced so would be
    beaten: the prompt the source leaves out decides.
    """
    if not isinstance(row, Row) or row.config is None:
        raise ValueError(f"row must be a measured.Row the library can price, got "
                         f"{validate.shorten(row)}")
    most = row.config.max_context - (row.output_len or 1)
    longest = most if longest is None else validate.integer("longest", longest, minimum=1,
                                                            maximum=max(most, 1))
    if "prompt_len" in overrides:
        raise ValueError("prompt_len is what break_even_prompt searches; leave it out")

    def holds(prompt):
        return ceiling(row, prompt_len=prompt, **overrides) >= row.value

    if not holds(1):
        return 0
    if holds(longest):
        return longest
    lo, hi = 1, longest  # holds(lo), not holds(hi): the ceiling falls as the prompt grows
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if holds(mid) else (lo, mid)
    return lo


def ceiling_compare(rows: list[Row] | None = None) -> list[Comparison]:
    """A ``Comparison`` of each max-throughput row without a batch that the library can price:
    measured against its infinite-batch ceiling (``ceiling``: ``floor``) and the kernel-by-kernel
    value at the same batch (``bound``). ``compare`` leaves these rows out (no batch to compute);
    no row may beat its ceiling."""
    out = []
    for row in load() if rows is None else rows:
        if row.batch is not None or row.weight_dtype is None or row.config is None \
                or row.accelerator is None or row.input_len is None and row.number not in _REPLICAS \
                or row.output_len is None \
                or row.metric not in ("output_throughput", "output_throughput_per_gpu"):
            continue
        top, kernels = ceiling(row), ceiling(row, kernels=True)
        out.append(Comparison(row=row, bound=kernels, measured=row.value,
                              attained=row.value / kernels, mbu=None, mfu=None, floor=top))
    return out


# --- tables and figures for the book page ---------------------------------------------------------
def engines_table(comparisons: list[Comparison]) -> list[dict]:
    """Per engine family (with its number of rows): the median fraction of the kernel-by-kernel
    speed attained (``attained``) and of the floor's (``of floor``), the median and largest
    kernel-by-kernel time over the floor's (``kernel / floor``), the rows faster than the
    kernel-by-kernel value (``beat it``), the achieved MBU of batch-1 decode rows and MFU of
    TTFT rows, each as
    ``'median (rows: lowest-highest)'`` (None where the family has no such row)."""
    out = []
    names = list(dict.fromkeys([*FAMILIES[:-1], *sorted({c.row.family for c in comparisons})]))
    for name in names:
        mine = [c for c in comparisons if c.row.family == name]
        if not mine:
            continue

        def describe(xs):
            xs = sorted(xs)
            if not xs:
                return None
            if len(xs) == 1:
                return f"{xs[0]:.2f} (1)"
            return f"{_median(xs):.2f} ({len(xs)}: {xs[0]:.2f}-{xs[-1]:.2f})"

        out.append({"engine": f"{name} ({len(mine)})",
                    "attained": float(_median([c.attained for c in mine])),
                    "of floor": float(_median([c.attained / c.headroom for c in mine])),
                    "kernel / floor": describe(c.headroom for c in mine),
                    "beat it": sum(c.beats_bound for c in mine),
                    "MBU decode": describe(c.mbu for c in mine if c.mbu is not None),
                    "MFU prefill": describe(c.mfu for c in mine if c.mfu is not None)})
    return out


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def reasons_table(rows: list[Row]) -> list[dict]:
    """The rows not reproduced: row number, what it is, and why."""
    return [{"row": r.number, "model": r.model, "engine": r.engine.split(" (")[0],
             "GPU": _gpu_name(r.gpu), "metric": r.metric, "why not": r.reason}
            for r in not_reproducible(rows)]


def reasons_summary(rows: list[Row]) -> list[dict]:
    """The rows not reproduced, grouped by reason: the reason, which rows, their engines."""
    groups: dict[str, list[Row]] = {}
    for r in not_reproducible(rows):
        groups.setdefault(r.reason.split(" (up to")[0].split(": ")[0] if r.reason.startswith("GPU")
                          else r.reason.split(" (up to")[0], []).append(r)
    gpus = groups.get("GPU not in the library's accelerator data", [])
    if gpus:  # name them once
        names = ", ".join(dict.fromkeys(_gpu_name(r.gpu) for r in gpus))
        groups = {(f"{k}: {names}" if k.startswith("GPU") else k): v for k, v in groups.items()}
    return [{"why not reproduced": reason,
             "rows": ", ".join(str(r.number) for r in items),
             "engines": ", ".join(dict.fromkeys(r.family for r in items))}
            for reason, items in groups.items()]


_COLOURS = {"vLLM": "#1f77b4", "SGLang": "#9467bd", "TensorRT-LLM": "#2ca02c", "NIM": "#17becf",
            "lmdeploy": "#ff7f0e", "gpt-fast": "#d62728", "others": "#7f7f7f"}
_MARKERS = {"A100": "o", "H100": "s", "H200": "D", "B200": "P", "MI300X": "^", "RTX 4090": "v",
            "L40S": "<", "A100 40GB": "h"}


def plot_against_bound(comparisons: list[Comparison], *, times: bool = False):
    """Measured against the floor (``mbu = mfu = 1``), log-log, one point per usable row: the
    token rates
    (``times=False``: tokens/s, per user, per GPU; every point under the diagonal) or the
    latencies (``times=True``: TTFT, ITL, end-to-end in ms; every point above it).

    Colour: the engine family; marker: the GPU; filled: 16-bit weights, hollow: quantised
    (8- or 4-bit). Dotted lines: 50 %, 25 % and 10 % of the floor's speed. Returns the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    chosen = [c for c in comparisons if (c.row.metric in TIMES) == times]
    if not chosen:
        raise ValueError("no usable row of that kind to plot")
    scale = {"ms": 1.0, "s": 1e3}
    fig, ax = plt.subplots(figsize=(6.8, 4.9))
    xs, ys = [], []
    for c in chosen:
        r = c.row
        f = scale.get(r.unit, 1.0) if times else 1.0
        x, y = c.floor * f, c.measured * f
        xs.append(x)
        ys.append(y)
        colour = _COLOURS.get(r.family, _COLOURS["others"])
        filled = r.weight_dtype in ("bf16", "fp16")
        ax.scatter([x], [y], marker=_MARKERS[r.accelerator], s=46, linewidths=1.3,
                   edgecolors=colour, facecolors=colour if filled else "none", zorder=3)
    lo, hi = min(xs + ys) / 1.6, max(xs + ys) * 1.6
    line = [lo, hi]
    ax.plot(line, line, color="black", lw=1.4, zorder=2)
    for share in (0.5, 0.25, 0.1):
        k = 1 / share if times else share
        ax.plot(line, [k * v for v in line], color="black", lw=0.7, ls=":", zorder=1)
        where = (hi / k, hi) if times else (hi, k * hi)  # where the line leaves the axes
        ax.annotate(f"{share:.0%}", where, xytext=(0, 3) if times else (3, 0),
                    textcoords="offset points", fontsize=8, color="0.3", annotation_clip=False,
                    ha="center" if times else "left", va="bottom" if times else "center")
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), aspect="equal")
    what = "latency (ms)" if times else "token rate (tokens/s)"
    ax.set_xlabel(f"floor (mbu = mfu = 1): {what}")
    ax.set_ylabel(f"published measurement: {what}")
    at = lo * 2.2
    ax.annotate("the floor" + (": no engine below it" if times else ": no engine above it"),
                (at, at), xytext=(6, -6) if times else (-4, 6), textcoords="offset points",
                rotation=45, rotation_mode="anchor", fontsize=8.5, ha="left",
                va="top" if times else "bottom")
    families = [f for f in _COLOURS if any(
        (c.row.family == f) or (f == "others" and not c.row.modern) for c in chosen)]
    engine_handles = [Line2D([], [], ls="", marker="o", color=_COLOURS[f], label=f)
                      for f in families]
    gpus = [g for g in _MARKERS if any(c.row.accelerator == g for c in chosen)]
    gpu_handles = [Line2D([], [], ls="", marker=_MARKERS[g], color="0.25", label=g) for g in gpus]
    gpu_handles.append(Line2D([], [], ls="", marker="o", mfc="none", color="0.25",
                              label="hollow:\n8- or 4-bit"))
    first = ax.legend(handles=engine_handles, title="engine", fontsize=8, title_fontsize=8,
                      loc="upper left", bbox_to_anchor=(1.06, 1.0), frameon=False)
    ax.add_artist(first)
    ax.legend(handles=gpu_handles, title="GPU", fontsize=8, title_fontsize=8,
              loc="lower left", bbox_to_anchor=(1.06, 0.0), frameon=False)
    ax.grid(True, which="major", alpha=0.25)
    fig.subplots_adjust(left=0.12, right=0.72, bottom=0.11, top=0.96)  # legends: right quarter
    return fig
