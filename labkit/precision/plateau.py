"""Where a byte-level loss curve stalls, and when each run leaves it (Lab 04).

A language model trained on bytes first learns which bytes are common -- its loss falls toward
the corpus's **unigram** entropy H(X) -- then which byte follows which -- the **bigram**
conditional entropy H(X_t+1 | X_t) -- and only later uses longer context to go below that. A run
can sit near such a level for many steps before it leaves it, and two runs that differ only by
rounding can leave it many steps apart. So a comparison of *final* losses measures when each run
left its last plateau as much as how well it trains. On the H100 (benchmarks/nvidia-h100-80gb-hbm3/
bf16_loss.json, 200 steps) every fp32, torch and fp16 run ended on the bigram level of the shipped
corpus (2.504-2.516 nats against 2.476) while the JAX bf16 run with cuDNN's attention left it from about step
150 (with XLA's it drifted lower late, but not a floor below by the end): "bf16
ends below fp32" there is, at least in part, that timing. A leak of later tokens
(:mod:`labkit.precision.causality`) is the other explanation of a run below fp32; its probe rules
that one in or out.

Entropies are in nats per token (natural log), from counts over the whole token sequence the lab
trains on. "Reached" and "left" a level are read on the ``noise.smooth``-ed curve, ``margin``
nats above and below the level (the lab uses its fp32 noise floor: "clearly" = by more than the
difference two fp32 inits make).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from labkit.gpt.data import check_count, check_real, check_tokens
from labkit.precision import noise


def _entropy(counts: np.ndarray) -> float:
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())  # nats


def conditional_entropy(tokens: Any, context: int = 1) -> float:
    """(Lab 04) H(next token | the ``context`` tokens before it) over ``tokens``, nats: 0 = unigram, 1 = bigram.

    Counted over every window of ``context + 1`` consecutive tokens: H(window) - H(its context).
    """
    t = check_tokens(tokens).astype(np.int64)
    context = check_count(context, "context", 0, example=1)
    n = t.size - context  # windows
    if n < 1:
        raise ValueError(f"need more than {context} tokens for context={context}, got {t.size}")
    base = int(t.max()) + 1  # the vocabulary seen
    if t.min() < 0 or base ** (context + 1) >= 2**63:
        raise ValueError(f"tokens must be >= 0 with vocab**{context + 1} < 2**63 (got vocab {base}); "
                         "use a smaller context")
    key = np.zeros(n, np.int64)
    for i in range(context + 1):  # one integer per window: its tokens as digits in base `vocab`
        key = key * base + t[i:i + n]
    # counts per window and per context (the window without its last token: all 0 without context)
    dense = base ** (context + 1) <= 2**24  # bytes: 65536 bigram keys -> bincount, no sort
    return _entropy(_counts(key, dense)) - _entropy(_counts(key // base, dense))


def _counts(keys: np.ndarray, dense: bool) -> np.ndarray:
    if dense:
        c = np.bincount(keys)
        return c[c > 0]
    return np.unique(keys, return_counts=True)[1]


def levels(tokens: Any) -> dict[str, float]:
    """(Lab 04) The corpus's plateaus in nats/token: {"unigram": H(X), "bigram": H(X_t+1 | X_t)}."""
    return {"unigram": conditional_entropy(tokens, 0), "bigram": conditional_entropy(tokens, 1)}


def crossings(losses: Sequence[float], level: float, margin: float, window: int) -> tuple[int | None, int | None]:
    """(Lab 04) (first step the smoothed loss is within ``margin`` above ``level``, first step ``margin`` below it).

    Steps are 0-based; None: not in this run.
    """
    level = check_real(level, "level", hint="; a loss in nats/token, e.g. levels(tokens)['bigram']")
    margin = check_real(margin, "margin", 0.0, closed="low", hint="; nats, e.g. the fp32 noise floor")
    return (noise.steps_to_reach(losses, level + margin, window),
            noise.steps_to_reach(losses, level - margin, window))


def table(losses: Mapping[Any, Sequence[float]], lv: Mapping[str, float], margin: Mapping[Any, float],
          window: int) -> list[dict[str, Any]]:
    """(Lab 04) One row per run: its final smoothed loss and, per level, the steps it reached and left it.

    ``losses`` and ``margin`` share their keys (e.g. (framework, precision)); None in a cell: never.
    """
    rows = []
    for k, ls in losses.items():
        row: dict[str, Any] = {"run": " ".join(k) if isinstance(k, tuple) else str(k),
                               "final (smoothed)": float(noise.smooth(ls, window)[-1])}
        for name, v in lv.items():
            row[f"{name} reached"], row[f"{name} left"] = crossings(ls, v, margin[k], window)
        rows.append(row)
    return rows


@dataclass(frozen=True)
class Exit:
    """When a run and its reference went a floor below each plateau, from :func:`table` rows (Lab 04)."""

    run: str
    ref: str
    steps: dict[str, tuple[int | None, int | None]]  # level, lowest first -> (run's step, ref's step); None: never
    ends: tuple[float, float]  # final smoothed losses (run, ref), nats
    window: int  # the smoothing window, steps: closer exits than this are not told apart

    @property
    def last(self) -> str | None:
        """The lowest level either run went below; None: neither left any (Lab 04)."""
        return next((n for n, pair in self.steps.items() if any(s is not None for s in pair)), None)

    @property
    def first(self) -> list[str]:
        """The levels the run went below before the reference did (or the reference never did) (Lab 04)."""
        return [n for n, (a, b) in self.steps.items() if a is not None and (b is None or a < b)]

    @property
    def apart(self) -> bool:
        """The two left the lowest level a smoothing window apart or more (or only one left it) (Lab 04)."""
        if self.last is None:
            return False
        a, b = self.steps[self.last]
        return a is None or b is None or abs(a - b) >= self.window

    def sentence(self) -> str:
        """Whether the gap between the two runs is, at least in part, when each left a plateau (Lab 04)."""
        if self.apart:
            a, b = self.steps[self.last]
            return (f"it left the {self.last} level at step {a}, {self.ref} at {b} (None: never): part of the gap is "
                    "when each run left that plateau")
        if self.last is None:
            return (f"neither it nor {self.ref} went a floor below any level (smoothed, they end at {self.ends[0]:.3f} "
                    f"and {self.ends[1]:.3f}): no plateau exit is in this gap")
        return f"it left the {self.last} level within {self.window} steps of {self.ref}: the gap is not plateau timing"


def exit_timing(rows: Sequence[Mapping[str, Any]], lv: Mapping[str, float], run: str, ref: str, window: int) -> Exit:
    """(Lab 04) Compare ``run``'s plateau exits with ``ref``'s, from :func:`table` rows over the levels ``lv``."""
    by = {r["run"]: r for r in rows}
    for name in (run, ref):
        if name not in by:
            raise ValueError(f"run {name!r} is not in the plateau table: pick one of {', '.join(by)}")
    steps = {n: (by[run][f"{n} left"], by[ref][f"{n} left"]) for n in sorted(lv, key=lv.get)}
    return Exit(run, ref, steps, (by[run]["final (smoothed)"], by[ref]["final (smoothed)"]), window)
