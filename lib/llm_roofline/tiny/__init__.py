"""A small Llama-style decoder in NumPy that tallies the FLOPs and bytes of every operation.

Usage::

    from llm_roofline.models import ModelConfig
    from llm_roofline.tiny import Tally, TinyLlama

    cfg = ModelConfig("tiny", vocab_size=256, hidden_size=64, intermediate_size=172,
                      n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16)
    model = TinyLlama.random(cfg, seed=0)
    # or real weights: a Hugging Face Llama, its config.json and state dict (or safetensors)
    # model = TinyLlama(ModelConfig.from_hf_config(config),
    #                   {k: v.numpy() for k, v in hf_model.state_dict().items()})
    tally = Tally()
    tokens = model.generate(prompt, 8, tally=tally)   # prompt: int [batch, length]
    print(tally)                                 # per phase and operation: FLOPs, bytes, time
    tally.costs("decode")    # {op: counts.Cost}, summed over passes; each = counts.op_costs
"""

from .model import KVCache, TinyLlama, weight_shapes
from .tally import PHASES, Tally

__all__ = ["KVCache", "PHASES", "Tally", "TinyLlama", "weight_shapes"]
