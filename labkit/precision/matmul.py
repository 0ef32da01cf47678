"""What an "fp32" matmul really computes on this runtime, measured against float64 (Lab 04).

Frameworks may run fp32 matmuls with narrower inputs for speed: JAX's ``precision=DEFAULT``
is one bf16 pass on a TPU and TF32 on Ampere+ GPUs (``HIGH`` is three bf16 passes on a TPU and
TF32 on those GPUs: "On GPU: uses tensorfloat32 where available", jax.lax.Precision); PyTorch's
``torch.set_float32_matmul_precision("high")`` allows TF32 on CUDA ("highest", the default,
does not). Rather than trusting documentation we measure: the relative error of
``A @ B`` vs a float64 reference, next to the error we get by rounding the *inputs* to each
candidate format ourselves (:func:`emulated_errors`). The nearest emulated level in log scale
names what the hardware did (:func:`behaves_like`).
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from labkit.precision.formats import round_mantissa
from labkit.runtime.matmul_precision import fp32_matmul_precision

JAX_SETTINGS = ("DEFAULT", "HIGH", "HIGHEST")  # jax.lax.Precision names; DEFAULT is the default
TORCH_SETTINGS = ("highest", "high", "medium")  # torch.set_float32_matmul_precision values


def rel_error(out: Any, ref: np.ndarray) -> float:
    """(Lab 04) ||out - ref|| / ||ref|| (Frobenius), computed in float64."""
    out64 = np.asarray(out, dtype=np.float64)
    return float(np.linalg.norm(out64 - ref) / np.linalg.norm(ref))


def emulated_errors(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """(Lab 04) Error of A @ B when the fp32 inputs are rounded to each candidate format.

    Each level rounds the inputs, then multiplies with numpy's float32 matmul (fp32
    accumulation, as matrix units do): "fp32" inputs as given; "tf32" mantissas rounded to 10
    bits, to nearest (:func:`labkit.precision.formats.round_mantissa`); "tf32 truncated" the same
    bits chopped toward zero -- NVIDIA does not document which of the two its tensor cores do, and
    on random inputs truncation errs ~2.6x more (its errors share a sign), so the nearer row names
    the rounding mode; "bf16" one bf16 pass; "bf16x3" the TPU's HIGH algorithm, a = hi + lo in
    bf16 and a·b = hi·hi + hi·lo + lo·hi.
    """
    a32, b32 = np.asarray(a, np.float32), np.asarray(b, np.float32)
    ref = a32.astype(np.float64) @ b32.astype(np.float64)
    bf = lambda x: x.astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    ah, bh = bf(a32), bf(b32)
    al, bl = bf(a32 - ah), bf(b32 - bh)  # exact residuals in fp32, then rounded to bf16
    tf = lambda x, mode="nearest": round_mantissa(x, 10, mode)  # noqa: E731
    return {
        "fp32": rel_error(a32 @ b32, ref),
        "bf16x3": rel_error(ah @ bh + ah @ bl + al @ bh, ref),
        "tf32": rel_error(tf(a32) @ tf(b32), ref),
        "tf32 truncated": rel_error(tf(a32, "truncate") @ tf(b32, "truncate"), ref),
        "bf16": rel_error(ah @ bh, ref),
    }


def _emulated_setting(level: str) -> str:
    """(Lab 04) The table's name for an emulated level: "inputs rounded to tf32", "inputs truncated to tf32"."""
    fmt, _, how = level.partition(" ")
    return f"inputs {how or 'rounded'} to {fmt}"


def rounding_mode(err: float, levels: dict[str, float]) -> str:
    """(Lab 04) Which tf32 emulation ``err`` is nearer on a log scale: "round to nearest" or "truncate"."""
    near = behaves_like(err, {k: levels[k] for k in ("tf32", "tf32 truncated")})
    return "round to nearest" if near == "tf32" else "truncate"


def behaves_like(err: float, levels: dict[str, float]) -> str:
    """(Lab 04) The emulated level nearest to ``err`` on a log scale (errors span decades)."""
    floor = 1e-12  # an exact result (err 0) counts as fp32
    return min(levels, key=lambda k: abs(math.log(max(err, floor)) - math.log(max(levels[k], floor))))


