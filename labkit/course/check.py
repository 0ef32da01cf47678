"""Exercise checks: compare a learner's answer to a reference, with a specific hint (Lab 00).

An exercise is a function the learner completes between ``### BEGIN SOLUTION`` and
``### END SOLUTION``; the next cell calls a check from ``labkit.course.exercises.labNN``. Checks
are property-based: the learner's function and the reference run on random inputs, and when
they disagree the *hint* that explains the wrong answer (a recognisable mistake, e.g. "you
forgot the factor 2") is shown instead of a bare "wrong". A hint must explain every wrong case
it can judge: one that fits a single random case by coincidence would teach the wrong lesson.

Modes (``$LABKIT_CHECK_MODE``): ``stop`` (default) raises on a wrong or missing answer so a
run stops where the problem is; ``report`` prints and carries on (student copies run
end to end this way).
"""

from __future__ import annotations

import inspect
import math
import numbers
import os
import reprlib
import sysconfig
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

MODE_ENV = "LABKIT_CHECK_MODE"
SHOW_LIMIT = 160  # characters per value shown to the learner: a weight matrix must not flood the cell
MAJORITY = 0.75  # a hint that fits this share of the cases it judges, right ones too (and >= 2 wrong), explains them


class CheckFailed(AssertionError):
    """A learner's answer disagrees with the reference (Lab 00)."""


class NotDoneYet(NotImplementedError):
    """Raised by an exercise stub; a check reports it as "not done yet" (Lab 00)."""


def your_turn(what: str = "this exercise") -> None:
    """Stub body for a student copy: raises a clear "your turn" error (Lab 00)."""
    raise NotDoneYet(f"Your turn: complete {what} where the cell says YOUR CODE HERE, then run the check cell.")


@dataclass(frozen=True)
class Hint:
    """A recognisable wrong answer: ``when(got, expected, args)`` is True -> show ``message`` (Lab 00).

    ``applies(args)``, if given, picks the cases the hint can judge at all: on the others the
    mistake and the right answer (or another mistake) coincide, so they neither confirm nor refute it.
    """

    when: Callable[[Any, Any, tuple], bool]
    message: str
    applies: Callable[[tuple], bool] | None = None


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


def is_number(value: Any) -> bool:
    """(Lab 00) A real number (int, float, numpy scalar), not a bool: what a numeric answer must be."""
    return isinstance(value, numbers.Number) and not isinstance(value, (bool, np.bool_, complex))


def as_sequence(got: Any) -> Any:
    """(Lab 00) An array answer as nested lists, so it compares with a tuple/list reference; else unchanged."""
    if hasattr(got, "tolist") and not isinstance(got, (str, bytes)):
        try:
            return np.asarray(got).tolist()
        except Exception:  # a ragged or exotic object: judge it as it is
            return got
    return got


def close(got: Any, expected: Any, rtol: float = 1e-6, atol: float = 0.0) -> bool:
    """(Lab 00) Numbers (or sequences of numbers) equal within tolerance; non-numbers must be equal."""
    if isinstance(expected, (list, tuple)):
        got = as_sequence(got)  # np.array((16.0, 0)) is as good an answer as (16.0, 0)
        return isinstance(got, (list, tuple)) and len(got) == len(expected) and all(
            close(g, e, rtol, atol) for g, e in zip(got, expected)
        )
    if is_number(expected):
        if isinstance(got, (str, bytes, bool, np.bool_)):  # float("286.6") and float(True) would pass
            return False
        try:
            g = float(got)
        except (TypeError, ValueError):
            return False
        return math.isfinite(g) and math.isclose(g, float(expected), rel_tol=rtol, abs_tol=atol)
    try:
        return bool(got == expected)
    except Exception:  # an array compared with None or a set: elementwise, no single truth value
        return False


def ratio_is(factor: float, rtol: float = 1e-6) -> Callable[[Any, Any, tuple], bool]:
    """Hint predicate: the answer is ``factor`` times the right one (Lab 00)."""

    def when(got: Any, expected: Any, args: tuple) -> bool:
        if not is_number(got) and not hasattr(got, "shape"):  # a str or bool is no ratio of anything
            return False
        try:
            return math.isclose(float(got), factor * float(expected), rel_tol=rtol)
        except (TypeError, ValueError):
            return False

    return when


_REPR = reprlib.Repr()
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 8
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 80, SHOW_LIMIT


