"""The calculator for the static website: the library's formulas and data, exported to JavaScript.

The book's page ``book/calculator.md`` runs the calculator in the reader's browser, with no
kernel and no server. Its numbers come from here, at build time:

Formulas
    For every built-in model, each operation's ``(FLOPs, weight elements, KV-cache elements)``
    of one forward pass: the SymPy expressions of :func:`formulas.expressions_for`, split by
    element kind exactly as :func:`formulas.op_elements` splits them, with the model's constants
    substituted (:func:`formulas.model_values`) and ``B``, ``n_new``, ``n_past`` left symbolic,
    printed by SymPy's own JavaScript printer (``sympy.jscode``). Latent attention (MLA) has a
    second set for decode (the absorbed form). The KV cache a sequence holds at a context is the
    cache a decode step reads there (``kv_read`` at ``B = n_new = 1``), printed the same way and
    checked here against ``ModelConfig.kv_cache_elements``. ``breaks`` lists the ``n_past`` at
    which a decode step's costs stop being affine (a sliding window fills): between breaks every
    kernel's FLOPs and bytes are affine, so the browser averages TPOT exactly, segment by segment.
Data
    Models (per-op parameters, which ops are the 16-bit head, the kernel each op belongs to and
    that kernel's math, ``Setup.math_dtype`` as ``"body"``, ``"head"``, ``"attention"`` or null
    for element-wise work, and per tensor-parallel degree each op's share, the KV share,
    activation elements per token, all-reduce bytes), accelerators (memory, bandwidth, the peak
    or the library's error for each compute precision, for each weight precision the body's
    default math and the LM head's math with their peaks, the attention's math and peak, per GPU
    count the nodes, the collectives' time ``Accelerator.allreduce_s``/``allgather_s`` as slope
    and intercept in the message bytes and their least cost ``allreduce_floor``/
    ``allgather_floor`` as seconds per byte on the link and on the network and a latency, or the
    library's error), element sizes (``Setup.sizes``), ``estimate``'s defaults, and the messages
    of the checks, all computed by calling the library. For data-parallel attention with
    expert parallelism (``parallel.dp_ep_estimate``, ``Layout(dp=..., ep=...)``, ``dp`` in
    :data:`DP_COUNTS`): per model its routed experts and the all-to-all's bytes a token copy,
    per chip and ``ep`` the all-to-all's links and latency, and the refusals of each.

What the browser writes by hand (``book/_calculator/calculator.js``, documented there): summing
the per-op rooflines with these shares into kernels, each at its own peak, the prefill's passes
of at most the default ``prefill_chunk`` tokens (``Setup.prefill_passes``, summed as
``calculator._prefill`` sums them; the prefill's functions take ``n_past`` for the pieces of a
long prompt), memory as weights + KV + activations of the largest pass
(``deployment.prefill_pass_tokens``) + reserve, the exact mean of TPOT over the decode steps, and
the floors (the busiest resource, ``calculator._busy``, ``_decode_floor``). ``tests/test_calculator_page.py``
compares the page with ``estimate`` for hundreds of random settings; ``tests/test_webcalc.py``
compares its data-parallel path with ``dp_ep_estimate`` (``estimateDp`` in the script).

``setup(app)`` makes this module a Sphinx extension (``_config.yml``: ``extra_extensions``): the
build writes ``calculator-data.js`` and serves it with the hand-written files on that one page.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import json
import shutil
from pathlib import Path

import sympy as sp

from .. import deployment, formulas, parallel
from ..calculator import estimate
from ..counts import model_values
from ..deployment import ATTENTION_KERNEL, HEAD_OPS, kv_share
from ..dtypes import list_dtypes
from ..hardware import get_accelerator, list_accelerators
from ..models import get_model, list_models
from ..vram import activation_elements_per_token

__all__ = [
    "ASSETS", "DATA_FILE", "DP_COUNTS", "PAGES", "data", "gpu_counts", "javascript", "model_passes", "setup",
    "write",
]

PAGES = ("book/calculator", "notebooks/07_calculator")
"""The pages (Sphinx docnames) that load the calculator's files; each holds one
``<div id="llm-calc" class="llm-calc"></div>`` where the calculator appears."""

DATA_FILE = "calculator-data.js"

ASSETS = ("calculator.css", "calculator.js")  # in book/_calculator, beside the page

_REFERENCE_CHIP = "h100-sxm"  # has an interconnect and a network: only the model's limits apply

_SENTINEL = -777  # a bad value whose message is turned into a template, "{}" in its place


DP_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""The data-parallel degrees offered (``Layout(dp=..., ep=...)``); 1 is tensor parallelism."""


