"""Lab 00's pictures: the matmul sweep, this device's roofline, measured vs spec, the learner chips.

One function per picture; each takes what its cell measured and returns the Figure, titled from
those numbers (never a sentence fixed in advance). The cell keeps the assertions.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from labkit.measure.roofline import OpPoint, attainable, bound_by, ridge_point


REACHED = 0.3  # an op under 30% of the roof over it is limited by something the roofline does not draw
BOUNDS = ("compute", "memory", "overhead", "kernel")  # labkit.measure.roofline.bound_by's classes


def describe_bound(kind: str, of_roof: float) -> str:
    """(Lab 00) "memory-bound", or "under the memory roof" when the op reached under 30% of it.

    ``kind`` is :func:`labkit.measure.roofline.bound_by`'s class, ``of_roof`` the op's FLOP/s over its ceiling:
    the roof left of the ridge *applies* to a 5% matvec, but something else (its kernel, a core count) limits it.
    """
    if kind not in BOUNDS:
        raise ValueError(f"kind must be one of {BOUNDS} (roofline.bound_by's classes), got {kind!r}")
    if isinstance(of_roof, bool) or not isinstance(of_roof, (int, float)) or not (of_roof >= 0 and np.isfinite(of_roof)):
        raise ValueError(f"of_roof must be a finite share >= 0 (the op's FLOP/s over its ceiling), got {of_roof!r}")
    if kind in ("memory", "compute") and of_roof < REACHED:
        return f"under the {kind} roof"
    return f"{kind}-bound"


def percent(share: float) -> str:
    """(Lab 00) A share as a percent: whole percents from 10%, two significant digits below ("0.094%", not "0%")."""
    return f"{share:.0%}" if share >= 0.1 else f"{100 * share:.2g}%"


def square_size(p: OpPoint) -> int:
    """(Lab 00) n of a square "matmul n x n x n" point."""
    return int(p.name.split()[1].split("x")[0])


def plot_matmul_sweep(sweeps: Mapping[tuple[str, str], Sequence[OpPoint]], chip: str,
                      spec_peak_flops: float | None = None, spec_dtype: str = "") -> Figure:
    """Achieved TFLOP/s against square matmul size, per (framework, dtype); spec peak dotted (Lab 00)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for (fw, dt), pts in sweeps.items():
        ax.plot([square_size(p) for p in pts], [p.flops_per_s / 1e12 for p in pts], "o-" if fw == "jax" else "s--",
                label=f"{fw} {dt}")
    if spec_peak_flops:
        ax.axhline(spec_peak_flops / 1e12, color="k", ls=":", label=f"spec {spec_dtype} peak")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("matrix size n  (n x n @ n x n)")
    ax.set_ylabel("TFLOP/s (median repeat)")
    pts = [p for ps in sweeps.values() for p in ps]
    best = max(pts, key=lambda p: p.flops_per_s)
    n_small = min(square_size(p) for p in pts)
    small: dict[str, OpPoint] = {}  # framework -> its fastest point at the smallest size (any dtype), in the sweeps' order
    for p in (p for p in pts if square_size(p) == n_small):
        if p.framework not in small or p.flops_per_s > small[p.framework].flops_per_s:
            small[p.framework] = p
    shares = ", ".join(f"{percent(p.flops_per_s / best.flops_per_s)} ({fw})" for fw, p in small.items())
    named = [*small.values()] + ([] if any(p is best for p in small.values()) else [best])
    noisy = [f"{p.framework} n={square_size(p)}" for p in named if p.timing.noisy]
    ax.set_title(f"{chip}: n={n_small} reaches {shares}\nof the best ({best.framework} {best.dtype}, "
                 f"n={square_size(best)})" + (f"; {' and '.join(noisy)} noisy: rerun" if noisy else ""), fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_roofline(peak_flops: float, bandwidth: float, ops: Sequence[OpPoint] = (),
                  spec_peak_flops: float | None = None, spec_bandwidth: float | None = None,
                  chip: str = "", overhead_s: float = 0.0, ax: Any = None) -> Any:
    """Log-log roofline: measured ceiling, spec ceiling (dashed), ops as points; title = how many ops each bound limits (Lab 00)."""
    own = ax is None
    ax = ax or plt.subplots(figsize=(7, 5.5))[1]
    lo = min([0.05] + [p.intensity / 3 for p in ops])
    hi = max([ridge_point(peak_flops, bandwidth) * 30] + [p.intensity * 3 for p in ops])
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    ax.loglog(x, attainable(x, peak_flops, bandwidth) / 1e12, "k-", label="measured roofline")
    if spec_peak_flops and spec_bandwidth:
        ax.loglog(x, attainable(x, spec_peak_flops, spec_bandwidth) / 1e12, "k--", alpha=0.5, label="spec sheet")
    r = ridge_point(peak_flops, bandwidth)
    ax.axvline(r, color="grey", lw=0.8, ls=":")
    ax.annotate(f"ridge {r:.3g} FLOP/B", (r, peak_flops / 1e12), textcoords="offset points", xytext=(5, -14), fontsize=8)
    groups: dict[str, list[str]] = {}
    for p in ops:
        kind = bound_by(p.flops, p.bytes, peak_flops, bandwidth, overhead_s, p.timing.median_s)
        kind = describe_bound(kind, p.flops_per_s / float(attainable(p.intensity, peak_flops, bandwidth)))
        groups.setdefault(kind, []).append(p.name)
        ax.loglog(p.intensity, p.flops_per_s / 1e12, "o", label=f"{p.name} ({p.framework}, {p.dtype}): {kind}")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("TFLOP/s")
    # Counts only: the legend names each op's bound (a title listing them was wider than the axes).
    ax.set_title((f"{chip}: " if chip else "") + ", ".join(f"{len(v)} {k}" for k, v in groups.items()),
                 fontsize=9)
    # Below the axes: inside, the legend covered points (the small matmul's, the lesson, sat under it).
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    ax.grid(True, which="both", alpha=0.2)
    if own:  # a figure this function made: make room for the legend (a caller's axes keep their layout)
        ax.figure.tight_layout()
    return ax


def plot_measured_vs_spec(rows: Sequence[Mapping[str, Any]]) -> Figure:
    """Bars of measured figures, spec as a dashed outline; rows have figure, measured, spec (Lab 00)."""
    fig, ax = plt.subplots(figsize=(6, 3))
    labels = [r["figure"] for r in rows]
    ax.bar(labels, [r["measured"] for r in rows], label="measured")
    has_spec = any(r.get("spec") for r in rows)
    if has_spec:
        ax.bar(labels, [r.get("spec") or 0 for r in rows], fill=False, edgecolor="k", ls="--", label="spec")
        ratios = ", ".join(f"{r['figure']} {r['measured'] / r['spec']:.0%}" for r in rows if r.get("spec"))
        ax.set_title(f"measured / spec: {ratios}", fontsize=9)
    else:
        ax.set_title("measured (no spec for this chip)")
    ax.set_yscale("log")
    ax.set_ylabel("TFLOP/s or GB/s")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_chip_rooflines(chips: Sequence[Mapping[str, Any]], peak_flops: float, bandwidth: float,
                        dtype: str) -> Figure:
    """Spec rooflines of the learner chips (rows of hardware.table) and this runtime's measured one (Lab 00)."""
    from labkit.runtime import hardware

    fig, ax = plt.subplots(figsize=(7, 4.5))
    x = np.logspace(-1, 3.5, 200)
    ridges = {}
    for r in chips:
        s = hardware.lookup(r["name"])
        dt = r["ridge dtype"]
        ridges[s.name] = ridge_point(s.peak(dt), s.bandwidth_gbs * 1e9)
        ax.loglog(x, attainable(x, s.peak(dt), s.bandwidth_gbs * 1e9) / 1e12, label=f"{s.name} ({dt})")
    ax.loglog(x, attainable(x, peak_flops, bandwidth) / 1e12, "k--", label=f"this runtime (measured, {dtype})")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("attainable TFLOP/s")
    lo, hi = min(ridges, key=ridges.get), max(ridges, key=ridges.get)
    ax.set_title(f"Ridge points (spec) from {ridges[lo]:.0f} FLOP/B ({lo}) to {ridges[hi]:.0f} ({hi})", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
