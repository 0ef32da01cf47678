"""labkit.measure.plots (Lab 02): each picture carries the numbers it was given, with units."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from labkit.measure import breakdown, mfu, plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close() -> None:
    yield
    plt.close("all")


def test_timing_mistakes_counts_too_fast_and_too_slow() -> None:
    reported = {("jax", "correct: median"): 0.010, ("jax", "no block_until_ready"): 0.001,
                ("jax", "timed the first calls (compile)"): 0.500, ("torch", "correct: median"): 0.020,
                ("torch", "no synchronize"): 0.0186}  # 0.93x: within ±20%, so grey and not counted as a mistake
    ax = plots.plot_timing_mistakes(reported, {"jax": 0.010, "torch": 0.020}).axes[0]
    assert ax.get_title().startswith("Timing mistakes: 1 report too fast, 1 too slow, 1 within ±20%")
    # With this run's own noise as the band (Lab 02 passes the step's spread tolerance), a 1.21x is not "too slow".
    noisy = {**reported, ("jax", "timed the first calls (compile)"): 0.0121}
    wide = plots.plot_timing_mistakes(noisy, {"jax": 0.010, "torch": 0.020}, near=0.25).axes[0]
    assert wide.get_title().startswith("Timing mistakes: 1 report too fast, 0 too slow, 2 within ±25%")
    assert "ms" in ax.get_xlabel() and len(ax.patches) == 5
    assert [round(p.get_width(), 6) for p in ax.patches] == [10.0, 1.0, 500.0, 20.0, 18.6]  # ms
    jax_c, torch_c, grey = (to_rgba(c) for c in (plots.FRAMEWORK_COLORS["jax"], plots.FRAMEWORK_COLORS["torch"],
                                                 "lightgray"))
    assert [p.get_facecolor() for p in ax.patches] == [jax_c, jax_c, jax_c, torch_c, grey]  # colour per framework
    lines = [ln for ln in ax.get_lines() if ln.get_linestyle() == ":"]  # each framework's correct step, labelled
    assert [ln.get_color() for ln in lines] == [plots.FRAMEWORK_COLORS[fw] for fw in ("jax", "torch")]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["jax: correct step (10 ms)",
                                                                 "torch: correct step (20 ms)"]
    assert ax.get_legend().get_bbox_to_anchor().y0 < ax.get_window_extent().y0  # below the bars, never over a label


def test_timing_mistakes_take_one_noise_band_per_framework() -> None:
    """Lab 02 passes each real step's own tolerance: the grey bars and the printed verdicts use one band, not two."""
    reported = {("jax", "correct"): 0.010, ("jax", "no block_until_ready"): 0.0011,
                ("jax", "data loading in the loop"): 0.0115,  # 1.15x: within jax's ±16%
                ("torch", "correct"): 0.020, ("torch", "no synchronize"): 0.0204,  # 1.02x: within torch's ±5%
                ("torch", "timed the first calls"): 0.0212}  # 1.06x: beyond torch's ±5%, so too slow
    ax = plots.plot_timing_mistakes(reported, {"jax": 0.010, "torch": 0.020}, near={"jax": 0.16, "torch": 0.05}).axes[0]
    assert ax.get_title() == ("Timing mistakes: 1 report too fast, 1 too slow, 2 within each step's noise, "
                              "jax ±16%, torch ±5% (grey)")
    grey = to_rgba("lightgray")
    assert [p.get_facecolor() == grey for p in ax.patches] == [False, False, True, False, True, False]


def _u(value: float, step_ms: float, tokens: int = 4096) -> mfu.Utilization:
    """A utilization of `value` at `step_ms` against a 1 PFLOP/s explicit peak."""
    return mfu.mfu(value * 1e15 * step_ms / 1e3, step_ms / 1e3, chip="chip", dtype="bf16", peak_tflops=1000,
                   tokens=tokens)


