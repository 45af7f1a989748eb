"""Command line: ``python -m llm_roofline estimate|models|gpus``.

A thin front end: every number comes from ``estimate``, ``models`` and ``hardware``. Bad
arguments print one line (``llm_roofline: error: ...``) and exit with code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import hardware
from .calculator import estimate, gpus_needed, max_batch
from .models import ModelConfig, get_model, list_models, model_info

_GIB = 2**30

_EPILOG = """examples:
  python -m llm_roofline estimate --model llama-3-70b --gpu h100-sxm --dtype fp8 --batch 32
  python -m llm_roofline estimate --config config.json --gpu h200 --n-gpus 2 --json
  python -m llm_roofline models
  python -m llm_roofline gpus

All figures are roofline bounds (with --mbu 1 --mfu 1 no engine can beat them); memory is
per GPU, in GiB (2**30 bytes), the unit in which accelerator memory is sized."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit code 2."""

    def error(self, message: str):
        self.exit(2, f"llm_roofline: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m llm_roofline",
        description="LLM VRAM and throughput calculator: memory, TTFT, TPOT and throughput "
        "of a model on an accelerator, as roofline bounds.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_Parser)
    est = commands.add_parser(
        "estimate", help="memory, TTFT, TPOT and throughput of one serving configuration",
        description="Estimate memory per GPU, TTFT, TPOT and throughput for BATCH requests of "
        "PROMPT prompt tokens and OUTPUT generated tokens, served together.",
    )
    source = est.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="a built-in model (see the 'models' command)")
    source.add_argument("--config", type=Path, metavar="PATH",
                        help="a Hugging Face config.json instead of a built-in model")
    est.add_argument("--gpu", required=True,
                     help="accelerator name or alias, e.g. h100-sxm, h200, mi300x ('gpus')")
    est.add_argument("--dtype", default="bf16",
                     help="weight precision: bf16, fp16, fp8, int8, int4 (default: bf16)")
    est.add_argument("--kv-dtype", default="bf16",
                     help="KV-cache precision, same choices (default: bf16)")
    est.add_argument("--batch", type=int, default=1,
                     help="concurrent requests decoded together (default: 1)")
    est.add_argument("--prompt", type=int, default=2048,
                     help="prompt tokens per request (default: 2048)")
    est.add_argument("--output", type=int, default=256,
                     help="generated tokens per request (default: 256)")
    est.add_argument("--n-gpus", type=int, default=1,
                     help="tensor-parallel degree; must divide the attention heads, and divide "
                     "the KV heads or be a multiple of them (default: 1)")
    est.add_argument("--mbu", type=float, default=1.0,
                     help="achieved fraction of peak memory bandwidth, (0, 1] (default: 1)")
    est.add_argument("--mfu", type=float, default=1.0,
                     help="achieved fraction of dense peak FLOP/s, (0, 1] (default: 1)")
    est.add_argument("--queue", type=float, default=0.0, metavar="SECONDS",
                     help="queueing delay added to TTFT (default: 0)")
    est.add_argument("--json", action="store_true", help="print JSON instead of a table")
    commands.add_parser("models", help="list the built-in models",
                        description="List the built-in models with their sizes.")
    commands.add_parser("gpus", help="list the built-in accelerators",
                        description="List the built-in accelerators with their dense peaks.")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (0, or 2 for bad arguments)."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "models":
            print(_models_table())
        elif args.command == "gpus":
            print(_gpus_table())
        else:
            print(_estimate(args))
    except ValueError as err:
        parser.error(str(err).splitlines()[0])
    return 0


