"""labkit.sharding.topology: every topology's collective time against its closed form, by hand."""

from __future__ import annotations

import pytest

from labkit.runtime import hardware, systems
from labkit.sharding import topology as T
from labkit.sharding.collectives import Collective, bytes_sent

D = 1e9  # bytes: the full array of every collective below
AR8 = 2 * 7 / 8 * D  # bytes one device sends in an all-reduce over 8 (ring)


def test_v5e8_is_a_2x4_grid_without_wraparound() -> None:
    v5e8 = T.get("TPU v5e-8")
    assert v5e8.shape == (2, 4) and v5e8.wraparound == (False, False) and v5e8.chips == 8
    assert v5e8.link_gbs == 400 / 2 / 4  # bidirectional per chip / 2 directions / 4 links
    # All 8 chips: a one-way ring pays S / W; a snake through the 2x4 grid closes on itself -> S / 2W;
    # both axes at once (no wraparound: W each) -> S / 2W too.
    assert T.collective_time("all-reduce", D, 8, v5e8, "ring") == pytest.approx(AR8 / 50e9)
    assert T.collective_time("all-reduce", D, 8, v5e8, "bidirectional ring") == pytest.approx(AR8 / 100e9)
    assert T.collective_time("all-reduce", D, 8, v5e8, "torus") == pytest.approx(AR8 / 100e9)
    # The 4-chip axis is a line: the bidirectional ring gains nothing (S / W), twice a ring with wraparound.
    ar4 = 2 * 3 / 4 * D
    assert T.collective_time("all-reduce", D, 4, v5e8, "bidirectional ring") == pytest.approx(ar4 / 50e9)
    assert T.collective_time("all-reduce", D, 4, v5e8, "torus") is None  # one axis only
    assert T.collective_time("all-reduce", D, 8, v5e8, "switch") is None


def test_v5e256_and_v5p256_use_every_axis_with_wraparound() -> None:
    ar256 = 2 * 255 / 256 * D
    assert T.collective_time("all-reduce", D, 256, "TPU v5e-256", "torus") == pytest.approx(ar256 / 200e9)
    ag16 = 15 / 16 * D  # one 16-chip axis, a real ring: both directions
    assert T.collective_time("all-gather", D, 16, "TPU v5e-256", "bidirectional ring") == pytest.approx(ag16 / 100e9)
    v5p = T.get("TPU v5p-512")
    assert v5p.link_gbs == 1200 / 2 / 6 and v5p.shape == (4, 8, 8)
    assert T.collective_time("all-reduce", D, 256, v5p) == pytest.approx(ar256 / 600e9)  # 3 axes x 2 x 100


def test_switch_node_and_beyond_it() -> None:
    assert T.collective_time("all-reduce", D, 8, "8x H100 SXM", "switch") == pytest.approx(AR8 / 450e9)
    assert T.collective_time("reduce-scatter", D, 4, "8x H100 SXM") == pytest.approx(3 / 4 * D / 450e9)
    assert T.collective_time("all-reduce", D, 8, "8x H100 SXM", "torus") is None
    # 256 GPUs = 32 nodes x 8: all-reduce inside the node, then 1/8 of it across 32 nodes at 50 GB/s.
    want = AR8 / 450e9 + 2 * 31 / 32 * (D / 8) / 50e9
    assert T.collective_time("all-reduce", D, 256, "256x H100 SXM") == pytest.approx(want)
    assert T.collective_time("all-reduce", D, 256, "256x H100 SXM", "switch") is None


def test_price_rows_and_table_time() -> None:
    row = T.price("TPU v5e-8", "all-gather", D)
    assert row["chips"] == 8 and row["best"] == "bidirectional ring"
    assert row["best ms"] == pytest.approx(7 / 8 * D / 100e9 * 1e3) and row["switch ms"] is None
    shard = Collective("all-gather", "all-gather", "ag", (2,), "f32", 125, 8, ((0, 1, 2, 3, 4, 5, 6, 7),))
    red = Collective("all-reduce", "all-reduce", "ar", (250,), "f32", 1000, 4, ((0, 1, 2, 3),))
    got = T.table_time([shard, red], "8x H100 SXM", scale=0.5)
    assert got == pytest.approx((7 / 8 * 500 + 2 * 3 / 4 * 500) / 450e9)


