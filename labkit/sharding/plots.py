"""Pictures of meshes and layouts, and of what each strategy costs (Lab 03).

``jax.debug.visualize_array_sharding`` prints a text table through ``rich``; these draw the
same information with matplotlib, for any array (1-D, 2-D or more) and any sharding, so
layouts can sit side by side in one figure with the mesh they are laid out on. The last two
functions take the numbers a lab cell computed and return the Figure (made with pyplot, so a
notebook shows it); their titles state what the numbers show.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from labkit.measure import bench
from labkit.sharding import comm_bench


def _device_ids(devs: Sequence[Any]) -> list[int]:
    return sorted(int(d.id) for d in devs)


def _label(ids: list[int], n_total: int) -> str:
    if len(ids) == n_total and n_total > 1:
        return f"all {n_total}"
    if len(ids) > 2 and ids == list(range(ids[0], ids[0] + len(ids))):
        return f"d{ids[0]}-{ids[-1]}"
    return ",".join(f"d{i}" for i in ids)


def tiles(shape: Sequence[int], sharding: Any) -> list[tuple[tuple[slice, ...], list[int]]]:
    """[(index slices, device ids holding that tile)], one entry per distinct tile (Lab 03)."""
    groups: dict[tuple, list[int]] = {}
    for dev, idx in sharding.devices_indices_map(tuple(shape)).items():
        key = tuple((s.start or 0, shape[i] if s.stop is None else s.stop) for i, s in enumerate(idx))
        groups.setdefault(key, []).append(int(dev.id))
    return [(tuple(slice(a, b) for a, b in k), sorted(v)) for k, v in sorted(groups.items())]


def _two_dims(shape: Sequence[int], spec: Any) -> tuple[int | None, int]:
    """Which dims to draw as (rows, cols): the split ones first, then the largest."""
    split = [i for i, e in enumerate(tuple(spec) + (None,) * len(shape)) if i < len(shape) and e is not None]
    rest = sorted((i for i in range(len(shape)) if i not in split), key=lambda i: -shape[i])
    dims = sorted((split + rest)[:2])
    return (None, dims[0]) if len(dims) == 1 else (dims[0], dims[1])


def draw_sharding(ax: Any, shape: Sequence[int], sharding: Any, name: str = "array") -> None:
    """Draw an array of ``shape`` as tiles coloured by the device(s) that hold them (Lab 03).

    Tiles held by several devices but not all are hatched; a tile on every device is grey ("all N"). Arrays with more than two dims are
    drawn over the two dims that are split (else the largest); the title says which.
    """
    shape = tuple(int(s) for s in shape) or (1,)
    spec = getattr(sharding, "spec", ())
    r, c = _two_dims(shape, spec)
    n_dev = len(sharding.device_set)
    cmap = plt.get_cmap("tab10" if n_dev <= 10 else "tab20")
    seen: set[tuple] = set()
    for idx, ids in tiles(shape, sharding):
        key = ((idx[r].start, idx[r].stop) if r is not None else (0, 1), (idx[c].start, idx[c].stop))
        if key in seen:  # same picture tile from a dim we do not draw
            continue
        seen.add(key)
        (y0, y1), (x0, x1) = key
        colour = cmap(ids[0] % cmap.N) if len(ids) < n_dev or n_dev == 1 else (0.85, 0.85, 0.85, 1)
        ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, facecolor=colour, edgecolor="k",
                               hatch="//" if 1 < len(ids) < n_dev else None, lw=1))
        ax.text((x0 + x1) / 2, (y0 + y1) / 2, _label(ids, n_dev), ha="center", va="center",
                fontsize=7 if (x1 - x0) * 8 > shape[c] else 6,
                bbox={"facecolor": "white", "alpha": 0.75, "lw": 0, "pad": 1})
    rows = shape[r] if r is not None else 1
    ax.set_xlim(0, shape[c])
    ax.set_ylim(rows, 0)  # row 0 at the top, like a matrix
    drawn = f"dims ({r}, {c})" if r is not None and len(shape) > 2 else ""
    mesh = getattr(sharding, "mesh", None)  # a NamedSharding's mesh: the same spec means different tiles on each
    on = f"\non mesh {mesh_label(mesh)}" if mesh is not None and hasattr(mesh, "shape") else ""
    ax.set_title(f"{name} {shape}\nP{tuple(spec)} {drawn}".strip() + on, fontsize=8)
    ax.set_xlabel(f"dim {c} (size {shape[c]})", fontsize=7)
    ax.set_ylabel(f"dim {r} (size {rows})" if r is not None else "", fontsize=7)
    ax.set_xticks([0, shape[c]])  # only the extents: tick labels are most of the drawing time
    ax.set_yticks([0, rows] if r is not None else [])  # a 1-D array is one row
    ax.tick_params(labelsize=6)


def mesh_label(mesh: Any) -> str:
    """A mesh's axes and sizes, as panels title it: '(data=2, model=4)' (Lab 03)."""
    return "(" + ", ".join(f"{k}={v}" for k, v in dict(mesh.shape).items()) + ")"


