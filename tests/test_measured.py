"""The published measurements in the library, and the floor and the kernel-by-kernel time
against every usable row."""

from __future__ import annotations

import pytest

from llm_roofline import measured as M
from llm_roofline.hardware import get_accelerator

HEADER = ",".join(M.COLUMNS)
GOOD = ("Llama-2-7B,BF16,A100-SXM4-80GB,1,gpt-fast (PyTorch torch.compile),1,5,200,"
        "decode_tokens_per_s_per_user,104.9,tok/s,example source,batch=1")


@pytest.fixture(scope="module")
def rows():
    return M.load()


@pytest.fixture(scope="module")
def comparisons(rows):
    return M.compare(rows)


def by_number(rows, n):
    return next(r for r in rows if r.number == n)


# --- loading ----------------------------------------------------------------------------------
def test_every_row_is_loaded_typed(rows):
    assert len(rows) == 124
    first = rows[0]
    assert (first.number, first.model, first.n_gpus, first.batch, first.input_len,
            first.output_len, first.value, first.unit) == (1, "Llama-2-7B", 1, 1, 5, 200, 104.9,
                                                           "tok/s")
    assert first.family == "gpt-fast" and first.accelerator == "A100"
    assert (first.weight_dtype, first.kv_dtype) == ("bf16", "bf16")
    assert first.config.n_params == 6_738_415_616  # the data's derived params_total
    assert isinstance(first.value, float) and isinstance(first.batch, int)


def test_kipplys_fastertransformer_row(rows):
    row = by_number(rows, 116)
    assert (row.model, row.gpu, row.engine, row.batch, row.metric, row.value, row.unit) == (
        "GPT-13B", "A100-SXM4-40GB", "FasterTransformer", 1, "itl", 22.0, "ms")
    assert row.accelerator == "A100 40GB" and row.weight_dtype == "fp16"
    assert row.family == "FasterTransformer" and not row.modern  # kept out of the calibration
    assert "kipply" in row.source and "16.8 ms" in row.notes


def test_no_row_is_dropped_silently(rows):
    usable = M.usable(rows)
    rest = M.not_reproducible(rows)
    assert len(usable) + len(rest) == 124
    assert len(usable) == 84
    # the L40S rows (54, 61, 62) map to the L40S: TensorRT-LLM v0.5, Llama-2-7B in FP8
    assert [r.accelerator for r in rows if r.number in (54, 61, 62)] == ["L40S"] * 3
    # AWQ checkpoints store a zero point per group (int4_zp); GPTQ-Int4 is read as symmetric
    assert {r.weight_dtype for r in usable if "awq" in r.precision.lower()} == {"int4_zp"}
    assert {r.weight_dtype for r in usable if "gptq-int4" in r.precision.lower()} == {"int4"}
    assert all(r.reason for r in rest) and all(r.reason is None for r in usable)


@pytest.mark.parametrize(("number", "words"), [
    (81, "speculative"),          # DeepSeek-R1 MTP batch 1 on 8 x H200
    (12, "accelerator data: MI250X"),  # a GPU the library lacks
    (95, "accelerator data: RTX 3090 Ti"),  # another GPU the library lacks
    (97, "A100 (PCIe)"),
    (75, "batch not reported"),   # TensorRT-LLM v1.0 max-throughput run
    (52, "ambiguous unit"),       # the A100 TP4 table: per GPU or total?
    (74, "layout not given"),
    (82, "attention data parallelism"),
    (117, "attention data parallelism"),  # SGLang's DP attention x EP72 decode (LMSYS blog)
    (118, "attention data parallelism"),  # and its DP attention x EP32 prefill
    (102, "NVIDIA/NeMo discussion #8455"),
    (38, "ambiguous definition"),  # Qwen speed with a 129,024-token prompt
    (30, "memory measurement"),
    (116, "'GPT-13B' has no config"),  # kipply's FasterTransformer 13B GPT (book/measured.md)
])
def test_rows_not_reproducible_say_why(rows, number, words):
    row = by_number(rows, number)
    assert not row.usable and words in row.reason


