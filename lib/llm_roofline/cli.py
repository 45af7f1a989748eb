"""Command line: ``llm-roofline estimate|models|gpus`` (also ``python -m llm_roofline ...``).

A thin front end: every number comes from the calculator, ``models`` and ``hardware``; this
module only parses, chooses what to show and formats it. Bad arguments print one line
(``llm_roofline: error: ...``) and exit with code 2; a result is never printed with a
non-finite number, and ``--json`` is strict JSON (no ``NaN``, no ``Infinity``), every real to
``SIGNIFICANT_FIGURES`` significant figures. Its times are named as the Python result's: the
floor ``ttft_floor_s``, ``tpot_floor_s`` (and ``throughput_floor_tok_s``, ``e2e_floor_s``),
the kernel-by-kernel time ``ttft_kernel_s``, ``tpot_kernel_s`` (and ``ttft_joining_kernel_s``,
``throughput_kernel_tok_s``, ``e2e_kernel_s``) and, with ``--realistic``, the calibrated
prediction ``ttft_predicted_s``, ``tpot_predicted_s`` (and so on).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import sys
import textwrap

import numpy as np

from . import hardware, realistic, serving, validate
from .calculator import estimate
from .dtypes import aliases
from .models import SUPPORTED_MODEL_TYPES, get_model, list_models, load_config, model_info
from .vram import gpus_needed, max_batch, max_prompt_len

__all__ = ["SIGNIFICANT_FIGURES", "commands", "help_text", "main"]

_GIB = 2**30

_EPILOG = """Two times for each phase. The floor (--json: *_floor_s): the busiest resource's \
time (math, memory, interconnect), which with --mbu 1 --mfu 1 no engine can beat however it \
overlaps its kernels. Kernel-by-kernel (--json: *_kernel_s): each kernel on its own roofline, \
one after another, nothing overlapped. --realistic adds a calibrated prediction \
(*_predicted_s).
Memory is per GPU, in GiB (2**30 bytes), the unit in which accelerator memory is sized; \
bandwidths are in GB/s (1e9 bytes/s)."""

_ESTIMATE_EXAMPLES = """examples:
  # Llama-3-70B in FP8 on two H100s, 32 users with 7,680-token prompts
  llm-roofline estimate --model llama-3-70b --gpu h100 --n-gpus 2 \\
      --dtype fp8 --batch 32 --prompt 7680 --output 256
  # a sweep over the batch size, one row per point, as JSON
  llm-roofline estimate --model llama-3-8b --gpu h100 \\
      --batch 1,8,32,128 --json
  # any Hugging Face model: a config.json, or a downloaded snapshot's folder
  llm-roofline estimate --config ./Mistral-7B-v0.1 --gpu a100"""

_Parser = validate.OneLineParser

_INTEGER = re.compile(r"[+-]?[0-9]+(_[0-9]+)*", re.ASCII)
_DIGITS = r"[0-9]+(?:_[0-9]+)*"
_REAL = re.compile(rf"[+-]?(?:(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE][+-]?{_DIGITS})?"
                   r"|inf|infinity|nan)", re.ASCII | re.IGNORECASE)
"""Numbers as Python writes them, in ASCII digits (``1_000`` but not ``1__0``, ``_1`` or
another script's digits); ``inf`` and ``nan`` are read so that the check can name them."""

MAX_GPUS = 2**20
"""The most GPUs --n-gpus takes: the library's own limit (``deployment.setup``)."""

MAX_POINTS = 100
"""The most points a sweep prints. Each point prices the kernel-by-kernel estimate, the memory,
the largest batch and a joining request: about 25 ms of one core, so 100 points take about
3 s (1,000 took 23.5 s on an idle machine; ``tests/test_bad_input_course.py`` times the
maximum). For larger grids call ``llm_roofline.estimate`` with arrays, which is vectorised."""

SIGNIFICANT_FIGURES = 6
"""Significant figures of every real number ``--json`` prints (``_json``, the one place that
rounds). A datasheet's peaks and bandwidths carry three or four, so no time or throughput is
known better than that; six keep sums and ratios consistent to a millionth (the memory parts
add up to the capacity, ``throughput = batch / TPOT``) and drop binary floating-point noise
such as ``1.0000000000000002``. A whole number (a count of FLOPs or bytes, a capacity) is
exact and printed whole."""

MAX_QUEUE_S = 1e9
"""The longest --queue, seconds: the library's own limit (``calculator.estimate``'s queue_s)."""

_API_NAMES = {"n_gpus": "--n-gpus", "prompt_len": "--prompt", "output_len": "--output",
              "batch": "--batch", "queue_s": "--queue", "mbu": "--mbu", "mfu": "--mfu",
              "weight_dtype": "--dtype", "kv_dtype": "--kv-dtype",
              "compute_dtype": "--compute-dtype", "engine": "--engine"}


def _counts(option: str, unit: str, minimum: int = 1, maximum: int = validate.MAX_COUNT):
    """An argparse type: one integer, or a comma-separated list of them (a sweep), of
    ``unit`` (named in the message)."""

    def parse(text: str) -> list[int]:
        parts = [p.strip() for p in text.split(",")]
        values = []
        for part in parts:
            try:
                if not _INTEGER.fullmatch(part):
                    raise ValueError
                number = int(part)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"{option} takes whole numbers separated by commas (e.g. 1,8,32), "
                    f"got {validate.shorten(text, 40)}"
                ) from None
            try:
                values.append(validate.integer(option, number, minimum=minimum, maximum=maximum,
                                               unit=unit))
            except ValueError as err:
                raise argparse.ArgumentTypeError(str(err)) from None
        return values

    return parse


