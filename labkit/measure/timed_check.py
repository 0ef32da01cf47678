"""Before a matmul is timed, check that the very function timed computes the right answer (Lab 00).

A peak measured on a wrong kernel is not a peak: a matmul that skipped work, ran in a narrower
dtype than asked, or never synchronised can look fast. So Lab 00 runs the functions its sweep times
(:func:`labkit.measure.roofline.matmul_fn_jax`, and ``torch.matmul`` under the same fp32 setting as
:func:`labkit.measure.roofline.matmul_torch`), in each dtype it times, on the device it times, and
compares them with float64 on the *same rounded inputs*: the low-precision inputs are exact in
float64, so what remains is the kernel's own error -- rounding the output, and how it accumulates.

Tolerance, as a share of the largest reference element: a kernel that accumulates in fp32 and
rounds once makes each output err by at most one unit roundoff u of that output, half the gap
between neighbours (fp32 u = 2^-24, bf16 2^-8, fp16 2^-11). ``TOLERANCE`` allows 4u in the low
precisions; fp32 allows 1e-5, the course's true-fp32 bar (on these inputs TF32 errs by ~3e-4 and one
bf16 pass by ~2e-3: both fail it).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from labkit.measure.roofline import _jnp_dtype, _torch_dtype, matmul_fn_jax

TOLERANCE = {"fp32": 1e-5, "bf16": 4 * 2.0**-8, "fp16": 4 * 2.0**-11}  # max |error| / max |reference|


def _inputs(m: int, n: int, k: int, dtype: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(m, k) and (k, n) float64 arrays whose values are exact in ``dtype``."""
    low = np.dtype(_jnp_dtype(dtype))  # jnp.bfloat16 is ml_dtypes' bfloat16: numpy rounds to it
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    return a.astype(low).astype(np.float64), b.astype(low).astype(np.float64)


def matmul_error(framework: str, dtype: str, device: Any = None, m: int = 128, n: int = 96, k: int = 512,
                 seed: int = 0) -> float:
    """(Lab 00) max |timed matmul - float64| / max |float64| on inputs exact in ``dtype``; see ``TOLERANCE``."""
    if framework not in ("jax", "torch"):
        raise ValueError(f"framework must be 'jax' or 'torch', got {framework!r}")
    if dtype not in TOLERANCE:
        raise ValueError(f"dtype {dtype!r} is not one Lab 00 times; use one of {', '.join(TOLERANCE)}")
    for v, name in ((m, "m"), (n, "n"), (k, "k")):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"{name} must be a whole number >= 1 (a matrix size), got {v!r}")
    a, b = _inputs(m, n, k, dtype, seed)
    ref = a @ b  # float64: exact products, a float64 sum
    if framework == "jax":
        out = _run_jax(a, b, dtype, device)
    else:
        out = _run_torch(a, b, dtype, "cpu" if device is None else device)
    return float(np.abs(out - ref).max() / np.abs(ref).max())


def _run_jax(a: np.ndarray, b: np.ndarray, dtype: str, device: Any) -> np.ndarray:
    import jax
    import jax.numpy as jnp

    dt = _jnp_dtype(dtype)
    dev = device if isinstance(device, jax.Device) else jax.devices()[0]  # a torch device means "the default"
    x, y = (jax.device_put(jnp.asarray(v, dt), dev) for v in (a, b))
    return np.asarray(matmul_fn_jax(dtype)(x, y), np.float64)


def _run_torch(a: np.ndarray, b: np.ndarray, dtype: str, device: Any) -> np.ndarray:
    import contextlib

    import torch

    from labkit.runtime.matmul_precision import fp32_matmul_precision

    dt = _torch_dtype(dtype)
    x, y = (torch.tensor(v, dtype=torch.float64).to(dt).to(device) for v in (a, b))
    with fp32_matmul_precision("highest", device) if dtype == "fp32" else contextlib.nullcontext():
        out = torch.matmul(x, y)  # what matmul_torch times
    return out.to("cpu", torch.float64).numpy()