@pytest.mark.parametrize(("number", "chip", "weights", "kv", "math"), [
    (1, "A100", "bf16", "bf16", None),            # power-capped A100 SXM
    (2, "A100", "int4", "bf16", "bf16"),          # INT4 weight-only, group 32
    (45, "H100", "fp8", "fp8", None),             # FP8 weights+act, FP8 KV
    (85, "H100", "fp8", "fp8", None),             # NIM: form factor and KV not stated
    (103, "MI300X", "fp8", "fp8", None),
    (111, "RTX 4090", "fp16", "fp16", None),      # llama.cpp F16 GGUF
])
def test_mapping_of_gpus_and_precisions(rows, number, chip, weights, kv, math):
    row = by_number(rows, number)
    assert row.usable
    assert (row.accelerator, row.weight_dtype, row.kv_dtype, row.compute_dtype) == (
        chip, weights, kv, math)
    get_accelerator(row.accelerator)  # a library name
    assert by_number(rows, 2).weight_group_size == 32


@pytest.mark.parametrize(("engine", "family"), [
    ("vLLM 0.9.1 (ROCm 6.4.1)", "vLLM"), ("NVIDIA NIM 1.8.0", "NIM"),
    ("TensorRT-LLM v0.5.0 (static batching)", "TensorRT-LLM"), ("NeMo/TensorRT-LLM", "NeMo"),
    ("SGLang v0.4.1.post2 (CUDA graph, tuned FP8 GEMM)", "SGLang"),
    ("lmdeploy TurboMind v0.1.0a1", "lmdeploy"), ("llama.cpp (Metal)", "llama.cpp"),
])
def test_engine_families(engine, family):
    assert M.family(engine) == family


# --- malformed rows -----------------------------------------------------------------------------
def write(tmp_path, *lines):
    path = tmp_path / "rows.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_good_temp_csv_loads(tmp_path):
    (row,) = M.load(write(tmp_path, HEADER, GOOD))
    assert row.usable and row.number == 1 and row.value == 104.9


@pytest.mark.parametrize(("line", "match"), [
    (GOOD.replace(",104.9,", ",fast,"), r"row 2 \(line 3\): field 'value' is 'fast', not a number"),
    (GOOD.replace("decode_tokens_per_s_per_user", "tokens_per_joule"),
     r"row 2 \(line 3\): field 'metric' is 'tokens_per_joule'; allowed: decode_tokens"),
    (GOOD.replace(",1,5,200,", ",1.5,5,200,"), r"row 2 \(line 3\): field 'batch' is '1.5'"),
    (GOOD.replace(",A100-SXM4-80GB,", ",,"), r"row 2 \(line 3\): field 'gpu' is empty"),
    (GOOD.rsplit(",", 1)[0], r"row 2 \(line 3\): field 'notes' is missing"),
    (GOOD + ",extra", r"row 2 \(line 3\): 1 field\(s\) past the last column"),
    (GOOD.replace(",tok/s,", ",ms,"), r"row 2 \(line 3\): field 'unit' is 'ms'"),
    (GOOD.replace(",104.9,", ",-3,"), r"row 2 \(line 3\): field 'value' is '-3'"),
])
def test_a_malformed_row_names_its_row_and_field(tmp_path, line, match):
    with pytest.raises(ValueError, match=match):
        M.load(write(tmp_path, HEADER, GOOD, line))


def test_a_header_without_a_column_is_refused(tmp_path):
    with pytest.raises(ValueError, match="header lacks column"):
        M.load(write(tmp_path, HEADER.replace(",unit", ""), GOOD))


# --- the floor and the kernel-by-kernel time ----------------------------------------------------
def test_no_published_row_beats_the_bound(comparisons):
    """Every usable row: measured never faster than the floor (mbu = mfu = 1), up to half a
    unit of the last digit the source published; nor, in today's data, than the kernel-by-kernel
    time (``bound``, an old name), which overlap could beat (tests/test_floor.py counts them)."""
    assert len(comparisons) == 84
    assert [c.row.number for c in comparisons if c.beats_floor] == []
    beaten = [(c.row.number, c.measured, c.bound) for c in comparisons if c.beats_bound]
    assert beaten == []
    assert all(c.attained <= 1 + M.rounding(c.row) / c.measured for c in comparisons)