def expected(platform: str, bf16: bool, chip: str = "") -> dict[str, str]:
    """(Lab 04) What the documentation says JAX DEFAULT and torch's default do on this runtime."""
    if platform == "tpu":
        return {"jax": "DEFAULT = one bf16 pass (HIGH = bf16x3, HIGHEST ~ fp32 via 6 passes)",
                "torch": "torch-xla: its default ('medium' here) = one bf16 pass, 'high' = bf16x3, "
                         "'highest' = bf16x6 (~fp32); without torch-xla torch runs on the host CPU"}
    if platform == "gpu" and bf16:
        return {"jax": f"DEFAULT and HIGH = TF32 on {chip or 'this Ampere+ GPU'}; HIGHEST = fp32",
                "torch": "'highest' (default) = fp32; 'high' and 'medium' allow TF32"}
    if platform == "gpu":
        return {"jax": f"{chip or 'this GPU'} has no TF32: fp32 at every setting",
                "torch": "no TF32 on this GPU: fp32 at every setting"}
    return {"jax": "XLA:CPU computes fp32 dots in fp32 at every setting",
            "torch": "fp32 on CPU ('medium' may use bf16 where oneDNN has fast bf16 kernels)"}


def documented_level(platform: str, bf16: bool) -> str:
    """(Lab 04) The emulated level (emulated_errors' key) JAX's DEFAULT fp32 matmul should behave like here.

    TPU: one bf16 pass; Ampere-or-later GPU (bf16 tensor cores): TF32; an older GPU or a CPU: fp32.
    """
    if platform not in ("cpu", "gpu", "tpu"):
        raise ValueError(f"platform must be 'cpu', 'gpu' or 'tpu' (jax.devices()[0].platform), got {platform!r}")
    return {"tpu": "bf16", "gpu": "tf32" if bf16 else "fp32"}.get(platform, "fp32")


def jax_errors(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """(Lab 04) Relative error vs float64 of jnp.matmul on fp32 inputs for each JAX precision."""
    import jax
    import jax.numpy as jnp

    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    ja, jb = jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)
    out = {}
    for p in JAX_SETTINGS:
        f = jax.jit(lambda x, y, p=p: jnp.matmul(x, y, precision=getattr(jax.lax.Precision, p)))
        out[p] = rel_error(jax.device_get(f(ja, jb)), ref)
    return out


def torch_errors(a: np.ndarray, b: np.ndarray, device: Any = "cpu") -> dict[str, float]:
    """(Lab 04) Relative error vs float64 of torch.matmul on fp32 for each float32 precision.

    The global setting is restored afterwards, even on error.
    """
    import torch

    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    ta = torch.from_numpy(np.asarray(a, np.float32)).to(device)
    tb = torch.from_numpy(np.asarray(b, np.float32)).to(device)
    out = {}
    for p in TORCH_SETTINGS:  # on torch-xla the level goes through torch_xla.backends (runtime.device)
        with fp32_matmul_precision(p, device):
            out[p] = rel_error((ta @ tb).cpu().numpy(), ref)
    return out


def default_precision_table(n: int = 256, k: int = 1024, seed: int = 0, platform: str = "cpu",
                            bf16: bool = False, chip: str = "", torch_device: Any = "cpu",
                            frameworks: tuple[str, ...] = ("jax", "torch")) -> list[dict[str, Any]]:
    """(Lab 04) One row per framework setting: measured error, nearest emulated format, default?"""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, k)).astype(np.float32)  # (n, k)
    b = rng.standard_normal((k, n)).astype(np.float32)  # (k, n)
    levels = emulated_errors(a, b)
    exp = expected(platform, bf16, chip)
    measured: list[tuple[str, str, float, bool]] = []
    if "jax" in frameworks:
        measured += [("jax", p, e, p == "DEFAULT") for p, e in jax_errors(a, b).items()]
    if "torch" in frameworks:
        import torch

        # torch's documented default is "highest"; torch-xla's own default is its "default" level, which
        # runtime.matmul_precision.XLA_MATMUL_PRECISION maps to torch's "medium" (one bf16 pass on a TPU).
        default = "medium" if torch.device(torch_device).type == "xla" else "highest"
        measured += [("torch", p, e, p == default) for p, e in torch_errors(a, b, torch_device).items()]
        del torch
    rows = [{"framework": fw, "setting": s, "default": d, "rel error vs float64": e,
             "behaves like": behaves_like(e, levels), "documented": exp[fw]}
            for fw, s, e, d in measured]
    rows += [{"framework": "emulated", "setting": _emulated_setting(k_), "default": False,
              "rel error vs float64": v, "behaves like": k_, "documented": "numpy fp32 matmul vs float64"}
             for k_, v in levels.items()]
    return rows
