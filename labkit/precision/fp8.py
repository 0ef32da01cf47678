"""Scaled fp8 matmuls: e4m3 forward, e5m2 gradients (Lab 04).

fp8 has so little range (e4m3: 2**-9 .. 448) that tensors are multiplied by a per-tensor
*scale* before the cast, chosen so the largest magnitude lands at the format's max
("current scaling": amax of this tensor now; production recipes use the amax history of past
steps, "delayed scaling", to avoid a reduction before every matmul). The forward pass uses
e4m3 (more mantissa), the backward pass casts gradients to e5m2 (more range), and the matmul
accumulates in fp32 before the scales are divided out.

Native fp8 matrix units: the chips with an fp8 peak in :mod:`labkit.runtime.hardware` (Hopper H100 /
H200 and Ada L4). Elsewhere -- a CPU, a T4, an A100, a TPU v5e -- the same JAX program runs
with XLA upcasting the fp8 operands (numerics identical, no speed-up): label it *emulated*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from labkit.measure.bench import Timing, check_number
from labkit.runtime import hardware
from labkit.precision.formats import dtype_of, format_info

FORWARD, BACKWARD = "fp8_e4m3", "fp8_e5m2"


class Fp8UnsupportedError(hardware.UnsupportedDtypeError):
    """(Lab 04) fp8 was requested natively on a chip without fp8 matrix units."""


def fp8_chips() -> list[str]:
    """(Lab 04) Canonical names of the chips in labkit.runtime.hardware with a native fp8 peak."""
    return [n for n, s in hardware.CHIPS.items() if s.peak_tflops.get("fp8") is not None]


def fp8_native(chip: str) -> bool:
    """(Lab 04) True when ``chip`` (as the runtime reports it) has native fp8 matrix math."""
    spec = hardware.lookup(chip)
    return spec is not None and spec.peak_tflops.get("fp8") is not None


def require_fp8(chip: str) -> hardware.ChipSpec:
    """(Lab 04) The chip's spec if it computes fp8 natively, else Fp8UnsupportedError saying where."""
    spec = hardware.lookup(chip)
    have = ", ".join(fp8_chips())
    if spec is None:
        raise Fp8UnsupportedError(
            f"{chip!r} is not in labkit.runtime.hardware (a CPU, or a chip its table does not list yet, such as a "
            f"Blackwell B200), so labkit knows no fp8 matrix units on it and times no fp8 here. Listed with native "
            f"fp8: {have}. Here emulated fp8 runs instead (same numerics, no speed-up); to time a newer chip, add its "
            "datasheet peaks to labkit.runtime.hardware.CHIPS.")
    if spec.peak_tflops.get("fp8") is None:
        raise Fp8UnsupportedError(
            f"{spec.name} has no fp8 matrix units (it computes in {', '.join(spec.supported())}). "
            f"Native fp8 needs one of: {have}. Use emulated fp8 (same numerics, no speed-up).")
    return spec


def status(chip: str) -> str:
    """(Lab 04) One line for the lab: native fp8 here, or why not and what runs instead."""
    if fp8_native(chip):
        return f"{hardware.describe(chip)}: native fp8 matrix units (e4m3 / e5m2)"
    try:
        require_fp8(chip)
    except Fp8UnsupportedError as e:
        return f"emulated fp8: {e}"
    return "emulated fp8"  # pragma: no cover


# ------------------------------------------------------------------------- numpy, emulated


def quantize(x: Any, fmt: str = FORWARD, scaled: bool = True) -> tuple[np.ndarray, float]:
    """(Lab 04) (fp8 array, scale): x * scale cast to ``fmt`` with ml_dtypes, saturating at max.

    ``scale = fmt.max / amax(x)`` (1.0 when ``scaled=False`` or x is all zeros); dequantize with
    ``q.astype(float32) / scale``. Saturating (clip before the cast) matches NVIDIA's satfinite
    conversions; a plain cast would give NaN (e4m3) or inf (e5m2) past max.
    """
    f = _fp8_format(fmt, "quantize")
    x32 = np.asarray(x, np.float32)
    _check_finite(x32, "quantize")
    amax = float(np.max(np.abs(x32))) if x32.size else 0.0
    scale = f.max / amax if scaled and amax > 0 else 1.0
    q = np.clip(x32 * np.float32(scale), -f.max, f.max).astype(dtype_of(fmt))
    return q, scale


def _fp8_format(fmt: str, call: str) -> Any:
    """fmt's Format if it is an fp8 one; ValueError naming it otherwise (a bf16 'scale' saturates nothing)."""
    f = format_info(fmt)
    if f.exponent_bits == 0 or f.bits != 8:
        raise ValueError(f"{call} needs an fp8 format ({FORWARD} or {BACKWARD}), got {fmt!r}")
    return f


def _check_finite(x: Any, call: str) -> None:
    """A concrete array with an inf or NaN has no amax to scale by (the scale would be 0 or NaN)."""
    bad = ~np.isfinite(np.asarray(x, np.float32))
    if bad.any():
        i = tuple(int(j) for j in np.argwhere(bad)[0])
        raise ValueError(f"{call}: x has a non-finite value ({np.asarray(x).flat[bad.argmax()]}) at index {i}: "
                         "current scaling divides by amax(|x|); find where the inf/NaN came from first")


def dequantize(q: np.ndarray, scale: float) -> np.ndarray:
    """(Lab 04) fp8 values back to float32: q / scale."""
    return q.astype(np.float32) / np.float32(scale)


def quantization_error(x: Any, fmt: str = FORWARD, scaled: bool = True) -> float:
    """(Lab 04) ||dequantize(quantize(x)) - x|| / ||x|| in float64."""
    x64 = np.asarray(x, np.float64)
    if not np.any(x64):  # ||x|| = 0: a relative error of an all-zero tensor is 0/0
        raise ValueError(f"quantization_error: x is all zeros (shape {x64.shape}): a relative error needs ||x|| > 0")
    y = dequantize(*quantize(x, fmt, scaled)).astype(np.float64)
    return float(np.linalg.norm(y - x64) / np.linalg.norm(x64))


# ------------------------------------------------------------------------------- JAX


def _q_jax(x: Any, fmt: str) -> tuple[Any, Any]:
    import jax.numpy as jnp

    fmax = _fp8_format(fmt, "quantize_jax").max
    amax = jnp.max(jnp.abs(x)).astype(jnp.float32)
    scale = jnp.where(amax > 0, fmax / amax, 1.0)  # () float32
    q = jnp.clip(x.astype(jnp.float32) * scale, -fmax, fmax).astype(dtype_of(fmt))
    return q, scale


def _dot(a: Any, b: Any) -> Any:
    import jax
    import jax.numpy as jnp

    # fp8 x fp8 -> fp32 accumulate: Hopper/Ada run this on fp8 tensor cores (cuBLASLt).
    return jax.lax.dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())),
                               preferred_element_type=jnp.float32)


def _make_fp8_matmul() -> Any:
    import jax

    @jax.custom_vjp
    def fp8_matmul(x: Any, w: Any) -> Any:
        qx, sx = _q_jax(x, FORWARD)
        qw, sw = _q_jax(w, FORWARD)
        return _dot(qx, qw) / (sx * sw)

    def fwd(x: Any, w: Any) -> tuple[Any, Any]:
        qx, sx = _q_jax(x, FORWARD)
        qw, sw = _q_jax(w, FORWARD)
        # Residuals are the fp8 copies: 1 byte per element kept for the backward pass.
        return _dot(qx, qw) / (sx * sw), (qx, sx, qw, sw)

    def bwd(res: Any, g: Any) -> tuple[Any, Any]:
        qx, sx, qw, sw = res
        qg, sg = _q_jax(g, BACKWARD)  # gradients need range more than precision: e5m2
        dx = _dot(qg, qw.T) / (sg * sw)  # (m, n) @ (n, k) -> (m, k)
        dw = _dot(qx.T, qg) / (sx * sg)  # (k, m) @ (m, n) -> (k, n)
        return dx, dw

    fp8_matmul.defvjp(fwd, bwd)
    return fp8_matmul