def _same(step_ms: float, dtype: str = "bf16", spread: float | None = None) -> mfu.Utilization:
    """One step's FLOPs (as the lab's precision pair has: same model, two dtypes) timed at `step_ms`."""
    from dataclasses import replace

    u = mfu.mfu(1e12, step_ms / 1e3, chip="chip", dtype=dtype, peak_tflops=1000, tokens=4096)
    return replace(u, spread=spread)


def test_mfu_sweeps_carry_gains_and_step_times() -> None:
    precision = {("jax", "bf16"): _u(0.24, 36.0), ("torch", "bf16"): _u(0.3, 30.0),
                 ("jax", "fp32"): _u(0.58, 400.0), ("torch", "fp32"): _u(0.5, 450.0)}  # each vs its own peak
    compiled = {"jax jit": _u(0.3, 36.0), "torch eager": _u(0.2, 50.0), "torch.compile": _u(0.5, 20.0)}
    fig = plots.plot_mfu_sweeps((1, 8), {"jax": [_u(0.1, 4.0), _u(0.3, 10.0)], "torch": [_u(0.1, 4.0), _u(0.5, 8.0)]},
                                (16, 64), {"jax": [_u(0.2, 5.0), _u(0.3, 20.0)], "torch": [_u(0.2, 5.0), _u(0.4, 18.0)]},
                                precision, compiled, "vs spec bf16 peak", "chip")
    a, b, c, d = fig.axes
    assert a.get_title() == "Bigger batches amortize overhead: MFU x3.00 (jax), x5.00 (torch)" and "MFU %" in a.get_ylabel()
    assert len(a.get_lines()) == 2 and "batch size" in a.get_xlabel() and "tokens" in b.get_xlabel()
    assert [t.get_text() for t in a.texts] == ["4 ms", "10 ms", "4 ms", "8 ms"]  # each point's step time
    assert [t.get_horizontalalignment() for t in a.texts] == ["left", "right"] * 2  # the last label stays inside
    assert b.get_title() == "Longer sequences: MFU x1.5 (jax), x2.0 (torch)\n(and x4 tokens per step)"
    assert len(c.patches) == 4  # one bar per (framework, dtype)
    # fp32 has the higher MFU (against its own, 15x lower peak) but bf16 has the faster step: the title says so.
    assert c.get_title() == "Faster step: bf16 x11.11 (jax), bf16 x15.00 (torch)"
    assert "400 ms/step" in [t.get_text().split("\n")[0] for t in c.texts]
    assert d.get_title() == "Compilation: torch.compile step x2.50 faster than eager" and len(d.patches) == 3
    jax_c, torch_c = (to_rgba(plots.FRAMEWORK_COLORS[fw]) for fw in ("jax", "torch"))
    assert [p.get_facecolor() for p in d.patches] == [jax_c, torch_c, torch_c]  # coloured by framework
    assert c.get_ylabel() == "MFU % (vs the peak of that dtype)"
    assert "20 ms/step\n205k tok/s" in [t.get_text() for t in d.texts]  # 4096 tokens / 20 ms
    assert fig._suptitle.get_text() == "chip"
    flat = plots.plot_mfu_sweeps((1, 8), {"jax": [_u(0.2, 4.0), _u(0.19, 34.0)], "torch": [_u(0.1, 4.0), _u(0.3, 11.0)]},
                                 (16, 64), {"jax": [_u(0.2, 5.0), _u(0.3, 20.0)], "torch": [_u(0.2, 5.0), _u(0.4, 18.0)]},
                                 precision, compiled, "vs spec bf16 peak", "chip")
    assert flat.axes[0].get_title() == "Batch size: MFU x0.95 (jax), x3.00 (torch)"  # no claim the data refutes
    # A TPU runtime without torch-xla: torch ran on the host CPU, so the lab passes JAX alone.
    tpu = plots.plot_mfu_sweeps((1, 8), {"jax": [_u(0.1, 4.0), _u(0.3, 10.0)]}, (16, 64), {"jax": [_u(0.2, 5.0), _u(0.3, 20.0)]},
                                {k: v for k, v in precision.items() if k[0] == "jax"}, {"jax jit": _u(0.3, 36.0)},
                                "vs spec bf16 peak", "TPU v5e")
    assert [len(ax.get_lines()) for ax in tpu.axes[:2]] == [1, 1] and len(tpu.axes[2].patches) == 2
    assert tpu.axes[0].get_title().endswith("x3.00 (jax)") and tpu.axes[2].get_title() == "Faster step: bf16 x11.11 (jax)"
    assert tpu.axes[3].get_title() == "jax jit only (torch is not on this chip)"
    assert {p.get_facecolor() for p in tpu.axes[2].patches} == {to_rgba(plots.FRAMEWORK_COLORS["jax"])}  # not torch's
    # A gap within the timing rule's 5% floor (steptime.AGREE_FLOOR) names no winner
    close = {**precision, ("jax", "bf16"): _same(9.8), ("jax", "fp32"): _same(10.18, "fp32")}
    tie = plots.plot_mfu_sweeps((1, 8), {"jax": [_u(0.1, 4.0), _u(0.3, 10.0)]}, (16, 64), {"jax": [_u(0.2, 5.0), _u(0.3, 20.0)]},
                                {k: v for k, v in close.items() if k[0] == "jax"}, {"jax jit": _u(0.3, 36.0)},
                                "vs spec bf16 peak", "CPU")
    assert tie.axes[2].get_title() == "Faster step: no winner, x1.04 within ±5% (jax)"


