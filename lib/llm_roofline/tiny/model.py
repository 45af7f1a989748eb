"""A Llama-style decoder in NumPy: RMSNorm, RoPE, grouped-query attention, SwiGLU, a KV cache.

Weights are a dict keyed by Hugging Face Llama parameter names, shaped as there
(``q_proj.weight`` is ``[n_heads*head_dim, hidden]``), so a Llama checkpoint loads unchanged:
``TinyLlama(cfg, {k: v.numpy() for k, v in LlamaForCausalLM(...).state_dict().items()})``.
Activations are kept as 2-D ``[tokens, features]`` arrays, so every projection is one BLAS
matrix product ``x @ W``. The model keeps each matrix as GPT-2 and picoGPT do, ``[d_in, d_out]``
(the transpose of Hugging Face's), which OpenBLAS multiplies a few per cent faster than the
transposed view; ``model.w`` still shows every weight under its Hugging Face name and shape,
as a view. The products that read the same input run as one, their weights side by side (q, k
and v; gate and up), and a prefill's largest element-wise work (softmax, SwiGLU)
splits its rows among the BLAS's threads (:func:`on_threads`).

The forward pass reads as the transformer it is, after jaymody/picoGPT: :meth:`TinyLlama._forward`
(embed, blocks, norm, head), :meth:`~TinyLlama._block` (attention and MLP, each added to the
residual stream), :meth:`~TinyLlama._attention`, :meth:`~TinyLlama._mlp`, then one method per
operation of :data:`llm_roofline.formulas.OPS`. Each operation makes one call
``self._record(op, flops, reads, writes)`` naming the arrays it read and wrote. With a
:class:`~llm_roofline.tiny.Tally` that call adds the FLOPs and, by the one byte rule of
:meth:`~TinyLlama._record`, the bytes of those arrays (the conventions of
:mod:`llm_roofline.formulas`, not a count of executed instructions); without one it does
nothing.

Shapes in comments: ``B`` sequences of ``n`` new tokens, ``T = B*n`` rows, ``S`` keys after the
pass, ``d`` hidden size, ``f`` MLP width, ``H`` query heads, ``G`` KV heads, ``g = H/G`` query
heads per KV head, ``dh`` head size, ``V`` vocabulary.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .. import formulas, measure, validate
from ..models import resolve
from .tally import Tally

__all__ = ["KVCache", "TinyLlama", "weight_shapes"]

STORAGE_DTYPES = (np.float16, np.float32, np.float64)

MAX_NEW_TOKENS = 1 << 16
"""The most tokens one ``generate`` call makes (65,536): a NumPy decode step takes at least
tens of microseconds, so more would run for minutes whatever the model's context allows."""


SMALL_ALLOCATION = 1 << 26
"""Bytes (64 MiB) below which :func:`_fits` does not ask the system for its free memory: the
question takes about 0.1 ms, 1 % of a decode step, and a machine without twice that to spare
fails elsewhere first."""


def _fits(what: str, nbytes: float) -> None:
    """Refuse ``nbytes`` beyond half of what the system and this process's own memory limit
    (``RLIMIT_AS``, the cgroup's ``memory.max``) leave for a new allocation."""
    if nbytes < SMALL_ALLOCATION:
        return
    validate.allocation(what, nbytes)
    free = measure.memory_free_bytes()
    if free is not None and nbytes > free // 2:
        raise ValueError(
            f"{what} would take {nbytes / 2**20:,.0f} MiB, more than half of the "
            f"{free / 2**20:,.0f} MiB this process may still allocate; choose smaller sizes")


# --- the math, one function per formula ----------------------------------------------------
def rms_norm(x, w, eps, out=None):  # x [T, d], w [d] -> [T, d], into out if given
    mean_square = np.einsum("td,td->t", x, x)[:, None] / x.shape[-1]  # [T, 1], no x*x array
    y = np.multiply(x, 1 / np.sqrt(mean_square + eps), out=out)
    y *= w
    return y


def rope(x, cos, sin):  # x [B, n, heads, dh], cos and sin [n, dh] (their halves equal)
    """Rotate each pair (x1, x2) = (x[j], x[j + dh/2]) by its position's angle: Hugging Face's
    ``x*cos + rotate_half(x)*sin``, written half by half so that no rotated copy of x is made."""
    h = x.shape[-1] // 2
    c, s = cos[:, None, :h], sin[:, None, :h]  # [n, 1, dh/2]
    x1, x2 = x[..., :h], x[..., h:]
    out = np.empty(x.shape, x.dtype)
    np.multiply(x1, c, out=out[..., :h])
    out[..., :h] -= x2 * s  # x1 cos - x2 sin
    np.multiply(x2, c, out=out[..., h:])
    out[..., h:] += x1 * s  # x2 cos + x1 sin
    return out


def softmax(x):  # over the last axis, in place: x is overwritten and returned
    x -= x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
    return x


