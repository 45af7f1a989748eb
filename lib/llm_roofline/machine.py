"""Your own machine as an accelerator: its measured roofline, and predictions checked against it.

The pieces of chapter 8 (``notebooks/08_your_machine``):

- :func:`host_accelerator` turns what :func:`llm_roofline.measure.measure_roofline` measured
  into an :class:`~llm_roofline.hardware.Accelerator` (bandwidth: the GEMV read bandwidth of
  main memory; peak: the BLAS matmul rate at the measured dtype), usable wherever the
  library takes a chip, ``llm_roofline.estimate`` included.
- :func:`save_accelerator` writes it to a JSON data file in the schema of the library's own
  ``data/accelerators.json`` (human units: GiB, GB/s, TFLOPS, with a source for every
  figure); :func:`load_accelerators` reads such a file back::

      host = measure.measure_roofline()
      chip = host_accelerator(host, name="my laptop")
      save_accelerator(chip, "my_laptop.json")
      chip = load_accelerators("my_laptop.json")[0]
      llm_roofline.estimate(cfg, chip, 1, 128, 64, weight_dtype="fp32", kv_dtype="fp32",
                            act_dtype="fp32")

- :func:`profile` counts, per phase and operation, the tiny transformer's FLOPs and bytes
  (exactly, with its tally) and times each operation alone, the careful way
  (:func:`llm_roofline.measure.timing`: the model's own method on warmed buffers, weights
  cycled cold as in a pass, the best of several samples, its spread);
  :func:`pass_times` times the whole passes the same way; :func:`predict` adds each
  operation's roofline time ``max(FLOPs / peak, bytes / bandwidth)`` and the error of it;
  :func:`totals` sums them per phase. The refinements of the chapter's "where the model
  breaks" are options of :func:`predict`: the read bandwidth at the working set's size (a
  hierarchical roofline, :func:`bandwidth_at`) and a fixed cost per call (:func:`per_call`).
- :func:`plot_roofline` draws a roofline with measured or predicted points on it.

Units: seconds, bytes, FLOP; bandwidths in bytes/s and peaks in FLOP/s inside an
``Accelerator``, GB/s and GFLOP/s in the ``host`` dict that ``measure`` returns.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import numbers
from pathlib import Path

import numpy as np

from . import hardware, validate
from .hardware import Accelerator
from .measure import last_level_cache_bytes
from .models import ModelConfig, resolve

__all__ = [
    "BLAS_OPS", "chapter_models", "host_accelerator", "accelerator_record", "save_accelerator",
    "load_accelerators",
    "bandwidth_at", "footprint_bytes", "pass_times", "profile", "per_call", "predict", "totals", "rows_steps",
    "plot_roofline", "ridge_text", "ROOFLINE_UNITS",
]

BLAS_OPS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
            "lm_head", "attn_scores", "attn_values")
"""Operations the tiny model runs as one BLAS matrix product; the others are NumPy
element-wise code (norms, RoPE, softmax, the SwiGLU activation, residuals, cache writes)."""

def chapter_models() -> dict[str, ModelConfig]:
    """The tiny transformers chapter 8 measures, by size: weights in float32 of about 2 MB
    (in a core's L2 cache or any L3), 16 MB (in most L3 caches) and 214 MB (in main memory
    on most machines), and ``micro``, so small that its run time is all fixed costs."""
    common = dict(max_context=512)
    return {
        "micro": ModelConfig("micro", vocab_size=64, hidden_size=16, intermediate_size=32,
                             n_layers=2, n_heads=2, n_kv_heads=1, head_dim=8, **common),
        "S": ModelConfig("S", vocab_size=512, hidden_size=128, intermediate_size=344,
                         n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32, **common),
        "M": ModelConfig("M", vocab_size=1024, hidden_size=384, intermediate_size=1024,
                         n_layers=2, n_heads=6, n_kv_heads=2, head_dim=64, **common),
        "L": ModelConfig("L", vocab_size=4096, hidden_size=1024, intermediate_size=2816,
                         n_layers=4, n_heads=16, n_kv_heads=4, head_dim=64, **common),
    }


_HOST_KEYS = ("read_GBps", "cache_GBps", "copy_GBps", "matmul_GFLOPS", "dtype", "read_sweep")


def _host(host) -> dict:
    if not isinstance(host, dict) or any(k not in host for k in _HOST_KEYS):
        raise ValueError(
            "host must be the dict measure.measure_roofline() returns, with keys "
            f"{', '.join(_HOST_KEYS)}; got {validate.shorten(host)}"
        )
    for key in ("read_GBps", "cache_GBps", "copy_GBps", "matmul_GFLOPS"):
        validate.real(f"host[{key!r}]", host[key], minimum=1e-3, maximum=1e7)
    validate.choice("host['dtype']", host["dtype"], ("fp32", "fp64"))
    sweep = host["read_sweep"]
    if not isinstance(sweep, dict) or not sweep or not all(
            isinstance(k, str) and k.isascii() and k.isdigit() and 0 < int(k) <= 2**20
            for k in sweep):
        raise ValueError(f"host['read_sweep'] must map sizes in MB (such as '64') to GB/s, got "
                         f"{validate.shorten(sweep)}")
    for k, v in sweep.items():
        validate.real(f"host['read_sweep'][{k!r}]", v, minimum=1e-3, maximum=1e7)
    return host


def host_accelerator(host: dict, *, name: str | None = None) -> Accelerator:
    """The measured host as an ``Accelerator``: main-memory read bandwidth, BLAS peak.

    ``host`` is what :func:`llm_roofline.measure.measure_roofline` returns. The peak is
    stored under the dtype it was measured in (``"fp32"`` by default), the only precision
    the chip then has. Memory is the machine's RAM; the copy and cache bandwidths and the
    BLAS that produced the peak go into ``notes``; ``sources`` say how and when each figure
    was measured.
    """
    host = _host(host)
    blas = host.get("blas") or {}
    cpu = host.get("cpu") or "unknown CPU"
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ValueError(f"name must be a non-empty string, got {validate.shorten(name)}")
    name = name or f"this machine ({cpu})"
    when = _dt.date.today().isoformat()
    how = f"best of {host.get('repeats', '?')}" if host.get("statistic") == "min" else "median"
    threads = blas.get("threads")
    library = " ".join(str(x) for x in (blas.get("library"), blas.get("version")) if x)
    return Accelerator(
        name=name,
        vendor="measured",
        architecture=f"{cpu}, {host.get('cpu_count') or '?'} logical CPUs",
        memory_bytes=_host_memory(host),
        memory_type="DRAM",
        bandwidth=float(host["read_GBps"]) * 1e9,
        peaks={host["dtype"]: float(host["matmul_GFLOPS"]) * 1e9},
        interconnect=None,
        interconnect_bandwidth=None,
        sources={
            "memory_gib": f"total RAM reported by the OS, {when}",
            "bandwidth_gb_s": f"measured {when}: llm_roofline.measure.matvec_bandwidth of "
            f"{host.get('read_mb', '?')} MB, {how}",
            "peak_tflops": f"measured {when}: llm_roofline.measure.matmul_peak n="
            f"{host.get('matmul_n', '?')}, {host['dtype']}, {how}; BLAS {library or 'unknown'}"
            f"{f' ({threads} threads)' if threads else ''}",
        },
        notes=(
            f"Measured, not a datasheet. Copy bandwidth {host['copy_GBps']:.1f} GB/s (one "
            f"core, read + write); fastest cache read {host['cache_GBps']:.1f} GB/s; BLAS "
            f"{library or 'unknown'}, kernel {blas.get('kernel') or 'unknown'}, "
            f"{threads or '?'} threads."
        ),
    )


def _host_memory(host: dict) -> float:
    memory = host.get("memory_bytes")
    if memory is None:
        raise ValueError("host['memory_bytes'] is unknown (the OS did not report the RAM): set it "
                         "to the machine's memory in bytes")
    return validate.real("host['memory_bytes']", memory, minimum=2**20, maximum=2.0**60)


def _g(value: float, scale: float, kind: str) -> float:
    """``value / scale`` to 6 significant digits: a data file's human figure. A figure that
    6 digits would round past the limits of ``hardware.LIMITS[kind]`` keeps all its digits,
    so that every accelerator saved reads back."""
    lo, hi = hardware.LIMITS[kind]
    rounded = float(f"{value / scale:.6g}")
    return rounded if lo <= rounded <= hi else value / scale


def accelerator_record(chip: Accelerator) -> dict:
    """``chip`` as one record of ``data/accelerators.json`` (GiB, GB/s, TFLOPS; 6 digits)."""
    if not isinstance(chip, Accelerator):
        raise ValueError(f"chip must be an Accelerator, got {validate.shorten(chip)}")
    link = net = None
    if chip.interconnect is not None:
        link = {"name": chip.interconnect,
                "bandwidth_gb_s": _g(chip.interconnect_bandwidth, 1e9, "bandwidth_gb_s")}
        if chip.link_bandwidth is not None:
            link["link_gb_s"] = _g(chip.link_bandwidth, 1e9, "bandwidth_gb_s")
        link["latency_us"] = _g(chip.collective_latency_s, 1e-6, "latency_us")
        link["domain_size"] = chip.domain_size
        if chip.in_switch_reduction:
            link["in_switch_reduction"] = True
    if chip.network is not None:
        net = {"name": chip.network, "bandwidth_gb_s": _g(chip.network_bandwidth, 1e9, "bandwidth_gb_s"),
               "latency_us": _g(chip.network_latency_s, 1e-6, "latency_us")}
    try:  # a built-in chip keeps its aliases, so that "h100" finds it in the file too
        builtin = hardware.get_accelerator(chip.name)
    except ValueError:
        builtin = None
    aliases = hardware.aliases(builtin) if builtin == chip else []
    record = {
        "name": chip.name,
        "aliases": aliases,
        "vendor": chip.vendor,
        "architecture": chip.architecture,
        "memory_gib": _g(chip.memory_bytes, 2**30, "memory_gib"),
        "memory_type": chip.memory_type,
        "bandwidth_gb_s": _g(chip.bandwidth, 1e9, "bandwidth_gb_s"),
        "peak_tflops": {k: _g(v, 1e12, "peak_tflops") for k, v in chip.peaks.items()},
        "interconnect": link,
        "network": net,
        "sources": dict(chip.sources),
        "notes": chip.notes,
    }
    if net is None:
        del record["network"]
    return record


def save_accelerator(chips: Accelerator | list[Accelerator], path, *,
                     force: bool = False) -> Path:
    """Write one chip (or several) to ``path`` as a JSON file in the schema of the library's
    ``data/accelerators.json``: ``{"about": ..., "accelerators": [record, ...]}``.

    Figures are rounded to 6 significant digits; every built-in chip reads back equal. Returns
    the path written. An existing file is replaced only if this function wrote it (a notebook
    re-run saves again; its ``about`` says so) or with ``force=True``; the file is written whole
    or not at all (the library's one writer gate, :func:`~llm_roofline.validate.write_output`).
    """
    force = validate.boolean("force", force)
    if isinstance(chips, Accelerator):
        chips = [chips]
    elif not isinstance(chips, list | tuple) or not chips or not all(
            isinstance(c, Accelerator) for c in chips):
        raise ValueError(f"chips must be an Accelerator or a non-empty list of them, got "
                         f"{validate.shorten(chips)}")
    # the library's one gate for writers (validate.destination, validate.write_output)
    path = validate.destination("path", path, folder=False)
    shown = validate._shown(path)
    if not path.parent.is_dir():
        raise ValueError(f"path {shown}: the folder {validate._shown(path.parent)} does not exist")
    validate.replaceable("path", path, marker=_SAVED, force=force, flag="force=True")
    data = {
        "about": "Accelerators in the schema of llm_roofline/data/accelerators.json (memory_gib "
        "in GiB, bandwidth_gb_s in GB/s, peak_tflops in TFLOP/s, dense); written by "
        "llm_roofline.machine.save_accelerator, read by load_accelerators.",
        "accelerators": [accelerator_record(c) for c in chips],
    }
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    return validate.write_output("path", path, text, marker=_SAVED, force=True)


_SAVED = "written by llm_roofline.machine.save_accelerator"
"""The signature in the ``about`` of a file :func:`save_accelerator` wrote: such a file is
replaced on the next save; any other needs ``force=True``."""


def load_accelerators(path) -> list[Accelerator]:
    """The accelerators of a file written by :func:`save_accelerator` (``hardware``'s reader)."""
    return hardware.load_accelerators(path)


def bandwidth_at(host: dict, nbytes: float) -> float:
    """Read bandwidth (bytes/s) for a working set of ``nbytes``: the hierarchical roofline's
    slope for it.

    A step function of the measured sweep: the bandwidth measured at the smallest swept size
    that holds ``nbytes`` (a working set reads no faster than a measured array at least as
    large), and main memory's beyond the largest size. A smaller working set never reads
    slower than a larger one, so a swept size that measured slower than a larger size (a run
    disturbed by another program) counts at the larger size's bandwidth.
    """
    host = _host(host)
    nbytes = validate.real("nbytes", nbytes, minimum=0, open_min=True, unit="bytes")
    sweep = sorted((int(k) * 10**6, v * 1e9) for k, v in host["read_sweep"].items())
    floor = 0.0
    levels = []
    for size, bandwidth in reversed(sweep):  # from main memory down to the smallest cache
        floor = max(floor, bandwidth)
        levels.append((size, floor))
    for size, bandwidth in reversed(levels):
        if nbytes <= size:
            return bandwidth
    return sweep[-1][1]


def footprint_bytes(cfg, batch: int, context: int, itemsize: int = 4) -> int:
    """Bytes a decode step of ``cfg`` re-reads: all weights plus the KV cache of ``batch``
    sequences of ``context`` tokens, at ``itemsize`` bytes per number."""
    cfg = resolve(cfg, "cfg")
    batch = validate.integer("batch", batch)
    context = validate.integer("context", context, maximum=cfg.max_context)
    itemsize = validate.integer("itemsize", itemsize, maximum=16)
    return int((cfg.n_params + batch * cfg.kv_cache_elements(context)) * itemsize)


# ---- measured against predicted ----------------------------------------------------------


MAX_PROFILE_TOKENS = 1 << 16
"""The most tokens (batch x prompt) :func:`profile` runs in one pass."""


def _op_kernels(model, B: int, n: int, past: int, lm_rows: int, rng) -> dict:
    """Each operation of one layer (and of the pass's ends) as a function that makes its
    buffers and returns the functions of no arguments that run the model's own method on
    them: ``B`` sequences of ``n`` new tokens after ``past`` cached ones, the LM head on
    ``lm_rows`` rows. The tally is off, so
    a call is the operation and nothing else. ``kv_read`` hands the cache over as a view: its
    time is that of making the view, and the attention products pay for reading it."""
    from .tiny import KVCache

    cfg, act = model.cfg, model.act
    d, H, G, dh = cfg.hidden_size, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    T, S = B * n, past + n
    layer = model.layers[0]
    tokens = rng.integers(0, cfg.vocab_size, (B, n))
    x = rng.standard_normal((T, d)).astype(act)  # [T, d], the residual stream
    h = model._norm("attn_norm", x, layer["attn_norm"])  # [T, d]
    q = model._linear("q_proj", h, *layer["q_proj"]).reshape(B, n, H, dh)
    k = model._linear("k_proj", h, *layer["k_proj"]).reshape(B, n, G, dh)
    v = model._linear("v_proj", h, *layer["v_proj"]).reshape(B, n, G, dh)
    cos, sin = model._rope_tables(past, S)  # [n, dh]
    cache = KVCache.empty(cfg, B, S, model.dtype)
    cache.k[...] = rng.standard_normal(cache.k.shape)
    cache.v[...] = rng.standard_normal(cache.v.shape)
    kc, vc = cache.k[0], cache.v[0]  # [B, G, S, dh]
    qr, kr = model._rope(q, k, cos, sin)
    K, V = model._kv_cache(kr, v, kc, vc, past)  # [B, G, S, dh]
    qg = np.ascontiguousarray(  # [B, G, g*n, dh], as _causal_attention hands it over
        qr.reshape(B, n, G, H // G, dh).transpose(0, 2, 3, 1, 4)).reshape(B, G, -1, dh)
    mask = None
    if n > 1:
        seen = np.arange(past + n) <= past + np.arange(n)[:, None]  # [n, S]
        mask = np.where(seen, 0, -np.inf).astype(act)
    scores = model._attn_scores(qg, K)  # [B, G, g*n, S], softmaxed in place below
    p, total = model._softmax(scores.copy(), mask)  # exponentials, each row's sum
    a = model._attn_values(p, V, total).reshape(B, G, H // G, n, dh).transpose(0, 3, 1, 2, 4)
    a = a.reshape(T, H * dh)
    gate = model._linear("gate_proj", h, *layer["gate_proj"])  # [T, f]
    up = model._linear("up_proj", h, *layer["up_proj"])
    m = model._swiglu(gate, up)
    y = x.copy()  # the residual adds into its second operand
    last = np.ascontiguousarray(x[:lm_rows])  # [rows, d]
    logits = model._linear("lm_head", last, model.head)  # [rows, V]
    final = model.w["model.norm.weight"]
    kernels = {
        "embed": lambda: model._embed(tokens),
        "attn_norm": lambda: model._norm("attn_norm", x, layer["attn_norm"]),
        "rope": lambda: model._rope(q, k, cos, sin),
        "kv_write": lambda: model._kv_cache(kr, v, kc, vc, past),
        "kv_read": lambda: (kc[:, :, :S], vc[:, :, :S]),  # a view: no bytes move
        "attn_scores": lambda: model._attn_scores(qg, K),
        "softmax": lambda: model._softmax(scores, mask),
        "attn_values": lambda: model._attn_values(p, V, total),
        "residual": lambda: model._residual(x, y),
        "mlp_norm": lambda: model._norm("mlp_norm", x, layer["mlp_norm"]),
        "mlp_act": lambda: model._swiglu(gate, up),
        "final_norm": lambda: model._norm("final_norm", x, final),
        "lm_head": lambda: model._linear("lm_head", last, model.head),
        "sampling": lambda: logits.argmax(axis=-1),  # what generate does with the logits
    }
    kernels = {op: (None if fn is None else (lambda fn=fn: [fn])) for op, fn in kernels.items()}
    # A weight is used once per pass; in a model larger than the last-level cache it comes
    # from main memory each time. So each product cycles through every layer's weight and,
    # for such a model, through copies of them, until the cycle holds twice the cache.
    # (A prefill's products reuse each weight for every token: there the copies change
    # nothing but the time the measurement takes, so they are made for a decode only.)
    llc = last_level_cache_bytes() or 32 * 2**20
    cold = cfg.n_params * model.dtype.itemsize > llc and T <= 16

    def cycle(op, arg, weights):
        size = sum(w.nbytes + (0 if b is None else b.nbytes) for w, b in weights)
        copies = max(1, math.ceil(2 * llc / size)) if cold else 1
        pool = list(weights) + [(w.copy(), None if b is None else b.copy())
                                for _ in range(copies - 1) for w, b in weights]
        return [lambda w=w, b=b: model._linear(op, arg, w, b) for w, b in pool]

    for op, arg in (("q_proj", h), ("k_proj", h), ("v_proj", h), ("o_proj", a),
                    ("gate_proj", h), ("up_proj", h), ("down_proj", m)):
        kernels[op] = lambda op=op, arg=arg: cycle(op, arg, [lay[op] for lay in model.layers])
    kernels["lm_head"] = lambda: cycle("lm_head", last, [(model.head, None)])
    return kernels


def profile(model, batch: int, prompt_len: int, n_decode: int, *, runs: int = 5,
            seed: int = 0, min_seconds: float = 0.002, threads: int | None = None,
            clock: str | None = None) -> list[dict]:
    """Each operation of ``model.generate`` (one prefill of ``batch`` random prompts of
    ``prompt_len`` tokens, ``n_decode`` decode steps), counted exactly and timed alone.

    One row per (phase, operation), as ``Tally.rows`` gives them: FLOPs, bytes read and
    written and calls, counted by a tallied run of ``generate``; and ``seconds``, measured
    the careful way (:func:`llm_roofline.measure.timing`): the operation's own method run on
    buffers made once, repeated until a repetition lasts ``min_seconds``, the best of
    ``runs`` repetitions, the BLAS on ``threads`` threads (default: its current count).
    ``seconds`` is that time per call times the calls; a decode step is timed at the middle
    of the run's contexts. Each row also has ``per_call_s``, ``spread`` (median / best - 1 of
    the repetitions), ``waited`` (the share of wall time spent waiting for a core),
    ``clock``, ``batch`` and ``prompt_len``. ``clock`` as
    :func:`llm_roofline.measure.timing` (default ``"cpu"`` on one thread, else ``"wall"``).
    Compare the sum with :func:`pass_times`.
    """
    from .measure import blas_info, blas_threads, default_clock, timing
    from .tiny import Tally

    batch, prompt_len, n_decode, runs, rng = _run_inputs(model, batch, prompt_len, n_decode,
                                                         runs, seed)
    if model.skip_masked:
        raise ValueError("profile times the masked attention: build the model with "
                         "skip_masked=False")
    prompt = rng.integers(0, model.cfg.vocab_size, (batch, prompt_len))
    tally = Tally()
    model.generate(prompt, n_decode + 1, tally=tally)  # the exact counts
    rows = tally.rows()
    V, d = model.cfg.vocab_size, model.cfg.hidden_size
    with blas_threads(threads):
        clock = default_clock(threads or blas_info().get("threads"), clock)
        per_call: dict[tuple[str, str], dict] = {}
        for phase, n, past in (("prefill", prompt_len, 0),
                               ("decode", 1, prompt_len + (n_decode - 1) // 2)):
            head = next(r for r in rows if r["phase"] == phase and r["op"] == "lm_head")
            lm_rows = head["flops"] // (2 * V * d * head["calls"])
            for op, make in _op_kernels(model, batch, n, past, lm_rows, rng).items():
                if make is None:
                    per_call[phase, op] = {"seconds": 0.0, "spread": 0.0, "waited": 0.0}
                    continue
                t = timing(make(), runs, min_seconds, clock)  # one function per buffer, in turn
                per_call[phase, op] = t
    out = []
    for r in rows:
        t = per_call[r["phase"], r["op"]]
        out.append(r | {"seconds": t["seconds"] * r["calls"], "per_call_s": t["seconds"],
                        "spread": t["spread"], "waited": t["waited"], "clock": clock,
                        "batch": batch, "prompt_len": prompt_len})
    return out


def _run_inputs(model, batch, prompt_len, n_decode, runs, seed):
    """:func:`profile`'s and :func:`pass_times`'s arguments checked once: the sizes, ``runs``,
    and a random generator seeded with ``seed``."""
    from .tiny import TinyLlama

    if not isinstance(model, TinyLlama):
        raise ValueError(f"model must be a TinyLlama, got {validate.shorten(model)}")
    seed = validate.integer("seed", seed, minimum=0, maximum=2**64 - 1)
    batch = validate.integer("batch", batch, maximum=MAX_PROFILE_TOKENS)
    prompt_len = validate.integer("prompt_len", prompt_len, maximum=model.cfg.max_context)
    n_decode = validate.integer("n_decode", n_decode, maximum=model.cfg.max_context)
    if batch * prompt_len > MAX_PROFILE_TOKENS:
        raise ValueError(f"batch x prompt_len must be at most {MAX_PROFILE_TOKENS:,} tokens, got "
                         f"{batch:,} x {prompt_len:,} = {batch * prompt_len:,}")
    runs = validate.integer("runs", runs, maximum=100)
    return batch, prompt_len, n_decode, runs, np.random.default_rng(seed)


def pass_times(model, batch: int, prompt_len: int, n_decode: int, *, runs: int = 15,
               seed: int = 0, min_seconds: float = 0.002, threads: int | None = None,
               clock: str | None = None) -> dict:
    """The same run as :func:`profile` timed whole, per phase: ``{"prefill": {...},
    "decode": {...}}``, each with ``seconds`` (the prefill pass; the ``n_decode`` steps, a
    step at the middle context times ``n_decode``) and ``spread``, by
    :func:`llm_roofline.measure.timing` with the same settings, but ``runs`` samples of a
    whole pass and three times as many of a decode step (a pass is long, and a long sample is
    more often disturbed than a short one). The difference from the sum
    of the operations is what runs between them: Python, reshapes, the mask, allocations."""
    from .measure import blas_info, blas_threads, default_clock, timing

    batch, prompt_len, n_decode, runs, rng = _run_inputs(model, batch, prompt_len, n_decode,
                                                         runs, seed)
    prompt = rng.integers(0, model.cfg.vocab_size, (batch, prompt_len))
    top = prompt_len + n_decode + 1
    if top > model.cfg.max_context:
        raise ValueError(f"prompt_len {prompt_len} + n_decode {n_decode} + 1 exceeds max_context "
                         f"{model.cfg.max_context}")
    with blas_threads(threads):
        clock = default_clock(threads or blas_info().get("threads"), clock)
        prefill = timing(lambda: model.prefill(prompt, max_len=top, logits="last"), runs,
                         min_seconds, clock)
        _, cache = model.prefill(prompt, max_len=top, logits="last")
        mid = prompt_len + (n_decode - 1) // 2
        nxt = prompt[:, -1]

        def step():
            cache.length = mid
            model.decode(nxt, cache)

        decode = timing(step, min(3 * runs, 1000), min_seconds, clock)  # short: more samples
    return {"prefill": {"seconds": prefill["seconds"], "spread": prefill["spread"],
                        "waited": prefill["waited"], "clock": clock},
            "decode": {"seconds": decode["seconds"] * n_decode, "spread": decode["spread"],
                       "waited": decode["waited"], "clock": clock,
                       "per_step_s": decode["seconds"]}}


_ROW_NUMBERS = ("flops", "bytes_read", "bytes_written", "seconds", "calls")


def _rows(rows, keys: tuple[str, ...] = ("phase", "op", *_ROW_NUMBERS)) -> list[dict]:
    """``rows`` as :func:`profile` gives them: a non-empty list of dicts with ``keys``, the
    names strings and the numbers finite and non-negative (``calls`` an integer)."""
    what = f"rows must be a non-empty list of dicts with keys {', '.join(keys)} (as profile gives)"
    if not isinstance(rows, list | tuple) or not rows:
        raise ValueError(f"{what}, got {validate.shorten(rows)}")
    for i, r in enumerate(rows):
        if not isinstance(r, dict) or any(k not in r for k in keys):
            raise ValueError(f"{what}; row {i} is {validate.shorten(r)}")
        for k in keys:
            if k in ("phase", "op"):
                validate.text(f"rows[{i}][{k!r}]", r[k], limit=100)
            elif k == "calls":
                validate.integer(f"rows[{i}]['calls']", r[k], minimum=0)
            else:
                validate.real(f"rows[{i}][{k!r}]", r[k], minimum=0, maximum=1e300)
    return list(rows)


def per_call(rows: list[dict]) -> dict[str, float]:
    """Seconds per call of each operation of ``rows`` (both phases pooled): measured on a
    model so small that its FLOPs and bytes take no time, this is the fixed cost of a call."""
    rows = _rows(rows, ("op", "seconds", "calls"))
    pooled: dict[str, list[float]] = {}
    for r in rows:
        s, n = pooled.setdefault(r["op"], [0.0, 0])
        pooled[r["op"]] = [s + r["seconds"], n + r["calls"]]
    return {op: s / n for op, (s, n) in pooled.items() if n}


def predict(rows: list[dict], host: dict, *, footprint: float | None = None,
            overhead: dict[str, float] | None = None) -> list[dict]:
    """Each row with its roofline prediction: ``predicted_s = max(F / P, Q / B)``.

    ``P`` is the measured matmul peak, ``B`` the main-memory read bandwidth, or with
    ``footprint`` (bytes) the read bandwidth at that working-set size (the hierarchical
    roofline). ``overhead`` (from :func:`per_call`) adds a fixed cost per call. Adds
    ``intensity`` (FLOPs/byte), ``bound`` ("memory" or "compute"), ``predicted_s`` and
    ``error`` (predicted / measured - 1: negative when the prediction is too fast).
    """
    host = _host(host)
    rows = _rows(rows)
    if overhead is not None:
        if not isinstance(overhead, dict):
            raise ValueError(f"overhead must be the dict per_call gives, got "
                             f"{validate.shorten(overhead)}")
        for op, seconds in overhead.items():
            validate.real(f"overhead[{validate.shorten(op, 40)}]", seconds, minimum=0, maximum=1e9,
                          unit="seconds")
    for i, r in enumerate(rows):
        if r["seconds"] <= 0:
            raise ValueError(f"rows[{i}]['seconds'] must be a measured time above 0 s (as "
                             f"profile gives), got {r['seconds']!r} for {r['op']!r}")
        if r["bytes_read"] + r["bytes_written"] <= 0:
            raise ValueError(f"rows[{i}] ({r['op']!r}) moves no bytes: an operation reads or "
                             "writes something; bytes_read + bytes_written must be above 0")
    peak = float(host["matmul_GFLOPS"]) * 1e9
    bandwidth = host["read_GBps"] * 1e9 if footprint is None else bandwidth_at(host, footprint)
    out = []
    for r in rows:
        moved = r["bytes_read"] + r["bytes_written"]
        t_compute, t_memory = r["flops"] / peak, moved / bandwidth
        predicted = max(t_compute, t_memory)
        if overhead is not None:
            predicted += r["calls"] * overhead.get(r["op"], 0.0)
        out.append(r | {
            "intensity": r["flops"] / moved,
            "bound": "compute" if t_compute > t_memory else "memory",
            "predicted_s": predicted,
            "error": predicted / r["seconds"] - 1,
        })
    return out


def totals(rows: list[dict]) -> dict[str, dict]:
    """Per phase: summed FLOPs, bytes, measured and predicted seconds, intensity, error."""
    rows = _rows(rows)
    for i, r in enumerate(rows):
        if "predicted_s" in r:
            validate.real(f"rows[{i}]['predicted_s']", r["predicted_s"], minimum=0, maximum=1e300)
    out: dict[str, dict] = {}
    for r in rows:
        t = out.setdefault(r["phase"], {"flops": 0, "bytes": 0, "seconds": 0.0,
                                        "predicted_s": 0.0, "calls": 0})
        t["flops"] += r["flops"]
        t["bytes"] += r["bytes_read"] + r["bytes_written"]
        t["seconds"] += r["seconds"]
        t["predicted_s"] += r.get("predicted_s", 0.0)
        t["calls"] += r["calls"]
    for phase, t in out.items():
        if t["bytes"] <= 0 or t["seconds"] <= 0:
            raise ValueError(f"rows of phase {validate.shorten(phase, 40)} move no bytes or take "
                             "no time: they are not a profile's")
        t["intensity"] = t["flops"] / t["bytes"]
        t["error"] = t["predicted_s"] / t["seconds"] - 1
    return out


def rows_steps(rows: list[dict]) -> int:
    """Decode steps in ``rows``: the calls of the LM head in the decode phase."""
    rows = _rows(rows, ("phase", "op", "calls"))
    return sum(r["calls"] for r in rows if r["phase"] == "decode" and r["op"] == "lm_head")


# ---- the picture --------------------------------------------------------------------------


#: The units :func:`plot_roofline` draws performance in, and the FLOP/s each one is.
ROOFLINE_UNITS = {"GFLOP/s": 1e9, "TFLOP/s": 1e12}


def ridge_text(ridge: float) -> str:
    """The ridge point as a figure labels it: ``"ridge 3.9 FLOPs/byte"``, ``"ridge 295 ..."``."""
    ridge = validate.real("ridge", ridge, minimum=0, open_min=True, unit="FLOPs/byte")
    return f"ridge {ridge:,.1f} FLOPs/byte" if ridge < 100 else f"ridge {ridge:,.0f} FLOPs/byte"


def plot_roofline(ax, peak: float, bandwidth: float, points=(), *, cache_bandwidth=None,
                  title: str = "", imin: float = 1 / 16, imax: float = 1024.0,
                  unit: str = "GFLOP/s", roof_label: str | None = None,
                  cache_label: str | None = None, label_ridge: bool = False):
    """A roofline on log-log axes, with points on it; return the Axes.

    ``peak`` in FLOP/s, ``bandwidth`` in bytes/s (the solid line); ``cache_bandwidth``
    adds a dashed slope for a cache level. ``points`` are ``(intensity, FLOP/s, label,
    style)`` tuples with ``style`` a dict for ``ax.scatter`` (``label=None``: no text).
    ``unit`` is the performance axis's unit, ``"GFLOP/s"`` or ``"TFLOP/s"`` (points stay in
    FLOP/s). ``roof_label`` and ``cache_label`` replace the lines' legend entries;
    ``label_ridge`` writes the ridge point's intensity beside its dot (:func:`ridge_text`),
    above the roof, with head room made for it.
    """
    validate.axes("ax", ax, optional=False)
    peak = validate.real("peak", peak, minimum=1e3, maximum=1e22, unit="FLOP/s")
    bandwidth = validate.real("bandwidth", bandwidth, minimum=1e3, maximum=1e20, unit="bytes/s")
    if cache_bandwidth is not None:
        cache_bandwidth = validate.real("cache_bandwidth", cache_bandwidth, minimum=1e3,
                                        maximum=1e20, unit="bytes/s")
    imin = validate.real("imin", imin, minimum=1e-30, maximum=1e30)
    imax = validate.real("imax", imax, minimum=1e-30, maximum=1e30)
    if imin >= imax:
        raise ValueError(f"imin ({imin:g}) must be below imax ({imax:g})")
    title = validate.text("title", title, empty=True)
    if unit not in ROOFLINE_UNITS:
        raise ValueError(f"unit must be one of {', '.join(map(repr, ROOFLINE_UNITS))}, got "
                         f"{validate.shorten(unit)}")
    scale = ROOFLINE_UNITS[unit]
    if roof_label is not None:
        roof_label = validate.text("roof_label", roof_label)
    if cache_label is not None:
        cache_label = validate.text("cache_label", cache_label)
    label_ridge = validate.boolean("label_ridge", label_ridge)
    points = validate.sequence("points", points, what="(intensity, FLOP/s, label, style)",
                               empty=True)
    for i, point in enumerate(points):
        if not isinstance(point, tuple | list) or len(point) != 4 or not isinstance(
                point[3], dict) or not (point[2] is None or isinstance(point[2], str)):
            raise ValueError(f"points[{i}] must be (intensity, FLOP/s, label, style dict), got "
                             f"{validate.shorten(point)}")
        for v in point[:2]:  # a real number; one that is not finite and positive is skipped
            if not isinstance(v, numbers.Real) or isinstance(v, bool | np.bool_):
                raise ValueError(f"points[{i}] must hold numbers (intensity, FLOP/s), got "
                                 f"{validate.shorten(v)}")
    x = np.geomspace(imin, imax, 256)
    ax.plot(x, np.minimum(peak, x * bandwidth) / scale, color="k",
            label=roof_label or f"memory {bandwidth / 1e9:,.1f} GB/s, peak "
            f"{peak / scale:,.{0 if unit == 'GFLOP/s' else 1}f} {unit}")
    if cache_bandwidth is not None:
        ax.plot(x, np.minimum(peak, x * cache_bandwidth) / scale, "--", color="0.45",
                label=cache_label or f"cache {cache_bandwidth / 1e9:,.1f} GB/s")
    ridge = peak / bandwidth
    ax.scatter([ridge], [peak / scale], color="k", s=14, zorder=3)
    for intensity, rate, label, style in points:
        if not (np.isfinite(intensity) and intensity > 0 and rate > 0):
            continue
        ax.scatter([intensity], [rate / scale], zorder=4, **style)
        if label:
            ax.annotate(label, (intensity, rate / scale), xytext=(5, -4),
                        textcoords="offset points", fontsize=9)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(imin, imax)
    ax.set_xlabel("arithmetic intensity (FLOPs/byte)")
    ax.set_ylabel(f"performance ({unit})")
    ax.grid(True, which="major", alpha=0.3)
    if label_ridge:
        bottom, top = ax.get_ylim()
        ax.set_ylim(bottom, max(top, 4 * peak / scale))  # room above the roof for the label
        ax.annotate(ridge_text(ridge), (ridge, peak / scale), xytext=(-6, 9),
                    textcoords="offset points", ha="right", va="bottom", fontsize=9,
                    arrowprops=dict(arrowstyle="-", color="k", lw=0.8, shrinkA=0, shrinkB=3),
                    zorder=6)
    if title:
        ax.set_title(title, fontsize=10)
    return ax