def test_precision_panel_judges_a_winner_by_the_labs_rule() -> None:
    """The title says no winner exactly where steptime.no_winner (the lab's printed verdict) does, with the band."""
    from labkit.measure import steptime

    fast, slow = _same(8.8, spread=0.08), _same(10.28, "fp32", spread=0.05)  # 1.17x apart, within 2 x 8% = 16%
    fig_pairs = {("jax", "bf16"): fast, ("jax", "fp32"): slow, ("torch", "bf16"): _same(10.0, spread=0.02),
                 ("torch", "fp32"): _same(15.0, "fp32", spread=0.02)}
    assert steptime.no_winner(fast, slow) and not steptime.no_winner(_same(8.8, spread=0.06), _same(10.28, "fp32", spread=0.06))
    fig = plots.plot_mfu_sweeps((1, 8), {"jax": [_u(0.1, 4.0), _u(0.3, 10.0)]}, (16, 64),
                                {"jax": [_u(0.2, 5.0), _u(0.3, 20.0)]}, {("jax", "bf16"): fast, ("jax", "fp32"): slow},
                                {"jax jit": slow, "torch eager": _u(0.2, 9.5)}, "vs measured fp32 peak", "CPU",
                                precision_note="vs each framework's own best matmul of that dtype")
    c, d = fig.axes[2:]
    assert c.get_title() == "Faster step: no winner, x1.17 within ±16% (jax)"
    two = plots.plot_mfu_sweeps((1, 8), {"jax": [_u(0.1, 4.0), _u(0.3, 10.0)]}, (16, 64),
                                {"jax": [_u(0.2, 5.0), _u(0.3, 20.0)]}, fig_pairs, {"jax jit": slow}, "vs x", "CPU")
    assert two.axes[2].get_title() == ("Faster step: no winner, x1.17 within ±16% (jax),\n"
                                       "bf16 x1.50 (torch)")  # too wide for one line: one framework per line
    assert c.get_ylabel() == "MFU % (vs each framework's own best matmul of that dtype)"
    assert d.get_title() == "jax jit vs torch eager: two frameworks, not two modes\n(torch.compile vs eager: full profile)"