def test_rounding_is_half_the_last_published_digit(rows):
    assert M.rounding(by_number(rows, 25)) == 0.5       # TTFT 22 ms (0.022 s)
    assert M.rounding(by_number(rows, 3)) == pytest.approx(0.005)  # 93.89 tok/s


def test_bound_of_batch_one_decode_by_hand(rows):
    """gpt-fast, Llama-2-7B bf16 on one A100 SXM, 5-token prompt, 200 tokens: each step reads
    every weight but the embedding table (one row of it), 2 bytes each, plus a small KV cache."""
    params, embedding = 6_738_415_616, 32_000 * 4096
    weights = 2 * (params - embedding)  # 13,214,687,232 bytes
    kv_per_token = 2 * 32 * 32 * 128 * 2  # K and V, 32 layers x 32 heads x 128, bf16: 524,288
    mean_context = 5 + 100  # contexts 6 ... 204 over 199 steps: about 105 cached tokens
    step = (weights + mean_context * kv_per_token) / 2.039e12
    by_hand = 200 / (200 * step)  # prefill of 5 tokens also reads the weights once: ~one step
    c = next(c for c in M.compare(rows) if c.row.number == 1)
    assert c.bound == pytest.approx(by_hand, rel=5e-3)


def test_achieved_mbu_matches_the_sources_own_figure(comparisons):
    """gpt-fast's README gives its achieved bandwidth per GPU (model bytes x tok/s): 1,397.31 GB/s
    for Llama-2-7B bf16 on one A100, i.e. MBU 1397.31 / 2039 = 0.685."""
    c = next(c for c in comparisons if c.row.number == 1)
    assert c.mbu == pytest.approx(1397.31 / 2039, rel=0.02)


def test_mfu_of_a_prefill_by_hand(comparisons):
    """TensorRT-LLM, Llama-2-7B fp16 on one A100, 2,048-token prompt, TTFT 133 ms: about
    2 x 6.6e9 FLOPs per token for the weight matmuls plus the causal attention,
    2 x 2 x 32 layers x 4096 x 2048^2 / 2 FLOPs; over 0.133 s x 312e12."""
    params, embedding, lm_head = 6_738_415_616, 32_000 * 4096, 32_000 * 4096
    matmuls = 2 * (params - embedding - lm_head) * 2048 + 2 * lm_head  # LM head on 1 position
    attention = 2 * 2 * 32 * 4096 * 2048 * 2048 / 2
    by_hand = (matmuls + attention) / 0.133 / 312e12
    c = next(c for c in comparisons if c.row.number == 58)
    assert c.mfu == pytest.approx(by_hand, rel=0.02)


def test_max_throughput_rows_stay_under_the_infinite_batch_ceiling(rows):
    no_batch = [r for r in rows if r.batch is None and r.weight_dtype is not None]
    assert [r.number for r in no_batch] == [75, 76, 77, 78, 79, 80, *range(119, 125)]
    for r in no_batch:
        assert r.value <= M.ceiling(r)
        assert M.ceiling(r, kernels=True) <= M.ceiling(r)  # the floor's is the higher
    top = M.ceiling_compare(rows)
    assert [c.row.number for c in top] == [r.number for r in no_batch]
    assert not any(c.beats_floor for c in top)
    with pytest.raises(ValueError, match="without a batch"):
        M.ceiling(by_number(rows, 1))


