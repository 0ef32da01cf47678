"""(Lab 06) The lab's pictures: serving cost against batch with the KV cache's cap, and the 2-4x
serving claim against every published price pair.

Each function takes the numbers a lab cell computed and returns the matplotlib Figure (made with
pyplot, so a notebook shows it); the title states what the numbers show. Money is in US dollars
("\\$" in labels: a bare "$" would start matplotlib's mathtext).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

# chip -> (batches, $ per million tokens at each batch, the largest batch the KV cache allows)
KvCurves = Mapping[str, tuple[Sequence[int], Sequence[float], int]]


def _short(chip: str) -> str:
    """'NVIDIA H100 SXM' -> 'H100 SXM': the vendor prefix only takes room in a legend."""
    return chip.replace("NVIDIA ", "")


def plot_serving_cost_kv(curves: KvCurves, model: str, context: int,
                         prices: Mapping[str, tuple[float, float]] | None = None,
                         chips: Mapping[str, int] | None = None) -> Figure:
    """(Lab 06) Modelled serving $ per million tokens against decode batch, each chip up to its KV cap."""
    # curves: $/Mtok at each chip's cheapest listed price; prices: chip -> (cheapest, dearest) $/chip-h,
    # drawn as a band from the cheapest to the dearest listed price (no band without prices); chips: chip ->
    # the chips each curve runs on (named in the legend: a cap and a $/token are for that many chips).
    if not curves:
        raise ValueError("plot_serving_cost_kv needs at least one chip's curve")
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ends: dict[str, tuple[float, float]] = {}   # chip -> $/Mtok at its cap, cheapest and dearest price
    for i, (chip, (bs, usd, cap)) in enumerate(curves.items()):
        if len(bs) != len(usd) or not len(bs):
            raise ValueError(f"{chip}: {len(bs)} batches but {len(usd)} costs; give one cost per batch")
        lo, hi = (prices or {}).get(chip, (1.0, 1.0))
        n = (chips or {}).get(chip)
        name = _short(chip) + (f" x{n}" if n else "")
        label = f"{name} (KV cache full at batch {cap})"
        if prices and chip in prices:
            label = rf"{name} at \${lo:.2f}-{hi:.2f}/chip-h (KV cache full at batch {cap})"
            ax.fill_between(bs, usd, [u * hi / lo for u in usd], color=f"C{i}", alpha=0.15)
        ax.plot(bs, usd, "o-", color=f"C{i}", label=label)
        ax.plot([bs[-1]], [usd[-1]], "X", color=f"C{i}", ms=11)   # the cap: a larger batch does not fit
        ends[chip] = (usd[-1], usd[-1] * hi / lo)
    ax.set_xscale("log", base=2)   # batches are powers of two
    ax.set_yscale("log")           # dollars in decades
    # A chip is "cheapest" only if its dearest listed price beats every other chip's cheapest one.
    best = [c for c in ends if all(ends[c][1] < ends[o][0] for o in ends if o != c)]
    head = f"{model}, {context}-token contexts: "
    if not best:
        title = head + "at the KV cap, no chip is cheapest at every listed price"
    elif ends[best[0]][0] == ends[best[0]][1]:
        title = head + f"cheapest at its cap on {_short(best[0])} (\\${ends[best[0]][0]:.3g}/Mtok)"
    else:
        title = (head + f"cheapest at its cap on {_short(best[0])} at every listed price "
                 f"(\\${ends[best[0]][0]:.3g}-{ends[best[0]][1]:.3g}/Mtok)")
    ax.set_xlabel("decode batch (sequences per step); X = the largest batch whose KV cache fits")
    ax.set_ylabel(r"\$ per million tokens (modelled)")
    ax.set_title(title, fontsize=10)
    ax.grid(which="both", alpha=0.2)
    # With prices, each line is the cheapest listed price and its band reaches the dearest: say so.
    ax.legend(fontsize=8, title="line: cheapest listed price; band: up to the dearest" if prices else None,
              title_fontsize=8)
    fig.tight_layout()
    return fig


def plot_serving_ratio_pairs(tpu_prices: Mapping[str, float], gpu_prices: Mapping[str, float],
                             gpu_tokens_per_s: float, tpu_tokens_per_s: float, tpu: str,
                             lo: float = 2.0, hi: float = 4.0, modelled: bool = True) -> Figure:
    """(Lab 06) GPU $/token over TPU $/token against the H100's price: one line per TPU price."""
    # tpu_prices / gpu_prices: label -> $ per chip-hour; tokens/s are per chip, at the same workload;
    # modelled: the tokens/s come from a formula, not a run (the title says so).
    if not tpu_prices or not gpu_prices:
        raise ValueError("plot_serving_ratio_pairs needs at least one TPU price and one GPU price")
    g = np.geomspace(0.5 * min(gpu_prices.values()), 2 * max(gpu_prices.values()), 200)  # $/h
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.axhspan(lo, hi, color="C2", alpha=0.15, label=f"claimed {lo:g}-{hi:g}x")
    ax.axhline(1, color="k", lw=0.8, ls=":")
    inside = 0
    for i, (label, t) in enumerate(tpu_prices.items()):
        ratio = (g / gpu_tokens_per_s) / (t / tpu_tokens_per_s)
        ax.loglog(g, ratio, color=f"C{i}", label=rf"{tpu} at \${t:.2f}/h ({label})")
        pts = [(u / gpu_tokens_per_s) / (t / tpu_tokens_per_s) for u in gpu_prices.values()]
        ax.plot(list(gpu_prices.values()), pts, "o", color=f"C{i}")
        inside += sum(lo <= r <= hi for r in pts)
    top = ax.get_ylim()[1]
    groups: list[list[tuple[str, float]]] = []   # prices within 5% of each other share one label
    for name, u in sorted(gpu_prices.items(), key=lambda kv: kv[1]):
        ax.axvline(u, color="grey", lw=0.6, ls="--")
        if groups and u <= 1.05 * groups[-1][0][1]:
            groups[-1].append((name, u))
        else:
            groups.append([(name, u)])
    for group in groups:                          # along the top edge, clear of the lines
        label = " / ".join(n for n, _ in group).replace("$", r"\$")
        ax.annotate(label, (group[0][1], top), rotation=90, fontsize=7, ha="right", va="top")
    n = len(tpu_prices) * len(gpu_prices)
    ax.set_xlabel(r"H100 price (\$ per chip-hour); dots: published prices")
    ax.set_ylabel(r"H100 \$/token / TPU \$/token")
    ax.set_title(f"{inside} of {n} published price pairs fall inside the claimed {lo:g}-{hi:g}x"
                 + (" (tokens/s modelled, not measured)" if modelled else ""), fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


__all__ = ["KvCurves", "plot_serving_cost_kv", "plot_serving_ratio_pairs"]
