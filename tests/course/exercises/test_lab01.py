"""Lab 01 exercise checks: accept right answers (written any way), name the mistake in wrong ones."""
from __future__ import annotations

import math

import numpy as np
import pytest

from labkit.course import check

from labkit.matmul import systolic
from labkit.course.check import CheckFailed, NotDoneYet
from labkit.course.exercises import lab01
from tests.course.exercises.seeds import over_seeds


@pytest.fixture(params=[0, 1, 2])
def seeded(request, monkeypatch):
    """Deterministic random cases (the checks draw fresh entropy by default)."""
    monkeypatch.setattr(lab01, "_rng", lambda: np.random.default_rng(request.param))
    monkeypatch.delenv(check.MODE_ENV, raising=False)  # default "stop" mode


def _not_done(*args):
    check.your_turn("the exercise")


def _wrong(checker, fn, hint: str) -> None:
    with pytest.raises(CheckFailed, match=hint):
        checker(fn)


def _report_mode(monkeypatch, checker, fn, status: str) -> check.CheckResult:
    monkeypatch.setenv(check.MODE_ENV, "report")
    result = checker(fn)
    assert result.status == status
    return result


# ------------------------------------------------------------------ 1. cycle count
MAP = {"os": lambda M, K, N: (M, N, K), "ws": lambda M, K, N: (K, N, M), "is": lambda M, K, N: (K, M, N)}


def cycles_loops(M, K, N, rows, cols, dataflow):
    """Correct, written differently: count the folds with loops, add the phases one by one."""
    sr, sc, t = MAP[dataflow](M, K, N)
    total = 0
    for _ in range(0, sr, rows):
        for _ in range(0, sc, cols):
            total += rows            # preload (WS/IS) or drain (OS)
            total += t               # streaming
            total += rows + cols - 2  # skew
    return total


def _cyc(fold_fn, cost_fn, mapping=None):
    def fn(M, K, N, R, C, df):
        sr, sc, t = (mapping or MAP[df])(M, K, N)
        return fold_fn(sr, sc, R, C) * cost_fn(R, C, t)
    return fn


CEIL = lambda sr, sc, R, C: math.ceil(sr / R) * math.ceil(sc / C)  # noqa: E731


def test_cycles_accepts_reference_and_other_correct(seeded):
    assert lab01.check_cycles(lab01.reference_cycles).passed
    assert lab01.check_cycles(cycles_loops).passed
    assert lab01.check_cycles(lambda *a: systolic.cycles(*a).cycles).passed  # labkit's count (drain convention)


