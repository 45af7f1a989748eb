"""FLOPs and bytes of a transformer forward pass: the one place an analytic count is written.

SymPy expressions are the source. :func:`op_expressions` writes, per operation, the FLOPs,
bytes read and bytes written of one forward pass in the symbols below; :func:`~llm_roofline.counts.op_costs`
substitutes a :class:`~llm_roofline.models.ModelConfig` and a workload into those same
expressions and returns exact integers. The article's identities (``I = B*L``,
``I_KV = n_heads/n_kv_heads``, ...) are derived from the same expressions, so the book's
derivation, the calculator and the tiny transformer's tally cannot drift apart.

The workload
------------
One forward pass runs ``batch`` sequences (``B``), each feeding ``n_new`` new tokens that
attend to ``n_past`` cached tokens plus themselves. Prefill of a prompt of length ``L`` is
``n_new = L, n_past = 0``. A decode step is ``n_new = 1``; its context length is
``L_ctx = n_past + 1``: the new token attends to the ``n_past`` cached tokens and to itself,
and its key and value are written to the cache before attention reads it. In general the
pass reads ``S = n_past + n_new`` keys and values per sequence, KV head and layer.

Counting conventions (the tally of :mod:`llm_roofline.tiny` follows them exactly)
----------------------------------------------------------------------------------
FLOPs
    * A matrix product of ``(m x k)`` by ``(k x n)`` is ``2*m*k*n`` (one multiply, one add).
    * Adding a bias or a residual: 1 per output element.
    * RMSNorm: 4 per element (square, sum, scale by ``1/rms``, scale by the weight); the
      per-row mean, epsilon and reciprocal square root are not counted.
    * RoPE: 3 per element of q and k (``x*cos + rotate_half(x)*sin``: two multiplies, one add;
      the sign flip inside ``rotate_half`` is free).
    * Softmax: 6 per score (scale by ``1/sqrt(head_dim)``, max, subtract, exp, sum, divide).
    * SwiGLU: 5 per element of the intermediate (SiLU ``x/(1+exp(-x))`` as 4: negate, exp,
      add, divide; times ``up`` as 1). A plain MLP activation (``gated_mlp=False``): 4.
      GeGLU (Gemma): 10, the tanh-approximated GELU as 9 (:data:`ACTIVATION_FLOPS`).
    * Embedding lookup, KV-cache reads and writes: 0.
Bytes
    * Nothing is fused: every operation reads its inputs from memory and writes its output.
    * Weights are read once per pass, at ``weight_dtype``, by the operation that uses them
      (norm weights and biases included); the embedding lookup reads only the rows it
      gathers; the LM head reads the whole ``vocab x hidden`` matrix (tied or not).
    * Activations are read and written at ``act_dtype``; the RoPE cos and sin tables
      (``n_new x head_dim`` each, per layer) count as activations.
    * The KV cache is read and written at ``kv_dtype``. ``kv_write`` reads the new k and v
      activations and writes them to the cache; ``kv_read`` reads the ``S`` cached keys and
      values once per layer. ``attn_scores`` and ``attn_values`` therefore count only their
      non-cache traffic (q and scores; probabilities and output), so no byte is counted twice.
    * Not counted: integer token ids, the causal mask, layout copies (transposes, reshapes).
    * So activation bytes are those of a plain unfused implementation (NumPy, eager
      PyTorch): an upper bound. Fused GPU kernels keep much of it on chip (FlashAttention
      never writes the scores); weights and KV cache are what every implementation moves.
Attention
    ``causal=True`` counts only the (query, key) pairs the causal mask keeps, as a causal
    kernel computes them: ``n_new*n_past + n_new*(n_new+1)/2`` per sequence and head.
    ``causal=False`` counts the whole ``n_new x S`` score block, as a kernel that computes
    everything and then masks. The scores and probabilities are materialised (unfused), at
    ``act_dtype``, for exactly the pairs counted. The two agree for a decode step.
    Sliding-window layers (``n_local`` of the ``n_layers``, window ``W``): query ``i`` sees
    ``min(n_past + i + 1, W)`` keys (causal), the pass reads ``min(S, n_new + W - 1)`` cached
    keys and values (all its queries' windows), and the cache holds at most ``W`` tokens
    (:func:`attention_pairs_expr`, :func:`keys_read_expr`).
Parameters
    Each op's weights are counted once, in :func:`param_expressions`; the ops read them from
    there (``weight bytes = parameters x b_w``) and ``ModelConfig`` counts them from there.

The LM head runs where a token is sampled: ``logits="last"`` (the default) counts it at each
sequence's last new position only (``B`` positions), as Hugging Face ``generate``
(``logits_to_keep=1``) and serving engines compute it; ``logits="all"`` at every new token
(``B*n_new`` positions), as a plain forward pass that returns logits for all ``L`` positions.
The final norm runs on every position either way (the hidden states are sliced after it). A
decode step (``n_new = 1``) is the same under both.

What "counted equals analytic" checks
    The tally of :mod:`llm_roofline.tiny` does not count executed instructions: as each
    operation runs, it applies the conventions above to the arrays that operation really
    reads and writes (their shapes and element sizes as NumPy holds them). So the exact
    agreement of tally and formulas checks the shapes, element sizes, layer and pass counts
    of a real forward pass, and which (query, key) pairs are computed (the whole block or
    only the causal ones). It does not check the conventions themselves: that BLAS does
    ``2*m*k*n`` FLOPs, that a softmax costs 6 per score, or what memory traffic the CPU's
    caches turn these bytes into. Only measured time (``benchmarks/bench_tiny.py``) relates
    the counts to the machine.

The dense decoder is written first (multi-head, grouped-query and multi-query attention;
gated or plain MLP; optional q, k, v biases; sliding-window layers; Gemma's norms after the
attention and the MLP, ``post_attn_norm`` and ``post_mlp_norm``, and Gemma 3's per-head
``q_norm`` and ``k_norm``); mixture of experts and multi-head latent attention follow in their
own section at the end of this module. Not counted for Gemma (no weights, no cache, a few
FLOPs per element): the embedding's scaling by ``sqrt(d_model)`` and Gemma 2's soft-capping.
"""

