"""(Lab 01) A measured shape sweep in interleaved rounds, and how far a ratio of two of its shapes can be trusted.

Timing one shape after another lets the machine's drift (another program taking the cores, a clock
ramping down) land on some shapes and not others: one Lab 01 CPU run measured the same 256^3 matmul
at 0.060 TFLOP/s in one sweep and 0.093 in the next. Here each round times every shape once, the
rounds alternate direction (forward, backward, ...) so a drift over a round hits both ends alike,
and a ratio of two shapes is taken round by round: its spread across rounds is the noise to beat.

Reading the sweep: `edge_verdict` names what one past a tile edge and the next aligned size show,
`time_floors` finds the stretches whose time per call is flat (a floor, not a shape effect),
`floor_kinds` puts each size of any sweep on such a floor or not, `floor_reading` says what a ratio
over an edge still tells when some of its sizes sit on one, and `expected_cliff` says where Lab 01
asserts a cliff on a GPU or a TPU.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from labkit.matmul import mxu

Shape = tuple[int, int, int]  # (M, N, K) of an (M, K) @ (K, N) matmul


@dataclass(frozen=True)
class Ratio:
    """(Lab 01) The speed of one shape over another's, round by round."""
    per_round: tuple[float, ...]  # FLOP/s of the shape / FLOP/s of the reference shape, one per round

    @property
    def median(self) -> float:
        """(Lab 01) The median of the rounds' ratios: the figure reported."""
        return float(np.median(self.per_round))

    @property
    def spread(self) -> float:
        """(Lab 01) Highest minus lowest ratio over the rounds: how much the machine moved it."""
        return float(max(self.per_round) - min(self.per_round))

    def clears(self, noise: float) -> bool:
        """(Lab 01) Whether the effect |1 - median| is larger than `noise` (a spread or a disagreement)."""
        return abs(1 - self.median) > noise


@dataclass(frozen=True)
class SweepRounds:
    """(Lab 01) FLOP/s of every shape of a sweep in every round."""
    shapes: tuple[Shape, ...]  # in the order given; a shape may appear twice (two sweeps sharing a point)
    flops_per_s: np.ndarray     # (rounds, shapes) FLOP/s

    @property
    def median(self) -> np.ndarray:
        """(Lab 01) FLOP/s per shape, the median over the rounds: (shapes,)."""
        return np.median(self.flops_per_s, axis=0)

    def ratio(self, i: int, over: int) -> Ratio:
        """(Lab 01) Speed of shape index `i` over shape index `over`, round by round."""
        for name, j in (("i", i), ("over", over)):
            if isinstance(j, bool) or not isinstance(j, Integral) or not -len(self.shapes) <= j < len(self.shapes):
                raise ValueError(f"{name} must be an index into the {len(self.shapes)} shapes, got {j!r}")
        return Ratio(tuple(float(x) for x in self.flops_per_s[:, i] / self.flops_per_s[:, over]))


def measure_rounds(shapes: Sequence[Shape], time_one: Callable[[int, int, int], float], rounds: int,
                   desc: str = "") -> SweepRounds:
    """(Lab 01) Time every shape once per round, alternating direction; `time_one(m, n, k)` returns FLOP/s."""
    if isinstance(rounds, bool) or not isinstance(rounds, Integral) or rounds < 2:
        raise ValueError(f"rounds must be a whole number >= 2 (one round has no spread to judge a ratio by), "
                         f"got {rounds!r}")
    shapes = tuple(tuple(int(d) for d in s) for s in shapes)
    if not shapes or any(len(s) != 3 or min(s) < 1 for s in shapes):
        raise ValueError(f"shapes must be a non-empty list of (M, N, K) with positive sizes, got {shapes!r}")
    from labkit.measure.bench import progress  # a progress bar when the sweep is long

    out = np.empty((rounds, len(shapes)))  # FLOP/s
    order = [(r, i) for r in range(rounds)
             for i in (range(len(shapes)) if r % 2 == 0 else reversed(range(len(shapes))))]
    for r, i in progress(order, desc=desc or f"{len(shapes)} shapes x {rounds} rounds"):
        rate = float(time_one(*shapes[i]))
        if not np.isfinite(rate) or rate <= 0:
            raise ValueError(f"time_one{shapes[i]} returned {rate!r}: it must return the shape's FLOP/s (> 0)")
        out[r, i] = rate
    return SweepRounds(shapes, out)