def silu(x, out=None):  # x * sigmoid(x) = x / (1 + exp(-x)), into out if given
    y = np.negative(x, out=out)
    np.exp(y, out=y)
    y += 1
    return np.divide(x, y, out=y)


PARALLEL_MIN = 1 << 20
"""Elements from which an element-wise operation splits its rows among the BLAS's threads
(1,048,576: a prefill's attention scores and MLP activations). Smaller arrays stay on one
thread, where waking a second costs more than it saves: on a 2-core host the nine RMSNorms of
a 512-token prefill ([512, 1024] each) took 4.9 ms on one thread and 8.2 ms split in two."""

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0  # the process that made _pool: a forked child makes its own (the threads stay behind)


def on_threads(fn, *arrays):  # fn(*blocks) for blocks of the arrays' rows (axis 0), in place
    """Run ``fn`` on row blocks of ``arrays`` on as many threads as the BLAS has (NumPy's
    element-wise loops release the GIL), as PyTorch runs its element-wise code on every core.
    Small arrays, or a BLAS on one thread, run ``fn(*arrays)`` here."""
    global _pool, _pool_pid
    rows = arrays[0].shape[0]
    threads = 1 if arrays[0].size < PARALLEL_MIN else min(rows, measure.blas_thread_count(),
                                                          os.cpu_count() or 1)
    if threads <= 1:
        return fn(*arrays)
    if _pool is None or _pool_pid != os.getpid():
        _pool = ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="tiny-elementwise")
        _pool_pid = os.getpid()
    cuts = [rows * i // threads for i in range(threads + 1)]
    blocks = [[a[lo:hi] for a in arrays] for lo, hi in zip(cuts, cuts[1:], strict=False)]
    others = [_pool.submit(fn, *block) for block in blocks[1:]]
    fn(*blocks[0])  # this thread takes the first block
    for job in others:
        job.result()
    return None


def rope_tables(cfg, start, stop, dtype):
    """cos and sin of positions ``start..stop-1``, ``[stop - start, head_dim]`` each."""
    inv_freq = 1.0 / cfg.rope_theta ** (np.arange(0, cfg.head_dim, 2) / cfg.head_dim)
    angles = np.outer(np.arange(start, stop), inv_freq)  # [n, dh/2]
    angles = np.concatenate([angles, angles], axis=-1)  # [n, dh]: pairs (j, j + dh/2)
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def weight_shapes(cfg) -> dict[str, tuple[int, ...]]:
    """Hugging Face Llama parameter names and shapes for ``cfg``."""
    cfg = resolve(cfg, "cfg", names=False)
    d, f = cfg.hidden_size, cfg.intermediate_size
    q, kv = cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
    shapes = {"model.embed_tokens.weight": (cfg.vocab_size, d)}
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        shapes |= {
            p + "input_layernorm.weight": (d,),
            p + "self_attn.q_proj.weight": (q, d),
            p + "self_attn.k_proj.weight": (kv, d),
            p + "self_attn.v_proj.weight": (kv, d),
            p + "self_attn.o_proj.weight": (d, q),
            p + "post_attention_layernorm.weight": (d,),
            p + "mlp.gate_proj.weight": (f, d),
            p + "mlp.up_proj.weight": (f, d),
            p + "mlp.down_proj.weight": (d, f),
        }
        if cfg.qkv_bias:
            shapes |= {
                p + "self_attn.q_proj.bias": (q,),
                p + "self_attn.k_proj.bias": (kv,),
                p + "self_attn.v_proj.bias": (kv,),
            }
    shapes["model.norm.weight"] = (d,)
    if not cfg.tie_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, d)
    return shapes


def _check_config(cfg) -> None:
    """``cfg`` if TinyLlama runs it exactly: a dense Llama-style decoder (SwiGLU, pre-norms,
    full attention); anything else is refused rather than run as plain Llama."""
    cfg = resolve(cfg, "cfg", names=False)
    for field in ("n_routed_experts", "kv_lora_rank", "q_lora_rank", "sliding_window"):
        if getattr(cfg, field, 0):
            raise ValueError(f"TinyLlama runs dense decoders only; {cfg.name!r} sets {field}")
    for field in ("post_norms", "qk_norm"):
        if getattr(cfg, field):
            raise ValueError(f"TinyLlama runs the Llama subset; {cfg.name!r} sets {field}")
    if cfg.mlp_activation != "silu":
        raise ValueError(f"TinyLlama runs the Llama subset: mlp_activation must be 'silu' "
                         f"(SwiGLU), {cfg.name!r} has {cfg.mlp_activation!r}")
    if not cfg.gated_mlp:
        raise ValueError("TinyLlama runs the Llama subset: gated_mlp must be True (SwiGLU)")