from __future__ import annotations

from functools import cache

import sympy as sp

__all__ = [
    "ACTIVATION_FLOPS", "ATTENTION_OPS", "B", "L", "LINEAR_OPS", "L_ctx", "MLA_ATTENTION_OPS",
    "MOE_MLP_OPS", "N", "OPS", "SAMPLING_FLOPS", "at_decode", "at_prefill", "attention_flops_expr",
    "attention_pairs_expr", "b_act", "b_kv", "b_w", "d_expert", "d_ff", "d_model", "d_nope",
    "d_rope", "d_v", "expected_experts_expr", "expressions_for", "head_dim", "keys_read_expr",
    "kv_intensity_expr", "kv_rank", "kv_read_bytes_expr", "linear_flops_expr",
    "linear_intensity_expr", "linear_params_expr", "linear_weight_bytes_expr",
    "model_expressions", "n_dense", "n_experts", "n_heads", "n_kv_heads", "n_layers", "n_local",
    "n_new", "n_past", "n_shared", "op_expressions", "ops_for", "param_expressions", "q_rank",
    "top_k", "vocab", "window",
]


# --- symbols ---------------------------------------------------------------------------
# model
n_layers, d_model, d_ff, n_heads, n_kv_heads, head_dim, vocab = sp.symbols(
    "n_layers d_model d_ff n_heads n_kv_heads d_head V", positive=True, integer=True
)


# sliding-window attention: n_local of the n_layers layers attend to the last W keys only
n_local = sp.symbols("n_local", nonnegative=True, integer=True)

window = sp.symbols("W", positive=True, integer=True)


# workload
B, n_new = sp.symbols("B n_new", positive=True, integer=True)

n_past = sp.symbols("n_past", nonnegative=True, integer=True)  # 0 in a prefill

L, L_ctx = sp.symbols("L L_ctx", positive=True, integer=True)

_N_NEW, _N_PAST = n_new, n_past  # op_costs's arguments share these names


# the aggregate parameter count (the article writes P; this book keeps P for performance)
N = sp.symbols("N", positive=True, integer=True)


# bytes per element of weights, KV cache and activations
b_w, b_kv, b_act = sp.symbols("b_w b_kv b_act", positive=True)

OPS = (
    "embed",
    "attn_norm",
    "q_proj",
    "k_proj",
    "v_proj",
    "rope",
    "kv_write",
    "kv_read",
    "attn_scores",
    "softmax",
    "attn_values",
    "o_proj",
    "residual",
    "mlp_norm",
    "gate_proj",
    "up_proj",
    "mlp_act",
    "down_proj",
    "final_norm",
    "lm_head",
    "sampling",
)
"""Operation names in the order a pass runs them; the tiny transformer's tally uses the same."""

SAMPLING_FLOPS = 7
"""FLOPs per vocabulary entry of ``sampling`` at a position whose logits a pass computes: the
softmax's 6 (max, subtract, exponential, sum, divide, as attention's softmax counts) and the one
add of top-p's cumulative sum (its sort compares, and comparisons are not FLOPs)."""

LINEAR_OPS = (
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"
)
"""The operations that multiply activations by a weight matrix."""

ATTENTION_OPS = ("attn_scores", "attn_values")
"""The two matrix products of attention against the KV cache (scores ``q k^T``, values ``p v``)."""


# --- the symbolic source -----------------------------------------------------------------
def attention_pairs_expr(causal: bool = True, windowed: bool = False) -> sp.Expr:
    """(query, key) pairs scored per sequence and head in one pass.

    Causal: new token ``i`` (0-based) sees ``n_past + i + 1`` keys, a sum of
    ``n_new*n_past + n_new*(n_new+1)/2``. Not causal: the whole ``n_new x (n_past+n_new)`` block.

    ``windowed``: a sliding-window layer, where each query sees at most the last ``W`` keys
    (itself included). Causal: token ``i`` sees ``min(n_past + i + 1, W)`` keys; the sum is
    ``(c*(c+1) - n_past*(n_past+1))/2 + (n_past + n_new - c)*W`` with
    ``c = min(max(W, n_past), n_past + n_new)`` (the last position whose keys all fit in the
    window). Not causal: the ``n_new x min(S, n_new + W - 1)`` block of the keys the pass
    holds (:func:`keys_read_expr`).
    """
    if windowed:
        if causal:
            c = sp.Min(sp.Max(window, n_past), n_past + n_new)
            return (c * (c + 1) - n_past * (n_past + 1)) / 2 + (n_past + n_new - c) * window
        return n_new * keys_read_expr(windowed=True)
    if causal:
        i = sp.symbols("i", integer=True, nonnegative=True)
        return sp.expand(sp.summation(n_past + i + 1, (i, 0, n_new - 1)))
    return n_new * (n_past + n_new)


