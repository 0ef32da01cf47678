"""(Lab 06) The lab's pictures: serving cost against batch, chips side by side, the debate claims,
what moves cost, pipeline routing and queueing, and the decision worksheet.

Each function takes the numbers a lab cell computed and returns the matplotlib Figure (made with
pyplot, so a notebook shows it); the title states what the numbers show. Money is in US dollars
("\\$" in labels: a bare "$" would start matplotlib's mathtext).
"""
from __future__ import annotations

from typing import Collection, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from labkit.cost.model import CostResult
from labkit.cost.routing import Placement, SimResult

Curve = Sequence[tuple[float, float]]  # (x, $/Mtok) pairs, as cost.sensitivity returns them


def _short(chip: str) -> str:
    """'NVIDIA H100 SXM' -> 'H100 SXM': the vendor prefix only takes room in a tick label."""
    return chip.replace("NVIDIA ", "")


def plot_serving_cost_vs_batch(batches: Sequence[int], tokens_per_s: Sequence[float],
                               usd_per_mtok: Sequence[float], usd_per_chip_hour: float,
                               ceiling_tokens_per_s: float, chip: str, n_params: float) -> Figure:
    """(Lab 06) Measured serving tokens/s and $ per million tokens against decode batch."""
    # ceiling_tokens_per_s: measured peak FLOP/s / FLOPs per token; n_params: matmul parameters.
    bs, usd = np.asarray(batches), np.asarray(usd_per_mtok)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    a1.loglog(bs, tokens_per_s, "o-", label="measured")
    a1.axhline(ceiling_tokens_per_s, color="k", ls=":", label="compute ceiling: measured peak / FLOPs per token")
    a1.set_xlabel("decode batch (sequences per step)")
    a1.set_ylabel("tokens/s")
    a1.set_title("tokens/s grow with batch toward the compute ceiling")
    a1.legend(fontsize=8, loc="lower right")
    a2.loglog(bs, usd, "o-", color="C3")
    a2.set_xlabel("decode batch (sequences per step)")
    a2.set_ylabel(rf"\$ per million tokens (at \${usd_per_chip_hour}/h)")
    a2.set_title(f"batch {bs[-1]} is {usd[0] / usd[-1]:.0f}x cheaper per token than batch {bs[0]}")
    fig.suptitle(f"{chip}: serving the {n_params / 1e6:.1f} M-parameter token-step model", fontsize=10)
    fig.tight_layout()
    return fig


