"""labkit.course.check and the Lab 00 exercises: right answers pass, plausible wrong ones get their hint."""

from __future__ import annotations

import traceback

import numpy as np
import pytest

from labkit.course import check
from labkit.course.exercises import lab00



def test_close() -> None:
    assert check.close(1.0, 1.0 + 1e-9)
    assert not check.close(1.0, 1.1)
    assert check.close([1, 2.0], (1.0, 2))
    assert not check.close(float("nan"), 1.0)
    assert check.close("memory", "memory") and not check.close("compute", "memory")


def test_stop_mode_raises_and_report_mode_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(check.MODE_ENV, raising=False)
    with pytest.raises(check.CheckFailed, match="hint: you computed bytes per FLOP"):
        lab00.check_ridge_point(lambda p, b: b / p)
    with pytest.raises(check.NotDoneYet):
        lab00.check_ridge_point(lambda p, b: check.your_turn("the ridge point"))
    monkeypatch.setenv(check.MODE_ENV, "report")
    r = lab00.check_ridge_point(lambda p, b: b / p)
    assert r.status == "wrong" and not r.passed
    monkeypatch.setenv(check.MODE_ENV, "loud")
    with pytest.raises(ValueError, match="'stop' or 'report'"):
        check.mode()


def test_not_done_yet(report_mode: None) -> None:
    def stub(*args: float) -> float:
        check.your_turn("this exercise")
        return 0.0

    for chk in (lab00.check_ridge_point, lab00.check_matmul_intensity, lab00.check_roofline_time):
        r = chk(stub)
        assert r.status == "not done" and "Your turn" in r.message


def test_ridge_point(report_mode: None) -> None:
    assert lab00.check_ridge_point(lambda p, b: p / b).passed
    assert lab00.check_ridge_point(lambda p, b: (p * 1e-12) / (b * 1e-12)).passed  # another order, same value
    cases = {
        "bytes per FLOP": lambda p, b: b / p,
        "wrong units": lambda p, b: (p / 1e12) / (b / 1e9),
        "multiply?": lambda p, b: p * b,
    }
    for hint, fn in cases.items():
        r = lab00.check_ridge_point(fn)
        assert r.status == "wrong" and hint in r.message, (hint, r.message)


def test_matmul_intensity(report_mode: None) -> None:
    assert lab00.check_matmul_intensity(lambda m, n, k, b: 2 * m * n * k / ((m * k + k * n + m * n) * b)).passed
    assert lab00.check_matmul_intensity(lambda m, n, k, b: (m * n * k + m * n * k) / b / (m * n + n * k + k * m)).passed
    cases = {
        "off by 2": lambda m, n, k, b: m * n * k / ((m * k + k * n + m * n) * b),
        "not writing C": lambda m, n, k, b: 2 * m * n * k / ((m * k + k * n) * b),
        "bits, not bytes": lambda m, n, k, b: 2 * m * n * k / ((m * k + k * n + m * n) * b * 8),
        "C as read and written": lambda m, n, k, b: 2 * m * n * k / ((m * k + k * n + 2 * m * n) * b),
    }
    for hint, fn in cases.items():
        r = lab00.check_matmul_intensity(fn)
        assert r.status == "wrong" and hint in r.message, (hint, r.message)


def test_roofline_time(report_mode: None) -> None:
    assert lab00.check_roofline_time(lambda f, b, p, w: max(f / p, b / w)).passed
    assert lab00.check_roofline_time(lambda f, b, p, w: f / p if f / p > b / w else b / w).passed
    cases = {
        "added compute and memory": lambda f, b, p, w: f / p + b / w,
        "min gives the faster": lambda f, b, p, w: min(f / p, b / w),
        "only the compute time": lambda f, b, p, w: f / p,
        "only the memory time": lambda f, b, p, w: b / w,
        "wrong unit": lambda f, b, p, w: max(f / p, b / w) * 1e6,  # µs: the cold read's 7.96 for 7.96e-06
    }
    for hint, fn in cases.items():
        r = lab00.check_roofline_time(fn)
        assert r.status == "wrong" and hint in r.message, (hint, r.message)


def test_check_function_needs_cases() -> None:
    with pytest.raises(ValueError, match="no cases"):
        check.check_function("x", lambda: 1, lambda: 1, [])


# ------------------------------------------------------------- answers of the wrong type or form


def test_close_rejects_a_str_or_bool_for_a_number() -> None:
    assert not check.close("286.6", 286.6)  # float("286.6") would make it pass
    assert not check.close(True, 1.0) and not check.close(np.True_, 1)
    assert check.close(np.float32(0.5), 0.5) and check.close(np.int64(7), 7) and check.close(np.array(2.5), 2.5)


def test_close_takes_an_array_where_a_tuple_or_list_is_expected() -> None:
    assert check.close(np.array([16.0, 0.0]), (16.0, 0))
    assert check.close(np.array([[1, 2], [3, 4]]), [[1, 2], [3, 4]])
    assert not check.close(np.array([16.0, 1.0]), (16.0, 0)) and not check.close(np.array([16.0]), (16.0, 0))
    assert not check.close(np.array([1.0, 2.0]), None)  # elementwise == has no single truth value: not equal