def keys_read_expr(windowed: bool = False) -> sp.Expr:
    """Keys (and values) a pass reads from the cache per sequence, KV head and layer.

    Global attention: all ``S = n_past + n_new``. A sliding-window layer: the union of the new
    queries' windows, ``min(S, n_new + W - 1)`` (a decode step: ``min(L_ctx, W)``).
    """
    S = n_past + n_new
    return sp.Min(S, n_new + window - 1) if windowed else S


_NORM_OPS = ("attn_norm", "post_attn_norm", "mlp_norm", "post_mlp_norm", "final_norm")

ACTIVATION_FLOPS = {"silu": 4, "gelu_tanh": 9}
"""FLOPs per element of the MLP's activation function (its gate's, in a gated MLP).

SiLU ``x/(1+exp(-x))``: negate, exp, add, divide. Tanh-approximated GELU
``0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x**3)))``: two multiplies for the cube, then
multiply, add, multiply, tanh, add, multiply, multiply. A gated MLP (SwiGLU, GeGLU) adds one
multiply by ``up``."""


def _layer_params(gated_mlp: bool, qkv_bias: bool, post_norms: bool, qk_norm: bool) -> dict:
    """One dense layer's parameters by the operation that uses them (biases with their matrix)."""
    bias = 1 if qkv_bias else 0  # a bias is one more input column of the matrix
    q_out, kv_out = n_heads * head_dim, n_kv_heads * head_dim
    p = {
        "attn_norm": d_model,
        "q_proj": (d_model + bias) * q_out,
        "k_proj": (d_model + bias) * kv_out,
        "v_proj": (d_model + bias) * kv_out,
    }
    if qk_norm:  # one RMSNorm weight of head_dim, shared by all heads
        p |= {"q_norm": head_dim, "k_norm": head_dim}
    p["o_proj"] = q_out * d_model
    if post_norms:
        p["post_attn_norm"] = d_model
    p |= {
        "mlp_norm": d_model,
        "gate_proj": d_model * d_ff if gated_mlp else sp.Integer(0),
        "up_proj": d_model * d_ff,
        "down_proj": d_ff * d_model,
    }
    if post_norms:
        p["post_mlp_norm"] = d_model
    return p


def _mla_layer_params(q_lora: bool) -> dict:
    """One layer's latent-attention parameters by op (see the MLA section below)."""
    H = n_heads
    return {
        "q_a_proj": d_model * q_rank if q_lora else sp.Integer(0),
        "q_a_norm": q_rank if q_lora else sp.Integer(0),
        "q_b_proj": (q_rank if q_lora else d_model) * H * (d_nope + d_rope),
        "kv_a_proj": d_model * (kv_rank + d_rope),  # the latent and the shared rotary key
        "kv_a_norm": kv_rank,
        "kv_b_proj": kv_rank * H * (d_nope + d_v),  # latent -> per-head keys and values
        "o_proj": H * d_v * d_model,
    }


def _expert_params(gated_mlp: bool) -> dict:
    """One MoE layer's router and experts by op: ``{op: {component: parameters}}``."""
    per_matrix = d_model * d_expert

    def experts(present=True):
        if not present:
            return {"shared_experts": sp.Integer(0), "routed_experts": sp.Integer(0)}
        return {"shared_experts": n_shared * per_matrix, "routed_experts": n_experts * per_matrix}

    return {
        "router": {"router": d_model * n_experts},
        "gate_proj": experts(gated_mlp),
        "up_proj": experts(),
        "down_proj": experts(),
    }


def param_expressions(
    *, gated_mlp: bool = True, qkv_bias: bool = False, moe: bool = False, mla: bool = False,
    q_lora: bool = True, post_norms: bool = False, qk_norm: bool = False,
) -> dict[str, dict[str, sp.Expr]]:
    """Parameters of the whole model, by operation and component: ``{op: {component: expr}}``.

    The one place a parameter is counted: :func:`model_expressions` reads each op's weights
    from these same expressions (``weight bytes = parameters * b_w``, except that ``embed``
    gathers only the rows of its tokens and an MoE pass reads only the experts it routes to),
    and ``ModelConfig.param_counts`` / ``params_by_op`` value them. Components are
    ``embedding``, ``attention`` (projections, biases, MLA's and QK norms), ``mlp`` (dense
    MLPs), ``router``, ``shared_experts``, ``routed_experts``, ``norms`` and ``lm_head`` (the
    untied head; a tied head shares ``embed``'s matrix, see :func:`~llm_roofline.counts.params_by_op`).
    Operations without weights are absent.
    """
    return {
        op: dict(parts)
        for op, parts in _param_table(gated_mlp, qkv_bias, moe, mla, q_lora, post_norms, qk_norm).items()
    }


