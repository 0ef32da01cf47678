"""Which serving path is fastest, and when the run cannot tell (Lab 05).

A path is named fastest only when it beats the next by a margin: ``FASTEST_MARGIN`` (10%), or more
where this run shows more noise. JAX jit and the StableHLO artifact run one program (the artifact is
the jit step, serialized), so the gap between those two rows is this run's own yardstick of how far
two measurements of the same work can differ: on a shared CPU it reached 1.3x, more than 10%.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

ServeStats = Any  # labkit.export.serve.ServeStats (.path, .batch, .tokens_per_s); serve imports this module

FASTEST_MARGIN = 1.10  # a path is named fastest only when it beats the next by more than this factor
SAME_PROGRAM = ("JAX jit", "StableHLO")  # one program run two ways: their gap is not a property of a path


def noise_margin(stats: Sequence[ServeStats]) -> float:
    """(Lab 05) The lead a path needs to be named fastest: FASTEST_MARGIN, or the same-program rows' widest gap."""
    at = {(s.path, s.batch): s.tokens_per_s for s in stats}
    a, b = SAME_PROGRAM
    gaps = [max(at[a, n], at[b, n]) / min(at[a, n], at[b, n]) for n in {s.batch for s in stats}
            if (a, n) in at and (b, n) in at and min(at[a, n], at[b, n]) > 0]
    return max([FASTEST_MARGIN, *gaps])


def fastest(tps: Mapping[str, float], margin: float = FASTEST_MARGIN) -> tuple[str, str | None]:
    """(Lab 05) The path with the most tokens/s, and the runner-up if within `margin` (a tie), else None."""
    if not tps:
        raise ValueError("no paths to rank: pass {path: tokens/s} with at least one path")
    if not margin >= 1:
        raise ValueError(f"margin must be a factor >= 1 (1.1 = a 10% lead), got {margin!r}")
    ranked = sorted(tps, key=lambda p: tps[p], reverse=True)
    tie = len(ranked) > 1 and tps[ranked[0]] <= margin * tps[ranked[1]]
    return ranked[0], ranked[1] if tie else None


def best_path(stats: Sequence[ServeStats], batch: int, margin: float | None = None) -> str:
    """(Lab 05) The fastest path at `batch`, or "A ≈ B" when B is within the margin (default: noise_margin)."""
    tps = {s.path: s.tokens_per_s for s in stats if s.batch == batch}
    if not tps:
        raise ValueError(f"no stats at batch {batch!r}; batches measured: {sorted({s.batch for s in stats})}")
    first, tie = fastest(tps, noise_margin(stats) if margin is None else margin)
    return first if tie is None else f"{first} ≈ {tie}"


def torch_over_jax(stats: Sequence[ServeStats], batch: int) -> dict[str, Any] | None:
    """(Lab 05) At `batch`: the fastest torch path against JAX jit, tokens/s ratios; None if either is missing."""
    torch_rows = {s.path: s.tokens_per_s for s in stats if s.batch == batch and s.path.startswith("torch")}
    jax_tps = next((s.tokens_per_s for s in stats if s.batch == batch and s.path == "JAX jit"), None)
    if not torch_rows or jax_tps is None:
        return None
    best = max(torch_rows, key=torch_rows.get)
    return {"batch": batch, "best_torch_path": best, "best_torch_tokens_per_s": torch_rows[best],
            "jax_jit_tokens_per_s": jax_tps, "best_torch_over_jax": torch_rows[best] / jax_tps,
            "by_path": {p: v / jax_tps for p, v in torch_rows.items()}}  # every torch path / JAX jit
