"""Lab 01 exercises: systolic cycle count, Pallas block choice, padding cliff, Stream-K share — checked on random inputs."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from labkit.matmul import simt, systolic
from labkit.course.check import CheckResult, Hint, check_function

N_CASES = 30  # random cases per check: a memorised number cannot pass
DATAFLOWS = ("os", "ws", "is")


def _rng() -> np.random.Generator:
    return np.random.default_rng()  # fresh entropy every call: property-based, not a fixed answer


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# ------------------------------------------------------------------ 1. cycle count
def reference_cycles(M: int, K: int, N: int, rows: int, cols: int, dataflow: str) -> int:
    """(Lab 01) Cycles of an (M, K) @ (K, N) GEMM on a rows x cols array: labkit.matmul.systolic's closed form."""
    return systolic.cycles(M, K, N, rows, cols, dataflow).cycles


def _variant(folds: Callable[[int, int, int, int], float], per_fold: Callable[..., float],
             mapping: Callable[..., tuple[int, int, int]] = systolic.mapping) -> Callable[..., bool]:
    """Hint predicate: the answer equals a recognisable wrong formula on this case's inputs."""
    def when(got: Any, expected: Any, args: tuple) -> bool:
        M, K, N, R, C, df = args
        sr, sc, t = mapping(M, K, N, df)
        try:
            return math.isclose(float(got), folds(sr, sc, R, C) * per_fold(R, C, t), rel_tol=1e-9)
        except (TypeError, ValueError):
            return False
    return when


def _folds(sr: int, sc: int, R: int, C: int) -> int:
    return _ceil_div(sr, R) * _ceil_div(sc, C)


def _fold_cost(R: int, C: int, t: int) -> int:
    return 2 * R + C + t - 2  # fill (or OS drain) R + stream T + skew R + C - 2


