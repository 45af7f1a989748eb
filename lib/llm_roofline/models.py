"""Model configurations: one ``ModelConfig`` for the formulas, the calculator and the tiny transformer.

The field names are the book's notation (``n_layers``, ``n_heads``, ``n_kv_heads``, ``head_dim``),
not Hugging Face's; ``ModelConfig.from_hf_config`` translates a ``config.json``.

Built-in models are the real ``config.json`` files of their Hugging Face repositories, stored
unchanged under ``data/models/<name>.json``; ``data/models/_index.json`` names each one's
repository and its published parameter count (with a source), which the tests compare against.
:func:`load_config` reads any other ``config.json`` (a file, or a downloaded snapshot folder).

Parameter counts are not written here: ``param_counts`` and ``params_by_op`` value
:func:`llm_roofline.formulas.param_expressions`, the same expressions whose weight bytes the
calculator counts.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from . import counts, formulas, validate
from .dtypes import bytes_per_element, mla_cache_bytes_per_element

__all__ = [
    "LAYER_TYPES", "MAX_CONFIG_BYTES", "MLP_ACTIVATIONS", "ModelConfig",
    "SUPPORTED_MODEL_TYPES", "get_model", "list_models", "load_config", "model_info",
]

SUPPORTED_MODEL_TYPES = (
    "llama", "mistral", "mixtral", "qwen2", "deepseek_v2", "deepseek_v3",
    "gemma2", "gemma3", "gemma3_text", "qwen3_moe", "gpt_oss",
)
"""Hugging Face ``model_type`` values whose ``config.json`` :meth:`ModelConfig.from_hf_config`
reads exactly. Every family uses RMSNorm and rotary positions; Llama, Mistral, Mixtral, Qwen2,
Qwen3-MoE, gpt-oss and DeepSeek a SwiGLU MLP, Gemma a GeGLU MLP, extra norms and local/global
attention layers. Qwen3-MoE: per-head q/k norms, every layer MoE (``decoder_sparse_step`` 1,
no ``mlp_only_layers``). gpt-oss: every layer MoE, biased attention projections, sliding and
full attention layers alternating (``layer_types``); its per-head attention sinks (one number a
head a layer) and the experts' and router's biases (about 0.03 % of its weights) are not
counted."""

LAYER_TYPES = ("full_attention", "sliding_attention")
"""Hugging Face's names for a layer's attention: over the whole context, or a sliding window."""

MLP_ACTIVATIONS = tuple(formulas.ACTIVATION_FLOPS)
"""The MLP activations counted (``ModelConfig.mlp_activation``)."""

_POSITIVE = ("vocab_size", "hidden_size", "intermediate_size", "n_layers", "n_heads",
             "n_kv_heads", "head_dim", "max_context")
_NON_NEGATIVE = ("n_routed_experts", "n_experts_per_token", "n_shared_experts",
                 "moe_intermediate_size", "first_dense_layers", "q_lora_rank", "kv_lora_rank",
                 "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "sliding_window")
_BOOLEANS = ("tie_embeddings", "gated_mlp", "qkv_bias", "post_norms", "qk_norm")


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a decoder-only transformer.

    Dense fields are required; the attention is multi-head (``n_kv_heads == n_heads``),
    grouped-query (``n_heads`` a multiple of ``n_kv_heads``) or multi-query (``n_kv_heads == 1``).

    Mixture of experts (``n_routed_experts > 0``): from layer ``first_dense_layers`` on, the MLP
    is a router (``hidden_size x n_routed_experts``), ``n_routed_experts`` SwiGLU experts of
    width ``moe_intermediate_size`` of which each token uses ``n_experts_per_token``, and
    ``n_shared_experts`` experts of the same width that every token uses. The first
    ``first_dense_layers`` layers keep a dense MLP of width ``intermediate_size``.

    Multi-head latent attention (``kv_lora_rank > 0``, DeepSeek-V2/V3): keys and values are
    up-projected from a shared latent of ``kv_lora_rank`` numbers per token, plus one decoupled
    rotary key of ``qk_rope_head_dim``; the cache holds only these ``kv_lora_rank +
    qk_rope_head_dim`` numbers per token per layer. Query/key heads have
    ``head_dim = qk_nope_head_dim + qk_rope_head_dim``; value heads have ``v_head_dim``.
    ``q_lora_rank > 0`` compresses the queries through a rank-``q_lora_rank`` bottleneck.

    Sliding-window attention (``sliding_window > 0``): a windowed layer's query sees only the
    last ``sliding_window`` keys (itself included), so its KV cache holds at most that many
    tokens. ``layer_types`` says which layers (one :data:`LAYER_TYPES` name per layer, as
    Hugging Face writes it); empty, every layer is windowed (Mistral-7B v0.1).

    Gemma: ``post_norms`` adds an RMSNorm after the attention and after the MLP (before each
    residual add); ``qk_norm`` normalises every head's query and key (Gemma 3);
    ``mlp_activation`` is ``"gelu_tanh"`` (GeGLU). Gemma's other details change no count of
    weights or cache and are not modelled: the embedding's scaling by ``sqrt(hidden_size)``,
    the logit soft-capping (Gemma 2) and ``query_pre_attn_scalar`` (the softmax's scale).
    """

    name: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    max_context: int = 4096
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU: gate, up and down projections; False: up and down only
    qkv_bias: bool = False  # Qwen2-style biases on the q, k and v projections
    # Mixture of experts (all zero: a dense model)
    n_routed_experts: int = 0
    n_experts_per_token: int = 0
    n_shared_experts: int = 0
    moe_intermediate_size: int = 0
    first_dense_layers: int = 0
    # Multi-head latent attention (all zero: standard attention)
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # Sliding-window attention (0: every layer attends to the whole context)
    sliding_window: int = 0
    layer_types: tuple[str, ...] = ()
    # Gemma
    post_norms: bool = False
    qk_norm: bool = False
    mlp_activation: str = "silu"

    def __post_init__(self) -> None:
        def put(field, value):
            object.__setattr__(self, field, value)

        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"ModelConfig.name must be a non-empty string, got "
                             f"{validate.shorten(self.name)}")
        for field in _POSITIVE:
            put(field, validate.integer(f"ModelConfig.{field}", getattr(self, field)))
        for field in _NON_NEGATIVE:
            put(field, validate.integer(f"ModelConfig.{field} (0: not used)", getattr(self, field),
                                        minimum=0))
        for field in _BOOLEANS:
            put(field, validate.boolean(f"ModelConfig.{field}", getattr(self, field)))
        put("rope_theta", validate.real("ModelConfig.rope_theta", self.rope_theta, minimum=0,
                                        open_min=True))
        put("norm_eps", validate.real("ModelConfig.norm_eps", self.norm_eps, minimum=0,
                                      open_min=True, maximum=1))
        put("mlp_activation", validate.choice("ModelConfig.mlp_activation", self.mlp_activation,
                                              MLP_ACTIVATIONS))
        self._check_layer_types()
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"ModelConfig.n_heads ({self.n_heads}) must be a multiple of "
                f"n_kv_heads ({self.n_kv_heads}): each KV head serves a whole group of query heads"
            )
        if self.n_routed_experts:
            if not 1 <= self.n_experts_per_token <= self.n_routed_experts:
                raise ValueError(
                    f"ModelConfig.n_experts_per_token must be between 1 and n_routed_experts "
                    f"({self.n_routed_experts}), got {self.n_experts_per_token}"
                )
            if self.moe_intermediate_size <= 0:
                raise ValueError(
                    "ModelConfig.moe_intermediate_size must be a positive integer for an MoE "
                    f"model, got {self.moe_intermediate_size}"
                )
            if self.first_dense_layers >= self.n_layers:
                raise ValueError(
                    f"ModelConfig.first_dense_layers must be below n_layers ({self.n_layers}), "
                    f"got {self.first_dense_layers}"
                )
        elif self.n_experts_per_token or self.n_shared_experts or self.first_dense_layers:
            raise ValueError(
                "ModelConfig.n_experts_per_token, n_shared_experts and first_dense_layers must "
                "be 0 when n_routed_experts is 0 (a dense model)"
            )
        if self.kv_lora_rank:
            if self.qk_rope_head_dim <= 0 or self.qk_nope_head_dim <= 0 or self.v_head_dim <= 0:
                raise ValueError(
                    "ModelConfig.qk_rope_head_dim, qk_nope_head_dim and v_head_dim must be "
                    "positive integers for multi-head latent attention (kv_lora_rank > 0)"
                )
            if self.head_dim != self.qk_nope_head_dim + self.qk_rope_head_dim:
                raise ValueError(
                    f"ModelConfig.head_dim ({self.head_dim}) must equal qk_nope_head_dim + "
                    f"qk_rope_head_dim ({self.qk_nope_head_dim + self.qk_rope_head_dim}) for MLA"
                )
            if self.sliding_window or self.qk_norm:
                raise ValueError(
                    "ModelConfig.sliding_window and qk_norm must be 0/False with multi-head "
                    "latent attention (kv_lora_rank > 0): that combination is not modelled"
                )
        elif self.q_lora_rank or self.qk_rope_head_dim or self.qk_nope_head_dim or self.v_head_dim:
            raise ValueError(
                "ModelConfig.q_lora_rank, qk_rope_head_dim, qk_nope_head_dim and v_head_dim must "
                "be 0 when kv_lora_rank is 0 (standard attention)"
            )

    def _check_layer_types(self) -> None:
        types = self.layer_types
        what = (f"ModelConfig.layer_types must be empty or hold one of {', '.join(LAYER_TYPES)} "
                f"for each of the {self.n_layers} layers")
        if isinstance(types, str | bytes) or not isinstance(types, tuple | list):
            raise ValueError(f"{what}, got {validate.shorten(types)}")
        if types and (len(types) != self.n_layers or any(t not in LAYER_TYPES for t in types)):
            raise ValueError(f"{what}, got {validate.shorten(types)}")
        object.__setattr__(self, "layer_types", tuple(types))
        if "sliding_attention" in types and not self.sliding_window:
            raise ValueError(
                "ModelConfig.sliding_window must be positive when layer_types names "
                f"sliding_attention layers, got {self.sliding_window}"
            )

    @property
    def group_size(self) -> int:
        """Query heads per KV head: 1 for MHA, n_heads for MQA."""
        return self.n_heads // self.n_kv_heads

    @property
    def is_moe(self) -> bool:
        """Whether the model routes tokens to experts (a mixture of experts)."""
        return self.n_routed_experts > 0

    @property
    def is_mla(self) -> bool:
        """Whether attention is multi-head latent attention (a compressed latent KV cache)."""
        return self.kv_lora_rank > 0

    @property
    def n_moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts (0 for a dense model)."""
        return self.n_layers - self.first_dense_layers if self.is_moe else 0

    # ---- parameter counts: valued from formulas.param_expressions, the one source ---------

    def attention_params(self) -> int:
        """Parameters of one layer's attention block (projections, biases, MLA's and QK norms)."""
        return counts.param_counts(self)["attention"] // self.n_layers

    def param_counts(self) -> dict[str, int]:
        """Parameters by component; they sum to ``n_params``.

        Keys: ``embedding``, ``attention``, ``mlp`` (dense MLP layers), ``router``,
        ``shared_experts``, ``routed_experts``, ``norms``, ``lm_head`` (0 when tied).
        Valued from :func:`llm_roofline.formulas.param_expressions`, the expressions whose
        weight bytes the calculator counts.
        """
        return counts.param_counts(self)

    def params_by_op(self) -> dict[str, int]:
        """Parameters by the operation that uses them, over all layers; they sum to ``n_params``.

        Keys are operation names of ``formulas.ops_for`` (``embed``, the norms, the attention
        projections, ``router`` for MoE, ``gate_proj``/``up_proj``/``down_proj`` with the dense
        MLPs and all experts, ``lm_head``), so that a per-op rule, such as which ops tensor
        parallelism replicates, applies to the weights as it does to the FLOPs and bytes.
        """
        return counts.params_by_op(self)

    @property
    def n_params(self) -> int:
        """All parameters: what must be resident in memory."""
        return sum(self.param_counts().values())

    @property
    def n_active_params(self) -> int:
        """Parameters one token uses: everything but the routed experts it is not sent to.

        Equal to ``n_params`` for a dense model. Includes the embedding row lookup's table and
        the LM head, as published counts do (Mixtral's 12.9B, DeepSeek-V3's 37B).
        """
        counts = self.param_counts()
        if not self.is_moe:
            return self.n_params
        routed = counts["routed_experts"] * self.n_experts_per_token // self.n_routed_experts
        return self.n_params - counts["routed_experts"] + routed

    # ---- attention layers and the KV cache -------------------------------------------------

    @property
    def n_windowed_layers(self) -> int:
        """Layers that attend within ``sliding_window`` (0 when there is no window)."""
        if not self.sliding_window:
            return 0
        if not self.layer_types:
            return self.n_layers
        return self.layer_types.count("sliding_attention")

    @property
    def attention_layers(self) -> str:
        """Which layers are windowed, in words: ``"all 32 global"``, ``"21 of 42 windowed (4,096
        tokens), 21 global"``, ``"all 32 windowed (4,096 tokens)"``."""
        n, w = self.n_layers, self.n_windowed_layers
        if w == 0:
            return f"all {n} global"
        window = f"windowed ({self.sliding_window:,} tokens)"
        if w == n:
            return f"all {n} {window}"
        return f"{w} of {n} {window}, {n - w} global"

    @property
    def kv_elements_per_token(self) -> int:
        """Numbers the KV cache holds per token, over all layers, while the context fits every
        window (see :meth:`kv_cache_elements` beyond it).

        Standard attention: a key and a value of ``head_dim`` for each KV head, each layer:
        ``2 * n_layers * n_kv_heads * head_dim`` (KV heads, not query heads; the real
        ``head_dim``, not ``hidden_size / n_heads``). MLA: the compressed latent and the shared
        rotary key, ``n_layers * (kv_lora_rank + qk_rope_head_dim)``.
        """
        if self.is_mla:
            return self.n_layers * (self.kv_lora_rank + self.qk_rope_head_dim)
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim

    def kv_cache_elements(self, context):
        """Numbers the KV cache holds for one sequence of ``context`` tokens, over all layers.

        A global layer holds every token, a windowed layer at most ``sliding_window`` of them:
        ``per_layer * (n_global * context + n_windowed * min(context, sliding_window))`` with
        ``per_layer = kv_elements_per_token / n_layers``. ``context`` may be a NumPy array (the
        result broadcasts). The calculator sizes the cache with this method.
        """
        windowed = self.n_windowed_layers
        if not windowed:
            return self.kv_elements_per_token * context
        per_layer = self.kv_elements_per_token // self.n_layers
        if np.ndim(context):
            held = np.minimum(context, self.sliding_window)
        else:
            held = min(context, self.sliding_window)
        return per_layer * ((self.n_layers - windowed) * context + windowed * held)

    def kv_bytes_per_element(self, dtype: str = "bf16") -> float:
        """Bytes one cached number costs, stored in ``dtype`` (a ``dtypes`` name).

        ``bytes_per_element(dtype)``, except an MLA latent cache in fp8, stored as FlashMLA
        stores it (``dtypes.mla_cache_bytes_per_element``: for DeepSeek-V3, 656 bytes a token
        a layer for its 576 numbers, not 576). The one rule every caller uses.
        """
        if self.is_mla:
            return float(mla_cache_bytes_per_element(dtype, self.kv_lora_rank,
                                                     self.qk_rope_head_dim))
        return float(bytes_per_element(dtype))

    def kv_cache_bytes_per_token(self, dtype: str = "bf16") -> float:
        """Bytes of KV cache per token (all layers) stored in ``dtype`` (a ``dtypes`` name), while
        the context fits every window; an fp8 MLA latent as FlashMLA stores it (see
        :meth:`kv_bytes_per_element`)."""
        return float(self.kv_elements_per_token * self.kv_bytes_per_element(dtype))

    # ---- Hugging Face config.json -----------------------------------------------------------

    @classmethod
    def from_hf_config(cls, config: dict, name: str | None = None) -> ModelConfig:
        """Build a ``ModelConfig`` from a Hugging Face ``config.json`` loaded as a dict.

        Reads the families in :data:`SUPPORTED_MODEL_TYPES` (``gemma3``: its ``text_config``).
        Every field read is type-checked on its own: integers must be JSON integers (not
        ``"4096"`` nor ``4096.0``), booleans JSON booleans (not ``"false"``), within range; a
        bad, missing or unsupported field raises a one-line ``ValueError`` naming it and its
        value. Absent optional fields take the Hugging Face defaults of the family
        (``num_key_value_heads = num_attention_heads``, ``head_dim = hidden_size //
        num_attention_heads``, untied embeddings; Gemma: tied, ``head_dim`` 256, GeGLU).

        Sliding windows, as each family's code applies them: Mistral and Mixtral window every
        layer; Qwen2 the layers from ``max_window_layers`` on, if ``use_sliding_window``;
        Gemma 2 every other layer (the even ones), Gemma 3 all but every ``sliding_window_pattern``-th
        (default 6); a ``layer_types`` list, where the config has one, says it outright. A
        window no shorter than ``max_position_embeddings`` changes nothing and is dropped.
        The name is ``name``, else the config's ``_name_or_path``, else its ``model_type``.
        """
        if not isinstance(config, dict):
            raise ValueError(
                f"config must be a dict (a loaded config.json), got {type(config).__name__}"
            )
        return cls(**_HFReader(config).fields(name))