def plot_cost_per_chip(train: Mapping[str, CostResult], serve: Mapping[str, CostResult], *, best_train: str,
                       best_serve: str, prices: str, train_mfu: float, serve_batch: int,
                       serve_util: float, n_params: float) -> Figure:
    """(Lab 06) Training and serving $ per million tokens of one model, two bars per chip."""
    # prices: whose list prices ("GCP", "cheapest-cloud"); n_params: the model's parameters.
    names = list(train)
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(10, 4.2))
    ax.bar(x - 0.2, [train[c].usd_per_mtok for c in names], 0.4, label=f"training (MFU {train_mfu:.0%})")
    ax.bar(x + 0.2, [serve[c].usd_per_mtok for c in names], 0.4,
           label=f"serving (batch {serve_batch}, utilization {serve_util:.0%})")
    ax.set_xticks(x, [_short(n).replace(" (", "\n(") for n in names], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel(r"\$ per million tokens (log)")
    ax.set_title(f"{n_params / 1e9:g}B model, {prices} prices: cheapest to train on {best_train}, "
                 f"to serve on {best_serve}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", which="both", alpha=0.2)
    fig.tight_layout()
    return fig


def plot_serving_ratio_claim(gpu_usd_per_hour: Sequence[float], ratio_vs_price: Sequence[float],
                             cloud_prices: Mapping[str, float], flip_2x_usd_per_hour: float,
                             batches: Sequence[int], ratio_vs_batch: Sequence[float], *, tpu: str,
                             cloud: str, serve_util: float) -> Figure:
    """(Lab 06) GPU / TPU serving $ per token against the H100's price and the decode batch."""
    # cloud_prices: cloud -> the H100's $/chip-hour there; flip_2x: the $/h where the ratio is 2;
    # cloud: whose prices the batch sweep uses.
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for ax in (a1, a2):
        ax.axhspan(2, 4, color="C2", alpha=0.15, label="claimed 2-4x")
        ax.axhline(1, color="k", lw=0.8, ls=":")
    a1.plot(gpu_usd_per_hour, ratio_vs_price, "C0-")
    for name, usd_h in cloud_prices.items():
        a1.axvline(usd_h, color="grey", lw=0.8, ls="--")
        a1.annotate(name, (usd_h, 0.3), rotation=90, fontsize=8, ha="right")
    a1.set_xlabel(r"H100 price (\$ per chip-hour)")
    a1.set_ylabel(rf"H100 \$/Mtok / {tpu} \$/Mtok")
    a1.set_title(rf"holds only if the H100 costs more than \${flip_2x_usd_per_hour:.2f}/h", fontsize=10)
    a1.legend(fontsize=8)
    a2.semilogx(batches, ratio_vs_batch, "C0o-", base=2)
    a2.set_xlabel("decode batch (sequences per step)")
    a2.set_ylabel(rf"H100 \$/Mtok / {tpu} \$/Mtok")
    below = [b for b, r in zip(batches, ratio_vs_batch) if r < 2]
    a2.set_title(f"{cloud} prices: " + (f"below 2x from batch {below[0]} (compute-bound)" if below and below[0] > 1
                 else "below 2x at every batch" if below else "2x or more at every batch"), fontsize=10)
    a2.annotate("memory-bound:\nratio of \\$/(GB/s)", (batches[0], ratio_vs_batch[0]), textcoords="offset points",
                xytext=(0, -40), fontsize=8)
    a2.annotate("compute-bound:\nratio of \\$/(FLOP/s)", (batches[-1], ratio_vs_batch[-1]), textcoords="offset points",
                xytext=(-90, -40), fontsize=8)
    fig.suptitle(f"Claim: TPU serving is 2-4x cheaper per token (8B model, utilization {serve_util:.0%} both)",
                 fontsize=11)
    fig.tight_layout()
    return fig


def plot_training_cost_vs_mfu(mfus: Sequence[float], curves: Mapping[str, Sequence[float]],
                              claimed: Mapping[str, tuple[float, float]], usd_per_chip_hour: Mapping[str, float],
                              break_even_mfu: float | None, low: CostResult, high: CostResult,
                              low_wins: bool) -> Figure:
    """(Lab 06) Training $ per million tokens against MFU, one line per chip, claimed MFUs dotted."""
    # curves: chip -> $/Mtok at each MFU; claimed: chip -> (claimed MFU, its $/Mtok);
    # low / high: the low-MFU and high-MFU options the title compares (low_wins: low is cheaper).
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, (c, ys) in enumerate(curves.items()):
        ax.plot(mfus, ys, color=f"C{i}", ls="-" if "TPU" in c else "--", label=rf"{c} (\${usd_per_chip_hour[c]}/h)")
        ax.plot(*claimed[c], "o", color=f"C{i}")
    ax.set_yscale("log")
    ax.set_xlabel("MFU (model FLOP/s / spec peak)")
    ax.set_ylabel(r"training \$ per million tokens (8B model, log)")
    if break_even_mfu is not None:
        ax.axvline(break_even_mfu, color="grey", ls=":", lw=0.8)
    name = lambda r: _short(r.chip or "?").replace(" SXM", "")  # noqa: E731  ("H100", "TPU v5e")
    ax.set_title(f"Price per FLOP/s outweighs MFU: {name(low)} at {low.mfu:.0%} {'beats' if low_wins else 'loses to'} "
                 f"{name(high)} at {high.mfu:.0%} (dots: claimed MFUs)", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.2)
    return fig


def plot_spot_discount(lost: Sequence[float], curves: Mapping[str, tuple[float, float, Sequence[float]]],
                       holds_up_to: Mapping[str, float], assumed_lost: float, *, cloud: str,
                       threshold: float = 0.65) -> Figure:
    """(Lab 06) Spot's discount per useful hour against the share of spot time lost, one line per chip."""
    # curves: chip -> (on-demand $/h, spot $/h, discount at each lost share); holds_up_to: chip ->
    # the lost share where the discount falls to threshold (the 70% claim less its 5-point tolerance).
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for i, (chip, (od, sp, discount)) in enumerate(curves.items()):
        ax.plot(lost, discount, f"C{i}-", label=rf"{chip}: \${sp} spot vs \${od} on-demand ({cloud})")
        if chip in holds_up_to:
            ax.plot(holds_up_to[chip], threshold, "o", color=f"C{i}")
    ax.axhline(threshold, color="k", ls=":", lw=0.8, label="70% claim, 5-point tolerance")
    ax.axvline(assumed_lost, color="grey", ls="--", lw=0.8, label=f"this lab's assumption ({assumed_lost:.0%} lost)")
    ax.set_xlabel("share of spot time lost to preemption (redone work + restarts)")
    ax.set_ylabel("discount per useful hour vs on-demand")
    ax.set_title("Spot's discount shrinks as preemptions waste time", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.2)
    return fig


def _crossing(ax: Axes, x: float | None) -> None:
    """A dotted vertical line at a break-even point, if there is one."""
    if x is not None:
        ax.axvline(x, color="grey", ls=":")


def plot_cost_sensitivity(*, commit: Curve, commit_chip: str, commit_usd_h: float, on_demand_usd_h: float,
                          on_demand_usd_mtok: float, break_even_util: float,
                          gpu_mfu: Curve, gpu_usd_h: float, tpu_train_usd_mtok: float, tpu_train_chip: str,
                          tpu_mfu: float, break_even_mfu: float | None,
                          batch: Mapping[str, Curve],
                          gpu_price: Curve, tpu_serve_usd_mtok: float, tpu_serve_chip: str,
                          tpu_usd_h: float, break_even_price: float) -> Figure:
    """(Lab 06) What moves cost per token: utilization, MFU, batch and price, with break-evens."""
    # Each Curve is (x, $/Mtok) pairs: commit over utilization, gpu_mfu over H100 MFU, batch over
    # decode batch per chip, gpu_price over the H100's $/chip-hour. *_usd_h are $/chip-hour.
    fig, axs = plt.subplots(2, 2, figsize=(11, 8))
    ax = axs[0, 0]
    ax.plot(*zip(*commit), label=rf"3-year commit \${commit_usd_h}/h")
    ax.axhline(on_demand_usd_mtok, color="C1", label=rf"on-demand \${on_demand_usd_h}/h, paid only while used")
    _crossing(ax, break_even_util)
    ax.set(xlabel="utilization of the reserved chip", ylabel=r"serving \$ per million tokens", yscale="log",
           title=f"{commit_chip}: commit only above {break_even_util:.0%} utilization")
    ax = axs[0, 1]
    ax.plot(*zip(*gpu_mfu), label=rf"H100 (\${gpu_usd_h}/h)")
    ax.axhline(tpu_train_usd_mtok, color="C1", label=f"{tpu_train_chip} at {tpu_mfu:.0%} MFU")
    _crossing(ax, break_even_mfu)
    ax.set(xlabel="H100 MFU", ylabel=r"training \$ per million tokens", yscale="log",
           title=(f"H100 must reach {break_even_mfu:.0%} MFU to match" if break_even_mfu is not None
                  else "H100 never matches") + f" {tpu_train_chip}")
    ax = axs[1, 0]
    for c, curve in batch.items():
        ax.loglog(*zip(*curve), "o-", ms=3, label=c)
    ax.set(xlabel="decode batch (sequences per step)", ylabel=r"serving \$ per million tokens",
           title=r"batching cuts \$/token until compute is full")
    ax = axs[1, 1]
    ax.plot(*zip(*gpu_price), label="H100")
    ax.axhline(tpu_serve_usd_mtok, color="C1", label=rf"{tpu_serve_chip} (\${tpu_usd_h}/h)")
    _crossing(ax, break_even_price)
    ax.set(xlabel=r"H100 price (\$ per chip-hour)", ylabel=r"serving \$ per million tokens",
           title=rf"the H100 serves cheaper below \${break_even_price:.2f}/h")
    for a in axs.flat:
        a.legend(fontsize=7)
        a.grid(True, which="both", alpha=0.2)
        a.title.set_fontsize(10)
    fig.suptitle("What moves cost per token (8B model; dotted lines: break-even)", fontsize=11)
    fig.tight_layout()
    return fig


def plot_placements(gpu_only: Placement, tpu_only: Placement, hybrid: Placement, target_s: float,
                    targets: Sequence[float], cheapest: Sequence[Placement | None]) -> Figure:
    """(Lab 06) Latency and $ per 1000 requests of three placements, and the cheapest against the target."""
    # targets: latency targets swept, s; cheapest: the cheapest placement meeting each (None: none does).
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(13, 4))
    labels = ["GPU only", "TPU only", "hybrid"]
    places = [gpu_only, tpu_only, hybrid]
    a1.bar(labels, [p.latency_s for p in places], color=["C0", "C1", "C2"])
    a1.axhline(target_s, color="k", ls="--", lw=0.8, label="target")
    a1.legend(fontsize=8, loc="upper left")
    a1.set(ylabel="latency per request, s (no queueing)",
           title=f"{sum(p.meets_target for p in places)} of 3 placements meet the {target_s:g} s target")
    a2.bar(labels, [p.usd_per_1k for p in places], color=["C0", "C1", "C2"])
    a2.set_ylabel(r"\$ per 1000 requests")
    single = [p.usd_per_request for p in places[:2] if p.meets_target]  # $/request of each single kind that meets it
    a2.set_title(f"hybrid saves {1 - hybrid.usd_per_request / min(single):.0%} vs the best single kind" if single
                 else "only the hybrid meets the target")
    ok = [(t, b) for t, b in zip(targets, cheapest) if b is not None]
    a3.plot([t for t, _ in ok], [b.usd_per_1k for _, b in ok], "C2-")
    for kind, mk in (("gpu", "o"), ("tpu", "s")):
        pts = [(t, b.usd_per_1k) for t, b in ok if b.pools[2] == kind]  # pools[2]: the LLM stage's pool
        if pts:
            a3.plot(*zip(*pts), mk, ms=4, label=f"LLM stage on {kind.upper()}")
    a3.axvspan(targets[0], min(t for t, _ in ok), color="grey", alpha=0.2, label="no placement meets it")
    a3.set(xlabel="latency target, s", ylabel=r"cheapest \$ per 1000 requests", yscale="log",
           title="a tighter target forces the faster (dearer) LLM pool")
    a3.legend(fontsize=8)
    for a in (a1, a2, a3):
        a.title.set_fontsize(10)
    fig.suptitle(f"Placements at a {target_s:.1f} s target: hybrid = {' -> '.join(hybrid.pools)}", fontsize=11)
    fig.tight_layout()
    return fig


