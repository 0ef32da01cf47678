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
                               "overhead_s": 1e-6}),
    "matmul_flops": (rm.matmul_flops, {"m": 8, "n": 8, "k": 8}),
    "matmul_bytes": (rm.matmul_bytes, {"m": 8, "n": 8, "k": 8, "bytes_per_element": 2}),
}
BAD = {"peak_flops": [0, -1e12, NAN, INF, "1e12"], "bandwidth_bytes_per_s": [0, -1.0, NAN, INF, "1e9"],
       "nbytes": [0, -1.0, NAN, INF], "flops": [-1.0, NAN, INF], "overhead_s": [-1e-6, NAN, INF],
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
