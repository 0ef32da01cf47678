"""Tests for labkit.export.plots (Lab 05): each picture on small hand-made inputs.

Each check can fail: the titles must carry the takeaway computed from the inputs, the axes their
units (nats/token, tokens/s, ms), and the number of lines and bars must follow the inputs.
"""
from __future__ import annotations

import dataclasses

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from labkit.export import plots  # noqa: E402
from labkit.export.load import SLO, LoadStats  # noqa: E402
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
    # least gain from batching: export 3.0x; fastest at each end: jit (2000 at batch 1, 9000 at batch 8)
    assert ax1.get_title() == "Batching multiplies tokens/s (at least 3.0x here)\nbatch 1: fastest jit\nbatch 8: fastest jit"
    assert ax1.get_ylabel() == "throughput (generated tokens / s)"
    assert ax1.get_xlabel() == "batch size (sequences served together)"
    assert len(ax1.get_lines()) == 3 and [t.get_text() for t in ax1.get_xticklabels()] == ["1", "8"]
    # batch 8: TTFT / TPOT = 3, 6, 2 -> the range, not a median no path has
    assert ax2.get_title() == "Batch 8: the first token costs 2.0-6.0x a later one (over the paths)"
    assert ax2.get_ylabel() == "latency (ms), whisker = p95"
    assert len(ax2.patches) == 2 * 3  # a TTFT and a TPOT bar per path
    assert [p.get_height() for p in ax2.patches] == [3.0, 6.0, 4.0, 1.0, 1.0, 2.0]
    # a winner is named only by a clear margin, at each end: eager at 8500 is within 10% of jit's 9000 at batch 8,
    # while at batch 1 jit's 2000 is twice eager's (the ranking of one end is not the other's)
    close = [_stat("eager", 1, 1000.0, 2.0, 1.0), _stat("eager", 8, 8500.0, 3.0, 1.0),
             _stat("jit", 1, 2000.0, 1.0, 0.5), _stat("jit", 8, 9000.0, 6.0, 1.0)]
    assert plots.plot_serving_sweep(close).axes[0].get_title().endswith(
        "batch 1: fastest jit\nbatch 8: jit ≈ eager (a tie: within 10%)")
    assert [t.get_text() for t in ax2.get_xticklabels()] == ["eager", "jit", "export"]


def test_log_axes_under_two_decades_read_as_plain_numbers():
    # the H200's p99 TPOT spanned 1.3-12 ms: matplotlib labelled it 2x10^0, 3x10^0 ...
    for lo, hi, want in ((1.3, 1.9, "1.5"), (1.3, 12.0, "2"), (1.3, 12.0, "5")):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [lo, hi])
        ax.set_yscale("log")
        plots._plain_log_ticks(ax)
        fig.canvas.draw()
        labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert want in labels and not any("times" in t or "^" in t for t in labels), labels
        plt.close(fig)


def _load(policy: str, rate: float, tps: float, ttft: float, tpot: float, goodput: float) -> LoadStats:
    lat = {f"{m}_p{q}": 0.0 for m in ("ttft", "tpot", "itl", "e2e") for q in (50, 95, 99)}
    lat.update(ttft_p99=ttft, tpot_p99=tpot)
    return LoadStats(policy, rate, 10, 1.0, rate, tps, goodput, SLO(ttft_s=0.5, tpot_s=0.02), lat)


LOAD = [_load("static", 1.0, 100.0, 40.0, 10.0, 1.0), _load("static", 8.0, 300.0, 2000.0, 12.0, 2.0),
        _load("continuous", 1.0, 110.0, 30.0, 10.0, 1.0), _load("continuous", 8.0, 700.0, 250.0, 15.0, 7.5)]


def test_latency_vs_throughput_titles_name_a_policy_only_where_it_wins_at_every_rate():
    fig = plots.plot_latency_vs_throughput(LOAD)
    ax1, ax2 = fig.axes
    # TTFT p99: continuous 30 < 40 and 250 < 2000; TPOT p99: a tie at 1/s (10 = 10), static at 8/s
    assert ax1.get_title() == ("p99 TTFT: continuous batching lower at all 2 rates\n"
                               "(at 8 req/s: static 2e+03, continuous 250 ms)")
    assert ax2.get_title() == ("p99 TPOT: static batching lower or equal at all 2 rates\n"
                               "(at 8 req/s: static 12, continuous 15 ms)")
    assert ax1.get_xlabel() == "throughput (generated tokens / s)" and ax1.get_ylabel() == "TTFT p99 (ms)"
    assert ax2.get_ylabel() == "TPOT p99 (ms)"
    lines = ax1.get_lines()
    assert len(lines) == 3  # two policies and the SLO
    assert list(lines[0].get_xdata()) == [100.0, 300.0] and list(lines[0].get_ydata()) == [40.0, 2000.0]
    assert list(lines[2].get_ydata()) == [500.0, 500.0]  # the TTFT SLO, ms
    assert [t.get_text() for t in ax1.texts] == ["1/s", "8/s", "1/s", "8/s"]


