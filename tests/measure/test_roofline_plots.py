"""labkit.measure.roofline_plots (Lab 00): each picture is titled from the numbers it was given."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from labkit.measure import roofline, roofline_plots  # noqa: E402
from labkit.measure.bench import Timing  # noqa: E402
from labkit.runtime import hardware  # noqa: E402


@pytest.fixture(autouse=True)
def _close() -> None:
    yield
    plt.close("all")


def _matmul(n: int, seconds: float, fw: str = "jax", dtype: str = "bf16") -> roofline.OpPoint:
    return roofline.OpPoint(f"matmul {n}x{n}x{n}", fw, dtype, roofline.matmul_flops(n, n, n),
                            roofline.matmul_bytes(n, n, n, 2), Timing((seconds,) * 3, 1))


def test_matmul_sweep_title_compares_each_frameworks_smallest_with_best() -> None:
    # 2 * 1024^3 FLOP in 1 ms = 2.15 TFLOP/s; 2 * 256^3 in 0.1 ms = 0.34 TFLOP/s -> 16%; torch's in 0.2 ms -> 7.8%
    sweeps = {("jax", "bf16"): [_matmul(256, 1e-4), _matmul(1024, 1e-3)],
              ("torch", "bf16"): [_matmul(256, 2e-4, "torch")],
              ("torch", "fp32"): [_matmul(256, 4e-4, "torch", "fp32")]}  # torch's slower dtype: not its figure
    ax = roofline_plots.plot_matmul_sweep(sweeps, "chip X", 4e12, "bf16").axes[0]
    assert ax.get_title() == "chip X: n=256 reaches 16% (jax bf16), 7.8% (torch bf16)\nof the best (jax bf16, n=1024)"
    noisy = roofline.OpPoint("matmul 256x256x256", "jax", "bf16", roofline.matmul_flops(256, 256, 256),
                             roofline.matmul_bytes(256, 256, 256, 2), Timing((5e-5, 1e-4, 2e-4), 1))  # IQR/median 0.75
    sweeps[("jax", "bf16")][0] = noisy
    title = roofline_plots.plot_matmul_sweep(sweeps, "chip X", 4e12, "bf16").axes[0].get_title()
    assert title == ("chip X: n=256 reaches 16% (jax bf16), 7.8% (torch bf16)\n"
                     "of the best (jax bf16, n=1024); jax bf16 n=256 noisy: rerun")
    # Where a framework's fp32 is its faster point at the smallest size, the title names fp32, not only "torch".
    sweeps[("torch", "fp32")][0] = _matmul(256, 1e-4, "torch", "fp32")  # 0.34 TFLOP/s, over torch bf16's 0.17
    title = roofline_plots.plot_matmul_sweep(sweeps, "chip X").axes[0].get_title()
    assert title.startswith("chip X: n=256 reaches 16% (jax bf16), 16% (torch fp32)\n")
    assert len(ax.get_lines()) == 4  # three sweeps and the spec line
    assert ax.get_lines()[-1].get_ydata()[0] == pytest.approx(4.0)  # TFLOP/s


def test_roofline_draws_ceiling_and_titles_each_ops_bound() -> None:
    big = _matmul(1024, 1e-3)
    add = roofline.OpPoint("elementwise add", "jax", "fp32", 1e6, 12e6, Timing((2e-4,) * 3, 1))
    tiny = _matmul(16, 3e-5)  # within 2x the 20 µs a call costs: the call's fixed cost
    slow = _matmul(32, 9e-5)  # its roofline time is under 20 µs too, but it took 4.5x that: its kernel
    ax = roofline_plots.plot_roofline(2.2e12, 6e10, [big, add, tiny, slow], 4e12, 1e11, chip="chip X", overhead_s=2e-5)
    x, y = ax.get_lines()[0].get_data()
    np.testing.assert_allclose(y * 1e12, np.minimum(2.2e12, x * 6e10))
    assert ax.get_title() == "chip X: 1 compute-bound, 1 memory-bound, 1 overhead-bound, 1 kernel-bound"
    labels = ax.get_legend_handles_labels()[1]
    assert labels[-4:] == ["matmul 1024x1024x1024 (jax, bf16): compute-bound", "elementwise add (jax, fp32): memory-bound",
                           "matmul 16x16x16 (jax, bf16): overhead-bound", "matmul 32x32x32 (jax, bf16): kernel-bound"]
    # Lab 00 passes the big matmul's own FLOP/s as the peak: at 100% of its ceiling by construction, it "sets the peak".
    ax = roofline_plots.plot_roofline(big.flops_per_s, 6e10, [big, add, tiny, slow], chip="chip X", overhead_s=2e-5)
    assert ax.get_title() == "chip X: 1 sets the peak, 1 memory-bound, 1 overhead-bound, 1 kernel-bound"
    assert ax.get_legend_handles_labels()[1][-4] == "matmul 1024x1024x1024 (jax, bf16): sets the peak"
    # A matvec left of the ridge at 5% of the memory roof: the roof applies, something else limits it (the CPU run)
    matvec = roofline.OpPoint("matvec", "jax", "bf16", 2e6, 2e6, Timing((2e-3,) * 3, 1))  # 1 GB/s of a 60 GB/s roof
    ax = roofline_plots.plot_roofline(2.2e12, 6e10, [big, add, matvec], chip="chip X", overhead_s=2e-5)
    assert ax.get_title() == "chip X: 1 compute-bound, 1 memory-bound, 1 under the memory roof"
    assert roofline_plots.describe_bound("memory", 0.05) == "under the memory roof"
    assert roofline_plots.describe_bound("memory", 0.3) == "memory-bound"
    assert roofline_plots.describe_bound("kernel", 0.01) == "kernel-bound"  # already says what limits it
    for kind, share in (("foo", 0.5), (None, 0.5), ("memory", float("nan")), ("memory", -1.0), ("memory", "0.5")):
        with pytest.raises(ValueError, match="kind must be one of|of_roof must be a finite share"):
            roofline_plots.describe_bound(kind, share)
    assert ax.get_xscale() == "log"


def test_percent_keeps_a_tiny_share_readable() -> None:
    assert roofline_plots.percent(0.0009252) == "0.093%"  # a 256^3 matmul's share of an H100's best: not "0%"
    assert roofline_plots.percent(0.078) == "7.8%" and roofline_plots.percent(0.82) == "82%"
    assert roofline_plots.percent(0.0) == "0%"


def test_roofline_legend_sits_below_the_axes_clear_of_every_point() -> None:
    # An H100's five ops: the legend inside the axes (lower right) hid the 256^3 matmul, the overhead-bound point.
    ops = [_matmul(8192, 1.478e-3), _matmul(256, 4.88e-5),
           roofline.OpPoint("elementwise add", "jax", "fp32", 2.7e8, 3.2e9, Timing((1.07e-3,) * 3, 1))]
    ax = roofline_plots.plot_roofline(7.4e14, 3.05e12, ops, 9.89e14, 3.35e12, chip="chip X", overhead_s=3.96e-5)
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend, axes = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
    assert legend.y1 < axes.y0  # wholly below the axes: it covers no point
    assert legend.y0 >= 0 and legend.x0 >= 0 and legend.x1 <= fig.bbox.x1  # and inside the figure
    mine = plt.subplots()[1]  # a caller's axes: drawn on, its figure's layout left alone
    assert roofline_plots.plot_roofline(7.4e14, 3.05e12, ops, ax=mine) is mine


def test_measured_vs_spec_title_gives_ratios() -> None:
    rows = [{"figure": "matmul bf16 TFLOP/s", "measured": 750.0, "spec": 989.0},
            {"figure": "bandwidth GB/s", "measured": 2479.0, "spec": 3350.0}]
    ax = roofline_plots.plot_measured_vs_spec(rows).axes[0]
    assert ax.get_title() == "measured / spec: matmul bf16 TFLOP/s 76%, bandwidth GB/s 74%"
    assert len(ax.patches) == 4
    cpu = roofline_plots.plot_measured_vs_spec([{"figure": "bandwidth GB/s", "measured": 20.0, "spec": None}])
    assert cpu.axes[0].get_title() == "measured (no spec for this chip)"


def test_chip_rooflines_title_spans_the_spec_ridges() -> None:
    chips = hardware.table(hardware.learner_chips())
    ridges = {r["name"]: r["ridge FLOP/byte"] for r in chips}
    ax = roofline_plots.plot_chip_rooflines(chips, 1e12, 2e10, "fp32").axes[0]
    lo, hi = min(ridges, key=ridges.get), max(ridges, key=ridges.get)
    assert f"from {ridges[lo]:.0f} FLOP/B" in ax.get_title() and f"to {ridges[hi]:.0f}" in ax.get_title()
    assert len(ax.get_lines()) == len(chips) + 1


# Lab 00 on the H100, 2026-11-27 (benchmarks/nvidia-h100-80gb-hbm3/2026-11-27/00_know_your_accelerator.ipynb):
# the sweep's median seconds per call, the measured peak (JAX bf16 at 8192), bandwidth and fixed cost of a JAX call.
H100_SWEEP_S = {("jax", "bf16"): (45.3e-6, 186.4e-6, 1.478e-3), ("torch", "bf16"): (28.17e-6, 198.9e-6, 1.637e-3),
                ("jax", "fp32"): (351e-6, 2.736e-3, 21.85e-3), ("torch", "fp32"): (345.2e-6, 2.684e-3, 21.5e-3)}
H100_PEAK, H100_BW, H100_CALL_S = 743.8e12, 3055e9, 39.6e-6


def _h100_sweeps() -> dict:
    return {(fw, dt): [_matmul(n, s, fw, dt) for n, s in zip((2048, 4096, 8192), secs)]
            for (fw, dt), secs in H100_SWEEP_S.items()}


def test_past_the_ridge_the_h100s_jax_2048_is_overhead_bound() -> None:
    # Issue: the run printed "jax n=2048 51% ... past the ridge is where compute can bind": its call took 45.3 us
    # against JAX's 39.6 us fixed cost and a 23 us roofline time, overhead-bound by section 4's own rule.
    sweeps = _h100_sweeps()
    best = sweeps[("jax", "bf16")][2]
    ridge = roofline.ridge_point(H100_PEAK, H100_BW)
    past = [(fw, p) for (fw, d), pts in sweeps.items() if d == "bf16"
            for p in pts if p.intensity > ridge and p is not best]
    p2048 = past[0][1]
    assert roofline.roofline_time(p2048.flops, p2048.bytes, H100_PEAK, H100_BW) == pytest.approx(23.1e-6, rel=0.01)
    lines = roofline_plots.describe_past_ridge(past, H100_PEAK, H100_BW, {"jax": H100_CALL_S})
    assert lines == [
        "overhead-bound (roofline time under a call's fixed cost, the call within 2x it: the fixed cost, not compute, "
        "is most of the time): jax n=2048 51% (its call 1.1x the 39.6 µs fixed cost)",
        "compute-bound (where compute binds): jax n=4096 99%, torch n=2048 82%, torch n=4096 93%, torch n=8192 90%",
        "the compute-bound ones reached 82% to 99% of the peak: past the ridge is where compute can bind, not where "
        "a matmul runs at peak",
        "torch: classed by intensity alone (no fixed cost per call timed for it here)"]
    # Without the fixed cost, intensity alone calls all five compute-bound (the run's old reading).
    assert roofline_plots.describe_past_ridge(past, H100_PEAK, H100_BW, {"jax": 0.0, "torch": 0.0})[0].startswith(
        "compute-bound (where compute binds): jax n=2048 51%, jax n=4096 99%")
    slow = [("jax", _matmul(2048, 200e-6))]  # the same roofline time, a call over 2x the fixed cost: the kernel
    assert roofline_plots.describe_past_ridge(slow, H100_PEAK, H100_BW, {"jax": H100_CALL_S})[0].startswith(
        "kernel-bound")


def test_matmul_sweep_uses_a_log_axis_so_fp32_reads_beside_bf16() -> None:
    # The H100's fp32 curves (~50 TFLOP/s) lay flat under bf16's 379-744 on a linear 0-1000 axis.
    ax = roofline_plots.plot_matmul_sweep(_h100_sweeps(), "NVIDIA H100 80GB HBM3", 989e12, "bf16").axes[0]
    assert ax.get_yscale() == "log" and ax.get_xscale() == "log"
    lo, hi = ax.get_ylim()
    assert lo < 45 and hi > 989  # every curve and the spec line inside the axes
    fp32 = [ln for ln in ax.get_lines() if ln.get_label().endswith("fp32")]
    assert len(fp32) == 2 and all(40 < y < 60 for ln in fp32 for y in ln.get_ydata())
    ax.figure.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if lo <= t.get_position()[1] <= hi]
    assert "50" in labels and "500" in labels  # plain numbers at 1, 2 and 5 per decade, not only 10^2, 10^3
    # A CPU's curves close together (0.6-0.9 TFLOP/s) still get two labelled ticks.
    cpu = roofline_plots.plot_matmul_sweep({("jax", "fp32"): [_matmul(256, 2 * 256**3 / 0.6e12, dtype="fp32"),
                                                              _matmul(512, 2 * 512**3 / 0.9e12, dtype="fp32")]},
                                           "a CPU").axes[0]
    cpu.figure.canvas.draw()
    lo, hi = cpu.get_ylim()
    assert len([t for t in cpu.get_yticklabels() if lo <= t.get_position()[1] <= hi and t.get_text()]) >= 2


# Lab 00 on this course's 2-core CPU VM (AMD EPYC, smoke profile, bf16): the sweep's median seconds per call. torch's
# 1024^3 in 5.341 ms set the peak (0.402 TFLOP/s); JAX's bf16 kernels reached 43% of it at best, the 256^3 one noisy.
CPU_SWEEP_S = {("jax", 256): 0.6684e-3, ("jax", 512): 1.766e-3, ("jax", 1024): 12.36e-3,
               ("torch", 256): 0.1109e-3, ("torch", 512): 0.6882e-3}
CPU_PEAK, CPU_BW, CPU_CALL_S = 2 * 1024**3 / 5.341e-3, 75.9e9, 22.9e-6


def test_past_the_ridge_on_a_cpu_a_12_percent_matmul_is_under_the_compute_roof() -> None:
    # Issue: the run called every point right of the ridge "compute-bound", jax n=256 at 12% of the peak among them,
    # where section 4's rule (under 30% of the roof) says "under the compute roof"; and JAX's 38-43% read as far
    # from a peak that was torch's, while they were 87-100% of JAX's own best.
    pts = [(fw, _matmul(n, s, fw)) for (fw, n), s in CPU_SWEEP_S.items()]
    pts[0] = ("jax", roofline.OpPoint("matmul 256x256x256", "jax", "bf16", roofline.matmul_flops(256, 256, 256),
                                      roofline.matmul_bytes(256, 256, 256, 2),
                                      Timing((0.30e-3, 0.40e-3, 0.6684e-3, 2.40e-3, 2.7542e-3), 1)))
    assert round(pts[0][1].timing.spread, 2) == 3.33 and pts[0][1].timing.median_s == 0.6684e-3
    assert CPU_PEAK == pytest.approx(0.402e12, rel=1e-3)
    own = {"jax": pts[2][1].flops_per_s, "torch": CPU_PEAK}  # FLOP/s: JAX's best bf16 matmul is its 1024^3
    lines = roofline_plots.describe_past_ridge(pts, CPU_PEAK, CPU_BW, {"jax": CPU_CALL_S}, own_best=own)
    assert lines == [
        "under the compute roof (past the ridge yet under 30% of the peak, so something the roofline does not draw "
        "limits it, such as its kernel at this size or the library): jax n=256 12% (29% of jax's own best; "
        "noisy: IQR/median 3.33)",
        "compute-bound (where compute binds): jax n=512 38% (87% of jax's own best), jax n=1024 43% (100% of jax's "
        "own best), torch n=256 75%, torch n=512 97%",
        "the compute-bound ones reached 38% to 97% of the peak: past the ridge is where compute can bind, not where "
        "a matmul runs at peak; the spread mixes sizes and libraries: of its own best, jax's reached 87% to 100%, "
        "torch's 75% to 97%",
        "torch: classed by intensity alone (no fixed cost per call timed for it here)"]
    # Without own_best: the same classes, no own-best shares; the noisy flag stays.
    plain = roofline_plots.describe_past_ridge(pts, CPU_PEAK, CPU_BW, {"jax": CPU_CALL_S})
    assert plain[0].endswith("jax n=256 12% (noisy: IQR/median 3.33)")
    assert plain[1] == "compute-bound (where compute binds): jax n=512 38%, jax n=1024 43%, torch n=256 75%, torch n=512 97%"
    assert plain[2].endswith("not where a matmul runs at peak")
    with pytest.raises(ValueError, match="own_best must map"):
        roofline_plots.describe_past_ridge(pts, CPU_PEAK, CPU_BW, {"jax": CPU_CALL_S}, own_best={"jax": 0.0})


def test_read_gap_explanation_follows_the_winning_probe() -> None:
    # The CPU run: JAX's in-place stream won at 75.9 GB/s, the best read probe 28.0 GB/s. "Streaming stores that
    # skip write-allocate" cannot explain an in-place probe: it stores onto the lines it has just read.
    in_place = roofline_plots.describe_read_gap("stream in place", 28.02e9, False)
    assert in_place == (
        "the best read probe reached 28.0 GB/s, below the stream in place probe. That probe's stores land on cache "
        "lines it has just read, so write-allocate (a store first reading its line) is not the reason. A hypothesis "
        "to test (e.g. with a profiler's memory counters, or both probes pinned to one core), not a measurement: a "
        "read-only reduction's loop is one accumulation chain, and how many cache misses a core keeps in flight on "
        "it can cap a read pass below a read+write pass")
    assert "streaming stores" not in roofline_plots.describe_read_gap("add in place", 28.02e9, True)
    assert roofline_plots.describe_read_gap("add in place", 28.02e9, True).endswith("; or noise (flagged above)")
    assert roofline_plots.describe_read_gap("copy", 25.86e9, True) == (
        "the best read probe reached 25.9 GB/s, below the copy probe. Possible causes: streaming stores that skip "
        "write-allocate (a store first reading its line), so the probe moves only the bytes counted; a read loop on "
        "fewer cores; or noise (flagged above)")
    for kind, bps in (("read", 1e9), ("stream 128 MiB", 1e9), ("stream", 0.0), ("stream", float("nan"))):
        with pytest.raises(ValueError, match="winner_kind must be|best_read_bps must be"):
            roofline_plots.describe_read_gap(kind, bps, False)


def test_matvec_dtype_says_whether_bf16s_path_limits_the_matvec() -> None:
    # The CPU run: JAX's bf16 (1,4096)@(4096,4096) matvec took 42.6 ms a call, the same in fp32 4.7 ms.
    assert roofline_plots.describe_matvec_dtype("bf16", 42.6e-3, 4.7e-3) == (
        "the same matvec in fp32 took 4.7 ms a call, bf16's 42.6 ms: fp32 9.1x faster while moving twice the bytes "
        "-> the bf16 matvec is limited by the library's bf16 matvec path, not by memory")
    # Memory-bound in both: fp32 moves twice the bytes and takes about twice as long.
    assert roofline_plots.describe_matvec_dtype("bf16", 2.1e-3, 4.2e-3).endswith(
        "fp32 2x slower while moving twice the bytes -> not the dtype: whatever keeps the bf16 matvec under the "
        "memory roof holds fp32's too")
    assert "under 2x in time" in roofline_plots.describe_matvec_dtype("bf16", 6e-3, 4e-3)  # fp32 1.5x faster
    with pytest.raises(ValueError, match="fp32_s must be"):
        roofline_plots.describe_matvec_dtype("bf16", 1e-3, 0.0)
