"""Has a matmul sweep levelled off? The top of a sweep read against its own noise (Lab 00).

A measured peak is the best point of a sweep over sizes. If the largest size still ran clearly faster per
FLOP than the next one, a larger size might go faster yet, and the peak is a lower bound; if it ran
slower, the machine was probably busy. Both readings need the step to stand out from the points' own
scatter: a step the repeats' IQR/median also covers says neither.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

LEVEL_BAND = 0.05  # a last step within ±5% is flat: the spread of a good median on a quiet machine
MEANING = {  # what each verdict asks of the learner, printed after it
    "levelled off": "",
    "still rising": ": a larger size may go faster, so this peak is a lower bound",
    "falling": ": more work per call ran slower per FLOP, the mark of a busy machine: rerun before quoting the peak",
    "inconclusive": ": the step is inside the repeats' spread, so rerun (a quiet machine, more repeats) before "
                    "calling this peak levelled off or a lower bound",
}


def _top_two(points: Sequence[Any]) -> tuple[Any, Any]:
    """The fastest point at the largest size and at the next largest (OpPoints: .flops per call, .flops_per_s)."""
    best: dict[float, Any] = {}  # FLOPs per call (the size) -> its fastest point, whichever library ran it
    for p in points:
        if p.flops not in best or p.flops_per_s > best[p.flops].flops_per_s:
            best[p.flops] = p
    if len(best) < 2:
        raise ValueError(f"need at least two sizes to see a sweep level off, got {len(best)}")
    top, below = sorted(best)[-2:][::-1]
    return best[top], best[below]


def levelled_off(points: Sequence[Any]) -> float:
    """(Lab 00) Best FLOP/s at the largest size over the best at the next largest: near 1 the sweep has levelled off.

    Points of one size from several frameworks count once, at the fastest: a size's figure is the best
    any library reached there, so one library's slow run at the top size does not read as "falling".
    """
    top, below = _top_two(points)
    return top.flops_per_s / below.flops_per_s


def level_verdict(ratio: float, spread: float = 0.0) -> str:
    """(Lab 00) What a :func:`levelled_off` ratio says: "still rising", "levelled off", "falling" or "inconclusive".

    Flat within ±LEVEL_BAND; a larger step that the points' own IQR/median (``spread``) also covers is inconclusive.
    """
    if not math.isfinite(ratio) or ratio <= 0:
        raise ValueError(f"ratio must be a finite FLOP/s ratio > 0, got {ratio!r}; pass levelled_off(points)")
    if isinstance(spread, bool) or not isinstance(spread, (int, float)) or not (math.isfinite(spread) and spread >= 0):
        raise ValueError(f"spread must be an IQR/median >= 0, got {spread!r}; e.g. the larger timing.spread")
    if 1 - LEVEL_BAND <= ratio <= 1 + LEVEL_BAND:
        return "levelled off"
    return "inconclusive" if 1 - spread <= ratio <= 1 + spread else "still rising" if ratio > 1 else "falling"


@dataclass(frozen=True)
class Level:
    """The top of a sweep: the two sizes' FLOP/s ratio, their larger IQR/median, and the verdict (Lab 00)."""

    ratio: float  # best FLOP/s at the largest size over the best at the next largest
    spread: float  # the larger IQR/median of the two points compared
    verdict: str  # level_verdict(ratio, spread)

    @property
    def meaning(self) -> str:
        """What the verdict asks of the learner, as a clause to print after it (Lab 00)."""
        return MEANING[self.verdict]


def level(points: Sequence[Any]) -> Level:
    """(Lab 00) :func:`levelled_off`'s ratio, judged against the spread of the two points it compares."""
    top, below = _top_two(points)
    spread = max(top.timing.spread, below.timing.spread)
    ratio = top.flops_per_s / below.flops_per_s
    return Level(ratio, spread, level_verdict(ratio, spread))