def gpu_counts() -> list[int]:
    """The GPU counts offered: every divisor of some built-in model's query heads."""
    heads = {get_model(m).n_heads for m in list_models()}
    return sorted({n for h in heads for n in range(1, h + 1) if h % n == 0})


# --- formulas -----------------------------------------------------------------------------
_WORKLOAD = (formulas.B, formulas.n_new, formulas.n_past)


def _op_parts(cfg, absorbed: bool) -> dict[str, list[sp.Expr]]:
    """Per op ``[flops, weight elements, kv elements]``, valued for ``cfg`` (as ``op_elements``)."""
    values = model_values(cfg)
    out = {}
    for op, (flops, read, written) in formulas.expressions_for(cfg, absorbed=absorbed).items():
        moved = sp.expand(read + written)  # linear in b_w, b_kv, b_act: split by coefficient
        parts = [flops, moved.coeff(formulas.b_w), moved.coeff(formulas.b_kv)]
        parts = [sp.sympify(p).xreplace(values) for p in parts]
        left = set().union(*(p.free_symbols for p in parts)) - set(_WORKLOAD)
        assert not left, f"{cfg.name} {op}: symbols left after substitution: {left}"
        out[op] = parts
    return out


def _js_function(args: str, body: list[str]) -> str:
    return f"function ({args}) {{ return [{', '.join(body)}]; }}"


def _pass_function(parts: dict[str, list[sp.Expr]]) -> str:
    rows = ["[" + ", ".join(sp.jscode(p) for p in v) + "]" for v in parts.values()]
    return _js_function("B, n_new, n_past", rows)


def _kv_cache_expr(cfg) -> sp.Expr:
    """KV-cache elements one sequence holds at ``context``: what a decode step reads there."""
    context = sp.Symbol("context", positive=True, integer=True)
    kv = _op_parts(cfg, absorbed=True)["kv_read"][2]
    expr = kv.subs({formulas.B: 1, formulas.n_new: 1, formulas.n_past: context - 1})
    for c in (1, 2, cfg.sliding_window or 7, (cfg.sliding_window or 7) + 1, cfg.max_context):
        assert expr.subs(context, c) == cfg.kv_cache_elements(c), (cfg.name, c)
    return expr


def _breaks(cfg) -> list[int]:
    """Each ``n_past`` after which a decode step's costs may change slope (a superset).

    The kinks of a piecewise-affine expression lie where two arguments of one of its Min/Max
    are equal, nested Min/Max taken as each of their arguments in turn.
    """
    roots = set()
    for parts in _op_parts(cfg, absorbed=True).values():
        for expr in parts:
            for atom in expr.subs(formulas.n_new, 1).atoms(sp.Min, sp.Max):
                for a, b in itertools.combinations(atom.args, 2):
                    for x, y in itertools.product(_branches(a), _branches(b)):
                        roots |= set(sp.solve(sp.Eq(x, y), formulas.n_past))
    return sorted({int(sp.floor(r)) for r in roots if r.is_real and r >= 0})


def _branches(expr: sp.Expr) -> list[sp.Expr]:
    """``expr`` with each Min/Max in it replaced by each of its arguments, in every combination."""
    atoms = sorted(expr.atoms(sp.Min, sp.Max), key=sp.count_ops)
    if not atoms:
        return [expr]
    atom = atoms[-1]
    return [b for arg in atom.args for b in _branches(expr.xreplace({atom: arg}))]