def test_training_curves_mark_validation_and_uniform_guess() -> None:
    ls = np.linspace(5.5, 2.0, 50)
    ax = plots.plot_training_curves(ls, ls + 0.01, val=2.3, torch_label="eager").axes[0]
    assert "(5.5 -> 2.3 nats)" in ax.get_title()  # 2.3: the mean of the last 10 steps
    assert "nats" in ax.get_ylabel() and ax.get_xlabel() == "training step"
    star = ax.get_lines()[3]
    assert list(star.get_xdata()) == [49] and list(star.get_ydata()) == [2.3]
    assert ax.get_lines()[2].get_ydata()[0] == pytest.approx(np.log(256))
    # torch not on the chip (a TPU without torch-xla): JAX's curve alone, validated on JAX's model
    alone = plots.plot_training_curves(ls, None, val=2.3, torch_label="", val_of="jax").axes[0]
    assert len(alone.get_lines()) == 3 and alone.get_title() == "JAX learns (5.5 -> 2.3 nats)"
    assert list(alone.get_lines()[2].get_xdata()) == [49]
    assert [t.get_text() for t in alone.get_legend().get_texts()][-1] == "validation (jax): 2.30"


def test_step_time_breakdown_states_matmul_share_and_backward_ratio() -> None:
    ops = breakdown.attribute([("nvjet_sm90_tst_96x128", 6000.0, "aten::mm"),  # µs over 1 step
                               ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop", 1200.0, None),
                               ("multi_tensor_apply_kernel", 4800.0, "aten::_fused_adamw_")])
    phases = {"torch": {"forward": 0.002, "backward": 0.005, "optimizer": 0.001},
              "jax": {"forward": 0.001, "backward": 0.003, "optimizer": -0.0001}}  # a noisy negative phase
    ops_ax, phase_ax = plots.plot_step_time_breakdown(ops, phases, flop_share=0.9649).axes[:2]
    assert ops_ax.get_title() == ("torch: matmul + attention do 96% of the FLOPs\n(XLA's count of the same model), "
                                  "60% of the time")
    no_count = plots.plot_step_time_breakdown(ops, phases)  # a JAX that cannot count every op: no share to print
    assert no_count.axes[0].get_title() == "torch: matmul + attention do most of the FLOPs, 60% of the time"
    assert ops_ax.get_xlabel() == "device time per step (ms, kernels by launching op); 10% by kernel name"
    assert [round(p.get_width(), 6) for p in ops_ax.patches] == [6.0, 4.8, 1.2]  # ms, largest first
    assert phase_ax.get_title() == "backward = 2.5x forward (FLOPs: 2x)" and "ms" in phase_ax.get_xlabel()
    assert len(phase_ax.patches) == 3 * 2  # three phases stacked, one bar per framework
    assert phase_ax.get_legend().get_bbox_to_anchor().y0 < phase_ax.get_window_extent().y0  # below the bars
    widths = [round(p.get_width(), 6) for p in phase_ax.patches]
    assert widths == [2.0, 1.0, 5.0, 3.0, 1.0, 0.0]  # ms; the negative phase is drawn as 0
    cpu = breakdown.OpBreakdown(ops.rows, breakdown.BY_CPU_SELF_TIME)
    assert plots.plot_step_time_breakdown(cpu, phases).axes[0].get_xlabel() == "self CPU time per step (ms)"
    no_kernels = plots.plot_step_time_breakdown(None, phases)  # NoKernelRecords: the phases panel alone
    assert len(no_kernels.axes) == 1 and no_kernels.axes[0].get_title() == "backward = 2.5x forward (FLOPs: 2x)"
    assert [round(p.get_width(), 6) for p in no_kernels.axes[0].patches] == widths
    # torch not on the chip: no torch profile and no torch phases; JAX's phases alone, and the title says whose
    jax_only = plots.plot_step_time_breakdown(None, {"jax": phases["jax"]})
    assert len(jax_only.axes) == 1 and jax_only.axes[0].get_title() == "backward = 3.0x forward (jax) (FLOPs: 2x)"
    with pytest.raises(ValueError, match="no phases to draw"):
        plots.plot_step_time_breakdown(None, {})
