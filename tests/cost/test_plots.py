"""Tests for labkit.cost.plots (Lab 06): each picture on small hand-made inputs.

Each check can fail: the titles must carry the takeaway computed from the inputs, the axes their
units (tokens/s, $, s, requests/s), and the number of lines, bars and cells must follow the inputs.
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from labkit.cost import model as cost  # noqa: E402
from labkit.cost import plots  # noqa: E402
from labkit.cost.routing import STAGES, Placement, SimResult  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _lines(ax) -> list:
    """Data lines only: axhline / axvline are Line2D too, with two points in axes coordinates."""
    return [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 2]


def _shown(text: str) -> str:
    """A label as it renders: "\\$" is a literal dollar sign (a bare "$" would start mathtext)."""
    return text.replace("\\$", "$")


def _placement(pools: tuple[str, ...], latency_s: float, usd_per_request: float, meets: bool) -> Placement:
    return Placement(STAGES, pools, (latency_s / 4,) * 4, (0.0,) * 3, latency_s, usd_per_request, meets)


def _sim(rate: float, p50: float, p95: float, usd_per_request: float) -> SimResult:
    return SimResult(rate, 100, 0, {"llm": 1}, {"llm": 0.5}, p50, p95, p50, 1.0, usd_per_request, True, "stable")


# ------------------------------------------------------------------ section 1: this runtime


def test_serving_cost_vs_batch_title_has_the_measured_saving():
    bs, tps = [1, 8, 64], [1000.0, 6000.0, 20_000.0]
    usd = [0.5 / (t * 3600) * 1e6 for t in tps]  # $0.50/h; batch 64 is 20x cheaper than batch 1
    fig = plots.plot_serving_cost_vs_batch(bs, tps, usd, 0.5, 50_000.0, "my chip", 2.1e6)
    assert isinstance(fig, Figure)
    a1, a2 = fig.axes
    assert a2.get_title() == "batch 64 is 20x cheaper per token than batch 1"
    assert a1.get_ylabel() == "tokens/s"
    assert _shown(a2.get_ylabel()) == "$ per million tokens (at $0.5/h)"
    assert "sequences per step" in a1.get_xlabel()
    assert list(a1.get_lines()[0].get_xdata()) == bs and a1.get_lines()[1].get_ydata()[0] == 50_000.0  # the ceiling
    assert fig._suptitle.get_text() == "my chip: serving the 2.1 M-parameter token-step model"


# ------------------------------------------------------------------ section 3: across chips


def test_cost_per_chip_two_bars_per_chip_and_the_winners_in_the_title():
    train = {"NVIDIA A": cost.serve_cost_per_mtok(1000, 2.0), "TPU B": cost.serve_cost_per_mtok(1000, 1.0)}
    serve = {"NVIDIA A": cost.serve_cost_per_mtok(500, 2.0), "TPU B": cost.serve_cost_per_mtok(2000, 1.0)}
    fig = plots.plot_cost_per_chip(train, serve, best_train="TPU B", best_serve="NVIDIA A", prices="GCP",
                                   train_mfu=0.4, serve_batch=64, serve_util=0.6, n_params=8e9)
    (ax,) = fig.axes
    assert len(ax.patches) == 2 * len(train)
    assert [round(p.get_height(), 6) for p in ax.patches[:2]] == [round(train[c].usd_per_mtok, 6) for c in train]
    assert ax.get_title() == "8B model, GCP prices: cheapest to train on TPU B, to serve on NVIDIA A"
    assert "per million tokens" in ax.get_ylabel()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["A", "TPU B"]  # vendor prefix dropped
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["training (MFU 40%)",
                                                                  "serving (batch 64, utilization 60%)"]


# ------------------------------------------------------------------ section 4: the claims


@pytest.mark.parametrize("ratio_b, expect", [
    ([3.0, 3.0, 1.5], "GCP prices: below 2x from batch 4 (compute-bound)"),
    ([1.5, 1.5, 1.5], "GCP prices: below 2x at every batch"),
    ([3.0, 2.5, 2.0], "GCP prices: 2x or more at every batch"),
])
def test_serving_ratio_claim_titles_follow_the_numbers(ratio_b: list[float], expect: str):
    fig = plots.plot_serving_ratio_claim([1.0, 7.0, 14.0], [0.5, 2.0, 4.0], {"GCP": 11.06, "Lambda": 2.99}, 7.0,
                                         [1, 2, 4], ratio_b, tpu="TPU v5e", cloud="GCP", serve_util=0.6)
    a1, a2 = fig.axes
    assert _shown(a1.get_title()) == "holds only if the H100 costs more than $7.00/h"
    assert a2.get_title() == expect
    assert "per chip-hour" in a1.get_xlabel() and "TPU v5e" in a1.get_ylabel()
    assert [t.get_text() for t in a1.texts] == ["GCP", "Lambda"]  # one marked price per cloud
    assert "utilization 60% both" in fig._suptitle.get_text()


@pytest.mark.parametrize("wins, verb", [(True, "beats"), (False, "loses to")])
def test_training_cost_vs_mfu_one_line_per_chip_and_the_verdict(wins: bool, verb: str):
    mfus = [0.1, 0.4, 0.8]
    curves = {"NVIDIA H100 SXM": [3.0, 1.0, 0.5], "TPU v5e": [2.0, 0.6, 0.3], "TPU v6e": [1.0, 0.3, 0.15]}
    claimed = {c: (0.58 if "TPU" in c else 0.52, ys[1]) for c, ys in curves.items()}
    low = cost.train_cost_per_mtok(flops_per_token=6e9, chip="TPU v5e", mfu=0.35, usd_per_chip_hour=1.2)
    high = cost.train_cost_per_mtok(flops_per_token=6e9, chip="NVIDIA H100 SXM", mfu=0.52, usd_per_chip_hour=11.0)
    fig = plots.plot_training_cost_vs_mfu(mfus, curves, claimed, dict.fromkeys(curves, 1.5), 0.45, low, high, wins)
    (ax,) = fig.axes
    assert len(_lines(ax)) == len(curves)
    assert [ln.get_linestyle() for ln in _lines(ax)] == ["--", "-", "-"]  # GPUs dashed, TPUs solid
    assert ax.get_title() == f"Price per FLOP/s outweighs MFU: TPU v5e at 35% {verb} H100 at 52% (dots: claimed MFUs)"
    assert any(list(ln.get_xdata()) == [0.45, 0.45] for ln in ax.get_lines())  # the break-even line
    assert "per million tokens" in ax.get_ylabel() and "MFU" in ax.get_xlabel()


def test_spot_discount_dots_only_where_the_claim_flips():
    lost = np.linspace(0, 0.6, 7)
    curves = {"GPU A": (4.0, 1.0, list(0.75 - lost / 2)), "GPU B": (4.0, 2.0, list(0.5 - lost / 2))}
    fig = plots.plot_spot_discount(lost, curves, {"GPU A": 0.2}, 0.1, cloud="GCP")
    (ax,) = fig.axes
    assert len(_lines(ax)) == len(curves)
    dots = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
    assert len(dots) == 1 and list(dots[0].get_xdata()) == [0.2] and list(dots[0].get_ydata()) == [0.65]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert _shown(labels[0]) == "GPU A: $1.0 spot vs $4.0 on-demand (GCP)"
    assert "this lab's assumption (10% lost)" in labels
    assert ax.get_ylabel() == "discount per useful hour vs on-demand"


# ------------------------------------------------------------------ section 5: sensitivity


def _sensitivity(break_even_mfu: float | None) -> Figure:
    curve = [(x, 1.0 / x) for x in (0.1, 0.5, 1.0)]
    return plots.plot_cost_sensitivity(
        commit=curve, commit_chip="TPU v6e", commit_usd_h=1.22, on_demand_usd_h=2.7, on_demand_usd_mtok=2.0,
        break_even_util=0.45, gpu_mfu=curve, gpu_usd_h=11.0, tpu_train_usd_mtok=2.0, tpu_train_chip="TPU v5p",
        tpu_mfu=0.4, break_even_mfu=break_even_mfu, batch={"A": curve, "B": curve, "C": curve},
        gpu_price=curve, tpu_serve_usd_mtok=1.0, tpu_serve_chip="TPU v5e", tpu_usd_h=1.2, break_even_price=4.91)


def test_cost_sensitivity_four_panels_with_their_break_evens():
    fig = _sensitivity(0.49)
    util, mfu, batch, price = fig.axes[:4]
    assert util.get_title() == "TPU v6e: commit only above 45% utilization"
    assert mfu.get_title() == "H100 must reach 49% MFU to match TPU v5p"
    assert _shown(price.get_title()) == "the H100 serves cheaper below $4.91/h"
    assert len(_lines(batch)) == 3  # one line per chip
    assert all("per million tokens" in ax.get_ylabel() for ax in (util, mfu, batch, price))
    assert "per chip-hour" in price.get_xlabel() and "sequences per step" in batch.get_xlabel()


def test_cost_sensitivity_says_when_the_h100_never_matches():
    fig = _sensitivity(None)
    mfu = fig.axes[1]
    assert mfu.get_title() == "H100 never matches TPU v5p"
    assert not [ln for ln in mfu.get_lines() if len(ln.get_xdata()) == 2 and ln.get_xdata()[0] == ln.get_xdata()[1]]


# ------------------------------------------------------------------ section 6: routing and queueing


def test_placements_title_has_the_hybrids_saving():
    gpu = _placement(("gpu",) * 4, 0.8, 0.04e-3, True)
    tpu = _placement(("tpu",) * 4, 1.6, 0.02e-3, True)
    hybrid = _placement(("cpu", "tpu", "tpu", "cpu"), 1.6, 0.015e-3, True)
    targets = [0.5, 1.0, 2.0]
    fig = plots.plot_placements(gpu, tpu, hybrid, 2.0, targets, [None, gpu, hybrid])
    a1, a2, a3 = fig.axes
    assert a1.get_title() == "3 of 3 placements meet the 2 s target"
    assert a2.get_title() == "hybrid saves 25% vs the best single kind"  # 1 - 0.015 / 0.02
    assert len(a1.patches) == 3 and len(a2.patches) == 3
    assert a1.get_ylabel().startswith("latency per request, s") and "per 1000 requests" in a2.get_ylabel()
    assert a3.get_xlabel() == "latency target, s"
    assert fig._suptitle.get_text() == "Placements at a 2.0 s target: hybrid = cpu -> tpu -> tpu -> cpu"


def test_placements_when_no_single_kind_meets_the_target():
    gpu = _placement(("gpu",) * 4, 3.0, 0.04e-3, False)
    tpu = _placement(("tpu",) * 4, 3.0, 0.02e-3, False)
    hybrid = _placement(("cpu", "gpu", "gpu", "cpu"), 1.0, 0.05e-3, True)
    fig = plots.plot_placements(gpu, tpu, hybrid, 2.0, [1.0, 2.0], [hybrid, hybrid])
    assert fig.axes[0].get_title() == "1 of 3 placements meet the 2 s target"
    assert fig.axes[1].get_title() == "only the hybrid meets the target"


def test_queueing_capacity_and_the_autoscaler_lines():
    rates = [10.0, 20.0, 30.0]
    fixed = [_sim(r, 1.6 + r / 100, 1.7 + r / 50, 1e-5) for r in rates]
    auto = [_sim(r, 1.6, 1.6, 1e-3 / r) for r in (1.0, 10.0, 100.0)]
    fig = plots.plot_queueing(rates, fixed, 41.0, [1.0, 10.0, 100.0], auto, 1.6, 0.016)
    a1, a2 = fig.axes
    assert [t.get_text() for t in a1.get_legend().get_texts()] == ["p50", "p95", "capacity 41.0 req/s",
                                                                  "no-queue latency"]
    assert list(a1.get_lines()[1].get_ydata()) == [s.p95_s for s in fixed]
    assert a2.get_lines()[2].get_ydata()[0] == pytest.approx(0.016 / 0.7)  # the 70%-busy line
    assert a1.get_ylabel() == "latency, s" and a1.get_xlabel() == "offered load, requests/s"
    assert "per 1000 requests" in a2.get_ylabel()


# ------------------------------------------------------------------ section 7: worksheet


def test_decision_grid_one_cell_per_phase_and_option():
    ratio = np.array([[1.0, 2.5, np.nan], [3.0, 1.0, np.nan]])
    fig = plots.plot_decision_grid(ratio, ["train ($/Mtok)", "serve ($/Mtok)"], ["NVIDIA H100 SXM", "TPU v5e",
                                   "this runtime (CPU)"], {"train": "NVIDIA H100 SXM", "serve": "TPU v5e"},
                                   not_offered={(1, 2)})
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["1x", "2.5x", "too slow", "3x", "1x", "not a serving\noption here"]
    assert ax.get_title() == "No single winner: train -> H100 SXM, serve -> TPU v5e"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["H100 SXM", "TPU v5e", "this runtime\n(CPU)"]
    assert fig.axes[1].get_ylabel() == "cost / cheapest"  # the colour bar