@cache
def _param_table(gated_mlp, qkv_bias, moe, mla, q_lora, post_norms, qk_norm):
    layer = _layer_params(gated_mlp, qkv_bias, post_norms, qk_norm)
    if mla:
        layer = _splice(layer, _DENSE_ATTENTION, _mla_layer_params(q_lora))
    moe_layers = n_layers - n_dense
    table = {"embed": {"embedding": vocab * d_model}}
    for op, n in layer.items():
        if op in _NORM_OPS:
            table[op] = {"norms": n_layers * n}
        elif op in _DENSE_MLP:
            if moe:
                if op == "gate_proj":
                    table["router"] = {"router": moe_layers * d_model * n_experts}
                experts = _expert_params(gated_mlp)[op]
                table[op] = {"mlp": n_dense * n} | {k: moe_layers * v for k, v in experts.items()}
            else:
                table[op] = {"mlp": n_layers * n}
        else:
            table[op] = {"attention": n_layers * n}
    table["final_norm"] = {"norms": d_model}
    table["lm_head"] = {"lm_head": vocab * d_model}
    return {op: {k: sp.sympify(v) for k, v in parts.items()} for op, parts in table.items()}


def _splice(d: dict, old: tuple, new: dict) -> dict:
    """``d`` with the keys ``old`` (consecutive) replaced by the items of ``new``."""
    out = {}
    for k, v in d.items():
        if k == old[0]:
            out.update(new)
        elif k not in old:
            out[k] = v
    return out


def op_expressions(
    *, causal: bool = True, gated_mlp: bool = True, qkv_bias: bool = False,
    logits: str = "last",
) -> dict[str, tuple[sp.Expr, sp.Expr, sp.Expr]]:
    """Per operation, ``(flops, bytes_read, bytes_written)`` of one pass, summed over layers.

    In the module's symbols: ``B, n_new, n_past`` (workload), ``n_layers, d_model, d_ff,
    n_heads, n_kv_heads, head_dim, vocab`` (model), ``b_w, b_kv, b_act`` (bytes per element).
    Operations a model lacks (``gate_proj`` with ``gated_mlp=False``) are ``(0, 0, 0)``.
    ``logits``: ``"last"`` (the LM head at each sequence's last position) or ``"all"`` (at
    every new token); see the module docs. The dense decoder the book derives from;
    :func:`model_expressions` adds the variants.
    """
    return _logits_at(dict(_op_expressions(causal, gated_mlp, qkv_bias)), logits)


LOGITS = ("last", "all")
"""Where the LM head runs in a pass: each sequence's last new position, or every new token."""


def _logits_at(exprs: dict, logits: str) -> dict:
    """``exprs`` with the LM head at each sequence's last position (``"last"``) or at every
    new token (``"all"``, as the expressions are written)."""
    if logits not in LOGITS:
        raise ValueError(f"logits must be 'last' or 'all', got {logits!r}")
    if logits == "last":
        for op in ("lm_head", "sampling"):
            exprs[op] = tuple(sp.expand(x.subs(n_new, 1)) for x in exprs[op])
    return exprs


