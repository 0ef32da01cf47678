"""(Lab 01) The lab's pictures: a systolic array at work, its utilization, and shape sweeps of MXUs and GPUs.

Each function takes the numbers a lab cell computed and returns the matplotlib Figure (made
with pyplot, so a notebook shows it); the title states what the numbers show.
"""
from __future__ import annotations

from typing import Collection, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from labkit.matmul.reference_chips import DROP_KEEP
from labkit.matmul.sweep_rounds import Floor, kinds_on
from labkit.matmul.systolic import SimResult, activity_over_time

# Which register a stationary dataflow holds and which one moves through it (OS holds sums only).
_HELD_MOVING = {"os": (None, "A"), "ws": ("B", "A"), "is": ("A", "B")}


def _gemm(sim: SimResult) -> tuple[int, int, int]:
    """(M, K, N) of a simulated GEMM: C is (M, N); K is the stream (OS) or the fold rows (WS, IS)."""
    M, N = sim.product.shape
    return M, sim.mapping[2] if sim.dataflow == "os" else sim.mapping[0], N


def _pe_text(snap: Mapping[str, np.ndarray], df: str, i: int, j: int) -> str:
    """What PE (i, j) holds: its two operand registers and its sum (0 = empty register: '·')."""
    if df == "os":
        txt = f"a{snap['A'][i, j]} b{snap['B'][i, j]}\nΣ{snap['acc'][i, j]}"
    else:
        held, moving = _HELD_MOVING[df]
        txt = f"{held.lower()}{snap[held][i, j]} {moving.lower()}{snap[moving][i, j]}\nΣ{snap['psum'][i, j]}"
    return txt.replace("a0", "a·").replace("b0", "b·")


def plot_array_snapshots(sims: Mapping[str, SimResult], cycles: Sequence[int], drain_from: int) -> Figure:
    """(Lab 01) A small systolic array's registers at a few cycles: one row of panels per dataflow."""
    # sims: dataflow -> a one-fold simulate(..., snapshot_cycles=cycles); drain_from: first OS drain cycle.
    fig, axes = plt.subplots(len(sims), len(cycles), figsize=(12.5, 10), squeeze=False)
    for row, (df, sim) in enumerate(sims.items()):
        rows, cols = sim.rows, sim.cols
        for ax, c in zip(axes[row], cycles):
            if df == "os":  # colour: MACs done so far (accumulators filling), out of K = T per PE
                img, vmax = sim.activity[: c + 1].sum(axis=0), sim.mapping[2]
            else:           # colour: busy at this cycle
                img, vmax = sim.activity[c].astype(int), 1
            ax.imshow(img, cmap="Blues", vmin=0, vmax=2 * vmax)  # light colours: the text stays readable
            for i in range(rows):
                for j in range(cols):
                    ax.text(j, i, _pe_text(sim.snapshots[c], df, i, j), ha="center", va="center", fontsize=7)
            ax.set_xticks(range(cols))
            ax.set_yticks(range(rows))
            phase = "  (preload)" if df != "os" and c < rows else "  (drain)" if df == "os" and c >= drain_from else ""
            ax.set_title(f"{df.upper()}  cycle {c}{phase}", fontsize=9)
        axes[row][0].set_ylabel("PE row i")
    for ax in axes[-1]:
        ax.set_xlabel("PE column j")
    first = next(iter(sims.values()))
    M, K, N = _gemm(first)
    took = ", ".join(f"{df.upper()} {s.cycles}" for df, s in sims.items())
    fig.suptitle("Operands march one PE per cycle; a PE works only when its skewed operands meet\n"
                 f"({M}x{K} @ {K}x{N} on {first.rows}x{first.cols}, cycles: {took}. a = A value, b = B value "
                 "in the PE's registers, · = empty; Σ = accumulator / partial sum)\n"
                 f"colour: OS, the MACs a PE has done so far (of K = {K}; it stays dark while the sums drain out); "
                 "WS / IS, the PE does a MAC this cycle", fontsize=11)
    fig.tight_layout()
    return fig


