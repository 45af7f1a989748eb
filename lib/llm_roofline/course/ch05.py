"""Chapter 5, the KV cache (``notebooks/05_kv_cache``): its figure and its answer checks.

- :func:`kv_step_bars`: one decode step's weight and KV-cache bytes as two bars;
- :func:`crossover_lines`: the context at which the cache's reads equal the weights', against
  the batch, with each model's context limit;
- the answer checks ``kv-1`` ... ``kv-5``.
"""

from __future__ import annotations

from ..hardware import get_accelerator
from ..validate import axes, integer, integers, real, sequence
from .registry import register, register_hint

__all__ = ["PARTS", "crossover_rows", "crossover_lines", "decode_tally", "kv_step_bars",
           "remedy_rows", "tiny"]

PARTS = {"weights": "tab:blue", "KV cache": "tab:orange", "activations": "tab:green",
         "reserve": "0.75"}


def kv_step_bars(ax, batch: int, context: int, model: str = "llama-3-8b",
                 accelerator: str = "H100", ylim: float = 80.0, *, short_title: bool = False):
    """One decode step's weight and KV-cache bytes as two bars, titled with its memory time.

    The KV-cache chapter's slider and its twins draw this. A batch whose weights and caches do
    not fit in the accelerator's memory (``vram.max_batch`` for sequences of ``context`` tokens)
    is drawn hollow and hatched, and its title says so. ``short_title`` leaves the context and
    the accelerator out of the title (for small multiples). Returns the Axes.
    """
    from ..kv import step_traffic
    from ..vram import max_batch

    axes("ax", ax, optional=False)
    batch, context = integer("batch", batch), integer("context", context)
    traffic = step_traffic(model, batch, context)
    chip = get_accelerator(accelerator)
    accelerator = accelerator if isinstance(accelerator, str) else chip.name
    fits = context < 2 or batch <= max_batch(model, chip, context - 1, 1)
    gb = [traffic["weights"] / 1e9, traffic["kv"] / 1e9]
    ms = 1e3 * sum(traffic.values()) / chip.bandwidth
    colors = [PARTS["weights"], PARTS["KV cache"]]
    if fits:
        ax.bar(["weights", "KV cache"], gb, color=colors)
    else:  # arithmetic for a server that does not exist: hollow, as in Figure 6.1
        ax.bar(["weights", "KV cache"], gb, color="none", edgecolor=colors, hatch="//", lw=1.5)
    title = (f"B = {batch}: {ms:.1f} ms" if short_title
             else f"B = {batch}, context {context:,}: {ms:.1f} ms on an {accelerator}")
    if not fits:
        title += " (does not fit)" if not short_title else "\n(does not fit)"
    # small multiples repeat the label on every panel: keep it short there, clear of the titles
    ax.set(ylabel="GB read" if short_title else "bytes read per step (GB)",
           ylim=(0, real("ylim", ylim, minimum=0, open_min=True)), title=title)
    return ax


def crossover_lines(ax, models, batches, *, mark: int = 32768) -> dict:
    """For each model, the context at which a decode step's KV-cache reads equal its weight
    reads (``kv.crossover_context``) against the batch, on log axes.

    A line is solid where that context is within the model's context limit (the cache can
    overtake the weights there) and faint and dotted where it is not; a short bar across the
    line marks where it meets the limit. A grey dashed line marks ``mark`` tokens, labelled at
    the right, below it. Returns ``{model: crossover contexts}``.
    """
    import numpy as np

    from ..kv import crossover_context
    from ..models import get_model

    axes("ax", ax, optional=False)
    models = sequence("models", models, what="model names or configs")
    b = np.atleast_1d(integers("batches", batches))
    if b.ndim != 1 or b.size > 4096:
        raise ValueError(f"batches must be a list of at most 4,096 batch sizes, got {b.size}")
    mark = integer("mark", mark)
    out = {}
    for name in models:
        cfg = get_model(name)
        y = np.asarray(crossover_context(cfg, b), dtype=float)
        limit = cfg.max_context
        (line,) = ax.plot(b, y, color=None, lw=0)  # only to take the next colour
        color = line.get_color()
        line.remove()
        inside = y <= limit
        # the faint part runs up to the first point inside, so the two parts join
        first_in = int(np.argmax(inside)) if inside.any() else len(b) - 1
        ax.plot(b[: first_in + 1], y[: first_in + 1], ls=":", marker="o", ms=3, color=color,
                alpha=0.45)
        ax.plot(b[inside], y[inside], marker="o", color=color, label=name)
        if inside.any() and not inside.all():  # where the line meets the limit (log-log)
            j = first_in
            t = np.log(limit / y[j - 1]) / np.log(y[j] / y[j - 1])
            at = b[j - 1] * (b[j] / b[j - 1]) ** t
            ax.plot(at, limit, marker="_", ms=16, mew=2.5, color=color, ls="none")
        out[name] = y
    ax.axhline(mark, color="grey", ls="--", lw=1)
    ax.text(0.98, mark * 0.88, f"{mark // 1024}K tokens", color="grey", fontsize=10,
            ha="right", va="top", transform=ax.get_yaxis_transform())
    ax.plot([], [], ls=":", marker="o", ms=3, color="0.4", alpha=0.6,
            label="beyond the model's context limit")
    ax.plot([], [], marker="_", ms=16, mew=2.5, ls="none", color="0.4",
            label="the model's context limit")
    ax.set(xscale="log", yscale="log", xlabel="batch size B (sequences)",
           ylabel="context where KV reads = weight reads (tokens)")
    ax.set_xticks(b, [str(int(v)) for v in b])
    return out