def edge_verdict(odd: Ratio, aligned: Ratio, noise: float) -> str:
    """(Lab 01) What one past an edge (`odd`) and the next aligned size (`aligned`) show, both over the edge's speed.

    `noise` is what the machine alone does to a ratio (the rounds' spread, a shape's disagreement with
    itself); a verdict needs an effect bigger than it, else "inconclusive". A 10% drop counts as a cliff.
    """
    if odd.median < 0.9 and not odd.clears(noise):
        return f"inconclusive: the noise ({noise:.2f}) exceeds the effect"
    if odd.median >= 0.9:
        return (f"inconclusive: the noise ({noise:.2f}) hides a 10% step" if noise >= 0.1
                else "no cliff: one past the edge is not 10% slower")
    if aligned.median - odd.median > max(0.1 * odd.median, noise):
        # Recovering from 0.16x to 0.54x (cuBLAS on an H100 at N = 129 / 136 over 128) is alignment, but the
        # aligned size is still far slower than the edge. Not necessarily a tile step: N = 192, also past 128
        # and padded to 256, ran 1.48x faster than 128 in the same sweep, so a kernel that wants rows aligned
        # wider than 272 bytes fits the data as well.
        if aligned.median < 0.9 and aligned.clears(noise):
            return ("partial recovery: the aligned size is still far slower (a kernel that wants wider alignment, "
                    "or a tile step)")
        return "alignment: the aligned size recovers"
    if aligned.clears(noise):
        return "a step: the aligned size is as slow (a wider tile or cache block)"
    return f"inconclusive: the aligned size is within the noise ({noise:.2f}) of both"


@dataclass(frozen=True)
class Floor:
    """(Lab 01) A stretch of a sweep whose time per call stays flat over several times the work: no shape effect."""
    start: int         # index of the first size on the floor
    stop: int          # one past the last
    work_ratio: float  # work of the last size on it over the first's
    kind: str          # "memory floor" or "latency floor"
    seconds: tuple[float, ...] = field(default=(), compare=False)  # the calls on it, s per call
    within: float = 2.0  # its slowest call is at most this many times its fastest ("flat")

    def describe(self) -> str:
        """(Lab 01) What the floor is, in the words the lab prints."""
        return f"{self.kind} (time per call within {self.within:g}x over {self.work_ratio:.0f}x the work)"


