"""labkit.course.check and the Lab 00 exercises: right answers pass, plausible wrong ones get their hint."""

from __future__ import annotations

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
