"""The tiny NumPy Llama: exact against a plain-loop reference, consistent, strict on input."""

import dataclasses
import math
import os

import numpy as np
import pytest

from llm_roofline import formulas as F
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


@pytest.mark.parametrize("skip_masked", [False, True])
def test_element_wise_work_split_among_threads_changes_nothing(monkeypatch, skip_masked):
    """Softmax and SwiGLU split their rows among the BLAS's threads on a large array: the
    logits and the tally are those of one thread, bit for bit (each row is computed alone)."""
    from llm_roofline import measure
    from llm_roofline.tiny import model as tiny_model

    model = TinyLlama.random(CFG, seed=3, skip_masked=skip_masked)
    toks = tokens(3, 7)
    one, t1 = Tally(), Tally()
    alone = model.prefill(toks, tally=t1)[0]
    calls = []

    def split(fn, *arrays):  # the real splitter, counted
        calls.append(arrays[0].shape[0])
        return on_threads(fn, *arrays)

    on_threads = tiny_model.on_threads
    monkeypatch.setattr(tiny_model, "on_threads", split)
    monkeypatch.setattr(tiny_model, "PARALLEL_MIN", 1)  # split every array, however small
    monkeypatch.setattr(measure, "blas_thread_count", lambda: 3)  # uneven blocks of rows
    split_logits = model.prefill(toks, tally=one)[0]
    assert calls and tiny_model._pool is not None  # it did split, on the pool's threads
    np.testing.assert_array_equal(split_logits, alone)
    assert one.costs("prefill") == t1.costs("prefill")


def test_a_forked_process_splits_on_threads_of_its_own(monkeypatch):
    """A child forked after a split pass has none of the pool's threads: it makes its own
    pool instead of waiting forever on the parent's."""
    import multiprocessing

    from llm_roofline import measure
    from llm_roofline.tiny import model as tiny_model

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork on this platform")
    monkeypatch.setattr(tiny_model, "PARALLEL_MIN", 1)
    monkeypatch.setattr(measure, "blas_thread_count", lambda: 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    model = TinyLlama.random(CFG, seed=3)
    expected = model.prefill(tokens(2, 6))[0]  # the parent's pool now exists
    assert tiny_model._pool is not None
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=lambda: queue.put(model.prefill(tokens(2, 6))[0]))
    child.start()
    got = queue.get(timeout=20)  # a child stuck on the parent's pool never answers
    child.join(timeout=20)
    np.testing.assert_array_equal(got, expected)


def test_fused_products_are_views_of_the_weights_passed():
    """q, k, v (and gate, up) run as one GEMM of weights side by side, kept [d_in, d_out]; each
    Hugging Face name still holds its own weight, unchanged and in its own shape, and the tally
    still names q_proj, k_proj and v_proj."""
    biased = dataclasses.replace(CFG, qkv_bias=True)
    weights = TinyLlama.random(biased, seed=5).w
    given = {k: v.copy() for k, v in weights.items()}
    model = TinyLlama(biased, given)
    for name, w in given.items():
        np.testing.assert_array_equal(model.w[name], w)
    qkv, b, ops, rows = model.layers[1]["qkv_proj"]
    assert ops == ("q_proj", "k_proj", "v_proj") and rows == (32, 16, 16) and b.shape == (64,)
    assert np.shares_memory(model.w["model.layers.1.self_attn.k_proj.weight"], qkv)
    assert qkv.shape == (32, 64) and qkv.flags.c_contiguous  # [d_in, q + k + v]
    np.testing.assert_array_equal(qkv[:, 32:48], given["model.layers.1.self_attn.k_proj.weight"].T)
    o_proj = model.layers[1]["o_proj"][0]
    assert o_proj.flags.c_contiguous and np.shares_memory(
        model.w["model.layers.1.self_attn.o_proj.weight"], o_proj)
    np.testing.assert_array_equal(o_proj, given["model.layers.1.self_attn.o_proj.weight"].T)
    np.testing.assert_array_equal(b[48:], given["model.layers.1.self_attn.v_proj.bias"])


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
    # every operation runs in both phases; per pass: once per layer, residual twice, the
    # embedding, final norm, head and sampling once; 1 prefill pass and 2 decode passes
    per_pass = {op: 2 * CFG.n_layers if op == "residual" else CFG.n_layers for op in F.OPS}
    per_pass |= {"embed": 1, "final_norm": 1, "lm_head": 1, "sampling": 1}
    calls = {(r["phase"], r["op"]): r["calls"] for r in tally.rows()}
    assert calls == {(p, op): k * per_pass[op] for p, k in (("prefill", 1), ("decode", 2))
                     for op in F.OPS}
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


def one_line_error(match, fn, *args, **kwargs) -> str:
    """Call ``fn``: it must raise a one-line ValueError matching ``match``; return the message."""
    with pytest.raises(ValueError, match=match) as err:
        fn(*args, **kwargs)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_decode_without_a_cache_or_with_another_models(model):
    one_line_error(r"cache must be a KVCache .*got None", model.decode, np.zeros(2, int), None)
    one_line_error(r"cache must be a KVCache .*got \{\}", model.decode, np.zeros(2, int), {})
    deeper = TinyLlama.random(dataclasses.replace(CFG, n_layers=3), seed=0)
    _, cache = deeper.prefill(tokens(2, 3), max_len=8)
    message = one_line_error(r"cache of shape \(3, 2, 2, 8, 8\)", model.decode, np.zeros(2, int), cache)
    assert "'tiny-test', which needs (2, batch, 2, max_len, 8)" in message
    for other in (dataclasses.replace(CFG, n_kv_heads=4), dataclasses.replace(CFG, head_dim=16)):
        cache = KVCache.empty(other, 2, 8, np.float32)
        one_line_error("is not for 'tiny-test'", model.prefill, tokens(2, 3), cache)
    longer = KVCache.empty(dataclasses.replace(CFG, max_context=64), 2, 40, np.float32)
    one_line_error("cache max_len 40 exceeds max_context 32", model.prefill, tokens(2, 3), longer)


