"""Answer checks for the book's exercises: ``check("roofline-1", 590)``.

Each exercise has an id (``<topic>-<n>``, the topic naming its notebook: ``roofline-1`` is
in ``notebooks/03_roofline``), an expected value computed from the library when first
checked (so the book and its answers cannot drift apart), a unit, a relative tolerance and
a hint. A check says whether the answer is right, and if not, the direction and a coarse
band of how far off it is (within 10 %, 10 to 50 %, a factor of about 2, 3 to 10, an order
of magnitude or more) and a hint: never the expected value, nor a figure precise enough
to compute it from. An exercise can name typical mistakes, each with the answer it leads to
(computed, like the expected value, from the library); an answer that matches one gets the
explanation of that mistake instead of the general hint.

Notebooks add their exercises with ``register``, next to the roofline ones below.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .validate import shorten

#: answers are compared on a log scale; sizes outside this range are refused as typos
_SMALLEST, _LARGEST = 1e-100, 1e100


@dataclass(frozen=True)
class Exercise:
    """One numeric exercise; ``expected()`` computes the answer from the library."""

    id: str
    expected: Callable[[], float]
    unit: str
    rtol: float
    hint: str
    mistakes: tuple[tuple[Callable[[], float], str], ...] = ()


@dataclass(frozen=True)
class Verdict:
    """The result of a check: truthy when correct; displays as its message."""

    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def __str__(self) -> str:
        return self.message

    __repr__ = __str__


_REGISTRY: dict[str, Exercise] = {}


def register(id: str, expected: Callable[[], float], *, unit: str, hint: str,
             rtol: float = 0.01,
             mistakes: Sequence[tuple[Callable[[], float], str]] = ()) -> Exercise:
    """Add an exercise; ``expected`` is a function of no arguments (called at check time).

    ``mistakes`` pairs a function giving the answer a typical mistake leads to with what
    went wrong (``(lambda: tpot / batch, "you divided the step time by the batch")``).
    """
    if id in _REGISTRY:
        raise ValueError(f"exercise id {id!r} is already registered")
    if not 0 <= rtol < 1:
        raise ValueError(f"rtol must be in [0, 1), got {rtol!r}")
    for mistake in mistakes:
        if not (isinstance(mistake, tuple) and len(mistake) == 2 and callable(mistake[0])
                and isinstance(mistake[1], str)):
            raise ValueError(f"each mistake must be (function, explanation), got {shorten(mistake)}")
    _REGISTRY[id] = Exercise(id, expected, unit, rtol, hint, tuple(mistakes))
    return _REGISTRY[id]


def list_exercises() -> list[str]:
    """All registered exercise ids."""
    return list(_REGISTRY)


def check(id: str, answer: float) -> Verdict:
    """Compare ``answer`` (in the exercise's unit) with the expected value.

    Correct means within the exercise's relative tolerance. Otherwise the verdict says
    whether the answer is too high or too low, in which coarse band (see the module
    docstring), and gives the hint.
    """
    if id not in _REGISTRY:
        raise ValueError(f"unknown exercise {id!r}; known: {', '.join(_REGISTRY)}")
    exercise = _REGISTRY[id]
    if isinstance(answer, bool):
        raise ValueError(f"answer must be a number in {exercise.unit}, got {answer!r}")
    try:
        value = float(answer)
    except (TypeError, ValueError):
        raise ValueError(f"answer must be a number in {exercise.unit}, got {shorten(answer)}") from None
    except OverflowError:  # an integer beyond float's range, such as 10**400
        value = math.inf
    if not math.isfinite(value):
        raise ValueError(f"answer must be a finite number in {exercise.unit}, got {shorten(answer)}")
    if value != 0 and not _SMALLEST <= abs(value) <= _LARGEST:
        raise ValueError(
            f"answer must be a number in {exercise.unit} of size {_SMALLEST:g} to {_LARGEST:g} "
            f"(or 0), got {shorten(answer)}: check its unit and exponent"
        )
    expected = float(exercise.expected())
    tolerance = f"{100 * exercise.rtol:.2g} %" if exercise.rtol else "exact"
    if math.isclose(value, expected, rel_tol=exercise.rtol, abs_tol=0.0):
        return Verdict(True, f"{id}: correct ({value:g} {exercise.unit}, tolerance {tolerance}).")
    if value <= 0 < expected:
        off = "not positive"
    else:
        off = _how_far_off(math.log10(value) - math.log10(expected))
    hint = exercise.hint
    for wrong, explanation in exercise.mistakes:
        if math.isclose(value, float(wrong()), rel_tol=max(exercise.rtol, 1e-9), abs_tol=0.0):
            hint = explanation
            break
    return Verdict(
        False,
        f"{id}: not yet: {value:g} {exercise.unit} is {off} (tolerance {tolerance}). Hint: {hint}",
    )


def _how_far_off(decades: float) -> str:
    """A coarse band for ``log10(answer / expected)`` (answer positive, not within tolerance)."""
    direction = "high" if decades > 0 else "low"
    factor = 10 ** min(abs(decades), 300.0)
    if factor < 1.1:
        return f"a little too {direction} (within 10 %)"
    if factor < 1.5:
        return f"too {direction} by 10 to 50 %"
    if factor < 3:
        return f"too {direction} by a factor of about 2"
    if factor < 10:
        return f"too {direction} by a factor of 3 to 10"
    rounded = round(abs(decades))
    if rounded == 1:
        return f"an order of magnitude too {direction}"
    return f"too {direction} by a factor of about {10**rounded:,}"


# notebooks/03_roofline: the roofline model -----------------------------------------


def _roofline_1() -> float:
    from .hardware import get_accelerator

    return get_accelerator("H100 SXM").ridge("fp8")


def _roofline_2() -> float:
    from .roofline import attainable

    return attainable(64, "A100", dtype="bf16") / 1e12


def _roofline_3() -> float:
    from .hardware import get_accelerator

    return math.ceil(get_accelerator("H200").ridge("bf16"))


def _roofline_4() -> float:
    from .dtypes import bytes_per_element

    return float(bytes_per_element("bf16") / bytes_per_element("int4", 128, "fp16"))


def _h100(dtype: str) -> float:
    from .hardware import get_accelerator

    return get_accelerator("H100 SXM").ridge(dtype)


register(
    "roofline-1", _roofline_1, unit="FLOPs/byte",
    hint="the ridge is the dense FP8 peak (FLOP/s) over the bandwidth (byte/s).",
    mistakes=(
        (lambda: _h100("bf16"), "that is the BF16 ridge: use the FP8 tensor peak."),
        (lambda: 2 * _h100("fp8"), "that ridge uses the sparsity figure: the dense peak is half of it."),
    ),
)
register(
    "roofline-2", _roofline_2, unit="TFLOPS",
    hint="below the ridge the roof is the slope, I x B_mem; mind GB/s versus TFLOPS.",
    mistakes=(
        (lambda: 1e3 * _roofline_2(), "that is in GFLOPS: 1 TFLOPS is 1,000 GFLOPS."),
        (lambda: _peak_a100(), "that is the peak: 64 FLOPs/byte is below the A100's ridge, on the slope."),
    ),
)
register(
    "roofline-3", _roofline_3, unit="sequences", rtol=0.0,
    hint="in decode I = B; find the first whole B at or above the H200's BF16 ridge.",
    mistakes=(
        (lambda: _roofline_3() - 1, "a batch below the ridge is still memory-bound: round up, not down."),
        (lambda: math.ceil(_h100("bf16")), "that is the H100's ridge: the H200 has more bandwidth."),
    ),
)
register(
    "roofline-4", _roofline_4, unit="times faster",
    hint="a memory-bound kernel's time is bytes / bandwidth: compare the bytes per weight.",
    mistakes=(
        (lambda: 4.0, "half a byte per weight is not all: count one 2-byte scale per 128 weights."),
        (lambda: 1 / _roofline_4(), "that is how much slower bf16 is: divide bf16's bytes by int4's."),
    ),
)


def _peak_a100() -> float:
    from .hardware import get_accelerator

    return get_accelerator("A100").peak("bf16") / 1e12


# notebooks/07_calculator: the calculator ------------------------------------------


def _calculator_1() -> float:
    from .models import get_model

    return 16 * 8192 * get_model("llama-3-70b").kv_cache_bytes_per_token("bf16") / 1e9


def _calculator_2() -> float:
    from .calculator import max_batch

    return max_batch("llama-3-8b", "H100 SXM", 2048, 512)


def _calculator_3() -> float:
    from . import formulas as F

    expected = F.expected_experts_expr().subs({F.n_experts: 256, F.top_k: 8, F.B: 16, F.n_new: 1})
    return float(expected)


def _calculator_4() -> float:
    from .calculator import estimate

    e = estimate("llama-3-70b", "H100 SXM", 64, 1024, 256, weight_dtype="fp8", kv_dtype="fp8",
                 n_gpus=2)
    return 1e3 * e.tpot_s


def _calculator_5() -> float:
    from .models import get_model

    cfg = get_model("deepseek-v3")
    per_head = cfg.n_heads * (cfg.head_dim + cfg.v_head_dim)
    return per_head / (cfg.kv_lora_rank + cfg.qk_rope_head_dim)


register(
    "calculator-1", _calculator_1, unit="GB",
    hint="2 (K and V) x layers x KV heads x head_dim x 2 bytes, per token; GB are 1e9 bytes.",
    mistakes=(
        (lambda: 8 * _calculator_1(), "that counts the 64 query heads: the cache holds the 8 KV heads."),
        (lambda: _calculator_1() / 2, "a token caches a key and a value: count both."),
        (lambda: _calculator_1() * 1e9 / 2**30, "that is in GiB (2**30 bytes): the question asks GB."),
    ),
)
register(
    "calculator-2", _calculator_2, unit="sequences", rtol=0.02,
    hint="usable memory is 90 % of 80 GiB (2**30 bytes each); subtract the weights, divide by one "
    "sequence's cache (prompt plus generated tokens).",
    mistakes=(
        (lambda: _calculator_2() * 2560 / 2048,
         "a sequence caches its generated tokens too, not only the prompt."),
    ),
)
register(
    "calculator-3", _calculator_3, unit="experts",
    hint="an expert is missed by every one of the T tokens with probability (1 - k/E)^T.",
    mistakes=(
        (lambda: 16 * 8.0, "16 x 8 counts an expert twice when two tokens pick it: use the "
         "probability that no token picks it."),
        (lambda: 8.0, "that is one token's experts: the batch's 16 tokens pick more."),
    ),
)
register(
    "calculator-4", _calculator_4, unit="ms", rtol=0.08,
    hint="one decode step makes one token for every user, so TPOT is the step time: per GPU, "
    "its share of the weights plus every user's cache (at about the average context), over the "
    "bandwidth. The library also counts the 16-bit embedding and head and the 160 all-reduces "
    "of each step (about 3 us of latency each); a hand estimate within 8 % is right.",
    mistakes=(
        (lambda: _calculator_4() / 64, "you divided the step time by the batch: that is the "
         "amortised cost of a token, not what a user waits."),
        (lambda: 2 * _calculator_4(), "with tensor parallelism each of the two GPUs reads only its "
         "half of the weights and cache, at the same time."),
    ),
)
register(
    "calculator-5", _calculator_5, unit="times",
    hint="per-head cache: heads x (key dim + value dim); latent: kv_lora_rank + rope dim.",
    mistakes=(
        (lambda: _calculator_5() / 8, "that is the ratio per GPU under 8-way tensor parallelism: "
         "the question asks for the whole cache."),
    ),
)


# --- the KV-cache chapter -------------------------------------------------------------------
def _kv_1() -> float:
    from .models import get_model

    return get_model("qwen2.5-7b").kv_cache_bytes_per_token("bf16") / 1e3  # kB per token


def _kv_2() -> float:
    from .kv import crossover_context

    return crossover_context("llama-3-8b", 8)  # tokens


def _kv_3() -> float:
    from .kv import attention_intensity

    return attention_intensity("qwen2.5-7b", kv_dtype="fp8")


def _kv_4() -> float:
    from .kv import attention_intensity

    return attention_intensity("deepseek-v3", tp=16)


def _kv_5() -> float:
    from .calculator import max_batch
    from .models import get_model

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


# Later chapters keep their answer checks in modules of their own, which register here.
from . import exercises_ch01_ch02, exercises_ch04, exercises_ch06, exercises_machine  # noqa: E402, F401