def check_cycles(fn: Callable[[int, int, int, int, int, str], int]) -> CheckResult:
    """(Lab 01) ``fn(M, K, N, rows, cols, dataflow)`` must return the GEMM's total cycle count."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases = []
    for i in range(N_CASES):
        R, C = (int(rng.choice([2, 4, 8, 16, 32])), int(rng.choice([2, 4, 8, 16, 32]))) if i % 5 \
            else (int(rng.choice([128, 256])),) * 2  # some TPU-sized arrays too
        while True:  # distinct M, K, N: a mapping that swaps two of them must change the answer
            M, K, N = int(rng.integers(1, 5 * R)), int(rng.integers(1, 5 * R)), int(rng.integers(1, 5 * C))
            if len({M, K, N}) == 3:
                break
        cases.append((M, K, N, R, C, DATAFLOWS[i % 3]))
    cases.append((64, 32, 48, 8, 8, "ws"))  # the lab's own GEMM, and a partial fold:
    cases.append((9, 9, 9, 8, 8, "os"))
    exact = lambda sr, sc, R, C: (sr / R) * (sc / C)  # noqa: E731  no ceil: fractional folds
    floor = lambda sr, sc, R, C: (sr // R) * (sc // C)  # noqa: E731

    def other_mapping(got: Any, expected: Any, args: tuple) -> bool:
        """The right per-fold cost, but another dataflow's (Sr, Sc, T) mapping (OS's for all, WS's for OS, ...)."""
        return any(_variant(_folds, _fold_cost, lambda M, K, N, _: systolic.mapping(M, K, N, df))(got, expected, args)
                   for df in DATAFLOWS if df != args[5])

    scalesim = lambda got, expected, args: got == systolic.scalesim_cycles(*args)  # noqa: E731
    scalesim_count = lambda got, expected, args: got == systolic.scalesim_cycles(*args) + 1  # noqa: E731
    hints = [  # SCALE-Sim first: its answers would otherwise read as "you forgot the fill"
        Hint(scalesim, "that is SCALE-Sim 3.0's figure (OS without an output drain, and the 0-based "
             "index of the last cycle: count - 1). This check counts in labkit's \"drain\" convention: "
             "every dataflow pays R cycles per fold (OS draining its sums) and the answer is a count."),
        Hint(scalesim_count, "that is SCALE-Sim 3.0's OS count, with no output drain. This check uses "
             "labkit's \"drain\" convention: OS also pays R cycles per fold, draining the accumulators "
             "out of the array, so every dataflow costs 2R + C + T - 2 per fold."),
        Hint(lambda got, expected, args: got == expected - 1, "off by one: that is the 0-based index of "
             "the last cycle; the check wants the number of cycles (last index + 1)."),
        Hint(_variant(_folds, lambda R, C, t: 2 * C + R + t - 2), "the fill (or drain) takes R cycles, "
             "one per row of the array, not C: each fold costs 2R + C + T - 2.", applies=lambda a: a[3] != a[4]),
        Hint(_variant(exact, _fold_cost), "folds must be whole: a partial fold still occupies the "
             "whole array, so use ceil(Sr / R) * ceil(Sc / C), not Sr / R * Sc / C."),
        Hint(_variant(lambda sr, sc, R, C: _ceil_div(sr * sc, R * C), _fold_cost), "the folds are whole in each "
             "direction: ceil(Sr / R) * ceil(Sc / C), not ceil(Sr * Sc / (R * C)): a tile cut along rows and along "
             "columns pads both edges (9 x 1 on a 2 x 8 array is 5 folds, not 1)."),
        Hint(_variant(floor, _fold_cost), "floor drops the partial fold: the leftover rows/columns "
             "need one more (padded) fold — ceil, not floor."),
        Hint(_variant(lambda *a: 1, _fold_cost), "that is one fold: the GEMM is cut into "
             "ceil(Sr / R) * ceil(Sc / C) folds and each pays the full per-fold cost."),
        Hint(_variant(_folds, lambda R, C, t: R + t), "you forgot the skew: the last wavefront "
             "needs R + C - 2 more cycles to reach PE (R-1, C-1) after the last operand enters."),
        Hint(_variant(_folds, lambda R, C, t: R + C + t - 2), "you forgot the fill (WS/IS: R "
             "cycles preloading the stationary tile; OS: R cycles draining the accumulators)."),
        Hint(_variant(_folds, lambda R, C, t: t), "only the streaming cycles: each fold also pays "
             "fill/drain (R) and skew (R + C - 2)."),
        Hint(_variant(_folds, lambda R, C, t: R + C + t - 1), "two slips: the fill (WS/IS: R cycles preloading "
             "the stationary tile; OS: R cycles draining the sums) is missing, and the skew is R + C - 2 cycles, "
             "not R + C - 1: each fold costs 2R + C + T - 2."),
        Hint(_variant(_folds, lambda R, C, t: 2 * R + t), "the fill (or drain) R and the stream T are there, but "
             "the skew is R + C - 2 cycles, not R: the last wavefront goes R - 1 rows down and C - 1 columns "
             "across to reach PE (R-1, C-1).", applies=lambda a: a[4] != 2),
        Hint(_variant(_folds, lambda R, C, t: 2 * R + C + t - 1), "off by one in the skew: the "
             "last PE is R-1 + C-1 = R + C - 2 hops from the first, not R + C - 1."),
        Hint(_variant(_folds, lambda R, C, t: 2 * R + C + t), "off by two in the skew: it is "
             "R + C - 2 cycles (hops from PE (0, 0) to PE (R-1, C-1)), not R + C."),
        Hint(_variant(_folds, _fold_cost, lambda M, K, N, df: (*systolic.mapping(M, K, N, df)[:2], K)),
             "T is the dimension streamed through the array, and only OS streams K: WS streams M (the "
             "input rows past its stationary weights) and IS streams N.", applies=lambda a: a[5] != "os"),
        Hint(_variant(_folds, _fold_cost, lambda M, K, N, df: (M, N, systolic.mapping(M, K, N, df)[2])),
             "the folds cut the stationary tile (Sr x Sc), not always M x N: WS holds a K x N weight tile, "
             "IS a K x M input tile.", applies=lambda a: a[5] != "os"),
        Hint(other_mapping, "the mapping depends on the dataflow: (Sr, Sc, T) "
             "is (M, N, K) for OS, (K, N, M) for WS and (K, M, N) for IS."),
        Hint(_variant(lambda sr, sc, R, C: _ceil_div(sc, R) * _ceil_div(sr, C), _fold_cost),
             "rows and columns swapped: Sr is cut by the array's rows R, Sc by its columns C."),
    ]
    return check_function("systolic cycle count", fn, reference_cycles, cases, hints=hints,
                          explain="folds x (fill + T + skew): small T or many partial folds is what "
                                  "keeps a systolic array idle.")


# ------------------------------------------------------------------ 2. block choice
def largest_aligned_block(dim: int, align: int = 128, max_block: int = 512) -> int | None:
    """(Lab 01) Largest multiple of `align` that divides `dim` and is <= max_block; None if none."""
    for block in range(max_block - max_block % align, 0, -align):
        if dim % block == 0:
            return block
    return None