def test_best_gbs_per_group_size() -> None:
    # Lab 03 prices its compiled collectives with these: on the v5e-8 all 8 chips get a closed snake (2W),
    # a 4-chip or 2-chip axis a line (W); through the H100 switch every group gets the full egress.
    assert [T.best_gbs("TPU v5e-8", n) for n in (8, 4, 2)] == [100.0, 50.0, 50.0]
    assert [T.best_gbs("8x H100 SXM", n) for n in (8, 4, 2)] == [450.0] * 3
    assert T.best_gbs("TPU v5e-256", 256) == 200.0  # 2 axes x 2 directions x 50
    with pytest.raises(ValueError, match="no single algorithm spans 16 chips"):
        T.best_gbs("256x H100 SXM", 16)  # two nodes: only the hierarchical form prices it


def test_bad_names_fail_clearly() -> None:
    with pytest.raises(ValueError, match="unknown topology"):
        T.get("TPU v9-8")
    with pytest.raises(ValueError, match="no set of torus axes"):
        T.collective_time("all-reduce", D, 3, "TPU v5e-8")
    with pytest.raises(ValueError, match="algorithm must be one of"):
        T.egress_gbs("TPU v5e-8", 8, "tree")


def test_every_topology_figure_has_a_source() -> None:
    for topo in systems.TOPOLOGIES.values():
        assert topo.chip in hardware.CHIPS and len(topo.shape) == len(topo.wraparound)
        for key in ("shape", "link") + (("network",) if topo.network_gbs else ()):
            assert topo.sources.get(key, "").strip(), f"{topo.name}: no source for {key}"


# ------------------------------------------------------------------ bad numbers are refused, not priced

V5E8 = "TPU v5e-8"