def test_goodput_title_names_the_policy_never_behind_and_the_slo():
    fig = plots.plot_goodput(LOAD)
    (ax,) = fig.axes
    assert ax.get_title() == ("goodput: continuous batching higher or equal at all 2 rates\n"
                              "(at 8 req/s: static 2, continuous 7.5 req/s)\n(SLO: TTFT <= 500 ms, TPOT <= 20 ms)")
    assert ax.get_ylim() == pytest.approx((0, 1.15 * 8.0))  # up to the ceiling: the runs' request throughput
    assert ax.get_xlabel() == "arrival rate (requests / s, as drawn)"
    assert ax.get_ylabel() == "goodput (requests / s within the SLO)"
    static, cont, ideal = ax.get_lines()
    assert list(cont.get_ydata()) == [1.0, 7.5] and list(ideal.get_ydata()) == [1.0, 8.0]
    with pytest.raises(ValueError, match="no LoadStats"):
        plots.plot_goodput([])
    # x is the rate that arrived where known: a Poisson draw of 10 requests at "8/s" that came at 7/s
    drawn = [dataclasses.replace(s, arrival_rate=s.rate * 7 / 8) for s in LOAD]
    static, cont, ideal = plots.plot_goodput(drawn).axes[0].get_lines()
    assert list(cont.get_xdata()) == [7 / 8, 7.0] and list(ideal.get_xdata()) == [7 / 8, 7.0]
    assert ideal.get_label() == "served req/s (the ceiling: all within the SLO)"  # what the dotted line is
    # the latency plots label each point by the same arrived rate (they said "8/s", the offered one)
    assert [t.get_text() for t in plots.plot_latency_vs_throughput(drawn).axes[0].texts] == [
        "0.875/s", "7/s", "0.875/s", "7/s"]


def test_no_policy_is_named_when_the_winner_changes_with_the_rate():
    zigzag = [_load("static", 1.0, 100.0, 40.0, 10.0, 3.0), _load("static", 8.0, 300.0, 20.0, 12.0, 2.0),
              _load("continuous", 1.0, 110.0, 30.0, 10.0, 1.0), _load("continuous", 8.0, 700.0, 250.0, 15.0, 7.5)]
    assert plots.consistent_winner(zigzag, lambda s: s.ms("ttft", 99)) == (None, 2, False)
    assert plots.consistent_winner(zigzag, lambda s: s.goodput, lower_is_better=False) == (None, 2, False)
    ax = plots.plot_latency_vs_throughput(zigzag).axes[0]
    assert ax.get_title().startswith("p99 TTFT: no consistent winner across the 2 rates\n"
                                     "(lower, by rate: continuous, static)")  # 30 < 40 at 1/s, 20 < 250 at 8/s
    assert "(higher, by rate: static, continuous)" in plots.plot_goodput(zigzag).axes[0].get_title()  # 3 > 1, 7.5 > 2


def test_a_log_axis_under_a_decade_has_plain_tick_labels():
    narrow = [_load(p, r, 100.0 * r, 300.0 * r, 10.0, 1.0) for p in ("static", "continuous") for r in (1.0, 2.0)]
    ax = plots.plot_latency_vs_throughput(narrow).axes[0]
    assert ax.get_ylim()[1] / ax.get_ylim()[0] < 10  # 300..600 ms and the 500 ms SLO
    assert ax.yaxis.get_major_formatter()(450.0, 0) == "450"  # not 4.5x10^2


def test_serving_sweep_names_no_fastest_within_one_programs_spread():
    # The 2-core CPU run (2026-11-29): StableHLO, the jit step serialized, served 1.27x JAX jit's tokens/s at batch 1
    # and 1.24x at batch 8; the title said "fastest StableHLO" at both ends by the fixed 10% rule.
    stats = [_stat("JAX jit", 1, 5160.0, 0.84, 0.15), _stat("JAX jit", 8, 15400.0, 1.96, 0.42),
             _stat("StableHLO", 1, 6530.0, 0.69, 0.12), _stat("StableHLO", 8, 19100.0, 1.59, 0.34),
             _stat("torch eager", 1, 1550.0, 1.05, 0.62), _stat("torch eager", 8, 14900.0, 1.44, 0.48)]
    assert plots.plot_serving_sweep(stats).axes[0].get_title().endswith(
        "batch 1: StableHLO ≈ JAX jit (a tie: within 27% = one program's spread)\n"
        "batch 8: StableHLO ≈ JAX jit (a tie: within 27% = one program's spread)")
