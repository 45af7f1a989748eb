"""Does the tiny NumPy Llama sit on the roofline it teaches, and keep up with PyTorch? Prints JSON.

For a model whose weights (about 250 MB in float32) are far larger than the last-level
cache, at batch 1, side by side with PyTorch eager running transformers' Llama on the same
weights, with the same number of threads:

* a decode step should read its bytes (weights + KV cache) at >= 85 % of the host's copy
  bandwidth, and take no longer than torch's step (memory-bound: GEMV);
* a prefill of 512 tokens should run at >= 80 % of the host's float32 GEMM rate, and take at
  most 1.2 x torch's time (compute-bound: GEMM).

Host, NumPy and torch are timed in the same rounds, each figure the best of several samples
(``llm_roofline.measure.timing``): another program can only slow a sample down. With
``--threads 1`` each sample is the thread's CPU time, which leaves out the time another
program held the core (on a shared machine, the steadier figure). The load
average is recorded before and after, and a spread between samples over 25 % is reported
as a disturbed run. NumPy multiplies with its OpenBLAS, torch with its own BLAS (MKL or
oneDNN in the x86 wheels): both are named, with ``OPENBLAS_THREAD_TIMEOUT`` (set to 21 here
unless the environment sets it: see the comment at the imports; null when NumPy was loaded
before this module, as under pytest, and the variable could not take effect). ``--smoke`` runs
a tiny model for seconds (CI).

The GEMM rate that divides the prefill's is the host's best: a square float32 product of
``--gemm-n`` (2048), larger than any product of the prefill. The same rounds also time, alone,
a product of each shape the prefill's linear layers run (``gemm_shapes``), the rate the BLAS
reaches at those shapes: what the prefill could reach if nothing else took time.

    python benchmarks/bench_tiny.py [--prompt 512] [--rounds 10] [--repeats 3] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

# NumPy's OpenBLAS keeps an idle thread spinning for 2**28 cycles (about 0.1 s) after each
# product. On a 2-core host that thread holds a core while the element-wise code between the
# products (softmax, SwiGLU, RMSNorm, split over both cores) runs, and a 512-token prefill took
# 5-10 % longer. 2**21 cycles (0.8 ms at 2.6 GHz) is still longer than the gaps between a
# decode step's products (under 0.5 ms), so decode keeps its thread awake. OpenBLAS reads the
# variable once, when it loads: it must be set before NumPy is imported.
NUMPY_LOADED = "numpy" in sys.modules  # then OpenBLAS has read its environment already
if not NUMPY_LOADED:
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "21")
THREAD_TIMEOUT_SET = None if NUMPY_LOADED else os.environ["OPENBLAS_THREAD_TIMEOUT"]

import numpy as np  # noqa: E402

from llm_roofline import counts  # noqa: E402
from llm_roofline.measure import (  # noqa: E402
    DISTURBED_SPREAD,
    _copy_kernel,
    _matmul_kernel,
    blas_info,
    blas_threads,
    default_clock,
    disturbance,
    load_average,
    timing,
)
from llm_roofline.models import ModelConfig  # noqa: E402
from llm_roofline.tiny import Tally, TinyLlama  # noqa: E402

CFG = ModelConfig("bench-250MB", vocab_size=8192, hidden_size=1024, intermediate_size=2816,
                  n_layers=4, n_heads=16, n_kv_heads=4, head_dim=64, max_context=1024)
SMOKE = ModelConfig("bench-smoke", vocab_size=256, hidden_size=64, intermediate_size=172,
                    n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, max_context=64)
TARGETS = {"decode_fraction_of_copy": 0.85, "decode_time_vs_torch": 1.0,
           "prefill_fraction_of_gemm": 0.80, "prefill_time_vs_torch": 1.2}


def torch_side(cfg, threads):
    """transformers' Llama with random weights, eager attention, float32; None without torch."""
    try:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as err:
        return None, f"torch or transformers not installed ({err.name})"
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    config = LlamaConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size, num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads, num_key_value_heads=cfg.n_kv_heads,
        head_dim=cfg.head_dim, max_position_embeddings=cfg.max_context,
        rope_theta=cfg.rope_theta, rms_norm_eps=cfg.norm_eps, tie_word_embeddings=False,
        attn_implementation="eager")
    model = LlamaForCausalLM(config).eval().to(torch.float32)
    return model, None