def _float_dtype(name: str, dtype) -> np.dtype:
    """A storage dtype: float16, float32 or float64."""
    try:
        dt = None if dtype is None else np.dtype(dtype)  # np.dtype(None) would be float64
    except TypeError:
        dt = None
    if dt not in STORAGE_DTYPES:
        raise ValueError(f"{name} must be float16, float32 or float64, got {validate.shorten(dtype)}")
    return dt


_HF_NAMES = {"q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj",
             "v_proj": "self_attn.v_proj", "o_proj": "self_attn.o_proj",
             "gate_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj", "down_proj": "mlp.down_proj"}

_CACHE_LAYOUT = "[n_layers, batch, n_kv_heads, max_len, head_dim]"


@dataclass
class KVCache:
    """Preallocated keys and values, ``[n_layers, batch, n_kv_heads, max_len, head_dim]`` each,
    of float16, float32 or float64; the first ``length`` positions are filled."""

    k: np.ndarray
    v: np.ndarray
    length: int = 0

    def __post_init__(self) -> None:
        for name in ("k", "v"):
            a = getattr(self, name)
            if not isinstance(a, np.ndarray) or a.ndim != 5:
                got = f"shape {a.shape}" if isinstance(a, np.ndarray) else validate.shorten(a)
                raise ValueError(f"KVCache.{name} must be a 5-D array {_CACHE_LAYOUT}, got {got}")
            _float_dtype(f"KVCache.{name} dtype", a.dtype)
        if self.v.shape != self.k.shape or self.v.dtype != self.k.dtype:
            raise ValueError(
                f"KVCache.v must match KVCache.k, got {self.v.dtype} {self.v.shape} "
                f"and {self.k.dtype} {self.k.shape}"
            )
        self.length = validate.integer("KVCache.length", self.length, minimum=0, maximum=self.max_len)

    @classmethod
    def empty(cls, cfg, batch: int, max_len: int, dtype=np.float32) -> KVCache:
        """An empty cache for ``batch`` sequences of up to ``max_len`` tokens of ``cfg``."""
        cfg = resolve(cfg, "cfg", names=False)
        batch = validate.integer("batch", batch)
        max_len = validate.integer("max_len", max_len, maximum=cfg.max_context)
        shape = (cfg.n_layers, batch, cfg.n_kv_heads, max_len, cfg.head_dim)
        dtype = _float_dtype("KVCache dtype", dtype)
        _fits(f"a KV cache of batch {batch:,} and max_len {max_len:,}",
              2 * math.prod(shape) * dtype.itemsize)
        return cls(np.zeros(shape, dtype), np.zeros(shape, dtype))

    @property
    def batch(self) -> int:
        """Sequences the cache holds."""
        return self.k.shape[1]

    @property
    def max_len(self) -> int:
        """Tokens per sequence the cache has room for."""
        return self.k.shape[3]


