"""Lab 04 exercises: a format's max from its bits, rounding to a mantissa width, the loss-scale rule."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from labkit.course.check import CheckResult, Hint, check_function

N_CASES = 24  # random cases per check


def _rng() -> np.random.Generator:
    return np.random.default_rng()  # fresh entropy each call: a memorised answer cannot pass


def _matches(wrong: Callable[..., Any]) -> Callable[[Any, Any, tuple], bool]:
    """Hint predicate: the learner's answer equals a known wrong implementation's."""

    def when(got: Any, expected: Any, args: tuple) -> bool:
        w = wrong(*args)
        if isinstance(w, tuple):
            return isinstance(got, (tuple, list)) and len(got) == len(w) and all(
                math.isclose(float(g), float(x), rel_tol=1e-9) for g, x in zip(got, w))
        return math.isclose(float(got), float(w), rel_tol=1e-9)

    return when


# ------------------------------------------------------------------ 1. largest finite value


def format_max(exponent_bits: int, mantissa_bits: int, ieee: bool) -> float:
    """(Lab 04) Reference: largest finite value of a float layout.

    ``ieee=True``: the all-ones exponent is reserved for inf/NaN (fp32, bf16, fp16, e5m2).
    ``ieee=False``: "fn" layout like fp8 e4m3fn: no inf, the all-ones exponent holds normal
    numbers and only its all-ones mantissa is NaN. Bias = 2**(e-1) - 1 in both.
    """
    bias = 2 ** (exponent_bits - 1) - 1
    if ieee:
        return math.ldexp(2.0 - 2.0 ** -mantissa_bits, (2 ** exponent_bits - 2) - bias)
    return math.ldexp(2.0 - 2.0 ** (1 - mantissa_bits), (2 ** exponent_bits - 1) - bias)


def _fmax_no_implicit(e: int, m: int, ieee: bool) -> float:
    bias = 2 ** (e - 1) - 1
    top = (2 ** e - 2) if ieee else (2 ** e - 1)
    frac = (1.0 - 2.0 ** -m) if ieee else (1.0 - 2.0 ** (1 - m))
    return math.ldexp(frac, top - bias)


def _fmax_bias(shift: int) -> Callable[[int, int, bool], float]:
    return lambda e, m, ieee: format_max(e, m, ieee) * 2.0 ** shift


def _fmax_always_ieee(e: int, m: int, ieee: bool) -> float:
    return format_max(e, m, True)


def _fmax_fn_all_mantissa(e: int, m: int, ieee: bool) -> float:
    return format_max(e, m, True) if ieee else math.ldexp(2.0 - 2.0 ** -m, 2 ** e - 1 - (2 ** (e - 1) - 1))


def check_format_max(fn: Callable[[int, int, bool], float]) -> CheckResult:
    """(Lab 04) ``fn(exponent_bits, mantissa_bits, ieee)`` must return the largest finite value."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    known = [(8, 23, True), (8, 7, True), (5, 10, True), (5, 2, True), (4, 3, False)]
    cases = known + [(int(rng.integers(2, 10)), int(rng.integers(1, 24)), bool(rng.integers(2)))
                     for _ in range(N_CASES)]
    hints = [
        Hint(_matches(lambda e, m, ieee: format_max(e, m, not ieee)), "the two layouts are swapped: "
             "ieee=True reserves the all-ones exponent for inf/NaN (so its max is lower), ieee=False (fn) does not."),
        Hint(_matches(_fmax_always_ieee), "e4m3fn has no inf: with ieee=False the all-ones exponent "
             "holds normal numbers (only mantissa all-ones there is NaN), so the max is 448, not 240."),
        # Without the implicit 1 whether or not the fn rule is also missed: one slip at a time.
        Hint(lambda g, e, a: _matches(_fmax_no_implicit)(g, e, a) or _matches(_fmax_no_implicit)(g, e, (*a[:2], True)),
             "you forgot the implicit leading 1: a normal value is "
             "1.mantissa x 2**exponent, so the largest significand is 2 - 2**-m, not 1 - 2**-m."),
        Hint(_matches(_fmax_bias(1)), "exponent one too large: the bias is 2**(e-1) - 1 (127 for "
             "fp32), and with ieee=True the all-ones exponent is reserved for inf/NaN, so the "
             "largest usable exponent is +bias (127 for fp32)."),
        Hint(_matches(_fmax_bias(-1)), "bias off by one: the bias is 2**(e-1) - 1 (127 for fp32), "
             "not 2**(e-1); the largest IEEE exponent is then +bias (127)."),
        Hint(_matches(_fmax_fn_all_mantissa), "in an fn format the all-ones exponent with all-ones "
             "mantissa is NaN, so the largest mantissa there is all-ones minus one (1.75 for e4m3)."),
    ]
    return check_function("format max", fn, format_max, cases, hints=hints, rtol=1e-12,
                          explain="fp16 tops out at 65504, bf16 at 3.4e38: exponent bits buy range.")