def torch_blas() -> dict:
    import torch

    shown = torch.__config__.show()
    blas = next((part.split("=", 1)[1] for part in shown.replace(",", " ").split()
                 if part.startswith("BLAS_INFO=")), None)
    return {"torch": torch.__version__, "blas": blas, "mkldnn": torch.backends.mkldnn.is_available(),
            "threads": torch.get_num_threads()}


def prefill_shapes(model, P):
    """The products a prefill of ``P`` tokens runs in each layer, as the model runs them
    (q, k, v as one; gate, up as one), each into a preallocated output: name -> (function,
    FLOPs, [rows, d_in, d_out])."""
    rng = np.random.default_rng(1)
    out = {}
    for name in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"):
        W = model.layers[0][name][0]  # [d_in, d_out], as the model keeps it
        a = rng.standard_normal((P, W.shape[0])).astype(np.float32)
        y = np.empty((P, W.shape[1]), np.float32)
        out[f"gemm_{name}"] = (lambda a=a, W=W, y=y: np.matmul(a, W, out=y), 2 * W.size * P,
                               [P, *W.shape])
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompt", type=int, default=512, help="prefill length = decode context")
    ap.add_argument("--rounds", type=int, default=10,
                    help="rounds of host, NumPy and torch timings (spread in time: a quiet "
                         "moment in any round gives a clean best sample; ten take about a "
                         "minute)")
    ap.add_argument("--repeats", type=int, default=3, help="samples per figure and round")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="threads for NumPy's BLAS and for torch (default: every CPU)")
    ap.add_argument("--copy-mb", type=int, default=256, help="copy benchmark arrays, MB")
    ap.add_argument("--gemm-n", type=int, default=2048, help="GEMM benchmark matrix side")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparison")
    ap.add_argument("--smoke", action="store_true",
                    help="a tiny model and tiny sizes, for seconds (CI checks the script runs)")
    args = ap.parse_args(argv)
    cfg = CFG
    if args.smoke:
        cfg = SMOKE
        args.prompt, args.rounds, args.repeats = 16, 1, 2
        args.copy_mb, args.gemm_n = 8, 128
    if not 1 <= args.prompt < cfg.max_context:
        ap.error(f"--prompt must be from 1 to {cfg.max_context - 1}, got {args.prompt}")
    for name in ("rounds", "repeats", "threads"):
        if not 1 <= getattr(args, name) <= 1000:
            ap.error(f"--{name} must be from 1 to 1000, got {getattr(args, name)}")

    hf, why_not = (None, "--no-torch") if args.no_torch else torch_side(cfg, args.threads)
    if hf is not None:
        import torch

        state = {k: v.numpy() for k, v in hf.state_dict().items()}
        model = TinyLlama(cfg, state)
    else:
        model = TinyLlama.random(cfg, seed=0)
    P = args.prompt
    prompt = np.random.default_rng(0).integers(0, cfg.vocab_size, (1, P))
    last = prompt[:, -1]
    _, cache = model.prefill(prompt, max_len=P + 1, logits="last")

    def np_prefill():
        model.prefill(prompt, max_len=P + 1, logits="last")

    def np_decode():  # one step at context P + 1, rewound so that every sample is the same
        cache.length = P
        model.decode(last, cache)

    figures = {"numpy_prefill": np_prefill, "numpy_decode": np_decode}
    if hf is not None:
        ids = torch.from_numpy(prompt)
        nxt = torch.from_numpy(last[:, None])
        with torch.inference_mode():
            out = hf(ids, use_cache=True, logits_to_keep=1)
        past = getattr(out, "cache", None) or out.past_key_values
        logits_np, _ = model.prefill(prompt, max_len=P + 1, logits="last")
        agree = float(np.max(np.abs(out.logits.numpy() - logits_np)) /
                      np.max(np.abs(logits_np)))

        def torch_prefill():
            with torch.inference_mode():
                hf(ids, use_cache=True, logits_to_keep=1)

        def torch_decode():  # one step at context P + 1, rewound as NumPy's is
            extra = past.get_seq_length() - P
            if extra > 0:
                past.crop(-extra)
            with torch.inference_mode():
                hf(nxt, cache=past, use_cache=True)

        figures |= {"torch_prefill": torch_prefill, "torch_decode": torch_decode}

    copy_fn, copy_bytes = _copy_kernel(args.copy_mb)
    gemm_fn, gemm_flops = _matmul_kernel(args.gemm_n, "fp32")
    figures = {"copy": copy_fn, "gemm": gemm_fn} | figures
    shapes = prefill_shapes(model, P)  # name -> (function, FLOPs)
    figures |= {name: fn for name, (fn, _, _) in shapes.items()}

    load_before = load_average()
    best = {k: float("inf") for k in figures}
    spread = {k: 0.0 for k in figures}
    waited = {k: 0.0 for k in figures}
    clock = default_clock(args.threads)  # one thread: its CPU time, which skips the waits
    with blas_threads(args.threads):
        numpy_blas = blas_info()
        for _ in range(args.rounds):  # the same rounds for all: a busy spell slows all alike
            for name, fn in figures.items():
                t = timing(fn, args.repeats, 0.002, clock)
                best[name] = min(best[name], t["seconds"])
                spread[name] = max(spread[name], t["spread"])
                waited[name] = max(waited[name], t["waited"])
        tally = Tally()
        np_decode_on = timing(lambda: (setattr(cache, "length", P),
                                       model.decode(last, cache, tally=Tally())),
                              args.repeats, 0.002, clock)["seconds"]
        model.prefill(prompt, max_len=P + 1, logits="last", tally=tally)
        cache.length = P
        model.decode(last, cache, tally=tally)
    load_after = load_average()

    copy_GBps = copy_bytes / best["copy"] / 1e9
    gemm_GFLOPS = gemm_flops / best["gemm"] / 1e9
    pre = counts.op_costs(cfg, 1, P, weight_dtype="fp32", causal=False, logits="last")
    dec = counts.op_costs(cfg, 1, 1, P, weight_dtype="fp32")
    # what a decode step must move: every weight but the embedding table, and the KV cache
    weights_kv = sum(w.nbytes for k, w in model.w.items() if k != "model.embed_tokens.weight")
    weights_kv += dec["kv_read"].bytes_read
    assert tally.costs("prefill") == pre and tally.costs("decode") == dec  # the tally is exact
    decode_GBps = weights_kv / best["numpy_decode"] / 1e9
    prefill_GFLOPS = counts.total(pre).flops / best["numpy_prefill"] / 1e9
    ratios = {
        "decode_fraction_of_copy": decode_GBps / copy_GBps,
        "prefill_fraction_of_gemm": prefill_GFLOPS / gemm_GFLOPS,
    }
    if hf is not None:
        ratios["decode_time_vs_torch"] = best["numpy_decode"] / best["torch_decode"]
        ratios["prefill_time_vs_torch"] = best["numpy_prefill"] / best["torch_prefill"]
    met = {k: (v >= TARGETS[k] if "fraction" in k else v <= TARGETS[k]) for k, v in ratios.items()}
    load = max((x for x in (load_before, load_after) if x is not None), default=None)
    report = {
        "config": {"name": cfg.name, "weights_MB": cfg.n_params * 4 / 1e6, "batch": 1,
                   "prompt": P, "threads": args.threads, "rounds": args.rounds,
                   "repeats": args.repeats, "clock": clock, "smoke": args.smoke},
        "ratios": ratios,
        "targets": TARGETS,
        "targets_met": met,
        "host": {"copy_GBps": copy_GBps, "copy_mb": args.copy_mb,
                 "gemm_GFLOPS": gemm_GFLOPS, "gemm_n": args.gemm_n},
        "gemm_shapes": {name[5:]: {"rows_in_out": shape, "GFLOPS": fl / best[name] / 1e9,
                                   "fraction_of_gemm": fl / best[name] / 1e9 / gemm_GFLOPS}
                        for name, (_, fl, shape) in shapes.items()},
        "decode_step": {"bytes_weights_and_kv": weights_kv,
                        "bytes_counted": counts.total(dec).bytes,
                        "numpy_s": best["numpy_decode"], "numpy_tally_on_s": np_decode_on,
                        "torch_s": best.get("torch_decode"), "GBps": decode_GBps},
        "prefill": {"flops": counts.total(pre).flops, "numpy_s": best["numpy_prefill"],
                    "torch_s": best.get("torch_prefill"), "GFLOPS": prefill_GFLOPS},
        "blas": {"numpy": numpy_blas | {"OPENBLAS_THREAD_TIMEOUT": THREAD_TIMEOUT_SET},
                 "torch": torch_blas() if hf is not None else why_not},
        "logits_max_rel_diff_vs_torch": agree if hf is not None else None,
        "spread": spread,
        "waited": waited,
        "load_average": {"before": load_before, "after": load_after},
        "disturbed": disturbance(spread, DISTURBED_SPREAD, load, os.cpu_count(), waited),
    }
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=2))
