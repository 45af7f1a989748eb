"""The chapter-4 figures: the points they place are the library's counts, on the right roof."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from llm_roofline.counts import Cost, op_costs  # noqa: E402
from llm_roofline.course import ch04 as P  # noqa: E402
from llm_roofline.models import ModelConfig, get_model  # noqa: E402

TINY = ModelConfig("tiny-plots", vocab_size=64, hidden_size=32, intermediate_size=48, n_layers=2,
                   n_heads=4, n_kv_heads=2, head_dim=8, max_context=64)


def test_op_points_by_hand():
    costs = {
        "embed": Cost(0, 10, 10),
        "q_proj": Cost(400, 150, 50),  # 400 / 200
        "attn_norm": Cost(30, 40, 20),  # 30 / 60
        "kv_read": Cost(0, 64, 0),
        "attn_scores": Cost(100, 7, 9),
        "attn_values": Cost(156, 5, 3),
    }
    points = P.op_points(costs)
    assert points == {
        "q_proj": ("linear", 2.0),
        "attn_norm": ("elementwise", 0.5),
        "attention": ("attention", 4.0),  # (100 + 156) FLOPs over the 64 bytes of KV read
    }


def test_decode_attention_point_is_heads_over_kv_heads_at_any_batch():
    # A decode step with S keys: scores and values do 2 x 2 x n_layers x H x dh x S x B FLOPs and
    # read 2 (K, V) x n_layers x G x dh x S x B elements of 2 bytes: I = H / G, whatever B and S.
    for batch, past in [(1, 10), (7, 40)]:
        points = P.op_points(op_costs(TINY, batch, 1, past, weight_dtype="bf16"))
        assert points["attention"] == ("attention", 4 / 2)
        s = past + 1
        flops = 4 * 2 * 4 * 8 * s * batch
        kv_bytes = 2 * 2 * 2 * 8 * s * batch * 2
        assert flops / kv_bytes == 2.0


def test_op_points_rejects_what_is_not_costs():
    with pytest.raises(ValueError, match="costs must be a dict"):
        P.op_points({"q_proj": (1, 2, 3)})


def test_ops_on_roofline_places_each_point_at_its_attainable_rate():
    plt.close("all")
    decode = op_costs(TINY, 1, 1, 5, weight_dtype="bf16")
    ax = P.ops_on_roofline({"decode": decode}, "H100", "bf16")
    placed = np.concatenate([c.get_offsets() for c in ax.collections
                             if c.get_label().startswith("decode")])
    expected = sorted(i for _, i in P.op_points(decode).values())
    assert sorted(placed[:, 0]) == pytest.approx(expected)
    # on the H100 slope (all far below the ridge of 295): TFLOPS = I x 3,350 GB/s / 1e12
    np.testing.assert_allclose(placed[:, 1], placed[:, 0] * 3.35, rtol=1e-12)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["decode: linear", "decode: attention", "decode: elementwise"]
    plt.close("all")


def test_ops_on_roofline_compute_bound_points_sit_on_the_roof():
    plt.close("all")
    # every position's logits: the LM head on the roof too (at the last position only, the
    # default, it is a GEMV of one token: memory-bound)
    prefill = op_costs(get_model("llama-3-70b"), 1, 2048, weight_dtype="bf16", logits="all")
    ax = P.ops_on_roofline({"prefill": prefill}, "H100", "bf16")
    linear = next(c for c in ax.collections if c.get_label() == "prefill: linear").get_offsets()
    assert np.all(linear[:, 0] > 295.4)
    np.testing.assert_allclose(linear[:, 1], 989.4, rtol=1e-12)
    plt.close("all")


def test_ops_on_roofline_needs_phases():
    with pytest.raises(ValueError, match="phases must be a non-empty dict"):
        P.ops_on_roofline({}, "H100")


def test_phases_on_roofline_reads_out_the_linear_intensities():
    plt.close("all")
    ax = P.phases_on_roofline(TINY, "H100", 2, 16)
    text = "\n".join(t.get_text() for t in ax.texts)
    # decode at bf16, B = 2: each (k x n) matrix does 2 B k n FLOPs, reads 2 k n weight bytes and
    # 2 B k activation bytes, writes 2 B n; per layer q, k, v, o, gate, up, down, then lm_head
    shapes = 2 * [(32, 32), (32, 16), (32, 16), (32, 32), (32, 48), (32, 48), (48, 32)] + [(32, 64)]
    flops = sum(2 * 2 * k * n for k, n in shapes)
    moved = sum(2 * k * n + 2 * 2 * (k + n) for k, n in shapes)
    assert "B = 2, L = 16" in text and f"decode: I = {flops / moved:.1f}" in text
    assert f"{flops / moved:.1f}" == "1.8"  # below B = 2: activations count too
    assert ax.get_legend() is not None and ax.texts[0].get_position() == (0.02, 0.97)
    plt.close("all")
    small = P.phases_on_roofline(TINY, "H100", 2, 16, legend=False)
    assert small.get_legend() is None and small.texts[0].get_position() == (0.98, 0.04)
    with pytest.raises(ValueError, match="legend"):
        P.phases_on_roofline(TINY, "H100", 2, 16, legend="no")
    plt.close("all")


@pytest.mark.parametrize("kwargs, match", [
    ({"batch": 0, "prompt": 16}, "batch must be an integer"),
    ({"batch": 1, "prompt": 64}, "prompt must be an integer from 1 to 63"),
    ({"batch": 1.5, "prompt": 16}, "batch must be an integer"),
])
def test_phases_on_roofline_rejects_bad_workloads(kwargs, match):
    with pytest.raises(ValueError, match=match):
        P.phases_on_roofline(TINY, "H100", **kwargs)


def test_intensity_vs_tokens_draws_each_curve_and_the_ridge():
    plt.close("all")
    x = np.array([1.0, 2.0, 4.0])
    ax = P.intensity_vs_tokens(x, {"I = B x L": x, "exact": x / 2}, ridge=3.0, ridge_label="H100")
    assert [line.get_label() for line in ax.lines] == ["I = B x L", "exact", "H100"]
    assert list(ax.lines[1].get_ydata()) == [0.5, 1.0, 2.0]
    with pytest.raises(ValueError, match="curve 'bad' has shape"):
        P.intensity_vs_tokens(x, {"bad": [1.0, 2.0]})
    with pytest.raises(ValueError, match="tokens must be a 1-D array"):
        P.intensity_vs_tokens([0, 1], {"a": [1, 2]})
    plt.close("all")


def test_attainable_vs_batch_marks_each_knee():
    plt.close("all")
    b = np.array([1.0, 10.0, 100.0])
    ax = P.attainable_vs_batch(b, {"bf16": (np.minimum(b, 10.0), 10.0)})
    assert ax.lines[0].get_label() == "bf16: B* = 10"
    assert ax.collections[0].get_offsets().tolist() == [[10.0, 10.0]]
    with pytest.raises(ValueError, match="critical batch of 'x' must be a finite number > 0"):
        P.attainable_vs_batch(b, {"x": (b, 0.0)})
    plt.close("all")


def test_roofline_ticks_are_compact_powers_of_eight():
    plt.close("all")
    ax = P.ops_on_roofline({"decode": op_costs(TINY, 1, 1, 5)}, "A100")
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["1/8", "1", "8", "64", "512", "4K", "32K"]
    plt.close("all")