# ---------------------------------------------------------------- 2. round to m mantissa bits


def round_to_bits(x: float, mantissa_bits: int) -> float:
    """(Lab 04) Reference: x rounded to nearest (ties to even) with ``mantissa_bits`` fraction bits."""
    if x == 0 or not math.isfinite(x):
        return x
    m, e = math.frexp(x)  # x = m * 2**e, 0.5 <= |m| < 1: m's leading bit is the implicit 1
    return math.ldexp(round(m * 2 ** (mantissa_bits + 1)), e - mantissa_bits - 1)  # round(): even


def _round_trunc(x: float, b: int) -> float:
    m, e = math.frexp(x)
    return math.ldexp(math.trunc(m * 2 ** (b + 1)), e - b - 1)


def _round_away(x: float, b: int) -> float:
    m, e = math.frexp(x)
    s = m * 2 ** (b + 1)
    return math.ldexp(math.copysign(math.floor(abs(s) + 0.5), s), e - b - 1)


def _round_half_up(x: float, b: int) -> float:
    m, e = math.frexp(x)
    return math.ldexp(math.floor(m * 2 ** (b + 1) + 0.5), e - b - 1)


# Exact ties with 7 kept bits, of both signs and both parities of the last kept bit: 1 + 2**-8 lies
# halfway between 1 and 1 + 2**-7 (even: stays 1), 1 + 3 * 2**-8 between 1 + 2**-7 and 1 + 2**-6 (odd:
# goes up). Together they tell ties-to-even apart from truncation, half-up and half-away, every run.
FIXED_TIES = [(s * (1 + k * 2.0**-8), 7) for s in (1.0, -1.0) for k in (1, 3)]
# Just off those ties by 2**-30, below float32's resolution: rounding x to float32 first lands on the tie
# and then goes the wrong way (double rounding), every run.
NEAR_TIES = [(1 + 2.0**-8 + 2.0**-30, 7), (-(1 + 3 * 2.0**-8 - 2.0**-30), 7)]


def _bf16_cast(x: float) -> float:
    """x cast to bfloat16 the way a learner would (through float32, ml_dtypes), back to float."""
    import ml_dtypes

    return float(np.float32(x).astype(ml_dtypes.bfloat16))


def _round_bits(shift: int) -> Callable[[float, int], float]:
    return lambda x, b: round_to_bits(x, b + shift)


def _fits_more_bits(args: tuple) -> bool:
    """False on a case whose x already fits b + 1 bits (the ties): there "one bit too many" returns
    x unchanged, like an answer that does nothing, so such a case cannot tell the two apart."""
    x, b = args
    return round_to_bits(x, b + 1) != x