class _HFReader:
    """Reads the fields of one ``config.json``, each checked for its type and range."""

    def __init__(self, config: dict):
        model_type = config.get("model_type")
        if not isinstance(model_type, str) or model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"config.json model_type {validate.shorten(model_type, 40)} is not supported; "
                f"allowed: {', '.join(SUPPORTED_MODEL_TYPES)}"
            )
        self.outer = config
        if model_type == "gemma3":  # the multimodal wrapper: the language model's own config
            text = config.get("text_config")
            if not isinstance(text, dict):
                raise ValueError(
                    f"config.json (gemma3) text_config must be an object, got "
                    f"{validate.shorten(text)}"
                )
            config, model_type = text, "gemma3_text"
        self.config, self.type = config, model_type
        self.gemma = model_type.startswith("gemma")

    def _field(self, key: str) -> str:
        return f"config.json {key}"

    def get(self, key: str, default=None):
        """The value, or ``default`` when absent or null."""
        value = self.config.get(key)
        return default if value is None else value

    def need(self, key: str):
        value = self.config.get(key)
        if value is None:
            raise ValueError(f"config.json ({self.type}) is missing the required field {key!r}")
        return value

    def integer(self, key: str, default=None, *, minimum: int = 1) -> int:
        value = self.need(key) if default is None else self.get(key, default)
        return validate.integer(self._field(key), value, minimum=minimum)

    def boolean(self, key: str, default: bool) -> bool:
        return validate.boolean(self._field(key), self.get(key, default))

    def real(self, key: str, default: float) -> float:
        value = self.config.get(key, default)  # present but null is an error, not the default
        return validate.real(self._field(key), value, minimum=0, open_min=True)

    def _rope_theta(self, default: float) -> float:
        """``rope_theta`` at the top level, or inside ``rope_parameters`` (transformers 5)."""
        nested = self.config.get("rope_parameters")
        if "rope_theta" not in self.config and isinstance(nested, dict) and "rope_theta" in nested:
            return validate.real(self._field("rope_parameters.rope_theta"), nested["rope_theta"],
                                 minimum=0, open_min=True)
        return self.real("rope_theta", default)

    def fields(self, name: str | None) -> dict:
        gemma, t = self.gemma, self.type
        hidden = self.integer("hidden_size")
        heads = self.integer("num_attention_heads", 8 if t == "gemma3_text" else None)
        kv_heads = self.get("num_key_value_heads", 4 if t == "gemma3_text" else heads)
        kv_heads = validate.integer(
            "config.json num_key_value_heads (absent: num_attention_heads)", kv_heads)
        context = self.integer("max_position_embeddings", 131072 if t == "gemma3_text" else None)
        fields = dict(
            name=self._name(name),
            vocab_size=self.integer("vocab_size", 262208 if t == "gemma3_text" else None),
            hidden_size=hidden,
            intermediate_size=self.integer("intermediate_size"),
            n_layers=self.integer("num_hidden_layers"),
            n_heads=heads,
            n_kv_heads=kv_heads,
            max_context=context,
            rope_theta=self._rope_theta(1e6 if t == "gemma3_text" else 10000.0),
            norm_eps=self.real("rms_norm_eps", 1e-6),
            tie_embeddings=self.boolean("tie_word_embeddings", gemma),
            qkv_bias=t == "qwen2" or self.boolean("attention_bias", False),
            mlp_activation=self._activation(),
            post_norms=gemma,
            qk_norm=t == "gemma3_text",
        )
        if gemma:
            self.real("query_pre_attn_scalar", 256)  # the softmax's scale: checked, not counted
        if t in ("mixtral", "gpt_oss"):
            fields.update(
                n_routed_experts=self.integer("num_local_experts"),
                n_experts_per_token=self.integer("num_experts_per_tok"),
                moe_intermediate_size=fields["intermediate_size"],
            )
        if t == "qwen3_moe":
            step = self.config.get("decoder_sparse_step", 1)
            only = self.config.get("mlp_only_layers", [])
            if step != 1 or isinstance(step, bool) or only not in ([], None):
                raise ValueError(
                    f"config.json (qwen3_moe) decoder_sparse_step {validate.shorten(step)} and "
                    f"mlp_only_layers {validate.shorten(only)} are not supported; allowed: 1 "
                    "and [] (every layer MoE)")
            fields.update(
                n_routed_experts=self.integer("num_experts"),
                n_experts_per_token=self.integer("num_experts_per_tok"),
                moe_intermediate_size=self.integer("moe_intermediate_size"),
                qk_norm=True,
            )
        if t.startswith("deepseek"):
            fields.update(self._deepseek())
        else:
            default = 256 if gemma else None
            head_dim = self.get("head_dim", default)
            if head_dim is None:
                if hidden % heads:
                    raise ValueError(
                        f"config.json has no head_dim and hidden_size ({hidden}) is not a multiple "
                        f"of num_attention_heads ({heads}); add head_dim"
                    )
                head_dim = hidden // heads
            fields["head_dim"] = validate.integer("config.json head_dim", head_dim)
            fields.update(self._windows(fields["n_layers"], context))
        return fields

    def _name(self, name) -> str:
        if name is not None:
            return name
        given = self.outer.get("_name_or_path")
        if given is not None and not isinstance(given, str):
            raise ValueError(f"config.json _name_or_path must be a string, got "
                             f"{validate.shorten(given)}")
        return (given or "").strip() or self.type

    def _activation(self) -> str:
        key = "hidden_activation" if self.gemma and "hidden_activation" in self.config else "hidden_act"
        value = self.get(key, "gelu_pytorch_tanh" if self.gemma else "silu")
        names = {"silu": "silu", "swish": "silu", "gelu_pytorch_tanh": "gelu_tanh",
                 "gelu_tanh": "gelu_tanh"}
        return names[validate.choice(f"config.json {key}", value, names)]

    def _deepseek(self) -> dict:
        fields = {}
        experts = self.get("n_routed_experts", 0)  # absent or null: a dense model
        experts = validate.integer("config.json n_routed_experts (0 or null: dense)", experts,
                                   minimum=0)
        if experts:
            freq = self.config.get("moe_layer_freq", 1)
            if freq != 1 or isinstance(freq, bool):
                raise ValueError(
                    f"config.json moe_layer_freq {validate.shorten(freq)} is not supported; "
                    "allowed: 1 (every layer after first_k_dense_replace is MoE)"
                )
            fields.update(
                n_routed_experts=self.integer("n_routed_experts"),
                n_experts_per_token=self.integer("num_experts_per_tok"),
                n_shared_experts=self.integer("n_shared_experts", 0, minimum=0),
                moe_intermediate_size=self.integer("moe_intermediate_size"),
                first_dense_layers=self.integer("first_k_dense_replace", 0, minimum=0),
            )
        nope, rope = self.integer("qk_nope_head_dim"), self.integer("qk_rope_head_dim")
        fields.update(
            q_lora_rank=self.integer("q_lora_rank", 0, minimum=0),
            kv_lora_rank=self.integer("kv_lora_rank"),
            qk_nope_head_dim=nope,
            qk_rope_head_dim=rope,
            v_head_dim=self.integer("v_head_dim"),
            head_dim=nope + rope,
        )
        return fields

    def _windows(self, n_layers: int, context: int) -> dict:
        """``sliding_window`` and ``layer_types`` as this family's code applies them."""
        t, none = self.type, {"sliding_window": 0, "layer_types": ()}
        if t == "llama":
            return none  # Llama's code has no sliding window
        default = {"gemma2": 4096, "gemma3_text": 4096}.get(t)
        window = self.config.get("sliding_window", default)
        if window is None:
            return none
        window = validate.integer("config.json sliding_window (null: none)", window)
        if t in ("qwen2", "qwen3_moe") and not self.boolean("use_sliding_window", False):
            return none
        listed = self.config.get("layer_types")
        if listed is not None:
            if not isinstance(listed, list) or len(listed) != n_layers or any(
                    x not in LAYER_TYPES for x in listed):
                raise ValueError(
                    f"config.json layer_types must list one of {', '.join(LAYER_TYPES)} for each "
                    f"of the {n_layers} layers, got {validate.shorten(listed)}")
            types = tuple(listed)
        elif t in ("qwen2", "qwen3_moe"):
            first = self.integer("max_window_layers", n_layers, minimum=0)
            types = tuple(LAYER_TYPES[i >= first] for i in range(n_layers))
        elif t in ("gemma2", "gpt_oss"):  # is_sliding = not bool(layer_idx % 2)
            types = tuple(LAYER_TYPES[i % 2 == 0] for i in range(n_layers))
        elif t == "gemma3_text":  # every pattern-th layer is global
            key = "sliding_window_pattern"
            if key not in self.config and "_sliding_window_pattern" in self.config:
                key = "_sliding_window_pattern"
            pattern = self.integer(key, 6)
            types = tuple(LAYER_TYPES[(i + 1) % pattern != 0] for i in range(n_layers))
        else:  # Mistral, Mixtral: every layer
            types = ()
        if window >= context or (types and "sliding_attention" not in types):
            return none  # the window never binds
        return {"sliding_window": window, "layer_types": types}


