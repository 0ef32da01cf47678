"""Lab 00's pictures: the matmul sweep, this device's roofline, measured vs spec, the learner chips.

One function per picture; each takes what its cell measured and returns the Figure, titled from
those numbers (never a sentence fixed in advance). The cell keeps the assertions.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from labkit.measure.roofline import OVERHEAD_FACTOR, PROBE_KINDS, OpPoint, attainable, bound_by, ridge_point


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


def describe_past_ridge(points: Sequence[tuple[str, OpPoint]], peak_flops: float, bandwidth: float,
                        overhead_s: Mapping[str, float], own_best: Mapping[str, float] | None = None) -> list[str]:
    """(Lab 00) Lines naming the sweep's matmuls right of the ridge by section 4's rule, with their share of the peak.

    ``points``: (framework, point) pairs; ``overhead_s``: the fixed cost of one call per framework, in seconds
    (Lab 00 times JAX's): the rule that classes the roofline's ops. A framework without one is classed by its
    intensity alone. Past the ridge a matmul's ceiling is the peak: its share of the peak is its share of its
    ceiling, and under 30% of it (:data:`REACHED`) it is "under the compute roof" (:func:`describe_bound`).
    ``own_best``: FLOP/s of each framework's best matmul in this dtype; where one is under 95% of the peak, the
    peak is another library's, so each of that framework's entries also gives its share of its own best.
    """
    own_best = own_best or {}
    if bad := {fw: f for fw, f in own_best.items() if not (isinstance(f, (int, float)) and 0 < f < float("inf"))}:
        raise ValueError(f"own_best must map each framework to its best matmul's FLOP/s (> 0), got {bad}")
    behind = {fw for fw, f in own_best.items() if f < 0.95 * peak_flops}  # frameworks the peak is not theirs
    groups: dict[str, list[str]] = {}
    shares: list[float] = []  # the compute-bound points' shares of the peak
    of_own: dict[str, list[float]] = {}  # framework -> the same points' shares of its own best (if given)
    for fw, p in points:
        cost, share = overhead_s.get(fw, 0.0), p.flops_per_s / peak_flops
        kind = describe_bound(bound_by(p.flops, p.bytes, peak_flops, bandwidth, cost, p.timing.median_s), share)
        notes = [f"{percent(p.flops_per_s / own_best[fw])} of {fw}'s own best"] if fw in behind else []
        if kind in ("overhead-bound", "kernel-bound"):
            notes.append(f"its call {p.timing.median_s / cost:.2g}x the {cost * 1e6:.3g} µs fixed cost")
        if p.timing.noisy:  # a median among scattered repeats: its share is rough
            notes.append(f"noisy: IQR/median {p.timing.spread:.2f}")
        groups.setdefault(kind, []).append(f"{fw} n={square_size(p)} {percent(share)}"
                                           + (f" ({'; '.join(notes)})" if notes else ""))
        if kind == "compute-bound":
            shares.append(share)
            if fw in own_best:
                of_own.setdefault(fw, []).append(p.flops_per_s / own_best[fw])
    why = {"overhead-bound": "roofline time under a call's fixed cost, the call within "
                             f"{OVERHEAD_FACTOR:g}x it: the fixed cost, not compute, is most of the time",
           "kernel-bound": "roofline time under a call's fixed cost, yet the call over "
                           f"{OVERHEAD_FACTOR:g}x it: the kernel itself is slow at this size",
           "compute-bound": "where compute binds",
           "under the compute roof": f"past the ridge yet under {REACHED:.0%} of the peak, so something the roofline "
                                     "does not draw limits it, such as its kernel at this size or the library"}
    lines = [f"{kind} ({why[kind]}): {', '.join(names)}" for kind, names in groups.items()]
    if shares:
        lines.append(f"the compute-bound ones reached {percent(min(shares))} to {percent(max(shares))} of the peak: "
                     + ("past the ridge is where compute can bind, not where a matmul runs at peak"
                        if min(shares) < 0.95 else "all within 5% of it")
                     + (_own_ranges(of_own) if behind & set(of_own) else ""))
    if untimed := sorted({fw for fw, _ in points} - set(overhead_s)):
        lines.append(f"{', '.join(untimed)}: classed by intensity alone (no fixed cost per call timed for it here)")
    return lines


def _own_ranges(of_own: Mapping[str, Sequence[float]]) -> str:
    """"; the spread mixes sizes and libraries: of its own best, jax's reached 87% to 100%, torch's ..."."""
    span = lambda v: percent(min(v)) + ("" if percent(min(v)) == percent(max(v)) else f" to {percent(max(v))}")  # noqa: E731
    return ("; the spread mixes sizes and libraries: of its own best, "
            + ", ".join(f"{fw}'s reached {span(v)}" if i == 0 else f"{fw}'s {span(v)}"
                        for i, (fw, v) in enumerate(of_own.items())))


def describe_read_gap(winner_kind: str, best_read_bps: float, noisy: bool) -> str:
    """(Lab 00) Why a read+write probe outran the best read-only one, by the winning probe's kind.

    ``winner_kind``: :func:`labkit.measure.roofline.probe_kind` of the fastest probe; ``best_read_bps``: the best
    read-only probe's bytes/s; ``noisy``: whether any probe's repeats disagreed. Streaming stores that skip
    write-allocate explain a stream or copy into a separate output; an in-place probe stores onto the lines it
    has just read, so there is no write-allocate for it to skip.
    """
    if winner_kind not in PROBE_KINDS[1:]:
        raise ValueError(f"winner_kind must be a read+write probe's kind, one of {PROBE_KINDS[1:]}, got {winner_kind!r}"
                         " (a read probe that wins leaves no gap to explain)")
    if isinstance(best_read_bps, bool) or not isinstance(best_read_bps, (int, float)) or not best_read_bps > 0:
        raise ValueError(f"best_read_bps must be the best read probe's bytes/s (> 0), got {best_read_bps!r}")
    head = f"the best read probe reached {best_read_bps / 1e9:.1f} GB/s, below the {winner_kind} probe. "
    noise = "; or noise (flagged above)" if noisy else ""
    if winner_kind.endswith(" in place"):
        return (head + "That probe's stores land on cache lines it has just read, so write-allocate (a store first reading "
                "its line) is not the reason. A hypothesis to test (e.g. with a profiler's memory counters, or both "
                "probes pinned to one core), not a measurement: a read-only reduction's loop is one accumulation "
                "chain, and how many cache misses a core keeps in flight on it can cap a read pass below a "
                "read+write pass" + noise)
    return (head + "Possible causes: streaming stores that skip write-allocate (a store first reading its line), "
            "so the probe moves only the bytes counted; a read loop on fewer cores" + noise)


def describe_matvec_dtype(dtype: str, low_s: float, fp32_s: float) -> str:
    """(Lab 00) The batch-1 matvec in ``dtype`` against the same matvec in fp32: is its dtype's path what limits it?

    ``low_s``, ``fp32_s``: each one's median seconds per call. fp32 moves twice the bytes, so under the memory
    roof it would take about twice as long; more than 2x *faster* means the ``dtype`` path, not memory, sets the time.
    """
    for name, v in (("low_s", low_s), ("fp32_s", fp32_s)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
            raise ValueError(f"{name} must be a median time in seconds (> 0), got {v!r}")
    ratio = low_s / fp32_s  # > 1: fp32 is faster
    speed = f"{ratio:.2g}x faster" if ratio >= 1 else f"{1 / ratio:.2g}x slower"
    head = (f"the same matvec in fp32 took {fp32_s * 1e3:.3g} ms a call, {dtype}'s {low_s * 1e3:.3g} ms: "
            f"fp32 {speed} while moving twice the bytes -> ")
    if ratio > 2:
        return head + f"the {dtype} matvec is limited by the library's {dtype} matvec path, not by memory"
    if ratio > 1:
        return head + (f"the {dtype} path moves bytes slower than fp32's, but under 2x in time: part of what keeps "
                       "the matvec under the memory roof, not shown to be all of it")
    return head + f"not the dtype: whatever keeps the {dtype} matvec under the memory roof holds fp32's too"


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
    ax.set_yscale("log")  # a linear axis flattened fp32's tens of TFLOP/s under bf16's hundreds
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # 20, 50, 100, 200, ...: readable values
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ys = [p.flops_per_s / 1e12 for ps in sweeps.values() for p in ps]  # TFLOP/s, and the spec line's
    ys += [spec_peak_flops / 1e12] if spec_peak_flops else []
    lo, hi = min(ys) / 1.3, max(ys) * 1.3
    if hi / lo < 5:  # at least 5x, so two of those ticks fall inside however close the curves are
        mid = np.sqrt(lo * hi)
        lo, hi = mid / np.sqrt(5), mid * np.sqrt(5)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("matrix size n  (n x n @ n x n)")
    ax.set_ylabel("TFLOP/s (median repeat, log scale)")
    ax.grid(True, which="both", alpha=0.2)
    pts = [p for ps in sweeps.values() for p in ps]
    best = max(pts, key=lambda p: p.flops_per_s)
    n_small = min(square_size(p) for p in pts)
    small: dict[str, OpPoint] = {}  # framework -> its fastest point at the smallest size (any dtype), in the sweeps' order
    for p in (p for p in pts if square_size(p) == n_small):
        if p.framework not in small or p.flops_per_s > small[p.framework].flops_per_s:
            small[p.framework] = p
    # Each named point with its dtype: the fastest at the smallest size may be a framework's fp32.
    shares = ", ".join(f"{percent(p.flops_per_s / best.flops_per_s)} ({fw} {p.dtype})" for fw, p in small.items())
    named = [*small.values()] + ([] if any(p is best for p in small.values()) else [best])
    noisy = [f"{p.framework} {p.dtype} n={square_size(p)}" for p in named if p.timing.noisy]
    ax.set_title(f"{chip}: n={n_small} reaches {shares}\nof the best ({best.framework} {best.dtype}, "
                 f"n={square_size(best)})" + (f"; {' and '.join(noisy)} noisy: rerun" if noisy else ""), fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_roofline(peak_flops: float, bandwidth: float, ops: Sequence[OpPoint] = (),
                  spec_peak_flops: float | None = None, spec_bandwidth: float | None = None,
                  chip: str = "", overhead_s: float = 0.0, ax: Any = None) -> Any:
    """Log-log roofline: measured ceiling, spec ceiling (dashed), ops as points; title = how many ops each bound limits (Lab 00).

    An op whose FLOP/s is ``peak_flops`` (within 1e-9, relative) is the one that defines the peak: it is at its
    ceiling by construction, so it is labelled "sets the peak", not counted as evidence of a compute bound.
    """
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
        kind = ("sets the peak" if abs(p.flops_per_s - peak_flops) <= 1e-9 * peak_flops
                else describe_bound(kind, p.flops_per_s / float(attainable(p.intensity, peak_flops, bandwidth))))
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