def check_round_to_bits(fn: Callable[[float, int], float]) -> CheckResult:
    """(Lab 04) ``fn(x, mantissa_bits)``: x rounded to nearest, ties to even, keeping that many bits."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases: list[tuple[float, int]] = []
    for _ in range(N_CASES):
        b = int(rng.integers(1, 24))
        x = float(rng.choice([-1, 1]) * rng.uniform(1, 2) * 2.0 ** int(rng.integers(-30, 30)))
        cases.append((x, b))
    for i in range(6):  # exact ties halfway between two (b+1)-bit significands k and k+1 ...
        b = int(rng.integers(2, 20))
        k = 2 ** b + 2 * int(rng.integers(0, 2 ** (b - 1))) + i % 2  # ... with k even and odd
        x = math.ldexp(k + 0.5, int(rng.integers(-10, 10)) - b)
        cases.append((float(rng.choice([-1, 1])) * x, b))
    cases += FIXED_TIES + NEAR_TIES
    hints = [
        Hint(lambda g, e, a: g == round_to_bits(float(np.float32(a[0])), a[1]), "you rounded through float32 "
             "first (np.float32, or an fp32 bit mask like labkit's round_mantissa): x is a Python float (64 bits), "
             "and its first rounding can land it on a tie that then goes the wrong way (double rounding). Round x "
             "itself: math.frexp, scale, round(), scale back.", applies=lambda a: float(np.float32(a[0])) != a[0]),
        Hint(_matches(_round_half_up), "you rounded halves up (floor(v + 0.5)): a tie must go to the even "
             "neighbour -- 1 + 2**-8 with 7 bits is 1.0, and -(1 + 3 * 2**-8) goes to -(1 + 2**-6), not up "
             "towards zero. Python's round() and np.rint round ties to even."),
        Hint(_matches(_round_trunc), "you truncated (chopped the extra bits); a cast rounds to "
             "the nearest representable value."),
        Hint(_matches(_round_away), "ties go to even (IEEE default), not away from zero: Python's "
             "round() and np.rint already do that."),
        Hint(_matches(_round_bits(-1)), "one bit short: count the implicit leading 1 separately. "
             "math.frexp gives a mantissa in [0.5, 1), so scale it by 2**(bits + 1)."),
        Hint(lambda g, e, a: g == a[0], "you returned x unchanged: keep only mantissa_bits fraction "
             "bits (math.frexp splits x into mantissa and exponent; round the scaled mantissa)."),
        Hint(lambda g, e, a: g == round(*a), "round(x, b) keeps b *decimal* places; mantissa bits are binary "
             "digits counted from x's leading 1: scale frexp's mantissa by 2**(bits + 1), round, scale back.",
             applies=lambda a: round(*a) != a[0]),
        Hint(_matches(_round_bits(1)), "one bit too many: 'mantissa_bits' are the fraction bits "
             "after the implicit leading 1 (tf32 keeps 10, bf16 7).", applies=_fits_more_bits),
        Hint(lambda g, e, a: g == float(np.float32(a[0])), "that is a cast to float32, "
             "which always keeps 23 bits: round to mantissa_bits instead (bf16 keeps 7, tf32 10).",
             applies=lambda a: round_to_bits(a[0], 23) != a[0]),
        Hint(lambda g, e, a: g in (_bf16_cast(a[0]), round_to_bits(a[0], 7)), "that is bf16 (7 bits) whatever "
             "mantissa_bits says: a bf16 cast keeps 7 fraction bits on every case. Keep mantissa_bits of them "
             "(10 for tf32): scale frexp's mantissa by 2**(mantissa_bits + 1), round(), scale back.",
             applies=lambda a: a[1] != 7 and round_to_bits(a[0], 7) != round_to_bits(*a)),
    ]
    return check_function("round to mantissa bits", fn, round_to_bits, cases, hints=hints,
                          rtol=0.0, explain="With 10 bits (tf32) the relative error is at most "
                                            "2**-11; with 7 (bf16) 2**-8.")


# ------------------------------------------------------------- 3. dynamic loss-scale update


def update_scale(scale: float, good_steps: int, finite: bool, growth_interval: int,
                 growth_factor: float, backoff_factor: float) -> tuple[float, int]:
    """(Lab 04) Reference: torch.amp.GradScaler's rule -> (new scale, new good_steps)."""
    if not finite:
        return scale * backoff_factor, 0
    good_steps += 1
    if good_steps == growth_interval:
        return scale * growth_factor, 0
    return scale, good_steps


