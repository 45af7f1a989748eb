"""The serving frontier (issue 29): 4-bit formats in the calculator, the 2025-26 chips, the
FlashMLA cache, data-parallel attention with expert parallelism. Every expected number is a hand
computation from a datasheet or a format's definition, written out here."""

import pytest

import llm_roofline as lr
import llm_roofline.parallel
from llm_roofline import kv as kv_module
from llm_roofline.deployment import setup


def test_w4a4_on_fp4_tensor_cores_and_w4a16_without_them():
    """NVFP4 weights on a B200 multiply on its FP4 tensor cores (W4A4, 9 PFLOP/s dense); on an
    H100, which has no FP4 math, they are dequantised to BF16 (W4A16, 989.4 TFLOP/s)."""
    b200 = setup("llama-3-70b", "B200", weight_dtype="nvfp4")
    assert b200.compute_dtype == "fp4" and b200.peak == 9000e12
    assert "W4A4" in b200.precision and "weights and activations" in b200.precision
    h100 = setup("llama-3-70b", "H100", weight_dtype="nvfp4")
    assert h100.compute_dtype == "bf16" and h100.peak == pytest.approx(989.4e12)
    assert "weight-only, W4A16" in h100.precision
    # an FP8 activation path on the H100 is W4A8, chosen explicitly
    assert "W4A8" in setup("llama-3-70b", "H100", weight_dtype="mxfp4", compute_dtype="fp8").precision
    # bytes: 4.5 bits a weight for NVFP4, 4.25 for MXFP4, in the body; the head stays BF16
    assert b200.sizes["weight"] == 4.5 / 8 and b200.sizes["head"] == 2
    assert setup("llama-3-70b", "B200", weight_dtype="mxfp4").sizes["weight"] == 4.25 / 8


def test_4_bit_kv_cache_and_activations_are_formats_too():
    s = setup("llama-3-70b", "B200", kv_dtype="nvfp4", act_dtype="mxfp8")
    assert s.sizes["kv"] == 9 / 16 and s.sizes["act"] == 33 / 32


def test_fp8_mla_cache_is_counted_as_flashmla_stores_it():
    """DeepSeek-V3, 61 layers: FP8 latent cache 656 B a token a layer (512 FP8 + 4 FP32 scales
    + 64 BF16 rope), 61 x 656 = 40,016 B a token; BF16: 61 x 576 x 2 = 70,272 B."""
    cfg = lr.get_model("deepseek-v3")
    for kv, per_token in (("fp8", 61 * 656), ("bf16", 61 * 576 * 2)):
        s = setup(cfg, "H200", kv_dtype=kv)
        assert cfg.kv_elements_per_token * s.sizes["kv"] == pytest.approx(per_token)
    mem = lr.memory("deepseek-v3", "H200", 1, 1000, 24, n_gpus=8, weight_dtype="fp8",
                    kv_dtype="fp8")
    assert mem.kv_cache == pytest.approx(1024 * 61 * 656)
    # the MLA decode attention's intensity over an FP8 cache: 484 FLOPs/byte counted at
    # 576 B, 424.6 at 656 B (FLOPs of one token's scores and values over one cached token)
    assert kv_module.attention_intensity("deepseek-v3", kv_dtype="fp8") == pytest.approx(
        kv_module.attention_intensity("deepseek-v3", kv_dtype="bf16") * 2 * 576 / 656)