def check_pick_block(fn: Callable[[int, int, int], int | None]) -> CheckResult:
    """(Lab 01) ``fn(dim, align, max_block)``: the largest aligned block dividing dim, or None."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases: list[tuple[int, int, int]] = []
    for i in range(N_CASES):
        align = int(rng.choice([8, 16, 128]))
        max_block = align * int(rng.integers(1, 9))
        if i % 2:  # a cap that is not a multiple of align: counting down from max_block itself misses
            max_block += int(rng.integers(1, align))
        if i % 3 == 0:   # no aligned divisor at all: the answer is None (pad instead)
            dim = align * int(rng.integers(1, 40)) + int(rng.integers(1, align))
        else:            # a multiple of align, often with a divisor below the cap
            dim = align * int(rng.choice([1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 96]))
        cases.append((dim, align, max_block))
    cases += [(4096, 128, 512), (384, 128, 512), (640, 128, 512), (129, 128, 512), (64, 128, 512),
              (1024, 128, 300), (768, 128, 400), (512, 16, 100)]  # caps between multiples: 256, 384, 64

    def is_(f: Callable[..., Any]) -> Callable[[Any, Any, tuple], bool]:
        return lambda g, e, a: g is not None and e is not None and g == f(*a)

    def any_divisor(dim: int, align: int, max_block: int) -> int:
        return max(b for b in range(1, min(dim, max_block) + 1) if dim % b == 0)

    def smallest(dim: int, align: int, max_block: int) -> int | None:
        return next((b for b in range(align, max_block + 1, align) if dim % b == 0), None)

    def uncapped(dim: int, align: int, max_block: int) -> int | None:
        return largest_aligned_block(dim, align, max(dim, max_block))

    def from_the_cap(dim: int, align: int, max_block: int) -> int | None:  # range(max_block, 0, -align)
        return next((b for b in range(max_block, 0, -align) if dim % b == 0), None)

    hints = [  # the count-down from the cap first: its None or unaligned answers would read as other slips
        Hint(lambda g, e, a: g == from_the_cap(*a), "counting down from max_block "
             "itself only visits multiples of align when max_block is one: start from the largest multiple "
             "of align <= max_block (max_block // align * align)."),
        Hint(lambda g, e, a: e is None and g is not None, "when no multiple of align divides dim, "
             "return None: the caller must pad (a block that does not divide leaves a ragged edge)."),
        Hint(lambda g, e, a: e is not None and g is None, "there is an aligned divisor here; return "
             "None only when no multiple of align up to max_block divides dim."),
        Hint(lambda g, e, a: g is not None and g % a[1] != 0, "the block must be a multiple of align "
             "(128 fills the MXU's rows/columns); a divisor that is not wastes part of every pass."),
        Hint(lambda g, e, a: g is not None and a[0] % g != 0, "the block must divide dim exactly, or "
             "the last block runs off the end of the matrix."),
        Hint(lambda g, e, a: g is not None and g > a[2], "respect max_block: bigger blocks need more "
             "on-chip memory (VMEM) than the kernel is allowed."),
        Hint(is_(smallest), "that is the smallest aligned divisor; take the largest: bigger blocks "
             "mean fewer grid steps and more reuse of each loaded block."),
        Hint(is_(any_divisor), "any divisor is not enough: it must also be a multiple of align."),
        Hint(is_(uncapped), "respect max_block."),
    ]
    return check_function("pick a Pallas block", fn, largest_aligned_block, cases, hints=hints,
                          explain="big aligned blocks: full MXU passes, fewer grid steps, no ragged edge.")


# ------------------------------------------------------------------ 3. padding cliff
def _as_float(x: Any) -> float:
    """x as a float, NaN when it is none (a str, None): a hint's comparison is then False."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def padded_utilization(size: int, tile: int) -> float:
    """(Lab 01) Useful fraction when `size` is padded up to whole tiles: size / (ceil(size/tile) * tile)."""
    return size / (_ceil_div(size, tile) * tile)


