"""Exercise checks: compare a learner's answer to a reference, with a specific hint (Lab 00).

An exercise is a function the learner completes between ``### BEGIN SOLUTION`` and
``### END SOLUTION``; the next cell calls a check from ``labkit.exercises.labNN``. Checks
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


def _finish(result: CheckResult) -> CheckResult:
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
) -> CheckResult:
    """Run ``fn`` and ``reference`` on every case; pass, or say which hint fits (Lab 00)."""
    n = 0
    for args in cases:
        n += 1
        try:
            got = fn(*args)
        except NotImplementedError as e:
            return _finish(CheckResult(name, "not done", f"not done yet ({e})"))
        expected = reference(*args)
        if not close(got, expected, rtol):
            for h in hints:
                if h.when(got, expected, args):
                    return _finish(CheckResult(name, "wrong", f"hint: {h.message}"))
            return _finish(CheckResult(name, "wrong", f"for inputs {args} expected {expected!r}, got {got!r}."))
    if n == 0:
        raise ValueError(f"check {name!r} was given no cases to test")
    return _finish(CheckResult(name, "passed", f"correct on {n} random cases. {explain}".strip()))