def draw_mesh(ax: Any, mesh: Any) -> None:
    """Draw a 1-D or 2-D mesh: a grid of device ids with the axis names on its sides (Lab 03)."""
    names = list(mesh.axis_names)
    ids = mesh.device_ids.reshape(mesh.devices.shape)
    if ids.ndim == 1:
        ids, names = ids.reshape(1, -1), [""] + names
    cmap = plt.get_cmap("tab10")
    for (i, j), d in _enumerate2(ids):
        ax.add_patch(Rectangle((j, i), 1, 1, facecolor=cmap(int(d) % 10), edgecolor="k"))
        ax.text(j + 0.5, i + 0.5, f"d{int(d)}", ha="center", va="center", fontsize=8)
    ax.set_xlim(0, ids.shape[1])
    ax.set_ylim(ids.shape[0], 0)
    ax.set_xticks([])
    ax.set_yticks([])
    sizes = dict(mesh.shape)
    ax.set_xlabel(f"mesh axis '{names[-1]}' (size {sizes[names[-1]]})", fontsize=7)
    if names[0]:
        ax.set_ylabel(f"'{names[0]}' ({sizes[names[0]]})", fontsize=7)
    ax.set_title(f"mesh {mesh_label(mesh)}", fontsize=8)


def _enumerate2(a: Any) -> list[tuple[tuple[int, int], Any]]:
    return [((i, j), a[i, j]) for i in range(a.shape[0]) for j in range(a.shape[1])]


def show_layouts(arrays: dict[str, Any], mesh: Any = None, title: str = "",
                 cols: int = 4) -> Any:
    """A figure: the mesh, then each {name: jax.Array (or (shape, sharding))} as tiles (Lab 03)."""
    items = list(arrays.items())
    n = len(items) + (mesh is not None)
    ncols = min(cols, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 2.6 * nrows), squeeze=False)
    flat = list(axes.ravel())
    if mesh is not None:
        draw_mesh(flat.pop(0), mesh)
    for ax, (name, a) in zip(flat, items):
        shape, sh = (a.shape, a.sharding) if hasattr(a, "sharding") else a
        draw_sharding(ax, shape, sh, name)
    for ax in flat[len(items):]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def _held_by(shape: Sequence[int], sharding: Any, device: int) -> int:
    """Elements of an array of ``shape`` that ``device`` holds under ``sharding``."""
    for idx, ids in tiles(shape, sharding):
        if device in ids:
            return math.prod(s.stop - s.start for s in idx)
    return 0


def _share(held: int, total: int) -> str:
    """12 of 96 elements -> '1/8'; all -> 'all'; an uneven share -> '13%'."""
    if held == total:
        return "all"
    k = total / held if held else 0
    return f"1/{round(k)}" if held and abs(k - round(k)) < 1e-9 else f"{held / total:.0%}"


def plot_strategy_layouts(placed: Mapping[str, tuple[Mapping[str, Any], Any]], names: Sequence[str]) -> Figure:
    """Who holds what: the tokens and some weights of each strategy, as device tiles (Lab 03)."""
    # placed: strategy -> (params {name: jax.Array}, tokens jax.Array (batch, seq)); names: weights to draw.
    fig, axes = plt.subplots(len(placed), len(names) + 1, figsize=(15, 2.5 * len(placed)), squeeze=False)
    weight_share, token_share = [], []
    for row, (strategy, (params, tokens)) in zip(axes, placed.items()):
        draw_sharding(row[0], tokens.shape, tokens.sharding, f"{strategy}: tokens")
        for ax, k in zip(row[1:], names):
            draw_sharding(ax, params[k].shape, params[k].sharding, k)
        # What the first device keeps, in elements (dtype-free): of the drawn weights, and of the tokens.
        dev = min(_device_ids(tokens.sharding.device_set))
        held = sum(_held_by(params[k].shape, params[k].sharding, dev) for k in names)
        weight_share.append(f"{strategy} {_share(held, sum(math.prod(params[k].shape) for k in names))}")
        held = _held_by(tokens.shape, tokens.sharding, dev)
        token_share.append(f"{strategy} {_share(held, math.prod(tokens.shape))}")
    fig.suptitle(f"Who holds what, per device: of these weights {', '.join(weight_share)};\n"
                 f"of the tokens {', '.join(token_share)}", fontsize=11)
    fig.tight_layout()
    return fig


