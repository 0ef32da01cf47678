"""Tests for labkit.course.exercises.lab06: right answers pass, plausible wrong ones get their hint."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from labkit.course.check import CheckResult
from labkit.course.exercises import lab06
from tests import exercise_contract as contract

# ---------------------------------------------------------------- 1. $ per million tokens


def cost_ref(usd_per_hour: float, tokens_per_s: float, utilization: float) -> float:
    """The lab's solution."""
    tokens_per_hour = tokens_per_s * 3600 * utilization
    return usd_per_hour / tokens_per_hour * 1e6


def cost_alt(usd_per_hour: float, tokens_per_s: float, utilization: float) -> float:
    """Correct, written differently: $ per second over useful Mtok per second."""
    usd_per_s = usd_per_hour / 3600.0
    mtok_per_s = tokens_per_s / 1e6
    return (usd_per_s / utilization) / mtok_per_s


COST_WRONG: list[tuple[Callable[..., float], str]] = [
    (lambda p, t, u: p / (t * u) * 1e6, "forgot 3600"),
    (lambda p, t, u: p / (t * 3600 * u), "forgot the 1e6"),
    (lambda p, t, u: p / (t * 3600 * u) * 1e3, "per thousand tokens"),
    (lambda p, t, u: p / (t * u), "forgot both 3600"),
    (lambda p, t, u: p * u / (t * 3600) * 1e6, "utilization multiplied instead of divided"),
    (lambda p, t, u: p / (t * 3600) * 1e6, "utilization left out"),
    (lambda p, t, u: t * 3600 * u / (p * 1e6), "upside down"),
    (lambda p, t, u: p / (t * 60 * u) * 1e6, "x 60 is seconds per minute"),
]

# ---------------------------------------------------------------- 2. break-even utilization


def be_ref(usd_res: float, tps_res: float, usd_od: float, tps_od: float) -> float:
    """The lab's solution: usd_res / (tps_res x u) = usd_od / tps_od."""
    return usd_res * tps_od / (usd_od * tps_res)


def be_alt(usd_res: float, tps_res: float, usd_od: float, tps_od: float) -> float:
    """Correct, written differently: ratio of $ per token at full use."""
    per_tok_res = usd_res / tps_res
    per_tok_od = usd_od / tps_od
    return per_tok_res / per_tok_od


BE_WRONG: list[tuple[Callable[..., float], str]] = [
    (lambda a, ta, b, tb: a / b, "compared prices only"),
    (lambda a, ta, b, tb: a * ta / (b * tb), "throughputs the wrong way round"),
    (lambda a, ta, b, tb: b * ta / (a * tb), "upside down"),
    (lambda a, ta, b, tb: 100 * a * tb / (b * ta), "not a percentage"),
]

# ---------------------------------------------------------------- 3. spot after preemption


def spot_ref(od: float, sp: float, lost: float) -> float:
    """The lab's solution."""
    return 1 - sp / (1 - lost) / od


def spot_alt(od: float, sp: float, lost: float) -> float:
    """Correct, written differently: (on-demand - spot per useful hour) / on-demand."""
    useful_hours_per_spot_hour = 1 - lost
    return (od * useful_hours_per_spot_hour - sp) / (od * useful_hours_per_spot_hour)


SPOT_WRONG: list[tuple[Callable[..., float], str]] = [
    (lambda od, sp, f: 1 - sp / od, "preemption ignored"),
    (lambda od, sp, f: 1 - sp * (1 - f) / od, "multiplied by (1 - f) instead of dividing"),
    (lambda od, sp, f: 1 - sp * (1 + f) / od, "first-order approximation"),
    (lambda od, sp, f: 1 - sp / od - f, "subtracting f"),
    (lambda od, sp, f: sp / (1 - f) / od, "the discount is 1 minus it"),
    (lambda od, sp, f: 100 * (1 - sp / (1 - f) / od), "not a percentage"),
]

CHECKS: list[tuple[Callable[[Callable[..., Any]], CheckResult], Callable[..., float],
                   Callable[..., float], list[tuple[Callable[..., float], str]]]] = [
    (lab06.check_cost_per_mtok, cost_ref, cost_alt, COST_WRONG),
    (lab06.check_break_even_utilization, be_ref, be_alt, BE_WRONG),
    (lab06.check_spot_discount, spot_ref, spot_alt, SPOT_WRONG),
]
IDS = ["cost_per_mtok", "break_even_utilization", "spot_discount"]

# The six tests every exercise check must pass (tests/exercise_contract.py).
globals().update(contract.standard_tests(CHECKS, IDS, unrecognised=lambda check: (lambda *args: 42.0), hint_repeats=1))


def test_break_even_reference_is_labkit_break_even() -> None:
    # 1.22 $/h committed v6e vs 2.70 $/h on-demand at the same tokens/s: u* = 1.22 / 2.70
    u = lab06._break_even_utilization(1.22, 1000.0, 2.70, 1000.0)
    assert u == pytest.approx(1.22 / 2.70)


def test_spot_explanation_is_computed_not_a_fixed_verdict() -> None:
    # It once said a 70% discount "shrinks fast" while the lab printed 66.7%, which still passes the claim.
    assert lab06.spot_explain().endswith("1 - 0.3 / 0.9 = 66.7% per useful hour.")
    assert "shrinks" not in lab06.check_spot_discount(spot_ref).message
    assert "= 50.0% per useful hour" in lab06.spot_explain(0.55, 0.1)   # 1 - 0.45 / 0.9


def test_break_even_above_one_means_the_reservation_never_pays() -> None:
    # $3/h reserved vs $2/h on-demand at the same tokens/s: dearer per token even fully used -> u* = 1.5, not clamped.
    assert lab06._break_even_utilization(3.0, 1000.0, 2.0, 1000.0) == pytest.approx(1.5)
    clamped = lambda a, ta, b, tb: min(1.0, be_ref(a, ta, b, tb))  # noqa: E731
    with pytest.raises(Exception, match="never pays"):
        lab06.check_break_even_utilization(clamped)
