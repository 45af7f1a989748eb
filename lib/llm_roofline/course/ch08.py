"""Chapter 8, your machine: its answer checks (``notebooks/08_your_machine``): ``check("machine-2", 12.3)``.

One answer depends on nothing but the library (``machine-1``, a count of bytes); the
others depend on the reader's own machine, so they are computed from the measurements the
notebook made: call :func:`use` with the dict ``measure.measure_roofline()`` returned before
checking them. Importing this module registers the exercises with
:func:`llm_roofline.exercises.register`; check them with :func:`llm_roofline.exercises.check`.
"""

from __future__ import annotations

import math

from .registry import register, register_hint

__all__ = ["LINEAR", "REFERENCE", "WHERE", "gaps", "h100_figure", "load_reference", "measured_here",
           "op_table", "phase_summary", "record_reference", "roofline_figure", "roofline_rows",
           "run_chapter", "use", "warn_if_disturbed"]

#: the linear layers of a pass: the products with a weight matrix
LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")

#: whose numbers a measured output shows: the website's are the build machine's
WHERE = ("measured on the machine that ran this page (on the website: the machine that built "
         "it; in your own run: yours)")


def measured_here(what: str) -> None:
    """Print the label every machine-dependent output of chapter 8 carries: whose numbers."""
    print(f"{what}, {WHERE}:")

_STATE: dict = {"host": None}


def warn_if_disturbed(*runs) -> str | None:
    """Print, beside the numbers, whether the run that measured them was disturbed: ``runs``
    are ``measure_roofline()``'s dict, ``machine.profile``'s rows or ``machine.pass_times``'s
    dict. Returns the warning (None for a quiet run)."""
    import os

    from ..measure import DISTURBED_SPREAD, disturbance

    spreads, waited, load = {}, {}, None
    for run in runs:
        if isinstance(run, dict) and "spread" in run and isinstance(run["spread"], dict):
            spreads |= run["spread"]
            waited |= run.get("waited", {})
            load = max((x for x in (load, *run.get("load", {}).values()) if x is not None),
                       default=None)
        elif isinstance(run, dict):  # pass_times
            spreads |= {f"whole {k}": v["spread"] for k, v in run.items()}
            waited |= {f"whole {k}": v.get("waited", 0.0) for k, v in run.items()}
        else:  # profile rows: only the operations that carry time are judged
            total = sum(r["seconds"] for r in run) or 1.0
            big = [r for r in run if r["seconds"] > 0.02 * total]
            spreads |= {f"{r['phase']} {r['op']}": r["spread"] for r in big}
            waited |= {f"{r['phase']} {r['op']}": r.get("waited", 0.0) for r in big}
    message = disturbance(spreads, DISTURBED_SPREAD, load, os.cpu_count(), waited)
    if message:
        print("WARNING. " + message)
    else:
        print(f"Quiet run: every timing's median sample was within {DISTURBED_SPREAD:.0%} of "
              "its best.")
    return message


def roofline_rows(host: dict) -> list[dict]:
    """The roofline's figures as table rows, each with the spread of its samples."""
    spread = host.get("spread", {})
    dram = f"read {host['read_mb']} MB"
    fastest = max(host["read_sweep"], key=lambda k: host["read_sweep"][k])
    return [
        {"figure": "read bandwidth (GEMV)", "value": host["read_GBps"], "unit": "GB/s",
         "measured on": f"{host['read_mb']:,} MB", "spread": f"{spread.get(dram, 0):.0%}"},
        {"figure": "fastest cache read", "value": host["cache_GBps"], "unit": "GB/s",
         "measured on": f"{fastest} MB", "spread": f"{spread.get(f'read {fastest} MB', 0):.0%}"},
        {"figure": "copy bandwidth", "value": host["copy_GBps"], "unit": "GB/s",
         "measured on": f"2 x {host['copy_mb']:,} MB", "spread": f"{spread.get('copy', 0):.0%}"},
        {"figure": "matmul peak (fp32)", "value": host["matmul_GFLOPS"], "unit": "GFLOP/s",
         "measured on": f"n = {host['matmul_n']}", "spread": f"{spread.get('matmul', 0):.0%}"},
    ]


