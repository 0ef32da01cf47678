"""Tests for labkit.export.plots (Lab 05): each picture on small hand-made inputs.

Each check can fail: the titles must carry the takeaway computed from the inputs, the axes their
units (nats/token, tokens/s, ms), and the number of lines and bars must follow the inputs.
"""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from labkit.export import plots  # noqa: E402
from labkit.export.serve import ServeStats  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_training_loss_title_states_the_drop_and_marks_the_uniform_guess():
    fig = plots.plot_training_loss([5.5, 4.0, 3.04], "tpu", vocab_size=256)
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert ax.get_title() == "Trained on TPU: loss falls from 5.5 to 3.0"
    assert ax.get_ylabel() == "cross-entropy (nats / token)" and ax.get_xlabel() == "training step"
    curve, guess = ax.get_lines()
    assert list(curve.get_ydata()) == [5.5, 4.0, 3.04]
    assert guess.get_ydata()[0] == pytest.approx(math.log(256))
    assert ax.get_legend().get_texts()[0].get_text() == "uniform guess, ln 256"


def _stat(path: str, batch: int, tps: float, ttft: float, tpot: float) -> ServeStats:
    return ServeStats(path, batch, prompt_len=16, new_tokens=16, ttft_p50_ms=ttft, ttft_p95_ms=ttft * 1.5,
                      tpot_p50_ms=tpot, tpot_p95_ms=tpot * 1.2, tokens_per_s=tps, repeats=5)


def test_serving_sweep_titles_state_the_gain_the_fastest_path_and_the_ttft_ratio():
    stats = [_stat("eager", 1, 1000.0, 2.0, 1.0), _stat("eager", 8, 4000.0, 3.0, 1.0),
             _stat("jit", 1, 2000.0, 1.0, 0.5), _stat("jit", 8, 9000.0, 6.0, 1.0),
             _stat("export", 1, 500.0, 2.0, 1.0), _stat("export", 8, 1500.0, 4.0, 2.0)]
    fig = plots.plot_serving_sweep(stats)
    assert isinstance(fig, Figure)
    ax1, ax2 = fig.axes
    # least gain from batching: export 3.0x; fastest anywhere: jit (9000 tokens/s at batch 8)
    assert ax1.get_title() == "Batching multiplies tokens/s (at least 3.0x here); fastest: jit"
    assert ax1.get_ylabel() == "throughput (generated tokens / s)"
    assert ax1.get_xlabel() == "batch size (sequences served together)"
    assert len(ax1.get_lines()) == 3 and [t.get_text() for t in ax1.get_xticklabels()] == ["1", "8"]
    # batch 8: TTFT / TPOT = 3, 6, 2 -> median 3.0
    assert ax2.get_title() == "Batch 8: the first token costs 3.0x a later one (median over paths)"
    assert ax2.get_ylabel() == "latency (ms), whisker = p95"
    assert len(ax2.patches) == 2 * 3  # a TTFT and a TPOT bar per path
    assert [p.get_height() for p in ax2.patches] == [3.0, 6.0, 4.0, 1.0, 1.0, 2.0]
    assert [t.get_text() for t in ax2.get_xticklabels()] == ["eager", "jit", "export"]