@cache
def _op_expressions(causal: bool, gated_mlp: bool, qkv_bias: bool, windowed: bool = False,
                    post_norms: bool = False, qk_norm: bool = False, act: str = "silu"):
    T = B * n_new  # new tokens in the pass
    q_out, kv_out = n_heads * head_dim, n_kv_heads * head_dim
    N = n_layers
    W = _layer_params(gated_mlp, qkv_bias, post_norms, qk_norm)  # one layer's parameters
    zero = (sp.Integer(0),) * 3

    def linear(op, d_in, d_out, bias=False):
        # x [T, d_in] @ W.T [d_in, d_out] (+ b) -> [T, d_out]
        flops = 2 * T * d_in * d_out + (T * d_out if bias else 0)
        return flops, W[op] * b_w + T * d_in * b_act, T * d_out * b_act

    def norm(op, width=d_model):  # RMSNorm over rows of `width`, one weight vector per op
        return 4 * T * width, T * width * b_act + W[op] * b_w, T * width * b_act

    def per_layer(e):
        return tuple(N * x for x in e)

    def attention(windowed):  # kv_read, attn_scores, softmax, attn_values of one layer
        pairs = B * n_heads * attention_pairs_expr(causal, windowed)  # scores per layer
        return {
            "kv_read": (0, 2 * B * keys_read_expr(windowed) * kv_out * b_kv, 0),
            "attn_scores": (2 * head_dim * pairs, T * q_out * b_act, pairs * b_act),
            "softmax": (6 * pairs, pairs * b_act, pairs * b_act),
            "attn_values": (2 * head_dim * pairs, pairs * b_act, T * q_out * b_act),
        }

    if windowed:  # n_local of the n_layers layers attend within the window
        full, local = attention(False), attention(True)
        attn = {op: tuple((N - n_local) * g + n_local * w
                          for g, w in zip(full[op], local[op], strict=True)) for op in full}
    else:
        attn = {op: per_layer(e) for op, e in attention(False).items()}
    act_flops = ACTIVATION_FLOPS[act]
    e = {
        "embed": (sp.Integer(0), T * d_model * b_w, T * d_model * b_act),  # gathers T rows
        "attn_norm": per_layer(norm("attn_norm")),
        "q_proj": per_layer(linear("q_proj", d_model, q_out, qkv_bias)),
        "k_proj": per_layer(linear("k_proj", d_model, kv_out, qkv_bias)),
        "v_proj": per_layer(linear("v_proj", d_model, kv_out, qkv_bias)),
    }
    if qk_norm:  # RMSNorm of every head's query and key, over head_dim
        e["q_norm"] = per_layer(
            (4 * T * q_out, T * q_out * b_act + W["q_norm"] * b_w, T * q_out * b_act))
        e["k_norm"] = per_layer(
            (4 * T * kv_out, T * kv_out * b_act + W["k_norm"] * b_w, T * kv_out * b_act))
    e |= {
        "rope": per_layer(
            (
                3 * T * (q_out + kv_out),
                T * (q_out + kv_out) * b_act + 2 * n_new * head_dim * b_act,
                T * (q_out + kv_out) * b_act,
            )
        ),
        "kv_write": per_layer((sp.Integer(0), 2 * T * kv_out * b_act, 2 * T * kv_out * b_kv)),
        **attn,
        "o_proj": per_layer(linear("o_proj", q_out, d_model)),
    }
    if post_norms:  # Gemma: the attention's output is normed before the residual add
        e["post_attn_norm"] = per_layer(norm("post_attn_norm"))
    e |= {
        "residual": per_layer((2 * T * d_model, 4 * T * d_model * b_act, 2 * T * d_model * b_act)),
        "mlp_norm": per_layer(norm("mlp_norm")),
        "gate_proj": per_layer(linear("gate_proj", d_model, d_ff)) if gated_mlp else zero,
        "up_proj": per_layer(linear("up_proj", d_model, d_ff)),
        "mlp_act": per_layer(
            ((act_flops + 1) * T * d_ff, 2 * T * d_ff * b_act, T * d_ff * b_act)
            if gated_mlp
            else (act_flops * T * d_ff, T * d_ff * b_act, T * d_ff * b_act)
        ),
        "down_proj": per_layer(linear("down_proj", d_ff, d_model)),
    }
    if post_norms:
        e["post_mlp_norm"] = per_layer(norm("post_mlp_norm"))
    table = _param_table(gated_mlp, qkv_bias, False, False, True, post_norms, qk_norm)
    e["final_norm"] = (4 * T * d_model, T * d_model * b_act + table["final_norm"]["norms"] * b_w,
                       T * d_model * b_act)
    e["lm_head"] = (2 * T * d_model * vocab, table["lm_head"]["lm_head"] * b_w + T * d_model * b_act,
                    T * vocab * b_act)
    # softmax and top-p over the vocabulary wherever logits are computed: reads the logits,
    # writes the probabilities
    e["sampling"] = (SAMPLING_FLOPS * T * vocab, T * vocab * b_act, T * vocab * b_act)
    assert tuple(e) == _ops(False, False, post_norms, qk_norm)
    return {op: tuple(sp.sympify(x) for x in v) for op, v in e.items()}


def linear_params_expr(*, gated_mlp: bool = True) -> sp.Expr:
    """Parameters in weight matrices: the LM head included; norms, biases, embedding not."""
    table = _param_table(gated_mlp, False, False, False, True, False, False)
    return sp.expand(sum(sum(table[op].values()) for op in LINEAR_OPS))


# --- the article's identities ------------------------------------------------------------
def linear_flops_expr() -> sp.Expr:
    """FLOPs of the linear layers over ``B x L`` tokens: 2 per parameter per token, ``2*N*B*L``."""
    return 2 * N * B * L


def linear_weight_bytes_expr() -> sp.Expr:
    """Weight traffic of the linear layers: each of the ``N`` parameters read once, ``b_w*N``."""
    return b_w * N


def linear_intensity_expr(bytes_per_param=2) -> sp.Expr:
    """FLOPs per weight byte of the linear layers, ``2*N*B*L / (b_w*N)``: ``B*L`` at 2 bytes."""
    ratio = linear_flops_expr() / linear_weight_bytes_expr()
    return sp.simplify(ratio.subs(b_w, bytes_per_param))


def at_decode(expr: sp.Expr) -> sp.Expr:
    """Specialise a pass expression to one decode step: ``n_new = 1``, ``n_past = L_ctx - 1``."""
    return sp.expand(expr.subs({n_new: 1, n_past: L_ctx - 1}))


def at_prefill(expr: sp.Expr) -> sp.Expr:
    """Specialise a pass expression to the prefill of ``L`` tokens: ``n_new = L, n_past = 0``."""
    return sp.expand(expr.subs({n_new: L, n_past: 0}))


