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
    assert len(a.get_lines()) == 2 and "batch size" in a.get_xlabel() and "tokens" in b.get_xlabel()
    assert len(c.patches) == 2  # one bar per (framework, dtype)
    assert "x1.5 (jax), x2.0 (torch)" in b.get_title()
    assert "torch.compile x2.5 vs eager" in d.get_title() and len(d.patches) == 3
    assert fig._suptitle.get_text() == "chip"


def test_training_curves_mark_validation_and_uniform_guess() -> None:
    ls = np.linspace(5.5, 2.0, 50)
    ax = plots.plot_training_curves(ls, ls + 0.01, val=2.3, torch_label="eager").axes[0]
    assert "(5.5 -> 2.3 nats)" in ax.get_title()  # 2.3: the mean of the last 10 steps
    assert "nats" in ax.get_ylabel() and ax.get_xlabel() == "training step"
    star = ax.get_lines()[3]
    assert list(star.get_xdata()) == [49] and list(star.get_ydata()) == [2.3]
    assert ax.get_lines()[2].get_ydata()[0] == pytest.approx(np.log(256))


def test_step_time_breakdown_states_matmul_share_and_backward_ratio() -> None:
    ops = [{"category": "matmul", "ms per step": 6.0, "share": 0.5},
           {"category": "attention (SDPA)", "ms per step": 1.2, "share": 0.1},
           {"category": "optimizer + grad clip", "ms per step": 4.8, "share": 0.4}]
    phases = {"torch": {"forward": 0.002, "backward": 0.005, "optimizer": 0.001},
              "jax": {"forward": 0.001, "backward": 0.003, "optimizer": -0.0001}}  # a noisy negative phase
    ops_ax, phase_ax = plots.plot_step_time_breakdown(ops, phases).axes[:2]
    assert ops_ax.get_title() == "torch: matmul + attention do all the FLOPs, 60% of the time"
    assert "ms" in ops_ax.get_xlabel() and len(ops_ax.patches) == 3
    assert phase_ax.get_title() == "backward = 2.5x forward (FLOPs: 2x)" and "ms" in phase_ax.get_xlabel()
    assert len(phase_ax.patches) == 3 * 2  # three phases stacked, one bar per framework
    widths = [round(p.get_width(), 6) for p in phase_ax.patches]
    assert widths == [2.0, 1.0, 5.0, 3.0, 1.0, 0.0]  # ms; the negative phase is drawn as 0