def time_floors(work: Sequence[float], seconds: Sequence[float], *, memory_s: Sequence[float] | None = None,
                within: float = 2.0, min_work: float = 8.0, busy: float = 0.5) -> list[Floor]:
    """(Lab 01) Stretches of a sweep whose seconds per call stay within `within`x of each other over >= min_work x the work.

    There the time is a fixed cost per call (launch, threads starting or waiting on each other: a latency
    floor), or the trip of the operands every size shares (a weight read once for any batch: a memory
    floor, when `memory_s`, each size's operands over the spec bandwidth in seconds, is within `within`x of
    the first size's time); either way the FLOP/s there say nothing about the shape. 8x the work in at most
    2x the time (4x the FLOP/s) is more than a noisy machine does to one point: a floor spans three sizes of
    a sweep in steps of 4. A size running above `busy` x the sweep's best FLOP/s is doing the work at speed,
    never a floor: on an H100, cuBLAS ran M = 512 in 1.4x M = 1's time at 0.91 of its best, and JAX's
    M = 1024 and 1025 (the wave edge) near 48 and 61 µs at 0.9 of its best. `busy` = 1 / `within`: on a
    floor the work at the best rate takes at most half of each call, the floor at least half (an earlier
    0.3 left out cuBLAS's M = 128 at 0.34 of its best, 17.7 µs a call beside 16.7 at M = 64).
    """
    work, seconds = np.asarray(work, float), np.asarray(seconds, float)  # FLOP per call, s per call
    if work.shape != seconds.shape or work.ndim != 1 or not len(work) or np.any(work <= 0) or np.any(seconds <= 0):
        raise ValueError(f"work and seconds must be equally long lists of positive numbers, got {work!r}, {seconds!r}")
    if np.any(np.diff(work) <= 0):
        raise ValueError(f"work must grow from one size to the next (a sweep in order), got {work!r}")
    rate = work / seconds  # FLOP/s
    slow = rate <= busy * rate.max()  # (sizes,) bool: far from the sweep's best, where a floor can hide a shape
    floors, start = [], 0
    while start < len(work):
        if not slow[start]:
            start += 1
            continue
        stop = start + 1  # grow the stretch while its slowest call is within `within`x of its fastest
        while (stop < len(work) and slow[stop]
               and seconds[start:stop + 1].max() <= within * seconds[start:stop + 1].min()):
            stop += 1
        ratio = float(work[stop - 1] / work[start])
        if ratio >= min_work:  # time that grows with the work is no floor
            memory = memory_s is not None and seconds[start] <= within * memory_s[start]
            floors.append(Floor(start, stop, ratio, "memory floor" if memory else "latency floor",
                                tuple(float(x) for x in seconds[start:stop]), within))
            start = stop
        else:
            start += 1
    return floors


def on_floor(floors: Sequence[Floor], n: int) -> np.ndarray:
    """(Lab 01) Which of a sweep's `n` sizes lie on one of `floors`: (n,) bool."""
    return np.array([k is not None for k in kinds_on(floors, n)], bool)


def kinds_on(floors: Sequence[Floor], n: int) -> list[str | None]:
    """(Lab 01) Each of a sweep's `n` sizes' floor kind from `floors` (its own stretches), or None: `on_floor` by kind."""
    kinds: list[str | None] = [None] * n
    for f in floors:
        kinds[f.start:f.stop] = [f.kind] * (f.stop - f.start)
    return kinds


def floor_kinds(work: Sequence[float], seconds: Sequence[float], *, floors: Sequence[Floor] = (),
                memory_s: Sequence[float] | None = None, within: float = 2.0, busy: float = 0.5) -> list[str | None]:
    """(Lab 01) Each size's floor kind ("memory floor", "latency floor") or None: this sweep's and the joined ones.

    First the floors `time_floors` finds in this sweep. Then a size off them joins a floor of the same
    framework (`floors`, another sweep's, or this one's) by the tests that found it: a latency floor when
    its call keeps that floor's calls within `within`x of each other (a fixed cost per call is the same
    for every shape), a memory floor when its call is within `within`x of its own operands' read
    (`memory_s`). Either only at most `busy` x this sweep's best FLOP/s. So an N sweep whose small sizes
    span too little work to find a floor of their own (128 to 512: 4x) still gets the batch sweep's.
    """
    work, seconds = np.asarray(work, float), np.asarray(seconds, float)
    own = time_floors(work, seconds, memory_s=memory_s, within=within, busy=busy)  # checks the input
    kinds = kinds_on(own, len(work))
    rate = work / seconds  # FLOP/s

    def joins(f: Floor, i: int) -> bool:
        if f.kind == "memory floor":
            return memory_s is not None and seconds[i] <= within * memory_s[i]
        calls = (*f.seconds, seconds[i])
        return bool(f.seconds) and max(calls) <= within * min(calls)

    for i in np.flatnonzero(rate <= busy * rate.max()):
        if kinds[i] is None:
            kinds[i] = next((f.kind for f in (*own, *floors) if joins(f, int(i))), None)
    return kinds


