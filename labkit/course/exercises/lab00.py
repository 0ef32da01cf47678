"""Lab 00 exercises: ridge point, matmul intensity, roofline time — checked on random inputs."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from labkit.course.check import CheckResult, Hint, check_function, ratio_is
from labkit.measure.roofline import matmul_bytes, matmul_flops, ridge_point

N_CASES = 20  # random cases per check: a memorised number cannot pass


def _rng() -> np.random.Generator:
    return np.random.default_rng()  # fresh entropy every call: property-based, not a fixed answer


def check_ridge_point(fn: Callable[[float, float], float]) -> CheckResult:
    """(Lab 00) ``fn(peak_flops_per_s, bandwidth_bytes_per_s)`` must return the ridge in FLOP/byte."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases = [(float(rng.uniform(1e12, 1e15)), float(rng.uniform(1e11, 5e12))) for _ in range(N_CASES)]
    hints = [
        Hint(lambda g, e, a: math.isclose(float(g), 1 / e, rel_tol=1e-6), "you computed bytes per FLOP; "
             "the ridge is FLOP per byte: peak FLOP/s divided by bytes/s."),
        Hint(lambda g, e, a: any(ratio_is(f)(g, e, a) for f in (1e3, 1e-3, 1e6, 1e-6, 1e9, 1e-9, 1e12, 1e-12)),
             "right idea, wrong units: the inputs are plain FLOP/s and bytes/s — no TFLOP/s or GB/s conversions."),
        Hint(lambda g, e, a: math.isclose(float(g), a[0] * a[1], rel_tol=1e-6), "multiply? A ratio of a rate of "
             "work to a rate of traffic gives work per byte."),
    ]
    return check_function("ridge point", fn, ridge_point, cases, hints=hints,
                          explain="Ops with fewer FLOP/byte than this wait on memory, not on the math units.")


def _intensity(m: int, n: int, k: int, b: int) -> float:
    return matmul_flops(m, n, k) / matmul_bytes(m, n, k, b)


def check_matmul_intensity(fn: Callable[[int, int, int, int], float]) -> CheckResult:
    """(Lab 00) ``fn(m, n, k, bytes_per_element)``: FLOP/byte of (m,k)@(k,n), each matrix moved once."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases = [(int(rng.integers(1, 8193)), int(rng.integers(1, 8193)), int(rng.integers(1, 8193)),
              int(rng.choice([1, 2, 4]))) for _ in range(N_CASES)]
    hints = [
        Hint(ratio_is(0.5), "off by 2: a multiply-accumulate is two FLOPs (multiply + add), so FLOPs = 2·m·n·k."),
        Hint(lambda g, e, a: math.isclose(float(g), 2 * a[0] * a[1] * a[2] / ((a[0] * a[2] + a[2] * a[1]) * a[3]),
                                          rel_tol=1e-6), "you counted reading A and B but not writing C (m·n)."),
        Hint(lambda g, e, a: math.isclose(float(g), 2 * a[0] * a[1] * a[2] / ((a[0] * a[2] + a[2] * a[1]
                                                                              + 2 * a[0] * a[1]) * a[3]),
                                          rel_tol=1e-6), "you counted C as read and written: C = A @ B only "
             "writes C (m·n once); reading it too is C += A @ B, a different kernel."),
        Hint(ratio_is(1 / 8), "bits, not bytes: divide by bytes per element (bf16 = 2), not bits."),
        Hint(lambda g, e, a: math.isclose(float(g), 2 * a[0] * a[1] * a[2] / (a[0] * a[2] + a[2] * a[1] + a[0] * a[1]),
                                          rel_tol=1e-6) and a[3] != 1, "FLOP per *element*: multiply the element "
             "count by bytes_per_element to get bytes."),
    ]
    return check_function("matmul intensity", fn, _intensity, cases, hints=hints,
                          explain="Intensity grows with size (~n/3 FLOP/byte for square bf16), which is why big "
                                  "matmuls are compute-bound and small ones are not.")


def _roofline_time(flops: float, nbytes: float, peak: float, bw: float) -> float:
    return max(flops / peak, nbytes / bw)


def check_roofline_time(fn: Callable[[float, float, float, float], float]) -> CheckResult:
    """(Lab 00) ``fn(flops, nbytes, peak_flops_per_s, bandwidth_bytes_per_s)``: best-case seconds."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases = [(float(10 ** rng.uniform(6, 13)), float(10 ** rng.uniform(5, 11)), float(rng.uniform(1e13, 1e15)),
              float(rng.uniform(1e11, 5e12))) for _ in range(N_CASES)]
    cases.append((1e12, 1e6, 1e14, 1e12))  # certainly compute-bound
    cases.append((1e6, 1e10, 1e14, 1e12))  # certainly memory-bound

    def is_(f: Callable[..., float]) -> Callable[..., bool]:
        return lambda g, e, a: math.isclose(float(g), f(*a), rel_tol=1e-6)

    def converted(g: object, e: float, a: tuple) -> bool:
        """Peak and bandwidth scaled by different powers of ten, as if given in TFLOP/s, GB/s, ..."""
        f, b, p, w = a
        scales = (1.0, 1e3, 1e-3, 1e6, 1e-6, 1e9, 1e-9, 1e12, 1e-12)
        return any(math.isclose(float(g), max(f / (p * sp), b / (w * sw)), rel_tol=1e-6)
                   for sp in scales for sw in scales if sp != sw)  # equal scales: the output unit hint

    hints = [
        Hint(is_(lambda f, b, p, w: f / p + b / w), "you added compute and memory time; on a roofline they "
             "overlap, so the slower of the two sets the time: max(...)."),
        Hint(is_(lambda f, b, p, w: min(f / p, b / w)), "min gives the faster of the two; the op can't finish "
             "before *both* its math and its memory traffic are done."),
        Hint(is_(lambda f, b, p, w: f / p), "only the compute time: memory-bound ops (few FLOP/byte) take longer."),
        Hint(is_(lambda f, b, p, w: b / w), "only the memory time: compute-bound ops take longer than that."),
        Hint(lambda g, e, a: any(ratio_is(f)(g, e, a) for f in (1e3, 1e-3, 1e6, 1e-6, 1e9, 1e-9)),
             "right formula, wrong unit: the inputs are plain FLOPs, bytes, FLOP/s and bytes/s, so "
             "max(FLOPs / peak, bytes / bandwidth) is already in seconds — return it as it is (no ms, µs or ns)."),
        # After the output unit: per case a scaled output also reads as one scaled input (the larger term).
        Hint(converted, "the inputs are already plain FLOP/s and bytes/s (not TFLOP/s or GB/s): use them as "
             "they are — FLOPs / peak and bytes / bandwidth are then seconds."),
    ]
    return check_function("roofline time", fn, _roofline_time, cases, hints=hints,
                          explain="time = max(FLOPs/peak, bytes/bandwidth): the roofline in seconds.")