def plot_strategy_costs(rows: Sequence[Mapping[str, Any]], link_gbs: Mapping[str, float],
                        step_ms: Mapping[str, float], platform: str, n_devices: int, chip: str,
                        donated_mib: Mapping[str, float] | None = None) -> Figure:
    """Memory vs traffic, predicted communication per system, measured step time per strategy (Lab 03)."""
    # rows: one per strategy, the cell's table: "strategy", "ring KiB sent", "compiled MiB/device",
    #   "model MiB/device", and "<system> µs" for every system in link_gbs: the most GB/s one device pushes
    #   into a collective there (over all its chips; a smaller group, e.g. a line along one axis, may get less).
    # step_ms: measured median ms per step, by strategy and "single" (the unsharded reference).
    # donated_mib: peak MiB per device with the inputs donated (arguments + temporaries), for the strategies known.
    strategies = [r["strategy"] for r in rows]
    colors = {n: plt.get_cmap("tab10")(i) for i, n in enumerate(strategies)}
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.2))

    for r in rows:  # filled: the compiler's peak; hollow: labkit's model of it
        n, kib = r["strategy"], r["ring KiB sent"]
        ax1.scatter(kib, r["compiled MiB/device"], s=90, color=colors[n])
        ax1.scatter(kib, r["model MiB/device"], s=90, facecolors="none", edgecolors=colors[n])
        ax1.annotate(n, (kib, r["compiled MiB/device"]), textcoords="offset points", xytext=(7, -3))
    ax1.scatter([], [], color="gray", label="compiler (memory_analysis)")
    ax1.scatter([], [], facecolors="none", edgecolors="gray", label="labkit.sharding.memory_model")
    ax1.set_xlabel("communication per step per device (KiB sent, ring)")
    ax1.set_ylabel("peak memory per device, no donation (MiB)")
    ax1.set_ylim(0, None)
    ax1.margins(x=0.15)
    lo = min(rows, key=lambda r: r["compiled MiB/device"])
    hi = max(rows, key=lambda r: r["compiled MiB/device"])
    loud = max(rows, key=lambda r: r["ring KiB sent"])
    d = donated_mib or {}
    donated = (f", {d[hi['strategy']] / d[lo['strategy']]:.1f}x donated" if lo["strategy"] in d and hi["strategy"] in d
               else "")
    ax1.set_title(f"{lo['strategy']} needs {hi['compiled MiB/device'] / lo['compiled MiB/device']:.1f}x less memory "
                  f"than {hi['strategy']} (no donation{donated});\n{loud['strategy']} sends the most "
                  f"({loud['ring KiB sent']:,.0f} KiB)", fontsize=10)
    ax1.legend(fontsize=7, loc="lower right")

    width = 0.38  # one bar per system, side by side around each strategy's tick
    for k, (system, gbs) in enumerate(link_gbs.items()):
        ax2.bar(np.arange(len(rows)) + (k - (len(link_gbs) - 1) / 2) * width, [r[f"{system} µs"] for r in rows],
                width, label=f"{system} (up to {gbs:.0f} GB/s per device)")
    ax2.set_xticks(range(len(rows)), strategies)
    ax2.set_ylabel("predicted communication per step (µs)")
    slow, fast = min(link_gbs, key=link_gbs.get), max(link_gbs, key=link_gbs.get)
    ratios = [r[f"{slow} µs"] / r[f"{fast} µs"] for r in rows if r[f"{fast} µs"] > 0] or [1.0]
    lo_r, hi_r = min(ratios), max(ratios)   # per strategy: group sizes differ, and so do the links used
    span = f"{lo_r:.1f}x" if hi_r < 1.05 * lo_r else f"{lo_r:.1f}-{hi_r:.1f}x"
    ax2.set_title(f"Same bytes, faster links: {fast} communicates\n{span} faster than {slow} "
                  "(bandwidth only)", fontsize=10)
    ax2.legend(fontsize=7)

    names = list(step_ms)
    ax3.bar(names, [step_ms[n] for n in names], color=[colors.get(n, "gray") for n in names])
    ax3.set_ylabel("measured step time (ms)")
    where = "simulated CPU devices share this machine's cores" if platform == "cpu" else f"{n_devices} x {chip}"
    quick, slowest = min(names, key=step_ms.get), max(names, key=step_ms.get)
    ranked = (f"{quick} fastest ({step_ms[quick]:.1f} ms), {slowest} slowest ({step_ms[slowest]:.1f} ms)"
              if platform != "cpu" else "step times, not a ranking (no interconnect, one set of cores)")
    ax3.set_title(f"Measured here ({where}):\n{ranked}", fontsize=10)
    fig.tight_layout()
    return fig