class TinyLlama:
    """A Llama-style decoder in NumPy that can count its own FLOPs and bytes.

    ``weights`` maps Hugging Face Llama names to arrays (see :func:`weight_shapes`), all of one
    dtype: float16, float32 or float64. Float16 is storage only (weights and KV cache);
    activations are then float32. A tied model (``cfg.tie_embeddings``) may also list
    ``lm_head.weight``, as PyTorch's ``state_dict()`` does, if it equals the embedding.
    ``skip_masked=True`` computes attention one query row at a time over only the keys the
    causal mask keeps (the work of a causal kernel, ``counts.op_costs(causal=True)``); the
    default computes the whole score block and masks it (``causal=False``). Both give the
    same logits.
    """

    def __init__(self, cfg, weights: Mapping[str, np.ndarray], *, skip_masked: bool = False):
        _check_config(cfg)
        if cfg.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {cfg.head_dim}")
        self.skip_masked = validate.boolean("skip_masked", skip_masked)
        weights = self._check_weights(cfg, weights)
        self.cfg = cfg
        self.w = weights  # Hugging Face name -> array, exactly the names of weight_shapes(cfg)
        self.dtype = next(iter(weights.values())).dtype  # storage: weights and KV cache
        self.act = np.dtype(np.float32) if self.dtype == np.float16 else self.dtype  # activations
        self._cast = self.act != self.dtype  # float16 storage: cast weights and cache to float32
        # per layer, each operation's weights under the operation's name (picoGPT's "blocks")
        w = self.w
        self.layers = []
        for i in range(cfg.n_layers):
            p = f"model.layers.{i}."
            layer = {"attn_norm": w[p + "input_layernorm.weight"],
                     "mlp_norm": w[p + "post_attention_layernorm.weight"]}
            # each matrix is kept [d_in, d_out] (picoGPT's x @ W); the Hugging Face name shows
            # its transpose, a view. Products that read the same input are one matrix, their
            # columns side by side: q, k, v (qkv_proj) and gate, up (gate_up_proj); one large
            # GEMM runs nearer the peak than several small ones. W is [d_in, sum of d_out].
            for fused, ops in (("qkv_proj", ("q_proj", "k_proj", "v_proj")),
                               ("gate_up_proj", ("gate_proj", "up_proj"))):
                names = [p + _HF_NAMES[op] for op in ops]
                W = np.ascontiguousarray(np.concatenate([w[name + ".weight"] for name in names]).T)
                biases = [w.get(name + ".bias") for name in names]
                b = None if biases[0] is None else np.concatenate(biases)
                start, cols = 0, []
                for op, name in zip(ops, names, strict=True):
                    stop = start + w[name + ".weight"].shape[0]
                    w[name + ".weight"] = W[:, start:stop].T  # [d_out, d_in], as Hugging Face
                    if b is not None:
                        w[name + ".bias"] = b[start:stop]
                    layer[op] = (W[:, start:stop], None if b is None else b[start:stop])
                    cols.append(stop - start)
                    start = stop
                layer[fused] = (W, b, ops, tuple(cols))
            for op in ("o_proj", "down_proj"):
                name = p + _HF_NAMES[op] + ".weight"
                W = np.ascontiguousarray(w[name].T)  # [d_in, d_out]
                w[name] = W.T
                layer[op] = (W, None)
            self.layers.append(layer)
        self.embed = w["model.embed_tokens.weight"]  # [V, d]: rows are gathered
        if cfg.tie_embeddings:
            self.head = self.embed.T  # [d, V], a view: the table is stored once
        else:
            self.head = np.ascontiguousarray(w["lm_head.weight"].T)  # [d, V]
            w["lm_head.weight"] = self.head.T
        self._tally: Tally | None = None  # set for the duration of a pass that tallies
        self._scratch_buffers: dict = {}  # a pass's temporary arrays, reused layer to layer
        self._rot = rope_tables(cfg, 0, 0, self.act)  # cos, sin of the positions seen so far

    @classmethod
    def random(cls, cfg, seed: int = 0, dtype=np.float32, **kwargs) -> TinyLlama:
        """Random weights: N(0, 1/fan_in) matrices, N(0, 1) embeddings, unit norm weights."""
        _check_config(cfg)
        rng = np.random.default_rng(validate.integer("seed", seed, minimum=0, maximum=2**64 - 1))
        dtype = _float_dtype("dtype", dtype)
        shapes = weight_shapes(cfg)
        largest = max(math.prod(shape) for shape in shapes.values())
        validate.allocation(f"random weights of {cfg.name!r}",
                            cfg.n_params * dtype.itemsize + 8 * largest)
        weights = {}
        for name, shape in shapes.items():
            if name.endswith("norm.weight"):
                w = np.ones(shape)
            elif name.endswith("bias"):
                w = 0.1 * rng.standard_normal(shape)
            elif "embed" in name:
                w = rng.standard_normal(shape)
            else:
                w = rng.standard_normal(shape) / np.sqrt(shape[1])
            weights[name] = w.astype(dtype)
        return cls(cfg, weights, **kwargs)

    # --- public passes --------------------------------------------------------------------
    def prefill(self, tokens, cache: KVCache | None = None, *, max_len: int | None = None,
                tally: Tally | None = None, logits: str = "all"):
        """Run ``tokens`` (int ``[B, L]``): logits ``[B, L, vocab]`` and the cache.

        A new cache holds ``max_len`` positions (default ``cfg.max_context``); an existing
        ``cache`` is extended (chunked prefill). ``logits="all"`` (a forward pass, as
        transformers' ``model(ids)``) computes the LM head at every position;
        ``logits="last"`` only at each sequence's last one, where a token is sampled (logits
        ``[B, 1, vocab]``), as ``generate`` does and ``counts.op_costs`` counts by default.
        """
        logits = validate.choice("logits", logits, ("last", "all"))
        tokens = self._check_tokens(tokens, 2, "tokens")
        top = self.cfg.max_context
        if cache is None:
            if tokens.shape[1] > top:
                raise ValueError(
                    f"tokens: length {tokens.shape[1]} exceeds max_context {top} of {self.cfg.name!r}"
                )
            max_len = top if max_len is None else validate.integer("max_len", max_len, maximum=top)
            cache = KVCache.empty(self.cfg, tokens.shape[0], max_len, self.dtype)
        elif max_len is not None:
            raise ValueError("max_len sizes a new cache: pass max_len or cache, not both")
        return self._run(tokens, cache, tally, "prefill", logits == "last"), cache

    def decode(self, next_tokens, cache: KVCache, *, tally: Tally | None = None):
        """One step: ``next_tokens`` (int ``[B]``) -> logits ``[B, vocab]`` and the cache."""
        tokens = self._check_tokens(next_tokens, 1, "next_tokens")
        return self._run(tokens[:, None], cache, tally, "decode")[:, 0], cache

    def generate(self, prompt, n_new: int, *, temperature: float = 0.0, seed: int | None = None,
                 tally: Tally | None = None, logits: str = "last"):
        """Prompt (int ``[B, L]``) plus ``n_new`` tokens, int ``[B, L + n_new]``.

        Greedy at ``temperature=0``; otherwise sampled from ``softmax(logits/temperature)``
        with ``numpy.random.default_rng(seed)``. The prefill computes the LM head at each
        prompt's last position only (``logits="last"``, as transformers' ``generate`` with
        ``logits_to_keep=1``); ``logits="all"`` computes it at every position (the tokens are
        the same, the tally counts the wasted head).
        """
        top = self.cfg.max_context
        n_new = validate.integer("n_new", n_new, maximum=min(top, MAX_NEW_TOKENS))
        temperature = validate.real("temperature", temperature, minimum=0)
        if seed is not None:
            seed = validate.integer("seed", seed, minimum=0, maximum=2**64 - 1)
        prompt = self._check_tokens(prompt, 2, "prompt")
        length = prompt.shape[1]
        if length + n_new > top:
            raise ValueError(
                f"prompt length {length} + n_new {n_new} = {length + n_new} exceeds "
                f"max_context {top} of {self.cfg.name!r}"
            )
        rng = np.random.default_rng(seed)
        out = [prompt]
        logits, cache = self.prefill(prompt, max_len=length + n_new, tally=tally, logits=logits)
        logits = logits[:, -1]
        for step in range(n_new):
            if temperature == 0:
                nxt = logits.argmax(axis=-1)
            else:  # inverse CDF: the first token whose cumulative probability reaches u
                z = logits.astype(np.float64)
                z -= z.max(axis=-1, keepdims=True)  # <= 0: a tiny temperature gives -inf, not NaN
                with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                    z /= temperature
                p = softmax(z)
                u = rng.random((p.shape[0], 1))
                nxt = np.minimum((p.cumsum(axis=-1) < u).sum(axis=-1), p.shape[-1] - 1)
            out.append(nxt[:, None])
            if step < n_new - 1:
                logits, cache = self.decode(nxt, cache, tally=tally)
        return np.concatenate(out, axis=1)

    # --- the transformer ------------------------------------------------------------------
    def _forward(self, tokens, cache, last=False):  # tokens [B, n] -> logits [B, n or 1, V]
        B, n = tokens.shape
        past = cache.length
        x = self._embed(tokens)  # [T, d]
        rot = self._rope_tables(past, past + n)  # cos, sin [n, dh]
        for i, layer in enumerate(self.layers):
            x = self._block(x, layer, cache.k[i], cache.v[i], past, rot)  # [T, d]
        self._scratch_buffers.clear()  # the pass's temporary arrays go back to the system
        cache.length = past + n
        x = self._norm("final_norm", x, self.w["model.norm.weight"])  # [T, d]
        if last:  # the head only where a token is sampled: each sequence's last position
            x, n = np.ascontiguousarray(x.reshape(B, n, -1)[:, -1]), 1  # [B, d]
        logits = self._linear("lm_head", x, self.head)  # [B*n, V]
        # where logits are computed a token is sampled: softmax (and top-p's cumulative sum)
        # over the vocabulary, counted whether generate then takes the argmax or samples
        self._record("sampling", formulas.SAMPLING_FLOPS * logits.size, (logits,), (logits,))
        return logits.reshape(B, n, -1)  # [B, n, V]

    def _block(self, x, layer, k_cache, v_cache, past, rot):  # x [T, d] -> [T, d]
        h = self._norm("attn_norm", x, layer["attn_norm"])
        x = self._residual(x, self._attention(h, layer, k_cache, v_cache, past, rot))
        h = self._norm("mlp_norm", x, layer["mlp_norm"])
        return self._residual(x, self._mlp(h, layer))

    def _attention(self, h, layer, k_cache, v_cache, past, rot):  # h [T, d] -> [T, d]
        """Grouped-query attention; the new keys and values go to the cache of this layer,
        ``k_cache`` and ``v_cache`` ``[B, G, max_len, dh]``."""
        cfg = self.cfg
        H, G, dh = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        B, n = k_cache.shape[0], h.shape[0] // k_cache.shape[0]
        q, k, v = self._linears(h, *layer["qkv_proj"])  # [T, H*dh], [T, G*dh], [T, G*dh]
        q, k, v = q.reshape(B, n, H, dh), k.reshape(B, n, G, dh), v.reshape(B, n, G, dh)
        q, k = self._rope(q, k, *rot)  # [B, n, H, dh], [B, n, G, dh]
        K, V = self._kv_cache(k, v, k_cache, v_cache, past)  # [B, G, S, dh], S = past + n
        q = q.reshape(B, n, G, H // G, dh).transpose(0, 2, 3, 1, 4)  # [B, G, g, n, dh]
        a = self._causal_attention(q, K, V, past)  # [B, G, g, n, dh]
        a = a.transpose(0, 3, 1, 2, 4).reshape(B * n, H * dh)  # [T, H*dh]
        return self._linear("o_proj", a, *layer["o_proj"])  # [T, d]

    def _mlp(self, h, layer):  # SwiGLU: h [T, d] -> [T, d]
        gate, up = self._linears(h, *layer["gate_up_proj"])  # [T, f] each
        return self._linear("down_proj", self._swiglu(gate, up), *layer["down_proj"])

    def _causal_attention(self, q, K, V, past):  # q [B, G, g, n, dh], K, V [B, G, S, dh]
        """Causal attention -> [B, G, g, n, dh]; new token j sees the first past + j + 1 keys."""
        B, G, g, n, dh = q.shape
        # the scores' scale 1/sqrt(dh), applied to q: [B, G, g, n, dh] numbers, not [.., S]
        q = np.multiply(q, 1.0 / math.sqrt(dh), out=np.empty(q.shape, q.dtype))  # contiguous
        if self.skip_masked:  # one query row at a time, over only the keys it may see
            rows = []
            for j in range(n):
                Kj, Vj = K[:, :, : past + j + 1], V[:, :, : past + j + 1]
                rows.append(self._scores_softmax_values(q[:, :, :, j], Kj, Vj, None))
            return np.stack(rows, axis=3)
        mask = self._mask(past, n) if n > 1 else None  # [n, S]
        o = self._scores_softmax_values(q.reshape(B, G, g * n, dh), K, V, mask)
        return o.reshape(B, G, g, n, dh)

    def _mask(self, past, n):  # [n, S]: the same for every layer, so made once per pass
        """A bias: 0 where new token j may see key s (s <= past + j), -inf elsewhere."""
        mask = self._scratch_buffers.get("mask")
        if mask is None or mask.shape != (n, past + n):
            seen = np.arange(past + n) <= past + np.arange(n)[:, None]  # [n, S]
            mask = self._scratch_buffers["mask"] = np.where(seen, 0, -np.inf).astype(self.act)
        return mask

    def _scores_softmax_values(self, q, K, V, mask):  # q [B, G, r, dh], K, V [B, G, S, dh]
        s = self._attn_scores(q, K)  # [B, G, r, S]
        p, total = self._softmax(s, mask)  # in the scores' buffer; each row's sum [B, G, r, 1]
        return self._attn_values(p, V, total)  # [B, G, r, dh]

    def _attn_scores(self, q, K):  # q [B, G, r, dh] (scaled), K [B, G, S, dh] -> [B, G, r, S]
        s = self._scratch("scores", (*q.shape[:-1], K.shape[-2]))
        if q.shape[-2] > 16:  # one BLAS product per (sequence, KV head)
            np.matmul(q, K.swapaxes(-1, -2), out=s)
        else:  # a decode's few query rows: OpenBLAS runs K q^T several times faster than q K^T
            s[...] = np.matmul(K, q.swapaxes(-1, -2)).swapaxes(-1, -2)
        self._record("attn_scores", 2 * q.shape[-1] * s.size, (q,), (s,))  # K: in kv_read
        return s

    def _softmax(self, s, mask):  # s [B, G, r, S], masked, in place -> s, each row's sum
        """The softmax's exponentials exp(s - max), in place, and each row's sum: the division
        by it waits for :meth:`_attn_values`, where a row has dh numbers instead of S (as
        FlashAttention does)."""
        def rows(x, total):  # x [heads, n, S] with a mask [n, S], or [rows, S] without
            if mask is not None:
                x += mask
            x -= x.max(axis=-1, keepdims=True)
            np.exp(x, out=x)
            np.einsum("...s->...", x, out=total)  # each row's sum; x.sum is 3x slower here

        total = np.empty((*s.shape[:-1], 1), s.dtype)  # [B, G, r, 1]
        # rows are (head, query) pairs: view the (contiguous) scores as [B*H, n, S]
        rows_shape = (-1, *(s.shape[-1:] if mask is None else mask.shape))
        on_threads(rows, s.reshape(rows_shape), total.reshape(rows_shape[:-1]))
        self._record("softmax", 6 * s.size, (s,), (s,))
        return s, total

    def _attn_values(self, p, V, total):  # p [B, G, r, S], V [B, G, S, dh], total [B, G, r, 1]
        o = p @ V  # [B, G, r, dh]
        o /= total  # the softmax's division (see _softmax)
        self._record("attn_values", 2 * o.shape[-1] * p.size, (p,), (o,))
        return o

    def _rope_tables(self, start, stop):  # cos, sin [stop - start, dh], computed once per position
        if self._rot[0].shape[0] < stop:
            self._rot = rope_tables(self.cfg, 0, min(max(stop, 2 * self._rot[0].shape[0]),
                                                     self.cfg.max_context), self.act)
        cos, sin = self._rot
        return cos[start:stop], sin[start:stop]

    # --- one method per operation of formulas.OPS -----------------------------------------
    def _embed(self, tokens):  # tokens [B, n] -> [T, d]: a gather, no arithmetic
        rows = self.embed[tokens.reshape(-1)]
        x = rows.astype(self.act, copy=False)
        self._record("embed", 0, (rows,), (x,))
        return x

    def _norm(self, op, x, w):  # RMSNorm: x [T, d], w [d] -> [T, d]
        y = np.empty(x.shape, self.act)  # float32 for float16 w: x is float32
        on_threads(lambda rows, out: rms_norm(rows, w, self.cfg.norm_eps, out=out), x, y)
        self._record(op, 4 * x.size, (x, w), (y,))
        return y

    def _linears(self, x, W, b, ops, cols):  # x [T, d_in] -> one [T, d_out] per operation
        """Products of one input as one GEMM: ``W`` ``[d_in, sum d_out]`` the weights of ``ops``
        side by side (``cols`` columns each), ``b`` their biases or None. Each output is a view
        of the product ``[T, sum d_out]``, and each operation is tallied as if it ran alone."""
        y = self._scratch(ops, (x.shape[0], W.shape[1]))  # [T, sum d_out]
        np.matmul(x, W.astype(self.act) if self._cast else W, out=y)  # one GEMM (GEMV at T=1)
        if b is not None:
            y += b
        outs, start = [], 0
        for op, n_cols in zip(ops, cols, strict=True):
            stop = start + n_cols
            Wop, out = W[:, start:stop], y[:, start:stop]
            if b is None:
                self._record(op, 2 * x.shape[0] * Wop.size, (x, Wop), (out,))
            else:
                self._record(op, 2 * x.shape[0] * Wop.size + out.size, (x, Wop, b[start:stop]),
                             (out,))
            outs.append(out)
            start = stop
        return outs

    def _linear(self, op, x, W, b=None):  # x [T, d_in], W [d_in, d_out], b [d_out] -> [T, d_out]
        y = x @ (W.astype(self.act) if self._cast else W)  # one BLAS GEMM (GEMV at T=1)
        if b is None:
            self._record(op, 2 * x.shape[0] * W.size, (x, W), (y,))
        else:
            y += b
            self._record(op, 2 * x.shape[0] * W.size + y.size, (x, W, b), (y,))
        return y

    def _rope(self, q, k, cos, sin):  # q [B, n, H, dh], k [B, n, G, dh], cos, sin [n, dh]
        qr, kr = rope(q, cos, sin), rope(k, cos, sin)
        self._record("rope", 3 * (q.size + k.size), (q, k, cos, sin), (qr, kr))
        return qr, kr

    def _kv_cache(self, k, v, k_cache, v_cache, past):  # k, v [B, n, G, dh] -> K, V [B, G, S, dh]
        S = past + k.shape[1]
        kc, vc = k_cache[:, :, past:S], v_cache[:, :, past:S]  # [B, G, n, dh]
        kc[...] = k.transpose(0, 2, 1, 3)
        vc[...] = v.transpose(0, 2, 1, 3)
        self._record("kv_write", 0, (k, v), (kc, vc))
        K, V = k_cache[:, :, :S], v_cache[:, :, :S]  # every key and value, as stored
        self._record("kv_read", 0, (K, V), ())
        return (K.astype(self.act), V.astype(self.act)) if self._cast else (K, V)  # float16 cache

    def _swiglu(self, gate, up):  # silu(gate) * up: [T, f]
        def rows(g, u, out):
            silu(g, out=out)
            out *= u

        m = self._scratch("mlp_act", gate.shape)
        on_threads(rows, gate, up, m)
        self._record("mlp_act", 5 * m.size, (gate, up), (m,))
        return m

    def _residual(self, x, y):  # x + y, into y (a fresh output)
        y += x
        self._record("residual", y.size, (x, y), (y,))
        return y

    def _scratch(self, name, shape):  # an array of the activation dtype for a pass's temporaries
        """A buffer that every layer of a pass reuses for the same temporary (the attention
        scores, the fused products' outputs, the SwiGLU): no new memory to fault in each
        layer. Nothing keeps it past the layer that fills it."""
        buf = self._scratch_buffers.get(name)
        if buf is None or buf.shape != shape:
            buf = self._scratch_buffers[name] = np.empty(shape, self.act)
        return buf

    # --- the tally ------------------------------------------------------------------------
    def _record(self, op, flops, reads, writes):
        """Tally one operation: ``flops``, and as bytes the sizes of the arrays it read and
        wrote (the one byte rule). Does nothing when the pass has no tally."""
        tally = self._tally
        if tally is not None:
            read = written = 0
            for a in reads:
                read += a.nbytes
            for a in writes:
                written += a.nbytes
            tally.add(op, flops, read, written)

    def _run(self, tokens, cache, tally, phase, last=False):  # check, run a pass, tally it
        self._check_cache(cache, *tokens.shape)
        cfg, (B, n) = self.cfg, tokens.shape
        span = cache.length + n
        working = B * n * (cfg.vocab_size + 3 * cfg.intermediate_size + 4 * cfg.hidden_size
                           + cfg.n_heads * (span if not self.skip_masked else 1))
        _fits(f"a pass of {B:,} x {n:,} tokens", working * self.act.itemsize)
        if tally is None:
            return self._forward(tokens, cache, last)
        if not isinstance(tally, Tally):
            raise ValueError(f"tally must be a Tally or None, got {validate.shorten(tally)}")
        tally.begin(phase, tokens.shape[0], tokens.shape[1], cache.length)
        self._tally = tally
        try:
            logits = self._forward(tokens, cache, last)
        finally:
            self._tally = None
        tally.end()
        return logits

    # --- input checks ---------------------------------------------------------------------
    @staticmethod
    def _check_weights(cfg, weights) -> dict[str, np.ndarray]:
        """The weights ``weight_shapes(cfg)`` names, as contiguous arrays of one float dtype."""
        if not isinstance(weights, Mapping):
            raise ValueError(
                f"weights must be a dict of Hugging Face names to arrays, got {validate.shorten(weights)}"
            )
        shapes = weight_shapes(cfg)
        arrays = {}
        for name, value in weights.items():
            try:
                arrays[name] = np.asarray(value)
            except Exception as err:  # e.g. a bfloat16 torch tensor
                raise ValueError(f"weight {name} is not a NumPy array: {err}") from None
        if cfg.tie_embeddings and "lm_head.weight" in arrays:  # PyTorch lists a tied head twice
            head, emb = arrays.pop("lm_head.weight"), arrays.get("model.embed_tokens.weight")
            if emb is not None and not (head.shape == emb.shape and np.array_equal(head, emb)):
                raise ValueError(
                    f"weights: lm_head.weight differs from model.embed_tokens.weight, but "
                    f"{cfg.name!r} ties them (tie_embeddings=True)"
                )
        missing = sorted(set(shapes) - set(arrays))
        extra = set(arrays) - set(shapes)
        extra = sorted(k for k in extra if not k.endswith("rotary_emb.inv_freq"))  # old buffers
        if missing or extra:
            raise ValueError(
                f"weights do not match {cfg.name!r}: missing {missing[:5]}, unexpected {extra[:5]}"
            )
        dtypes = sorted({str(arrays[k].dtype) for k in shapes})
        if len(dtypes) != 1 or np.dtype(dtypes[0]) not in STORAGE_DTYPES:
            raise ValueError(f"weights must share one dtype of float16/32/64, got {dtypes}")
        for name, shape in shapes.items():
            if arrays[name].shape != shape:
                raise ValueError(f"weight {name} must have shape {shape}, got {arrays[name].shape}")
            if not np.all(np.isfinite(arrays[name])):
                raise ValueError(f"weight {name} holds NaN or infinite numbers")
        return {k: np.ascontiguousarray(arrays[k]) for k in shapes}

    def _check_tokens(self, tokens, ndim, name):
        try:
            tokens = np.asarray(tokens)
        except Exception:
            tokens = np.asarray(None)
        if tokens.ndim != ndim or not np.issubdtype(tokens.dtype, np.integer) or 0 in tokens.shape:
            shape = "[batch, length]" if ndim == 2 else "[batch]"
            raise ValueError(
                f"{name} must be a non-empty int array of shape {shape}, "
                f"got {tokens.dtype} {tokens.shape}"
            )
        if tokens.min() < 0 or tokens.max() >= self.cfg.vocab_size:
            raise ValueError(
                f"{name}: token ids must be in [0, vocab_size={self.cfg.vocab_size}), "
                f"got {tokens.min()}..{tokens.max()}"
            )
        return tokens

    def _check_cache(self, cache, batch, n):
        """A cache this model can extend by ``batch`` x ``n`` tokens."""
        cfg = self.cfg
        if not isinstance(cache, KVCache):
            raise ValueError(
                f"cache must be a KVCache (from prefill or KVCache.empty), got {validate.shorten(cache)}"
            )
        n_layers, cache_batch, n_kv_heads, max_len, head_dim = cache.k.shape
        if (n_layers, n_kv_heads, head_dim) != (cfg.n_layers, cfg.n_kv_heads, cfg.head_dim):
            raise ValueError(
                f"cache of shape {cache.k.shape} {_CACHE_LAYOUT} is not for {cfg.name!r}, which "
                f"needs ({cfg.n_layers}, batch, {cfg.n_kv_heads}, max_len, {cfg.head_dim})"
            )
        if max_len > cfg.max_context:
            raise ValueError(
                f"cache max_len {max_len} exceeds max_context {cfg.max_context} of {cfg.name!r}"
            )
        validate.integer("cache.length", cache.length, minimum=0, maximum=max_len)
        if cache_batch != batch:
            raise ValueError(f"cache holds batch {cache_batch}, tokens have batch {batch}")
        if cache.length + n > max_len:
            raise ValueError(f"KV cache full: {cache.length} cached + {n} new > max_len {max_len}")
