"""labkit.measure.plots (Lab 02): each picture carries the numbers it was given, with units."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from labkit.measure import plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close() -> None:
    yield
    plt.close("all")


def test_timing_mistakes_counts_too_fast_and_too_slow() -> None:
    reported = {("jax", "correct: median"): 0.010, ("jax", "no block_until_ready"): 0.001,
                ("jax", "timed the first calls (compile)"): 0.500, ("torch", "correct: median"): 0.020}
    ax = plots.plot_timing_mistakes(reported, {"jax": 0.010, "torch": 0.020}).axes[0]
    assert ax.get_title().startswith("Timing mistakes: 1 report too fast, 1 too slow")
    assert "ms" in ax.get_xlabel() and len(ax.patches) == 4
    assert [round(p.get_width(), 6) for p in ax.patches] == [10.0, 1.0, 500.0, 20.0]  # ms


def test_mfu_sweeps_titles_carry_the_gains() -> None:
    fig = plots.plot_mfu_sweeps((1, 8), {"jax": [0.1, 0.3], "torch": [0.1, 0.5]}, (16, 64),
                                {"jax": [0.2, 0.3], "torch": [0.2, 0.4]},
                                {("jax", "bf16"): 0.3, ("torch", "bf16"): 0.4},
                                {"jax jit": 0.3, "torch eager": 0.2, "torch.compile": 0.5}, "vs spec bf16 peak", "chip")
    a, b, c, d = fig.axes
    assert "x3.0 or more" in a.get_title() and "MFU %" in a.get_ylabel()
    assert "x1.5 (jax), x2.0 (torch)" in b.get_title()
    assert "torch.compile x2.5 vs eager" in d.get_title() and len(d.patches) == 3
    assert fig._suptitle.get_text() == "chip"


def test_training_curves_mark_validation_and_uniform_guess() -> None:
    ls = np.linspace(5.5, 2.0, 50)
    ax = plots.plot_training_curves(ls, ls + 0.01, val=2.3, torch_label="eager").axes[0]
    assert "(5.5 -> 2.3 nats)" in ax.get_title()  # mean of the last 10 steps and "nats" in ax.get_ylabel()
    star = ax.get_lines()[3]
    assert list(star.get_xdata()) == [49] and list(star.get_ydata()) == [2.3]
    assert ax.get_lines()[2].get_ydata()[0] == pytest.approx(np.log(256))
