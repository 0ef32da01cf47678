"""Tests for labkit.cost.plots (Lab 06): each picture on small hand-made inputs.

Each check can fail: the titles must carry the takeaway computed from the inputs, the axes their
units, and the number of lines and points must follow the inputs.
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from labkit.cost import plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _shown(text: str) -> str:
    """A label as it renders: "\\$" is a literal dollar sign (a bare "$" would start mathtext)."""
    return text.replace("\\$", "$")


def test_serving_cost_kv_names_the_cheapest_chip_at_its_cap() -> None:
    curves = {"NVIDIA H100 SXM": ([1, 16, 256], [2.0, 0.2, 0.05], 256),
              "TPU v5e": ([1, 16, 94], [1.0, 0.1, 0.04], 94)}
    fig = plots.plot_serving_cost_kv(curves, "Llama-3-8B", 1024)
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert _shown(ax.get_title()) == "Llama-3-8B, 1024-token contexts: cheapest at its cap on TPU v5e ($0.04/Mtok)"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert ax.get_legend().get_title().get_text() == ""          # no prices: no line/band legend
    assert labels == ["H100 SXM (KV cache full at batch 256)", "TPU v5e (KV cache full at batch 94)"]
    caps = [ln for ln in ax.get_lines() if ln.get_marker() == "X"]
    assert [list(ln.get_xdata()) for ln in caps] == [[256], [94]]
    assert "$ per million tokens" in _shown(ax.get_ylabel())
    # with the chips each curve runs on, the legend names them: a cap is for that many chips
    ax2 = plots.plot_serving_cost_kv(curves, "Llama-3-8B", 1024, chips={"TPU v5e": 4}).axes[0]
    assert [t.get_text() for t in ax2.get_legend().get_texts()] == [
        "H100 SXM (KV cache full at batch 256)", "TPU v5e x4 (KV cache full at batch 94)"]


def test_serving_cost_kv_refuses_mismatched_curves() -> None:
    with pytest.raises(ValueError, match="3 batches but 2 costs"):
        plots.plot_serving_cost_kv({"x": ([1, 2, 4], [1.0, 0.5], 4)}, "m", 8)
    with pytest.raises(ValueError, match="at least one"):
        plots.plot_serving_cost_kv({}, "m", 8)


def test_serving_ratio_pairs_counts_pairs_inside_the_band() -> None:
    # Per chip: GPU 1000 tok/s, TPU 500 tok/s -> ratio = GPU $/h / (2 x TPU $/h).
    # TPU $1: GPU $6 -> 3x (inside), $12 -> 6x (above). TPU $2: $6 -> 1.5x, $12 -> 3x (inside).
    fig = plots.plot_serving_ratio_pairs({"page A": 1.0, "page B": 2.0}, {"X": 6.0, "Y": 12.0},
                                         1000.0, 500.0, "TPU v5e")
    (ax,) = fig.axes
    assert ax.get_title() == "2 of 4 published price pairs fall inside the claimed 2-4x (tokens/s modelled, not measured)"
    dots = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
    assert [list(ln.get_ydata()) for ln in dots] == [[3.0, 6.0], [1.5, 3.0]]
    assert _shown(ax.get_legend().get_texts()[1].get_text()) == "TPU v5e at $1.00/h (page A)"
    measured = plots.plot_serving_ratio_pairs({"A": 1.0}, {"X": 6.0}, 1000.0, 500.0, "TPU v5e", modelled=False)
    assert measured.axes[0].get_title() == "1 of 1 published price pairs fall inside the claimed 2-4x"
    with pytest.raises(ValueError, match="at least one TPU price"):
        plots.plot_serving_ratio_pairs({}, {"X": 1.0}, 1.0, 1.0, "t")


def test_serving_ratio_pairs_merges_labels_of_near_prices() -> None:
    fig = plots.plot_serving_ratio_pairs({"A": 1.0}, {"RunPod $2.69": 2.69, "RunPod $2.79": 2.79, "AWS $12.29": 12.29},
                                         1000.0, 500.0, "TPU v5e")
    texts = [_shown(t.get_text()) for t in fig.axes[0].texts]
    assert texts == ["RunPod $2.69 / RunPod $2.79", "AWS $12.29"]  # 2.79 is within 5% of 2.69: one label


def test_serving_cost_kv_bands_over_listed_prices() -> None:
    curves = {"NVIDIA H100 SXM": ([1, 256], [2.0, 0.05], 256), "TPU v5e": ([1, 94], [1.0, 0.04], 94)}
    # v5e listed at $1-5: its dearest cap cost (0.20) is above the H100's cheapest (0.05): no single winner
    fig = plots.plot_serving_cost_kv(curves, "m", 8, {"NVIDIA H100 SXM": (2.0, 3.0), "TPU v5e": (1.0, 5.0)})
    assert fig.axes[0].get_title().endswith("no chip is cheapest at every listed price")
    assert _shown(fig.axes[0].get_legend().get_texts()[1].get_text()).startswith("TPU v5e at $1.00-5.00/chip-h")
    assert fig.axes[0].get_legend().get_title().get_text() == "line: cheapest listed price; band: up to the dearest"
    fig = plots.plot_serving_cost_kv(curves, "m", 8, {"NVIDIA H100 SXM": (2.0, 3.0), "TPU v5e": (1.0, 1.1)})
    assert _shown(fig.axes[0].get_title()).endswith("on TPU v5e at every listed price ($0.04-0.044/Mtok)")
