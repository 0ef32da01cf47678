"""Pictures of Lab 05: the training run before export, the serving benchmark and serving under load (Lab 05).

Each function takes the numbers a lab cell computed and returns the matplotlib Figure (made
with pyplot, so a notebook shows it); the title states what the numbers show.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import ticker
from matplotlib.figure import Figure

from labkit.export.load import LoadStats
from labkit.export.ranking import FASTEST_MARGIN, fastest, noise_margin
from labkit.export.serve import ServeStats


def _plain_log_ticks(ax: plt.Axes) -> None:
    """Label a log y-axis spanning under two decades with plain numbers (1.5, 2, 20), not 2x10^0 (Lab 05)."""
    lo, hi = ax.get_ylim()
    if lo > 0 and hi / lo < 100:  # wider spans keep matplotlib's powers of ten, one label per decade
        subs = (1, 1.5, 2, 3, 5, 7) if hi / lo < 10 else (1, 2, 5)  # a few labels per decade
        ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())


def plot_training_loss(losses: Sequence[float], platform: str, vocab_size: int = 256) -> Figure:
    """Training loss per step against a uniform guess over the vocabulary (Lab 05)."""
    # losses: cross-entropy per step, nats/token; platform: where it trained ("cpu", "tpu", "gpu").
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(losses)
    ax.axhline(math.log(vocab_size), color="k", ls=":", label=f"uniform guess, ln {vocab_size}")
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy (nats / token)")
    ax.set_title(f"Trained on {platform.upper()}: loss falls from {losses[0]:.1f} to {losses[-1]:.1f}")
    ax.legend(fontsize=8)
    return fig


def _fastest(tps: dict[str, float], margin: float) -> str:
    """The path with the most tokens/s, named only if it beats the next by `margin` (ranking.fastest's rule)."""
    first, tie = fastest(tps, margin)
    if tie is None:
        return f"fastest {first}"
    why = " = one program's spread" if margin > FASTEST_MARGIN else ""  # ranking.noise_margin raised it
    return f"{first} ≈ {tie} (a tie: within {margin - 1:.0%}{why})"  # short: the title sits beside another


def plot_serving_sweep(stats: Sequence[ServeStats]) -> Figure:
    """Serving tokens/s against batch per path, and TTFT vs TPOT at the largest batch (Lab 05)."""
    # stats: serve.sweep's result, one ServeStats per (path, batch); every path at every batch.
    paths = list(dict.fromkeys(s.path for s in stats))
    batches = sorted({s.batch for s in stats})
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))

    tps = {p: [s.tokens_per_s for s in stats if s.path == p] for p in paths}
    for p in paths:
        rows = [s for s in stats if s.path == p]
        ax1.plot([s.batch for s in rows], [s.tokens_per_s for s in rows], "o-", label=p)
    ax1.set_xscale("log", base=2)
    ax1.set_xticks(batches, [str(b) for b in batches])
    ax1.set_yscale("log")
    _plain_log_ticks(ax1)
    ax1.set_xlabel("batch size (sequences served together)")
    ax1.set_ylabel("throughput (generated tokens / s)")
    gain = min(max(v) / min(v) for v in tps.values())  # the path that gains least from batching
    # The ranking can differ between the ends (overhead rules batch 1, compute the largest): judge each end.
    ends = sorted({batches[0], batches[-1]})
    at = {(s.path, s.batch): s.tokens_per_s for s in stats}
    margin = noise_margin(stats)  # 10%, or more where JAX jit and StableHLO (one program) differ by more
    fastest = "\n".join(f"batch {b}: {_fastest({p: at[p, b] for p in paths}, margin)}" for b in ends)
    ax1.set_title(f"Batching multiplies tokens/s (at least {gain:.1f}x here)\n{fastest}", fontsize=10)
    ax1.legend(fontsize=8)

    b_max = batches[-1]
    rows = [next(s for s in stats if s.path == p and s.batch == b_max) for p in paths]
    x = np.arange(len(paths))
    for dx, p50, p95, label in ((-0.2, "ttft_p50_ms", "ttft_p95_ms", "TTFT p50 (prefill + 1st token)"),
                                (0.2, "tpot_p50_ms", "tpot_p95_ms", "step p50 (each later token)")):
        mid = [getattr(s, p50) for s in rows]
        ax2.bar(x + dx, mid, 0.4, label=label)
        # whisker from p50 up to p95 only: the tail is what a server's users notice
        ax2.errorbar(x + dx, mid, yerr=[[0] * len(rows), [getattr(s, p95) - m for s, m in zip(rows, mid)]],
                     fmt="none", ecolor="k", capsize=3)
    ax2.set_xticks(x, paths, rotation=30, ha="right", fontsize=8)  # long names ("torch eager + CUDA graph")
    ax2.set_ylabel("latency (ms), whisker = p95")
    ratios = [s.ttft_p50_ms / s.tpot_p50_ms for s in rows]
    span = f"{min(ratios):.1f}x" if max(ratios) < 1.05 * min(ratios) else f"{min(ratios):.1f}-{max(ratios):.1f}x"
    ax2.set_title(f"Batch {b_max}: the first token costs {span} a later one (over the paths)", fontsize=10)
    ax2.legend(fontsize=8, loc="upper left")  # "best" sat on the TTFT bars
    fig.tight_layout()
    return fig


