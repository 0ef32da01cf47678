"""What every exercise check must do (issue 10), written once; each lab's test file calls these.

A check accepts the reference and a differently written correct answer on fresh random cases,
names the hint of each plausible wrong answer, stops the run on it in "stop" mode, and reports
a stub as "not done yet" (raising in "stop" mode).
"""

from __future__ import annotations

import re
from typing import Any, Callable

import pytest

from labkit.course.check import CheckFailed, NotDoneYet, your_turn

Check = Callable[[Callable[..., Any]], Any]


def accepts(check: Check, ref: Callable[..., Any], alt: Callable[..., Any]) -> None:
    """The reference and an alternative correct answer pass, on fresh random cases each call."""
    for fn in (ref, alt):
        for _ in range(3):  # fresh random cases each call
            r = check(fn)
            assert r.passed and r.status == "passed" and "correct on" in r.message


def hints(check: Check, wrong: list[tuple[Callable[..., Any], str]], repeats: int = 3) -> None:
    """Each plausible wrong answer gets its own hint (report mode), whatever cases are drawn."""
    for fn, hint in wrong:
        for _ in range(repeats):  # the hint must not depend on which random cases were drawn
            r = check(fn)
            assert r.status == "wrong" and not r.passed, hint
            assert r.message.startswith("hint:") and hint in r.message, (hint, r.message)


def stops(check: Check, wrong: list[tuple[Callable[..., Any], str]]) -> None:
    """In stop mode a wrong answer raises CheckFailed carrying its hint."""
    for fn, hint in wrong:
        with pytest.raises(CheckFailed, match="hint: .*" + re.escape(hint)):
            check(fn)


def stub(*args: Any) -> float:
    """What a student copy's exercise does before the learner fills it in."""
    your_turn("the exercise")
    return 0.0


def reports_not_done(check: Check) -> None:
    """A stub is "not done yet" in report mode."""
    r = check(stub)
    assert r.status == "not done" and "Your turn" in r.message


def stops_not_done(check: Check) -> None:
    """A stub raises NotDoneYet in stop mode."""
    with pytest.raises(NotDoneYet, match="not done yet"):
        check(stub)


Case = tuple[Check, Callable[..., Any], Callable[..., Any], list[tuple[Callable[..., Any], str]]]


def standard_tests(cases: list[Case], ids: list[str], unrecognised: Callable[[Check], Callable[..., Any]],
                   hint_repeats: int = 3) -> dict[str, Callable[..., None]]:
    """The six contract tests for a lab's (check, reference, alternative, wrong answers) cases.

    A test file binds them with ``globals().update(contract.standard_tests(...))`` so pytest
    collects them under their usual names; ``unrecognised(check)`` is a wrong answer no hint
    names, which must be answered with the inputs and the expected value.
    """
    each_case = pytest.mark.parametrize("check, ref, alt, wrong", cases, ids=ids)
    each_check = pytest.mark.parametrize("check", [c[0] for c in cases], ids=ids)

    @each_case
    def test_reference_and_alternative_pass(stop_mode: None, check: Check, ref: Any, alt: Any, wrong: Any) -> None:
        accepts(check, ref, alt)

    @each_case
    def test_wrong_answers_get_their_hint_in_report_mode(report_mode: None, check: Check, ref: Any, alt: Any,
                                                          wrong: Any) -> None:
        hints(check, wrong, repeats=hint_repeats)

    @each_case
    def test_wrong_answers_stop_the_run_in_stop_mode(stop_mode: None, check: Check, ref: Any, alt: Any,
                                                      wrong: Any) -> None:
        stops(check, wrong)

    @each_check
    def test_unrecognised_wrong_answer_shows_inputs(report_mode: None, check: Check) -> None:
        r = check(unrecognised(check))
        assert r.status == "wrong" and "for inputs" in r.message and "expected" in r.message

    @each_check
    def test_not_done_yet(report_mode: None, check: Check) -> None:
        reports_not_done(check)

    @each_check
    def test_not_done_yet_stops_in_stop_mode(stop_mode: None, check: Check) -> None:
        stops_not_done(check)

    tests = [test_reference_and_alternative_pass, test_wrong_answers_get_their_hint_in_report_mode,
             test_wrong_answers_stop_the_run_in_stop_mode, test_unrecognised_wrong_answer_shows_inputs,
             test_not_done_yet, test_not_done_yet_stops_in_stop_mode]
    return {t.__name__: t for t in tests}