def phase_summary(pred: list[dict], passes: dict) -> dict:
    """Per phase: predicted and measured seconds of the linear layers, of all operations
    summed, and of the whole pass timed as one; the errors (predicted / measured - 1)."""
    out = {}
    for phase in ("prefill", "decode"):
        rows = [r for r in pred if r["phase"] == phase]
        lin = [r for r in rows if r["op"] in LINEAR]
        p_lin, m_lin = sum(r["predicted_s"] for r in lin), sum(r["seconds"] for r in lin)
        p_all, m_ops = sum(r["predicted_s"] for r in rows), sum(r["seconds"] for r in rows)
        whole = passes[phase]["seconds"]
        flops = sum(r["flops"] for r in rows)
        out[phase] = {"linear_pred_s": p_lin, "linear_s": m_lin, "linear_error": p_lin / m_lin - 1,
                      "pred_s": p_all, "ops_s": m_ops, "whole_s": whole,
                      "whole_error": p_all / whole - 1, "ops_vs_whole": m_ops / whole - 1,
                      "flops": flops, "linear_flops": sum(r["flops"] for r in lin),
                      "linear_bytes": sum(r["bytes_read"] + r["bytes_written"] for r in lin)}
    return out


def op_table(pred: list[dict], passes: dict) -> list[dict]:
    """Table 8.2's rows: per operation, predicted and measured ms and the error in each phase;
    then the sum of the operations, the whole pass timed as one, and the linear layers."""
    by_op: dict[str, dict] = {}
    for r in pred:
        row = by_op.setdefault(r["op"], {"operation": r["op"]})
        error = "(a view)" if r["op"] == "kv_read" else f"{r['error']:+.0%}"
        row |= {f"{r['phase']} pred. (ms)": 1e3 * r["predicted_s"],
                f"{r['phase']} meas. (ms)": 1e3 * r["seconds"], f"{r['phase']} error": error}
    summary = phase_summary(pred, passes)
    extra = {"linear layers": {}, "sum of operations": {}, "whole pass, timed as one": {}}
    for phase, t in summary.items():
        extra["linear layers"] |= {f"{phase} pred. (ms)": 1e3 * t["linear_pred_s"],
                                   f"{phase} meas. (ms)": 1e3 * t["linear_s"],
                                   f"{phase} error": f"{t['linear_error']:+.0%}"}
        extra["sum of operations"] |= {f"{phase} pred. (ms)": 1e3 * t["pred_s"],
                                       f"{phase} meas. (ms)": 1e3 * t["ops_s"],
                                       f"{phase} error": f"{t['pred_s'] / t['ops_s'] - 1:+.0%}"}
        extra["whole pass, timed as one"] |= {f"{phase} pred. (ms)": 1e3 * t["pred_s"],
                                              f"{phase} meas. (ms)": 1e3 * t["whole_s"],
                                              f"{phase} error": f"{t['whole_error']:+.0%}"}
    return list(by_op.values()) + [{"operation": k} | v for k, v in extra.items()]