def _by_policy(stats: Sequence[LoadStats]) -> dict[str, list[LoadStats]]:
    policies = list(dict.fromkeys(s.policy for s in stats))
    return {p: sorted((s for s in stats if s.policy == p), key=lambda s: s.rate) for p in policies}


def consistent_winner(stats: Sequence[LoadStats], value: Callable[[LoadStats], float],
                      lower_is_better: bool = True) -> tuple[str | None, int, bool]:
    """(Lab 05) The policy best (ties allowed) at *every* offered rate, or None; the rates; any tie."""
    lines = _by_policy(stats)
    rates = sorted(set.intersection(*({s.rate for s in rows} for rows in lines.values())))
    sign = 1 if lower_is_better else -1
    # One run at a few rates is noisy (a host stall on a shared CPU moves a tail by several ms):
    # a policy is named only where it is never behind at any rate and strictly ahead at one.
    never_behind, ahead, tie = set(lines), set(), False
    for r in rates:
        v = {p: sign * value(next(s for s in rows if s.rate == r)) for p, rows in lines.items()}
        best = [p for p in v if v[p] == min(v.values())]
        never_behind &= set(best)
        tie |= len(best) > 1
        ahead |= set(best) if len(best) == 1 else set()
    win = never_behind & ahead
    return (win.pop() if len(lines) > 1 and len(win) == 1 else None), len(rates), tie


def _leader(stats: Sequence[LoadStats], rate: float, value: Callable[[LoadStats], float], lower: bool) -> str:
    v = {s.policy: value(s) * (1 if lower else -1) for s in stats if s.rate == rate}
    best = [p for p in v if v[p] == min(v.values())]
    return best[0] if len(best) == 1 else "tie"


def _verdict(stats: Sequence[LoadStats], metric: str, q: int, unit: str = " ms") -> str:
    value = (lambda s: s.goodput) if metric == "goodput" else (lambda s: s.ms(metric, q))  # noqa: E731
    win, n, tie = consistent_winner(stats, value, lower_is_better=metric != "goodput")
    name = "goodput" if metric == "goodput" else f"p{q} {metric.upper()}"
    top = max(s.rate for s in stats)
    at_top = ", ".join(f"{s.policy} {value(s):.3g}" for s in stats if s.rate == top)
    arrived = next(s.arrival_rate for s in stats if s.rate == top)
    where = f"{top:g} req/s" + (f" ({arrived:.3g} arrived)" if math.isfinite(arrived) else "")
    if win is None:  # say who led at each rate, lowest first: a crossover reads at a glance
        by_rate = ", ".join(_leader(stats, r, value, metric != "goodput") for r in sorted({s.rate for s in stats}))
        better = "higher" if metric == "goodput" else "lower"
        return (f"{name}: no consistent winner across the {n} rates\n({better}, by rate: {by_rate})\n"
                f"(at {where}: {at_top}{unit})")
    better = ("higher" if metric == "goodput" else "lower") + (" or equal" if tie else "")
    return f"{name}: {win} batching {better} at all {n} rates\n(at {where}: {at_top}{unit})"