# --- data-parallel attention with expert parallelism: DeepSeek-V3 on 8 x H100 -----------------
def _deepseek_v3_dp8_ep8_by_hand(b: int, context: int) -> dict:
    """One decode step of ``b`` sequences per GPU at ``context`` on DP8 attention + EP8, FP8
    weights (W8A8) and FlashMLA's FP8 latent cache, by hand from DeepSeek-V3's config.json."""
    d, layers, dense, moe = 7168, 61, 3, 58
    e, k, d_e, d_ff, vocab = 256, 8, 2048, 18432, 129280
    # MLA per layer: q_a 7168x1536, q_a_norm, q_b 1536 x 128 x (128+64), kv_a 7168 x (512+64),
    # kv_a_norm, kv_b 512 x 128 x (128+128), o 128 x 128 x 7168
    mla = (d * 1536 + 1536 + 1536 * 128 * 192 + d * 576 + 512 + 512 * 128 * 256
           + 128 * 128 * d)
    assert mla == 187_107_328
    attention = layers * mla                          # every GPU holds all of it
    dense_mlp = dense * 3 * d * d_ff                  # replicated
    router = moe * d * e
    shared = moe * 3 * d * d_e                        # one shared expert, replicated
    norms = layers * 2 * d + d
    routed_held = moe * (e // 8) * 3 * d * d_e        # 32 experts a GPU, all touched at 8b tokens
    touched = 1 - (1 - k / e) ** (8 * b)              # the chance one of them is touched
    body = attention + dense_mlp + router + shared + norms + routed_held * touched  # FP8: 1 B
    head = vocab * d * 2 + b * d * 2                  # BF16 LM head, b embedding rows
    weights = body + head
    kv = b * (context + 1) * layers * (512 + 4 * 4 + 64 * 2)  # read context, write one: 656 B
    # all-to-all: a token's 8 experts fall on 1 - C(224, 8)/C(256, 8) of each other GPU
    miss = 1.0
    for i in range(k):
        miss *= (224 - i) / (256 - i)
    remote = 7 * (1 - miss)
    per_copy = (d + d // 128 * 4) + d * 2             # FP8 + FP32 scales out, BF16 back
    a2a = moe * b * remote * per_copy                 # each way, per GPU, per step
    return {"weights": weights, "kv": kv, "a2a": a2a,
            "memory_s": (weights + kv) / 3.35e12, "link_s": a2a / 450e9,
            "latency_s": moe * 2 * 3e-6}


def test_deepseek_v3_dp8_ep8_decode_floor_on_8_h100_by_hand():
    """64 sequences a GPU (512 in all) at a 2,048-token context: the weights each GPU reads
    (98.86 GB: all of attention and the dense parts, 1/8 of the routed experts), its own
    sequences' latent cache (5.25 GB), the all-to-all (374 MB each way over 450 GB/s). The
    step is memory-bound: its floor is (weights + cache) / 3.35 TB/s = 31.1 ms."""
    layout = lr.parallel.Layout(dp=8, ep=8)
    step = lr.parallel.dp_ep_decode_step("deepseek-v3", "H100", 64, 2048, layout,
                                         weight_dtype="fp8", kv_dtype="fp8")
    hand = _deepseek_v3_dp8_ep8_by_hand(64, 2048)
    assert step.weight_bytes == pytest.approx(hand["weights"], rel=1e-9)
    assert step.kv_bytes == pytest.approx(hand["kv"], rel=1e-12)
    assert step.all_to_all_bytes == pytest.approx(hand["a2a"], rel=1e-12)
    assert step.resources["memory"] == pytest.approx(hand["memory_s"], rel=1e-9)
    assert step.resources["interconnect"] == pytest.approx(hand["link_s"], rel=1e-12)
    assert step.resources["latency"] == pytest.approx(hand["latency_s"])
    assert step.floor_s == pytest.approx(hand["memory_s"], rel=1e-9)  # memory-bound
    assert step.bound == "memory"
    assert 0.031 < step.floor_s < 0.0312 and step.time_s > step.floor_s
    # the kernel-by-kernel all-to-all sends a copy per (token, expert) pair: 7 of 8 remote
    pairs_bytes = 58 * 64 * 8 * 7 / 8 * ((7168 + 224) + 7168 * 2)
    assert step.all_to_all_s == pytest.approx(pairs_bytes / 450e9 + 58 * 2 * 3e-6)


def test_dp_ep_estimate_api_and_scope():
    est = lr.parallel.dp_ep_estimate("deepseek-v3", "H100", 512, 2000, 1000,
                                     lr.parallel.Layout(dp=8, ep=8),
                                     weight_dtype="fp8", kv_dtype="fp8")
    assert est.batch_per_gpu == 64 and est.nodes == 1
    assert est.scope.startswith("floor (DP8 attention x EP8") and "8 x NVIDIA H100 SXM" in est.scope
    assert "W8A8" in est.scope
    # 671B in FP8 does not fit on eight 80 GB GPUs: weights per GPU about 100.7 GB
    assert not est.fits and 100e9 < est.memory.weights < 101e9
    assert est.tpot_floor_s <= est.tpot_s and est.ttft_floor_s <= est.ttft_s
    assert est.throughput_floor_tok_s == pytest.approx(512 / est.tpot_floor_s)
    # the mean over steps lies between the first and the last step's floors
    first = lr.parallel.dp_ep_decode_step("deepseek-v3", "H100", 64, 2001,
                                          lr.parallel.Layout(dp=8, ep=8),
                                          weight_dtype="fp8", kv_dtype="fp8")
    last = lr.parallel.dp_ep_decode_step("deepseek-v3", "H100", 64, 2999,
                                         lr.parallel.Layout(dp=8, ep=8),
                                         weight_dtype="fp8", kv_dtype="fp8")
    assert first.floor_s < est.tpot_floor_s < last.floor_s


def test_dp_layout_bad_input():
    with pytest.raises(ValueError, match="tp and pp must be 1"):
        lr.parallel.Layout(tp=2, dp=8, ep=8)
    with pytest.raises(ValueError, match="Layout.ep must be 1 or dp"):
        lr.parallel.Layout(dp=8, ep=4)
    with pytest.raises(ValueError, match="must divide the 256 routed experts"):
        lr.parallel.dp_ep_estimate("deepseek-v3", "H100", 72, 10, 10,
                                   lr.parallel.Layout(dp=72, ep=72))
    with pytest.raises(ValueError, match="needs a mixture-of-experts model"):
        lr.parallel.dp_ep_estimate("llama-3-70b", "H100", 8, 10, 10,
                                   lr.parallel.Layout(dp=8, ep=8))
    with pytest.raises(ValueError, match="use dp_ep_estimate"):
        lr.parallel.parallel_estimate("deepseek-v3", "H100", 8, 10, 10,
                                      lr.parallel.Layout(dp=8, ep=8))
    assert str(lr.parallel.Layout(dp=8, ep=8)) == "DP8 attention x EP8 (8 GPUs)"


def test_every_floor_names_its_scope():
    est = lr.estimate("deepseek-v3", "H200", 64, 2000, 1000, n_gpus=8, weight_dtype="fp8")
    assert est.floor_scope == ("floor (TP8, all-reduces in bf16 on 8 x NVIDIA H200 SXM; "
                               "fp8_e4m3 weights, W8A8, KV cache bf16)")
    assert any("dp_ep_estimate" in c for c in est.floor_caveats)
    one = lr.estimate("llama-3-8b", "H100", 1, 100, 10, weight_dtype="nvfp4")
    assert one.floor_scope == ("floor (one GPU on NVIDIA H100 SXM; nvfp4 weights, W4A16 "
                               "weight-only, KV cache bf16)")
    assert len(one.floor_caveats) == 1 and "speculative" in one.floor_caveats[0]


def test_cli_dp_ep(capsys):
    from llm_roofline import cli

    code = cli.main(["estimate", "--model", "deepseek-v3", "--gpu", "h100", "--dp", "8", "--ep",
                     "8", "--dtype", "fp8", "--kv-dtype", "fp8", "--batch", "512", "--prompt",
                     "2000", "--output", "1000", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    import json

    r = json.loads(out)
    assert r["layout"] == "DP8 attention x EP8 (8 GPUs)" and r["batch_per_gpu"] == 64
    assert r["floor_scope"].startswith("floor (DP8 attention x EP8")
    assert r["tpot_floor_s"] < r["tpot_kernel_s"] and r["fits"] is False
    with pytest.raises(SystemExit):
        cli.main(["estimate", "--model", "deepseek-v3", "--gpu", "h100", "--ep", "8"])
    assert "--ep N needs --dp N" in capsys.readouterr().err


def test_mtp_as_speculative_decoding_in_the_dp_ep_layout():
    """One MTP token accepted 85 % of the time: a step makes 1 + 0.85 = 1.85 tokens (DeepSeek
    reports 85-90 %); its floor a token is the step's floor over 1.85, below the plain floor."""
    layout = lr.parallel.Layout(dp=8, ep=8)
    kw = dict(weight_dtype="fp8", kv_dtype="fp8")
    plain = lr.parallel.dp_ep_estimate("deepseek-v3", "H200", 512, 2000, 1000, layout, **kw)
    mtp = lr.parallel.dp_ep_estimate("deepseek-v3", "H200", 512, 2000, 1000, layout, mtp=1,
                                     acceptance=0.85, **kw)
    assert mtp.tokens_per_step == pytest.approx(1.85)
    assert mtp.tpot_floor_s < plain.tpot_floor_s < mtp.tpot_floor_s * 1.85
    # the MTP module's layer (attention, router, shared expert, 1/8 of 256 experts) in memory
    layer = (187_107_328 + 7168 * 256 + 3 * 7168 * 2048 + 32 * 3 * 7168 * 2048 + 2 * 7168)
    assert mtp.memory.weights - plain.memory.weights == pytest.approx(layer, rel=1e-9)
    assert "MTP: 1 drafted a step, acceptance 0.85" in mtp.scope
    with pytest.raises(ValueError, match="mtp needs acceptance"):
        lr.parallel.dp_ep_estimate("deepseek-v3", "H200", 8, 10, 10, layout, mtp=1)


def test_calibrated_prediction_says_when_it_extrapolates():
    """The fitted rows ran on A100, H100, H200, MI300X, L40S and RTX 4090, in 16-bit, FP8,
    INT8 and INT4 weights: a B200 in NVFP4 lies outside them on three counts."""
    inside = lr.estimate("llama-3-70b", "H100", 32, 1000, 200, realistic=True, n_gpus=2)
    assert inside.extrapolation == () and not inside.extrapolates
    out = lr.estimate("llama-3-70b", "B200", 32, 1000, 200, realistic=True, weight_dtype="nvfp4")
    assert out.extrapolates and len(out.extrapolation) == 3
    assert out.extrapolation[0].startswith("NVIDIA B200: no fitted row ran on it")
    assert "nvfp4 weights" in out.extrapolation[1] and "fp4 math" in out.extrapolation[2]
    many = lr.estimate("llama-3-70b", "H100", 32, 1000, 200, realistic=True, n_gpus=16)
    assert many.extrapolation == ("16 GPUs: the fitted rows use at most 8",)


def test_all_to_all_across_two_nodes_by_hand():
    """DP16 + EP16 on two HGX H100 nodes, 64 sequences a GPU: 16 experts a GPU, 128 a node.
    At the least a token goes once to each other GPU of its node holding one of its experts,
    7 (1 - C(240, 8)/C(256, 8)) copies over NVLink, and once to the other node if one of its
    experts is there, 1 - C(128, 8)/C(256, 8), over that GPU's 400 Gb/s NIC (50 GB/s a way)."""
    def miss(held):
        out = 1.0
        for i in range(8):
            out *= (256 - held - i) / (256 - i)
        return out

    per_copy = 58 * 64 * ((7168 + 224) + 7168 * 2)
    inside, across = 7 * (1 - miss(16)) * per_copy, (1 - miss(128)) * per_copy
    layout = lr.parallel.Layout(dp=16, ep=16)
    step = lr.parallel.dp_ep_decode_step("deepseek-v3", "H100", 64, 2048, layout,
                                         weight_dtype="fp8", kv_dtype="fp8")
    assert step.all_to_all_bytes == pytest.approx(inside + across, rel=1e-12)
    assert step.resources["interconnect"] == pytest.approx(inside / 450e9, rel=1e-12)
    assert step.resources["network"] == pytest.approx(across / 50e9, rel=1e-12)
    assert step.resources["latency"] == pytest.approx(58 * 2 * (3e-6 + 5e-6))
    # four nodes: uniform routing reaches 3 (1 - C(192, 8)/C(256, 8)) = 2.71 other nodes a
    # token; routing limited to one node (a token's experts all in one node) at most 1
    wide = lr.parallel.Layout(dp=32, ep=32)
    free = lr.parallel.dp_ep_decode_step("deepseek-v3", "H100", 64, 2048, wide,
                                         weight_dtype="fp8", kv_dtype="fp8")
    one = lr.parallel.dp_ep_decode_step("deepseek-v3", "H100", 64, 2048, wide, node_limit=1,
                                        weight_dtype="fp8", kv_dtype="fp8")
    assert free.resources["network"] == pytest.approx(3 * (1 - miss(64)) * per_copy / 50e9)
    assert one.resources["network"] == pytest.approx(per_copy / 50e9)
    # kernel by kernel: a copy per (token, expert) pair, 8 x 7/16 inside, 8 x 8/16 across
    pairs = 58 * 64 * ((7168 + 224) + 7168 * 2)
    assert step.all_to_all_s == pytest.approx(pairs * 8 * 7 / 16 / 450e9
                                              + pairs * 8 * 8 / 16 / 50e9 + 58 * 2 * 8e-6)


def test_expert_dtype_prices_the_routed_experts_apart():
    """gpt-oss-120b as released: MXFP4 routed experts (36 x 128 x 3 x 2880 x 2880 weights at
    4.25 bits), everything else BF16. On a B200 the experts multiply on the FP4 tensor cores
    (W4A4), on an H100 at BF16 (W4A16); the attention stays BF16 on both."""
    experts = 36 * 128 * 3 * 2880 * 2880
    rest = lr.get_model("gpt-oss-120b").n_params - experts
    for chip, math in (("B200", "fp4"), ("H100", "bf16")):
        est = lr.estimate("gpt-oss-120b", chip, 64, 1000, 200, expert_dtype="mxfp4")
        assert est.memory.weights == pytest.approx(experts * 4.25 / 8 + rest * 2, rel=1e-12)
        assert est.expert_compute_dtype == math and est.compute_dtype == "bf16"
        assert ("W4A4" if math == "fp4" else "weight-only, W4A16") in est.precision
        assert est.floor_scope.endswith("; routed experts mxfp4)")
        ops = {r["op"]: r for r in est.breakdown("decode")}
        assert ops["routed_up_proj"]["math"] == math and ops["o_proj"]["math"] == "bf16"
    # DeepSeek-V3 on 8 x H100, DP8 + EP8: NVFP4 experts halve the routed bytes of FP8 ones
    layout = lr.parallel.Layout(dp=8, ep=8)
    fp8 = lr.parallel.dp_ep_decode_step("deepseek-v3", "H100", 64, 2048, layout,
                                        weight_dtype="fp8", kv_dtype="fp8")
    fp4 = lr.parallel.dp_ep_decode_step("deepseek-v3", "H100", 64, 2048, layout,
                                        weight_dtype="fp8", kv_dtype="fp8", expert_dtype="nvfp4")
    routed = 58 * 32 * 3 * 7168 * 2048 * (1 - (1 - 8 / 256) ** 512)
    assert fp8.weight_bytes - fp4.weight_bytes == pytest.approx(routed * (1 - 9 / 16), rel=1e-9)
    with pytest.raises(ValueError, match="expert_dtype applies to a mixture-of-experts model"):
        lr.estimate("llama-3-8b", "H100", 1, 10, 10, expert_dtype="nvfp4")


def test_cli_expert_dtype(capsys):
    import json

    from llm_roofline import cli

    assert cli.main(["estimate", "--model", "gpt-oss-120b", "--gpu", "b200", "--expert-dtype",
                     "mxfp4", "--batch", "64", "--prompt", "1000", "--output", "200",
                     "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert "routed experts mxfp4, their math fp4 (W4A4)" in r["precision"]
    assert r["floor_scope"].endswith("routed experts mxfp4)")
    real = lr.estimate("gpt-oss-120b", "H100", 64, 1000, 200, realistic=True,
                       expert_dtype="mxfp4")
    assert "mxfp4 routed experts: no fitted row stores its weights so" in real.extrapolation


def test_figure_9_4_holds_every_row_the_library_can_express():
    """Chapter 9's frontier figure: the tensor-parallel rows, the data-parallel ones and the
    rows without a batch (MLPerf's Blackwell results among them), each under the floor; the
    title counts them all. Figure 9.1's title names the model as the prose does."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from llm_roofline import measured
    from llm_roofline.course import ch09

    rows = measured.load()
    tp, dp, top = measured.compare(rows), measured.dp_compare(rows), measured.ceiling_compare(rows)
    assert (len(tp), len(dp), len(top)) == (84, 4, 12)
    assert {c.row.accelerator for c in top if c.row.number >= 119} == {"B200"}
    fig = ch09.frontier(tp, dp, top)
    assert fig.axes[0].get_title() == "100 published rows against their floor"
    points = [p for col in fig.axes[0].collections for p in col.get_offsets()]
    assert max(y for _, y in points) <= 1  # none above the floor
    assert min(y for _, y in points) >= fig.axes[0].get_ylim()[0]  # none cut off below
    plt.close(fig)
    assert ch09._display("llama-3-70b") == "Llama-3-70B"
    assert ch09._display("deepseek-v3") == "DeepSeek-V3"
    fig = ch09.tp_scaling("llama-3-70b", chips=("H100 SXM",), gpus=(2, 4))
    assert fig.axes[0].get_title() == "Llama-3-70B, 32 users"
    plt.close(fig)