def test_mlperf_blackwell_rows_read_from_the_v5_1_logs(rows):
    """Rows 119-124: NVIDIA's MLPerf Inference v5.1 closed results on eight B200, each value
    as its mlperf_log_summary.txt prints it, NVFP4 (W4A4) with an FP8 KV cache, no batch and
    no prompt length (not stated in the sources), the output length the run's own tokens per
    sample (tokens/s over samples/s of the same log)."""
    mlperf = {r.number: r for r in rows if r.number >= 119}
    assert {n: (r.model, r.value) for n, r in mlperf.items()} == {
        119: ("Llama-2-70B", 101527.0), 120: ("Llama-2-70B", 99123.04),
        121: ("Llama-2-70B", 59545.45), 122: ("Llama-3.1-405B", 1624.11),
        123: ("DeepSeek-V3", 33379.0), 124: ("DeepSeek-V3", 18592.24)}
    per_second = {119: 371.423, 120: 361.30, 121: 218.82, 122: 2.49245, 123: 8.93431,
                  124: 4.96}  # samples/s in the same logs
    for n, r in mlperf.items():
        assert r.output_len == round(r.value / per_second[n])
        assert (r.accelerator, r.n_gpus, r.batch, r.input_len) == ("B200", 8, None, None)
        assert (r.weight_dtype, r.kv_dtype, r.compute_dtype) == ("nvfp4", "fp8", "nvfp4")
        assert "mlperf_log_summary.txt" in r.notes and "batch not reported" in r.reason
    # the reference's tokens per sample, and the closed division's 0.9-1.1 band around it
    assert 0.9 * 294.45 <= mlperf[119].output_len <= 1.1 * 294.45
    assert mlperf[122].output_len >= 0.9 * 684.68


def test_blackwell_llama2_70b_floor_holds_only_at_nvfp4_checked_by_hand(rows):
    """The issue's case: 8 x B200 serve Llama-2-70B at 101,527 tokens/s (MLPerf v5.1 Offline).
    By hand, at an unbounded batch the weights cost nothing per token and the math sets the
    pace: each token of a request (prompt and output alike) costs 2 FLOPs a weight of the
    body's matmuls, plus the logits of each output token, on eight GPUs at the B200's dense
    NVFP4 peak, 9 PFLOP/s (datasheet). Priced at FP8 (4.5 PFLOP/s) the same ceiling falls
    under the measurement once the mean prompt passes about 425 tokens; at NVFP4 it holds to
    about 970 of the 1,024 the dataset allows."""
    from llm_roofline.dtypes import bytes_per_element

    row = by_number(rows, 119)
    cfg = row.config
    h, layers, vocab = cfg.hidden_size, cfg.n_layers, cfg.vocab_size
    kv = cfg.n_kv_heads * cfg.head_dim
    body = layers * (h * h + 2 * h * kv + h * h + 3 * h * cfg.intermediate_size)
    assert body == 68_451_041_280  # 80 layers of Llama-2-70B's projections and MLP
    # weights: 4 bits a value plus an FP8 scale per 16, 4.5 bits a weight
    assert bytes_per_element("nvfp4") == 4.5 / 8
    assert body * 4.5 / 8 / 1e9 == pytest.approx(38.5, abs=0.05)  # GB, fits one 180 GB GPU
    peak = get_accelerator("B200").peaks["fp4"]
    assert peak == 9.0e15  # dense FP4, B200 datasheet (not the 2:4-sparse 18 PFLOP/s)

    peak_head = get_accelerator("B200").peaks["bf16"]  # logits and attention: 16-bit

    def by_hand(prompt, peak_body):
        out = row.output_len
        mean_context = prompt + (out - 1) / 2
        attention = 4 * layers * cfg.n_heads * cfg.head_dim * mean_context  # QK^T and PV
        per_request = ((prompt + out) * 2 * body / peak_body
                       + out * (2 * h * vocab / peak_head + attention / peak_head))
        return 8 * out / per_request  # eight GPUs, tokens/s

    assert M.ceiling(row) == pytest.approx(by_hand(1, peak), rel=0.03)
    assert M.ceiling(row) > row.value  # the floor holds at the least prompt, at NVFP4
    fp8 = dict(weight_dtype="fp8", compute_dtype="fp8")
    assert M.ceiling(row, **fp8) == pytest.approx(by_hand(1, peak / 2), rel=0.03)
    # the prompt at which each format's ceiling meets the measurement
    assert M.ceiling(row, prompt_len=400, **fp8) > row.value > M.ceiling(row, prompt_len=450, **fp8)
    assert M.ceiling(row, prompt_len=950) > row.value > M.ceiling(row, prompt_len=1000)
    assert by_hand(400, peak / 2) > row.value > by_hand(470, peak / 2)