def plot_queueing(rates: Sequence[float], fixed: Sequence[SimResult], capacity: float,
                  auto_rates: Sequence[float], auto: Sequence[SimResult], no_queue_s: float,
                  usd_per_1k_busy: float, target_load: float = 0.7) -> Figure:
    """(Lab 06) p50/p95 latency of a fixed fleet, and $ per 1000 requests of an autoscaled one, against load."""
    # rates, auto_rates: offered load, requests/s; capacity: requests/s of one LLM replica;
    # usd_per_1k_busy: the placement's $ per 1000 requests with every chip 100% busy.
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    a1.plot(rates, [s.p50_s for s in fixed], "o-", label="p50")
    a1.plot(rates, [s.p95_s for s in fixed], "s-", label="p95")
    a1.axvline(capacity, color="k", ls="--", lw=0.8, label=f"capacity {capacity:.1f} req/s")
    a1.axhline(no_queue_s, color="grey", ls=":", lw=0.8, label="no-queue latency")
    a1.set(xlabel="offered load, requests/s", ylabel="latency, s",
           title="fixed fleet (1 LLM replica): latency climbs as load nears capacity")
    a1.legend(fontsize=8)
    a2.loglog(auto_rates, [s.usd_per_request * 1000 for s in auto], "o-", color="C3")
    a2.axhline(usd_per_1k_busy, color="grey", ls=":", lw=0.8, label="chips 100% busy (route's figure)")
    a2.axhline(usd_per_1k_busy / target_load, color="k", ls="--", lw=0.8,
               label=f"chips {target_load:.0%} busy (the autoscaler's target)")
    a2.set(xlabel="offered load, requests/s", ylabel=r"\$ per 1000 requests",
           title="autoscaled fleet: low traffic pays for idle replicas")
    a2.legend(fontsize=8)
    for a in (a1, a2):
        a.title.set_fontsize(10)
    fig.tight_layout()
    return fig


