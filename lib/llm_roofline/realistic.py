"""A calibrated prediction: what a tuned engine achieves, fitted on published measurements.

The calculator gives a floor no engine beats, and the kernel-by-kernel time at the peaks
(``mbu = mfu = 1``), which an engine that overlaps its kernels can beat. This module answers
the next question, what will I actually get, with the same per-kernel rooflines and eleven
numbers fitted on the measurements of ``llm_roofline.measured`` (stored with the fit's
provenance in ``data/realistic.json``):

``mbu``, ``mbu_weight_only``, ``mbu_attention``
    the fraction of the memory bandwidth the kernels reach: weight matmuls (and the small
    kernels), the same with integer weights dequantised on the fly (W8A16, W4A16), and the
    attention over the KV cache;
``mfu_prefill``, ``mfu_decode``, ``mfu_attention``
    the fraction of the peak FLOP/s reached in a prefill pass, in a decode step, and by the
    decode attention kernel;
``rocm_factor``
    a multiplier on all six on AMD chips (the data's MI300X rows run ROCm builds of vLLM);
``overlap``
    how much of the gap between the kernel-by-kernel time and the floor the engine recovers
    by overlapping its kernels (0: kernels one after another; 1: the floor, the busier of the
    math units and the memory, both at the fitted efficiencies);
``layer_overhead_us``
    a fixed time per layer per forward pass: kernel launches and the small kernels (norms,
    rotary, sampling) that never reach either roofline, which dominate at small batch;
``collective_us``
    the extra fixed time of each tensor-parallel collective beyond the library's lower estimate
    (``2 * n_layers + 2`` per pass: two all-reduces per layer, the embedding's, the logits'
    all-gather; the stored presets were fitted when the library counted ``2 * n_layers``);
``request_overhead_ms``
    a fixed time added once to the TTFT (scheduling, tokenising, the first step's launch).

So a pass's kernels take ``(1 - overlap) * K + overlap * F``, where ``K`` is the sum over
kernels of ``max(FLOPs / (peak * mfu), bytes / (bandwidth * mbu))`` (each kernel at its own
peak and efficiencies) and ``F = max(sum of FLOPs / (peak * mfu), sum of bytes / (bandwidth *
mbu))``; then the calculator's collectives, ``n_layers * layer_overhead`` and, with ``n_gpus >
1``, ``(2 * n_layers + 2) * collective`` are added per pass (a chunked prefill has several).
Overlap is what the fit learns about an engine, on a base that already prices each kernel at
its own math and fuses the element-wise work. The fit minimises a
robust (Cauchy) log error over the usable rows: the ``default`` preset on the modern engines
(``measured.MODERN``), one preset per engine family with at least ``MIN_ROWS`` rows from
``MIN_SOURCES`` sources, shrunk towards the default; damped Gauss-Newton on a fast surrogate
(each row's per-kernel FLOPs and bytes precomputed, decode at the mean context).
``cross_validate`` holds out one source at a time and predicts it with the exact ``estimate``.
Each row's metric follows its source's definition (``measured``): an inter-token latency under
a client concurrency ``c`` includes the other requests' prefills, which a continuously batching
server spreads over the decode steps.

``estimate(model, accelerator, batch, prompt_len, output_len, engine=None, **options)`` returns
a ``Realistic``: ``kind == "calibrated prediction"``, the calculator's ``Estimate`` at the
preset's efficiencies with the overheads added (``.estimate``), the kernel-by-kernel estimate at
peak it came from (``.bound``, an old name: it is not a bound) and the preset. All efficiencies
are at most 1 and all overheads at least 0, so a calibrated prediction is never faster than the
kernel-by-kernel time at peak, nor than the floor (its ``tpot_floor_s`` and ``ttft_floor_s``
are the floors at peak).

Refit with ``python -m llm_roofline.realistic --fit`` (writes ``data/realistic.json``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import math
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from . import calculator, measured, validate
from .calculator import Estimate
from .deployment import setup
from .dtypes import math_class
from .hardware import Accelerator, get_accelerator
from .models import ModelConfig, get_model

__all__ = [
    "KIND", "PARAMETERS", "Preset", "Realistic", "coverage", "cross_validate", "estimate",
    "extrapolation", "fit", "fit_presets", "load_presets", "predict_row", "summary",
]

KIND = "calibrated prediction"
PARAMETERS = ("mbu", "mbu_weight_only", "mbu_attention", "mfu_prefill", "mfu_decode",
              "mfu_attention", "rocm_factor", "overlap", "layer_overhead_us", "collective_us",
              "request_overhead_ms")
_FRACTIONS = 8  # the first eight parameters are fractions, the last three times
_PRIOR = {"mbu": 0.7, "mbu_weight_only": 0.7, "mbu_attention": 0.7, "mfu_prefill": 0.5,
          "mfu_decode": 0.5, "mfu_attention": 0.5, "rocm_factor": 0.9, "overlap": 0.3,
          "layer_overhead_us": 5.0, "collective_us": 5.0, "request_overhead_ms": 1.0}
# the calculator docs' starting points and a few microseconds per launch: a weak prior
_PRIOR_WEIGHT = 0.05  # per parameter, in units of one row's squared log error
_SHRINK_WEIGHT = 1.0  # a family preset's pull towards the default, same units
MIN_ROWS = 5  # a family gets its own preset with at least this many rows ...
MIN_SOURCES = 2  # ... from at least this many sources
_FILE = "data/realistic.json"


@dataclass(frozen=True)
class Preset:
    """Fitted efficiencies and overheads (``PARAMETERS``), with what they were fitted on."""

    name: str
    mbu: float
    mbu_weight_only: float
    mbu_attention: float
    mfu_prefill: float
    mfu_decode: float
    mfu_attention: float
    rocm_factor: float
    overlap: float
    layer_overhead_us: float
    collective_us: float
    request_overhead_ms: float
    rows: int = 0
    sources: int = 0

    def __post_init__(self):
        """Every field checked as user input is (a preset from the data file, from ``fit`` or
        from ``dataclasses.replace`` alike): fractions of a peak from 0.001 to 1, an overlap
        from 0 to 1, fixed costs from 0 to 1e9 us (ms), counts of rows; a ``Decimal`` or
        ``Fraction`` is read as a float."""
        name = validate.text("preset name", self.name)
        for i, field in enumerate(PARAMETERS):
            value = getattr(self, field)
            what = f"preset {name!r} {field}"
            if field == "overlap":  # 0: kernels one after another, 1: the floor
                value = validate.real(what, value, minimum=0, maximum=1)
            elif i < _FRACTIONS:
                value = validate.fraction(what, value)
            else:
                value = validate.real(what, value, minimum=0, maximum=1e9,
                                      unit="ms" if field.endswith("_ms") else "us")
            object.__setattr__(self, field, value)
        for field in ("rows", "sources"):
            object.__setattr__(self, field, validate.integer(f"preset {name!r} {field}",
                                                             getattr(self, field), minimum=0))

    def values(self) -> tuple[float, ...]:
        """The parameters in the order of ``PARAMETERS``."""
        return tuple(getattr(self, p) for p in PARAMETERS)


@dataclass(frozen=True)
class Realistic:
    """A calibrated prediction (``kind``), never a floor.

    ``estimate``: the calculator's ``Estimate`` with the preset's ``mbu`` and ``mfu`` and the
    fixed overheads added to ``ttft_s``, ``tpot_s`` (and so ``throughput_tok_s``, ``e2e_s``),
    which hold the prediction (its ``kind`` says so; its ``*_kernel_s`` names refuse);
    its ``breakdown()`` rows are the kernels' rooflines at the preset's efficiencies, without
    the fixed overheads (``overhead_prefill_s``, ``overhead_decode_s``); its floors are the
    floors at peak. ``bound``: the same configuration kernel by kernel at ``mbu = mfu = 1``
    (an old name; not a bound, see ``calculator``). ``preset``: the fitted preset used.
    """

    estimate: Estimate
    bound: Estimate
    preset: Preset
    overhead_prefill_s: float
    overhead_decode_s: float
    kind: str = KIND
    extrapolation: tuple[str, ...] = ()  # where it predicts beyond its fitted rows (``coverage``)

    @property
    def extrapolates(self) -> bool:
        """Whether the setup lies outside the fitted rows (a chip, a format, a size none has)."""
        return bool(self.extrapolation)

    @property
    def label(self) -> str:
        """How a front end should title it, e.g. 'calibrated prediction (preset vLLM)'."""
        return f"{self.kind} (preset {self.preset.name}), not a floor"


# --- presets ----------------------------------------------------------------------------------
@cache
def _file() -> dict:
    return json.loads(resources.files("llm_roofline").joinpath(_FILE).read_text())


def load_presets() -> dict[str, Preset]:
    """The fitted presets of ``data/realistic.json``: ``'default'`` and one per engine family."""
    return {name: Preset(name=name, **{k: v for k, v in p.items() if k in PARAMETERS},
                         rows=p.get("rows", 0), sources=p.get("sources", 0))
            for name, p in _file()["presets"].items()}


def _preset(engine: str | None, presets: dict[str, Preset] | None = None) -> Preset:
    presets = load_presets() if presets is None else presets
    if engine is None:
        return presets["default"]
    families = [n for n in presets if n != "default"]
    if isinstance(engine, str) and engine not in families and (
            engine in measured.FAMILIES or measured.family(engine) != engine.split(" ")[0]):
        raise ValueError(
            f"engine {validate.shorten(engine, 40)}: no calibrated preset, the data has fewer than "
            f"{MIN_ROWS} usable rows from {MIN_SOURCES} sources of it; presets: "
            f"{', '.join(families)}; engine=None gives the default (modern engines)")
    name = validate.choice("engine", engine, families)
    return presets[name]


# --- the prediction ---------------------------------------------------------------------------
_SETUP_OPTIONS = tuple(n for n, p in inspect.signature(setup).parameters.items()
                       if p.kind is p.KEYWORD_ONLY)
_ESTIMATE_DEFAULTS = calculator.estimate.__kwdefaults__
_ESTIMATE_OPTIONS = tuple(n for n, p in inspect.signature(calculator.estimate).parameters.items()
                          if p.kind is p.KEYWORD_ONLY and n not in ("mbu", "mfu"))

def estimate(model: ModelConfig | str, accelerator: Accelerator | str, batch, prompt_len,
             output_len, *, engine: str | None = None, preset: Preset | None = None,
             **options) -> Realistic:
    """The calibrated prediction for a tuned engine (``engine=None``) or an engine family.

    ``engine``: one of the fitted families (see ``load_presets()``; families the data has too
    few rows for have none). ``preset`` overrides it (cross-validation passes its own).
    ``options``: ``calculator.estimate``'s (precisions, ``n_gpus``, ``queue_s``, ...), except
    ``mbu`` and ``mfu``, which the preset sets. Each kernel's time is the calculator's own
    (exact mean over the decode steps) at the preset's efficiencies: the attention kernel at
    ``mbu_attention``, every other kernel at ``mbu``.
    """
    for name in ("mbu", "mfu"):
        if name in options:
            raise ValueError(f"{name} is set by the calibrated preset; for your own efficiencies "
                             f"call llm_roofline.estimate(..., {name}=...)")
    validate.options("realistic.estimate", options, _ESTIMATE_OPTIONS)
    if preset is not None and not isinstance(preset, Preset):
        raise ValueError(f"preset must be a Preset (a value of load_presets()) or None, got "
                         f"{validate.shorten(preset)}; for an engine family's preset pass "
                         "engine=...")
    p = preset if preset is not None else _preset(engine)

    def run(mbu, mfu):
        return calculator.estimate(model, accelerator, batch, prompt_len, output_len, mbu=mbu,
                                   mfu=mfu, **options)

    bound = run(1.0, 1.0)
    f = p.rocm_factor if get_accelerator(accelerator).vendor == "AMD" else 1.0
    mbu = p.mbu_weight_only if _weight_only(bound.weight_dtype, bound.compute_dtype) else p.mbu
    mbu, mbu_att = max(f * mbu, 1e-3), max(f * p.mbu_attention, 1e-3)
    mfu_p, mfu_d, mfu_att = (max(f * x, 1e-3) for x in (p.mfu_prefill, p.mfu_decode,
                                                          p.mfu_attention))
    decode, decode_attention = run(mbu, mfu_d), run(mbu_att, mfu_att)
    prefill, prefill_attention = run(mbu, mfu_p), run(mbu_att, mfu_p)
    cfg = model if isinstance(model, ModelConfig) else get_model(model)
    collectives = (2 * cfg.n_layers + 2) * p.collective_us * 1e-6 if bound.n_gpus > 1 else 0.0
    per_pass = cfg.n_layers * p.layer_overhead_us * 1e-6 + collectives
    s = setup(cfg, accelerator, **{k: v for k, v in options.items() if k in _SETUP_OPTIONS})
    passes = _passes(s, bound.batch, bound.prompt_len,
                     options.get("prefill_chunk", _ESTIMATE_DEFAULTS["prefill_chunk"]))
    chip = get_accelerator(accelerator)
    tpot = (_blend(decode, decode_attention, "decode", p.overlap, chip) + decode.allreduce_s
            + per_pass)
    ttft = (_blend(prefill, prefill_attention, "prefill", p.overlap, chip)
            + (prefill.ttft_s - _kernel_time(prefill, prefill, "prefill"))  # all-reduces, queue
            + passes * per_pass + p.request_overhead_ms * 1e-3)
    est = dataclasses.replace(
        decode, mfu=mfu_d, ttft_s=_out(ttft), prefill_bound=prefill.prefill_bound,
        tpot_s=_out(tpot), throughput_tok_s=_out(decode.batch / tpot),
        allreduce_s=_out(decode.allreduce_s + collectives),
        bandwidth_utilisation=_out(decode.decode_bytes / tpot / get_accelerator(accelerator).bandwidth),
        phases={"prefill": prefill.phases["prefill"], "decode": decode.phases["decode"]},
        ttft_floor_s=bound.ttft_floor_s, tpot_floor_s=bound.tpot_floor_s, busy=bound.busy,
        kind=KIND)
    return Realistic(estimate=est, bound=bound, preset=p,
                     overhead_prefill_s=_out(passes * per_pass + p.request_overhead_ms * 1e-3),
                     overhead_decode_s=_out(per_pass),
                     extrapolation=extrapolation(cfg, chip, bound))


@cache
def coverage() -> dict[str, frozenset]:
    """What the fitted rows span: ``chips`` (names), ``weights`` and ``math`` (the tensor-core
    math classes of their weights and body matmuls, ``dtypes.math_class``), ``n_gpus``, and
    ``moe``/``mla`` (whether any row serves such a model)."""
    rows = measured.usable()
    chips, weights, math_, gpus, kinds = set(), set(), set(), set(), set()
    for r in rows:
        s = setup(r.config, r.accelerator, weight_dtype=r.weight_dtype,
                  kv_dtype=r.kv_dtype or "bf16", compute_dtype=r.compute_dtype)
        chips.add(s.accelerator.name)
        weights.add(math_class(s.weight_dtype))
        math_.add(math_class(s.compute_dtype))
        gpus.add(r.n_gpus)
        kinds.update(k for k, v in (("moe", r.config.is_moe), ("mla", r.config.is_mla)) if v)
    return {"chips": frozenset(chips), "weights": frozenset(weights), "math": frozenset(math_),
            "n_gpus": frozenset(gpus), "kinds": frozenset(kinds)}


def extrapolation(cfg: ModelConfig, chip: Accelerator, est: Estimate) -> tuple[str, ...]:
    """Where a calibrated prediction of this setup goes beyond the rows it was fitted on.

    One line per reason: a chip no fitted row ran (its fitted efficiencies are other chips'),
    a weight format or a tensor-core math no row used (4-bit floating point on FP4 tensor
    cores, say), more GPUs than any row, an MoE or MLA model where the rows have almost none.
    """
    cov = coverage()
    out = []
    if chip.name not in cov["chips"]:
        out.append(f"{chip.name}: no fitted row ran on it (the rows' chips: "
                   f"{', '.join(sorted(cov['chips']))})")
    if math_class(est.weight_dtype) not in cov["weights"]:
        out.append(f"{est.weight_dtype} weights: no fitted row stores its weights so")
    if math_class(est.compute_dtype) not in cov["math"]:
        out.append(f"{est.compute_dtype} math: no fitted row multiplies at that precision")
    if est.expert_dtype and math_class(est.expert_dtype) not in cov["weights"]:
        out.append(f"{est.expert_dtype} routed experts: no fitted row stores its weights so")
    if est.expert_compute_dtype and math_class(est.expert_compute_dtype) not in cov["math"]:
        out.append(f"{est.expert_compute_dtype} expert math: no fitted row multiplies at that "
                   "precision")
    if est.n_gpus > max(cov["n_gpus"]):
        out.append(f"{est.n_gpus} GPUs: the fitted rows use at most {max(cov['n_gpus'])}")
    return tuple(out)


def _weight_only(weight_dtype: str, compute_dtype: str) -> bool:
    """Integer weights dequantised to 16-bit math (W8A16, W4A16): ``mbu_weight_only`` applies."""
    return weight_dtype in ("int8", "int4", "int4_zp") and compute_dtype in ("bf16", "fp16")


def _blend(rest: Estimate, attention: Estimate, phase: str, overlap: float, chip: Accelerator):
    """The kernels of ``phase`` at the preset's efficiencies: ``(1 - overlap)`` of their
    kernel-by-kernel time plus ``overlap`` of their floor (the math units' busy time against
    the memory's, each kernel at its own peak and efficiency). Attention from ``attention``."""
    math_s = memory_s = 0.0
    for row in rest.breakdown(phase):
        if row["op"] in ("allreduce", "queue"):
            continue
        est = attention if row["op"] == "attention" else rest
        if row["math"] is not None:
            math_s = math_s + row["flops"] / (chip.peak(row["math"]) * est.mfu)
        memory_s = memory_s + row["bytes"] / (chip.bandwidth * est.mbu)
    floor = np.maximum(math_s, memory_s)
    return (1 - overlap) * _kernel_time(rest, attention, phase) + overlap * floor


def _kernel_time(rest: Estimate, attention: Estimate, phase: str):
    """Sum of the kernels' times of ``phase``: attention from ``attention``, others from ``rest``."""
    total = 0.0
    for a, b in zip(rest.breakdown(phase), attention.breakdown(phase), strict=True):
        if a["op"] in ("allreduce", "queue"):
            continue
        total = total + (b["time_s"] if a["op"] == "attention" else a["time_s"])
    return total


def _out(x):
    return np.asarray(x).item() if np.ndim(x) == 0 else x


def predict_row(row: measured.Row, preset: Preset | None = None) -> float:
    """The calibrated prediction of a usable row's metric, in its unit (exact estimate)."""
    if not isinstance(row, measured.Row):
        raise ValueError(f"row must be a measured.Row (one of measured.load()), got "
                         f"{validate.shorten(row)}")
    if preset is not None and not isinstance(preset, Preset):
        raise ValueError(f"preset must be a Preset (a value of load_presets()) or None, got "
                         f"{validate.shorten(preset)}")
    if not row.usable:
        raise ValueError(f"row {row.number} is not reproducible: {row.reason}")
    p = preset if preset is not None else _preset_for(row.family, load_presets())
    b, prompt, out = row.sizes()
    r = estimate(row.config, row.accelerator, b, prompt, out, preset=p, **row.options())
    clients = _clients(row)
    if clients:  # a TTFT under a client concurrency: the prefill waits in a queue
        busy = estimate(row.config, row.accelerator, clients, prompt, out, preset=p,
                        **row.options())
        wait = _queued(r.estimate.ttft_s, busy.estimate.tpot_s, clients, out)
        return float(wait * {"ms": 1e3, "s": 1.0}[row.unit])
    return measured.predicted_value(row, r.estimate)


def _clients(row: measured.Row) -> int:
    """The client concurrency of a TTFT row measured under one (NIM's), else 0."""
    return row.batch if row.metric == "ttft" and row.concurrency and row.batch > 1 else 0


def _queued(service, tpot, clients, output):
    """The mean TTFT of ``clients`` closed-loop clients, each sending its next request when the
    last ends, when each request's prefill (``service`` seconds, its TTFT alone) queues for the
    one engine behind the other clients' prefills: an M/D/1 queue, waiting
    ``rho * service / (2 (1 - rho))`` at the others' load ``rho = (clients - 1) * service /
    cycle`` (a request never waits for itself: one client never queues), the cycle being the
    TTFT plus ``output - 1`` steps of the batch of ``clients`` (``tpot``), each carrying
    ``(clients - 1) / output`` of the others' prefills. The TTFT and the load depend on each
    other: bisection on the TTFT, which lies between ``service`` and ``(clients + 1) *
    service``. Arrays broadcast."""
    service, tpot, clients, output = np.broadcast_arrays(*(np.asarray(x, float) for x in (
        service, tpot, clients, output)))
    decode = (output - 1) * (tpot + (clients - 1) / output * service)

    def excess(t):  # the model's TTFT at t, minus t: falls as t grows
        rho = np.minimum((clients - 1) * service / (t + decode), 1 - 1e-12)
        return service + rho * service / (2 * (1 - rho)) - t

    lo, hi = service.copy(), (clients + 1) * service
    for _ in range(80):
        mid = (lo + hi) / 2
        up = excess(mid) > 0
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return _out((lo + hi) / 2)


def _preset_for(family: str, presets: dict[str, Preset]) -> Preset:
    """The family's preset where the fit has one, else the default."""
    return presets.get(family, presets["default"])


# --- the fit ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Costs:
    """One row's per-kernel FLOPs and bytes per GPU (prefill; decode at the mean context)."""

    pf: np.ndarray  # prefill: per kernel of each pass group (times its count), flattened
    pm: np.ndarray
    p_attention: np.ndarray
    p_peaks: np.ndarray
    p_passes: int  # passes of the chunked prefill
    df: np.ndarray
    dm: np.ndarray
    attention: np.ndarray  # which kernel is the attention
    weight_only: bool
    amd: bool  # an AMD chip: rocm_factor applies
    ar_prefill: float
    ar_decode: float
    layers: int
    collectives: int
    peaks: np.ndarray  # per kernel: the dense peak at its math precision (inf: element-wise)
    bandwidth: float
    batch: int
    output: int
    n_gpus: int
    definition: str
    scale: float  # ms or s
    clients: int = 0  # a TTFT row under a client concurrency (``_clients``), else 0
    q_df: np.ndarray | None = None  # its decode step at the batch of clients, per kernel
    q_dm: np.ndarray | None = None
    q_attention: np.ndarray | None = None
    q_peaks: np.ndarray | None = None
    ar_clients: float = 0.0


def _costs(row: measured.Row) -> _Costs:
    return _costs_of(row, row.config)


@lru_cache(maxsize=4096)
def _costs_of(row: measured.Row, config: ModelConfig) -> _Costs:
    s = setup(row.config, row.accelerator, **row.options())
    b, p, o = row.sizes()
    chunk = calculator.estimate.__kwdefaults__["prefill_chunk"]
    pre = []  # (count * FLOPs, count * bytes, is attention, peak) per kernel of each pass group
    for count, batch, n_new, n_past, logits in s.prefill_passes(b, p, chunk):
        costs = s.pass_costs(batch, n_new, n_past, absorbed=False, logits_tokens=logits)
        for k, (f, w, kv) in costs.items():
            f, m = (np.ravel(count * np.asarray(x, float) * (k not in ("lm_head", "sampling") or logits > 0))
                    for x in np.broadcast_arrays(f, w + kv))
            pre += [(fi, mi, k == "attention", s.peak_of(k) / s.mfu)
                    for fi, mi in zip(f, m, strict=True) if fi > 0 or mi > 0]
    pf, pm, p_attention, p_peaks = (np.array(x) for x in zip(*pre, strict=True))
    _, _, ar_prefill, _, _ = calculator._prefill(s, b, p, chunk)
    mid = p + max(o - 1, 1) / 2 - 0.5  # the mean of the contexts the decode steps see, minus one
    dec = s.pass_costs(b, 1, mid, absorbed=True)
    clients = _clients(row)
    busy = s.pass_costs(clients, 1, mid, absorbed=True) if clients else dec
    return _Costs(
        pf=pf.astype(float), pm=pm.astype(float), p_attention=p_attention.astype(bool),
        p_peaks=p_peaks.astype(float), p_passes=int(_passes(s, b, p, chunk)),
        df=np.array([f for f, _, _ in dec.values()], dtype=float),
        dm=np.array([w + kv for _, w, kv in dec.values()], dtype=float),
        attention=np.array([k == "attention" for k in dec]),
        weight_only=_weight_only(s.weight_dtype, s.compute_dtype),
        amd=s.accelerator.vendor == "AMD",
        ar_prefill=float(ar_prefill), ar_decode=float(s.allreduce_s(b)),
        layers=s.model.n_layers, collectives=s.collectives_per_pass,
        peaks=np.array([s.peak_of(k) / s.mfu for k in dec], dtype=float),
        bandwidth=s.accelerator.bandwidth, batch=b,
        output=o, n_gpus=s.n_gpus, definition=row.definition,
        scale={"ms": 1e3, "s": 1.0}.get(row.unit, 1.0),
        clients=clients,
        q_df=np.array([f for f, _, _ in busy.values()], dtype=float),
        q_dm=np.array([w + kv for _, w, kv in busy.values()], dtype=float),
        q_attention=np.array([k == "attention" for k in busy]),
        q_peaks=np.array([s.peak_of(k) / s.mfu for k in busy], dtype=float),
        ar_clients=float(s.allreduce_s(clients)) if clients else float(s.allreduce_s(b)))


def _passes(s, b, p, chunk):
    """The number of passes of a chunked prefill (``Setup.prefill_passes``), per (b, p)."""
    depth = len(np.broadcast_shapes(np.shape(b), np.shape(p)))
    return sum(np.sum(count, axis=-1) if np.ndim(count) > depth else count
               for count, *_ in s.prefill_passes(b, p, chunk))


def _to_u(values) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    frac = np.clip(v[:_FRACTIONS], 1e-3, 1 - 1e-9)
    return np.concatenate([np.log(frac / (1 - frac)), np.log(np.maximum(v[_FRACTIONS:], 1e-3))])


def _from_u(u) -> np.ndarray:
    u = np.asarray(u, dtype=float)
    frac = 1e-3 + (1 - 1e-3) / (1 + np.exp(-u[:_FRACTIONS]))
    return np.concatenate([frac, np.exp(np.clip(u[_FRACTIONS:], -20, 20))])


_DEFINITIONS = ("1/tpot", "output/e2e", "batch*output/e2e", "batch*output/e2e/n_gpus", "ttft",
                "tpot", "e2e", "tpot+prefills")


class _Stack:
    """The ``_Costs`` of many rows as padded arrays (rows x kernels): one surrogate call for all."""

    def __init__(self, costs: list[_Costs]):
        def pad(name, dtype=float, fill=0):
            width = max(getattr(c, name).size for c in costs)
            out = np.full((len(costs), width), fill, dtype=dtype)
            for i, c in enumerate(costs):
                x = getattr(c, name)
                out[i, :x.size] = x
            return out

        self.pf, self.pm, self.df, self.dm = (pad(n) for n in ("pf", "pm", "df", "dm"))
        self.q_df, self.q_dm = pad("q_df"), pad("q_dm")
        self.attention, self.p_attention = pad("attention", bool), pad("p_attention", bool)
        self.q_attention = pad("q_attention", bool)
        self.peak, self.p_peak = pad("peaks", fill=np.inf), pad("p_peaks", fill=np.inf)
        self.q_peak = pad("q_peaks", fill=np.inf)
        col = {n: np.array([getattr(c, n) for c in costs], dtype=float) for n in (
            "ar_prefill", "ar_decode", "layers", "collectives", "bandwidth", "batch",
            "output", "n_gpus", "scale", "p_passes", "clients", "ar_clients")}
        self.__dict__.update(col)
        self.weight_only = np.array([c.weight_only for c in costs])
        self.amd = np.array([c.amd for c in costs])
        self.kind = np.array([_DEFINITIONS.index(c.definition) for c in costs])

    def predict(self, values) -> np.ndarray:
        """Each row's metric under the parameters ``values`` (the order of ``PARAMETERS``)."""
        (mbu, mbu_wo, mbu_att, mfu_p, mfu_d, mfu_att, rocm, overlap, layer_us, coll_us,
         request_ms) = values
        per_pass = self.layers * layer_us * 1e-6 + self.collectives * coll_us * 1e-6
        f = np.where(self.amd, rocm, 1.0)[:, None]
        rest = np.where(self.weight_only, mbu_wo, mbu)[:, None]

        def bandwidth(attention):
            return self.bandwidth[:, None] * np.maximum(
                f * np.where(attention, mbu_att, rest), 1e-3)

        def kernels(flops, moved, peak, bw):  # kernel by kernel, blended with the floor
            math_s, memory_s = flops / peak, moved / bw
            floor = np.maximum(math_s.sum(1), memory_s.sum(1))
            return (1 - overlap) * np.maximum(math_s, memory_s).sum(1) + overlap * floor

        ttft = (kernels(self.pf, self.pm, self.p_peak * np.maximum(f * mfu_p, 1e-3),
                        bandwidth(self.p_attention))
                + self.ar_prefill + self.p_passes * per_pass + request_ms * 1e-3)
        peak_d = self.peak * np.maximum(f * np.where(self.attention, mfu_att, mfu_d), 1e-3)
        tpot = kernels(self.df, self.dm, peak_d, bandwidth(self.attention)) + self.ar_decode \
            + per_pass
        queued = self.clients > 1
        if queued.any():  # TTFT rows under a client concurrency: the prefill queues
            peak_q = self.q_peak * np.maximum(f * np.where(self.q_attention, mfu_att, mfu_d),
                                              1e-3)
            busy = kernels(self.q_df, self.q_dm, peak_q, bandwidth(self.q_attention)) \
                + self.ar_clients + per_pass
            ttft = np.where(queued, _queued(ttft, busy, np.maximum(self.clients, 1),
                                            self.output), ttft)
        e2e = ttft + (self.output - 1) * tpot
        b, o = self.batch, self.output
        table = np.stack([1 / tpot, o / e2e, b * o / e2e, b * o / e2e / self.n_gpus,
                          ttft * self.scale, tpot * self.scale, e2e * self.scale,
                          (tpot + (b - 1) / b * ttft / o) * self.scale])
        return table[self.kind, np.arange(self.kind.size)]


ROBUST_SCALE = 0.3
"""The Cauchy loss turns from quadratic to logarithmic at a log error of about this (30 %)."""


def _residuals(u, stack: _Stack, log_values: np.ndarray, prior_u: np.ndarray, w: float):
    """Each row's Cauchy (Lorentzian) residual, ``d * sqrt(log(1 + (e / d)^2))`` with its sign,
    then the prior's. Its square, the row's loss, grows like ``e^2`` within the scale ``d`` and
    only like ``log e`` beyond it: a row the rooflines cannot explain (an engine several times
    off, such as eager Hugging Face ``generate``) pulls the shared efficiencies less than a row
    1.5 times off does. The soft-L1 loss used before grows like ``|e|`` and let such rows bend
    the fit (leave-one-source-out: 73.8 % of rows within 30 %, against 76.2 % with this
    loss, before the concurrency rows modelled their server)."""
    e = np.log(stack.predict(_from_u(u))) - log_values
    d = ROBUST_SCALE
    robust = np.sign(e) * d * np.sqrt(np.log1p((e / d) ** 2))
    return np.concatenate([robust, w * (u - prior_u)])


def _solve(stack: _Stack, values, prior_u: np.ndarray, weight: float, start: np.ndarray,
           iterations: int = 100) -> tuple[np.ndarray, float]:
    """Damped Gauss-Newton (Levenberg-Marquardt) from ``start``; returns (u, loss)."""
    log_values, w = np.log(np.asarray(values, float)), math.sqrt(weight)

    def residuals(u):
        return _residuals(u, stack, log_values, prior_u, w)

    u, lam = start.copy(), 1e-2
    r = residuals(u)
    for _ in range(iterations):
        jac = np.empty((r.size, u.size))
        for j in range(u.size):
            step = np.zeros(u.size)
            step[j] = 1e-6
            jac[:, j] = (residuals(u + step) - r) / 1e-6
        g, h = jac.T @ r, jac.T @ jac
        while True:
            delta = np.linalg.solve(h + lam * np.diag(np.diag(h) + 1e-9), -g)
            trial = residuals(u + delta)
            if trial @ trial < r @ r:
                u, r, lam = u + delta, trial, max(lam / 3, 1e-7)
                break
            lam *= 4
            if lam > 1e8:
                return u, float(r @ r)
        if np.max(np.abs(delta)) < 1e-7:
            break
    return u, float(r @ r)


_STARTS = (0.5, 0.05, 0.01)  # mfu_attention: its loss has a flat plateau above ~0.1


def fit(rows: list[measured.Row], *, name: str = "default", prior: Preset | None = None,
        weight: float | None = None) -> Preset:
    """Fit one preset on usable ``rows`` (robust log error; see the module docs).

    ``prior``: the preset to shrink towards (a family's default), with ``weight`` per
    parameter; without it a weak pull towards the calculator docs' starting points. The
    attention's MFU has a plateau (no row's attention is compute-bound above ~10 %), so the
    fit starts from a few values of it and keeps the best.
    """
    rows = validate.sequence("rows", rows, what="measured.Row")
    if not all(isinstance(r, measured.Row) for r in rows):
        bad = next(r for r in rows if not isinstance(r, measured.Row))
        raise ValueError(f"rows must be a list of measured.Row (from measured.load()), got "
                         f"{validate.shorten(bad)} in it")
    name = validate.text("name", name)
    if prior is not None and not isinstance(prior, Preset):
        raise ValueError(f"prior must be a Preset or None, got {validate.shorten(prior)}")
    if weight is not None:
        weight = validate.real("weight", weight, minimum=0, maximum=1e6)
    rows = [r for r in rows if r.usable]
    if not rows:
        raise ValueError("fit needs at least one usable row")
    stack = _Stack([_costs(r) for r in rows])
    prior_values = prior.values() if prior is not None else tuple(_PRIOR[p] for p in PARAMETERS)
    weight = (_SHRINK_WEIGHT if prior is not None else _PRIOR_WEIGHT) if weight is None else weight
    prior_u = _to_u(prior_values)
    starts = [prior_u] + [_to_u([x if p == "mfu_attention" else v for p, v in
                                 zip(PARAMETERS, prior_values, strict=True)]) for x in _STARTS]
    u, _ = min((_solve(stack, [r.value for r in rows], prior_u, weight, s) for s in starts),
               key=lambda t: t[1])
    v = _from_u(u)
    return Preset(name=name, **{p: float(round(x, 6)) for p, x in zip(PARAMETERS, v, strict=True)},
                  rows=len(rows), sources=len({r.source for r in rows}))


def fit_presets(rows: list[measured.Row]) -> dict[str, Preset]:
    """The default preset (modern engines) and one per family with enough rows and sources."""
    rows = [r for r in rows if r.usable]
    modern = [r for r in rows if r.modern]
    default = fit(modern, name="default")
    presets = {"default": default}
    for fam in measured.FAMILIES[:-1]:
        mine = [r for r in modern if r.family == fam]
        if len(mine) >= MIN_ROWS and len({r.source for r in mine}) >= MIN_SOURCES:
            presets[fam] = fit(mine, name=fam, prior=default)
    return presets


# --- honest validation ------------------------------------------------------------------------
def relative_error(predicted: float, measured_value: float) -> float:
    """``predicted / measured - 1``: +0.3 means 30 % too high (too fast a speed, too long a time).

    Both are positive measures (a time, a speed) of size 1e-100 to 1e100, so that their ratio is
    finite: anything else has no relative error.
    """
    predicted = validate.real("predicted", predicted, minimum=1e-100, maximum=1e100)
    measured_value = validate.real("measured_value", measured_value, minimum=1e-100, maximum=1e100)
    return predicted / measured_value - 1


def cross_validate(rows: list[measured.Row], *, fitter=fit_presets, predictor=None,
                   group=lambda r: r.source) -> list[dict]:
    """Leave one group (by default one source) out: fit on the rest, predict the held-out rows.

    One dict per usable row: ``row``, ``held_out`` (its group), ``preset`` (the name used: its
    family's where the training rows had one, else the default), ``predicted``, ``measured``,
    ``error`` (``relative_error``). ``fitter(rows) -> presets`` and ``predictor(row, preset)``
    default to this module's fit and exact prediction (tests pass synthetic ones).
    """
    predictor = predictor or predict_row
    rows = [r for r in rows if r.usable]
    out = []
    for key in dict.fromkeys(group(r) for r in rows):
        train = [r for r in rows if group(r) != key]
        presets = fitter(train)
        for r in (r for r in rows if group(r) == key):
            p = _preset_for(r.family, presets)
            pred = predictor(r, p)
            out.append({"row": r, "held_out": key, "preset": p.name, "predicted": pred,
                        "measured": r.value, "error": relative_error(pred, r.value)})
    return sorted(out, key=lambda d: d["row"].number)


def summary(results: list[dict], within: float = 0.3) -> list[dict]:
    """Per engine family (and overall, and modern engines together): rows, share within
    ``±within`` and median absolute relative error, from ``cross_validate``'s output. A group
    without rows has ``None`` for both (not NaN).
    """
    within = validate.real("within", within, minimum=0, open_min=True, maximum=100)
    what = "results must be the non-empty list cross_validate gives (dicts with 'row' and 'error')"
    if not isinstance(results, list | tuple) or not results:
        raise ValueError(f"{what}, got {validate.shorten(results)}")
    for i, d in enumerate(results):
        if not isinstance(d, dict) or not isinstance(d.get("row"), measured.Row):
            raise ValueError(f"{what}; item {i} is {validate.shorten(d)}")
        validate.real(f"results[{i}]['error']", d.get("error"), minimum=-1, maximum=1e300)

    def stats(name, items):
        errors = np.array([abs(d["error"]) for d in items])
        return {"family": name, "rows": len(items),
                "within": float(np.mean(errors <= within)) if len(items) else None,
                "median_abs_error": float(np.median(errors)) if len(items) else None}

    groups = [stats("all", results),
              stats("modern engines", [d for d in results if d["row"].modern])]
    for fam in measured.FAMILIES:
        items = [d for d in results if (d["row"].family == fam if fam != "others"
                                        else not d["row"].modern)]
        groups.append(stats(fam, items))
    return groups


def plot_errors(results: list[dict], within: float = 0.3):
    """Histogram of the held-out errors of ``cross_validate`` (predicted / measured - 1, on a
    log scale of the ratio), modern engines and the others stacked; the band is ``±within``."""
    import matplotlib.pyplot as plt

    ratio = np.array([d["predicted"] / d["measured"] for d in results])
    modern = np.array([d["row"].modern for d in results])
    edges = np.exp(np.linspace(np.log(1 / 8), np.log(8), 31))
    clipped = np.clip(ratio, edges[0] * 1.0001, edges[-1] / 1.0001)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.axvspan(1 - within, 1 + within, color="#2ca02c", alpha=0.12, lw=0)
    ax.hist([clipped[modern], clipped[~modern]], bins=edges, stacked=True,
            color=["#1f77b4", "#bbbbbb"], label=["modern engines", "others"], edgecolor="white")
    ax.axvline(1, color="black", lw=1)
    ax.set_xscale("log")
    ticks = [1 / 8, 1 / 4, 1 / 2, 0.7, 1, 1.3, 2, 4, 8]
    ax.set_xticks(ticks, ["1/8", "1/4", "1/2", "0.7", "1", "1.3", "2", "4", "8"])
    ax.minorticks_off()
    ax.set_xlabel("held-out prediction / measurement (band: within ±30 %)")
    ax.set_ylabel("rows")
    ax.legend(fontsize=8, frameon=False, loc="upper right")
    fig.tight_layout()
    return fig


# --- the data file ----------------------------------------------------------------------------
def _first(x) -> float:
    return float(np.asarray(x).flat[0])


MARK = "llm_roofline.realistic --fit"
"""The presets file's signature (its ``"written_by"``): ``--out`` replaces only a file that
carries it, unless ``--force``."""


def write(path: str | Path | None = None, *, force: bool = False) -> dict:
    """Fit the presets on the library's measurements and write ``data/realistic.json``, or
    ``path``: a new file, or one this function wrote (its ``"written_by"`` is :data:`MARK`),
    or any regular file with ``force=True``. Checked before the fit; written atomically."""
    force = validate.boolean("force", force)
    if path is not None:
        target = validate.destination("path", path, folder=False)
        validate.replaceable("path", target, marker=MARK, force=force, flag="--force (force=True)")
    rows = measured.load()
    presets = fit_presets(rows)
    csv_text = resources.files("llm_roofline").joinpath(
        "data/measured/measured-inference.csv").read_bytes()
    document = {
        "about": ("Calibrated presets of llm_roofline.realistic, fitted by "
                  "`python -m llm_roofline.realistic --fit` on the usable rows of "
                  "data/measured/measured-inference.csv (see llm_roofline.measured). A prediction "
                  "with these is a calibrated prediction of what an engine achieves, not a bound. "
                  "mbu, mfu_*: fractions of peak; layer_overhead_us: fixed us per layer per pass; "
                  "collective_us: extra fixed us per tensor-parallel collective (2 n_layers + 2 per pass)."),
        "method": ("minimise a robust (Cauchy, scale 0.3) log error of each row's metric (its "
                   "source's definition) by damped Gauss-Newton; 'default': modern engines "
                   "(vLLM, SGLang, TensorRT-LLM, NIM, lmdeploy, gpt-fast) with a weak prior "
                   f"(weight {_PRIOR_WEIGHT}) towards "
                   f"{_PRIOR}; a family preset with >= {MIN_ROWS} rows from >= {MIN_SOURCES} "
                   f"sources, shrunk towards the default (weight {_SHRINK_WEIGHT})"),
        "data": {"file": "data/measured/measured-inference.csv",
                 "sha256": hashlib.sha256(csv_text).hexdigest(),
                 "usable_rows": len(measured.usable(rows)), "rows": len(rows)},
        "presets": {n: {k: v for k, v in dataclasses.asdict(p).items() if k != "name"}
                    for n, p in presets.items()},
        "cross_validation": {
            "method": "leave one source out: fit on the other sources, predict the held-out rows",
            "within": "share of rows with |predicted / measured - 1| <= 0.3",
            "summary": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in g.items()}
                        for g in summary(cross_validate(rows))],
        },
    }
    # the one gate of every writer: never a file it did not write (unless force), never half a file
    target = (Path(__file__).parent / _FILE if path is None
              else validate.destination("path", path, folder=False))
    text = json.dumps({"written_by": MARK, **document}, indent=1, allow_nan=False) + "\n"
    validate.write_output("path", target, text, marker=MARK, force=force or path is None,
                          flag="--force (force=True)")
    _file.cache_clear()
    return document


def main(argv: list[str] | None = None) -> None:
    """``python -m llm_roofline.realistic --fit [--out FILE]``: refit and write the presets."""
    class Parser(validate.OneLineParser):
        label = "llm_roofline.realistic"

    parser = Parser(prog="python -m llm_roofline.realistic",
                    description="Fit the calibrated presets on the measurements.")
    parser.add_argument("--fit", action="store_true", help="fit and write data/realistic.json")
    parser.add_argument("--out", help="write here instead of the library's data file (a new "
                        "file, or one --fit wrote)")
    parser.add_argument("--force", action="store_true",
                        help="let --out replace a file that --fit did not write")
    args = parser.parse_args(argv)
    if not args.fit:
        parser.error("nothing to do: pass --fit")
    try:
        document = write(args.out, force=args.force)
    except ValueError as err:
        parser.error(re.sub(r"^(cannot write )?path\b", lambda m: (m.group(1) or "") + "--out",
                            str(err)).replace("--force (force=True)", "--force"))
    print(json.dumps(document["presets"], indent=1))


if __name__ == "__main__":
    main()