def show(value: Any, limit: int = SHOW_LIMIT) -> str:
    """(Lab 00) A short text for a value in a check's message: arrays by shape, dtype and a few entries."""
    kind = "array"
    if isinstance(value, list) and value and isinstance(value[0], list):  # a weight as nested lists
        try:
            value, kind = np.asarray(value, dtype=float), "nested list"
        except (TypeError, ValueError):  # ragged or not numbers: reprlib below bounds it
            pass
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None and len(tuple(shape)) > 0:
        what = f"{kind} of shape {tuple(shape)}" + (f", dtype {dtype}" if kind == "array" else "")
        try:
            head = ", ".join(f"{v:.4g}" if isinstance(v, float) else repr(v)
                             for v in np.asarray(value).ravel()[:4].tolist())
            return f"{what}: [{head}{', ...' if math.prod(shape) > 4 else ''}]"
        except Exception:  # not convertible (a tensor on a device, say): its shape says enough
            return what
    return _clip(_REPR.repr(value), limit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def show_args(args: tuple) -> str:
    """(Lab 00) A case's inputs, each bounded by :func:`show`."""
    return "(" + ", ".join(show(a) for a in args) + ("," if len(args) == 1 else "") + ")"


def mode() -> str:
    """"stop" or "report", from $LABKIT_CHECK_MODE (Lab 00)."""
    m = os.environ.get(MODE_ENV, "stop")
    if m not in ("stop", "report"):
        raise ValueError(f"{MODE_ENV}={m!r}: use 'stop' or 'report'.")
    return m


def finish(result: CheckResult) -> CheckResult:
    """Print a check's outcome; in "stop" mode raise on a wrong or missing answer (Lab 00)."""
    from labkit.course.report import record_exercise

    mark = {"passed": "✔", "wrong": "✘", "not done": "…"}[result.status]
    print(f"{mark} {result.name}: {result.message}")
    record_exercise(result.name, result.status)  # the run report tallies them: a student run is read there
    if mode() == "stop" and result.status == "wrong":
        raise CheckFailed(f"{result.name}: {result.message}")
    if mode() == "stop" and result.status == "not done":
        raise NotDoneYet(f"{result.name}: {result.message}")
    return result


# Files that are not the learner's: labkit itself, the standard library, installed packages.
_NOT_YOURS = tuple(str(Path(p).resolve()) for p in {str(Path(__file__).parents[1]),
                   *(sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib"))})


def raised(name: str, error: Exception, inputs: str = "") -> CheckResult:
    """(Lab 00) The outcome when the learner's function raised on ``inputs``: "not done" for a stub, else wrong."""
    __tracebackhide__ = True  # IPython: the learner's cell, then the check's message, not labkit's frames
    if isinstance(error, NotImplementedError):
        return finish(CheckResult(name, "not done", f"not done yet ({error})"))
    # The learner's own line, not labkit's or numpy's: the deepest frame outside those files.
    mine = [f for f in traceback.extract_tb(error.__traceback__)
            if not str(Path(f.filename).resolve()).startswith(_NOT_YOURS)]
    where = f" (line {mine[-1].lineno}: `{mine[-1].line}`)" if mine and mine[-1].line else ""
    return finish(CheckResult(name, "wrong", f"your function raised {type(error).__name__}"
                              f"{f' on inputs {inputs}' if inputs else ''}{where}: {_clip(str(error), 200)}"))


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
    case_hints: bool = False,
) -> CheckResult:
    """Run ``fn`` and ``reference`` on every case; pass, or say which hint explains the answer (Lab 00).

    The hint shown explains the learner's answer on *every* case it judges (so "only the compute
    time" is not mistaken for "min" on a memory-bound case), else on every wrong case, else on a
    clear majority (>= 75%) of all the cases it judges, right ones included, and >= 2 wrong ones (a
    slip that is wrong on a few cases must not be named after a mistake its right answers contradict).
    A hint that fits only one random case may be a coincidence, so then the learner gets how many
    cases were wrong and the smallest of them, inputs named, expected vs got.
    ``case_hints=True`` (Lab 03: every fixed case has its own rule) shows a hint that fits any
    wrong case. ``describe(args)``, if given, names the case in the message (which layout failed).
    """
    __tracebackhide__ = True  # IPython hides this frame: a failed check shows the learner's cell and the message
    name_case = describe or show_args
    name_wrong = describe or (lambda a: _named(fn, a))  # a wrong case, in the learner's own parameter names
    runs: list[tuple[tuple, Any, Any]] = []  # (args, got, expected)
    unfinished: list[tuple[tuple, Exception]] = []  # cases a NotImplementedError left unanswered
    for args in cases:
        error: Exception | None = None
        try:
            got = fn(*args)
        except Exception as e:  # any error in the learner's code is a failed check, not a crash of the run
            error = e
        if isinstance(error, NotImplementedError):  # a stub, or one branch not written yet: see the others
            unfinished.append((args, error))
            continue
        if error is not None:  # reported outside the except: no "during handling ..." second traceback
            return raised(name, error, name_case(args))
        expected = reference(*args)
        runs.append((args, as_sequence(got) if isinstance(expected, (list, tuple)) else got, expected))
    if unfinished and not runs:  # raised on every case: not started
        return raised(name, unfinished[0][1], name_case(unfinished[0][0]))
    if unfinished:  # answered some cases: a branch left unwritten is a wrong answer, its inputs named
        return finish(CheckResult(name, "wrong", f"your function answered {len(runs)} case(s) but raised "
                                  f"NotImplementedError on {len(unfinished)}, e.g. inputs {name_case(unfinished[0][0])} "
                                  f"({_clip(str(unfinished[0][1]), 120)}): that branch is not written yet."))
    if not runs:
        raise ValueError(f"check {name!r} was given no cases to test")
    wrong = [r for r in runs if not close(r[1], r[2], rtol)]
    if not wrong:
        return finish(CheckResult(name, "passed", f"correct on all {len(runs)} cases. {explain}".strip()))

    def say(message: str, case: tuple | None = None) -> CheckResult:
        __tracebackhide__ = True
        tail = f" Wrong for {name_wrong(case[0])}: your answer was {show(case[1])}." if case else ""
        return finish(CheckResult(name, "wrong", f"hint: {message}{tail}"))

    def hinted(h: Hint) -> CheckResult:  # names the first wrong case it fits; the right answer stays theirs to find
        __tracebackhide__ = True
        case = next(r for r in wrong if _judges(h, r[0]) and _safe(h, r[1], r[2], r[0]))
        return say(h.message, case)  # the first wrong case it fits, inputs named: the expected value stays theirs

    # Two mistakes of form, not of maths, come first: no formula hint can explain them.
    if all(g is None for _, g, _ in runs) and all(e is not None for _, _, e in runs):
        return say("your function returned None on every case: did you forget `return`? (print() shows "
                   "a value but hands nothing to the check.)")
    typed = [r for r in wrong if is_number(r[2]) and isinstance(r[1], (str, bytes, bool, np.bool_))]
    if typed:
        return say(f"return a number, not a {type(typed[0][1]).__name__}: the check (and the code that uses "
                   "your function) computes with it; format it only when you print it.", typed[0])
    inf = [r for r in wrong if _overflowed(r[1], r[2])]
    if inf and len(inf) == len(wrong):  # right wherever the value fits: the arithmetic's type, not the formula
        return say(overflow_hint(inf[0][1], inf[0][2]), inf[0])
    for h in hints:  # every case the hint judges, right ones included
        if _share(h, runs, wrong) == 1.0:
            return hinted(h)
    for h in hints:  # every wrong case it judges
        if _share(h, wrong, wrong) == 1.0:
            return hinted(h)
    for h in hints:  # a clear majority of them, never a lone case that may fit by coincidence
        fits = sum(_judges(h, a) and _safe(h, g, e, a) for a, g, e in wrong)
        if (fits >= 2 and _share(h, runs, wrong) >= MAJORITY) or (case_hints and fits):
            return hinted(h)
    args, got, expected = min(wrong, key=lambda r: _magnitude(r[0]))  # the smallest case is the easiest to redo
    return finish(CheckResult(name, "wrong", f"wrong on {len(wrong)} of {len(runs)} cases; the smallest: "
                              f"for inputs {name_wrong(args)} expected {show(expected)}, got {show(got)}."))


def _magnitude(args: tuple) -> float:
    """A case's size for picking one to show: the sum of its numeric inputs (others count 0)."""
    return sum(abs(float(a)) for a in args if is_number(a) and math.isfinite(float(a)))


def _named(reference: Callable[..., Any], args: tuple) -> str:
    """'(M=9, K=9, dataflow='os')' with the reference's parameter names; plain values when it has none."""
    try:
        names = [p.name for p in inspect.signature(reference).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):  # a builtin or a callable without a signature
        names = []
    if len(names) != len(args):
        return show_args(args)
    return "(" + ", ".join(f"{n}={show(a)}" for n, a in zip(names, args)) + ")"


def _overflowed(got: Any, expected: Any) -> bool:
    """A numpy float answer that is inf because the true (finite) value is beyond its type's largest."""
    return (isinstance(got, np.floating) and bool(np.isinf(got)) and is_number(expected)
            and math.isfinite(expected) and abs(expected) > float(np.finfo(type(got)).max))


def overflow_hint(got: np.floating, expected: float) -> str:
    """(Lab 00) Why an answer is inf where the true value is finite: the type it was computed in."""
    kind = f"{np.dtype(type(got)).name} (largest {float(np.finfo(type(got)).max):.4g})"
    return (f"your answer overflowed to inf where the true value is {show(expected)}: it was computed in {kind}. "
            "The formula is right wherever the value fits; compute in Python floats (float64, largest 1.798e+308) "
            "and cast at the end if you need the narrow type.")


def _share(h: Hint, pool: list[tuple[tuple, Any, Any]], wrong: list[tuple[tuple, Any, Any]]) -> float:
    """Share of the cases in ``pool`` the hint judges that it fits; 0 unless it judges some wrong case."""
    judged = [r for r in pool if _judges(h, r[0])]
    if not any(_judges(h, r[0]) for r in wrong):
        return 0.0
    return sum(_safe(h, g, e, a) for a, g, e in judged) / len(judged)


def _judges(h: Hint, args: tuple) -> bool:
    try:
        return h.applies is None or bool(h.applies(args))
    except Exception:
        return False


def _safe(h: Hint, got: Any, expected: Any, args: tuple) -> bool:
    try:
        return bool(h.when(got, expected, args))
    except Exception:
        return False  # a hint predicate that cannot judge this answer (a str, a short tuple) does not fit it
