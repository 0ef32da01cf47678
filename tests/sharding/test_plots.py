"""Tests for labkit.sharding.plots' strategy pictures (Lab 03): each on small hand-made inputs.

The mesh and layout drawings (``show_layouts``, ``tiles``) are tested on real 8-device shardings in
tests/sharding/test_layouts.py. Here the shardings are hand-made stand-ins (the three things the
drawing reads: ``spec``, ``device_set``, ``devices_indices_map``), so no JAX devices are needed, and
each check can fail: titles carry the takeaway computed from the inputs, axes their units, and the
number of panels, points and bars follows the inputs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from labkit.sharding import plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@dataclass(frozen=True)
class Dev:
    id: int


class RowSharding:
    """Dim 0 split into ``ways`` row blocks over ``n`` devices (each block on n / ways of them)."""

    def __init__(self, n: int, ways: int) -> None:
        self.n, self.ways = n, ways
        self.spec = ("data", None) if ways > 1 else ()
        self.device_set = {Dev(i) for i in range(n)}

    def devices_indices_map(self, shape: tuple[int, ...]) -> dict[Dev, tuple[slice, ...]]:
        rows = shape[0] // self.ways
        return {Dev(i): (slice(i % self.ways * rows, (i % self.ways + 1) * rows),) + (slice(None),) * (len(shape) - 1)
                for i in range(self.n)}


@dataclass
class Arr:
    shape: tuple[int, ...]
    sharding: Any


def test_strategy_layouts_one_row_per_strategy_and_the_shares_in_the_title():
    def strategy(w_ways: int, v_ways: int, token_ways: int) -> tuple[dict[str, Arr], Arr]:
        """4 devices: weights w (8, 4) and v (4, 4), tokens (4, 6), each split by rows."""
        return ({"w": Arr((8, 4), RowSharding(4, w_ways)), "v": Arr((4, 4), RowSharding(4, v_ways))},
                Arr((4, 6), RowSharding(4, token_ways)))

    placed = {"dp": strategy(1, 1, 4), "fsdp": strategy(4, 4, 4), "mixed": strategy(2, 1, 1)}
    fig = plots.plot_strategy_layouts(placed, ["w", "v"])
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 3 * 3  # a row per strategy: the tokens, then each weight
    title = fig._suptitle.get_text()
    # mixed: w (32 elements) split 2 ways -> 16, v (16) whole -> 16: 32 of 48 = 67 %
    assert "of these weights dp all, fsdp 1/4, mixed 67%;" in title
    assert "of the tokens dp 1/4, fsdp 1/4, mixed all" in title
    assert fig.axes[0].get_title().startswith("dp: tokens (4, 6)")
    assert len([p for p in fig.axes[3].patches if isinstance(p, Rectangle)]) == 4  # fsdp's tokens: 4 tiles
    assert "size" in fig.axes[0].get_xlabel()  # the axis says which dim and how long it is


@dataclass(frozen=True)
class Mesh:
    shape: dict[str, int]


class MeshRowSharding(RowSharding):
    """A RowSharding that, like a NamedSharding, knows its mesh."""

    def __init__(self, n: int, ways: int, mesh: Mesh) -> None:
        super().__init__(n, ways)
        self.mesh = mesh


def test_each_layout_panel_names_its_mesh():
    # The same array on an (8,) and a (2, 4) mesh: only the title tells the reader which mesh made the stripes.
    one_d = MeshRowSharding(8, 8, Mesh({"data": 8}))
    two_d = MeshRowSharding(8, 2, Mesh({"data": 2, "model": 4}))
    fig, (a, b) = plt.subplots(1, 2)
    plots.draw_sharding(a, (16, 32), one_d, "batch split")
    plots.draw_sharding(b, (16, 32), two_d, "2-D")
    assert a.get_title().endswith("on mesh (data=8)") and b.get_title().endswith("on mesh (data=2, model=4)")
    plots.draw_sharding(a, (16, 32), RowSharding(8, 8), "plain")  # a sharding without one: no mesh line
    assert "mesh" not in a.get_title()


def _rows() -> list[dict[str, Any]]:
    return [
        {"strategy": "dp", "ring KiB sent": 100.0, "compiled MiB/device": 10.0, "model MiB/device": 11.0,
         "slow ring µs": 40.0, "fast switch µs": 10.0},
        {"strategy": "fsdp", "ring KiB sent": 100.0, "compiled MiB/device": 2.5, "model MiB/device": 3.0,
         "slow ring µs": 40.0, "fast switch µs": 10.0},
        {"strategy": "tp", "ring KiB sent": 1500.0, "compiled MiB/device": 5.0, "model MiB/device": 4.0,
         "slow ring µs": 60.0, "fast switch µs": 15.0},
    ]


def test_strategy_costs_titles_carry_memory_traffic_link_and_timing_takeaways():
    step_ms = {"single": 2.0, "dp": 3.0, "fsdp": 3.5, "tp": 6.0}
    fig = plots.plot_strategy_costs(_rows(), {"slow ring": 100.0, "fast switch": 400.0}, step_ms,
                                    platform="cpu", n_devices=8, chip="CPU")
    assert isinstance(fig, Figure)
    ax1, ax2, ax3 = fig.axes
    assert "fsdp needs 4.0x less memory than dp (no donation)" in ax1.get_title()  # Lab 03 prints the donated ratio
    assert "tp sends the most (1,500 KiB)" in ax1.get_title()
    assert ax1.get_xlabel() == "communication per step per device (KiB sent, ring)"
    assert ax1.get_ylabel() == "peak memory per device, no donation (MiB)"
    assert len(ax1.collections) == 2 * 3 + 2  # compiler and model point per strategy, two legend markers
    assert "fast switch communicates\n4.0x faster than slow ring" in ax2.get_title()
    assert ax2.get_ylabel() == "predicted communication per step (µs)"
    assert len(ax2.patches) == 2 * 3  # a bar per system and strategy
    assert [p.get_height() for p in ax2.patches[:3]] == [40.0, 40.0, 60.0]
    assert [t.get_text() for t in ax2.get_legend().get_texts()] == ["slow ring (up to 100 GB/s per device)",
                                                                      "fast switch (up to 400 GB/s per device)"]
    assert "simulated CPU devices" in ax3.get_title()
    # On a CPU the simulated devices share the cores: the panel shows step times and says it ranks nothing.
    assert "step times, not a ranking" in ax3.get_title() and "fastest" not in ax3.get_title()
    assert ax3.get_ylabel() == "measured step time (ms)"
    assert [p.get_height() for p in ax3.patches] == list(step_ms.values())


def test_strategy_costs_names_the_chips_off_the_cpu():
    fig = plots.plot_strategy_costs(_rows(), {"slow ring": 100.0, "fast switch": 400.0},
                                    {"dp": 1.0, "tp": 0.5}, platform="tpu", n_devices=8, chip="TPU v5e")
    assert "Measured here (8 x TPU v5e)" in fig.axes[2].get_title()
    assert "tp fastest (0.5 ms)" in fig.axes[2].get_title()


def test_link_title_gives_the_range_when_strategies_differ():
    rows = _rows()
    rows[2]["slow ring µs"] = 135.0  # tp's small groups run on slower links: 9x, not 4x
    fig = plots.plot_strategy_costs(rows, {"slow ring": 100.0, "fast switch": 400.0}, {"single": 2.0, "tp": 6.0},
                                    platform="cpu", n_devices=8, chip="CPU")
    assert "fast switch communicates\n4.0-9.0x faster than slow ring" in fig.axes[1].get_title()


def test_strategy_costs_title_gives_the_donated_ratio_too():
    """A cold read: the panel said 'fsdp needs 2.2x less memory (no donation)' while a practitioner donates (1.3x)."""
    fig = plots.plot_strategy_costs(_rows(), {"slow ring": 100.0, "fast switch": 400.0}, {"dp": 1.0},
                                    platform="cpu", n_devices=8, chip="CPU", donated_mib={"dp": 5.6, "fsdp": 4.2})
    assert "fsdp needs 4.0x less memory than dp (no donation, 1.3x donated)" in fig.axes[0].get_title()


def _pts(kind: str, times_us: list[float], spread: float = 0.05) -> list:
    from labkit.sharding import collectives as coll, comm_bench as cb

    sizes = [2**k for k in range(15, 15 + 2 * len(times_us), 2)]
    return [cb.Point(kind, 8, d, coll.bytes_sent(kind, d, 8), t * 1e-6, spread, 15) for d, t in zip(sizes, times_us)]


def test_collective_fit_draws_what_each_fit_used_and_greys_a_rejected_fit():
    """A cold read of the plot: the rejected all-reduce fit looked like the accepted one, the all-gather line ran
    across its excluded 8 MiB point, unmarked, and the title's '256x the bytes took 29x' ended on that point."""
    from labkit.measure import bench
    from labkit.sharding import comm_bench as cb

    pts = {"all-gather": _pts("all-gather", [486, 455, 768, 2701, 13880]),  # the last one's busbw fell
           "all-reduce": _pts("all-reduce", [732, 430, 794, 3728, 19290])}
    fits = {k: cb.fit_model(p) for k, p in pts.items()}
    assert fits["all-gather"].accepted and fits["all-gather"].dropped == 1 and not fits["all-reduce"].accepted
    floor_t = bench.Timing(tuple([188e-6] * 20), warmup=1)
    fixed = {k: cb.fixed_cost(p, floor_t) for k, p in pts.items()}
    assert fixed["all-reduce"].falls
    fixed["all-gather"] = cb.FixedCost("all-gather", 1e-6, 1e-6)  # pretend: not resolved, within the noise
    ax = plots.plot_collective_fit(pts, fits, where="x", fixed=fixed).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "all-reduce: fit rejected (read neither alpha nor B)" in labels
    assert any(t.startswith("all-gather: fit, alpha = ") and "(fit; fixed cost not resolved)" in t for t in labels)
    assert "all-gather: left out of the fit (busbw fell)" in labels
    lines = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    ag_fit = next(ln for k, ln in lines.items() if k.startswith("all-gather: fit"))
    ar_fit = lines["all-reduce: fit rejected (read neither alpha nor B)"]
    assert ar_fit.get_linestyle() == ":" and ar_fit.get_color() == "gray" and ag_fit.get_linestyle() == "-"
    # each line spans only its fitted points: the all-gather's ends at its 4th point, not the dropped 8 MiB one
    assert max(ag_fit.get_xdata()) == pytest.approx(pts["all-gather"][3].sent_bytes)
    title = ax.get_title()
    kept = pts["all-gather"][:4]  # the title reads the better (accepted) fit, over the points it used
    grow, span = kept[-1].seconds / kept[0].seconds, kept[-1].sent_bytes / kept[0].sent_bytes
    assert f"{span:.0f}x the bytes took {grow:.0f}x the time (all-gather, the better fit; 1 left out of the fit" in title


def test_collective_fit_title_says_when_no_fit_is_accepted():
    from labkit.sharding import comm_bench as cb

    pts = {k: _pts(k, [500, 300, 900, 600]) for k in ("all-gather", "all-reduce")}  # busbw falls at once
    fits = {k: cb.fit_model(p) for k, p in pts.items()}
    assert not any(f.accepted for f in fits.values())
    title = plots.plot_collective_fit(pts, fits, where="x").axes[0].get_title()
    assert "no fit accepted" in title and "neither fit accepted: the data reject alpha + S/B here" in title
