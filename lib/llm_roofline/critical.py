"""When decode turns compute-bound: the critical batch of the weight matmuls, of each kernel, and
of a whole step, and the longest context at which any batch makes a step mostly compute-bound.
"""

from __future__ import annotations

import numpy as np

from . import validate
from .calculator import decode_step
from .deployment import WEIGHT_MATMULS, _contexts, _first_true, _model, setup
from .hardware import Accelerator
from .models import ModelConfig

__all__ = ["critical_batch", "critical_batches", "max_compute_context", "step_critical_batch"]


def critical_batch(model: ModelConfig | str, accelerator: Accelerator | str, *,
                   weight_dtype: str = "bf16", compute_dtype: str | None = None, n_gpus: int = 1,
                   weight_group_size: int = 128, limit: int = 2**20) -> int | None:
    """The smallest batch at which a decode step's weight matmuls turn compute-bound.

    Taken together (their FLOP time, each at its own peak, at least their weight-byte time):
    about ``ridge * bytes_per_weight / 2``, whatever the context, since a weight matmul does 2 FLOPs
    per weight per token and reads each weight once per step (MoE: once per expert the batch
    touches, which takes more users). The attention over the KV cache never turns compute-bound
    this way for GQA/MHA: its intensity, about the query-group size ``n_heads / n_kv_heads``
    per byte of a 16-bit cache, does not grow with the batch (see ``critical_batches`` for each
    kernel's own answer). ``None`` when none up to ``limit`` (at least 1) is.
    """
    s = setup(model, accelerator, weight_dtype=weight_dtype, compute_dtype=compute_dtype,
              n_gpus=n_gpus, weight_group_size=weight_group_size)
    limit = validate.integer("limit", limit, maximum=validate.MAX_COUNT)

    def compute_bound(b):
        costs = {k: c for k, c in s.pass_costs(b, 1, 0, absorbed=True).items()
                 if k in WEIGHT_MATMULS}
        moved = sum(w + kv for _, w, kv in costs.values())
        return s.math_s(costs) >= moved / s.bandwidth

    return _first_true(compute_bound, limit)


def critical_batches(model: ModelConfig | str, accelerator: Accelerator | str, context, *,
                     weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                     compute_dtype: str | None = None, n_gpus: int = 1,
                     weight_group_size: int = 128, limit: int = 2**20,
                     attention_dtype: str | None = None) -> dict[str, int | None]:
    """Per kernel of a decode step at ``context``, the smallest compute-bound batch (or None).

    Enough to plot each kernel's regime against the batch: below its critical batch a kernel is
    memory-bound, from it on compute-bound (every kernel's intensity grows with the batch or
    stays put). Weight matmuls turn near ``ridge * bytes_per_weight / 2``; ``attention``
    (intensity about ``n_heads / n_kv_heads`` per 16-bit byte) never does for GQA/MHA, while
    MLA's absorbed attention (all heads against one latent) can; element-wise work
    (``deployment.ELEMENTWISE``: norms, RoPE, softmax, ``embed``, ``kv_write``) is fused and
    never does. Kernels with neither FLOPs nor bytes are left out.
    """
    s = setup(model, accelerator, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
              compute_dtype=compute_dtype, n_gpus=n_gpus, weight_group_size=weight_group_size,
              attention_dtype=attention_dtype)
    ctx = validate.integer("context", context, maximum=s.model.max_context)
    limit = validate.integer("limit", limit, maximum=validate.MAX_COUNT)
    kernels = [k for k, (f, w, kv) in s.pass_costs(1, 1, ctx - 1, absorbed=True).items()
               if f > 0 or w + kv > 0]

    def bound_of(kernel):
        def compute_bound(b):
            f, w, kv = s.pass_costs(b, 1, ctx - 1, absorbed=True)[kernel]
            return s.compute_bound(kernel, f, w + kv)
        return compute_bound

    return {k: _first_true(bound_of(k), limit) for k in kernels}


def step_critical_batch(model: ModelConfig | str, accelerator: Accelerator | str, context, *,
                        weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                        compute_dtype: str | None = None, n_gpus: int = 1,
                        weight_group_size: int = 128, limit: int = 2**16,
                        attention_dtype: str | None = None):
    """The smallest batch at which a decode step at ``context`` is mostly compute-bound.

    "Mostly": its compute-bound kernels take at least as long as its memory-bound ones (the
    rule of ``Estimate.decode_bound``). Past ``critical_batch`` the weight matmuls' FLOP time
    and the attention's cache time both grow in proportion to the batch, so whether the step
    is mostly compute-bound then depends on the context alone: about while
    ``2 * N_active / q_kv(context) >= I_ridge`` (FLOPs per token against the cache bytes per
    sequence). ``None`` (or -1 in an array) when no batch up to ``limit`` makes it so.
    ``context`` may be an array; each entry is searched over every batch from 1 to ``limit``.
    """
    options = dict(weight_dtype=weight_dtype, kv_dtype=kv_dtype, compute_dtype=compute_dtype,
                   n_gpus=n_gpus, weight_group_size=weight_group_size,
                   attention_dtype=attention_dtype)
    limit = validate.integer("limit", limit, maximum=2**20)
    cfg = _model(model)
    ctx = _contexts(cfg, context)
    batch = np.arange(1, limit + 1)
    answer = np.full(ctx.shape, -1, dtype=np.int64)
    for index, c in np.ndenumerate(ctx):
        compute = decode_step(cfg, accelerator, batch, int(c), **options).bound == "compute"
        if np.any(compute):
            answer[index] = int(np.argmax(compute)) + 1
    if np.ndim(answer) == 0:
        return None if answer < 0 else int(answer)
    return answer


def max_compute_context(model: ModelConfig | str, accelerator: Accelerator | str, *,
                        weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                        compute_dtype: str | None = None, n_gpus: int = 1,
                        weight_group_size: int = 128, limit: int = 2**16,
                        attention_dtype: str | None = None) -> int:
    """The longest context at which some batch (up to ``limit``) makes decode mostly compute-bound.

    0 if none does. A larger batch only raises the compute-bound share of a step (the weight
    matmuls' FLOP time grows with it, the fixed costs do not), so the test is at ``limit``;
    the share falls as the context grows, so the answer is found by bisection. Beyond it the
    memory-bound attention over the cache takes most of every step, whatever the batch.
    """
    options = dict(weight_dtype=weight_dtype, kv_dtype=kv_dtype, compute_dtype=compute_dtype,
                   n_gpus=n_gpus, weight_group_size=weight_group_size,
                   attention_dtype=attention_dtype)
    limit = validate.integer("limit", limit, maximum=2**20)
    cfg = _model(model)

    def memory_bound(c):
        return decode_step(cfg, accelerator, limit, int(c), **options).bound == "memory"

    first = _first_true(memory_bound, cfg.max_context)
    return cfg.max_context if first is None else first - 1
