"""Tests for labkit.course.exercises.lab04: right answers pass, plausible wrong ones get their hint."""
from __future__ import annotations

import math
from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest

from labkit.precision import formats as precision
from labkit.course.check import CheckResult
from labkit.course.exercises import lab04
from tests import exercise_contract as contract
from tests.course.exercises.seeds import over_seeds

# ----------------------------------------------------------------------- 1. format max


def fmax_ref(e: int, m: int, ieee: bool) -> float:
    """The lab's solution."""
    bias = 2 ** (e - 1) - 1
    if ieee:
        return (2 - 2.0 ** -m) * 2.0 ** (2**e - 2 - bias)
    return (2 - 2.0 ** (1 - m)) * 2.0 ** (2**e - 1 - bias)


def fmax_alt(e: int, m: int, ieee: bool) -> float:
    """Correct, written differently: the bit pattern of the largest value, decoded."""
    bias = (1 << (e - 1)) - 1
    top_exp = (1 << e) - (2 if ieee else 1)  # largest usable exponent field
    top_man = (1 << m) - (1 if ieee else 2)  # largest usable mantissa field
    return math.ldexp(1 + top_man / (1 << m), top_exp - bias)


FMAX_WRONG: list[tuple[Callable[..., float], str]] = [
    (lambda e, m, i: (1 - 2.0 ** -m) * 2.0 ** (2 ** (e - 1) - 1), "forgot the implicit leading 1"),
    (lambda e, m, i: (2 - 2.0 ** -m) * 2.0 ** (2 ** (e - 1) - 1), "e4m3fn has no inf"),
    (lambda e, m, i: (2 - 2.0 ** -m) * 2.0 ** (2 ** (e - 1)) if i else fmax_ref(e, m, i) * 2,
     "exponent one too large"),
    (lambda e, m, i: fmax_ref(e, m, i) / 2, "bias off by one"),
    (lambda e, m, i: fmax_ref(e, m, i) if i else (2 - 2.0 ** -m) * 2.0 ** (2 ** (e - 1)),
     "all-ones mantissa is NaN"),
]

# --------------------------------------------------------------------- 2. round to bits


def round_ref(x: float, b: int) -> float:
    """The lab's solution."""
    if x == 0:
        return x
    m, e = math.frexp(x)
    return math.ldexp(round(m * 2 ** (b + 1)), e - b - 1)


def round_alt(x: float, b: int) -> float:
    """Correct, written differently: scale by the ulp of x and use numpy's rint (ties to even)."""
    ulp = 2.0 ** (math.floor(math.log2(abs(x))) - b)
    return float(np.rint(x / ulp) * ulp)


def _away(x: float, b: int) -> float:
    ulp = 2.0 ** (math.floor(math.log2(abs(x))) - b)
    return math.copysign(math.floor(abs(x) / ulp + 0.5), x) * ulp


ROUND_WRONG: list[tuple[Callable[..., float], str]] = [
    (lambda x, b: math.ldexp(math.trunc(math.frexp(x)[0] * 2 ** (b + 1)), math.frexp(x)[1] - b - 1),
     "you truncated"),
    (_away, "ties go to even"),
    (lambda x, b: math.ldexp(math.floor(math.frexp(x)[0] * 2 ** (b + 1) + 0.5), math.frexp(x)[1] - b - 1),
     "you rounded halves up"),  # right on every non-tie: only the fixed ties catch it, every run
    (lambda x, b: math.ldexp(round(math.frexp(x)[0] * 2**b), math.frexp(x)[1] - b), "one bit short"),
    (lambda x, b: round_ref(x, b + 1), "one bit too many"),
    (lambda x, b: float(np.float32(x).astype(ml_dtypes.bfloat16)), "that is bf16 (7 bits) whatever mantissa_bits"),
    (lambda x, b: round_ref(x, 7), "that is bf16 (7 bits) whatever mantissa_bits"),
]

# ----------------------------------------------------------------- 3. loss-scale update


def us_ref(s: float, g: int, f: bool, n: int, gf: float, bf: float) -> tuple[float, int]:
    """The lab's solution."""
    if not f:
        return s * bf, 0
    if g + 1 >= n:
        return s * gf, 0
    return s, g + 1