def model_passes(name: str) -> dict[str, str]:
    """The JavaScript functions of one model: ``prefill``, ``decode`` (if it differs), ``kvCache``."""
    cfg = get_model(name)
    out = {"prefill": _pass_function(_op_parts(cfg, absorbed=False))}
    decode = _pass_function(_op_parts(cfg, absorbed=True))
    if decode != out["prefill"]:
        out["decode"] = decode
    out["kvCache"] = f"function (context) {{ return {sp.jscode(_kv_cache_expr(cfg))}; }}"
    return out


# --- data -----------------------------------------------------------------------------------
def _message(call) -> str:
    try:
        call()
    except ValueError as err:
        return str(err)
    raise AssertionError("expected a ValueError")


def _template(call, bad) -> str:
    """The library's message for the bad value, with ``{}`` where the value is named."""
    text = _message(call)
    assert text.count(bad) == 1, text
    return text.replace(bad, "{}")


def _model_data(name: str, counts: list[int]) -> dict:
    cfg = get_model(name)
    ops = list(formulas.ops_for(cfg))
    params = cfg.params_by_op()
    kernels = ["attention" if op in ATTENTION_KERNEL else op for op in ops]
    # Setup.math_dtype with each precision replaced by its name: which peak each kernel runs at
    named = dataclasses.replace(deployment.setup(cfg, _REFERENCE_CHIP), compute_dtype="body",
                                head_dtype="head", attention_dtype="attention")
    tp = {}
    for n in counts:
        try:
            s = deployment.setup(cfg, _REFERENCE_CHIP, n_gpus=n)
        except ValueError as err:
            tp[n] = {"error": str(err)}
            continue
        tp[n] = {
            "shares": [s.shares[op] for op in ops],
            "kvShare": kv_share(cfg, n),
            "actPerToken": activation_elements_per_token(cfg, n),
            "allreduceBytesPerToken": float(s.allreduce_bytes(1.0, 0.0)),
            "gatherBytesPerToken": float(s.allreduce_bytes(0.0, 1.0)),
        }
    over = cfg.max_context + 1
    extra = {"dp": _model_dp(cfg)}
    if cfg.is_mla:  # an fp8 latent cache stores scales and a BF16 rope part (FlashMLA)
        extra["kvSizes"] = {d: deployment.kv_bytes_per_element(cfg, d) for d in list_dtypes()}
    return extra | {
        "name": name, "maxContext": cfg.max_context, "nLayers": cfg.n_layers,
        "hidden": cfg.hidden_size, "vocab": cfg.vocab_size, "ops": ops,
        "kernels": kernels, "math": [named.math_dtype(k) for k in kernels],
        "head": [op in HEAD_OPS for op in ops],
        "params": [params.get(op, 0) for op in ops], "breaks": _breaks(cfg), "tp": tp,
        "contextError": _template(lambda: estimate(cfg, _REFERENCE_CHIP, 1, over - 1, 1),
                                  f"{over:,}"),
    }


def _model_dp(cfg) -> dict:
    """What ``parallel.dp_ep_estimate`` needs of a model beyond the pass's counts: the routed
    experts (``E``, ``k``, MoE layers, one expert's one matrix, all routed parameters), the
    all-to-all's bytes a token copy (FP8 dispatch with its scales, BF16 combine), and per
    ``ep`` the library's refusal for this model (dense, or ``ep`` not dividing ``E``)."""
    errors = {}
    for ep in DP_COUNTS[1:]:
        try:
            parallel._dp_setup(cfg, _REFERENCE_CHIP, parallel.Layout(dp=ep, ep=ep), {})
        except ValueError as err:
            errors[ep] = str(err)
    if not cfg.is_moe:
        return {"moe": False, "epErrors": errors}
    dispatch, combine = parallel._a2a_sizes(cfg, "fp8", "bf16")
    return {"moe": True, "experts": cfg.n_routed_experts, "k": cfg.n_experts_per_token,
            "moeLayers": cfg.n_moe_layers, "matrix": cfg.hidden_size * cfg.moe_intermediate_size,
            "routedParams": cfg.param_counts()["routed_experts"], "dispatch": dispatch,
            "combine": combine, "epErrors": errors}