def plot_collective_fit(points: Mapping[str, Sequence[Any]], fits: Mapping[str, Any],
                        predicted: Mapping[str, Sequence[float]] | None = None, where: str = "",
                        fixed: Mapping[str, Any] | None = None) -> Figure:
    """Measured collective time vs bytes sent, the fitted alpha + S / B, and a topology's prediction (Lab 03)."""
    # points: {kind: [comm_bench.Point]}; fits: {kind: comm_bench.Fit}; predicted: {kind: seconds per point};
    # fixed: {kind: comm_bench.FixedCost}: when given, the title's fixed-cost clause is its verdict, not the growth.
    # A fit covers its kind's first len - dropped points (comm_bench.fit_model keeps a prefix): its line is drawn
    # over those only, the points left out are hollow squares, and a fit the data reject is a grey dotted line.
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    for i, (kind, pts) in enumerate(points.items()):
        color = plt.get_cmap("tab10")(i)
        f = fits[kind]
        kept = max(len(pts) - f.dropped, 1)  # the prefix its fit used
        s = np.array([p.sent_bytes for p in pts])
        t = np.array([p.seconds for p in pts]) * 1e6  # µs
        err = np.array([p.spread * p.seconds / 2 for p in pts]) * 1e6  # ± half the interquartile range
        ax.errorbar(s[:kept], t[:kept], yerr=err[:kept], fmt="o", color=color, capsize=3,
                    label=f"{kind}: measured (median ± IQR/2)")
        if kept < len(pts):
            ax.errorbar(s[kept:], t[kept:], yerr=err[kept:], fmt="s", mfc="none", ms=9, color=color, capsize=3,
                        label=f"{kind}: left out of the fit (busbw fell)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        grid = np.geomspace(s[0], s[kept - 1], 50)
        line = [max(f.seconds(g), 1e-9) * 1e6 for g in grid]
        if f.accepted:
            unresolved = fixed is not None and kind in fixed and not fixed[kind].resolved
            alpha = f"alpha = {f.alpha_s * 1e6:.3g} µs" + (" (fit; fixed cost not resolved)" if unresolved else "")
            ax.loglog(grid, line, "-", color=color, label=f"{kind}: fit, {alpha}, B = {f.gbs:.3g} GB/s")
        else:
            ax.loglog(grid, line, ":", color="gray", label=f"{kind}: fit rejected (read neither alpha nor B)")
        if predicted and kind in predicted:
            ax.loglog(s, np.array(predicted[kind]) * 1e6, "--", color=color, label=f"{kind}: topology (bandwidth only)")
    ax.set_xlabel("bytes each device sends (S, ring model)")
    ax.set_ylabel("time per collective (µs)")
    # The takeaway rests on the series its own fit describes best (comm_bench.best_kind), not on
    # whichever grew most, over the points that fit used, and on its smallest and largest *steady* ones: a
    # noisy one (marked x) says little about the time, so it sets the ratio only when fewer than two are steady.
    best = comm_bench.best_kind(fits, points)
    used = points[best][:max(len(points[best]) - fits[best].dropped, 1)]  # the points its fit used
    steady = [p for p in used if p.spread <= bench.NOISY_SPREAD]
    ends = (steady[0], steady[-1]) if len(steady) >= 2 else (used[0], used[-1])
    grow = ends[1].seconds / ends[0].seconds
    span = ends[1].sent_bytes / ends[0].sent_bytes
    noisy = [(p.sent_bytes, p.seconds * 1e6) for pts in points.values() for p in pts
             if p.spread > bench.NOISY_SPREAD]
    if noisy:
        ax.scatter(*zip(*noisy), marker="x", s=110, color="black", zorder=5,
                   label=f"noisy: IQR > {bench.NOISY_SPREAD:.0%} of the median")
    why = ("a fixed cost per call hides the bytes of the small ones" if grow < span / 2
           else "time grows with the bytes: bandwidth-bound throughout")
    if fixed is not None and best in fixed and not fixed[best].resolved and grow < span / 2:
        why = ("time grows slower than the bytes, but no fixed cost per call is resolved "
               + ("(a larger call ran faster)" if fixed[best].falls else "from the noise"))
    if not fits[best].accepted:
        why = "neither fit accepted: the data reject alpha + S/B here; " + why
    left = len(points[best]) - len(used)
    flag = (f"; {left} left out of the fit" if left else "") + (
        f"; {len(noisy)} noisy point{'s' * (len(noisy) != 1)} marked x" if noisy else "")
    which = ("" if len(steady) == len(used) else " steady points" if len(steady) >= 2
             else " all points, noisy ones included")
    verdict = "the better fit" if fits[best].accepted else "no fit accepted"
    ax.set_title(f"{where}: {span:.0f}x the bytes took {grow:.0f}x the time ({best}{which}, {verdict}{flag})"
                 f"\n{why}", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