def plot_decision_grid(ratio: np.ndarray, phases: Sequence[str], options: Sequence[str],
                       winners: Mapping[str, str], not_offered: Collection[tuple[int, int]] = ()) -> Figure:
    """(Lab 06) Each phase's cost on each chip as a multiple of its cheapest option, as a heat map."""
    # ratio: (phases, options) cost / cheapest, NaN where the option misses the phase's need;
    # not_offered: (row, column) cells that are no option at all (the rest of the NaNs: too slow).
    fig, ax = plt.subplots(figsize=(11, 3.8))
    im = ax.imshow(np.log10(ratio), cmap="RdYlGn_r", vmin=0, vmax=2, aspect="auto")  # 1x .. 100x
    for i in range(len(phases)):
        for j in range(len(options)):
            why = "not a serving\noption here" if (i, j) in not_offered else "too slow"
            ax.text(j, i, why if np.isnan(ratio[i, j]) else f"{ratio[i, j]:.3g}x", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(options)), [_short(c).replace("this runtime ", "this runtime\n") for c in options],
                  fontsize=7)
    ax.set_yticks(range(len(phases)), phases, fontsize=8)
    cb = fig.colorbar(im, ax=ax, ticks=[0, 1, 2])
    cb.ax.set_yticklabels(["1x", "10x", ">=100x"])
    cb.set_label("cost / cheapest")
    ax.set_title("No single winner: " + ", ".join(f"{k} -> {_short(v)}" for k, v in winners.items()), fontsize=9)
    fig.tight_layout()
    return fig


__all__ = ["Curve", "plot_serving_cost_vs_batch", "plot_cost_per_chip", "plot_serving_ratio_claim",
           "plot_training_cost_vs_mfu", "plot_spot_discount", "plot_cost_sensitivity", "plot_placements",
           "plot_queueing", "plot_decision_grid"]
