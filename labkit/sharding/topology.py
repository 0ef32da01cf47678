"""What one collective costs on a real topology: ring, bidirectional ring, torus, switch (Lab 03).

Closed forms, bandwidth only (per-hop latency of ~1 µs ignored). A device must *send* S bytes
(:func:`labkit.sharding.collectives.bytes_sent`: (n-1)/n x D for an all-gather or a reduce-scatter,
2(n-1)/n x D for an all-reduce, D the full array) and the time is S over the bandwidth it can push
into the collective, W one way per link (``labkit.runtime.systems.TOPOLOGIES``):

- **ring**: every hop is one link in one direction: T = S / W. On a line (no wraparound) the
  way back reuses the reverse links, so a one-way ring still costs S / W.
- **bidirectional ring**: half the data each way: T = S / 2W on a ring (an axis with wraparound,
  or a snake through a 2-D grid with an even side); on a line both rings share every link: S / W.
- **torus** (any multi-axis torus, all axes at once): T = S / sum over the axes of 2W
  (wraparound) or W (line): a v5e-256 16x16 gets 4W, a v5p 4x8x8 6W, a v5e-8 2x4 only 2W.
- **switch** (NVSwitch): every GPU reaches every other; its egress B limits: T = S / B.
- **hierarchical** (switch nodes joined by a network, e.g. InfiniBand): inside the node over
  the switch, then 1/g of the array across the m nodes over each GPU's own NIC:
  T = f(g-1)/g D / B + f(m-1)/m (D/g) / B_net, f = 2 for an all-reduce and 1 otherwise.

An **all-to-all** sends each peer its own 1/n of D, so on a ring or torus most chunks cross several
hops and the links, not the egress, limit it: half the group sends n/2 x D/n to the other half,
n D/4 bytes each way across the cut that halves the group (:func:`bisection_gbs`). It costs at least
that over the bisection's bandwidth (2.3x the egress price on a v5e-8, 8x on a 16x16 torus); through a
switch every chunk is one hop and the egress price holds.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Iterable

from labkit.gpt.data import check_count, check_real
from labkit.runtime import systems
from labkit.sharding.collectives import KINDS, Collective, bytes_sent, check_table

ALGORITHMS = ("ring", "bidirectional ring", "torus", "switch", "hierarchical")


def get(name: str | systems.Topology) -> systems.Topology:
    """The named topology of labkit.runtime.systems.TOPOLOGIES; ValueError listing them (Lab 03)."""
    if isinstance(name, systems.Topology):
        return name
    if not isinstance(name, str) or name not in systems.TOPOLOGIES:
        raise ValueError(f"unknown topology {name!r}; known: {', '.join(systems.TOPOLOGIES)}")
    return systems.TOPOLOGIES[name]


def axes_for(topo: systems.Topology, n: int) -> tuple[int, ...]:
    """Torus axes (indices) a group of n chips spans: the fewest whose sizes multiply to n (Lab 03)."""
    real = [a for a, s in enumerate(topo.shape) if s > 1]
    for k in range(1, len(real) + 1):
        for combo in itertools.combinations(real, k):
            if math.prod(topo.shape[a] for a in combo) == n:
                return combo
    raise ValueError(f"{topo.name}: no set of torus axes {topo.shape} holds a group of {n} chips")


def _axis_gbs(topo: systems.Topology, a: int) -> float:
    """GB/s one device pushes along axis a with both directions: 2W on a ring, W on a line."""
    return topo.link_gbs * (2 if topo.wraparound[a] else 1)


def egress_gbs(topo: str | systems.Topology, n: int, algorithm: str) -> float | None:
    """GB/s one device pushes into a collective over n chips with algorithm; None if n/a (Lab 03)."""
    topo = get(topo)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if topo.kind == "switch":
        if n > topo.shape[0]:
            return None  # beyond one node: only the hierarchical form applies
        return topo.link_gbs if algorithm in ("ring", "bidirectional ring", "switch") else None
    axes = axes_for(topo, n)
    if algorithm == "ring":
        return topo.link_gbs
    if algorithm == "bidirectional ring":
        if len(axes) == 1:
            return _axis_gbs(topo, axes[0])
        # A ring snaking through a grid closes on itself when one side is even: both directions.
        snake = any(topo.shape[a] % 2 == 0 for a in axes)
        return 2 * topo.link_gbs if snake or any(topo.wraparound[a] for a in axes) else topo.link_gbs
    if algorithm == "torus" and len(axes) >= 2:
        return sum(_axis_gbs(topo, a) for a in axes)
    return None


def best_gbs(topo: str | systems.Topology, n: int) -> float:
    """The most GB/s one device pushes into a collective over n chips, by any algorithm that applies (Lab 03)."""
    rates = [g for a in ALGORITHMS if (g := egress_gbs(topo, n, a)) is not None]
    if not rates:
        raise ValueError(f"{get(topo).name}: no single algorithm spans {n} chips (price it with collective_time)")
    return max(rates)


def bisection_gbs(topo: str | systems.Topology, n: int) -> float:
    """(Lab 03) GB/s one way across the cut that halves a group of n chips of a ring or torus (not a switch)."""
    topo = get(topo)
    if topo.kind == "switch":
        raise ValueError(f"{topo.name} is a switch: every chip reaches every other in one hop, no bisection limits it")
    axes = axes_for(topo, n)
    a = max(axes, key=lambda i: topo.shape[i])  # cut across the group's longest axis: the fewest links
    # n / k rings (or lines) of that axis cross the cut: 2 links each with wraparound, 1 on a line; W one way each
    return n // topo.shape[a] * (2 if topo.wraparound[a] else 1) * topo.link_gbs


def collective_time(kind: str, array_bytes: float, n: int, topo: str | systems.Topology,
                    algorithm: str = "best") -> float | None:
    """Seconds for one collective about a D-byte array over n chips (bandwidth only) (Lab 03).

    ``algorithm="best"``: the fastest that applies. None if the algorithm does not apply here.
    """
    topo = get(topo)
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r}; known: {', '.join(KINDS)}")
    if algorithm != "best" and algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be 'best' or one of {ALGORITHMS}, got {algorithm!r}")
    array_bytes = check_real(array_bytes, "array_bytes", 0, closed="low", hint="; D in bytes, e.g. 2**30 for 1 GiB")
    if check_count(n, "n", 1, example=topo.chips) == 1:  # n: chips in the group; a group of one sends nothing
        return 0.0
    if algorithm == "best":
        times = [t for a in ALGORITHMS if (t := collective_time(kind, array_bytes, n, topo, a)) is not None]
        if not times:
            raise ValueError(f"{topo.name}: no algorithm prices a group of {n} chips")
        return min(times)
    if algorithm == "hierarchical":
        g = topo.shape[0]
        if topo.kind != "switch" or topo.nodes == 1 or n <= g or n % g or not topo.network_gbs:
            return None
        m = n // g  # nodes taking part; each GPU sends 1/g of the array over its own NIC
        inside = bytes_sent(kind, array_bytes, g) / (topo.link_gbs * 1e9)
        across = bytes_sent(kind, array_bytes / g, m) / (topo.network_gbs * 1e9)
        return inside + across
    gbs = egress_gbs(topo, n, algorithm)
    if gbs is None:
        return None
    t = bytes_sent(kind, array_bytes, n) / (gbs * 1e9)
    if kind == "all-to-all" and topo.kind != "switch":  # n D / 4 bytes each way across the halving cut
        t = max(t, n * array_bytes / 4 / (bisection_gbs(topo, n) * 1e9))
    return t


def price(topo: str | systems.Topology, kind: str, array_bytes: float,
          n: int | None = None) -> dict[str, Any]:
    """A table row: seconds per algorithm (None where it does not apply) and the best (Lab 03)."""
    topo = get(topo)
    n = topo.chips if n is None else n
    times = {a: collective_time(kind, array_bytes, n, topo, a) for a in ALGORITHMS}
    if all(t is None for t in times.values()):
        raise ValueError(f"{topo.name}: no algorithm prices a group of n={n} chips; e.g. n={topo.chips}")
    best = min((a for a in times if times[a] is not None), key=times.get)
    return {"topology": topo.name, "chips": n, "kind": kind, **{f"{a} ms": None if t is None else t * 1e3
                                                                 for a, t in times.items()},
            "best": best, "best ms": times[best] * 1e3}


def table_time(table: Iterable[Collective], topo: str | systems.Topology,
               scale: float = 1.0) -> float:
    """Seconds of a compiled program's collectives on topo, each by its best algorithm (Lab 03).

    ``scale`` multiplies every array (e.g. 0.5: the fp32 arrays compiled here priced as bf16).
    """
    scale = check_real(scale, "scale", 0, hint="; e.g. scale=0.5 prices fp32 arrays as bf16")
    total = 0.0
    for c in check_table(table):
        if c.kind == "collective-permute":
            total += c.array_bytes * scale / (get(topo).link_gbs * 1e9)  # one hop, one link
        else:  # an all-to-all on a ring or torus: at least its bisection time (collective_time)
            total += collective_time(c.kind, c.array_bytes * scale, c.group_size, topo)
    return total