def _number(option: str):
    def parse(text: str) -> float:
        try:
            if not _REAL.fullmatch(text.strip()):
                raise ValueError
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{option} takes a number, got {validate.shorten(text, 40)}"
            ) from None

    return parse


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the line breaks of descriptions and examples, and wraps a line of prose only when
    it is longer than the help's width (an indented line, an example command, stays whole)."""

    def _fill_text(self, text, width, indent):
        return "\n".join(
            textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent)
            if len(line) > width and not line.startswith(" ") else indent + line
            for line in text.splitlines())


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="llm-roofline",
        description="LLM VRAM and throughput calculator: memory, TTFT, TPOT and throughput "
        "of a model on an accelerator: the floor no engine beats, and the kernel-by-kernel time.",
        epilog=_EPILOG + "\n\n" + _ESTIMATE_EXAMPLES.replace("examples:", "example:", 1),
        formatter_class=_Formatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_Parser)
    dtypes = "; ".join(f"{name} (or {', '.join(other)})" if other else name
                       for name, other in aliases().items())
    est = commands.add_parser(
        "estimate", help="memory, TTFT, TPOT and throughput of one serving configuration",
        description="Estimate memory per GPU, TTFT, TPOT and throughput for BATCH requests of "
        "PROMPT prompt tokens and OUTPUT generated tokens, served together. --batch, "
        "--prompt, --output and --n-gpus each take one number or a comma-separated list: "
        "the sweep prints one row per combination.",
        epilog=_ESTIMATE_EXAMPLES + "\n\n" + _EPILOG,
        formatter_class=_Formatter,
    )
    source = est.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="a built-in model, e.g. llama-3-70b (list: the "
                        "'models' command)")
    source.add_argument("--config", metavar="PATH",
                        help="a Hugging Face config.json, or a folder holding one (a downloaded "
                        f"snapshot); model_type one of: {', '.join(SUPPORTED_MODEL_TYPES)}")
    est.add_argument("--gpu", required=True,
                     help="accelerator name or alias, e.g. h100, h200, mi300x, 4090 (list: "
                     "the 'gpus' command), or a name in --gpu-file")
    est.add_argument("--gpu-file", metavar="PATH", default=None,
                     help="a JSON file of accelerators in the schema of the built-in data, such as "
                     "your own machine measured and saved by llm_roofline.machine (chapter 8)")
    est.add_argument("--dtype", default="bf16",
                     help=f"weight precision (default: bf16), one of: {dtypes}; upper or lower "
                     "case, '-' or '_'")
    est.add_argument("--compute-dtype", default=None, metavar="DTYPE",
                     help="precision of the tensor math, same spellings as --dtype (default: fp8 "
                     "for fp8 weights and int8 for int8 weights where the chip has that peak, "
                     "else bf16: weight-only quantisation, as W4A16)")
    est.add_argument("--kv-dtype", default=None, metavar="DTYPE",
                     help="KV-cache precision, same spellings as --dtype (default: bf16, "
                     "whatever --dtype is, as engines do)")
    est.add_argument("--batch", type=_counts("--batch", "users"), default=[1], metavar="N[,N...]",
                     help="concurrent requests decoded together, users (default: 1)")
    est.add_argument("--prompt", type=_counts("--prompt", "tokens"), default=[2048], metavar="N[,N...]",
                     help="prompt length per request, tokens (default: 2048)")
    est.add_argument("--output", type=_counts("--output", "tokens"), default=[256], metavar="N[,N...]",
                     help="generated length per request, tokens (default: 256)")
    est.add_argument("--n-gpus", type=_counts("--n-gpus", "GPUs", maximum=MAX_GPUS), default=[1],
                     metavar="N[,N...]",
                     help="tensor-parallel degree, GPUs; must divide the attention heads, and "
                     "divide the KV heads or be a multiple of them (default: 1)")
    est.add_argument("--mbu", type=_number("--mbu"), default=1.0,
                     help="achieved fraction of peak memory bandwidth, 0.001 to 1 (default: 1)")
    est.add_argument("--mfu", type=_number("--mfu"), default=1.0,
                     help="achieved fraction of dense peak FLOP/s, 0.001 to 1 (default: 1)")
    est.add_argument("--queue", type=_number("--queue"), default=0.0, metavar="SECONDS",
                     help="queueing delay added to TTFT, seconds (default: 0)")
    est.add_argument("--realistic", action="store_true",
                     help="a calibrated prediction of what a tuned engine achieves (efficiencies and "
                     "fixed per-step costs fitted on published measurements), printed beside the "
                     "floor and the kernel-by-kernel time at peak; not with --mbu/--mfu")
    est.add_argument("--engine", default=None, metavar="FAMILY",
                     help="with --realistic: the preset of an engine family ("
                     + ", ".join(n for n in realistic.load_presets() if n != "default")
                     + "; default: a preset fitted on all modern engines)")
    est.add_argument("--breakdown", action="store_true",
                     help="also show each kernel of the prefill and of a decode step: FLOPs, "
                     "bytes, intensity, time, the resource that limits it and share; and each "
                     "resource's busy time, the largest of which is the floor")
    est.add_argument("--json", action="store_true",
                     help="print JSON instead of a table: the same numbers, named as in Python "
                     f"(*_floor_s, *_kernel_s), reals to {SIGNIFICANT_FIGURES} significant figures")
    est.add_argument("--expert-dtype", default=None, metavar="DTYPE",
                     help="an MoE model's routed experts in their own format (e.g. mxfp4 for "
                     "gpt-oss, nvfp4), the rest at --dtype; their math at that format's peak "
                     "where the chip has it (W4A4), else dequantised (W4A16)")
    est.add_argument("--dp", type=_counts("--dp", "GPUs", maximum=MAX_GPUS), default=None, metavar="N",
                     help="data-parallel attention over N GPUs (each GPU the attention and the "
                     "cache of its own sequences; --batch is over all of them); not with "
                     "--n-gpus, --realistic")
    est.add_argument("--ep", type=_counts("--ep", "GPUs", maximum=MAX_GPUS), default=None, metavar="N",
                     help="with --dp N: spread the routed experts over the N GPUs (N or 1), "
                     "all-to-all dispatch in FP8 and combine in BF16, as DeepEP sends them")
    est.add_argument("--mtp", type=_counts("--mtp", "tokens", minimum=0, maximum=16), default=None,
                     metavar="N", help="with --dp: multi-token prediction, N drafted tokens a "
                     "step (DeepSeek's MTP), each accepted with probability --acceptance")
    est.add_argument("--acceptance", type=_number("--acceptance"), default=None, metavar="P",
                     help="with --mtp: the chance each drafted token is accepted (0 to 1)")
    commands.add_parser(
        "models", help="list the built-in models",
        description="List the built-in models with their sizes.",
        epilog="example:\n  llm-roofline models",
        formatter_class=_Formatter,
    )
    commands.add_parser(
        "gpus", help="list the built-in accelerators",
        description="List the built-in accelerators with their dense peaks and the aliases "
        "that name them.",
        epilog="example:\n  llm-roofline gpus",
        formatter_class=_Formatter,
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0, or 2 for bad arguments)."""
    parser = _parser()
    args = parser.parse_args(_joined(sys.argv[1:] if argv is None else list(argv), parser))
    if sys.stdout is None:  # started with its output closed (`llm-roofline gpus >&-`)
        return _cannot_write("standard output is closed")
    try:
        sys.stdout.flush()
        if args.command == "models":
            text = _models_table()
        elif args.command == "gpus":
            text = _gpus_table()
        else:
            text = _estimate(args)
        print(text)
        sys.stdout.flush()
    except ValueError as err:
        parser.error(_flag_names(str(err).splitlines()[0] if str(err) else type(err).__name__))
    except BrokenPipeError:  # the reader (for example `head`) stopped reading: not an error
        sys.stdout = None
    except OSError as err:  # a full disk (`> /dev/full`), a closed or unwritable output
        return _cannot_write(err.strerror or type(err).__name__)
    return 0


def _cannot_write(reason: str) -> int:
    """One line on standard error, exit code 1, when the output cannot be written; what is left
    in the output's buffer goes nowhere rather than failing again at exit."""
    try:
        fd = sys.stdout.fileno() if sys.stdout is not None else None
        if fd is not None:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
    except (OSError, ValueError, AttributeError):
        sys.stdout = None
    if sys.stderr is not None:
        try:
            sys.stderr.write(f"llm_roofline: error: cannot write the output: {reason}\n")
            sys.stderr.flush()
        except OSError:
            pass
    return 1


