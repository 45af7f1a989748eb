"""The tiny NumPy Llama: exact against a plain-loop reference, consistent, strict on input."""

import dataclasses
import math

import numpy as np
import pytest

from llm_roofline.models import ModelConfig
from llm_roofline.tiny import KVCache, Tally, TinyLlama, weight_shapes

CFG = ModelConfig("tiny-test", vocab_size=97, hidden_size=32, intermediate_size=48, n_layers=2,
                  n_heads=4, n_kv_heads=2, head_dim=8, max_context=32, rope_theta=500.0)
TOL = {np.float32: 2e-5, np.float64: 1e-12}


def tokens(batch, length, seed=0):
    return np.random.default_rng(seed).integers(0, CFG.vocab_size, (batch, length))


def reference_logits(cfg, w, seq):
    """One sequence, one position and one head at a time, from the weight dict alone (float64)."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    H, G, dh, half = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.head_dim // 2

    def norm(v, g):
        return v / math.sqrt(float(v @ v) / v.size + cfg.norm_eps) * g

    def rotate(v, pos):  # pairs (j, j + dh/2), the Hugging Face Llama convention
        out = v.copy()
        for j in range(half):
            a = pos * cfg.rope_theta ** (-2 * j / dh)
            out[j] = v[j] * math.cos(a) - v[j + half] * math.sin(a)
            out[j + half] = v[j + half] * math.cos(a) + v[j] * math.sin(a)
        return out

    xs = [w["model.embed_tokens.weight"][t] for t in seq]
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."

        def proj(name, v, p=p):
            y = w[p + name + ".weight"] @ v
            return y + w[p + name + ".bias"] if p + name + ".bias" in w else y

        keys, values, outs = [], [], []
        for pos, x in enumerate(xs):
            h = norm(x, w[p + "input_layernorm.weight"])
            q, k, v = (proj(f"self_attn.{x}_proj", h) for x in "qkv")
            keys.append([rotate(k[g * dh:(g + 1) * dh], pos) for g in range(G)])
            values.append([v[g * dh:(g + 1) * dh] for g in range(G)])
            heads = []
            for head in range(H):
                g = head // (H // G)
                qh = rotate(q[head * dh:(head + 1) * dh], pos)
                s = np.array([qh @ keys[j][g] for j in range(pos + 1)]) / math.sqrt(dh)
                e = np.exp(s - s.max())
                heads.append(sum(e[j] / e.sum() * values[j][g] for j in range(pos + 1)))
            x = x + proj("self_attn.o_proj", np.concatenate(heads))
            h = norm(x, w[p + "post_attention_layernorm.weight"])
            gate, up = proj("mlp.gate_proj", h), proj("mlp.up_proj", h)
            outs.append(x + proj("mlp.down_proj", gate / (1 + np.exp(-gate)) * up))
        xs = outs
    head = w["model.embed_tokens.weight"] if cfg.tie_embeddings else w["lm_head.weight"]
    return np.array([head @ norm(x, w["model.norm.weight"]) for x in xs])


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1], ids=["MHA", "GQA", "MQA"])
@pytest.mark.parametrize("variant", ["untied", "tied", "qkv_bias"])
def test_matches_the_plain_loop_reference(n_kv_heads, variant):
    cfg = dataclasses.replace(CFG, n_kv_heads=n_kv_heads, tie_embeddings=variant == "tied",
                              qkv_bias=variant == "qkv_bias")
    model = TinyLlama.random(cfg, seed=3, dtype=np.float64)
    toks = tokens(2, 6)
    logits, _ = model.prefill(toks)
    assert logits.shape == (2, 6, cfg.vocab_size) and logits.dtype == np.float64
    for b in range(2):
        reference = reference_logits(cfg, model.w, toks[b])
        np.testing.assert_allclose(logits[b], reference, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("skip_masked", [False, True])
def test_prefill_equals_prefix_then_decode(dtype, skip_masked):
    model = TinyLlama.random(CFG, seed=1, dtype=dtype, skip_masked=skip_masked)
    toks = tokens(3, 9)
    full, _ = model.prefill(toks)
    logits, cache = model.prefill(toks[:, :4], max_len=12)
    steps = [logits]
    for j in range(4, 9):
        step, cache = model.decode(toks[:, j], cache)
        steps.append(step[:, None])
    assert cache.length == 9
    tol = TOL[dtype]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=tol, atol=tol)
    chunked, cache = model.prefill(toks[:, :5], max_len=12)
    rest, _ = model.prefill(toks[:, 5:], cache)  # chunked prefill into the same cache
    np.testing.assert_allclose(np.concatenate([chunked, rest], axis=1), full, rtol=tol, atol=tol)


def test_masked_and_skipped_attention_agree():
    a, b = (TinyLlama.random(CFG, seed=2, dtype=np.float64, skip_masked=s) for s in (False, True))
    toks = tokens(2, 7)
    np.testing.assert_allclose(a.prefill(toks)[0], b.prefill(toks)[0], rtol=1e-12, atol=1e-12)


def test_rows_of_a_batch_are_independent():
    model = TinyLlama.random(CFG, seed=4, dtype=np.float64)
    toks = tokens(3, 5)
    batch, cache = model.prefill(toks)
    step, _ = model.decode(toks[:, 0], cache)
    for b in range(3):
        alone, c = model.prefill(toks[b:b + 1])
        np.testing.assert_allclose(batch[b], alone[0], rtol=1e-12, atol=1e-12)
        alone_step = model.decode(toks[b:b + 1, 0], c)[0][0]
        np.testing.assert_allclose(step[b], alone_step, rtol=1e-12, atol=1e-12)
    other = toks.copy()
    other[1] = tokens(1, 5, seed=9)[0]
    changed, _ = model.prefill(other)
    np.testing.assert_array_equal(changed[[0, 2]], batch[[0, 2]])
    assert not np.allclose(changed[1], batch[1])


def test_float16_storage():
    m16 = TinyLlama.random(CFG, seed=5, dtype=np.float16)
    m32 = TinyLlama(CFG, {k: v.astype(np.float32) for k, v in m16.w.items()})  # the same numbers
    toks = tokens(2, 6)
    l16, cache = m16.prefill(toks)
    assert cache.k.dtype == np.float16 and l16.dtype == np.float32
    l32, _ = m32.prefill(toks)
    np.testing.assert_allclose(l16, l32, rtol=0, atol=2e-2 * np.abs(l32).max())


def test_generate_greedy_and_sampled():
    model = TinyLlama.random(CFG, seed=6)
    prompt = tokens(2, 4)
    out = model.generate(prompt, 5)
    assert out.shape == (2, 9)
    np.testing.assert_array_equal(out[:, :4], prompt)
    seq = prompt
    for _ in range(5):  # greedy, recomputing the whole sequence each time
        nxt = model.prefill(seq)[0][:, -1].argmax(axis=-1)
        seq = np.concatenate([seq, nxt[:, None]], axis=1)
    np.testing.assert_array_equal(out, seq)
    a = model.generate(prompt, 8, temperature=1.0, seed=1)
    np.testing.assert_array_equal(a, model.generate(prompt, 8, temperature=1.0, seed=1))
    assert not np.array_equal(a, model.generate(prompt, 8, temperature=1.0, seed=2))
    assert ((a >= 0) & (a < CFG.vocab_size)).all()


def test_weight_names_and_shapes_are_hugging_faces():
    shapes = weight_shapes(CFG)
    assert shapes["model.layers.0.self_attn.q_proj.weight"] == (4 * 8, 32)
    assert shapes["model.layers.1.self_attn.k_proj.weight"] == (2 * 8, 32)
    assert shapes["model.layers.0.mlp.down_proj.weight"] == (32, 48)
    assert shapes["lm_head.weight"] == (97, 32)
    assert "lm_head.weight" not in weight_shapes(dataclasses.replace(CFG, tie_embeddings=True))
    assert len(shapes) == 1 + 9 * 2 + 1 + 1


def test_tally_is_optional_and_plain_data():
    model = TinyLlama.random(CFG, seed=7)
    toks = tokens(2, 5)
    tally = Tally()
    with_tally = model.generate(toks, 3, tally=tally)
    np.testing.assert_array_equal(with_tally, model.generate(toks, 3))
    assert [p["phase"] for p in tally.passes] == ["prefill", "decode", "decode"]
    assert [p["n_past"] for p in tally.passes] == [0, 5, 6]
    assert all(p["seconds"] > 0 for p in tally.passes)
    rows = tally.rows()
    assert {r["phase"] for r in rows} == {"prefill", "decode"}
    assert all(r["calls"] > 0 and r["seconds"] >= 0 for r in rows)
    assert "lm_head" in str(tally) and "TOTAL" in str(tally)
    with pytest.raises(ValueError, match="phase"):
        tally.costs("train")


# --- bad input ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model():
    return TinyLlama.random(CFG, seed=8)


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.zeros((2, 3, 1), int), "tokens"),
        (np.zeros(3, int), "tokens"),
        (np.zeros((2, 3)), "tokens"),  # float ids
        (np.zeros((2, 0), int), "tokens"),
        (np.full((1, 3), 97), "vocab_size"),
        (np.full((1, 3), -1), "vocab_size"),
    ],
)
def test_prefill_rejects_bad_tokens(model, bad, match):
    with pytest.raises(ValueError, match=match):
        model.prefill(bad)


def test_decode_rejects_bad_input_and_a_full_cache(model):
    _, cache = model.prefill(tokens(2, 3), max_len=4)
    with pytest.raises(ValueError, match="next_tokens"):
        model.decode(np.zeros((2, 1), int), cache)
    with pytest.raises(ValueError, match="batch"):
        model.decode(np.zeros(3, int), cache)
    model.decode(np.zeros(2, int), cache)
    with pytest.raises(ValueError, match="KV cache full"):
        model.decode(np.zeros(2, int), cache)
    with pytest.raises(ValueError, match="max_len"):
        model.prefill(tokens(1, 3), max_len=CFG.max_context + 1)
    with pytest.raises(ValueError, match="n_new"):
        model.generate(tokens(1, 3), 0)
    with pytest.raises(ValueError, match="temperature"):
        model.generate(tokens(1, 3), 2, temperature=-1.0)


def test_bad_weights_and_configs():
    w = TinyLlama.random(CFG, seed=0).w
    with pytest.raises(ValueError, match="missing.*q_proj"):
        TinyLlama(CFG, {k: v for k, v in w.items() if "layers.1.self_attn.q_proj" not in k})
    with pytest.raises(ValueError, match="unexpected.*extra"):
        TinyLlama(CFG, w | {"extra.weight": w["model.norm.weight"]})
    with pytest.raises(ValueError, match="model.norm.weight must have shape"):
        TinyLlama(CFG, w | {"model.norm.weight": np.ones(31, np.float32)})
    with pytest.raises(ValueError, match="one dtype"):
        TinyLlama(CFG, w | {"model.norm.weight": np.ones(32, np.float64)})
    with pytest.raises(ValueError, match="one dtype"):
        TinyLlama(CFG, {k: v.astype(np.int32) for k, v in w.items()})
    with pytest.raises(ValueError, match="gated_mlp"):
        TinyLlama.random(dataclasses.replace(CFG, gated_mlp=False))
    moe = dataclasses.replace(CFG, n_routed_experts=4, n_experts_per_token=2,
                              moe_intermediate_size=16)
    with pytest.raises(ValueError, match="dense"):
        TinyLlama.random(moe)


def test_kv_cache_layout():
    cache = KVCache.empty(CFG, batch=3, max_len=10, dtype=np.float32)
    assert cache.k.shape == (CFG.n_layers, 3, CFG.n_kv_heads, 10, CFG.head_dim)
    assert (cache.batch, cache.max_len, cache.length) == (3, 10, 0)