def _load_config(path: Path) -> ModelConfig:
    try:
        config = json.loads(path.read_text())
    except OSError as err:
        raise ValueError(f"--config: cannot read {str(path)!r}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"--config: {str(path)!r} is not valid JSON ({err.msg})") from None
    return ModelConfig.from_hf_config(config, name=path.stem if path.stem != "config" else None)


def _estimate(args) -> str:
    cfg = _load_config(args.config) if args.config else get_model(args.model)
    options = dict(weight_dtype=args.dtype, kv_dtype=args.kv_dtype, n_gpus=args.n_gpus)
    est = estimate(cfg, args.gpu, args.batch, args.prompt, args.output, mbu=args.mbu,
                   mfu=args.mfu, queue_s=args.queue, **options)
    most = max_batch(cfg, args.gpu, args.prompt, args.output, **options)
    needed = None if est.fits else gpus_needed(
        cfg, args.gpu, args.batch, args.prompt, args.output,
        weight_dtype=args.dtype, kv_dtype=args.kv_dtype)
    m = est.memory
    result = {
        "model": est.model, "accelerator": est.accelerator, "n_gpus": est.n_gpus,
        "weight_dtype": est.weight_dtype, "kv_dtype": est.kv_dtype,
        "compute_dtype": est.compute_dtype, "batch": est.batch, "prompt_len": est.prompt_len,
        "output_len": est.output_len, "mbu": est.mbu, "mfu": est.mfu,
        "memory_gib_per_gpu": {
            "weights": m.weights / _GIB, "kv_cache": m.kv_cache / _GIB,
            "activations": m.activations / _GIB, "reserve": m.reserve / _GIB,
            "used": m.used / _GIB, "capacity": m.capacity / _GIB,
        },
        "fits": est.fits, "max_batch": most, "gpus_needed": needed, "ttft_s": est.ttft_s,
        "prefill_bound": est.prefill_bound, "tpot_s": est.tpot_s, "decode_bound": est.bound,
        "throughput_tok_s": est.throughput_tok_s, "time_per_token_s": est.time_per_token_s,
        "e2e_s": est.e2e_s, "bandwidth_utilisation": est.bandwidth_utilisation,
    }
    if args.json:
        return json.dumps(result, indent=2)
    gib = result["memory_gib_per_gpu"]
    chip = hardware.get_accelerator(args.gpu)
    if needed:
        advice = f"  GPUs needed to fit       {needed:>9}  (--n-gpus; tensor parallel)"
    elif chip.interconnect is None:
        advice = ("  does not fit on one, and this accelerator has no interconnect for tensor "
                  "parallelism")
    else:
        advice = "  no tensor-parallel degree up to 128 GPUs fits"
    gpus = f"{est.n_gpus} x {est.accelerator}" if est.n_gpus > 1 else est.accelerator
    lines = [
        f"{est.model} on {gpus}: weights {est.weight_dtype}, KV cache {est.kv_dtype}, "
        f"tensor math {est.compute_dtype}",
        f"batch {est.batch}, prompt {est.prompt_len} tokens, output {est.output_len} tokens",
        "",
        "memory per GPU                   GiB",
        f"  weights                 {gib['weights']:10.2f}",
        f"  KV cache                {gib['kv_cache']:10.2f}",
        f"  activations             {gib['activations']:10.2f}",
        f"  runtime reserve         {gib['reserve']:10.2f}",
        f"  used / capacity         {gib['used']:10.2f} / {gib['capacity']:.1f}  "
        + ("fits" if est.fits else "DOES NOT FIT"),
        f"  largest batch that fits {most:10d}",
        *([] if est.fits else [advice]),
        "",
        f"latency and throughput (roofline bound at MBU {est.mbu:g}, MFU {est.mfu:g})",
        f"  TTFT                    {est.ttft_s * 1e3:10.2f} ms   "
        f"prefill {est.prefill_bound}-bound",
        f"  TPOT, each user         {est.tpot_s * 1e3:10.2f} ms   decode {est.bound}-bound, "
        f"{100 * est.bandwidth_utilisation:.0f} % of peak bandwidth",
        f"  throughput, all users   {est.throughput_tok_s:10.1f} tokens/s",
        f"  TPOT / batch            {est.time_per_token_s * 1e3:10.3f} ms   "
        "(amortised; no user waits this little)",
        f"  one request end to end  {est.e2e_s:10.2f} s",
    ]
    return "\n".join(lines)


def _models_table() -> str:
    lines = [f"{'model':14s} {'params':>9s} {'active':>9s} {'layers':>6s} {'heads':>5s} "
             f"{'kv':>4s} {'head_dim':>8s} {'KV/token':>9s} {'context':>8s}  Hugging Face repo"]
    for name in list_models():
        cfg, info = get_model(name), model_info(name)
        kv = "latent" if cfg.is_mla else str(cfg.n_kv_heads)
        lines.append(
            f"{name:14s} {cfg.n_params / 1e9:8.2f}B {cfg.n_active_params / 1e9:8.2f}B "
            f"{cfg.n_layers:6d} {cfg.n_heads:5d} {kv:>4s} {cfg.head_dim:8d} "
            f"{cfg.kv_cache_bytes_per_token('bf16') / 1e3:7.1f}kB {cfg.max_context:8d}  "
            f"{info['hf_repo']}"
        )
    lines.append("KV/token: bytes of KV cache per token (all layers) in bf16, in kB (1e3 bytes)")
    return "\n".join(lines)


def _gpus_table() -> str:
    lines = [f"{'accelerator':26s} {'memory':>8s} {'bandwidth':>10s} {'bf16':>9s} {'fp8':>9s} "
             f"{'ridge bf16':>10s}  interconnect"]
    for name in hardware.list_accelerators():
        chip = hardware.get_accelerator(name)
        fp8 = f"{chip.peak('fp8') / 1e12:6.1f} TF" if "fp8" in chip.precisions else "      -  "
        link = (f"{chip.interconnect}, {chip.interconnect_bandwidth / 1e9:.0f} GB/s"
                if chip.interconnect else "-")
        lines.append(
            f"{name:26s} {chip.memory_bytes / _GIB:5.0f}GiB {chip.bandwidth / 1e9:6.0f}GB/s "
            f"{chip.peak('bf16') / 1e12:6.1f} TF {fp8} {chip.ridge('bf16'):10.1f}  {link}"
        )
    lines.append("memory in GiB (2**30 bytes), bandwidth in GB/s (1e9 bytes/s); peaks: dense "
                 "tensor math (no sparsity), TFLOP/s; ridge in FLOPs per byte")
    lines.append("'H100' is the H100 SXM; the slower H100 PCIe card is not built in")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