def us_alt(s: float, g: int, f: bool, n: int, gf: float, bf: float) -> tuple[float, int]:
    """Correct, written differently: one expression per output."""
    grow = f and g + 1 == n
    new_s = s * (gf if grow else 1.0) * (1.0 if f else bf)
    return new_s, (g + 1) * (f and not grow)


US_WRONG: list[tuple[Callable[..., Any], str]] = [
    (lambda s, g, f, n, gf, bf: (s * bf, 0) if not f else ((s * gf, 0) if g == n else (s, g + 1)), "off by one"),
    (lambda s, g, f, n, gf, bf: (s * bf, 0) if not f else ((s * gf, g + 1) if g + 1 == n else (s, g + 1)),
     "reset good_steps to 0"),
    (lambda s, g, f, n, gf, bf: (s * bf, g) if not f else us_ref(s, g, f, n, gf, bf), "on overflow also reset"),
    (lambda s, g, f, n, gf, bf: (s / gf, 0) if not f else us_ref(s, g, f, n, gf, bf), "back off with backoff_factor"),
    (lambda s, g, f, n, gf, bf: (s * bf, 0) if not f else (s * gf, 0), "you grow after every finite step"),
    (lambda s, g, f, n, gf, bf: us_ref(s, g, not f, n, gf, bf), "the branches are swapped"),
    (lambda s, g, f, n, gf, bf: us_ref(s, g, f, n, 2.0, 0.5), "not GradScaler's defaults 2 and 0.5"),
]

CHECKS: list[tuple[Callable[[Callable[..., Any]], CheckResult], Callable[..., Any],
                   Callable[..., Any], list[tuple[Callable[..., Any], str]]]] = [
    (lab04.check_format_max, fmax_ref, fmax_alt, FMAX_WRONG),
    (lab04.check_round_to_bits, round_ref, round_alt, ROUND_WRONG),
    (lab04.check_update_scale, us_ref, us_alt, US_WRONG),
]
IDS = ["format_max", "round_to_bits", "update_scale"]


def _unrecognised(check: Callable[..., CheckResult]) -> Callable[..., Any]:
    """A wrong answer that no hint can match on any drawn case, so the check must show inputs.

    A hint that fits one wrong case is shown (check_function's fallback), so the answer has to be
    impossible, not just unlikely: a constant (3.0, 7) once equalled "no reset after growth" on
    s=2, growth 1.5, n=7 and failed CI. No rule makes a negative scale or step count, and 1/3 is
    no float of <= 24 significand bits (nearest is 2**-25 relatively away, far beyond rel 1e-9).
    """
    if check is lab04.check_update_scale:
        return lambda *a: (-1.0, -1)
    return lambda *a: 1.0 / 3.0


# The six tests every exercise check must pass (tests/exercise_contract.py).
globals().update(contract.standard_tests(CHECKS, IDS, unrecognised=_unrecognised))


# ------------------------------------------------- the references agree with the formats


@pytest.mark.parametrize("name, ieee", [("fp32", True), ("bf16", True), ("fp16", True),
                                        ("fp8_e5m2", True), ("fp8_e4m3", False)])
def test_format_max_reference_matches_finfo(name: str, ieee: bool) -> None:
    f = precision.format_info(name)
    assert lab04.format_max(f.exponent_bits, f.mantissa_bits, ieee) == f.max
    assert f.max == float(ml_dtypes.finfo(precision.dtype_of(name)).max)


def test_round_to_bits_reference_matches_bf16_and_tf32() -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(2000) * 10.0 ** rng.uniform(-20, 20, 2000)).astype(np.float32)
    bf16 = x.astype(ml_dtypes.bfloat16).astype(np.float64)
    tf32 = precision.round_mantissa(x, 10).astype(np.float64)
    for xi, b, t in zip(x.astype(np.float64), bf16, tf32):
        assert lab04.round_to_bits(xi, 7) == b
        assert lab04.round_to_bits(xi, 10) == t


def test_round_half_up_is_rejected_every_run(report_mode: None) -> None:
    """It used to pass ~1 run in 64 (only 6 random ties) and was hinted "you truncated" most of the time."""
    half_up = ROUND_WRONG[2][0]
    assert all(half_up(x, b) != lab04.round_to_bits(x, b) for x, b in lab04.FIXED_TIES[::3])  # +even, -odd ties
    for _ in range(50):
        r = lab04.check_round_to_bits(half_up)
        assert not r.passed and "you rounded halves up" in r.message