def plot_utilization_over_time(sims: Mapping[str, SimResult]) -> Figure:
    """(Lab 01) Fraction of PEs busy in each cycle, per dataflow, with a zoom on the first two folds."""
    fig, axes = plt.subplots(len(sims), 2, figsize=(12, 6.5), sharey=True, squeeze=False,
                             gridspec_kw={"width_ratios": [3, 1]})
    longest = max(s.count for s in sims.values())  # same time axis on the left: compare total cycles
    for row, (df, sim) in enumerate(sims.items()):
        util_t = activity_over_time(sim)    # (cycles,) fraction of PEs busy
        per_fold = sim.count // sim.folds  # every fold takes the same cycles
        for ax, span in zip(axes[row], (len(util_t), 2 * per_fold)):
            ax.fill_between(np.arange(span), util_t[:span], step="post", alpha=0.6)
            ax.axhline(sim.utilization, color="k", ls="--", lw=0.8)
            ax.set_xlim(0, longest if span == len(util_t) else span)
        axes[row][0].set_ylabel(f"{df.upper()}\nPEs busy (fraction)")
        # Above the axes, not inside: a box inside would hide the tops of the last folds.
        axes[row][0].text(1.0, 1.02, f"{sim.folds} folds x {per_fold} cycles, mean {sim.utilization:.0%} (dashed)",
                          transform=axes[row][0].transAxes, ha="right", va="bottom", fontsize=8)
    axes[0][1].set_title("zoom: the first two folds", fontsize=9)
    axes[-1][0].set_xlabel("cycle")
    axes[-1][1].set_xlabel("cycle")
    best = max(sims, key=lambda d: sims[d].utilization)
    longest_stream = max(sims, key=lambda d: sims[d].mapping[2])  # T: rows streamed per fold
    why = "has the longest stream and wins" if best == longest_stream else "wins"
    first = sims[best]
    M, K, N = _gemm(first)
    fig.suptitle(f"{M}x{K} @ {K}x{N} on {first.rows}x{first.cols}: every fold pays fill + skew; "
                 f"{best.upper()} {why} ({first.utilization:.0%} busy)", fontsize=11)
    fig.tight_layout()
    return fig


def _padding_period(xs: np.ndarray, y: np.ndarray, keep: float = DROP_KEEP) -> int | None:
    """The tile width behind a sawtooth: gcd of the sizes after which the curve drops; None if it never does."""
    steps = np.nonzero(y[1:] < keep * y[:-1])[0]  # the curve keeps less than `keep` one size later
    return int(np.gcd.reduce(np.asarray(xs)[steps].astype(int))) if len(steps) else None


def _drops(y: np.ndarray, keep: float = DROP_KEEP) -> bool:
    """Whether the curve ever falls as the size grows (by more than 1 - keep): a wave or tile step."""
    return bool(np.any(y[1:] < keep * y[:-1]))


def _alignment_cost(xs: np.ndarray, y: np.ndarray) -> float | None:
    """Median slowdown from a multiple of 8 to the next size: the GPU's alignment cliff."""
    i = np.nonzero((xs[:-1] % 8 == 0) & (np.diff(xs) == 1))[0]
    return float(np.median(y[i] / y[i + 1])) if len(i) else None


