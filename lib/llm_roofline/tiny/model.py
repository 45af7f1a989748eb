"""A Llama-style decoder in NumPy: RMSNorm, RoPE, grouped-query attention, SwiGLU, a KV cache.

Weights are a dict keyed by Hugging Face Llama parameter names, shaped as there
(``q_proj.weight`` is ``[n_heads*head_dim, hidden]``), so a Llama checkpoint loads unchanged.
Activations are kept as 2-D ``[tokens, features]`` arrays, so every projection is one BLAS
matrix product. Pass a :class:`~llm_roofline.tiny.Tally` to record the FLOPs and bytes of
every operation, computed from the shapes and dtypes of the arrays it reads and writes by
the conventions of :mod:`llm_roofline.formulas` (not by counting executed instructions).
Without a tally nothing is recorded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..formulas import _positive_int
from .tally import Tally

STORAGE_DTYPES = (np.float16, np.float32, np.float64)


def rms_norm(x, w, eps):  # x [T, d], w [d] -> [T, d]
    y = x * (1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))
    y *= w
    return y


def rotate_half(x):  # [..., dh]: (x1, x2) -> (-x2, x1), the Hugging Face Llama convention
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def rope(x, cos, sin):  # x [B, n, heads, dh], cos and sin [n, dh]
    return x * cos[:, None] + rotate_half(x) * sin[:, None]


def softmax(x):  # over the last axis, in place: x is overwritten and returned
    x -= x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
    return x


def silu(x):  # x * sigmoid(x) = x / (1 + exp(-x))
    y = np.exp(-x)
    y += 1
    return np.divide(x, y, out=y)


def rope_tables(cfg, start, stop, dtype):
    """cos and sin of positions ``start..stop-1``, ``[stop - start, head_dim]`` each."""
    inv_freq = 1.0 / cfg.rope_theta ** (np.arange(0, cfg.head_dim, 2) / cfg.head_dim)
    angles = np.outer(np.arange(start, stop), inv_freq)  # [n, dh/2]
    angles = np.concatenate([angles, angles], axis=-1)  # [n, dh]: pairs (j, j + dh/2)
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def weight_shapes(cfg) -> dict[str, tuple[int, ...]]:
    """Hugging Face Llama parameter names and shapes for ``cfg``."""
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


@dataclass
class KVCache:
    """Preallocated keys and values, ``[n_layers, batch, n_kv_heads, max_len, head_dim]`` each;
    the first ``length`` positions are filled."""

    k: np.ndarray
    v: np.ndarray
    length: int = 0

    @classmethod
    def empty(cls, cfg, batch: int, max_len: int, dtype) -> KVCache:
        shape = (cfg.n_layers, batch, cfg.n_kv_heads, max_len, cfg.head_dim)
        return cls(np.zeros(shape, dtype), np.zeros(shape, dtype))

    @property
    def batch(self) -> int:
        return self.k.shape[1]

    @property
    def max_len(self) -> int:
        return self.k.shape[3]


class TinyLlama:
    """A Llama-style decoder in NumPy that can count its own FLOPs and bytes.

    ``weights`` maps Hugging Face Llama names to arrays (see :func:`weight_shapes`), all of one
    dtype: float16, float32 or float64. Float16 is storage only (weights and KV cache);
    activations are then float32. ``skip_masked=True`` computes attention one query row at a
    time over only the keys the causal mask keeps (the work of a causal kernel,
    ``formulas.op_costs(causal=True)``); the default computes the whole score block and
    masks it (``causal=False``). Both give the same logits.
    """

    def __init__(self, cfg, weights: dict[str, np.ndarray], *, skip_masked: bool = False):
        for field in ("n_routed_experts", "kv_lora_rank", "q_lora_rank"):
            if getattr(cfg, field, 0):
                raise ValueError(f"TinyLlama runs dense decoders only; {cfg.name!r} sets {field}")
        if not cfg.gated_mlp:
            raise ValueError("TinyLlama runs the Llama subset: gated_mlp must be True (SwiGLU)")
        if cfg.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {cfg.head_dim}")
        shapes = weight_shapes(cfg)
        missing = sorted(set(shapes) - set(weights))
        extra = set(weights) - set(shapes)
        extra = sorted(k for k in extra if not k.endswith("rotary_emb.inv_freq"))  # old buffers
        if missing or extra:
            raise ValueError(
                f"weights do not match {cfg.name!r}: missing {missing[:5]}, unexpected {extra[:5]}"
            )
        dtypes = sorted({str(np.asarray(weights[k]).dtype) for k in shapes})
        if len(dtypes) != 1 or np.dtype(dtypes[0]) not in STORAGE_DTYPES:
            raise ValueError(f"weights must share one dtype of float16/32/64, got {dtypes}")
        for name, shape in shapes.items():
            if np.shape(weights[name]) != shape:
                got = np.shape(weights[name])
                raise ValueError(f"weight {name} must have shape {shape}, got {got}")
        self.cfg = cfg
        self.w = {k: np.ascontiguousarray(weights[k]) for k in shapes}
        self.dtype = np.dtype(dtypes[0])  # storage: weights and KV cache
        self.act = np.dtype(np.float32) if self.dtype == np.float16 else self.dtype  # activations
        self.skip_masked = skip_masked

    @classmethod
    def random(cls, cfg, seed: int = 0, dtype=np.float32, **kwargs) -> TinyLlama:
        """Random weights: N(0, 1/fan_in) matrices, N(0, 1) embeddings, unit norm weights."""
        rng = np.random.default_rng(seed)
        weights = {}
        for name, shape in weight_shapes(cfg).items():
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
                tally: Tally | None = None):
        """Run ``tokens`` (int ``[B, L]``): logits ``[B, L, vocab]`` and the cache.

        A new cache holds ``max_len`` positions (default ``cfg.max_context``); an existing
        ``cache`` is extended (chunked prefill).
        """
        tokens = self._check_tokens(tokens, 2, "tokens")
        if cache is None:
            top = self.cfg.max_context
            max_len = top if max_len is None else max_len
            if isinstance(max_len, bool) or not isinstance(max_len, int) or not 1 <= max_len <= top:
                raise ValueError(
                    f"max_len must be an int in [1, max_context={top}], got {max_len!r}"
                )
            cache = KVCache.empty(self.cfg, tokens.shape[0], max_len, self.dtype)
        return self._forward(tokens, cache, tally, "prefill"), cache

    def decode(self, next_tokens, cache: KVCache, *, tally: Tally | None = None):
        """One step: ``next_tokens`` (int ``[B]``) -> logits ``[B, vocab]`` and the cache."""
        tokens = self._check_tokens(next_tokens, 1, "next_tokens")
        return self._forward(tokens[:, None], cache, tally, "decode")[:, 0], cache

    def generate(self, prompt, n_new: int, *, temperature: float = 0.0, seed: int | None = None,
                 tally: Tally | None = None):
        """Prompt (int ``[B, L]``) plus ``n_new`` tokens, int ``[B, L + n_new]``.

        Greedy at ``temperature=0``; otherwise sampled from ``softmax(logits/temperature)``
        with ``numpy.random.default_rng(seed)``.
        """
        _positive_int(n_new, "n_new")
        if not temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {temperature!r}")
        prompt = self._check_tokens(prompt, 2, "prompt")
        rng = np.random.default_rng(seed)
        out = [prompt]
        logits, cache = self.prefill(prompt, max_len=prompt.shape[1] + n_new, tally=tally)
        logits = logits[:, -1]
        for step in range(n_new):
            if temperature == 0:
                nxt = logits.argmax(axis=-1)
            else:  # inverse CDF: the first token whose cumulative probability reaches u
                p = softmax(logits.astype(np.float64) / temperature)
                u = rng.random((p.shape[0], 1))
                nxt = np.minimum((p.cumsum(axis=-1) < u).sum(axis=-1), p.shape[-1] - 1)
            out.append(nxt[:, None])
            if step < n_new - 1:
                logits, cache = self.decode(nxt, cache, tally=tally)
        return np.concatenate(out, axis=1)

    # --- the forward pass -----------------------------------------------------------------
    def _check_tokens(self, tokens, ndim, name):
        tokens = np.asarray(tokens)
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

    def _forward(self, tokens, cache, t, phase):  # tokens [B, n] -> logits [B, n, vocab]
        cfg, w = self.cfg, self.w
        B, n = tokens.shape
        if cache.batch != B:
            raise ValueError(f"cache holds batch {cache.batch}, tokens have batch {B}")
        if cache.length + n > cache.max_len:
            raise ValueError(
                f"KV cache full: {cache.length} cached + {n} new > max_len {cache.max_len}"
            )
        if t is not None:
            t.begin(phase, B, n, cache.length)
        emb = w["model.embed_tokens.weight"]
        rows = emb[tokens.reshape(-1)]  # [T, d], T = B*n
        x = rows.astype(self.act, copy=False)
        if t is not None:
            t.add("embed", 0, rows.nbytes, x.nbytes)
        rot = rope_tables(cfg, cache.length, cache.length + n, self.act)  # cos, sin [n, dh]
        for i in range(cfg.n_layers):
            x = self._layer(i, x, B, n, cache, rot, t)
        cache.length += n
        x = self._norm(x, w["model.norm.weight"], "final_norm", t)
        head = emb if cfg.tie_embeddings else w["lm_head.weight"]
        logits = self._linear(x, head, None, "lm_head", t)  # [T, vocab]
        if t is not None:
            t.end()
        return logits.reshape(B, n, -1)

    def _layer(self, i, x, B, n, cache, rot, t):  # x [T, d] -> [T, d]
        cfg, w, p = self.cfg, self.w, f"model.layers.{i}."
        H, G, dh, past = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cache.length
        S = past + n  # keys and values after this pass

        # attention
        h = self._norm(x, w[p + "input_layernorm.weight"], "attn_norm", t)
        q = self._proj(h, p + "self_attn.q_proj", "q_proj", t).reshape(B, n, H, dh)
        k = self._proj(h, p + "self_attn.k_proj", "k_proj", t).reshape(B, n, G, dh)
        v = self._proj(h, p + "self_attn.v_proj", "v_proj", t).reshape(B, n, G, dh)
        cos, sin = rot
        qr, kr = rope(q, cos, sin), rope(k, cos, sin)
        if t is not None:
            read = q.nbytes + k.nbytes + cos.nbytes + sin.nbytes
            t.add("rope", 3 * (q.size + k.size), read, qr.nbytes + kr.nbytes)
        kc, vc = cache.k[i, :, :, past:S], cache.v[i, :, :, past:S]  # [B, G, n, dh]
        kc[...] = kr.transpose(0, 2, 1, 3)
        vc[...] = v.transpose(0, 2, 1, 3)
        if t is not None:
            t.add("kv_write", 0, kr.nbytes + v.nbytes, kc.nbytes + vc.nbytes)
        K, V = cache.k[i, :, :, :S], cache.v[i, :, :, :S]  # [B, G, S, dh]
        if t is not None:
            t.add("kv_read", 0, K.nbytes + V.nbytes, 0)
        qg = qr.reshape(B, n, G, H // G, dh).transpose(0, 2, 3, 1, 4)  # [B, G, g, n, dh]
        K, V = K.astype(self.act, copy=False), V.astype(self.act, copy=False)  # fp16 cache
        a = self._attention(qg, K, V, past, t)
        a = a.transpose(0, 3, 1, 2, 4).reshape(B * n, H * dh)  # [B, G, g, n, dh] -> [T, H*dh]
        x = self._residual(x, self._proj(a, p + "self_attn.o_proj", "o_proj", t), t)

        # SwiGLU MLP
        h = self._norm(x, w[p + "post_attention_layernorm.weight"], "mlp_norm", t)
        gate = self._proj(h, p + "mlp.gate_proj", "gate_proj", t)  # [T, d_ff]
        up = self._proj(h, p + "mlp.up_proj", "up_proj", t)
        m = silu(gate)
        m *= up
        if t is not None:
            t.add("mlp_act", 5 * m.size, gate.nbytes + up.nbytes, m.nbytes)
        return self._residual(x, self._proj(m, p + "mlp.down_proj", "down_proj", t), t)

    def _attention(self, q, K, V, past, t):  # q [B, G, g, n, dh], K, V [B, G, S, dh]
        """Causal attention -> [B, G, g, n, dh]; new token j sees the first past + j + 1 keys."""
        B, G, g, n, dh = q.shape
        scale = 1.0 / math.sqrt(dh)  # a Python float keeps the activation dtype
        if self.skip_masked:  # one query row at a time, over only the keys it may see
            rows = []
            for j in range(n):
                Kj, Vj = K[:, :, : past + j + 1], V[:, :, : past + j + 1]
                rows.append(self._scores_softmax_values(q[:, :, :, j], Kj, Vj, scale, None, t))
            return np.stack(rows, axis=3)
        mask = None  # a bias: 0 where query j may see key s (s <= past + j), -inf elsewhere
        if n > 1:
            seen = np.arange(past + n) <= past + np.arange(n)[:, None]  # [n, S]
            mask = np.where(seen, 0, -np.inf).astype(q.dtype)
        o = self._scores_softmax_values(q.reshape(B, G, g * n, dh), K, V, scale, mask, t)
        return o.reshape(B, G, g, n, dh)

    def _scores_softmax_values(self, q, K, V, scale, mask, t):  # q [B, G, r, dh]
        s = q @ K.swapaxes(-1, -2)  # [B, G, r, S]: one BLAS product per (sequence, KV head)
        if t is not None:
            t.add("attn_scores", 2 * q.shape[-1] * s.size, q.nbytes, s.nbytes)
        s *= scale
        if mask is not None:  # rows are (head, query) pairs: view s as [B, G, g, n, S]
            s.reshape(*s.shape[:2], -1, *mask.shape)[...] += mask
        pr = softmax(s)  # [B, G, r, S], in the scores' buffer
        if t is not None:
            t.add("softmax", 6 * pr.size, pr.nbytes, pr.nbytes)
        o = pr @ V  # [B, G, r, dh]
        if t is not None:
            t.add("attn_values", 2 * o.shape[-1] * pr.size, pr.nbytes, o.nbytes)
        return o

    def _proj(self, x, prefix, op, t):  # a Hugging Face projection: weight and optional bias
        return self._linear(x, self.w[prefix + ".weight"], self.w.get(prefix + ".bias"), op, t)

    def _linear(self, x, W, b, op, t):  # x [T, d_in], W [d_out, d_in], b [d_out] -> [T, d_out]
        y = x @ W.T.astype(self.act, copy=False)  # 2-D: one BLAS GEMM (a GEMV at T=1)
        if b is not None:
            y += b
        if t is not None:
            flops, read = 2 * x.shape[0] * W.size, x.nbytes + W.nbytes
            if b is not None:
                flops, read = flops + y.size, read + b.nbytes
            t.add(op, flops, read, y.nbytes)
        return y

    def _norm(self, x, w, op, t):
        y = rms_norm(x, w, self.cfg.norm_eps).astype(self.act, copy=False)
        if t is not None:
            t.add(op, 4 * x.size, x.nbytes + w.nbytes, y.nbytes)
        return y

    def _residual(self, x, y, t):  # x + y, into y (a fresh output)
        y += x
        if t is not None:
            t.add("residual", y.size, x.nbytes + y.nbytes, y.nbytes)
        return y