# ---- config.json files ----------------------------------------------------------------------

MAX_CONFIG_BYTES = 16 * 2**20
"""The largest config.json :func:`load_config` reads (a real one is a few kB)."""


def load_config(path: str | os.PathLike) -> ModelConfig:
    """A ``ModelConfig`` from a ``config.json`` file, or a folder holding one (a downloaded
    Hugging Face snapshot).

    The model is named from the config's own ``_name_or_path``, else the file's name (unless it
    is ``config.json``), else the repository of a Hugging Face cache folder
    (``models--org--name/snapshots/<commit>``), else the folder's name, else
    ``architectures[0]``. A missing, unreadable, binary, empty, oversized or invalid file, or JSON nested too
    deeply to parse, raises a one-line ``ValueError`` naming the path.
    """
    if not isinstance(path, str | os.PathLike):
        raise ValueError(f"config path must be a file or folder name, got {validate.shorten(path)}")
    text_path = os.fspath(path)
    if not isinstance(text_path, str) or not text_path.strip():
        raise ValueError("config path is empty: give a config.json file or a folder holding one")
    file = Path(text_path)
    shown = _shown(file)
    if "\x00" in text_path:
        raise ValueError(f"config: {shown} is not a valid path (it holds a NUL character)")
    try:
        is_dir = file.is_dir()
    except OSError as err:  # a name too long, a loop of links
        raise ValueError(f"config: cannot read {shown}: {err.strerror or err}") from None
    if is_dir:
        file = file / "config.json"
        kind = validate.what_is(file)
        if kind == "nothing":
            raise ValueError(f"config: the folder {shown} holds no config.json")
        if kind not in ("a regular file", "a link to a regular file"):
            raise ValueError(f"config: the folder {shown} holds a config.json that is {kind}, "
                             "not a file")
    config = validate.read_json("config", file, cap=MAX_CONFIG_BYTES)
    if not isinstance(config, dict):
        raise ValueError(f"config: {shown} holds a JSON {type(config).__name__}, not an object")
    try:
        return ModelConfig.from_hf_config(config, name=_config_name(config, file))
    except RecursionError:
        raise ValueError(f"config: {shown} nests JSON too deeply to read") from None
    except ValueError as err:
        raise ValueError(f"config {shown}: {err}") from None