def check_padded_utilization(fn: Callable[[int, int], float]) -> CheckResult:
    """(Lab 01) ``fn(size, tile)``: fraction of the padded work that is useful, in (0, 1]."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases = [(int(rng.integers(1, 20 * t)), t) for t in (int(rng.choice([8, 16, 128, 256]))
                                                        for _ in range(N_CASES))]
    cases += [(128, 128), (129, 128), (4096, 128), (4097, 128), (1, 128), (8, 256)]

    def is_(f: Callable[[int, int], float]) -> Callable[[Any, Any, tuple], bool]:
        def when(g: Any, e: Any, a: tuple) -> bool:
            try:
                return math.isclose(float(g), f(*a), rel_tol=1e-9)
            except (TypeError, ValueError, ZeroDivisionError):
                return False
        return when

    hints = [
        Hint(is_(lambda s, t: 1 - padded_utilization(s, t)), "that is the waste (padding / padded "
             "size); the utilization is the useful part: size / padded size."),
        Hint(lambda g, e, a: is_(lambda s, t: s / (max(1, s // t) * t))(g, e, a)
             or is_(lambda s, t: s / (max(1, round(s / t)) * t))(g, e, a),
             "floor or round instead of ceil: the leftover elements need one more whole tile "
             "(129 on a 128 tile needs 2 tiles = 256), so padded size = ceil(size / tile) * tile."),
        Hint(is_(lambda s, t: s / ((s // t + 1) * t)), "size // tile + 1 is one tile too many when the size "
             "fills its tiles exactly (128 on a 128 tile needs 1 tile, not 2): ceil(size / tile) is "
             "(size + tile - 1) // tile."),
        Hint(is_(lambda s, t: _ceil_div(s, t) * t), "that is the padded size; divide size by it."),
        Hint(is_(lambda s, t: (_ceil_div(s, t) * t) / s), "upside down: useful / padded, not "
             "padded / useful (the answer is at most 1)."),
        Hint(is_(lambda s, t: (s % t) / t if s % t else 1.0), "only the last tile's fill: "
             "divide the whole size by the whole padded size."),
        Hint(is_(lambda s, t: s / t), "size / tile counts tiles (and can pass 1), it is not a share of the "
             "work: divide size by the padded size, ceil(size / tile) * tile."),
        Hint(is_(lambda s, t: 100 * padded_utilization(s, t)), "that is a percentage: return the fraction, "
             "in (0, 1] (0.5 for 129 on a 128 tile, not 50)."),
        Hint(lambda g, e, a: _as_float(g) > 1, "more than 1: a utilization is useful work over padded work, "
             "never more than all of it."),
    ]
    return check_function("padded utilization", fn, padded_utilization, cases, hints=hints,
                          explain="129 on a 128 tile is 50% useful; 4097 is 97%: the cliff is "
                                  "one tile, so it hurts small shapes most.")


# ------------------------------------------------------------------ 2b. Stream-K share
def stream_k_share(tiles: int, steps_k: int, sms: int) -> tuple[int, int]:
    """(Lab 01) Stream-K on `sms` SMs: (iterations the busiest SM runs, hand-offs of fp32 partial tiles between SMs)."""
    iters = tiles * steps_k
    return _ceil_div(iters, sms), simt.stream_k_partials(iters, steps_k, sms)


def _seams(tiles: int, steps_k: int, sms: int) -> list[int]:
    """Where SM i >= 1 starts its share (before the end of the work): tile boundary or not."""
    iters = tiles * steps_k
    q = _ceil_div(iters, sms)
    return [i * q for i in range(1, sms) if i * q < iters]


def check_stream_k_share(fn: Callable[[int, int, int], tuple[int, int]]) -> CheckResult:
    """(Lab 01) ``fn(tiles, steps_k, sms)`` -> (iterations per SM, hand-offs): Stream-K's even share."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases = [(int(rng.integers(1, 300)), int(rng.integers(1, 129)), int(rng.choice([10, 40, 108, 132])))
             for _ in range(N_CASES)]
    cases += [(144, 64, 132), (128, 64, 132), (16, 64, 132), (11, 2048, 10), (3, 4, 8), (4, 2, 4), (5, 5, 1)]

    def part(i: int, f: Callable[[int, int, int], int]) -> Callable[[Any, Any, tuple], bool]:
        return lambda g, e, a: int(g[i]) == f(*a)

    hints = [
        Hint(part(0, lambda t, k, s: _ceil_div(t, s) * k), "that is whole tiles in waves (the \"tiles\" schedule): "
             "Stream-K shares the iterations, not the tiles: ceil(tiles * steps_k / sms) each."),
        Hint(part(0, lambda t, k, s: t * k // s), "floor drops the leftover iterations: some SM runs one "
             "more, and the busiest SM sets the time: round up."),
        Hint(part(1, lambda t, k, s: len(_seams(t, k, s))), "a share that starts on a tile's first iteration "
             "hands nothing over: count only the starts that fall inside a tile (start % steps_k != 0)."),
        Hint(part(1, lambda t, k, s: s - 1), "not every SM starts a share: with ceil-sized shares the last SMs "
             "can have nothing left to run (count only starts i * share < tiles * steps_k)."),
    ]
    return check_function("Stream-K share", fn, stream_k_share, cases, hints=hints,
                          explain="every SM runs the same share, so no wave is left part-empty; the price is "
                                  "the hand-offs: at each seam inside a tile one SM writes its fp32 partial "
                                  "tile and another reads it back.")