def gaps(pred: list[dict], host: dict, micro_rows: list[dict], passes: dict) -> list[dict]:
    """Where the prediction misses, each effect with the measurement that shows it."""
    from ..machine import per_call

    elementwise = [r for r in pred if r["op"] not in LINEAR and r["op"] not in
                   ("attn_scores", "attn_values", "kv_read") and r["phase"] == "prefill"]
    moved = sum(r["bytes_read"] + r["bytes_written"] for r in elementwise)
    spent = sum(r["seconds"] for r in elementwise)
    call = per_call(micro_rows)
    small = sorted(call.values())[len(call) // 2]
    s = phase_summary(pred, passes)
    lin = [r for r in pred if r["phase"] == "prefill" and r["op"] in LINEAR]
    rate = sum(r["flops"] for r in lin) / sum(r["seconds"] for r in lin)
    dec = [r for r in pred if r["phase"] == "decode" and r["op"] in LINEAR]
    dec_rate = sum(r["bytes_read"] + r["bytes_written"] for r in dec) / sum(r["seconds"] for r in dec)
    return [
        {"effect": "fixed cost of a call", "measured": f"{1e6 * small:,.1f} µs",
         "how": "median time per call of an operation of the micro model (no bytes to speak of)"},
        {"effect": "element-wise code on one core",
         "measured": f"{moved / spent / 1e9:,.1f} GB/s",
         "how": f"the prefill's norms, RoPE, softmax, SwiGLU, residuals (DRAM read: "
                f"{host['read_GBps']:,.1f} GB/s)"},
        {"effect": "linear layers of the prefill", "measured": f"{rate / 1e9:,.1f} GFLOP/s",
         "how": f"products of {pred[0]['prompt_len']} rows (the n = {host['matmul_n']} "
                f"peak: {host['matmul_GFLOPS']:,.1f} GFLOP/s)"},
        {"effect": "linear layers of a decode step", "measured": f"{dec_rate / 1e9:,.1f} GB/s",
         "how": f"GEMVs of weights past the cache (the DRAM read: {host['read_GBps']:,.1f} GB/s)"},
        {"effect": "what runs between operations",
         "measured": f"{s['prefill']['ops_vs_whole']:+.0%} / {s['decode']['ops_vs_whole']:+.0%}",
         "how": "the operations' times summed, against the whole pass timed as one: prefill / "
                "decode (negative: the whole pass took longer)"},
    ]


#: the reference run shipped with the book, recorded on a named quiet machine
REFERENCE = "ch08_reference.json"


def run_chapter(threads: int = 1, prompt: int = 128, steps: int = 8, runs: int = 5) -> dict:
    """Everything chapter 8 measures, as plain data: the host, tiny L's operations and passes,
    the micro model's calls, the machine, the load. What :func:`record_reference` saves."""
    import os
    import platform

    from .. import machine, measure
    from ..tiny import TinyLlama

    host = measure.measure_roofline(threads=threads, progress=False)
    configs = machine.chapter_models()
    model = TinyLlama.random(configs["L"], seed=0)
    rows = machine.profile(model, 1, prompt, steps, runs=runs, threads=threads)
    passes = machine.pass_times(model, 1, prompt, steps, threads=threads)
    micro = machine.profile(TinyLlama.random(configs["micro"], seed=0), 1, prompt, steps,
                            runs=runs, threads=threads)
    return {"host": host, "rows": rows, "passes": passes, "micro_rows": micro,
            "settings": {"threads": threads, "prompt": prompt, "steps": steps, "runs": runs},
            "machine": {"cpu": measure.cpu_name(), "logical_cpus": os.cpu_count(),
                        "memory_bytes": measure.total_memory_bytes(),
                        "last_level_cache_bytes": measure.last_level_cache_bytes(),
                        "system": platform.platform(), "numpy_blas": measure.blas_info()}}


def record_reference(path, name: str, **options) -> dict:
    """Run the chapter's measurements and save them to ``path`` (JSON) under the machine's
    ``name``, with the load average before and after."""
    import datetime
    import json

    from ..measure import load_average

    before = load_average()
    run = run_chapter(**options)
    run["machine"] |= {"name": name, "date": datetime.date.today().isoformat(),
                       "load_average": {"before": before, "after": load_average()}}
    with open(path, "w") as f:
        json.dump(run, f, indent=1, allow_nan=False, default=float)
        f.write("\n")
    return run


def load_reference() -> dict:
    """The reference run shipped with the library (``data/ch08_reference.json``)."""
    import json
    from importlib.resources import files

    return json.loads(files("llm_roofline.data").joinpath(REFERENCE).read_text())


def use(host: dict) -> None:
    """Check the machine-dependent answers against ``host`` (``measure_roofline()``'s dict)."""
    from ..machine import host_accelerator

    host_accelerator(host)  # raises ValueError if host is not such a dict
    _STATE["host"] = host


def _moved(row: dict) -> int:
    """Bytes an operation's row moves: read plus written."""
    return row["bytes_read"] + row["bytes_written"]


def _largest_linear(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    """Per phase, the linear layers that take its time: the one that took the longest and
    those within 10 % of its intensity (the products of the same shape), in ``LINEAR`` order."""
    out = []
    for phase in dict.fromkeys(r["phase"] for r in rows):
        lin = [r for r in rows if r["phase"] == phase and r["op"] in LINEAR and r["flops"]]
        if not lin:
            continue
        intensity = {r["op"]: r["flops"] / _moved(r) for r in lin}
        top = max(lin, key=lambda r: r["seconds"])
        group = [r for r in lin if abs(intensity[r["op"]] / intensity[top["op"]] - 1) <= 0.10]
        out.append((phase, sorted(group, key=lambda r: LINEAR.index(r["op"]))))
    return out


def _names(phase: str, group: list[dict], rows: list[dict]) -> str:
    """A label for a group of linear layers: ``"prefill: q, o, gate, up, down_proj"``, or
    ``"decode: all linear layers"`` when the group is every one of them."""
    every = {r["op"] for r in rows if r["phase"] == phase and r["op"] in LINEAR and r["flops"]}
    ops = [r["op"] for r in group]
    if set(ops) == every and len(ops) > 3:
        return f"{phase}: all linear layers"
    if all(op.endswith("_proj") for op in ops):
        return f"{phase}: " + ", ".join(op.removesuffix("_proj") for op in ops) + "_proj"
    return f"{phase}: " + ", ".join(ops)


def roofline_figure(rows, host: dict, chip):
    """Figure 8.1: the tiny ``L`` model measured on this machine, on its measured roofline.
    Returns the figure.

    ``rows`` are ``machine.profile``'s rows, ``host`` ``measure.measure_roofline()``'s dict,
    ``chip`` its ``machine.host_accelerator``. Each phase's star carries its name in a boxed
    label set off from the operations' points, with a leader line to the star. The linear
    layers that take each phase's time are named; so is any operation above the cache roof.
    The ridge carries its intensity. The band between the DRAM roof and the cache roof is
    shaded: a point in it read its bytes faster than main memory gives them, from a cache.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    from ..machine import plot_roofline, totals

    colour = {"prefill": "C0", "decode": "C3"}
    points, seen = [], set()
    for r in rows:
        if r["flops"]:
            moved = r["bytes_read"] + r["bytes_written"]
            first = r["phase"] not in seen
            seen.add(r["phase"])
            points.append((r["flops"] / moved, r["flops"] / r["seconds"], None, dict(
                color=colour[r["phase"]], s=16, alpha=0.75,
                marker="o" if r["phase"] == "prefill" else "^",
                label=f"{r['phase']} operations" if first else None)))
    stars = []
    for phase, t in totals(rows).items():
        stars.append((phase, t["intensity"], t["flops"] / t["seconds"]))
        points.append((t["intensity"], t["flops"] / t["seconds"], None,
                       dict(color=colour[phase], marker="*", s=170, edgecolor="k")))
    peak, dram, cache = chip.peak("fp32"), chip.bandwidth, host["cache_GBps"] * 1e9
    fastest = max(host["read_sweep"], key=lambda k: host["read_sweep"][k])
    fig, ax = plt.subplots(figsize=(7.0, 5.2))
    plot_roofline(ax, peak, dram, points, cache_bandwidth=cache, label_ridge=True,
                  roof_label=f"DRAM roof: read {dram / 1e9:,.1f} GB/s, peak "
                  f"{peak / 1e9:,.1f} GFLOP/s",
                  cache_label=f"cache roof: read {cache / 1e9:,.1f} GB/s ({fastest} MB)",
                  title="The machine that ran this page, fp32: the tiny model measured "
                  "(stars: phases)")
    x = np.geomspace(*ax.get_xlim(), 256)
    ax.fill_between(x, np.minimum(peak, x * dram) / 1e9, np.minimum(peak, x * cache) / 1e9,
                    color="0.8", alpha=0.45, lw=0, zorder=1,
                    label="above the DRAM roof: bytes from a cache")
    bottom, _ = ax.get_ylim()
    ax.set_ylim(bottom, 6 * peak / 1e9)  # head room: the star labels and the ridge's
    box = dict(boxstyle="round,pad=0.2", fc="white", alpha=0.8, lw=0.8)
    for phase, intensity, rate in stars:  # labels above the stars, clear of the dots
        ax.annotate(f"{phase} (phase)", (intensity, rate / 1e9),
                    xytext=(0, 26) if phase == "prefill" else (-22, 30),
                    textcoords="offset points", ha="center", fontsize=9,
                    bbox=box | {"ec": colour[phase]},
                    arrowprops=dict(arrowstyle="-", color=colour[phase], lw=0.8), zorder=7)
    for phase, group in _largest_linear(rows):  # below the roof, on its empty right side
        at = (math.exp(np.mean([math.log(r["flops"] / _moved(r)) for r in group])),
              math.exp(np.mean([math.log(r["flops"] / r["seconds"] / 1e9) for r in group])))
        right = at[0] >= peak / dram  # past the ridge: the text ends left of the axes' edge
        ax.annotate(_names(phase, group, rows), at, xytext=(125, -70) if right else (30, -34),
                    textcoords="offset points", ha="right" if right else "left", va="top",
                    fontsize=9, color=colour[phase],
                    bbox=box | {"ec": colour[phase]},
                    arrowprops=dict(arrowstyle="-", color=colour[phase], lw=0.8, shrinkB=4),
                    zorder=7)

    def over_cache(r):  # how far a row's rate is above the cache roof at its intensity
        return r["flops"] / r["seconds"] / min(peak, r["flops"] / _moved(r) * cache)

    above = sorted((r for r in rows if r["flops"] and over_cache(r) > 1.1), key=over_cache)
    for r in above[-2:]:  # at most two named: the farthest above
        at = (r["flops"] / _moved(r), r["flops"] / r["seconds"] / 1e9)
        ax.annotate(f"{r['op']} ({r['phase']})", at, xytext=(-4, 88), textcoords="offset points",
                    ha="left", va="bottom",
                    fontsize=9, color=colour[r["phase"]], bbox=box | {"ec": colour[r["phase"]]},
                    arrowprops=dict(arrowstyle="-", color=colour[r["phase"]], lw=0.8, shrinkB=3),
                    zorder=7)
    ax.legend(fontsize=9, loc="lower right")
    fig.tight_layout()
    return fig


def h100_figure(configs: dict, prompt: int):
    """Figure 8.2: the tiny ``L`` model's and Llama 3 8B's phases (a 2048-token prompt) on an
    H100's datasheet roofline, predicted, not measured, with every number in BF16 (weights,
    KV cache and activations at 2 bytes, where Figure 8.1 measured fp32's 4: each intensity
    is about twice the fp32 one). ``configs`` are ``machine.chapter_models()``. Each point is
    named with its intensity in a boxed label; Llama 3 8B's hollow squares are larger than the
    tiny model's dots, which are drawn on top, and the two decode steps (at nearly the same
    intensity) are labelled from opposite sides. Performance is in TFLOP/s. Returns the figure.
    """
    import matplotlib.pyplot as plt

    from ..counts import op_costs, total
    from ..hardware import get_accelerator
    from ..machine import plot_roofline
    from ..models import get_model

    colour = {"prefill": "C0", "decode": "C3"}
    h100 = get_accelerator("H100")
    peak = h100.peak("bf16")
    h100_points, labels = [], []
    # where each label sits from its point (points; a two-line label): the two decode steps
    # are at nearly the same spot, so their labels lie on opposite sides of the slope
    offsets = {("Llama-3-8B", "prefill"): (95, -40, "right"),
               ("Llama-3-8B", "decode"): (6, 55, "right"),
               ("tiny model", "prefill"): (18, -60, "left"),
               ("tiny model", "decode"): (30, -30, "left")}
    for label, cfg, length, mark, style in [
        ("Llama-3-8B", get_model("llama-3-8b"), 2048, "s", dict(s=150, facecolors="none",
                                                                  linewidths=1.6)),
        ("tiny model", configs["L"], prompt, "o", dict(s=28)),  # drawn last: on top
    ]:
        for phase, costs in [("prefill", op_costs(cfg, 1, length, 0, weight_dtype="bf16")),
                             ("decode", op_costs(cfg, 1, 1, length, weight_dtype="bf16"))]:
            intensity = total(costs).intensity
            rate = min(peak, intensity * h100.bandwidth)
            colours = {"edgecolors": colour[phase]} if mark == "s" else {"color": colour[phase]}
            h100_points.append((intensity, rate, None, dict(marker=mark, **colours, **style)))
            labels.append((f"{label} {phase}\n{intensity:,.{2 if intensity < 10 else 0}f} "
                           "FLOPs/byte", intensity, rate, colour[phase], offsets[label, phase]))
    fig, ax = plt.subplots(figsize=(7.0, 4.9))
    plot_roofline(ax, peak, h100.bandwidth, h100_points, imax=8192, unit="TFLOP/s",
                  label_ridge=True,
                  roof_label=f"BF16 roof: {h100.bandwidth / 1e9:,.0f} GB/s, "
                  f"{peak / 1e12:,.1f} TFLOP/s",
                  title="H100 SXM in BF16 (2 bytes a number): predicted from the datasheet")
    box = dict(boxstyle="round,pad=0.2", fc="white", alpha=0.85, lw=0.8)
    for text, intensity, rate, c, (dx, dy, ha) in labels:
        ax.annotate(text, (intensity, rate / 1e12), xytext=(dx, dy), textcoords="offset points",
                    ha=ha, va="bottom" if dy > 0 else "top", multialignment="left", fontsize=9,
                    color=c, bbox=box | {"ec": c},
                    arrowprops=dict(arrowstyle="-", color=c, lw=0.8, shrinkB=5), zorder=7)
    handles = [plt.Line2D([], [], color="k", label=ax.get_lines()[0].get_label()),
               plt.Line2D([], [], ls="", marker="s", ms=9, mfc="none", mec="0.3", mew=1.6,
                          label="Llama-3-8B (2048-token prompt)"),
               plt.Line2D([], [], ls="", marker="o", ms=6, color="0.3",
                          label=f"tiny model ({prompt}-token prompt)")]
    ax.legend(handles=handles, fontsize=9, loc="lower right")
    fig.tight_layout()
    return fig


def _chip():
    from ..machine import host_accelerator

    if _STATE["host"] is None:
        raise ValueError(
            "this answer depends on your machine: measure it first and call "
            "llm_roofline.course.ch08.use(host)"
        )
    return host_accelerator(_STATE["host"])


def _l_decode(batch: int = 1, cached: int = 128):
    """One decode step of tiny ``L`` with ``cached`` tokens in the cache (128: the first step
    after the chapter's 128-token prompt)."""
    from ..counts import op_costs
    from ..machine import chapter_models

    costs = op_costs(chapter_models()["L"], batch, 1, cached, weight_dtype="fp32")
    return costs


def _machine_1() -> float:
    """Bytes a 1,024-wide float32 query projection moves at batch 4 (a machine-free count)."""
    from ..counts import op_costs
    from ..models import ModelConfig

    width = ModelConfig("gemv-1024", vocab_size=1024, hidden_size=1024, intermediate_size=2816,
                        n_layers=1, n_heads=16, n_kv_heads=16, head_dim=64)
    return op_costs(width, 4, 1, 63, weight_dtype="fp32")["q_proj"].bytes


def _machine_2() -> float:
    chip = _chip()
    return chip.ridge(next(iter(chip.peaks)))


def _machine_3() -> float:
    return float(math.ceil(2 * _machine_2()))


def _machine_4() -> float:
    from ..calculator import estimate

    e = estimate("llama-3-8b", _chip(), 1, 512, 128, weight_dtype="fp32", kv_dtype="fp32",
                 act_dtype="fp32")
    return 1e3 * e.tpot_s


def _machine_5() -> float:
    from ..counts import total

    return 1e3 * total(_l_decode()).bytes / _chip().bandwidth


register(
    "machine-1", _machine_1, unit="bytes", rtol=1e-9,
    hint="4 bytes per float32 number: the weight matrix once, plus the 4 activation rows read "
    "and the 4 result rows written.",
)


register(
    "machine-2", _machine_2, unit="FLOPs/byte",
    hint="the ridge is the measured matmul peak over the measured read bandwidth; mind "
    "GFLOP/s against GB/s.",
)


register(
    "machine-3", _machine_3, unit="sequences", rtol=0.0,
    hint="in float32 a decode step's linear layers do 2 FLOPs per 4-byte weight per sequence: "
    "I = B / 2; find the first whole B at or past your ridge.",
)


register(
    "machine-4", _machine_4, unit="ms", rtol=0.02,
    hint="estimate(..., weight_dtype='fp32', kv_dtype='fp32', act_dtype='fp32') with your "
    "machine as the accelerator; tpot_s is in seconds.",
)


register(
    "machine-5", _machine_5, unit="ms", rtol=0.05,
    hint="a memory-bound step takes bytes / bandwidth; sum the bytes of every operation of one "
    "step (counts.op_costs in fp32).",
)


register_hint(
    "machine-server",
    "start from the TPOT limit: a memory-bound decode step reads every weight once, so the "
    "bandwidth this page measured times 100 ms is the most bytes a step may read; list which "
    "models' weights at fp32 fit under that, before you look at memory or the prompt.",
)


def reference_rows(ref: dict, host: dict, summary: dict) -> list[dict]:
    """The reference run beside this one: the roofline, and each phase's errors."""
    from ..machine import predict

    ref_summary = phase_summary(predict(ref["rows"], ref["host"]), ref["passes"])
    rows = []
    for label, key, unit in (("read bandwidth", "read_GBps", "GB/s"),
                             ("copy bandwidth", "copy_GBps", "GB/s"),
                             ("matmul peak", "matmul_GFLOPS", "GFLOP/s")):
        rows.append({"": f"{label} ({unit})", "reference": f"{ref['host'][key]:,.1f}",
                     "this run": f"{host[key]:,.1f}"})
    for phase in ("prefill", "decode"):
        for what, key in (("linear layers", "linear_error"), ("whole pass", "whole_error")):
            rows.append({"": f"{phase}, {what}: error", "reference": f"{ref_summary[phase][key]:+.0%}",
                         "this run": f"{summary[phase][key]:+.0%}"})
    load = ref["machine"].get("load_average", {})
    rows.append({"": "load average (1 min)", "reference": f"{max(load.values()):.1f}" if load else "?",
                 "this run": f"{max(v for v in host['load'].values() if v is not None):.1f}"})
    return rows


#: how close chapter 8 expects the prediction to come on a quiet machine
TOLERANCE = {"linear_error": 0.30, "whole_error": 0.40}


def phase_lines(rows: list[dict], host: dict) -> None:
    """Print each phase's intensity against the ridge and how close it came to its roof."""
    from ..machine import totals

    ridge = host["matmul_GFLOPS"] / host["read_GBps"]
    for phase, t in totals(rows).items():
        side = "above" if t["intensity"] >= ridge else "below"
        if phase == "prefill":
            rate = t["flops"] / t["seconds"] / 1e9
            roof = f"{rate:,.1f} GFLOP/s, {rate / host['matmul_GFLOPS']:.0%} of the measured peak"
        else:
            rate = t["bytes"] / t["seconds"] / 1e9
            roof = f"{rate:,.1f} GB/s, {rate / host['read_GBps']:.0%} of the DRAM read bandwidth"
        print(f"{phase}: {t['intensity']:.2f} FLOPs/byte, {side} the ridge of {ridge:.1f}; "
              f"ran at {roof}")


def accuracy_lines(summary: dict) -> None:
    """Print, per phase, how far the prediction of the linear layers and of the whole pass
    was from the measurement, against the chapter's tolerances."""
    for phase, s in summary.items():
        for what, key, pred, meas in (("linear layers", "linear_error", "linear_pred_s",
                                       "linear_s"),
                                      ("whole pass", "whole_error", "pred_s", "whole_s")):
            inside = abs(s[key]) <= TOLERANCE[key]
            print(f"{phase}, {what}: predicted {1e3 * s[pred]:,.1f} ms, measured "
                  f"{1e3 * s[meas]:,.1f} ms, error {s[key]:+.0%} "
                  f"({'within' if inside else 'outside'} {TOLERANCE[key]:.0%})")