def _us_flax(s: float, g: int, f: bool, n: int, gf: float, bf: float) -> tuple[float, int]:
    if not f:
        return s * bf, 0
    return (s * gf, 0) if g == n else (s, g + 1)  # grows one step late


def _us_no_reset_growth(s: float, g: int, f: bool, n: int, gf: float, bf: float) -> tuple[float, int]:
    if not f:
        return s * bf, 0
    return (s * gf, g + 1) if g + 1 == n else (s, g + 1)


def _us_no_reset_backoff(s: float, g: int, f: bool, n: int, gf: float, bf: float) -> tuple[float, int]:
    return (s * bf, g) if not f else update_scale(s, g, f, n, gf, bf)


def _us_backoff_by_growth(s: float, g: int, f: bool, n: int, gf: float, bf: float) -> tuple[float, int]:
    return (s / gf, 0) if not f else update_scale(s, g, f, n, gf, bf)


def _us_grow_every(s: float, g: int, f: bool, n: int, gf: float, bf: float) -> tuple[float, int]:
    return (s * bf, 0) if not f else (s * gf, 0)


def _us_swapped(s: float, g: int, f: bool, n: int, gf: float, bf: float) -> tuple[float, int]:
    return update_scale(s, g, not f, n, gf, bf)


def _us_default_factors(s: float, g: int, f: bool, n: int, gf: float, bf: float) -> tuple[float, int]:
    return update_scale(s, g, f, n, 2.0, 0.5)  # GradScaler's defaults typed in, the arguments ignored


def _changes_scale_with_other_factors(args: tuple) -> bool:
    """Cases where the step backs off or grows with a factor other than GradScaler's default."""
    s, g, f, n, gf, bf = args
    return (not f and bf != 0.5) or (f and g + 1 >= n and gf != 2.0)


def check_update_scale(fn: Callable[..., tuple[float, int]]) -> CheckResult:
    """(Lab 04) ``fn(scale, good_steps, finite, growth_interval, growth_factor, backoff_factor)``."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases = []
    for i in range(N_CASES):
        n = int(rng.integers(2, 50))
        s = float(2.0 ** int(rng.integers(0, 24)))
        gf, bf = float(rng.choice([2.0, 4.0, 1.5])), float(rng.choice([0.5, 0.25, 0.8]))
        kind = i % 3  # overflow / the step that grows / an ordinary good step
        g = int(rng.integers(0, n)) if kind == 0 else n - 1 if kind == 1 else int(rng.integers(0, n - 1))
        cases.append((s, g, kind != 0, n, gf, bf))
    hints = [
        Hint(_matches(_us_swapped), "the branches are swapped: non-finite gradients mean the scale "
             "is too big (back off); finite ones count towards growth."),
        Hint(_matches(_us_grow_every), "you grow after every finite step; grow only once "
             "growth_interval finite steps in a row have passed."),
        Hint(_matches(_us_flax), "off by one: count this step first (good_steps + 1), then grow "
             "when that reaches growth_interval (GradScaler grows on the N-th good step)."),
        Hint(_matches(_us_no_reset_growth), "after growing, reset good_steps to 0: the new scale "
             "has to prove itself for a full interval."),
        Hint(_matches(_us_no_reset_backoff), "on overflow also reset good_steps to 0: the streak "
             "of finite steps is broken."),
        Hint(_matches(_us_backoff_by_growth), "back off with backoff_factor (scale * backoff), "
             "not by dividing by growth_factor: they are separate settings."),
        Hint(_matches(_us_default_factors), "use the growth_factor and backoff_factor arguments, not "
             "GradScaler's defaults 2 and 0.5: the check draws other factors (e.g. 4 and 0.25).",
             applies=_changes_scale_with_other_factors),
    ]
    return check_function("dynamic loss-scale update", fn, update_scale, cases, hints=hints,
                          rtol=1e-12, explain="Overflow shrinks the scale at once; growth "
                          "waits for a streak of good steps, so it probes upward slowly.")