def test_update_scale_reference_is_the_labkit_rule() -> None:
    from labkit.precision import loss_scale as ls

    cfg = ls.LossScaleConfig(init_scale=8.0, growth_factor=4.0, backoff_factor=0.25, growth_interval=3)
    s, g = 8.0, 0
    for finite in [True, True, True, False, True, True, True, True]:
        assert lab04.update_scale(s, g, finite, 3, 4.0, 0.25) == ls.next_scale(s, g, finite, cfg)
        s, g = ls.next_scale(s, g, finite, cfg)


# ------------------------------------------------- hints only when they explain the answer



@pytest.mark.parametrize("fn, hint", [
    (lambda x, b: x, "you returned x unchanged"),
    (lambda x, b: round(x, b), "keeps b *decimal* places"),
    (lambda x, b: float(np.float32(x)), "a cast to float32, which always keeps 23 bits"),
], ids=["identity", "decimal_round", "float32_cast"])
def test_round_to_bits_never_says_one_bit_too_many_by_coincidence(monkeypatch: pytest.MonkeyPatch,
                                                                  fn: Callable[..., float], hint: str) -> None:
    # The ties fit b + 1 bits exactly, so "one bit too many" returns x there, like these answers do.
    for _ in over_seeds(monkeypatch, lab04):
        r = lab04.check_round_to_bits(fn)
        assert r.status == "wrong" and "one bit too many" not in r.message, r.message
        assert hint in r.message, r.message


def test_one_bit_too_many_is_still_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for _ in over_seeds(monkeypatch, lab04):
        r = lab04.check_round_to_bits(lambda x, b: round_ref(x, b + 1))
        assert "one bit too many" in r.message, r.message


def test_swapped_layouts_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for _ in over_seeds(monkeypatch, lab04):
        r = lab04.check_format_max(lambda e, m, i: fmax_ref(e, m, not i))
        assert "the two layouts are swapped" in r.message and "e4m3fn has no inf" not in r.message, r.message


def test_update_scale_accepts_a_numpy_array(report_mode: None) -> None:
    assert lab04.check_update_scale(lambda *a: np.array(us_ref(*a))).passed
    assert lab04.check_update_scale(lambda *a: list(us_ref(*a))).passed
    r = lab04.check_update_scale(lambda *a: np.array(US_WRONG[0][0](*a)))  # an array answer still gets its hint
    assert "off by one" in r.message, r.message


def test_format_max_in_float32_is_told_it_overflowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The right formula in float32 arithmetic: inf wherever the max is beyond 3.4e38 (e >= 9, fn e = 8)."""
    def in_float32(e: int, m: int, ieee: bool) -> np.float32:
        top, two = (2 ** e - 2 if ieee else 2 ** e - 1) - (2 ** (e - 1) - 1), np.float32(2.0)
        with np.errstate(over="ignore"):
            return (two - two ** np.float32(-m if ieee else 1 - m)) * two ** np.float32(top)
    for _ in over_seeds(monkeypatch, lab04):
        r = lab04.check_format_max(in_float32)
        assert r.status == "wrong" and "overflowed to inf" in r.message and "float32 (largest 3.403e+38)" in r.message
    r = lab04.check_format_max(lambda e, m, i: np.float64("inf") if e == 8 else fmax_ref(e, m, i))
    assert "overflowed" not in r.message, r.message  # float64 holds every answer: inf there is the formula's


def test_rounding_through_float32_is_named_every_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Double rounding: right on most draws, so without the near-tie cases it passed ~60% of runs and was
    otherwise told it 'truncated' or was 'one bit short'."""
    from labkit.precision import formats

    for _ in over_seeds(monkeypatch, lab04):
        r = lab04.check_round_to_bits(lambda x, b: float(formats.round_mantissa(x, b)))
        assert r.status == "wrong" and "rounded through float32 first" in r.message, r.message
    x, b = lab04.NEAR_TIES[0]
    assert lab04.round_to_bits(x, b) == 1 + 2.0**-7 and round_ref(float(np.float32(x)), b) == 1.0