@pytest.mark.parametrize(("call", "err", "match"), [
    (lambda: T.collective_time("all-reduce", -2**30, 8, V5E8), ValueError,
     r"array_bytes must be .*>= 0, got -1073741824"),
    (lambda: T.collective_time("all-reduce", float("nan"), 8, V5E8), ValueError, r"array_bytes .*got nan"),
    (lambda: T.collective_time("all-reduce", float("inf"), 8, V5E8), ValueError, r"array_bytes .*got inf"),
    (lambda: T.collective_time("all-reduce", "1e9", 8, V5E8), TypeError, r"array_bytes .*got '1e9' \(str\)"),
    (lambda: T.collective_time("all-reduce", D, 0, V5E8), ValueError, r"n must be >= 1, got 0; e.g. n=8"),
    (lambda: T.collective_time("all-reduce", D, -8, V5E8), ValueError, r"n must be >= 1, got -8"),
    (lambda: T.collective_time("all-reduce", D, 2.5, V5E8), TypeError, r"n must be a whole number >= 1, got 2.5"),
    (lambda: T.collective_time("broadcast", D, 1, V5E8), ValueError, r"unknown collective 'broadcast'"),
    (lambda: T.collective_time("all-reduce", D, 1, V5E8, "tree"), ValueError, r"algorithm must be 'best' or .*'tree'"),
    (lambda: T.price(V5E8, "all-reduce", -5), ValueError, r"array_bytes must be .*>= 0, got -5"),
    (lambda: T.price(V5E8, "all-reduce", D, n=0), ValueError, r"n must be >= 1, got 0"),
    (lambda: T.price("256x H100 SXM", "all-reduce", D, n=12), ValueError, r"no algorithm prices a group of n=12 chips"),
    (lambda: T.table_time(None, V5E8), TypeError, r"list of Collective.*got None"),
    (lambda: T.table_time([], V5E8, scale=-1), ValueError, r"scale must be a finite number > 0, got -1"),
    (lambda: T.get(["TPU v5e-8"]), ValueError, r"unknown topology \['TPU v5e-8'\]"),
])
def test_bad_input_names_the_value(call, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        call()


def test_empty_arrays_and_groups_of_one_cost_nothing() -> None:
    # 0 bytes is a real (empty) array and one chip sends nothing: both price at 0 s, not an error.
    assert T.collective_time("all-reduce", 0, 8, V5E8) == 0.0
    assert T.collective_time("all-gather", D, 1, V5E8) == 0.0
    assert T.price(V5E8, "all-reduce", 0)["best ms"] == 0.0
    assert T.table_time([], V5E8) == 0.0


def test_lab03_model_claims_from_the_spec_table() -> None:
    # Lab 03 prints these; they are functions of the spec table's link figures only, so they are checked here.
    gib = 2**30
    line = T.price("TPU v5e-8", "all-reduce", gib, n=4)
    assert line["bidirectional ring ms"] == line["ring ms"]  # a line: both directions share each link
    assert T.collective_time("all-reduce", gib, 16, "TPU v5e-256", "bidirectional ring") < line["ring ms"] / 1e3
    best = {k: T.price(k, "all-reduce", gib)["best ms"] for k in ("8x H100 SXM", "256x H100 SXM", "TPU v5e-8", "TPU v5e-256")}
    assert best["256x H100 SXM"] / best["8x H100 SXM"] > 1 > best["TPU v5e-256"] / best["TPU v5e-8"]
    # Per byte, every group of the v5e-8 is slower than the H100 switch; its 4- and 2-chip lines slower than its ring.
    assert all(T.best_gbs("TPU v5e-8", n) < T.best_gbs("8x H100 SXM", n) for n in (8, 4, 2))
    assert T.best_gbs("TPU v5e-8", 4) < T.best_gbs("TPU v5e-8", 8) and T.best_gbs("TPU v5e-8", 2) < T.best_gbs("TPU v5e-8", 8)


def test_an_all_to_all_on_a_ring_or_torus_is_bisection_bound() -> None:
    """A cold read: an all-to-all was priced by its bytes sent, 'like a ring', though on a ring most chunks cross
    several hops. Hand counts: half the group sends n/2 x D/n to the other half, n D / 4 bytes each way."""
    D = 2**30
    # v5e-8 (2x4 grid, no wraparound): the halving cut crosses the 4-long axis on its 2 rows: 2 links, 50 GB/s each way
    assert T.bisection_gbs("TPU v5e-8", 8) == 100.0
    assert T.collective_time("all-to-all", D, 8, "TPU v5e-8") == pytest.approx(8 * D / 4 / 100e9)  # 21.5 ms
    egress = bytes_sent("all-to-all", D, 8) / (T.best_gbs("TPU v5e-8", 8) * 1e9)  # 9.4 ms: what it was priced at
    assert T.collective_time("all-to-all", D, 8, "TPU v5e-8") / egress == pytest.approx(64 / 28)
    # The same by summing links: on a 4-chip line, the middle link carries {0, 1} -> {2, 3}: 2 x 2 x D/4 = D.
    assert T.collective_time("all-to-all", D, 4, "TPU v5e-8") == pytest.approx(D / 50e9)
    # v5e-256, a 16x16 torus with wraparound: 16 rings x 2 links cross the cut -> 32 x 50 GB/s; 8x the egress price
    assert T.bisection_gbs("TPU v5e-256", 256) == 1600.0
    t = T.collective_time("all-to-all", D, 256, "TPU v5e-256")
    assert t == pytest.approx(256 * D / 4 / 1600e9)
    assert t / (bytes_sent("all-to-all", D, 256) / (T.best_gbs("TPU v5e-256", 256) * 1e9)) == pytest.approx(8 * 256 / 255)
    # Through a switch every chunk is one hop: the egress price holds, and there is no bisection to ask for.
    assert T.collective_time("all-to-all", D, 8, "8x H100 SXM") == pytest.approx(7 / 8 * D / 450e9)
    with pytest.raises(ValueError, match="is a switch"):
        T.bisection_gbs("8x H100 SXM", 8)
    # Other kinds are unchanged: a ring all-reduce's links each carry exactly its bytes sent.
    assert T.collective_time("all-reduce", D, 8, "TPU v5e-8") == pytest.approx(2 * 7 / 8 * D / 100e9)