def test_a_str_answer_gets_the_number_hint(report_mode: None) -> None:
    r = lab00.check_ridge_point(lambda p, b: str(p / b))
    assert r.status == "wrong" and "return a number, not a str" in r.message, r.message
    assert "your answer was '" in r.message  # the learner sees what they returned


def test_returning_none_gets_the_forgot_return_hint(report_mode: None) -> None:
    r = lab00.check_ridge_point(lambda p, b: print(p / b))
    assert r.status == "wrong" and "returned None on every case: did you forget `return`?" in r.message, r.message


def test_an_exception_in_the_answer_is_a_failed_check(report_mode: None, capsys: pytest.CaptureFixture) -> None:
    def cfg_as_dict(p: float, b: float) -> float:
        return p["peak"] / b  # TypeError: a float is not subscriptable

    r = lab00.check_ridge_point(cfg_as_dict)
    assert r.status == "wrong" and "your function raised TypeError on inputs (" in r.message, r.message
    assert 'return p["peak"] / b' in r.message  # the learner's own line
    assert "Traceback" not in capsys.readouterr().out
    # the run carries on: the next check still runs and judges
    assert lab00.check_ridge_point(lambda p, b: p / b).passed


def test_an_exception_stops_the_run_as_check_failed(stop_mode: None) -> None:
    with pytest.raises(check.CheckFailed, match=r"raised ZeroDivisionError on inputs \(1, 2\)") as err:
        check.check_function("x", lambda a, b: a / (b - 2), lambda a, b: a, [(1, 2)])
    assert err.value.__context__ is None  # no "during handling of ..." second traceback


def test_not_implemented_is_still_not_done(report_mode: None) -> None:
    def todo(*args: float) -> float:
        raise NotImplementedError("later")

    r = check.check_function("x", todo, lambda a: a, [(1,)])
    assert r.status == "not done" and "later" in r.message


def test_one_branch_left_unwritten_is_wrong_and_named(report_mode: None) -> None:
    # A probe's predict_cycles raised NotImplementedError("IS dataflow") for "is" only: it read "not done yet".
    def partial(n: int, dataflow: str) -> int:
        if dataflow == "is":
            raise NotImplementedError("IS dataflow")
        return n

    r = check.check_function("cycles", partial, lambda n, d: n, [(1, "os"), (2, "is"), (3, "ws"), (4, "is")])
    assert r.status == "wrong" and r.message == ("your function answered 2 case(s) but raised NotImplementedError "
                                                 "on 2, e.g. inputs (2, 'is') (IS dataflow): that branch is not "
                                                 "written yet.")


# --------------------------------------------------------------- which hint, and when none


def _coincidence_hint() -> check.Hint:
    """A hint that fits the wrong answer on one case only: a coincidence, not the learner's mistake."""
    return check.Hint(lambda g, e, a: a[0] == 3, "MISLEADING")


def test_a_hint_that_fits_one_wrong_case_is_not_shown(report_mode: None) -> None:
    cases = [(i,) for i in range(1, 11)]
    r = check.check_function("x", lambda a: -a, lambda a: a, cases, hints=[_coincidence_hint()])
    assert r.status == "wrong" and "MISLEADING" not in r.message
    assert r.message == "wrong on 10 of 10 cases; the smallest: for inputs (a=1) expected 1, got -1."


def test_a_hint_that_fits_every_wrong_case_is_shown(report_mode: None) -> None:
    cases = [(i,) for i in range(1, 11)]
    hints = [_coincidence_hint(), check.Hint(lambda g, e, a: g == -e, "NEGATED")]
    r = check.check_function("x", lambda a: -a, lambda a: a, cases, hints=hints)
    assert r.message == "hint: NEGATED Wrong for (a=1): your answer was -1."


def test_a_hint_judges_only_the_cases_it_applies_to(report_mode: None) -> None:
    cases = [(i,) for i in range(1, 11)]
    # "doubled" cannot be told apart on even inputs here (say the answer there coincides with another slip)
    wrong = lambda a: 2 * a if a % 2 else 0  # noqa: E731
    doubled = check.Hint(lambda g, e, a: g == 2 * e, "DOUBLED", applies=lambda a: a[0] % 2 == 1)
    assert check.check_function("x", wrong, lambda a: a, cases, hints=[doubled]).message == (
        "hint: DOUBLED Wrong for (a=1): your answer was 2.")  # the first wrong case it fits, named
    unjudged = check.Hint(lambda g, e, a: g == 2 * e, "DOUBLED", applies=lambda a: False)
    assert "DOUBLED" not in check.check_function("x", wrong, lambda a: a, cases, hints=[unjudged]).message


