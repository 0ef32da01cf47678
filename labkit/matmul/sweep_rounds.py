"""(Lab 01) A measured shape sweep in interleaved rounds, and how far a ratio of two of its shapes can be trusted.

Timing one shape after another lets the machine's drift (another program taking the cores, a clock
ramping down) land on some shapes and not others: one Lab 01 CPU run measured the same 256^3 matmul
at 0.060 TFLOP/s in one sweep and 0.093 in the next. Here each round times every shape once, the
rounds alternate direction (forward, backward, ...) so a drift over a round hits both ends alike,
and a ratio of two shapes is taken round by round: its spread across rounds is the noise to beat.
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Callable, Sequence

import numpy as np

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
        return "alignment: the aligned size recovers"
    if aligned.clears(noise):
        return "a step: the aligned size is as slow (a wider tile or cache block)"
    return f"inconclusive: the aligned size is within the noise ({noise:.2f}) of both"