def plot_latency_vs_throughput(stats: Sequence[LoadStats], q: int = 99) -> Figure:
    """p-q TTFT and TPOT against output tokens/s, one line per batching policy, SLO dashed (Lab 05)."""
    # stats: load.sweep_rates' result, one LoadStats per (policy, offered rate); q in load.PERCENTILES.
    if not stats:
        raise ValueError("no LoadStats to plot: run load.sweep_rates first")
    lines = _by_policy(stats)
    slo = stats[0].slo
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, metric, limit in ((axes[0], "ttft", slo.ttft_s), (axes[1], "tpot", slo.tpot_s)):
        for policy, rows in lines.items():
            ax.plot([s.output_throughput for s in rows], [s.ms(metric, q) for s in rows], "o-",
                    label=f"{policy} batching")
            for s in rows:  # each point is one offered rate: labelled by what arrived, as the goodput plot's axis
                ax.annotate(f"{_arrived(s):.3g}/s", (s.output_throughput, s.ms(metric, q)), fontsize=7,
                            textcoords="offset points", xytext=(3, 3))
        if limit is not None:
            ax.axhline(limit * 1e3, color="k", ls="--", lw=1, label=f"SLO {limit * 1e3:.3g} ms")
        ax.set_yscale("log")
        _plain_log_ticks(ax)
        ax.set_xlabel("throughput (generated tokens / s)")
        ax.set_ylabel(f"{metric.upper()} p{q} (ms)")
        ax.set_title(_verdict(stats, metric, q), fontsize=10)
        ax.legend(fontsize=8, loc="upper left")  # latency climbs to the right: the upper left stays empty
    fig.tight_layout()
    return fig


def _arrived(s: LoadStats) -> float:
    """The requests/s that arrived in a load run (its offered rate where the run did not record it)."""
    return s.arrival_rate if math.isfinite(s.arrival_rate) else s.rate


def plot_goodput(stats: Sequence[LoadStats]) -> Figure:
    """Goodput (requests/s meeting the SLO) against the arrived requests/s, per batching policy (Lab 05)."""
    if not stats:
        raise ValueError("no LoadStats to plot: run load.sweep_rates first")
    lines = _by_policy(stats)
    fig, ax = plt.subplots(figsize=(6, 4))
    for policy, rows in lines.items():
        ax.plot([_arrived(s) for s in rows], [s.goodput for s in rows], "o-", label=f"{policy} batching")
    # the ceiling: every completed request within the SLO, i.e. the run's own request throughput
    per_rate: dict[float, LoadStats] = {}
    for s in stats:  # per rate, the policy that completed most (both policies served the same draw)
        per_rate[s.rate] = max(per_rate.get(s.rate, s), s, key=lambda v: v.request_throughput)
    ceiling = sorted((_arrived(s), s.request_throughput) for s in per_rate.values())
    ax.plot([c[0] for c in ceiling], [c[1] for c in ceiling], "k:", lw=1,
            label="served req/s (the ceiling: all within the SLO)")
    top = max(max(s.goodput for s in stats), max(c[1] for c in ceiling))
    ax.set_ylim(0, 1.15 * top if top > 0 else 1.0)
    ax.set_xlabel("arrival rate (requests / s, as drawn)")
    ax.set_ylabel("goodput (requests / s within the SLO)")
    ax.set_title(f"{_verdict(stats, 'goodput', 0, ' req/s')}\n(SLO: {stats[0].slo.describe()})", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