def describe_floor(f: Floor, sizes: Sequence[int], seconds: Sequence[float],
                   memory_s: Sequence[float] | None = None, name: str = "M") -> str:
    """(Lab 01) A floor in the words Lab 01 prints: its kind, its ends' calls, and how much the operands' read explains.

    `seconds`: the sweep's seconds per call; `memory_s`: each size's operands over the spec bandwidth (None:
    no bandwidth to compare with, a CPU). A memory floor is named from half the call; the rest of each call
    is the read running below spec bandwidth, or a fixed cost per call.
    """
    t = lambda s: f"{s * 1e3:.3g} ms" if s >= 1e-3 else f"{s * 1e6:.3g} us"  # noqa: E731
    ends = (f"{t(seconds[f.start])} per call at {name} = {sizes[f.start]}, "
            f"{t(seconds[f.stop - 1])} at {name} = {sizes[f.stop - 1]}")
    read = "" if memory_s is None else "; the operands' read at spec bandwidth explains " + " and ".join(
        f"{memory_s[i] / seconds[i]:.0%}" for i in dict.fromkeys((f.start, f.stop - 1))) + " of " + (
        "those calls" if f.stop - f.start > 1 else "that call")
    what = ("the rest: the read below spec bandwidth, or a fixed cost per call" if f.kind == "memory floor"
            else "a fixed cost per call sets the time")
    return f"{f.describe()}: {ends}{read} ({what}): no shape to read there"


def floor_sizes(kinds: Sequence[str | None], sizes: Sequence[int], skip: Sequence[Floor] = ()) -> dict[str, list[int]]:
    """(Lab 01) The sizes on each kind of floor, {kind: sizes}, leaving out those on `skip` (floors already named)."""
    named = {i for f in skip for i in range(f.start, f.stop)}
    out: dict[str, list[int]] = {}
    for i, (k, size) in enumerate(zip(kinds, sizes, strict=True)):
        if k and i not in named:
            out.setdefault(k, []).append(size)
    return out


def floor_reading(kinds: Mapping[str, str | None], edge: str) -> tuple[bool, str]:
    """(Lab 01) Whether ratios over the size `edge` can be read, and a note saying why, when sizes sit on floors.

    `kinds` maps each size's printed name ("N=129"; the edge among them) to its floor kind or None. A size
    on a floor took the floor's time, not its kernel's: a ratio with it on top says nothing of the shape.
    The edge alone on one only hides how fast its own kernel is: the others keep *at most* what their
    ratios say, so a cliff still reads as one.
    """
    if edge not in kinds:
        raise ValueError(f"edge must be one of the sizes named in kinds {sorted(kinds)}, got {edge!r}")
    on = {name: k for name, k in kinds.items() if k}
    if not on:
        return True, ""
    if set(on) == {edge}:
        return True, f" ({edge} on a {on[edge]}: an upper bound, its own kernel may be faster)"
    return False, f"{', '.join(on)} on a {' and a '.join(dict.fromkeys(on.values()))}: no shape to read there"


def expected_cliff(platform: str, framework: str, edge: int, base: int, chip: Any = None) -> float | None:
    """(Lab 01) The most N = edge + 1 may keep of N = edge's speed where Lab 01 asserts a cliff; None elsewhere.

    (base, base) @ (base, N): a GPU's torch (cuBLAS) at N = 129, not whole 16-byte rows (an H100 kept 0.16x,
    shape_probe.json); a TPU's jax where this chip's MXU model (`chip`) pads N = edge + 1 into a compute-bound
    GEMM that keeps under 0.8x (v5e at 257: 0.71x; not at 129, memory-bound on a v5e, nor on a v6e's 256 wide
    array, memory-bound at 257).
    """
    if platform == "gpu" and framework == "torch" and edge == 128:
        return 0.7
    if platform == "tpu" and framework == "jax" and getattr(chip, "mxu_shape", None):
        odd, even = (mxu.predict(base, base, n, chip) for n in (edge + 1, edge))  # (M, K, N)
        if odd.bound == "compute" and odd.fraction_of_peak < 0.8 * even.fraction_of_peak:
            return 0.9
    return None