def _chip_ep(chip) -> dict:
    """Per ``ep`` the all-to-all's links (``parallel._dp_times``) as ``[one direction of the
    scale-up link a GPU has in its node, of the network where the group spans nodes (else
    null), the latency of one all-to-all]``, or the library's refusal (``parallel._dp_setup``
    for a model every ``ep`` divides, so that only the chip's limits apply)."""
    out = {}
    for ep in DP_COUNTS[1:]:
        try:
            parallel._dp_setup("deepseek-v3", chip, parallel.Layout(dp=ep, ep=ep), {})
        except ValueError as err:
            out[ep] = str(err)
            continue
        inside = min(ep, chip.domain_size)
        across = ep > inside
        out[ep] = [chip.group_bandwidth(inside) / 2, chip.network_bandwidth / 2 if across else None,
                   chip.collective_latency_s + (chip.network_latency_s if across else 0.0)]
    return out


def _chip_data(name: str, counts: list[int], dtypes: list[str]) -> dict:
    chip = get_accelerator(name)
    compute = {}
    for d in dtypes:
        try:  # the library's own check of a compute_dtype, and its message
            compute[d] = chip.peak(deployment._compute_dtype(chip, d, d))
        except ValueError as err:
            compute[d] = str(err)
    auto, head = {}, {}
    for w in dtypes:
        s = deployment.setup("llama-2-7b", chip, weight_dtype=w)
        auto[w] = [s.compute_dtype, chip.peak(s.compute_dtype)]
        head[w] = [s.head_dtype, chip.peak(s.head_dtype)]
    attention = [s.attention_dtype, chip.peak(s.attention_dtype)]  # the activations' precision
    tp, big = {}, 2.0**40
    for n in counts:
        try:
            nodes = chip.nodes(n)
        except ValueError as err:
            tp[n] = {"error": str(err)}
            continue
        intercept = float(chip.allreduce_s(n, 0.0))
        slope = (float(chip.allreduce_s(n, big)) - intercept) / big
        g_intercept = float(chip.allgather_s(n, 0.0))
        g_slope = (float(chip.allgather_s(n, big)) - g_intercept) / big
        tp[n] = {"nodes": nodes, "allreduce": [slope, intercept],
                 "allgather": [g_slope, g_intercept],
                 "allreduceFloor": _per_byte(chip.allreduce_floor(n, big), big),
                 "allgatherFloor": _per_byte(chip.allgather_floor(n, big), big)}
    return {"name": chip.name, "memoryBytes": chip.memory_bytes, "bandwidth": chip.bandwidth,
            "compute": compute, "auto": auto, "head": head, "attention": attention, "tp": tp,
            "domain": chip.domain_size, "ep": _chip_ep(chip)}


def _per_byte(floor: tuple, message: float) -> list[float]:
    """``(interconnect_s, network_s, latency_s)`` of one collective of ``message`` bytes as
    ``[link seconds per byte, network seconds per byte, latency seconds]``: both busy times are
    proportional to the message (``Accelerator.allreduce_floor``)."""
    link, network, latency = (float(x) for x in floor)
    return [link / message, network / message, latency]


def _layout_template() -> str:
    """``Layout``'s message for an ``ep`` that is neither 1 nor ``dp``: ``{dp}``, ``{ep}`` in it."""
    text = _message(lambda: parallel.Layout(dp=777, ep=778))
    assert text.count("777") == 1 and text.count("778") == 1, text
    return text.replace("777", "{dp}").replace("778", "{ep}")


