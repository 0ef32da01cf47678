"""Pictures of meshes and layouts: which device holds which tile of an array (Lab 03).

``jax.debug.visualize_array_sharding`` prints a text table through ``rich``; these draw the
same information with matplotlib, for any array (1-D, 2-D or more) and any sharding, so
layouts can sit side by side in one figure with the mesh they are laid out on.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle


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

    Replicated tiles (held by several devices) are hatched. Arrays with more than two dims are
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
    ax.set_title(f"{name} {shape}\nP{tuple(spec)} {drawn}".strip(), fontsize=8)
    ax.set_xlabel(f"dim {c} (size {shape[c]})", fontsize=7)
    ax.set_ylabel(f"dim {r} (size {rows})" if r is not None else "", fontsize=7)
    ax.set_xticks([0, shape[c]])  # only the extents: tick labels are most of the drawing time
    ax.set_yticks([0, rows] if r is not None else [])  # a 1-D array is one row
    ax.tick_params(labelsize=6)


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
    ax.set_title(f"mesh {tuple(sizes.values())}", fontsize=8)


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
