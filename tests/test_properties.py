"""Bad and extreme input, thrown at every public entry point (hypothesis).

Each property asserts that a call either raises a one-line ``ValueError`` or returns a finite,
valid result: never another exception, never NaN or infinity, never a negative size. The
calculator's invariants are checked over the whole valid range.
"""

from __future__ import annotations

import contextlib
import io
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import llm_roofline as lr
from llm_roofline import counts, roofline
from llm_roofline.cli import main
from llm_roofline.course import exercises
from llm_roofline.models import ModelConfig

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Anything a user might pass where a number is expected.
anything = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.complex_numbers(), st.text(max_size=8), st.just(2**63), st.just(-(2**63)),
    st.just(10**400), st.just(5e-324), st.just(1e300), st.just(np.int64(7)), st.just(np.float32(3)),
    st.lists(st.integers(-3, 10), max_size=3),
)


def one_line_error(call):
    """Run ``call``; a ValueError must be one line; return the result or None."""
    try:
        return call()
    except ValueError as err:
        text = str(err)
        assert text and "\n" not in text and len(text) < 600, text
        return None


def finite(x) -> bool:
    return bool(np.all(np.isfinite(np.asarray(x, dtype=float))))


MODELS = lr.list_models()
GPUS = ["h100", "a100", "h200", "mi300x", "b200", "rtx4090"]


@FAST
@given(batch=anything, prompt=anything, output=anything, mbu=anything)
def test_estimate_gives_a_clear_error_or_a_finite_answer(batch, prompt, output, mbu):
    est = one_line_error(lambda: lr.estimate("llama-3-8b", "h100", batch, prompt, output, mbu=mbu))
    if est is not None:
        for value in (est.ttft_s, est.tpot_s, est.throughput_tok_s, est.memory.used,
                      est.memory.free):
            assert finite(value)
        assert np.all(np.asarray(est.memory.kv_cache) >= 0)
        assert np.all(np.asarray(est.tpot_s) > 0)


@FAST
@given(batch=anything, context=anything)
def test_decode_step_gives_a_clear_error_or_a_finite_answer(batch, context):
    step = one_line_error(lambda: lr.decode_step("llama-3-8b", "h100", batch, context))
    if step is not None:
        assert finite(step.time_s) and np.all(np.asarray(step.time_s) > 0)


@FAST
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS),
       batch=st.integers(1, 4096), prompt=st.integers(1, 4096), output=st.integers(1, 2048),
       dtype=st.sampled_from(["bf16", "fp8", "int4"]))
def test_the_calculators_invariants_hold_over_the_valid_range(model, gpu, batch, prompt, output,
                                                              dtype):
    cfg = lr.get_model(model)
    assume(prompt + output <= cfg.max_context)
    est = lr.estimate(model, gpu, [batch, batch + 1], [prompt, prompt], [output, output],
                      weight_dtype=dtype)
    tpot, memory = np.asarray(est.tpot_s), np.asarray(est.memory.used)
    assert tpot[1] >= tpot[0] * (1 - 1e-12)  # TPOT never falls with batch
    assert memory[1] > memory[0]  # memory grows with batch
    assert np.allclose(est.throughput_tok_s, np.array([batch, batch + 1]) / tpot, rtol=1e-12)
    assert list(est.fits) == list(np.asarray(est.memory.free) >= 0)  # fits agrees with memory
    longer = lr.estimate(model, gpu, batch, prompt, min(output + 1, cfg.max_context - prompt),
                         weight_dtype=dtype)
    assert longer.memory.used >= est.memory.used[0]  # memory grows with context


# --- configs -------------------------------------------------------------------------------
BASE = json.loads(lr.models._MODELS.joinpath("llama-3-8b.json").read_text())
FIELDS = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "vocab_size", "max_position_embeddings", "rope_theta",
          "rms_norm_eps", "tie_word_embeddings", "head_dim", "attention_bias", "model_type"]


@FAST
@given(field=st.sampled_from(FIELDS), value=st.one_of(anything, st.dictionaries(st.text(max_size=3),
                                                                               st.integers())))
def test_a_config_with_any_bad_field_gives_a_clear_error_naming_it(field, value):
    config = {**BASE, field: value}
    cfg = one_line_error(lambda: ModelConfig.from_hf_config(config))
    if cfg is None:
        return
    # accepted: then it is a valid model whose sizes are finite and positive
    assert cfg.n_params > 0 and cfg.kv_elements_per_token > 0
    assert math.isfinite(cfg.rope_theta) and math.isfinite(cfg.norm_eps)
    assert isinstance(cfg.tie_embeddings, bool)


@FAST
@given(batch=anything, n_new=anything, n_past=anything)
def test_op_costs_gives_a_clear_error_or_exact_non_negative_counts(batch, n_new, n_past):
    costs = one_line_error(lambda: counts.op_costs(lr.get_model("llama-3-8b"), batch, n_new,
                                                     n_past))
    if costs is not None:
        assert all(c.flops >= 0 and c.bytes >= 0 for c in costs.values())


@FAST
@given(id=st.sampled_from(exercises.list_exercises()), answer=anything)
def test_answer_checks_give_a_clear_error_or_a_verdict(id, answer):
    verdict = one_line_error(lambda: exercises.check(id, answer))
    if verdict is not None:
        assert isinstance(bool(verdict), bool) and str(verdict)


@FAST
@given(intensity=anything, peak=anything, bandwidth=anything)
def test_roofline_gives_a_clear_error_or_a_finite_answer(intensity, peak, bandwidth):
    value = one_line_error(lambda: roofline.attainable(intensity, peak, bandwidth))
    if value is not None:
        assert finite(value)


# --- the command line ------------------------------------------------------------------------
options = st.sampled_from(["--batch", "--prompt", "--output", "--n-gpus", "--mbu", "--mfu",
                           "--queue", "--dtype", "--kv-dtype"])
values = st.one_of(st.integers(-5, 2**70).map(str), st.floats(allow_nan=True).map(str),
                   st.sampled_from(["", "x", "1,2", "1,,2", "fp8", "int4", "5e-324", "inf", "0"]))


@settings(max_examples=120, deadline=None)
@given(extra=st.lists(st.tuples(options, values), max_size=3), as_json=st.booleans())
def test_the_cli_exits_0_with_strict_json_or_2_with_one_line(extra, as_json):
    argv = ["estimate", "--model", "llama-3-8b", "--gpu", "h100"]
    for option, value in extra:
        argv += [option, value]
    if as_json:
        argv.append("--json")
    out_buf, err_buf = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out_buf), contextlib.redirect_stderr(err_buf):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
    out, err = out_buf.getvalue(), err_buf.getvalue()
    assert code in (0, 2)
    if code == 2:
        assert out == "" and err.count("\n") == 1 and err.startswith("llm_roofline: error:")
    elif as_json:
        def refuse(constant):
            raise AssertionError(f"not strict JSON: {constant}")

        json.loads(out, parse_constant=refuse)
    else:
        assert "nan" not in out.lower().split() and "inf" not in out.lower()


@pytest.mark.parametrize("name", ["llama3-70b", "llama_3_70b", " llama-3-70b", "LLAMA-3-70B"])
def test_near_miss_model_names_are_found_or_suggested(name):
    try:
        assert lr.get_model(name).name == "llama-3-70b"
    except ValueError as err:
        assert "llama-3-70b" in str(err)
