"""labkit.measure.roofline: closed forms, measured points vs numpy, and the plot."""

from __future__ import annotations

import numpy as np
import pytest

from labkit.measure import roofline


def test_matmul_flops_and_bytes_closed_form() -> None:
    # Count MACs by brute force for a tiny case: every (i, j, l) triple is one multiply + one add.
    m, n, k = 3, 5, 7
    macs = sum(1 for _ in np.ndindex(m, n, k))
    assert roofline.matmul_flops(m, n, k) == 2 * macs
    assert roofline.matmul_bytes(m, n, k, 2) == 2 * (m * k + k * n + m * n)


def test_ridge_and_attainable() -> None:
    peak, bw = 989e12, 3.35e12  # H100 SXM bf16, bytes/s
    r = roofline.ridge_point(peak, bw)
    assert r == pytest.approx(295.2, rel=1e-3)
    assert roofline.attainable(r / 10, peak, bw) == pytest.approx(peak / 10)
    assert roofline.attainable(r * 10, peak, bw) == pytest.approx(peak)
    with pytest.raises(ValueError, match="positive"):
        roofline.ridge_point(0, bw)


def test_square_matmul_intensity_approaches_n_over_3_for_bf16() -> None:
    for n in (1024, 8192):
        ai = roofline.matmul_flops(n, n, n) / roofline.matmul_bytes(n, n, n, 2)
        assert ai == pytest.approx(n / 3)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_measured_matmul_points(dtype: str) -> None:
    pj = roofline.matmul_jax(64, 48, 32, dtype, repeats=2)
    pt = roofline.matmul_torch(64, 48, 32, dtype, repeats=2)
    for p in (pj, pt):
        assert p.flops == 2 * 64 * 48 * 32
        assert p.bytes == (64 * 32 + 32 * 48 + 64 * 48) * roofline.BYTES[dtype]
        assert p.intensity == pytest.approx(p.flops / p.bytes)
        assert p.flops_per_s == pytest.approx(p.flops / p.timing.median_s)
        assert p.fastest_flops_per_s == pytest.approx(p.flops / min(p.timing.times_s))
        assert p.fastest_flops_per_s >= p.flops_per_s


def test_stream_counts_read_plus_write() -> None:
    n = 1 << 16
    for p in (roofline.stream_jax(n, repeats=2), roofline.stream_torch(n, repeats=2)):
        assert p.bytes == 2 * 4 * n
        assert p.bytes_per_s == pytest.approx(p.bytes / p.timing.median_s)


def test_ops_intensities() -> None:
    add = roofline.add_jax(1000, repeats=2)
    sm = roofline.softmax_jax(8, 16, repeats=2)
    assert add.intensity == pytest.approx(1 / 12)
    assert sm.intensity == pytest.approx(5 / 8)


def test_best_and_errors() -> None:
    pts = roofline.matmul_sweep("jax", [16, 64], "fp32", repeats=2)
    assert roofline.best(pts) is max(pts, key=lambda p: p.flops_per_s)
    with pytest.raises(ValueError, match="no measurements"):
        roofline.best([])
    with pytest.raises(ValueError, match="framework"):
        roofline.matmul_sweep("tensorflow", [16], "fp32")
    with pytest.raises(ValueError, match="fp32, bf16, fp16"):
        roofline.matmul_jax(8, 8, 8, "fp8")
    with pytest.raises(ValueError, match="fp32, bf16, fp16"):
        roofline.matmul_torch(8, 8, 8, "int4")


def test_plot_roofline_draws_ceiling_and_points() -> None:
    import matplotlib

    matplotlib.use("Agg")
    pts = [roofline.add_jax(1000, repeats=2)]
    ax = roofline.plot_roofline(1e12, 1e11, pts, spec_peak_flops=2e12, spec_bandwidth=2e11, title="t")
    lines = ax.get_lines()
    measured = lines[0]
    x, y = measured.get_data()
    np.testing.assert_allclose(y * 1e12, np.minimum(1e12, x * 1e11))
    assert ax.get_title() == "t" and ax.get_xscale() == "log"
