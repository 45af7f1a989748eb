"""Model configurations: one ``ModelConfig`` for the formulas, the calculator and the tiny transformer.

The field names are the book's notation (``n_layers``, ``n_heads``, ``n_kv_heads``, ``head_dim``),
not Hugging Face's; ``ModelConfig.from_hf_config`` translates a ``config.json``.

Built-in models are the real ``config.json`` files of their Hugging Face repositories, stored
unchanged under ``data/models/<name>.json``; ``data/models/_index.json`` names each one's
repository and its published parameter count (with a source), which the tests compare against.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from . import formulas
from .dtypes import bytes_per_element

# Hugging Face ``model_type`` values whose config.json this module reads exactly.
# Every family here uses RMSNorm, rotary positions and (except where noted) a SwiGLU MLP.
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "deepseek_v2", "deepseek_v3")


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

    def __post_init__(self) -> None:
        for field in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "head_dim",
            "max_context",
        ):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"ModelConfig.{field} must be a positive integer, got {value!r}")
        for field in (
            "n_routed_experts",
            "n_experts_per_token",
            "n_shared_experts",
            "moe_intermediate_size",
            "first_dense_layers",
            "q_lora_rank",
            "kv_lora_rank",
            "qk_rope_head_dim",
            "qk_nope_head_dim",
            "v_head_dim",
        ):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(
                    f"ModelConfig.{field} must be a non-negative integer (0: not used), "
                    f"got {value!r}"
                )
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"ModelConfig.n_heads ({self.n_heads}) must be a multiple of "
                f"n_kv_heads ({self.n_kv_heads}): each KV head serves a whole group of query heads"
            )
        if not self.rope_theta > 0:
            raise ValueError(f"ModelConfig.rope_theta must be positive, got {self.rope_theta!r}")
        if not self.norm_eps > 0:
            raise ValueError(f"ModelConfig.norm_eps must be positive, got {self.norm_eps!r}")
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
        elif self.q_lora_rank or self.qk_rope_head_dim or self.qk_nope_head_dim or self.v_head_dim:
            raise ValueError(
                "ModelConfig.q_lora_rank, qk_rope_head_dim, qk_nope_head_dim and v_head_dim must "
                "be 0 when kv_lora_rank is 0 (standard attention)"
            )

    @property
    def group_size(self) -> int:
        """Query heads per KV head: 1 for MHA, n_heads for MQA."""
        return self.n_heads // self.n_kv_heads

    @property
    def is_moe(self) -> bool:
        return self.n_routed_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def n_moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts (0 for a dense model)."""
        return self.n_layers - self.first_dense_layers if self.is_moe else 0

    # ---- parameter counts: valued from formulas.param_expressions, the one source ---------

    def attention_params(self) -> int:
        """Parameters of one layer's attention block (projections, biases, MLA's and QK norms)."""
        return formulas.param_counts(self)["attention"] // self.n_layers

    def param_counts(self) -> dict[str, int]:
        """Parameters by component; they sum to ``n_params``.

        Keys: ``embedding``, ``attention``, ``mlp`` (dense MLP layers), ``router``,
        ``shared_experts``, ``routed_experts``, ``norms``, ``lm_head`` (0 when tied).
        Valued from :func:`llm_roofline.formulas.param_expressions`, the expressions whose
        weight bytes the calculator counts.
        """
        return formulas.param_counts(self)

    def params_by_op(self) -> dict[str, int]:
        """Parameters by the operation that uses them, over all layers; they sum to ``n_params``.

        Keys are operation names of ``formulas.ops_for`` (``embed``, the norms, the attention
        projections, ``router`` for MoE, ``gate_proj``/``up_proj``/``down_proj`` with the dense
        MLPs and all experts, ``lm_head``), so that a per-op rule, such as which ops tensor
        parallelism replicates, applies to the weights as it does to the FLOPs and bytes.
        """
        return formulas.params_by_op(self)

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

    # ---- KV cache ---------------------------------------------------------------------------

    @property
    def kv_elements_per_token(self) -> int:
        """Numbers the KV cache holds per token, over all layers.

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

        ``kv_elements_per_token * context`` for global attention; ``context`` may be a NumPy
        array (the result broadcasts). The calculator sizes the cache with this method.
        """
        return self.kv_elements_per_token * context

    def kv_cache_bytes_per_token(self, dtype: str = "bf16") -> float:
        """Bytes of KV cache per token (all layers) stored in ``dtype`` (a ``dtypes`` name)."""
        return float(self.kv_elements_per_token * bytes_per_element(dtype))

    # ---- Hugging Face config.json -----------------------------------------------------------

    @classmethod
    def from_hf_config(cls, config: dict, name: str | None = None) -> ModelConfig:
        """Build a ``ModelConfig`` from a Hugging Face ``config.json`` loaded as a dict.

        Reads the families in ``SUPPORTED_MODEL_TYPES``; any other ``model_type``, or a
        missing required field, raises ``ValueError`` naming it. Absent optional fields take
        the Hugging Face defaults of these families (``num_key_value_heads = num_attention_heads``,
        ``head_dim = hidden_size // num_attention_heads``, untied embeddings).

        Sliding-window attention is not modelled (it would cap the KV cache at the window), so
        a ``sliding_window`` shorter than ``max_position_embeddings`` raises ``ValueError``
        unless the config turns it off (``use_sliding_window: false``, as Qwen2 configs do);
        a null window, or one no shorter than the context, changes nothing and is accepted.
        """
        if not isinstance(config, dict):
            raise ValueError(
                f"config must be a dict (a loaded config.json), got {type(config).__name__}"
            )
        model_type = config.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"config.json model_type {model_type!r} is not supported; "
                f"allowed: {', '.join(SUPPORTED_MODEL_TYPES)}"
            )

        def need(key: str):
            if config.get(key) is None:
                raise ValueError(
                    f"config.json ({model_type}) is missing the required field {key!r}"
                )
            return config[key]

        hidden, heads = need("hidden_size"), need("num_attention_heads")
        kv_heads = config.get("num_key_value_heads")
        if kv_heads is None:
            kv_heads = heads  # the Hugging Face default: multi-head attention
        elif isinstance(kv_heads, bool) or not isinstance(kv_heads, int) or kv_heads <= 0:
            raise ValueError(
                f"config.json num_key_value_heads must be a positive integer (or absent, meaning "
                f"num_attention_heads), got {kv_heads!r}"
            )
        window = config.get("sliding_window")
        harmless = isinstance(window, int) and window >= need("max_position_embeddings")
        turned_off = config.get("use_sliding_window", True) is False
        if window is not None and not turned_off and not harmless:
            raise ValueError(
                f"config.json sliding_window {window!r} is not supported: sliding-window "
                "attention is not modelled (allowed: null, no shorter than "
                "max_position_embeddings, or use_sliding_window: false)"
            )
        fields = dict(
            name=name or config.get("_name_or_path") or model_type,
            vocab_size=need("vocab_size"),
            hidden_size=hidden,
            intermediate_size=need("intermediate_size"),
            n_layers=need("num_hidden_layers"),
            n_heads=heads,
            n_kv_heads=kv_heads,
            max_context=need("max_position_embeddings"),
            rope_theta=float(config.get("rope_theta", 10000.0)),
            norm_eps=float(config.get("rms_norm_eps", 1e-6)),
            tie_embeddings=bool(config.get("tie_word_embeddings", False)),
            qkv_bias=model_type == "qwen2" or bool(config.get("attention_bias", False)),
        )
        if model_type == "mixtral":
            fields.update(
                n_routed_experts=need("num_local_experts"),
                n_experts_per_token=need("num_experts_per_tok"),
                moe_intermediate_size=fields["intermediate_size"],
            )
        if model_type.startswith("deepseek"):
            if config.get("n_routed_experts"):
                if config.get("moe_layer_freq", 1) != 1:
                    raise ValueError(
                        f"config.json moe_layer_freq {config['moe_layer_freq']!r} is not "
                        "supported; allowed: 1 (every layer after first_k_dense_replace is MoE)"
                    )
                fields.update(
                    n_routed_experts=need("n_routed_experts"),
                    n_experts_per_token=need("num_experts_per_tok"),
                    n_shared_experts=config.get("n_shared_experts") or 0,
                    moe_intermediate_size=need("moe_intermediate_size"),
                    first_dense_layers=config.get("first_k_dense_replace") or 0,
                )
            nope, rope = need("qk_nope_head_dim"), need("qk_rope_head_dim")
            fields.update(
                q_lora_rank=config.get("q_lora_rank") or 0,
                kv_lora_rank=need("kv_lora_rank"),
                qk_nope_head_dim=nope,
                qk_rope_head_dim=rope,
                v_head_dim=need("v_head_dim"),
                head_dim=nope + rope,
            )
        else:
            head_dim = config.get("head_dim")
            if head_dim is None:
                if hidden % heads:
                    raise ValueError(
                        f"config.json has no head_dim and hidden_size ({hidden}) is not a multiple "
                        f"of num_attention_heads ({heads}); add head_dim"
                    )
                head_dim = hidden // heads
            fields["head_dim"] = head_dim
        return cls(**fields)


# ---- built-in models ------------------------------------------------------------------------

_MODELS = resources.files("llm_roofline") / "data" / "models"


def _index() -> dict:
    return json.loads((_MODELS / "_index.json").read_text())


def list_models() -> list[str]:
    """Names of the built-in models, for ``get_model``."""
    return sorted(_index())


def get_model(name: str) -> ModelConfig:
    """A built-in model by name (see ``list_models``), read from its stored ``config.json``."""
    key = str(name).lower()
    if key not in _index():
        raise ValueError(f"unknown model {name!r}; built in: {', '.join(list_models())}")
    config = json.loads((_MODELS / f"{key}.json").read_text())
    return ModelConfig.from_hf_config(config, name=key)


def model_info(name: str) -> dict:
    """Where a built-in model comes from and its published size.

    Keys: ``hf_repo``, ``params`` (published total), ``active_params`` (published per token,
    MoE only, else equal to ``params``), ``source`` (where the published figures are stated).
    """
    index = _index()
    key = str(name).lower()
    if key not in index:
        raise ValueError(f"unknown model {name!r}; built in: {', '.join(list_models())}")
    info = dict(index[key])
    info.setdefault("active_params", info["params"])
    return info