def test_bound_of_a_row_that_is_not_reproducible_is_refused(rows):
    with pytest.raises(ValueError, match="row 81 is not reproducible: speculative"):
        M.bound(by_number(rows, 81))


def test_data_parallel_rows_meet_the_floor_of_their_own_layout(rows):
    """The four rows served with data-parallel attention x expert parallelism (TensorRT-LLM on
    8 x H200 and 8 x B200, SGLang's decode and prefill pools on H100) are held against
    parallel.dp_ep_estimate's floor: none beats it; only the prefill, which overlaps its
    all-to-all with the math (two-batch overlap), beats the kernel-by-kernel time."""
    from llm_roofline.parallel import Layout, dp_ep_decode_step

    dp = M.dp_compare(rows)
    assert [c.row.number for c in dp] == [82, 83, 117, 118]
    assert all(not c.row.usable and "attention data parallelism" in c.row.reason for c in dp)
    assert not any(c.beats_floor for c in dp)
    assert [c.row.number for c in dp if c.beats_bound] == [118]
    by = {c.row.number: c for c in dp}
    # row 117 is per GPU: 256 sequences a GPU over one decode step at a 2,001-token context
    step = dp_ep_decode_step("deepseek-v3", "H100", 256, 2001, Layout(dp=64, ep=64),
                             weight_dtype="fp8", kv_dtype="bf16", node_limit=4)
    assert by[117].floor == pytest.approx(256 / step.floor_s)
    assert by[117].bound == pytest.approx(256 / step.time_s)
    # the published figures, as the rows' notes turn them into the csv's units
    assert by[117].measured == 22_282 / 8 and by[118].measured == 50_302 * 4
    assert by[83].floor > by[82].floor  # B200 with NVFP4 experts over H200 in FP8

    with pytest.raises(ValueError, match="rows must be a list of measured.Row"):
        M.dp_compare([1])
    with pytest.raises(ValueError, match="rows"):
        M.dp_compare("x")


def test_break_even_prompt_refuses_bad_input(rows):
    row = by_number(rows, 119)
    with pytest.raises(ValueError, match="row must be a measured.Row"):
        M.break_even_prompt("row 119")
    with pytest.raises(ValueError, match="longest"):
        M.break_even_prompt(row, longest=0)
    with pytest.raises(ValueError, match="prompt_len is what break_even_prompt searches"):
        M.break_even_prompt(row, prompt_len=10)
    assert M.break_even_prompt(row, longest=500) == 500  # holds at every prompt up to 500
    with pytest.raises(ValueError, match="row 1: the ceiling is for throughput rows without a batch"):
        M.ceiling_compare([by_number(rows, 1)]) or M.ceiling(by_number(rows, 1))


def test_inter_token_latency_under_concurrency_counts_the_others_prefills(rows):
    """NIM's ITL at a client concurrency of 50 (row 89, 5,000-token prompts, 500 outputs): a
    continuously batching server admits one request every 500 / 50 = 10 steps and prefills it
    between the others' decode steps, so each step carries 49 / 500 of a prompt's prefill; the
    floor is the larger of the decode step's and that share (an engine may overlap them). At a
    concurrency of 1 (row 93) there is no other request: the plain decode step."""
    row, alone = by_number(rows, 89), by_number(rows, 93)
    assert (row.batch, row.input_len, row.output_len, row.definition) == (50, 5000, 500,
                                                                          "tpot+prefills")
    assert alone.batch == 1 and alone.definition == "tpot"
    est = M.bound_estimate(row)
    one_prompt = M.bound_estimate(row).ttft_s / 50  # a compute-bound prefill: 1/50 of 50
    assert M.bound(row) == pytest.approx(1e3 * (est.tpot_s + 49 / 500 * one_prompt), rel=1e-9)
    assert M.floor(row) == pytest.approx(
        1e3 * max(est.tpot_floor_s, 49 / 50 * est.ttft_floor_s / 500), rel=1e-9)
    assert M.floor(row) < M.bound(row) < row.value  # the floor holds, and the engine is slower
    # the others' prefills are a large part of the step: the decode alone is far from it
    assert M.bound(row) > 1.5 * 1e3 * est.tpot_s
