"""Exercise checks: compare a learner's answer to a reference, with a specific hint (Lab 00).

An exercise is a function the learner completes between ``### BEGIN SOLUTION`` and
``### END SOLUTION``; the next cell calls a check from ``labkit.course.exercises.labNN``. Checks
are property-based: the learner's function and the reference run on random inputs, and when
they disagree the first matching *hint* (a recognisable wrong answer, e.g. "you forgot the
factor 2") is shown instead of a bare "wrong".

Modes (``$LABKIT_CHECK_MODE``): ``stop`` (default) raises on a wrong or missing answer so a
run stops where the problem is; ``report`` prints and carries on (student copies run
end to end this way).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

MODE_ENV = "LABKIT_CHECK_MODE"


class CheckFailed(AssertionError):
    """A learner's answer disagrees with the reference (Lab 00)."""


class NotDoneYet(NotImplementedError):
    """Raised by an exercise stub; a check reports it as "not done yet" (Lab 00)."""


def your_turn(what: str = "this exercise") -> None:
    """Stub body for a student copy: raises a clear "your turn" error (Lab 00)."""
    raise NotDoneYet(f"Your turn: complete {what} between the SOLUTION markers, then run the check cell.")


@dataclass(frozen=True)
class Hint:
    """A recognisable wrong answer: ``when(got, expected, args)`` is True -> show ``message`` (Lab 00)."""

    when: Callable[[Any, Any, tuple], bool]
    message: str


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one check: "passed", "wrong" or "not done" and what to tell the learner (Lab 00)."""

    name: str
    status: str
    message: str

    @property
    def passed(self) -> bool:
        """True when the answer matched the reference on every case (Lab 00)."""
        return self.status == "passed"


def close(got: Any, expected: Any, rtol: float = 1e-6, atol: float = 0.0) -> bool:
    """Numbers (or sequences of numbers) equal within tolerance; non-numbers must be equal (Lab 00)."""
    if isinstance(expected, (list, tuple)):
        return isinstance(got, (list, tuple)) and len(got) == len(expected) and all(
            close(g, e, rtol, atol) for g, e in zip(got, expected)
        )
    if isinstance(expected, bool) or isinstance(expected, str):
        return got == expected
    try:
        g, e = float(got), float(expected)
    except (TypeError, ValueError):
        return got == expected
    return math.isfinite(g) and math.isclose(g, e, rel_tol=rtol, abs_tol=atol)


def ratio_is(factor: float, rtol: float = 1e-6) -> Callable[[Any, Any, tuple], bool]:
    """Hint predicate: the answer is ``factor`` times the right one (Lab 00)."""

    def when(got: Any, expected: Any, args: tuple) -> bool:
        try:
            return math.isclose(float(got), factor * float(expected), rel_tol=rtol)
        except (TypeError, ValueError):
            return False

    return when


def mode() -> str:
    """"stop" or "report", from $LABKIT_CHECK_MODE (Lab 00)."""
    m = os.environ.get(MODE_ENV, "stop")
    if m not in ("stop", "report"):
        raise ValueError(f"{MODE_ENV}={m!r}: use 'stop' or 'report'.")
    return m


def finish(result: CheckResult) -> CheckResult:
    """Print a check's outcome; in "stop" mode raise on a wrong or missing answer (Lab 00)."""
    mark = {"passed": "✔", "wrong": "✘", "not done": "…"}[result.status]
    print(f"{mark} {result.name}: {result.message}")
    if mode() == "stop" and result.status == "wrong":
        raise CheckFailed(f"{result.name}: {result.message}")
    if mode() == "stop" and result.status == "not done":
        raise NotDoneYet(f"{result.name}: {result.message}")
    return result


def check_function(
    name: str,
    fn: Callable[..., Any],
    reference: Callable[..., Any],
    cases: Iterable[tuple],
    *,
    hints: Sequence[Hint] = (),
    explain: str = "",
    rtol: float = 1e-6,
    describe: Callable[[tuple], str] | None = None,
) -> CheckResult:
    """Run ``fn`` and ``reference`` on every case; pass, or say which hint fits (Lab 00).

    The hint shown is the one that explains the learner's answer on *every* case (so
    "only the compute time" is not mistaken for "min" on a memory-bound case), else the one
    that explains every wrong case, else any wrong case. ``describe(args)``, if given, names the
    first wrong case the hint fits after the hint (Lab 03: which layout failed).
    """
    runs: list[tuple[tuple, Any, Any]] = []  # (args, got, expected)
    for args in cases:
        try:
            got = fn(*args)
        except NotImplementedError as e:
            return finish(CheckResult(name, "not done", f"not done yet ({e})"))
        runs.append((args, got, reference(*args)))
    if not runs:
        raise ValueError(f"check {name!r} was given no cases to test")
    wrong = [r for r in runs if not close(r[1], r[2], rtol)]
    if not wrong:
        return finish(CheckResult(name, "passed", f"correct on all {len(runs)} cases. {explain}".strip()))
    fits = lambda h, rs: all(_safe(h, g, e, a) for a, g, e in rs)  # noqa: E731

    def hinted(h: Hint) -> CheckResult:
        if describe is None:
            return finish(CheckResult(name, "wrong", f"hint: {h.message}"))
        args, got, _ = next(r for r in wrong if _safe(h, r[1], r[2], r[0]))  # the answer stays the learner's to find
        return finish(CheckResult(name, "wrong", f"hint: {h.message} Wrong for {describe(args)}: "
                                  f"your answer was {got!r}."))

    for pool in (runs, wrong):
        for h in hints:
            if fits(h, pool):
                return hinted(h)
    for h in hints:
        if any(_safe(h, g, e, a) for a, g, e in wrong):
            return hinted(h)
    args, got, expected = wrong[0]
    return finish(CheckResult(name, "wrong", f"for inputs {args} expected {expected!r}, got {got!r}."))


def _safe(h: Hint, got: Any, expected: Any, args: tuple) -> bool:
    try:
        return bool(h.when(got, expected, args))
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return False  # a hint predicate that cannot judge this answer does not fit it