def data() -> dict:
    """Everything the page needs but the formulas, as plain JSON-able values (module docs)."""
    counts, dtypes = gpu_counts(), list(list_dtypes())
    defaults = {k: p.default for k, p in inspect.signature(estimate).parameters.items()
                if p.default is not inspect.Parameter.empty}
    sizes = {w: deployment.setup("llama-2-7b", _REFERENCE_CHIP, weight_dtype=w, kv_dtype=w).sizes
             for w in dtypes}

    def bad(field):
        args = {"batch": 1, "prompt_len": 1, "output_len": 1} | {field: _SENTINEL}
        return _template(lambda: estimate("llama-2-7b", _REFERENCE_CHIP, **args), str(_SENTINEL))

    def bad_fraction(field):
        call = lambda: deployment.setup("llama-2-7b", _REFERENCE_CHIP, **{field: _SENTINEL})  # noqa: E731
        return _template(call, str(_SENTINEL))

    return {
        "generatedBy": "llm_roofline.webcalc",
        "attentionKernel": list(ATTENTION_KERNEL),
        "gpuCounts": counts,
        "dpCounts": list(DP_COUNTS),
        "dtypes": dtypes,
        "sizes": {"weight": {w: sizes[w]["weight"] for w in dtypes},
                  "head": {w: sizes[w]["head"] for w in dtypes},
                  "kv": {w: sizes[w]["kv"] for w in dtypes},
                  "act": sizes[defaults["act_dtype"]]["act"]},
        "defaults": {k: defaults[k] for k in ("reserve_fraction", "prefill_chunk", "act_dtype",
                                               "weight_group_size", "queue_s")},
        "messages": {f: bad(f) for f in ("batch", "prompt_len", "output_len")}
        | {f: bad_fraction(f) for f in ("mbu", "mfu")}
        | {"layoutEp": _layout_template()},
        "models": {m: _model_data(m, counts) for m in list_models()},
        "accelerators": {a: _chip_data(a, counts, dtypes) for a in list_accelerators()},
    }


def javascript() -> str:
    """The text of ``calculator-data.js``: ``globalThis.LLM_CALC_DATA``, data and formulas."""
    lines = [
        "// Generated by llm_roofline.webcalc from the library's data and the SymPy expressions of",
        "// formulas.py (printed by sympy.jscode); do not edit: `make book` writes it again.",
        f"globalThis.LLM_CALC_DATA = {json.dumps(data(), separators=(',', ':'))};",
        "globalThis.LLM_CALC_DATA.passes = {",
    ]
    for m in list_models():
        fns = ", ".join(f"{k}: {v}" for k, v in model_passes(m).items())
        lines.append(f"  {json.dumps(m)}: {{{fns}}},")
    lines.append("};")
    return "\n".join(lines) + "\n"


def write(folder: str | Path) -> Path:
    """Write ``calculator-data.js`` into ``folder`` (created if needed); return its path."""
    import os

    from ..validate import shorten

    if not isinstance(folder, str | os.PathLike) or not str(os.fspath(folder)).strip():
        raise ValueError(f"folder must be a folder name, got {shorten(folder)}")
    path = Path(folder) / DATA_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and not path.is_file():
            raise ValueError(f"{shorten(str(path))} exists and is not a file")
        path.write_text(javascript(), encoding="utf-8")
    except OSError as err:
        raise ValueError(f"cannot write {shorten(str(path))}: "
                         f"{err.strerror or type(err).__name__}") from None
    return path


# --- the Sphinx extension --------------------------------------------------------------------
def _sources(app) -> list[Path]:
    return [Path(app.outdir).parent / "webcalc" / DATA_FILE,
            *(Path(app.confdir) / "book" / "_calculator" / name for name in ASSETS)]


def _on_config(app, config) -> None:
    data_js, *assets = _sources(app)
    write(data_js.parent)
    config.html_static_path = [*config.html_static_path, str(data_js.parent), str(assets[0].parent)]


def _on_builder(app) -> None:
    """Copy the files now: Sphinx copies static files only when some page is rebuilt, and the
    data or the scripts may change when no page does."""
    if getattr(app.builder, "format", "") != "html":
        return
    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    for source in _sources(app):
        shutil.copyfile(source, static / source.name)


def _on_page(app, pagename, templatename, context, doctree) -> None:
    if pagename in PAGES:
        app.add_css_file(ASSETS[0])
        for name in (DATA_FILE, ASSETS[1]):
            app.add_js_file(name, defer="defer")


def setup(app) -> dict:
    """Sphinx entry point: write the data at the start of the build, load it on :data:`PAGES`."""
    app.connect("config-inited", _on_config)
    app.connect("builder-inited", _on_builder)
    app.connect("html-page-context", _on_page)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
