"""labkit.measure.roofline_model (Lab 00): the closed forms refuse NaN, negative, zero and str input, naming it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labkit.measure import roofline, roofline_model as rm

NAN, INF = math.nan, math.inf
PEAK, BW = 989e12, 3.35e12  # H100 SXM bf16 FLOP/s, bytes/s
CALLS = {  # name -> (call(**kwargs), valid kwargs)
    "ridge_point": (rm.ridge_point, {"peak_flops": PEAK, "bandwidth_bytes_per_s": BW}),
    "attainable": (rm.attainable, {"intensity": 10.0, "peak_flops": PEAK, "bandwidth_bytes_per_s": BW}),
    "roofline_time": (rm.roofline_time, {"flops": 1e9, "nbytes": 1e6, "peak_flops": PEAK, "bandwidth_bytes_per_s": BW}),
    "bound_by": (rm.bound_by, {"flops": 1e9, "nbytes": 1e6, "peak_flops": PEAK, "bandwidth_bytes_per_s": BW,
                               "overhead_s": 1e-6, "measured_s": 3e-6}),
    "matmul_flops": (rm.matmul_flops, {"m": 8, "n": 8, "k": 8}),
    "matmul_bytes": (rm.matmul_bytes, {"m": 8, "n": 8, "k": 8, "bytes_per_element": 2}),
}
BAD = {"peak_flops": [0, -1e12, NAN, INF, "1e12"], "bandwidth_bytes_per_s": [0, -1.0, NAN, INF, "1e9"],
       "nbytes": [0, -1.0, NAN, INF], "flops": [-1.0, NAN, INF], "overhead_s": [-1e-6, NAN, INF], "measured_s": [0, -1e-6, NAN, INF, "1e-6"],
       "m": [0, -1, 2.5, NAN, "8"], "n": [0, -1, 2.5], "k": [0, -1, 2.5], "bytes_per_element": [0, 2.5, "bf16"],
       "intensity": [-5.0, NAN, INF, "10", np.array([1.0, -1.0])]}
SWEEP = [(name, arg, bad) for name, (_, base) in CALLS.items() for arg in base for bad in BAD[arg]]


@pytest.mark.parametrize(("name", "arg", "bad"), SWEEP, ids=[f"{n}-{a}={b!r}" for n, a, b in SWEEP])
def test_a_bad_value_is_refused_naming_it(name: str, arg: str, bad: object) -> None:
    # Issue #9: ZeroDivisionError, a negative peak ignored, NaN -> "memory", '8' * 12 -> a string of 8s.
    call, base = CALLS[name]
    with pytest.raises((ValueError, TypeError)) as err:
        call(**{**base, arg: bad})
    assert arg in str(err.value), str(err.value)


@pytest.mark.parametrize("name", CALLS)
def test_valid_values_still_work_and_are_re_exported(name: str) -> None:
    call, base = CALLS[name]
    call(**base)
    assert getattr(roofline, name) is call  # labs and exercises call them as roofline.<name>


def test_a_copy_has_zero_flops_and_is_memory_bound() -> None:
    assert rm.bound_by(0, 8e9, PEAK, BW) == "memory"  # roofline.copy_torch: 0 FLOPs, bytes only
    assert rm.attainable(np.array([0.0, 1e4]), PEAK, BW).tolist() == [0.0, PEAK]


def test_far_below_both_roofs_the_measured_time_says_overhead_or_kernel() -> None:
    """Recorded cases: an H100 256³ bf16 matmul (~50 µs a call, fixed cost ~30 µs) is the call's fixed cost; this
    CPU's 128³ matmul (145 µs against a 7.6 µs fixed cost, roofline 3.6 µs) is its kernel, slow at that size."""
    n = 256
    f, b = rm.matmul_flops(n, n, n), rm.matmul_bytes(n, n, n, 2)  # roofline time ~0.12 µs on an H100
    assert rm.bound_by(f, b, PEAK, BW, overhead_s=30e-6, measured_s=50e-6) == "overhead"
    assert rm.bound_by(f, b, PEAK, BW, overhead_s=30e-6) == "overhead"  # no measurement: the roofline's guess
    cpu_peak, cpu_bw, n = 1.415e12, 27.6e9, 128  # this 2-core VM: torch bf16 peak, best bandwidth probe
    f, b = rm.matmul_flops(n, n, n), rm.matmul_bytes(n, n, n, 2)
    assert rm.roofline_time(f, b, cpu_peak, cpu_bw) == pytest.approx(3.56e-6, rel=0.01)
    assert rm.bound_by(f, b, cpu_peak, cpu_bw, overhead_s=7.6e-6, measured_s=144.8e-6) == "kernel"
    edge = rm.OVERHEAD_FACTOR * 7.6e-6
    assert rm.bound_by(f, b, cpu_peak, cpu_bw, 7.6e-6, measured_s=edge) == "overhead"
    assert rm.bound_by(f, b, cpu_peak, cpu_bw, 7.6e-6, measured_s=edge * 1.01) == "kernel"
    assert rm.bound_by(f, b, cpu_peak, cpu_bw, 1e-6, measured_s=1.0) == "memory"  # over the fixed cost: the roofs decide