def test_kv_cache_must_hold_floats_of_one_shape():
    for bad in (np.int32, np.bool_, np.complex64, "bf16", None):
        one_line_error(r"KVCache dtype must be float16, float32 or float64", KVCache.empty, CFG, 1, 8, bad)
    ints = np.zeros((2, 1, 2, 8, 8), np.int32)
    one_line_error(r"KVCache.k dtype must be float16, float32 or float64, got dtype\('int32'\)",
                   KVCache, ints, ints)
    floats = np.zeros((2, 1, 2, 8, 8), np.float32)
    one_line_error(r"KVCache.k must be a 5-D array .*got shape \(8, 8\)", KVCache, floats[0, 0, 0], floats)
    one_line_error("KVCache.v must match KVCache.k", KVCache, floats, floats[:, :, :, :4])
    one_line_error("KVCache.v must match KVCache.k", KVCache, floats, floats.astype(np.float64))
    one_line_error("KVCache.length must be an integer from 0 to 8, got 9", KVCache, floats, floats, 9)
    one_line_error("max_len must be an integer from 1 to 32, got 33", KVCache.empty, CFG, 1, 33)
    one_line_error("batch must be an integer from 1", KVCache.empty, CFG, 0, 8)


def test_a_float16_cache_serves_a_float32_model(model):
    """The cache's dtype is its own: a float16 cache (of float32 weights) gives the same logits
    as the float32 cache, to float16's precision."""
    toks = tokens(2, 5)
    reference, _ = model.prefill(toks)
    half, cache = model.prefill(toks, KVCache.empty(CFG, 2, 8, np.float16))
    assert cache.k.dtype == np.float16 and half.dtype == np.float32
    np.testing.assert_allclose(half, reference, rtol=0, atol=1e-2 * np.abs(reference).max())


def test_numpy_integers_are_integers(model):
    toks = tokens(1, 3)
    a, cache_a = model.prefill(toks, max_len=np.int64(8))
    b, cache_b = model.prefill(toks, max_len=8)
    assert cache_a.max_len == 8
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.generate(toks, np.int64(3), seed=np.uint32(1)),
                                  model.generate(toks, 3, seed=1))
    assert KVCache.empty(CFG, np.int32(2), np.int64(8)).k.shape == (2, 2, 2, 8, 8)
    np.testing.assert_array_equal(TinyLlama.random(CFG, seed=np.int64(4)).w["model.norm.weight"],
                                  TinyLlama.random(CFG, seed=4).w["model.norm.weight"])
    for bad in (True, 3.0, "3", None):
        one_line_error(f"n_new must be an integer from 1 to 32, got {bad!r}", model.generate, toks, bad)
    for bad in (True, 3.0, "3", np.array([8])):
        one_line_error("max_len must be an integer from 1 to 32, got", model.prefill, toks, max_len=bad)


def test_generate_names_what_the_caller_passed(model):
    message = one_line_error(r"prompt length 30 \+ n_new 5 = 35 exceeds max_context 32 of 'tiny-test'",
                             model.generate, tokens(1, 30), 5)
    assert "max_len" not in message
    one_line_error("n_new must be an integer from 1 to 32, got 40", model.generate, tokens(1, 3), 40)
    one_line_error("prompt must be a non-empty int array", model.generate, np.zeros(3, int), 2)
    for bad in (-1.0, float("nan"), float("inf"), "0.5", None):
        one_line_error("temperature must be a finite number >= 0", model.generate, tokens(1, 3), 2,
                       temperature=bad)
    one_line_error("seed must be an integer from 0", model.generate, tokens(1, 3), 2, temperature=1.0,
                   seed=-1)


def test_prefill_names_its_arguments(model):
    one_line_error("tokens: length 33 exceeds max_context 32", model.prefill, tokens(1, 33))
    _, cache = model.prefill(tokens(1, 3), max_len=8)
    one_line_error("pass max_len or cache, not both", model.prefill, tokens(1, 2), cache, max_len=8)
    one_line_error("tally must be a Tally or None, got 'yes'", model.prefill, tokens(1, 2), tally="yes")
    one_line_error("skip_masked must be true or false, got 'no'", TinyLlama, CFG, model.w,
                   skip_masked="no")
    one_line_error("weights must be a dict", TinyLlama, CFG, list(model.w.values()))
    one_line_error("dtype must be float16, float32 or float64, got <class 'numpy.int32'>",
                   TinyLlama.random, CFG, dtype=np.int32)


def test_a_tied_head_listed_as_in_a_pytorch_state_dict():
    """PyTorch's state_dict() of a tied model lists the embedding again as lm_head.weight."""
    tied = dataclasses.replace(CFG, tie_embeddings=True)
    w = TinyLlama.random(tied, seed=0).w
    listed_twice = w | {"lm_head.weight": w["model.embed_tokens.weight"].copy()}  # equal, not same
    model = TinyLlama(tied, listed_twice)
    assert "lm_head.weight" not in model.w
    np.testing.assert_array_equal(model.prefill(tokens(1, 4))[0], TinyLlama(tied, w).prefill(tokens(1, 4))[0])
    differs = listed_twice["lm_head.weight"].copy()
    differs[3, 5] += 1
    one_line_error("lm_head.weight differs from model.embed_tokens.weight, but 'tiny-test' ties them",
                   TinyLlama, tied, w | {"lm_head.weight": differs})
    one_line_error("lm_head.weight differs", TinyLlama, tied, w | {"lm_head.weight": differs[:50]})