def plot_predicted_sweeps(curves: Mapping[tuple[str, str], np.ndarray], batch: np.ndarray, edge: np.ndarray, *,
                          gpus: Collection[str], big: int,
                          causes: Mapping[str, Mapping[str, Sequence[int]]] | None = None) -> Figure:
    """(Lab 01) Predicted fraction of peak of MXUs and GPUs as M, N or K varies, the others at `big`."""
    # curves: (model, "M" | "N" | "K") -> fraction of peak at each of batch (M) or edge (N, K) sizes.
    # causes: GPU model -> {"padding" | "waves" | ...: the M sizes after which its curve drops}
    # (reference_chips.drop_causes); the title then names which model drops for which reason.
    models = list(dict.fromkeys(m for m, _ in curves))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), sharey=True)
    for ax, v in zip(axes, "MNK"):
        xs = np.asarray(batch if v == "M" else edge)
        for m in models:
            y = curves[(m, v)]
            if m in gpus and v != "M":  # GPU rows must be whole 16-byte vectors: 8 bf16/fp16 elements
                ok, odd = xs % 8 == 0, xs % 8 == 1
                line, = ax.plot(xs[ok], y[ok], lw=1.1, label=m, ls="--")
                ax.plot(xs[odd], y[odd], lw=0.8, ls=":", color=line.get_color(), label=f"{m}, N or K not a multiple of 8")
            else:
                ax.plot(xs, y, lw=1.1, label=m, ls="--" if m in gpus else "-")
        ax.set_xlabel(f"{v} (elements)" + ("  — batch / tokens, log scale" if v == "M" else ""))
        ax.set_title(f"vary {v}, the others = {big}", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_xscale("log", base=2)
    axes[0].set_ylabel("predicted fraction of peak")
    handles, labels = axes[1].get_legend_handles_labels()  # every line, the unaligned ones included
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    edge = np.asarray(edge)
    mxus, gpu_models = [m for m in models if m not in gpus], [m for m in models if m in gpus]
    widths = sorted({w for m in mxus for v in "NK" if (w := _padding_period(edge, curves[(m, v)])) is not None})
    costs = [c for m in gpu_models for v in "NK" if (c := _alignment_cost(edge, curves[(m, v)])) is not None]
    said = []
    if mxus:
        said.append(f"MXUs step down past multiples of {'/'.join(map(str, widths))} in N and K once compute-bound (padding)"
                    if widths else "MXUs show no padding step in N or K over these sizes")
    # The GPU model is one fixed tile per chip, no split-K or stream-K: its wave steps are a fixed-tile
    # kernel's (cuBLAS picks tiles per shape and can hide them), and its alignment factor is cuBLAS's.
    if any(_drops(curves[(m, "M")]) for m in gpu_models):
        said.append("the GPU model loses speed " + _m_steps(gpu_models, causes))
    if costs:
        said.append(f"the GPU model loses speed ~{np.median(costs):.0f}x when N or K is not a multiple of 8 "
                    "(cuBLAS's alignment)")
    fig.suptitle(("Predicted: " + ";\n".join(said)) if said else "predicted fraction of peak", fontsize=11)
    fig.tight_layout(rect=(0, 0.1, 1, 1))  # room for the legend below the panels
    return fig


_EDGE = {"padding": "past a row-block edge (padding)", "waves": "when a wave of its fixed tiles spills over (waves)"}


def _m_steps(models: Sequence[str], causes: Mapping[str, Mapping[str, Sequence[int]]] | None) -> str:
    """Why the GPU models' M curves drop: each cause with the models it hits, or both possible causes if unknown."""
    if causes is None:  # not worked out: a fixed tile loses speed at both kinds of edge
        return "in M " + " or ".join(_EDGE.values())
    said = [f"{_EDGE[c][:-1]}: {', '.join(m for m in models if causes.get(m, {}).get(c))})"
            for c in _EDGE if any(causes.get(m, {}).get(c) for m in models)]
    return "in M " + " and ".join(said)


def plot_measured_sweeps(shapes: Mapping[str, Sequence[tuple[int, int, int]]],
                         measured: Mapping[tuple[str, str], np.ndarray],
                         modelled: Mapping[str, Mapping[str, np.ndarray]], *, chip: str, platform: str,
                         floors: Mapping[str, Sequence[Floor]] | None = None,
                         kinds: Mapping[tuple[str, str], Sequence[str | None]] | None = None) -> Figure:
    """(Lab 01) Measured throughput of the batch and N sweeps against the models, each over its own best."""
    # shapes: sweep ("batch" | "N") -> [(M, N, K)]; measured: (framework, sweep) -> FLOP/s per shape;
    # modelled: sweep -> {model name: predicted fraction of peak per shape}. Only shapes are compared.
    # floors: framework -> sweep_rounds.time_floors of its batch sweep (the title names them); kinds:
    # (framework, sweep) -> each size's floor kind or None (sweep_rounds.floor_kinds), else the points on
    # `floors`: those points are marked, not read.
    floors, kinds = floors or {}, dict(kinds or {})
    norm = lambda x: np.asarray(x) / np.max(x)  # noqa: E731  each curve over its own best point
    frameworks = list(dict.fromkeys(fw for fw, _ in measured))
    fig, axes = plt.subplots(1, len(shapes), figsize=(13, 4.3), sharey=True, squeeze=False)
    for ax, (sweep, shp) in zip(axes[0], shapes.items()):
        xs = np.array([m for m, _, _ in shp] if sweep == "batch" else [n for _, n, _ in shp])
        for fw in frameworks:
            y = norm(measured[(fw, sweep)])
            line, = ax.plot(xs, y, "o-", lw=2, label=f"measured {fw} ({chip[:28]})")
            if (fw, sweep) not in kinds and sweep == "batch":  # the points of the batch sweep's floors
                kinds[(fw, sweep)] = kinds_on(floors.get(fw, ()), len(xs))
            on = list(kinds.get((fw, sweep), [None] * len(xs)))
            flat = np.array([k is not None for k in on])
            if flat.any():  # time per call flat over these sizes: a floor, so their FLOP/s say nothing of the shape
                names = " + ".join(dict.fromkeys(k for k in on if k))
                ax.plot(xs[flat], y[flat], "x", ms=11, mew=2.5, color=line.get_color(), zorder=3,
                        label=f"{fw}: on a {names} (time per call flat)")
        for (name, y), style in zip(modelled[sweep].items(), ("s--", "^:", "v-.")):
            ax.plot(xs, norm(y), style, label=f"model: {name}")
        if sweep == "batch":
            ax.set_xscale("log", base=2)
            ax.set_xlabel(f"M (batch, rows), N = K = {shp[0][1]}")
        else:
            ax.set_xlabel(f"N (elements), M = K = {shp[0][0]}")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("throughput / best in this sweep")
    axes[0][0].legend(fontsize=8)
    # No verdict from the platform's name: what the curves show is read from them (below, and in the lab's cells).
    title = f"Measured on {platform.upper()} vs both models (each normalized to its best)"
    if platform == "cpu":  # neither model is this chip: a model curve that tracks a CPU curve validates nothing
        title += ";\nthe models are a TPU's and a GPU's, drawn for where their cliffs fall, not as this CPU's prediction"
    if "batch" in shapes:  # each framework's first batch over its own best, unless it sits on a floor
        first = {fw: next((f for f in floors.get(fw, ()) if f.start == 0), None) for fw in frameworks}
        read = [f"{fw} {measured[(fw, 'batch')][0] / np.max(measured[(fw, 'batch')]):.2g}"
                for fw in frameworks if not first[fw]]
        on: dict[str, list[str]] = {}  # a floor's words -> the frameworks whose first batch sits on it
        for fw in frameworks:
            if first[fw]:
                on.setdefault(first[fw].describe(), []).append(fw)
        sit = "; ".join(f"{' and '.join(fws)} {'sit' if len(fws) > 1 else 'sits'} on a {floor}: no shape to read"
                        for floor, fws in on.items())
        m1 = shapes["batch"][0][0]
        head = f"batch {m1} over each framework's own best FLOP/s: {'; '.join(read)}" if read else f"batch {m1}:"
        title += "\n" + head + ("; " if read and sit else " " if sit else "") + sit
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig
