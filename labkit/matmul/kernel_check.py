"""(Lab 01) Checking a hand-written matmul kernel: seeded operands, error against float64, speed against the library.

The Pallas (JAX) and Triton (torch) kernels of Lab 01 are judged the same way: run them on
standard-normal operands in the run's dtype, compare the product with the float64 product of
the same (already rounded) inputs against the error the library matmul (XLA's ``jnp.matmul``,
``torch.matmul``) makes on those inputs (:func:`error_bound`), and -- where they are compiled --
time them against the library on the same inputs. :func:`flawed_matmuls` builds the two mistakes the
bound must catch, so a lab can show that it does.
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Any, Callable

import numpy as np

from labkit.measure.bench import Timing, time_jax, time_torch

# A kernel that accumulates in fp32 and rounds its output once makes the library's error: in bf16/fp16
# both errors are the one rounding of nearly the same fp32 sums, so they agree to ~0.1%. The bound
# allows SLACK over the library's error; a 16-bit accumulator between K steps (x1.3 at 256^3 with two
# K steps, x2.8 at 1024x4096x1024) or a truncating output cast (x2 to x2.5) exceeds it. In fp32 the error is
# the accumulation order's, which differs between kernel and library, so the floor (1e-5, 100x fp32's
# usual error, 10x below a bf16 accumulator's) decides there.
SLACK = 1.15                                          # kernel error / library error a correct kernel stays under
FLOOR = {"fp32": 1e-5, "bf16": 5e-5, "fp16": 1e-5}    # max |C - A@B| / max |A@B| always allowed
# Kernel and library are timed alike, calls back to back (bench.time_fn's calls=None, as every other timing in
# the course): one call and a sync per repeat would add the sync's round trip, ~10-100 us, to a 4096^3 matmul's
# ~200 us on a GPU, and the faster side would lose more of its speed to it than the slower.
CALLS: int | None = None  # time_fn's calls: None = enough back-to-back calls for its window


def error_bound(library_err: float, dtype: str) -> float:
    """(Lab 01) Largest rel_err a correct kernel may have: SLACK x the library's own on the same inputs + FLOOR."""
    if dtype not in FLOOR:
        raise ValueError(f"dtype must be one of {', '.join(FLOOR)}, got {dtype!r}")
    if isinstance(library_err, bool) or not isinstance(library_err, (int, float, np.floating)) \
            or not np.isfinite(library_err) or library_err < 0:
        raise ValueError(f"library_err must be a finite number >= 0 (rel_err of the library matmul on the "
                         f"kernel's inputs), got {library_err!r}")
    return SLACK * float(library_err) + FLOOR[dtype]


def flawed_matmuls(a: Any, b: Any, block_k: int) -> dict[str, Any]:
    """(Lab 01) A @ B (JAX) made the two wrong ways the bound must catch: a 16-bit accumulator, a truncating cast."""
    import jax.numpy as jnp

    k = a.shape[1]
    if isinstance(block_k, bool) or not isinstance(block_k, Integral) or block_k <= 0 or k % block_k:
        raise ValueError(f"block_k must be a positive int that divides K = {k}, got {block_k!r}")
    f32 = jnp.float32
    acc_dt = a.dtype if a.dtype.itemsize == 2 else jnp.bfloat16  # bf16 / fp16 inputs: their own dtype
    acc = jnp.zeros((a.shape[0], b.shape[1]), acc_dt)           # (M, N), rounded to 16 bits after every K step
    for k0 in range(0, k, block_k):
        acc = (acc.astype(f32) + jnp.dot(a[:, k0:k0 + block_k], b[k0:k0 + block_k], preferred_element_type=f32)
               ).astype(acc_dt)
    out = {"16-bit accumulator between K steps": acc}
    if a.dtype.itemsize == 2:  # a 16-bit output: round toward zero instead of to nearest (fp32 output: no cast)
        full = jnp.dot(a, b, preferred_element_type=f32)        # (M, N) fp32 sums
        near = full.astype(a.dtype)
        out["truncating output cast"] = jnp.where(jnp.abs(near.astype(f32)) > jnp.abs(full),
                                                  jnp.nextafter(near, jnp.zeros_like(near)), near)
    return out