def _shown(path: Path, limit: int = 100) -> str:
    """The path quoted, cut at the front when long: its end (the file's name) is what tells."""
    text = str(path)
    return repr(text) if len(text) <= limit else repr("…" + text[-(limit - 1):])


def _config_name(config: dict, file: Path) -> str | None:
    given = config.get("_name_or_path")
    if isinstance(given, str) and given.strip():
        return given.strip()
    if file.stem != "config":
        return file.stem
    # the folder the user named, links not followed: a Hugging Face cache's config.json is a
    # link into blobs/, whose name says nothing
    folder = Path(os.path.abspath(file)).parent
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return folder.parent.parent.name.removeprefix("models--").replace("--", "/")
    if folder.name:  # a download's folder is named for its model: "Mistral-7B-v0.1"
        return folder.name
    arch = config.get("architectures")
    if isinstance(arch, list) and arch and isinstance(arch[0], str) and arch[0].strip():
        return arch[0].strip()
    return None


# ---- built-in models ------------------------------------------------------------------------

_MODELS = resources.files("llm_roofline") / "data" / "models"


def _index() -> dict:
    return json.loads((_MODELS / "_index.json").read_text())


def list_models() -> list[str]:
    """Names of the built-in models, for ``get_model``."""
    return sorted(_index())


def _model_name(name) -> str:
    """The built-in model ``name`` means (case, spaces, dashes, dots, underscores ignored)."""
    return validate.choice("model", name, list_models())


def get_model(name: str) -> ModelConfig:
    """A built-in model by name (see ``list_models``), read from its stored ``config.json``.

    ``"Llama_3-70B"`` finds ``llama-3-70b``; an unknown name is answered with the closest ones.
    """
    key = _model_name(name)
    config = json.loads((_MODELS / f"{key}.json").read_text())
    return ModelConfig.from_hf_config(config, name=key)


def resolve(model, name: str = "model", *, names: bool = True) -> ModelConfig:
    """``model`` if it is a ``ModelConfig``, the built-in model it names if ``names`` and it is
    a string; anything else raises one-line ``ValueError``."""
    if isinstance(model, ModelConfig):
        return model
    if names and isinstance(model, str):
        return get_model(model)
    what = "a ModelConfig or a built-in model's name" if names else (
        "a ModelConfig (get_model(name) or load_config(path) gives one)")
    raise ValueError(f"{name} must be {what}, got {validate.shorten(model)}")


def model_info(name: str) -> dict:
    """Where a built-in model comes from and its published size.

    Keys: ``hf_repo``, ``params`` (published total), ``active_params`` (published per token,
    MoE only, else equal to ``params``), ``source`` (where the published figures are stated).
    """
    info = dict(_index()[_model_name(name)])
    info.setdefault("active_params", info["params"])
    return info
