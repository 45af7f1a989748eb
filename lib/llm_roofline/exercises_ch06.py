"""Answer checks for ``notebooks/06_ttft_vs_tpot`` (ids ``ttft-1`` ... ``ttft-5``).

Importing this module registers them with ``llm_roofline.exercises``; ``check("ttft-1", x)``
then works as for the other chapters. (To be folded into ``exercises.py``.)
"""

from __future__ import annotations

from .exercises import register

__all__: list[str] = []

SFU_EXP_PER_S = 3.9e12
"""An H100 SXM's special-function throughput (exponentials per second) that exercise ttft-5
uses: 3.9 T/s, as the FlashAttention-3 paper (Shah et al., 2024) gives it."""


def _ttft_1() -> float:
    from .hardware import get_accelerator
    from .models import get_model

    return 2 * get_model("llama-3-8b").n_params * 4096 / get_accelerator("H100").peak("bf16") * 1e3


def _ttft_2() -> float:
    from .calculator import decode_step

    return decode_step("llama-3-8b", "H100", 48, 6144).time_s * 1e3


def _ttft_3() -> float:
    from .sla import best_batch

    return best_batch("llama-3-70b", "H100", 1024, 256, tpot_max_s=0.015, ttft_max_s=1.0,
                      arrival="joining", n_gpus=4).batch


def _ttft_4() -> float:
    from .serving import expected_tokens

    return expected_tokens(4, 0.6)


def _ttft_5() -> float:
    from .models import get_model

    cfg, prompt = get_model("llama-3-70b"), 32768  # Llama-3.1-70B: the same layers and heads
    exps = cfg.n_layers * cfg.n_heads * prompt * (prompt + 1) / 2  # causal: one per score kept
    return exps / SFU_EXP_PER_S * 1e3


register("ttft-1", _ttft_1, unit="ms",
         hint="2 FLOPs per parameter per prompt token, over the dense BF16 peak.")
register("ttft-2", _ttft_2, unit="ms",
         hint="each user waits a whole decode step per token; do not divide by the batch.")
register("ttft-3", _ttft_3, unit="sequences", rtol=0.0,
         hint="sla.best_batch with arrival='joining' and n_gpus=4; TPOT is the binding limit.")
register("ttft-4", _ttft_4, unit="tokens per step",
         hint="sum the geometric series 1 + alpha + ... + alpha**gamma.")
register("ttft-5", _ttft_5, unit="ms",
         hint="one exponential per causal score: layers x heads x L (L + 1) / 2, over 3.9e12/s.")