def tiny(n_kv_heads: int):
    """The chapter's tiny transformer with ``n_kv_heads`` KV heads serving its 8 query heads."""
    from ..models import ModelConfig

    n_kv_heads = integer("n_kv_heads", n_kv_heads, minimum=1, maximum=8)
    return ModelConfig(f"tiny-{n_kv_heads}kv", vocab_size=512, hidden_size=256,
                       intermediate_size=512, n_layers=2, n_heads=8, n_kv_heads=n_kv_heads,
                       head_dim=32, max_context=256)


def decode_tally(cfg, batch: int = 4, prompt: int = 48, seed: int = 0) -> dict:
    """Run ``batch`` random prompts of ``prompt`` tokens through the tiny NumPy Llama in
    float16, then one decode step; return that step's tally, ``{op: Cost}``."""
    import numpy as np

    from ..tiny import Tally, TinyLlama

    model = TinyLlama.random(cfg, seed=seed, dtype=np.float16)
    tokens = np.random.default_rng(seed).integers(0, cfg.vocab_size, size=(batch, prompt))
    logits, cache = model.prefill(tokens, max_len=prompt + 16)
    tally = Tally()
    model.decode(logits[:, -1].argmax(-1), cache, tally=tally)
    return tally.costs("decode")


def crossover_rows(models) -> list[dict]:
    """Per model: its KV cache per token in BF16 (kB) and the ``B x L`` at which a decode
    step's cache reads equal its weight reads (thousands of tokens), from :mod:`..kv`."""
    from .. import kv
    from ..models import resolve

    rows = []
    for name in models:
        cfg = resolve(name, "model")
        rows.append({"model": cfg.name,
                     "kB per token": cfg.kv_cache_bytes_per_token("bf16") / 1e3,
                     "B·L at crossover (k)": kv.crossover_context(cfg, 1) / 1e3})
    return rows


def remedy_rows(variants: dict, batch: int = 32, context: int = 8192) -> list[dict]:
    """Per layout, ``{label: (config, kv_dtype)}``: a decode step's weight and cache bytes
    (GB) and the cache's share of them, from :func:`..kv.step_traffic`."""
    from .. import kv

    rows = []
    for label, (cfg, kv_dtype) in variants.items():
        t = kv.step_traffic(cfg, batch, context, kv_dtype=kv_dtype)
        rows.append({"layout": label, "weights (GB)": t["weights"] / 1e9,
                     "KV (GB)": t["kv"] / 1e9, "KV share": t["kv"] / (t["kv"] + t["weights"])})
    return rows


# --- the KV-cache chapter -------------------------------------------------------------------
def _kv_1() -> float:
    from ..models import get_model

    return get_model("qwen2.5-7b").kv_cache_bytes_per_token("bf16") / 1e3  # kB per token


def _kv_2() -> float:
    from ..kv import crossover_context

    return crossover_context("mistral-7b", 8)  # tokens: v0.3, no sliding window


def _kv_3() -> float:
    from ..kv import attention_intensity

    return attention_intensity("qwen2.5-7b", kv_dtype="fp8")


def _kv_4() -> float:
    from ..kv import attention_intensity

    return attention_intensity("deepseek-v3", tp=16)


def _kv_5() -> float:
    from ..models import get_model
    from ..vram import max_batch

    cfg, opts = get_model("llama-3-70b"), dict(weight_dtype="fp8", n_gpus=2)
    return max_batch(cfg, "h100", 1536, 512, **opts) / max_batch(
        cfg, "h100", cfg.max_context - 512, 512, **opts)


register("kv-1", _kv_1, unit="kB", rtol=0.01,
         hint="count a key and a value per KV head (not per query head) per layer, 2 bytes each")


register("kv-2", _kv_2, unit="tokens", rtol=0.03,
         hint="divide the step's weight bytes by the batch times the KV bytes per token; the "
         "embedding is not read whole, only the rows of the batch's tokens")


register("kv-3", _kv_3, unit="FLOPs/byte", rtol=0.01,
         hint="the group size n_heads / n_kv_heads is the intensity at 2 bytes per number; "
         "an 8-bit cache halves the bytes")


register("kv-4", _kv_4, unit="FLOPs/byte", rtol=0.03,
         hint="ask which of the two is split over the GPUs with the heads, the FLOPs or the "
         "latent cache each head attends over")


register("kv-5", _kv_5, unit="(ratio)", rtol=0.05,
         hint="reserving the whole context is like every sequence being max_context long; "
         "use max_batch for both cases and divide paged by reserved")


register_hint("kv-long-context",
              "start from the longest case: the KV bytes of one 32,768-token sequence in BF16 "
              "and in FP8, times 64 users, next to the weights and one H100's memory; then ask "
              "which policy lets the mean context, not the longest, set how many fit")