@pytest.mark.parametrize("fn, hint", [
    (_cyc(lambda sr, sc, R, C: sr / R * sc / C, lambda R, C, t: 2 * R + C + t - 2), "folds must be whole"),
    (_cyc(lambda sr, sc, R, C: (sr // R) * (sc // C), lambda R, C, t: 2 * R + C + t - 2), "floor drops"),
    (_cyc(lambda *a: 1, lambda R, C, t: 2 * R + C + t - 2), "that is one fold"),
    (_cyc(CEIL, lambda R, C, t: R + t), "forgot the skew"),
    (_cyc(CEIL, lambda R, C, t: R + C + t - 2), "forgot the fill"),
    (_cyc(CEIL, lambda R, C, t: 2 * R + C + t - 1), "off by one in the skew"),
    # Two slips a cold read met with no hint (review run14): no fill and R + C - 1; the skew taken as R.
    (_cyc(CEIL, lambda R, C, t: R + C + t - 1), "two slips: the fill .* is missing, and the skew is R \\+ C - 2"),
    (_cyc(CEIL, lambda R, C, t: 2 * R + t), "the skew is R \\+ C - 2 cycles, not R"),
    (_cyc(CEIL, lambda R, C, t: 2 * R + C + t - 2, mapping=lambda M, K, N: (M, N, K)), "mapping depends"),
])
def test_cycles_names_the_mistake(seeded, fn, hint):
    _wrong(lab01.check_cycles, fn, hint)


def _scalesim_count(M, K, N, R, C, df):
    """SCALE-Sim 3.0's per-fold cost (OS without the drain), written as a count (no - 1)."""
    return systolic.scalesim_cycles(M, K, N, R, C, df) + 1


@pytest.mark.parametrize("fn, hint", [
    (systolic.scalesim_cycles, "SCALE-Sim 3.0's figure .*labkit's \"drain\" convention"),
    (_scalesim_count, "SCALE-Sim 3.0's OS count.*labkit's \"drain\" convention"),
])
def test_cycles_names_the_scalesim_convention_not_a_forgotten_fill(seeded, fn, hint):
    with pytest.raises(CheckFailed, match=hint) as err:
        lab01.check_cycles(fn)
    assert "forgot the fill" not in str(err.value)


def test_cycles_not_done_and_report_mode(seeded, monkeypatch):
    with pytest.raises(NotDoneYet):
        lab01.check_cycles(_not_done)
    _report_mode(monkeypatch, lab01.check_cycles, _not_done, "not done")
    res = _report_mode(monkeypatch, lab01.check_cycles, _cyc(CEIL, lambda R, C, t: R + t), "wrong")
    assert "skew" in res.message


# ------------------------------------------------------------------ 2. block choice
def pick_by_divisors(dim, align, max_block):
    """Correct, written differently: all divisors of dim, filtered, largest."""
    ok = [d for d in range(1, dim + 1) if dim % d == 0 and d % align == 0 and d <= max_block]
    return max(ok) if ok else None


def test_pick_block_accepts_reference_and_other_correct(seeded):
    assert lab01.check_pick_block(lab01.largest_aligned_block).passed
    assert lab01.check_pick_block(pick_by_divisors).passed


def _smallest(dim, align, max_block):
    return next((b for b in range(align, max_block + 1, align) if dim % b == 0), None)


def _any_divisor(dim, align, max_block):
    return max(b for b in range(1, min(dim, max_block) + 1) if dim % b == 0)


def _never_none(dim, align, max_block):
    return lab01.largest_aligned_block(dim, align, max_block) or align


def _uncapped(dim, align, max_block):
    return lab01.largest_aligned_block(dim, align, max(dim, max_block))


def _from_the_cap(dim, align, max_block):
    """Wrong (issue: cold read of Lab 01): counts down from max_block, passing only when it is a multiple of align."""
    for b in range(max_block, 0, -align):
        if dim % b == 0:
            return b
    return None


def test_pick_block_refuses_the_count_down_from_an_unaligned_cap(seeded):
    assert _from_the_cap(1024, 128, 300) is None and lab01.largest_aligned_block(1024, 128, 300) == 256
    _wrong(lab01.check_pick_block, _from_the_cap, "counting down from max_block")


@pytest.mark.parametrize("fn, hint", [
    (_smallest, "smallest aligned divisor"),
    (_any_divisor, "multiple of align"),
    (_never_none, "return None"),
    (_uncapped, "max_block"),
])
def test_pick_block_names_the_mistake(seeded, fn, hint):
    _wrong(lab01.check_pick_block, fn, hint)


# ------------------------------------------------------------------ 3. padded utilization
def test_padded_utilization_accepts_reference_and_other_correct(seeded):
    assert lab01.check_padded_utilization(lab01.padded_utilization).passed
    assert lab01.check_padded_utilization(lambda s, t: s / (math.ceil(s / t) * t)).passed
    assert lab01.check_padded_utilization(lambda s, t: 1 - ((-s) % t) / (s + (-s) % t)).passed


@pytest.mark.parametrize("fn, hint", [
    (lambda s, t: 1 - lab01.padded_utilization(s, t), "that is the waste"),
    (lambda s, t: s / (max(1, s // t) * t), "floor or round"),
    (lambda s, t: s / (max(1, round(s / t)) * t), "floor or round"),
    (lambda s, t: math.ceil(s / t) * t, "padded size"),
    (lambda s, t: s / ((s // t + 1) * t), "one tile too many when the size fills its tiles exactly"),
    (lambda s, t: math.ceil(s / t) * t / s, "upside down"),
    (lambda s, t: s / t, "size / tile counts tiles"),                       # no padding at all
    (lambda s, t: 100 * lab01.padded_utilization(s, t), "that is a percentage"),
    (lambda s, t: 1 + lab01.padded_utilization(s, t), "more than 1: a utilization"),
])
def test_padded_utilization_names_the_mistake(seeded, fn, hint):
    _wrong(lab01.check_padded_utilization, fn, hint)


def test_references_on_known_values():
    assert lab01.reference_cycles(64, 32, 48, 8, 8, "ws") == 2064
    assert lab01.largest_aligned_block(4096, 128, 512) == 512
    assert lab01.largest_aligned_block(384, 128, 512) == 384
    assert lab01.largest_aligned_block(640, 128, 512) == 128
    assert lab01.largest_aligned_block(129, 128, 512) is None
    assert lab01.padded_utilization(129, 128) == 129 / 256
    assert lab01.padded_utilization(4096, 128) == 1.0
    assert lab01.stream_k_share(11, 2048, 10) == (2253, 9)   # every share starts inside a tile
    assert lab01.stream_k_share(3, 4, 8) == (2, 3)            # starts 2, 4, 6, 8, 10: 2, 6, 10 inside
    assert lab01.stream_k_share(4, 2, 4) == (2, 0)            # every share starts a tile


# ------------------------------------------------------------------ 2b. Stream-K share
def _share_loops(tiles, steps_k, sms):
    """Correct, written differently: hand the iterations out one SM at a time, then walk the tiles."""
    left, shares = tiles * steps_k, []
    per = -(-left // sms)
    while left > 0:
        shares.append(min(per, left))
        left -= shares[-1]
    starts = np.cumsum([0] + shares[:-1])[1:]  # where SM 1, 2, ... begin
    return max(shares), int(sum(1 for s in starts if s % steps_k))


def test_stream_k_share_accepts_reference_and_other_correct(seeded):
    assert lab01.check_stream_k_share(lab01.stream_k_share).passed
    assert lab01.check_stream_k_share(_share_loops).passed
    assert lab01.check_stream_k_share(lambda t, k, s: [math.ceil(t * k / s), lab01.stream_k_share(t, k, s)[1]]).passed


def _seams_all(t, k, s):
    q = -(-t * k // s)
    return sum(1 for i in range(1, s) if i * q < t * k)


@pytest.mark.parametrize("fn, hint", [
    (lambda t, k, s: (-(-t // s) * k, lab01.stream_k_share(t, k, s)[1]), "whole tiles in waves"),
    (lambda t, k, s: (t * k // s, lab01.stream_k_share(t, k, s)[1]), "floor drops"),
    (lambda t, k, s: (lab01.stream_k_share(t, k, s)[0], _seams_all(t, k, s)), "hands nothing over"),
    (lambda t, k, s: (lab01.stream_k_share(t, k, s)[0], s - 1), "not every SM starts a share"),
])
def test_stream_k_share_names_the_mistake(seeded, fn, hint):
    _wrong(lab01.check_stream_k_share, fn, hint)


@pytest.mark.parametrize("check, wrong", [
    (lab01.check_pick_block, _smallest),
    (lab01.check_padded_utilization, None),
    (lab01.check_stream_k_share, lambda t, k, s: (t * k // s, 0)),
], ids=["pick_block", "padded_utilization", "stream_k_share"])
def test_not_done_and_report_mode(seeded, monkeypatch, check, wrong):
    # Every checker: an untouched stub raises NotDoneYet, and in report mode says "not done" (a wrong
    # answer says "wrong"). check_cycles has its own test above: its report also names the mistake.
    with pytest.raises(NotDoneYet):
        check(_not_done)
    _report_mode(monkeypatch, check, _not_done, "not done")
    if wrong is not None:
        _report_mode(monkeypatch, check, wrong, "wrong")


# ------------------------------------------------- hints only when they explain the answer

COINCIDENCES = ("off by one in the skew", "off by two in the skew", "forgot the fill", "forgot the skew",
                "SCALE-Sim", "floor drops", "only the streaming", "that is one fold")


@pytest.mark.parametrize("swap", [{"os": "ws", "ws": "os", "is": "is"}, {"os": "os", "ws": "ws", "is": "ws"}],
                         ids=["os_ws_swapped", "is_mapped_like_ws"])
def test_cycles_with_another_dataflows_mapping_is_told_the_mapping(monkeypatch, swap):
    fn = lambda M, K, N, R, C, df: _cyc(CEIL, lambda R, C, t: 2 * R + C + t - 2, MAP[swap[df]])(M, K, N, R, C, df)  # noqa: E731
    for _ in over_seeds(monkeypatch, lab01):
        r = lab01.check_cycles(fn)
        assert r.status == "wrong" and "the mapping depends on the dataflow" in r.message, r.message
        assert not any(c in r.message for c in COINCIDENCES), r.message


@pytest.mark.parametrize("fn, hint, not_this", [
    (_cyc(CEIL, lambda R, C, t: 2 * C + R + t - 2), "takes R cycles, one per row of the array, not C", "skew"),
    # labkit's count minus one is no SCALE-Sim figure (that one has no OS drain): its hint fit WS/IS cases only
    (lambda *a: lab01.reference_cycles(*a) - 1, "0-based index of the last cycle", "SCALE-Sim"),
], ids=["fill_by_columns", "last_index"])
def test_cycles_slips_that_used_to_get_a_chance_hint(monkeypatch, fn, hint, not_this):
    for _ in over_seeds(monkeypatch, lab01):
        r = lab01.check_cycles(fn)
        assert r.status == "wrong" and hint in r.message and not_this not in r.message, r.message


def test_cycles_random_cases_have_distinct_m_k_n(monkeypatch):
    drawn = []
    monkeypatch.setattr(lab01, "check_function", lambda name, fn, ref, cases, **kw: drawn.extend(cases))
    for _ in over_seeds(monkeypatch, lab01, 20):
        lab01.check_cycles(lab01.reference_cycles)
    random_cases = [c for c in drawn if c not in ((64, 32, 48, 8, 8, "ws"), (9, 9, 9, 8, 8, "os"))]
    assert len(random_cases) == 20 * lab01.N_CASES
    assert all(len(set(c[:3])) == 3 for c in random_cases)


def test_padded_utilization_unguarded_floor_is_told_it_raised(monkeypatch):
    floor = lambda s, t: s / ((s // t) * t)  # noqa: E731  the natural floor: 0 tiles for s < t
    monkeypatch.setenv(check.MODE_ENV, "report")
    r = lab01.check_padded_utilization(floor)
    assert r.status == "wrong" and "your function raised ZeroDivisionError on inputs (" in r.message, r.message
    assert "division by zero" in r.message
    monkeypatch.delenv(check.MODE_ENV)
    with pytest.raises(CheckFailed, match="raised ZeroDivisionError"):
        lab01.check_padded_utilization(floor)


def test_stream_k_share_accepts_a_numpy_array(seeded):
    assert lab01.check_stream_k_share(lambda t, k, s: np.array(lab01.stream_k_share(t, k, s))).passed
    assert lab01.check_cycles(lambda *a: np.int64(lab01.reference_cycles(*a))).passed  # numpy scalars too


@pytest.mark.parametrize("fn, hint", [
    # the right folds, but K streamed whatever the dataflow (right for OS only)
    (lambda M, K, N, R, C, df: CEIL(*MAP[df](M, K, N)[:2], R, C) * (2 * R + C + K - 2), "only OS streams K"),
    # the right stream length, but M x N cut into folds whatever is stationary
    (lambda M, K, N, R, C, df: CEIL(M, N, R, C) * (2 * R + C + MAP[df](M, K, N)[2] - 2), "not always M x N"),
], ids=["t_is_k", "folds_of_m_n"])
def test_cycles_half_the_mapping_is_told_which_half(monkeypatch, fn, hint):
    for _ in over_seeds(monkeypatch, lab01):
        r = lab01.check_cycles(fn)
        assert r.status == "wrong" and hint in r.message, r.message
        assert "the mapping depends on the dataflow" not in r.message and not any(c in r.message for c in COINCIDENCES)


def test_cycles_folds_from_the_tile_area_are_named(monkeypatch):
    fn = _cyc(lambda sr, sc, R, C: math.ceil(sr * sc / (R * C)), lambda R, C, t: 2 * R + C + t - 2)
    for _ in over_seeds(monkeypatch, lab01):
        r = lab01.check_cycles(fn)
        assert r.status == "wrong" and "whole in each direction" in r.message, r.message


def test_stream_k_share_speaks_of_hand_offs_not_tiles_that_change_hands(seeded):
    # At batch 1 an H100 has 112 hand-offs but only 16 tiles change hands: the check's words must count the former.
    message = lab01.check_stream_k_share(lab01.stream_k_share).message
    assert "hand-offs" in message and "tiles that change hands" not in message
    assert "hand-offs" in lab01.stream_k_share.__doc__
    assert lab01.stream_k_share(16, 64, 132)[1] == 112  # batch 1 on an H100: 16 tiles, each cut 8 ways
