"""The TTFT/TPOT chapter's figures draw the library's numbers, with labelled axes."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import llm_roofline as lr  # noqa: E402
from llm_roofline import serving  # noqa: E402
from llm_roofline.course.ch06 import chunk_tradeoff, client_timeline, latency_throughput  # noqa: E402


@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def test_latency_throughput_draws_the_calculator_and_marks_memory(ax):
    batches = [1, 64, 128, 512]
    out = latency_throughput(ax, "llama-3-8b", "h100", 1024, 1024, batches, label="8B",
                             annotate=[64])
    fit = lr.max_batch("llama-3-8b", "h100", 1024, 1024)
    assert out["max_batch"] == fit and 128 < fit < 512
    assert list(out["fits"]) == [True, True, True, False]
    e = lr.estimate("llama-3-8b", "h100", 64, 1024, 1024)
    assert out["tpot_ms"][1] == pytest.approx(e.tpot_s * 1e3)
    assert out["tok_s"][1] == pytest.approx(64 / e.tpot_s)
    solid, hollow, cross = ax.lines
    assert list(solid.get_xdata()) == pytest.approx(list(out["tpot_ms"][:3]))
    assert len(hollow.get_xdata()) == 1 and hollow.get_markerfacecolor() == "white"
    last = lr.estimate("llama-3-8b", "h100", fit, 1024, 1024)
    assert cross.get_ydata()[0] == pytest.approx(last.throughput_tok_s)
    assert ax.get_xlabel() and ax.get_ylabel()
    assert [t.get_text() for t in ax.texts] == ["B = 64"]


def test_client_timeline_by_hand(ax):
    """Arrive 2.5 ms into steps of 2 ms: wait 1.5 ms for the step boundary at 4 ms, a 10 ms
    prefill step ends at 14 ms (the first token), then a token every 3 ms."""
    out = client_timeline(ax, arrive_s=0.0025, step_s=0.002, prefill_s=0.010, tpot_s=0.003,
                          n_tokens=4, steps_before=3)
    assert out["queue_s"] == pytest.approx(0.0015)
    assert out["ttft_s"] == pytest.approx(0.0115)
    assert list(out["token_s"]) == pytest.approx([0.014, 0.017, 0.020, 0.023])
    server = ax.collections[0].get_paths()
    assert len(server) == 2 + 1 + 3  # two steps before, the mixed step, three after
    assert ax.get_xlabel() == "time (ms)"
    with pytest.raises(ValueError, match="arrive_s"):
        client_timeline(ax, arrive_s=0.01, step_s=0.002, prefill_s=0.01, tpot_s=0.003)


def test_chunk_tradeoff_plots_the_serving_results(ax):
    chunks = [512, 2048]
    results = [serving.chunked_prefill("llama-3-8b", "h100", 16, 2048, 2048, c) for c in chunks]
    out = chunk_tradeoff(ax, chunks, results)
    assert list(out["ttft_ms"]) == pytest.approx([r.ttft_s * 1e3 for r in results])
    assert out["ttft_ms"][0] > out["ttft_ms"][1]  # smaller chunks: a later first token
    assert out["tpot_ms"][0] < out["tpot_ms"][1]  # and a smaller stall for the others
    assert out["tpot_without_ms"] == pytest.approx(results[0].tpot_without_s * 1e3)
    assert np.all(out["tpot_ms"] >= out["tpot_without_ms"])
    assert [t.get_text() for t in ax.texts][:2] == ["512", "2,048"]