def _joined(argv: list[str], parser) -> list[str]:
    """``--mbu -inf`` as ``--mbu=-inf``: argparse takes a value that starts with ``-`` and is not
    a plain negative number (``-inf``, ``-1e3``, ``-x``) for an option, and would answer
    "expected one argument"; joined, the value reaches the check that names what is allowed.
    A known flag after a flag that needs a value is left alone (``--batch --json``)."""
    actions = list(_actions(parser))
    takes_value = {flag for action in actions if action.nargs is None
                   and action.option_strings for flag in action.option_strings}
    known = {flag for action in actions for flag in action.option_strings}
    out, i = [], 0
    while i < len(argv):
        token = argv[i]
        following = argv[i + 1] if i + 1 < len(argv) else None
        if (token in takes_value and following is not None and following.startswith("-")
                and following.split("=")[0] not in known):
            out.append(f"{token}={argv[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def _actions(parser):
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)


def _flag_names(message: str) -> str:
    """A message of the library about one of its arguments, in the flag's name: one voice."""
    if message.startswith("prompt_len + output_len "):
        return "--prompt + --output" + message[len("prompt_len + output_len"):]
    for name, flag in _API_NAMES.items():
        if message.startswith(f"{name} "):
            return flag + message[len(name):]
    return message


# --- formatting ----------------------------------------------------------------------------
def _time(seconds: float) -> str:
    """A duration in the unit that reads best: s, ms or us, three significant figures."""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms" if seconds < 0.1 else f"{seconds * 1e3:.0f} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.3g} us"
    return f"{seconds * 1e9:.3g} ns"