_FP8_MATMUL: Any = None


def quantize_jax(x: Any, fmt: str = FORWARD) -> tuple[Any, Any]:
    """(Lab 04) (fp8 array, fp32 scale) in JAX: current scaling, saturating cast."""
    import jax

    if not isinstance(x, jax.core.Tracer):  # concrete (not under jit): its values can be checked
        import jax.numpy as jnp

        arr = np.asarray(x)  # bf16 (the fp8 timing cell's operands) is an ml_dtypes type: np.floating misses it
        if arr.size == 0 or not jnp.issubdtype(arr.dtype, jnp.floating):
            raise ValueError(f"quantize_jax needs a non-empty float array, got {arr.dtype} of shape {arr.shape}; "
                             "e.g. jnp.asarray(x, jnp.float32)")
        _check_finite(arr, "quantize_jax")
    return _q_jax(x, fmt)


def scaled_dot(qa: Any, sa: Any, qb: Any, sb: Any) -> Any:
    """(Lab 04) The fp8 GEMM alone on pre-quantized operands: (qa @ qb) / (sa * sb), fp32 out (JAX)."""
    return _dot(qa, qb) / (sa * sb)


def fp8_matmul(x: Any, w: Any) -> Any:
    """(Lab 04) x (m, k) @ w (k, n) in scaled fp8 (e4m3 forward, e5m2 grads), fp32 result; JAX."""
    global _FP8_MATMUL
    if _FP8_MATMUL is None:
        _FP8_MATMUL = _make_fp8_matmul()
    return _FP8_MATMUL(x, w)


def _operands(m: int, k: int, n: int, seed: int, std: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x (m, k), w (k, n) and the upstream gradient g (m, n): N(0, std^2), float32."""
    from labkit.gpt.data import check_count, check_real

    m, k, n = (check_count(v, name, example=128) for v, name in ((m, "m"), (k, "k"), (n, "n")))
    std = check_real(std, "std", low=0.0, hint=" (the inputs' standard deviation, e.g. 1.0 or 1e-3)")
    rng = np.random.default_rng(seed)
    x = (std * rng.standard_normal((m, k))).astype(np.float32)
    w = (std * rng.standard_normal((k, n))).astype(np.float32)
    g = (std * rng.standard_normal((m, n))).astype(np.float32)  # upstream gradient dL/dy
    return x, w, g


def predicted_matmul_errors(m: int = 128, k: int = 256, n: int = 128, seed: int = 0,
                            std: float = 1.0) -> dict[str, float]:
    """(Lab 04) :func:`matmul_errors`' three errors predicted from the operands' own quantization errors.

    Each product's inputs carry independent relative rounding errors e_a and e_b (norm-wise, as
    :func:`quantization_error` measures them); in a sum of many products with random signs they add in
    quadrature, so the output's norm-wise error is about sqrt(e_a^2 + e_b^2) (first order in e).
    """
    x, w, g = _operands(m, k, n, seed, std)
    e = {"x": quantization_error(x, FORWARD), "w": quantization_error(w, FORWARD), "g": quantization_error(g, BACKWARD)}
    both = lambda a, b: float(np.hypot(e[a], e[b]))  # noqa: E731
    return {"y (e4m3 x e4m3)": both("x", "w"), "dx (e5m2 x e4m3)": both("g", "w"), "dw (e4m3 x e5m2)": both("x", "g")}


def matmul_errors(m: int = 128, k: int = 256, n: int = 128, seed: int = 0,
                  std: float = 1.0) -> dict[str, float]:
    """(Lab 04) Relative errors vs float64 of the fp8 matmul's output, dx and dw (JAX).

    ``std`` sets the input magnitude; tiny inputs show why the scales matter.
    """
    import jax
    import jax.numpy as jnp

    x, w, g = _operands(m, k, n, seed, std)

    @jax.jit
    def run(x: Any, w: Any, g: Any) -> tuple[Any, Any, Any]:
        y, vjp = jax.vjp(fp8_matmul, x, w)
        return (y, *vjp(g))

    y, dx, dw = run(jnp.asarray(x), jnp.asarray(w), jnp.asarray(g))
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, g))
    err = lambda got, ref: float(np.linalg.norm(np.asarray(got, np.float64) - ref)  # noqa: E731
                                 / np.linalg.norm(ref))
    return {"y (e4m3 x e4m3)": err(y, x64 @ w64), "dx (e5m2 x e4m3)": err(dx, g64 @ w64.T),
            "dw (e4m3 x e5m2)": err(dw, x64.T @ g64)}


# ------------------------------------------------------------------------- measured speed


@dataclass(frozen=True)
class Fp8Speed:
    """(Lab 04) fp8 vs bf16 matmul speed: with quantization, the GEMM alone, and the datasheet's ratio."""

    speedup: float  # t_bf16 / t_fp8 (x): what a recipe gets, amax + cast included; > 1: fp8 faster
    gemm_speedup: float  # t_bf16 / t_dot (x): the fp8 GEMM alone on operands quantized beforehand
    cost_s: float  # t_fp8 - t_dot (s): what quantizing adds; below -jitter_s XLA compiled them differently
    jitter_s: float  # the larger IQR of t_fp8 and t_dot (s); a |cost_s| within it is noise
    spec_ratio: float  # datasheet fp8 / bf16 dense peak (x), 2.0 on an H100
    case: str  # "cost" (cost_s > jitter_s), "noise" (|cost_s| <= jitter_s) or "faster" (cost_s < -jitter_s)

    @property
    def verdict(self) -> str:
        """(Lab 04) The quantization cost as a sentence, by case."""
        ms = self.cost_s * 1e3
        return {"cost": f"quantizing costs {ms:.3f} ms",
                "noise": f"quantizing's cost is inside the repeats' spread ({ms:+.3f} ms)",
                "faster": f"with quantizing it ran {-ms:.3f} ms faster: XLA compiled the two programs "
                          "differently, not one plus a cast"}[self.case]

    def __str__(self) -> str:
        return (f"spec fp8/bf16: {self.spec_ratio:.1f}x; measured {self.speedup:.2f}x with quantization, "
                f"{self.gemm_speedup:.2f}x for the GEMM alone; {self.verdict}")


def _seconds(t: Timing | float, name: str) -> tuple[float, float]:
    """(median s, IQR s) of a bench Timing; a plain number of seconds has no spread."""
    if isinstance(t, Timing):
        med = check_number(f"{name} ({t.label or 'timing'}) median time (s)", t.median_s)
        return med, t.spread * med  # spread is IQR / median
    return check_number(f"{name} (s)", t, "pass a bench.Timing or seconds per call"), 0.0


def speed_summary(t_bf16: Timing | float, t_fp8: Timing | float, t_dot: Timing | float,
                  spec_ratio: float) -> Fp8Speed:
    """(Lab 04) fp8 vs bf16 speed from three timings (bench.Timing or seconds): bf16, fp8 with quantization, GEMM alone."""
    bf16_s, _ = _seconds(t_bf16, "t_bf16")
    fp8_s, fp8_jit = _seconds(t_fp8, "t_fp8")
    dot_s, dot_jit = _seconds(t_dot, "t_dot")
    spec_ratio = check_number("spec_ratio (datasheet fp8 / bf16 peak)", spec_ratio, "e.g. 2.0 on an H100")
    extra, jitter = fp8_s - dot_s, max(fp8_jit, dot_jit)  # seconds
    case = "cost" if extra > jitter else "noise" if extra >= -jitter else "faster"
    return Fp8Speed(bf16_s / fp8_s, bf16_s / dot_s, extra, jitter, spec_ratio, case)
