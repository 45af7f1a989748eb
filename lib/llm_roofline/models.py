"""Model configurations: one ``ModelConfig`` for the formulas, the calculator and the tiny transformer.

The field names are the book's notation (``n_layers``, ``n_heads``, ``n_kv_heads``, ``head_dim``),
not Hugging Face's; ``ModelConfig.from_hf_config`` translates a ``config.json``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a decoder-only transformer.

    Dense fields are required; the attention is multi-head (``n_kv_heads == n_heads``),
    grouped-query (``n_heads`` a multiple of ``n_kv_heads``) or multi-query (``n_kv_heads == 1``).
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
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"ModelConfig.n_heads ({self.n_heads}) must be a multiple of "
                f"n_kv_heads ({self.n_kv_heads}): each KV head serves a whole group of query heads"
            )
        if not self.rope_theta > 0:
            raise ValueError(f"ModelConfig.rope_theta must be positive, got {self.rope_theta!r}")
        if not self.norm_eps > 0:
            raise ValueError(f"ModelConfig.norm_eps must be positive, got {self.norm_eps!r}")

    @property
    def group_size(self) -> int:
        """Query heads per KV head: 1 for MHA, n_heads for MQA."""
        return self.n_heads // self.n_kv_heads