def kv_read_bytes_expr() -> sp.Expr:
    """KV-cache bytes read in one decode step: ``2*n_layers*n_kv_heads*d_head*L_ctx*B*b_kv``."""
    return at_decode(op_expressions()["kv_read"][1])


def attention_flops_expr(causal: bool = True) -> sp.Expr:
    """Attention FLOPs (scores and values) of one pass, in ``B, n_new, n_past``.

    Use :func:`at_decode` for the article's ``4*n_layers*n_heads*d_head*L_ctx*B`` and
    :func:`at_prefill` for the prompt (causal: about half of ``4*n_layers*n_heads*d_head*L**2*B``).
    """
    e = op_expressions(causal=causal, logits="all")
    return sp.expand(sum(e[op][0] for op in ATTENTION_OPS))


def kv_intensity_expr() -> sp.Expr:
    """Attention FLOPs per KV byte of a decode step at 2 bytes/element: ``n_heads/n_kv_heads``."""
    return sp.simplify(
        (at_decode(attention_flops_expr()) / kv_read_bytes_expr()).subs(b_kv, 2)
    )


# =========================================================================================
# --- Mixture of experts and multi-head latent attention (the calculator's section) -------
# =========================================================================================
# Written for the calculator; same conventions as above. A model with routed
# experts (``cfg.is_moe``) or latent attention (``cfg.is_mla``) gets its own operations:
#
# Mixture of experts, in each of the ``n_layers - n_dense`` MoE layers (the first ``n_dense``
# keep the dense MLP of width ``d_ff``): ``router`` (a ``d_model x E`` linear), then
# ``gate_proj``, ``up_proj``, ``mlp_act`` and ``down_proj`` over the ``T*(k + n_shared)``
# (token, expert) pairs at the expert width ``d_expert``, and ``moe_combine`` (scale each
# expert's output by its router weight and sum: 2 FLOPs per element). Weight traffic: each
# distinct expert a pass touches is read once. With uniform, independent routing of ``T``
# tokens to ``k`` of ``E`` experts, an expert is missed by all of them with probability
# ``(1 - k/E)**T``, so a pass reads ``E*(1 - (1 - k/E)**T)`` routed experts on average, plus
# the ``n_shared`` shared experts always: about ``k*T`` for a few tokens, all ``E`` for many.
#
# Multi-head latent attention (DeepSeek-V2/V3), replacing ``q_proj``, ``k_proj``, ``v_proj``:
# ``q_a_proj`` (``d_model -> q_rank``), ``q_a_norm``, ``q_b_proj`` (``q_rank -> n_heads*(d_nope
# + d_rope)``; straight from ``d_model`` when ``q_rank = 0``), ``kv_a_proj`` (``d_model ->
# kv_rank + d_rope``: the latent and one rotary key shared by all heads), ``kv_a_norm``,
# ``rope`` (on the query's and the shared key's rotary parts), ``kv_write`` and ``kv_read``
# (the cache holds only ``kv_rank + d_rope`` numbers per token and layer), ``kv_b_proj`` (the
# latent's up-projection to per-head keys ``d_nope`` and values ``d_v``), ``attn_scores``,
# ``softmax``, ``attn_values``, ``o_proj`` (``n_heads*d_v -> d_model``). Two ways to compute it:
#
# * naive (``absorbed=False``): up-project the latents of all ``S`` keys of every sequence,
#   then ordinary attention with ``d_nope + d_rope`` key and ``d_v`` value dimensions;
#   cheapest for prefill, where the new tokens are most of ``S``;
# * absorbed (``absorbed=True``): fold the up-projection into the query and the output, and
#   attend in latent space, ``kv_rank + d_rope`` dimensions per score and ``kv_rank`` per
#   value, reading the cache as it is; cheapest for decode, where it avoids up-projecting
#   ``S`` cached tokens to make one token.
#
# ``op_costs`` uses the naive form for a pass with ``n_new > 1`` and the absorbed form for a
# decode step (``n_new == 1``), as vLLM and SGLang switch between them; DeepSeek's own
# inference code absorbs in every pass (``attn_impl = "absorb"``).

n_experts, top_k, d_expert = sp.symbols("E k d_expert", positive=True, integer=True)

n_shared, n_dense, q_rank = sp.symbols("n_shared n_dense r_q", nonnegative=True, integer=True)

kv_rank, d_rope, d_nope, d_v = sp.symbols("r_kv d_rope d_nope d_v", positive=True, integer=True)

MOE_MLP_OPS = ("router", "gate_proj", "up_proj", "mlp_act", "down_proj", "moe_combine")
"""A mixture-of-experts model's MLP operations, in order (replacing the dense four)."""

MLA_ATTENTION_OPS = (
    "q_a_proj", "q_a_norm", "q_b_proj", "kv_a_proj", "kv_a_norm", "rope", "kv_write",
    "kv_read", "kv_b_proj", "attn_scores", "softmax", "attn_values", "o_proj",
)
"""Latent attention's operations, in order (replacing ``q_proj`` ... ``o_proj``)."""

_DENSE_ATTENTION = OPS[OPS.index("q_proj") : OPS.index("o_proj") + 1]

_DENSE_MLP = OPS[OPS.index("gate_proj") : OPS.index("down_proj") + 1]


def expected_experts_expr() -> sp.Expr:
    """Distinct routed experts a pass of ``T = B*n_new`` tokens touches per MoE layer, on average.

    Uniform, independent top-``k`` routing over ``E`` experts: ``E*(1 - (1 - k/E)**T)``.
    """
    return n_experts * (1 - (1 - top_k / n_experts) ** (B * n_new))


def _ops(mla: bool, moe: bool, post_norms: bool = False, qk_norm: bool = False) -> tuple[str, ...]:
    ops = list(OPS)
    if qk_norm:
        ops[ops.index("rope"):ops.index("rope")] = ["q_norm", "k_norm"]
    if post_norms:
        ops.insert(ops.index("residual"), "post_attn_norm")
        ops.insert(ops.index("down_proj") + 1, "post_mlp_norm")
    if mla:
        i, j = ops.index("q_proj"), ops.index("o_proj") + 1
        ops[i:j] = MLA_ATTENTION_OPS
    if moe:
        i, j = ops.index("gate_proj"), ops.index("down_proj") + 1
        ops[i:j] = MOE_MLP_OPS
    return tuple(ops)


def _flags(cfg) -> dict:
    """The structural switches of a ``ModelConfig`` that select its expressions."""
    return dict(
        gated_mlp=cfg.gated_mlp, qkv_bias=cfg.qkv_bias,
        moe=getattr(cfg, "is_moe", False), mla=getattr(cfg, "is_mla", False),
        q_lora=bool(getattr(cfg, "q_lora_rank", 0)),
        windowed=getattr(cfg, "n_windowed_layers", 0) > 0,
        post_norms=getattr(cfg, "post_norms", False), qk_norm=getattr(cfg, "qk_norm", False),
        act=getattr(cfg, "mlp_activation", "silu"),
    )


def ops_for(cfg) -> tuple[str, ...]:
    """The operation names :func:`~llm_roofline.counts.op_costs` returns for ``cfg``, in pass order.

    :data:`OPS` for a Llama-style model; latent attention replaces ``q_proj`` ... ``o_proj``
    by :data:`MLA_ATTENTION_OPS`, a mixture of experts the MLP by :data:`MOE_MLP_OPS`;
    Gemma 3's ``q_norm`` and ``k_norm`` come before ``rope``, Gemma's ``post_attn_norm`` and
    ``post_mlp_norm`` before the residual add and after ``down_proj``.
    """
    f = _flags(cfg)
    return _ops(f["mla"], f["moe"], f["post_norms"], f["qk_norm"])


def model_expressions(
    *, causal: bool = True, gated_mlp: bool = True, qkv_bias: bool = False,
    moe: bool = False, mla: bool = False, q_lora: bool = True, absorbed: bool = False,
    windowed: bool = False, post_norms: bool = False, qk_norm: bool = False, act: str = "silu",
    logits: str = "last",
) -> dict[str, tuple[sp.Expr, sp.Expr, sp.Expr]]:
    """Per operation ``(flops, bytes_read, bytes_written)`` of one pass, for any supported model.

    ``moe=mla=False`` (and the Gemma switches off) gives :func:`op_expressions`. With ``moe``,
    the symbols ``E, k, n_shared, d_expert, n_dense`` enter; with ``mla``, ``r_q, r_kv, d_rope,
    d_nope, d_v`` (``q_lora=False``: no query compression). ``absorbed`` picks latent
    attention's form (see the section notes). ``windowed``: ``n_local`` of the ``n_layers``
    layers attend within a sliding window of ``W`` keys (symbols ``n_local``, ``W``).
    ``post_norms``: Gemma's norms after attention and MLP; ``qk_norm``: Gemma 3's norms of
    queries and keys; ``act``: the MLP activation, a key of :data:`ACTIVATION_FLOPS`;
    ``logits``: where the LM head runs, ``"last"`` or ``"all"`` (:func:`op_expressions`).
    """
    if act not in ACTIVATION_FLOPS:
        raise ValueError(f"act must be one of {', '.join(ACTIVATION_FLOPS)}, got {act!r}")
    return _logits_at(dict(_model_expressions(causal, gated_mlp, qkv_bias, moe, mla, q_lora,
                                              absorbed, windowed, post_norms, qk_norm, act)),
                      logits)


@cache
def _model_expressions(causal, gated_mlp, qkv_bias, moe, mla, q_lora, absorbed,
                       windowed=False, post_norms=False, qk_norm=False, act="silu"):
    if mla and (windowed or qk_norm):
        raise ValueError("latent attention (mla) has no sliding window or QK norm here")
    dense = _op_expressions(causal, gated_mlp, qkv_bias, windowed, post_norms, qk_norm, act)
    out = dict(dense)
    if mla:
        out = _splice(out, _DENSE_ATTENTION, _mla_expressions(causal, q_lora, absorbed))
    if moe:
        out = _splice(out, _DENSE_MLP, _moe_expressions(dense, gated_mlp, act))
    assert tuple(out) == _ops(mla, moe, post_norms, qk_norm)
    return {op: tuple(sp.sympify(x) for x in e) for op, e in out.items()}


def _mla_expressions(causal: bool, q_lora: bool, absorbed: bool) -> dict:
    T, S, N, H = B * n_new, n_past + n_new, n_layers, n_heads
    pairs = B * H * attention_pairs_expr(causal)
    qk, latent = d_nope + d_rope, kv_rank + d_rope
    W = _mla_layer_params(q_lora)  # one layer's parameters
    zero = (sp.Integer(0),) * 3

    def linear(op, tokens, d_in, d_out):
        return 2 * tokens * d_in * d_out, W[op] * b_w + tokens * d_in * b_act, tokens * d_out * b_act

    def norm(op, width):
        return 4 * T * width, T * width * b_act + W[op] * b_w, T * width * b_act

    if absorbed:  # q_nope -> latent before the scores; latent output -> d_v after the values
        kv_b = (
            2 * T * H * kv_rank * (d_nope + d_v),
            W["kv_b_proj"] * b_w + T * H * (d_nope + kv_rank) * b_act,
            T * H * (kv_rank + d_v) * b_act,
        )
        scores = (2 * latent * pairs, T * H * latent * b_act, pairs * b_act)
        values = (2 * kv_rank * pairs, pairs * b_act, T * H * kv_rank * b_act)
    else:  # up-project the S cached latents (read by kv_read) to per-head keys and values
        kv_b = (
            2 * B * S * kv_rank * H * (d_nope + d_v),
            W["kv_b_proj"] * b_w,
            B * S * H * (d_nope + d_v) * b_act,
        )
        scores = (2 * qk * pairs, T * H * qk * b_act + B * S * H * d_nope * b_act, pairs * b_act)
        values = (2 * d_v * pairs, pairs * b_act + B * S * H * d_v * b_act, T * H * d_v * b_act)
    rotary = (H + 1) * d_rope  # the query's rotary part per head and the one shared key
    e = {
        "q_a_proj": linear("q_a_proj", T, d_model, q_rank) if q_lora else zero,
        "q_a_norm": norm("q_a_norm", q_rank) if q_lora else zero,
        "q_b_proj": linear("q_b_proj", T, q_rank if q_lora else d_model, H * qk),
        "kv_a_proj": linear("kv_a_proj", T, d_model, latent),
        "kv_a_norm": norm("kv_a_norm", kv_rank),
        "rope": (
            3 * T * rotary,
            T * rotary * b_act + 2 * n_new * d_rope * b_act,
            T * rotary * b_act,
        ),
        "kv_write": (0, T * latent * b_act, T * latent * b_kv),
        "kv_read": (0, B * S * latent * b_kv, 0),
        "kv_b_proj": kv_b,
        "attn_scores": scores,
        "softmax": (6 * pairs, pairs * b_act, pairs * b_act),
        "attn_values": values,
        "o_proj": linear("o_proj", T, H * d_v, d_model),
    }
    assert tuple(e) == MLA_ATTENTION_OPS
    return {op: tuple(N * x for x in v) for op, v in e.items()}


def _moe_expressions(dense: dict, gated_mlp: bool, act: str) -> dict:
    T = B * n_new
    A = T * (top_k + n_shared)  # (token, expert) pairs
    touched = expected_experts_expr() / n_experts  # share of the routed experts a pass reads
    M = n_layers - n_dense  # MoE layers
    first = {op: tuple(x.subs(n_layers, n_dense) for x in dense[op]) for op in _DENSE_MLP}
    W = _expert_params(gated_mlp)  # one MoE layer's parameters
    zero = (sp.Integer(0),) * 3

    def expert_linear(op, d_in, d_out):
        # every shared expert's weights, and the routed experts' that some token is sent to
        read = (W[op]["shared_experts"] + W[op]["routed_experts"] * touched) * b_w
        return 2 * A * d_in * d_out, read + A * d_in * b_act, A * d_out * b_act

    flops = ACTIVATION_FLOPS[act] + (1 if gated_mlp else 0)  # per element, as in the dense MLP
    inputs = 2 if gated_mlp else 1
    moe = {
        "router": (
            2 * T * d_model * n_experts,
            W["router"]["router"] * b_w + T * d_model * b_act,
            T * n_experts * b_act,
        ),
        "gate_proj": expert_linear("gate_proj", d_model, d_expert) if gated_mlp else zero,
        "up_proj": expert_linear("up_proj", d_model, d_expert),
        "mlp_act": (flops * A * d_expert, inputs * A * d_expert * b_act, A * d_expert * b_act),
        "down_proj": expert_linear("down_proj", d_expert, d_model),
        "moe_combine": (2 * A * d_model, A * d_model * b_act, T * d_model * b_act),
    }
    assert tuple(moe) == MOE_MLP_OPS
    return {
        op: tuple(M * x + (first[op][i] if op in first else 0) for i, x in enumerate(v))
        for op, v in moe.items()
    }


def expressions_for(cfg, *, causal: bool = True, absorbed: bool = False,
                    logits: str = "last") -> dict:
    """:func:`model_expressions` with the structure (MoE, MLA, windows, norms, MLP) of ``cfg``."""
    return model_expressions(causal=causal, absorbed=absorbed, logits=logits, **_flags(cfg))