def test_shown_values_are_bounded(report_mode: None) -> None:
    big = np.arange(10_000.0).reshape(100, 100)
    r = check.check_function("x", lambda a: [[0.0]], lambda a: big.tolist(), [(big,)])
    assert r.status == "wrong" and len(r.message) < 600, len(r.message)
    assert "shape (100, 100)" in r.message
    assert len(check.show("y" * 10_000)) <= check.SHOW_LIMIT


# ---------------------------------------------------------------- Lab 00: roofline units


def test_roofline_bandwidth_as_gb_per_s_is_told_the_inputs_are_plain(report_mode: None) -> None:
    for seed in range(40):
        lab00_rng = np.random.default_rng(seed)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(lab00, "_rng", lambda: lab00_rng)
            r = lab00.check_roofline_time(lambda f, b, p, w: max(f / p, b / (w / 1e9)))
        assert "inputs are already plain FLOP/s and bytes/s" in r.message, r.message
        assert "no ms" not in r.message


def test_roofline_output_unit_hint_says_the_inputs_are_plain(report_mode: None) -> None:
    r = lab00.check_roofline_time(lambda f, b, p, w: 1e3 * max(f / p, b / w))
    assert "right formula, wrong unit: the inputs are plain FLOPs, bytes, FLOP/s and bytes/s" in r.message, r.message


def test_stop_mode_hides_labkit_frames_but_the_raise(stop_mode: None) -> None:
    # IPython (>= 8) skips frames whose locals set __tracebackhide__; the raising frame always shows.
    for answer in (lambda p, b: b / p, lambda p, b: 1 / 0):
        with pytest.raises(check.CheckFailed) as err:
            lab00.check_ridge_point(answer)
        labkit_frames = [f for f, _ in traceback.walk_tb(err.tb) if "labkit" in f.f_code.co_filename]
        shown = [f.f_code.co_name for f in labkit_frames if not f.f_locals.get("__tracebackhide__")]
        assert shown == ["finish"] and len(labkit_frames) >= 3, shown


def test_each_check_outcome_reaches_the_run_report(report_mode: None, tmp_path, monkeypatch) -> None:
    """A student run is read from report.json: each check's latest outcome is recorded under 'exercises'."""
    from labkit.course import report

    metrics = tmp_path / "m.json"
    monkeypatch.setenv(report.METRICS_ENV, str(metrics))
    monkeypatch.setattr(report, "_recorded", {})
    lab00.check_ridge_point(lambda p, b: check.your_turn("the ridge point"))
    lab00.check_matmul_intensity(lambda *a: check.your_turn("intensity"))
    first = report.read_metrics(metrics)["exercises"]
    assert set(first.values()) == {"not done"} and len(first) == 2
    lab00.check_ridge_point(lambda p, b: b / p)  # tried, wrong: replaces "not done"
    lab00.check_roofline_time(lambda f, b, p, w: max(f / p, b / w))
    tally = report.read_metrics(metrics)["exercises"]
    assert sorted(tally.values()) == ["not done", "passed", "wrong"]
    assert report.exercise_tally({"exercises": tally}) == "  exercises: 1 passed, 1 wrong, 1 not done"
    assert report.exercise_tally({"mfu": 0.3}) == ""


def test_a_majority_hint_must_not_contradict_the_right_answers(report_mode: None) -> None:
    """Right on 6 cases, wrong on 4, 3 of which a 'NEGATED' hint fits: the 6 right ones say it is not negating."""
    cases = [(i,) for i in range(1, 11)]
    hint = check.Hint(lambda g, e, a: g == -e, "NEGATED")
    r = check.check_function("x", lambda a: {4: -4, 7: -7, 8: -8, 9: 0}.get(a, a), lambda a: a, cases, hints=[hint])
    assert "NEGATED" not in r.message  # 3 of 4 wrong cases would have been "a clear majority" of those alone
    assert r.message == "wrong on 4 of 10 cases; the smallest: for inputs (a=4) expected 4, got -4.", r.message
    # wrong on most cases, with one oddity the hint does not explain: still a clear majority of the cases
    r = check.check_function("x", lambda a: 0 if a == 9 else -a, lambda a: a, cases, hints=[hint])
    assert r.message == "hint: NEGATED Wrong for (a=1): your answer was -1.", r.message


def test_the_fallback_names_the_inputs_and_shows_the_smallest_wrong_case(report_mode: None) -> None:
    def reference(rows: int, cols: int, name: str) -> int:
        return rows * cols

    cases = [(300, 200, "big"), (3, 2, "small"), (30, 20, "mid")]
    r = check.check_function("x", lambda r_, c, n: r_ + c, reference, cases)
    # named with the learner's own parameter names (the reference's were labkit's, not the notebook's)
    assert r.message == ("wrong on 3 of 3 cases; the smallest: for inputs (r_=3, c=2, n='small') "
                         "expected 6, got 5."), r.message
    r = check.check_function("x", lambda *a: 0, lambda *a: 1, [(1, 2)])  # no names to give: plain values
    assert r.message.endswith("for inputs (1, 2) expected 1, got 0."), r.message
