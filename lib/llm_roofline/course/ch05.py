"""Chapter 5, the KV cache (``notebooks/05_kv_cache``): its figure and its answer checks.

- :func:`kv_step_bars`: one decode step's weight and KV-cache bytes as two bars;
- the answer checks ``kv-1`` ... ``kv-5``.
"""

from __future__ import annotations

from ..hardware import get_accelerator
from ..validate import axes, integer, real
from .registry import register

__all__ = ["PARTS", "kv_step_bars"]

PARTS = {"weights": "tab:blue", "KV cache": "tab:orange", "activations": "tab:green",
         "reserve": "0.75"}


def kv_step_bars(ax, batch: int, context: int, model: str = "llama-3-8b",
                 accelerator: str = "H100", ylim: float = 80.0):
    """One decode step's weight and KV-cache bytes as two bars, titled with its memory time.

    The KV-cache chapter's slider and its twins draw this. Returns the Axes.
    """
    from ..kv import step_traffic

    axes("ax", ax, optional=False)
    batch, context = integer("batch", batch), integer("context", context)
    traffic = step_traffic(model, batch, context)
    chip = get_accelerator(accelerator)
    accelerator = accelerator if isinstance(accelerator, str) else chip.name
    gb = [traffic["weights"] / 1e9, traffic["kv"] / 1e9]
    ms = 1e3 * sum(traffic.values()) / chip.bandwidth
    ax.bar(["weights", "KV cache"], gb, color=[PARTS["weights"], PARTS["KV cache"]])
    ax.set(ylabel="bytes read per step (GB)", ylim=(0, real("ylim", ylim, minimum=0, open_min=True)),
           title=f"B = {batch}, context {context:,}: {ms:.1f} ms on an {accelerator}")
    return ax


# --- the KV-cache chapter -------------------------------------------------------------------
def _kv_1() -> float:
    from ..models import get_model

    return get_model("qwen2.5-7b").kv_cache_bytes_per_token("bf16") / 1e3  # kB per token


def _kv_2() -> float:
    from ..kv import crossover_context

    return crossover_context("llama-3-8b", 8)  # tokens


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
         hint="the FLOPs are split over the GPUs with the heads, but the latent is not: each "
         "GPU reads all of it")


register("kv-5", _kv_5, unit="(ratio)", rtol=0.05,
         hint="reserving the whole context is like every sequence being max_context long; "
         "use max_batch for both cases and divide paged by reserved")
