"""The roofline in closed form: FLOPs and bytes of a matmul, the ridge, the ceiling, the time, the bound (Lab 00).

``attainable(I) = min(peak, I x bandwidth)`` for an op of intensity I FLOP/byte. These are the pure
formulas; :mod:`labkit.measure.roofline` measures the peak, the bandwidth and the ops to put on them
(and re-exports these names). Every argument is checked: a roofline of a NaN, a negative or a zero peak
would plot and print without complaint.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from labkit.measure.bench import check_number

_PEAK_FIX = "a FLOP/s figure, e.g. hardware.peak_flops(chip, 'bf16') or roofline.best(...).flops_per_s"
_BW_FIX = "bytes/s (GB/s x 1e9), e.g. roofline.measured_bandwidth(...)"


def check_sizes(**sizes: Any) -> list[int]:
    """(Lab 00) Each size (elements, rows, a matmul dimension) as an int >= 1, else an error naming it: never int(2.5)."""
    return [check_number(name, v, "a size counts elements", count=True) for name, v in sizes.items()]


def _roof(peak_flops: float, bandwidth_bytes_per_s: float) -> tuple[float, float]:
    return (check_number("peak_flops", peak_flops, _PEAK_FIX),
            check_number("bandwidth_bytes_per_s", bandwidth_bytes_per_s, _BW_FIX))


def matmul_flops(m: int, n: int, k: int) -> int:
    """FLOPs of an (m,k) @ (k,n) matmul: one multiply and one add per MAC (Lab 00)."""
    m, n, k = check_sizes(m=m, n=n, k=k)
    return 2 * m * n * k


def matmul_bytes(m: int, n: int, k: int, bytes_per_element: int) -> int:
    """Bytes a matmul must move at least: read A and B once, write C once (Lab 00)."""
    m, n, k = check_sizes(m=m, n=n, k=k)
    b = check_number("bytes_per_element", bytes_per_element, "e.g. 2 for bf16 (roofline.BYTES)", count=True)
    return (m * k + k * n + m * n) * b


def ridge_point(peak_flops: float, bandwidth_bytes_per_s: float) -> float:
    """Intensity (FLOP/byte) where an op stops being memory-bound (Lab 00)."""
    peak, bw = _roof(peak_flops, bandwidth_bytes_per_s)
    return peak / bw


def attainable(intensity: float | np.ndarray, peak_flops: float, bandwidth_bytes_per_s: float) -> Any:
    """Roofline ceiling in FLOP/s at a given intensity in FLOP/byte (Lab 00)."""
    peak, bw = _roof(peak_flops, bandwidth_bytes_per_s)
    x = np.asarray(intensity)
    if not np.issubdtype(x.dtype, np.number) or not np.all(np.isfinite(x) & (x >= 0)):
        raise ValueError(f"need intensity >= 0 (finite FLOP/byte, a number or an array of them), got {intensity!r}")
    return np.minimum(peak, x * bw)


def roofline_time(flops: float, nbytes: float, peak_flops: float, bandwidth_bytes_per_s: float) -> float:
    """Best-case seconds of an op on a roofline: max(FLOPs / peak, bytes / bandwidth) (Lab 00)."""
    peak, bw = _roof(peak_flops, bandwidth_bytes_per_s)
    flops = check_number("flops", flops, "FLOPs per call (0 for a copy)", zero_ok=True)
    return max(flops / peak, check_number("nbytes", nbytes, "bytes moved per call") / bw)


OVERHEAD_FACTOR = 2.0  # a call within 2x the fixed cost of a call is mostly that cost (measured_s in bound_by)


def bound_by(flops: float, nbytes: float, peak_flops: float, bandwidth_bytes_per_s: float,
             overhead_s: float = 0.0, measured_s: float | None = None) -> str:
    """"overhead", "kernel", "compute" or "memory": what limits an op, from the roofline and its call cost (Lab 00).

    Intensity picks the roof an op *would* meet. But every call also pays fixed costs -- framework
    dispatch, a kernel launch (~5 us on a GPU), the wait for the result -- measured by
    :func:`labkit.measure.roofline.call_overhead_jax`. When the op's best-case time is shorter than that,
    it lands far below both roofs, and the measured time says why:

    - "overhead": the call took at most ``OVERHEAD_FACTOR`` x the fixed cost (or ``measured_s`` is not
      given): the fixed cost is most of each call. Neither faster math nor faster memory would help,
      only more work per call (batching, fusion, CUDA graphs, a bigger jit).
    - "kernel": the call took longer than that: not the call's fixed cost but the kernel itself, slow at
      this size (too little work to fill the cores or SMs, threads to start, tiles mostly padding).
      A profiler says which.
    """
    overhead_s = check_number("overhead_s", overhead_s, "seconds per call, e.g. roofline.call_overhead_jax().median_s", zero_ok=True)
    if measured_s is not None:
        measured_s = check_number("measured_s", measured_s, "the op's measured seconds per call (its median)")
    if roofline_time(flops, nbytes, peak_flops, bandwidth_bytes_per_s) < overhead_s:  # checks the other four
        return "overhead" if measured_s is None or measured_s <= OVERHEAD_FACTOR * overhead_s else "kernel"
    return "compute" if flops / nbytes > ridge_point(peak_flops, bandwidth_bytes_per_s) else "memory"