def _plain(value):
    """NumPy scalars as Python ones; refuses a non-finite float (it would be a wrong number)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"the calculator produced a non-finite number ({value}): the inputs "
                         "are outside what it can price")
    return value


def _rounded(x: float) -> float:
    """``x`` to ``SIGNIFICANT_FIGURES`` significant figures: ``1.0000000000000002`` -> ``1.0``;
    a whole number as it is (``16777216.0``, a count of bytes, is exact)."""
    return x if x.is_integer() else float(f"{x:.{SIGNIFICANT_FIGURES}g}")


def _json(result) -> str:
    """Strict JSON; every real number to ``SIGNIFICANT_FIGURES`` significant figures."""

    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v) for v in x]
        x = _plain(x)
        return _rounded(x) if isinstance(x, float) else x

    return json.dumps(clean(result), indent=2, allow_nan=False)


# --- estimate ------------------------------------------------------------------------------
def _accelerator(name: str, path: str | None):
    """A built-in accelerator, or one of those in the file ``--gpu-file`` names."""
    if path is None:
        return hardware.get_accelerator(name)
    return hardware.find_accelerator(name, path)


def _points(args):
    """Every (batch, prompt, output, n_gpus) combination asked for, in order."""
    return [(b, p, o, n) for n in args.n_gpus for b in args.batch for p in args.prompt
            for o in args.output]


def _estimate(args) -> str:
    cfg = load_config(args.config) if args.config is not None else get_model(args.model)
    chip = _accelerator(args.gpu, args.gpu_file)
    mbu, mfu = validate.fraction("--mbu", args.mbu), validate.fraction("--mfu", args.mfu)
    if args.realistic and (mbu, mfu) != (1.0, 1.0):
        raise ValueError("--realistic takes its MBU and MFU from the fitted preset: drop --mbu/--mfu")
    if args.engine is not None and not args.realistic:
        raise ValueError("--engine chooses a calibrated preset: add --realistic")
    queue = validate.real("--queue", args.queue, minimum=0, maximum=MAX_QUEUE_S, unit="seconds")
    if args.dp is not None or args.ep is not None:
        return _dp_estimate(cfg, chip, args, mbu, mfu)
    if args.mtp is not None or args.acceptance is not None:
        raise ValueError("--mtp and --acceptance apply with --dp N (data-parallel attention); "
                         "for tensor parallelism use serving.speculative in Python")
    points = _points(args)
    if len(points) > MAX_POINTS:
        raise ValueError(f"--batch, --prompt, --output and --n-gpus make {len(points):,} points; "
                         f"a sweep prints at most {MAX_POINTS:,} points (for more, call "
                         "llm_roofline.estimate with arrays)")
    results = [_one(cfg, chip, b, p, o, n, args, mbu, mfu, queue) for b, p, o, n in points]
    _json(results)  # never a non-finite number, in a table as in JSON
    if args.json:
        return _json(results[0] if len(results) == 1 else results)
    if len(results) == 1:
        return _report(results[0])
    return _sweep_table(results)


def _one(cfg, chip, batch, prompt, output, n_gpus, args, mbu, mfu, queue) -> dict:
    """Everything the CLI shows for one point, as plain numbers (seconds, GiB, tokens/s)."""
    options = dict(weight_dtype=args.dtype, kv_dtype="bf16" if args.kv_dtype is None else args.kv_dtype)
    if args.expert_dtype is not None:
        options["expert_dtype"] = args.expert_dtype
    calibrated = None
    if args.realistic:
        calibrated = realistic.estimate(cfg, chip, batch, prompt, output, n_gpus=n_gpus,
                                        queue_s=queue, compute_dtype=args.compute_dtype,
                                        engine=args.engine, **options)
        est, mbu, mfu = calibrated.estimate, 1.0, 1.0  # the peak's efficiencies below
    else:
        est = estimate(cfg, chip, batch, prompt, output, n_gpus=n_gpus, mbu=mbu, mfu=mfu,
                       queue_s=queue, compute_dtype=args.compute_dtype, **options)
    most = max_batch(cfg, chip, prompt, output, n_gpus=n_gpus, **options)
    # a new request arriving while the batch decodes mid-way: its whole prompt rides in one
    # mixed step with the running users' tokens
    running = serving.mixed_step(cfg, chip, batch, prompt + max(output // 2, 1), prompt,
                                 n_gpus=n_gpus, mbu=mbu, mfu=mfu,
                                 compute_dtype=args.compute_dtype, **options)
    m = est.memory
    kernel = calibrated.bound if calibrated is not None else est  # kernel by kernel
    result = {
        "model": est.model, "accelerator": est.accelerator, "n_gpus": est.n_gpus,
        "nodes": est.nodes, "weight_dtype": est.weight_dtype, "kv_dtype": est.kv_dtype,
        "kv_dtype_defaulted": args.kv_dtype is None, "compute_dtype": est.compute_dtype,
        "precision": est.precision, "batch": batch, "prompt_len": prompt,
        "output_len": output, "mbu": mbu, "mfu": mfu,
        "fits": bool(est.fits),
        "memory_gib_per_gpu": {
            "weights": m.weights / _GIB, "kv_cache": m.kv_cache / _GIB,
            "activations": m.activations / _GIB, "reserve": m.reserve / _GIB,
            "free": m.free / _GIB, "capacity": m.capacity / _GIB,
        },
        "max_batch": most,
        "prefill_bound": kernel.prefill_bound, "decode_bound": kernel.decode_bound,
        "bandwidth_utilisation": kernel.bandwidth_utilisation,
        "ttft_floor_s": est.ttft_floor_s, "tpot_floor_s": est.tpot_floor_s,
        "throughput_floor_tok_s": est.throughput_floor_tok_s, "e2e_floor_s": est.e2e_floor_s,
        "ttft_kernel_s": kernel.ttft_kernel_s, "ttft_joining_kernel_s": running.time_s + queue,
        "tpot_kernel_s": kernel.tpot_kernel_s,
        "throughput_kernel_tok_s": kernel.throughput_kernel_tok_s,
        "e2e_kernel_s": kernel.e2e_kernel_s,
        "floor_scope": est.floor_scope, "floor_caveats": list(est.floor_caveats),
    }
    if calibrated is not None:
        result |= {"kind": calibrated.label,
                   "prefill_bound_predicted": est.prefill_bound,
                   "decode_bound_predicted": est.decode_bound,
                   "bandwidth_utilisation_predicted": est.bandwidth_utilisation,
                   "ttft_predicted_s": est.ttft_s, "tpot_predicted_s": est.tpot_s,
                   "throughput_predicted_tok_s": est.throughput_tok_s,
                   "e2e_predicted_s": est.e2e_s,
                   "extrapolation": list(calibrated.extrapolation)}
    if args.breakdown:
        result["breakdown"] = {phase: est.breakdown(phase) for phase in ("prefill", "decode")}
        result["resources"] = {phase: est.resources(phase) for phase in ("prefill", "decode")}
    if not est.fits:
        result["would_fit"] = _what_would_fit(cfg, chip, batch, prompt, output, n_gpus, args,
                                              most)
    return result


def _dp_estimate(cfg, chip, args, mbu, mfu) -> str:
    """``--dp N [--ep N]``: data-parallel attention with expert parallelism (``parallel``)."""
    from .parallel import Layout, dp_ep_estimate

    if args.realistic:
        raise ValueError("--dp has no calibrated prediction: drop --realistic")
    if args.dp is None:
        raise ValueError("--ep N needs --dp N (data-parallel attention); for experts spread "
                         "under tensor parallelism use the Python API, parallel.parallel_estimate")
    if args.n_gpus != [1]:
        raise ValueError("--dp N gives the GPUs (N); drop --n-gpus")
    dp = args.dp[0]
    ep = args.ep[0] if args.ep is not None else 1
    if len(args.dp) > 1 or (args.ep is not None and len(args.ep) > 1):
        raise ValueError("--dp and --ep take one number each, not a sweep")
    if len(_points(args)) > 1:
        raise ValueError("--dp takes one --batch, --prompt and --output, not a sweep")
    options = dict(weight_dtype=args.dtype,
                   kv_dtype="bf16" if args.kv_dtype is None else args.kv_dtype,
                   compute_dtype=args.compute_dtype, mbu=mbu, mfu=mfu,
                   expert_dtype=args.expert_dtype)
    mtp = args.mtp[0] if args.mtp is not None else 0
    est = dp_ep_estimate(cfg, chip, args.batch[0], args.prompt[0], args.output[0],
                         Layout(dp=dp, ep=ep), mtp=mtp, acceptance=args.acceptance, **options)
    gib = est.memory
    result = {
        "model": est.model, "accelerator": est.accelerator, "layout": str(est.layout),
        "dp": dp, "ep": ep, "nodes": est.nodes, "precision": est.precision,
        "batch": est.batch, "batch_per_gpu": est.batch_per_gpu, "prompt_len": args.prompt[0],
        "output_len": args.output[0], "mbu": mbu, "mfu": mfu, "fits": est.fits,
        "memory_gib_per_gpu": {"weights": gib.weights / _GIB, "kv_cache": gib.kv_cache / _GIB,
                               "activations": gib.activations / _GIB,
                               "reserve": gib.reserve / _GIB, "free": gib.free / _GIB,
                               "capacity": gib.capacity / _GIB},
        "ttft_kernel_s": est.ttft_s, "ttft_floor_s": est.ttft_floor_s,
        "tpot_kernel_s": est.tpot_s, "tpot_floor_s": est.tpot_floor_s,
        "throughput_kernel_tok_s": est.throughput_tok_s,
        "throughput_floor_tok_s": est.throughput_floor_tok_s,
        "all_to_all_bytes_per_gpu_step": est.all_to_all_bytes,
        "expert_load": est.expert_load, "decode_resources": est.decode_resources,
        "floor_scope": est.scope, "tokens_per_step": est.tokens_per_step,
    }
    _json(result)
    if args.json:
        return _json(result)
    m = result["memory_gib_per_gpu"]
    busy = ", ".join(f"{k} {_time(v)}" for k, v in est.decode_resources.items())
    lines = [
        f"{est.model} on {est.layout} x {est.accelerator}"
        + (f" in {est.nodes} nodes" if est.nodes > 1 else ""),
        *textwrap.wrap(f"precisions: {est.precision}", 80, subsequent_indent="  "),
        f"workload: {est.batch:,} users ({est.batch_per_gpu:,} a GPU), prompt "
        f"{args.prompt[0]:,} tokens, output {args.output[0]:,} tokens",
        f"memory per GPU (GiB): weights {m['weights']:.2f}, KV cache {m['kv_cache']:.2f}, "
        f"activations {m['activations']:.2f}, reserve {m['reserve']:.2f}, free {m['free']:.2f}"
        + ("" if est.fits else "  DOES NOT FIT"),
        f"  {'':<23} {'floor':>8} {'kernel-by-kernel':>16}",
        f"  {'TTFT, own prompts':<23} {_time(est.ttft_floor_s):>8} {_time(est.ttft_s):>16}",
        f"  {'TPOT, each user':<23} {_time(est.tpot_floor_s):>8} {_time(est.tpot_s):>16}",
        f"  {'throughput, all GPUs':<23} {est.throughput_floor_tok_s:>8,.0f} "
        f"{est.throughput_tok_s:>16,.0f}  tokens/s",
        *textwrap.wrap(f"decode busy per GPU (mean step): {busy}; all-to-all "
                       f"{est.all_to_all_bytes / 1e6:,.1f} MB each way a step", 80,
                       initial_indent="  ", subsequent_indent="    "),
        *textwrap.wrap(est.scope, 80, initial_indent="  ", subsequent_indent="    "),
    ]
    return "\n".join(lines)


def _what_would_fit(cfg, chip, batch, prompt, output, n_gpus, args, most) -> dict:
    """The nearest changes that fit: fewer users, a lower weight precision, more GPUs."""
    options = dict(weight_dtype=args.dtype, kv_dtype="bf16" if args.kv_dtype is None else args.kv_dtype)
    if args.expert_dtype is not None:
        options["expert_dtype"] = args.expert_dtype
    lower = None
    for dtype in ("fp8", "int4"):
        if dtype == args.dtype:
            break
        if estimate(cfg, chip, batch, prompt, output, n_gpus=n_gpus, weight_dtype=dtype,
                    kv_dtype=options["kv_dtype"],
                    expert_dtype=options.get("expert_dtype")).fits:
            lower = dtype
            break
    needed = gpus_needed(cfg, chip, batch, prompt, output, **options)
    longest = max_prompt_len(cfg, chip, batch, output, n_gpus=n_gpus, **options)
    return {"max_batch": most, "max_prompt_len": longest, "weight_dtype": lower,
            "n_gpus": needed, "nodes": chip.nodes(needed) if needed else None,
            "interconnect": chip.interconnect}


def _report(r: dict) -> str:
    gib = r["memory_gib_per_gpu"]
    gpus = f"{r['n_gpus']} x {r['accelerator']}" if r["n_gpus"] > 1 else r["accelerator"]
    if r["nodes"] > 1:
        gpus += f" in {r['nodes']} nodes"
    users = "1 user" if r["batch"] == 1 else f"{r['batch']:,} users"
    lines = [
        f"{r['model']} on {gpus}",
        *textwrap.wrap(f"precisions: {r['precision']}", 80, subsequent_indent="  "),
        *(["  (KV cache bf16 by default, whatever --dtype is; --kv-dtype to change)"]
          if r["kv_dtype_defaulted"] and r["kv_dtype"] != r["weight_dtype"] else []),
        f"workload: {users}, prompt {r['prompt_len']:,} tokens, output {r['output_len']:,} "
        "tokens each",
        "",
    ]
    used = gib["weights"] + gib["kv_cache"] + gib["activations"]
    if r["fits"]:
        lines.append(f"FITS: {used + gib['reserve']:.2f} of {gib['capacity']:.1f} GiB per GPU "
                     f"with the reserve; up to {r['max_batch']:,} users fit")
    else:
        lines.append(f"DOES NOT FIT: it needs {used + gib['reserve']:.2f} GiB per GPU with the "
                     f"reserve; a GPU has {gib['capacity']:.1f} GiB")
        lines += ["what would fit:", *_fit_advice(r)]
    lines += [
        "",
        "memory per GPU                    GiB",
        f"  weights                  {gib['weights']:10.2f}",
        f"  KV cache                 {gib['kv_cache']:10.2f}",
        f"  activations              {gib['activations']:10.2f}",
        f"  runtime reserve          {gib['reserve']:10.2f}",
        f"  free                     {gib['free']:10.2f}" + ("" if r["fits"] else "  (short)"),
        f"  capacity                 {gib['capacity']:10.2f}",
        "",
    ]
    predicted = "kind" in r
    kind = r.get("kind") or f"roofline times at MBU {r['mbu']:g}, MFU {r['mfu']:g}"
    lines.append(f"latency and throughput ({kind})" if r["fits"] else
                 f"latency and throughput IF IT FIT ({kind})")
    prefill_what = "1 prompt" if r["batch"] == 1 else f"{r['batch']:,} prompts at once"
    suffix = "_predicted" if predicted else ""

    def row(label, floor, other, what=""):
        return f"  {label:<23} {floor:>8} {other:>9}  {what}".rstrip()

    def shown(what):  # the second column: the calibrated prediction, or kernel by kernel
        return r[f"{what}_predicted_s" if predicted else f"{what}_kernel_s"]

    if not predicted:
        lines.append(f"  {'':<23} {'':>8} kernel-")
    lines += [
        f"  {'':<23} {'floor':>8} {'predicted' if predicted else 'by-kernel':>9}",
        row("TTFT, whole batch", _time(r["ttft_floor_s"]), _time(shown("ttft")),
            f"{prefill_what}, {r['prefill_bound' + suffix]}-bound"),
    ]
    if not predicted:
        lines.append(row("TTFT, joining a server", "-", _time(r["ttft_joining_kernel_s"]),
                         f"1 prompt beside {r['batch']:,} decoding"))
    throughput = r["throughput_predicted_tok_s" if predicted else "throughput_kernel_tok_s"]
    lines += [
        row("TPOT, each user", _time(r["tpot_floor_s"]), _time(shown("tpot")),
            f"{r['decode_bound' + suffix]}-bound, "
            f"{100 * r['bandwidth_utilisation' + suffix]:.0f} % of peak bandwidth"),
        row("throughput, all users", f"{r['throughput_floor_tok_s']:,.1f}",
            f"{throughput:,.1f}", "tokens/s"),
    ]
    if r["batch"] > 1:
        lines.append(row("TPOT / batch", _time(r["tpot_floor_s"] / r["batch"]),
                         _time(shown("tpot") / r["batch"]), "amortised: no user waits this little"))
    lines.append(row("one request, end to end", _time(r["e2e_floor_s"]), _time(shown("e2e"))))
    lines += ["  floor: the busiest resource (math, memory, links); no engine at these",
              "  efficiencies beats it, however it overlaps its kernels. kernel-by-kernel:",
              "  each kernel on its own roofline, one after another, nothing overlapped"]
    if "floor_scope" in r:
        lines += textwrap.wrap(f"{r['floor_scope']}: an engine in another layout or format can "
                               "beat it", 80, initial_indent="  ", subsequent_indent="    ")
        for caveat in r.get("floor_caveats", []):
            lines += textwrap.wrap(f"beyond it: {caveat}", 80, initial_indent="  ",
                                   subsequent_indent="    ")
    if predicted:
        lines += ["  predicted: kernels at efficiencies fitted on engines' measurements, partly",
                  "  overlapped, plus fixed overheads per layer and per request",
                  f"  kernel-by-kernel at MBU = MFU = 1: TTFT {_time(r['ttft_kernel_s'])} "
                  f"(joining {_time(r['ttft_joining_kernel_s'])}),",
                  f"  TPOT {_time(r['tpot_kernel_s'])}, "
                  f"{r['throughput_kernel_tok_s']:,.1f} tokens/s"]
    for reason in r.get("extrapolation", []):
        lines += textwrap.wrap(f"EXTRAPOLATED beyond the fitted rows: {reason}", 80,
                               initial_indent="  ", subsequent_indent="    ")
    if "breakdown" in r:
        lines += _breakdown_lines(r["breakdown"], r["resources"])
    return "\n".join(lines)


def _breakdown_lines(breakdown: dict, resources: dict) -> list[str]:
    lines = []
    for phase, rows in breakdown.items():
        title = "prefill (the whole batch)" if phase == "prefill" else "one decode step (mean)"
        lines += ["", f"per kernel, {title}, per GPU",
                  f"  {'kernel':<14} {'GFLOP':>13} {'MB':>10} {'FLOP/B':>9} {'time':>9}  "
                  f"{'limit':<12} {'share':>6}"]
        for row in rows:
            intensity = "-" if row["intensity"] is None else f"{row['intensity']:,.1f}"
            lines.append(f"  {row['op']:<14} {row['flops'] / 1e9:13,.1f} {row['bytes'] / 1e6:10,.1f} "
                         f"{intensity:>9} {_time(row['time_s']):>9}  {row['bound']:<12} "
                         f"{100 * row['share']:5.1f}%")
        busy = resources[phase]
        names = {"compute": "math", "memory": "memory", "interconnect": "interconnect",
                 "network": "network", "latency": "collective latencies"}
        parts = ", ".join(f"{names[k]} {_time(busy[k]) if busy[k] else '0'}" for k in names)
        limit = names[busy["limit"]]
        lines += textwrap.wrap(
            f"busy per resource: {parts}; the floor, {_time(busy['floor'])}, is the "
            f"{limit}'s busy time" + (" plus the latencies (one sequence)"
                                      if busy["latency_added"] else "")
            + f"; kernel by kernel {_time(busy['kernel_by_kernel'])}",
            80, initial_indent="  ", subsequent_indent="  ")
    return lines


def _fit_advice(r: dict) -> list[str]:
    fit = r["would_fit"]
    advice = []
    if fit["max_batch"] >= 1:
        users = "1 user" if fit["max_batch"] == 1 else f"{fit['max_batch']:,} users"
        advice.append(f"  --batch {fit['max_batch']:,} (at most {users} with these lengths)")
    else:
        advice.append("  not even one user with these lengths")
    if fit["max_prompt_len"] >= 1:
        advice.append(f"  --prompt {fit['max_prompt_len']:,} (the longest prompt for "
                      f"{r['batch']:,} users)")
    if fit["weight_dtype"]:
        advice.append(f"  --dtype {fit['weight_dtype']} (a lower weight precision)")
    if fit["n_gpus"]:
        nodes = "1 node" if fit["nodes"] == 1 else f"{fit['nodes']} nodes"
        advice.append(f"  --n-gpus {fit['n_gpus']} (tensor parallel: {nodes})")
    elif r["n_gpus"] == 1 and not fit["interconnect"]:
        advice.append("  more GPUs: no; this accelerator has no interconnect in the data")
    else:
        advice.append("  more GPUs: no tensor-parallel degree up to 128 GPUs fits")
    return advice


def _sweep_table(results: list[dict]) -> str:
    kind = "predicted" if "kind" in results[0] else "kernel-by-kernel"
    over = f"{'':45}{f' {kind} ':-^30}"  # spans TTFT, TPOT and tokens/s
    head = (f"{'batch':>7} {'prompt':>7} {'output':>7} {'GPUs':>4}  {'fits':<4} {'free GiB':>9} "
            f"{'TTFT':>9} {'TPOT':>9} {'tokens/s':>10}  decode")
    lines = [f"{results[0]['model']} on {results[0]['accelerator']}: weights "
             f"{results[0]['weight_dtype']}, KV cache {results[0]['kv_dtype']}, tensor math "
             f"{results[0]['compute_dtype']} ({results[0].get('kind') or 'kernel-by-kernel times'}"
             "; where it does not fit, as if it did)", over, head]
    for r in results:
        which = "predicted" if "kind" in r else "kernel"
        lines.append(
            f"{r['batch']:7,} {r['prompt_len']:7,} {r['output_len']:7,} {r['n_gpus']:4}  "
            f"{'yes' if r['fits'] else 'NO':<4} {r['memory_gib_per_gpu']['free']:9.2f} "
            f"{_time(r[f'ttft_{which}_s']):>9} {_time(r[f'tpot_{which}_s']):>9} "
            f"{r[f'throughput_{which}_tok_s']:10,.1f}  "
            f"{r['decode_bound_predicted' if 'kind' in r else 'decode_bound']}"
        )
    return "\n".join(lines)


# --- listings ------------------------------------------------------------------------------
def _models_table() -> str:
    lines = [f"{'model':16s} {'params':>9s} {'active':>9s} {'layers':>6s} {'heads':>5s} "
             f"{'kv':>6s} {'head_dim':>8s} {'KV/token':>9s} {'context':>8s}"]
    for name in list_models():
        cfg, info = get_model(name), model_info(name)
        kv = "latent" if cfg.is_mla else str(cfg.n_kv_heads)
        lines.append(
            f"{name:16s} {cfg.n_params / 1e9:8.2f}B {cfg.n_active_params / 1e9:8.2f}B "
            f"{cfg.n_layers:6d} {cfg.n_heads:5d} {kv:>6s} {cfg.head_dim:8d} "
            f"{cfg.kv_cache_bytes_per_token('bf16') / 1e3:7.1f}kB {cfg.max_context:8d}"
        )
        lines.append(f"{'':16s} attention: {cfg.attention_layers}; {info['hf_repo']}")
    lines.append("KV/token: bytes of KV cache per token (all layers) in bf16, in kB (1e3 bytes); a "
                 "windowed layer keeps at most its window")
    return "\n".join(lines)


def _gpus_table() -> str:
    """The built-in accelerators, one block each, no line wider than 82 columns."""
    width, indent = 82, " " * 27
    lines = [f"{'accelerator':26s} {'memory':>8s} {'bandwidth':>10s} {'bf16':>9s} {'fp8':>9s} "
             f"{'ridge bf16':>10s}"]
    for name in hardware.list_accelerators():
        chip = hardware.get_accelerator(name)
        fp8 = f"{chip.peak('fp8') / 1e12:6.1f} TF" if "fp8" in chip.precisions else "      -  "
        link = (f"{chip.interconnect}, {chip.interconnect_bandwidth / 1e9:.0f} GB/s"
                if chip.interconnect else "none")
        lines.append(
            f"{name:26s} {chip.memory_bytes / _GIB:5.0f}GiB {chip.bandwidth / 1e9:6.0f}GB/s "
            f"{chip.peak('bf16') / 1e12:6.1f} TF {fp8} {chip.ridge('bf16'):10.1f}"
        )
        lines += textwrap.wrap(f"link: {link}", width, initial_indent=indent,
                               subsequent_indent=indent + "      ")
        names = ", ".join(a.replace(" ", "\0") for a in hardware.aliases(name))  # whole names
        lines += [line.replace("\0", " ") for line in textwrap.wrap(
            f"also: {names}", width, initial_indent=indent, subsequent_indent=indent + "      ",
            break_long_words=False, break_on_hyphens=False)]
    lines += textwrap.wrap("memory in GiB (2**30 bytes), bandwidth in GB/s (1e9 bytes/s); peaks: "
                           "dense tensor math (no sparsity), TFLOP/s; ridge in FLOPs per byte; "
                           "link: the scale-up interconnect, GB/s per chip both ways", width)
    lines.append("'H100' is the H100 SXM; the slower H100 PCIe card is not built in")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


def commands() -> list[str]:
    """The subcommands, in the order the program's help lists them."""
    subparsers = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(subparsers.choices)


def help_text(command: str | None = None, width: int = 72) -> str:
    """The help the parser itself prints: the program's (``None``) or a subcommand's.

    ``width``: the column at which argparse wraps it. The book's command-line reference is
    printed from here, so it cannot drift from the program.
    """
    width = validate.integer("width", width, minimum=40, maximum=400)
    parser = _parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if command is not None:
        parser = subparsers.choices[validate.choice("command", command, list(subparsers.choices))]
    parser.formatter_class = functools.partial(parser.formatter_class, width=width)
    return parser.format_help()