def _float64(x: Any) -> np.ndarray:
    """A JAX, numpy or torch array as float64 numpy (exact: every float dtype here fits)."""
    if hasattr(x, "detach"):  # torch: bf16 has no numpy dtype, so go through fp32 on the CPU
        x = x.detach().float().cpu().numpy()
    elif hasattr(x, "astype"):  # JAX / numpy: fp32 first, as bf16 -> fp32 is exact
        x = x.astype(np.float32)
    return np.asarray(x, np.float64)


def rel_err(c: Any, a: Any, b: Any) -> float:
    """(Lab 01) max |C - A@B| / max |A@B|, against the float64 product of the same inputs."""
    a64, b64 = _float64(a), _float64(b)  # (M, K), (K, N)
    ref = a64 @ b64                       # (M, N), float64
    return float(np.abs(_float64(c) - ref).max() / np.abs(ref).max())


def jax_operands(m: int, k: int, n: int, dtype: str) -> tuple[Any, Any]:
    """(Lab 01) A (m, k) and B (k, n), standard normal in `dtype` ("fp32", "bf16", "fp16"), JAX key 0."""
    import jax
    import jax.numpy as jnp

    dt = {"fp32": jnp.float32, "bf16": jnp.bfloat16, "fp16": jnp.float16}[dtype]
    ka, kb = jax.random.split(jax.random.key(0))
    return jax.random.normal(ka, (m, k), dt), jax.random.normal(kb, (k, n), dt)


def torch_operands(m: int, k: int, n: int, dtype: str, device: Any) -> tuple[Any, Any]:
    """(Lab 01) A (m, k) and B (k, n), standard normal in `dtype` on `device`, torch seed 0."""
    import torch

    dt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    g = torch.Generator().manual_seed(0)  # drawn on the CPU in fp32: the same values on every device
    a = torch.randn(m, k, generator=g).to(device, dt)
    return a, torch.randn(k, n, generator=g).to(device, dt)


@dataclass(frozen=True)
class SpeedVsLibrary:
    """(Lab 01) A kernel and the library matmul timed on the same inputs."""
    kernel: Timing
    library: Timing
    flops: float  # useful FLOP per call: 2 * M * N * K

    @property
    def speedup(self) -> float:
        """(Lab 01) The kernel's speed as a multiple of the library's (above 1: the kernel wins)."""
        return self.library.median_s / self.kernel.median_s

    @property
    def kernel_tflops(self) -> float:
        """(Lab 01) The kernel's useful TFLOP/s at its median time."""
        return self.kernel.rate(self.flops) / 1e12

    @property
    def library_tflops(self) -> float:
        """(Lab 01) The library matmul's useful TFLOP/s at its median time."""
        return self.library.rate(self.flops) / 1e12


def _time(fn: Callable[..., Any], inputs: tuple[Any, Any], repeats: int) -> Timing:
    """`fn(A, B)` on the same operands every repeat, calls back to back: torch tensors on their device, else JAX."""
    make = lambda i: inputs  # noqa: E731  the same operands every repeat: a fair comparison
    if hasattr(inputs[0], "detach"):  # torch: synchronise the tensors' own device
        return time_torch(fn, make, device=inputs[0].device, repeats=repeats, calls=CALLS)
    return time_jax(fn, make, repeats=repeats, calls=CALLS)


def speed_vs_library(kernel: Callable[..., Any], library: Callable[..., Any], inputs: tuple[Any, Any], *,
                     flops: float, repeats: int) -> SpeedVsLibrary:
    """(Lab 01) Time `kernel` and `library` on the same (A, B), both back to back: torch tensors, else JAX."""
    return SpeedVsLibrary(_time(kernel, inputs, repeats), _time(library, inputs, repeats), flops)


def back_to_back_timer(inputs: tuple[Any, Any], *, repeats: int) -> Callable[[Callable[..., Any]], float]:
    """(Lab 01) ``timer(fn) -> median s per call`` of fn(A, B), timed as `speed_vs_library` times both sides."""
    return lambda fn: _time(fn, inputs, repeats).median_s
