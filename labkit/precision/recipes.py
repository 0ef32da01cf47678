"""fp8 scaling recipes as they are trained with today: current, delayed, per-block (MXFP8) (Lab 04).

An fp8 tensor is ``q = cast(x * s)`` with a scale ``s`` chosen so that ``|x| * s`` fits the format
(e4m3: max 448; e5m2: max 57344); the matmul multiplies the ``q`` and divides the scales out.
The recipes differ in where ``s`` comes from:

- **current** (per tensor): ``s = max / amax(x)`` of the tensor being cast, now. Exact fit, but an
  extra reduction over the whole tensor before every cast (Transformer Engine's
  ``Float8CurrentScaling``).
- **delayed** (per tensor): ``s = max / max(amax history)`` -- the amaxes recorded at the casts of
  the previous steps; this step's amax is recorded for the next one. Transformer Engine's
  ``DelayedScaling`` defaults: ``amax_history_len=1024``, ``amax_compute_algo="max"``,
  ``margin=0`` (TE API docs, ``transformer_engine.common.recipe``). No wait for a reduction, but a
  tensor larger than anything in the history saturates (clips) on the step it first appears.
- **block** (MXFP8, OCP Microscaling): one scale per 32 consecutive elements along the contraction
  axis, a power of two stored as E8M0 (8 exponent bits, no mantissa). An outlier then spoils only
  its own block instead of the whole tensor. We pick the smallest power of two that fits the
  block (``2^ceil(log2(amax / max))``: nothing clips); the OCP spec's sample conversion uses
  ``2^(floor(log2 amax) - emax)``, which may clip a block's largest element.

Forward operands are cast to **e4m3** (more mantissa), gradients to **e5m2** (more range): TE's
``Format.HYBRID``. Casts **saturate**: values past the format's max are clipped to ±max, as the
hardware's ``satfinite`` conversions and TE do. A plain ``ml_dtypes`` cast gives NaN (e4m3, which
has no inf) or inf (e5m2) instead: :func:`plain_cast` shows it; the recipes use
:func:`saturating_cast`.

Accumulation: DeepSeek-V3's technical report (section 3.3.2) observed that the accumulation of
fp8 GEMMs on NVIDIA H800 GPUs retains "around 14 bits", well short of fp32, giving a maximum
relative error of nearly 2% for K = 4096 random matrices; their fix promotes the partial sums to
fp32 registers on the CUDA cores every N_C = 128 elements. :func:`limited_accumulation` is a
*model* of that, with our assumptions (NVIDIA documents no accumulator width): each instruction's
32 products summed exactly, added to a running sum truncated to ``acc_bits`` fraction bits,
optionally promoted to fp32 every ``promote_every`` elements.
All numpy (float32 accumulation stands in for the tensor cores' fp32 one).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from labkit.precision.formats import dtype_of, format_info, round_mantissa

E4M3, E5M2 = "fp8_e4m3", "fp8_e5m2"
RECIPES = ("current", "delayed", "block")
BLOCK = 32             # MXFP8: elements per scale, along the contraction axis
E8M0_EXP = (-127, 127)  # exponent range of the E8M0 block scale (2^-127 .. 2^127)
TE_HISTORY_LEN = 1024  # Transformer Engine's DelayedScaling default amax_history_len


def _check_fp8(fmt: str) -> float:
    f = format_info(fmt)
    if f.bits != 8 or f.exponent_bits == 0:
        raise ValueError(f"an fp8 format ({E4M3} or {E5M2}) is needed, got {fmt!r}")
    return f.max


def saturating_cast(x: Any, fmt: str) -> np.ndarray:
    """(Lab 04) ``x`` cast to fp8 ``fmt`` with values past ±max clipped to ±max (hardware, TE)."""
    fmax = _check_fp8(fmt)
    return np.clip(np.asarray(x, np.float32), -fmax, fmax).astype(dtype_of(fmt))


def plain_cast(x: Any, fmt: str) -> np.ndarray:
    """(Lab 04) ``x`` cast to fp8 by ml_dtypes as is: NaN (e4m3) or inf (e5m2) past the range."""
    _check_fp8(fmt)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, np.float32).astype(dtype_of(fmt))


def _amax(x: np.ndarray) -> float:
    return float(np.max(np.abs(x))) if x.size else 0.0


def scale_for(amax: float, fmt: str, margin: int = 0) -> float:
    """(Lab 04) Per-tensor scale that maps ``amax`` to the format's max / 2^margin (1.0 if amax is 0)."""
    fmax = _check_fp8(fmt)
    return fmax / amax / 2.0**margin if amax > 0 else 1.0


def fake_quant(x: Any, fmt: str, scale: float) -> np.ndarray:
    """(Lab 04) ``x`` through fp8 with a per-tensor ``scale`` and back: saturating_cast(x*s) / s, float64."""
    x32 = np.asarray(x, np.float32)
    return saturating_cast(x32 * np.float32(scale), fmt).astype(np.float64) / scale


def quantize_current(x: Any, fmt: str = E4M3) -> np.ndarray:
    """(Lab 04) Current scaling: the scale from this tensor's own amax; returns the dequantized float64."""
    x32 = np.asarray(x, np.float32)
    return fake_quant(x32, fmt, scale_for(_amax(x32), fmt))


class DelayedScaling:
    """(Lab 04) Transformer Engine's delayed scaling: per-tensor scales from an amax history per name."""

    def __init__(self, history_len: int = TE_HISTORY_LEN, algo: str = "max", margin: int = 0) -> None:
        if history_len < 1 or algo not in ("max", "most_recent"):
            raise ValueError(f"history_len must be >= 1 and algo 'max' or 'most_recent', got {history_len}, {algo!r}")
        self.history_len, self.algo, self.margin = history_len, algo, margin
        self.history: dict[str, deque[float]] = {}

    def scale(self, name: str, fmt: str) -> float:
        """(Lab 04) The scale the next cast of ``name`` uses: from past amaxes only (1.0 before any, as TE)."""
        h = self.history.get(name)
        if not h:
            return 1.0
        return scale_for(max(h) if self.algo == "max" else h[-1], fmt, self.margin)

    def observe(self, name: str, amax: float) -> None:
        """(Lab 04) Record this step's amax of ``name``; the oldest falls out of the window."""
        self.history.setdefault(name, deque(maxlen=self.history_len)).append(float(amax))

    def quantize(self, x: Any, name: str, fmt: str = E4M3) -> np.ndarray:
        """(Lab 04) Cast ``x`` with the scale from history, then record its amax (dequantized float64)."""
        x32 = np.asarray(x, np.float32)
        out = fake_quant(x32, fmt, self.scale(name, fmt))
        self.observe(name, _amax(x32))
        return out


def block_exponents(x: Any, fmt: str = E4M3, block: int = BLOCK, axis: int = -1) -> np.ndarray:
    """(Lab 04) E8M0 exponent e per block of ``block`` along ``axis``: block values are stored as x / 2^e."""
    fmax = _check_fp8(fmt)
    xb = _blocks(np.asarray(x, np.float32), block, axis)  # (..., n_blocks, block)
    amax = np.max(np.abs(xb), axis=-1)
    with np.errstate(divide="ignore"):
        e = np.ceil(np.log2(amax / fmax))  # smallest power of two with amax / 2^e <= fmax
    return np.clip(np.where(amax > 0, e, 0), *E8M0_EXP).astype(np.int32)


def _blocks(x: np.ndarray, block: int, axis: int) -> np.ndarray:
    x = np.moveaxis(x, axis, -1)
    pad = (-x.shape[-1]) % block  # a ragged last block is padded with zeros (they do not change amax)
    if pad:
        x = np.concatenate([x, np.zeros((*x.shape[:-1], pad), x.dtype)], axis=-1)
    return x.reshape(*x.shape[:-1], x.shape[-1] // block, block)


def quantize_block(x: Any, fmt: str = E4M3, block: int = BLOCK, axis: int = -1) -> np.ndarray:
    """(Lab 04) MXFP8-style: one power-of-two (E8M0) scale per ``block`` elements along ``axis``; float64 back."""
    x32 = np.asarray(x, np.float32)
    e = block_exponents(x32, fmt, block, axis)[..., None].astype(np.float64)  # (..., n_blocks, 1)
    xb = _blocks(x32, block, axis).astype(np.float64)
    q = saturating_cast(xb / 2.0**e, fmt).astype(np.float64) * 2.0**e  # powers of two: exact rescaling
    n = x32.shape[axis]
    back = q.reshape(*q.shape[:-2], -1)[..., :n]
    return np.moveaxis(back, -1, axis)


def quantize(x: Any, recipe: str, fmt: str = E4M3, axis: int = -1, delayed: DelayedScaling | None = None,
             name: str = "") -> np.ndarray:
    """(Lab 04) ``x`` through fp8 by ``recipe`` (current / delayed / block); block scales run along ``axis``."""
    if recipe == "current":
        return quantize_current(x, fmt)
    if recipe == "delayed":
        if delayed is None:
            raise ValueError("the delayed recipe needs its DelayedScaling state (the amax history)")
        return delayed.quantize(x, name, fmt)
    if recipe == "block":
        return quantize_block(x, fmt, BLOCK, axis)
    raise ValueError(f"unknown fp8 recipe {recipe!r}; valid: {', '.join(RECIPES)}")


def qmatmul(a: Any, b: Any, recipe: str | None, fmts: tuple[str, str] = (E4M3, E4M3),
            delayed: DelayedScaling | None = None, names: tuple[str, str] = ("a", "b")) -> np.ndarray:
    """(Lab 04) a (m, k) @ b (k, n) with both operands through fp8 by ``recipe`` (None: fp32); fp32 accumulate."""
    if recipe is not None:  # block scales run along the contraction axis k of both operands
        a = quantize(a, recipe, fmts[0], axis=1, delayed=delayed, name=names[0])
        b = quantize(b, recipe, fmts[1], axis=0, delayed=delayed, name=names[1])
    return (np.asarray(a, np.float32) @ np.asarray(b, np.float32)).astype(np.float64)


def rel_err(got: Any, ref: Any) -> float:
    """(Lab 04) ||got - ref|| / ||ref|| in float64."""
    ref64 = np.asarray(ref, np.float64)
    return float(np.linalg.norm(np.asarray(got, np.float64) - ref64) / np.linalg.norm(ref64))


def outlier_tokens(m: int, k: int, seed: int = 0, n_outliers: int = 4, factor: float = 1e5) -> tuple[np.ndarray, np.ndarray]:
    """(Lab 04) N(0, 1) activations (m tokens, k) with ``n_outliers`` tokens ``factor``x larger; and the ordinary rows."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k))
    rows = rng.choice(m, n_outliers, replace=False)
    x[rows] *= factor  # a few tokens with huge activations: one per-tensor scale must cover them
    return x.astype(np.float32), np.setdiff1d(np.arange(m), rows)


def recipe_errors(x: np.ndarray, w: np.ndarray, history: list[np.ndarray],
                  history_w: list[np.ndarray] | None = None, rows: np.ndarray | None = None) -> dict[str, float]:
    """(Lab 04) Rel. error vs float64 of y = x @ w (over ``rows`` of y) per recipe; delayed saw ``history`` first."""
    ref = np.asarray(x, np.float64) @ np.asarray(w, np.float64)
    sel = slice(None) if rows is None else rows
    out = {}
    for recipe in RECIPES:
        d = DelayedScaling() if recipe == "delayed" else None
        if d is not None:
            for i, past in enumerate(history):  # earlier steps' casts fill the amax history
                d.observe("x", _amax(past))
                d.observe("w", _amax((history_w or [w] * len(history))[i]))
        out[recipe] = rel_err(qmatmul(x, w, recipe, delayed=d, names=("x", "w"))[sel], ref[sel])
    return out


def limited_accumulation(a: np.ndarray, b: np.ndarray, acc_bits: int = 13, chunk: int = 32,
                         promote_every: int | None = None) -> np.ndarray:
    """(Lab 04) a @ b summed into a narrow accumulator, optionally promoted to fp32 every N (a model of Hopper fp8).

    Each ``chunk`` of K (32: the K of one Hopper fp8 ``wgmma`` instruction) is summed in fp32, then
    added to a running sum truncated to ``acc_bits`` fraction bits (13: "around 14 bits" with the
    implicit one). ``promote_every`` K-elements the running sum is added to fp32 and restarted.
    """
    a32, b32 = np.asarray(a, np.float32), np.asarray(b, np.float32)
    acc = np.zeros((a32.shape[0], b32.shape[1]), np.float32)  # fp32 registers (the CUDA cores)
    part = np.zeros_like(acc)  # the tensor cores' narrow accumulator
    for j in range(0, a32.shape[1], chunk):
        part = round_mantissa(part + a32[:, j:j + chunk] @ b32[j:j + chunk], acc_bits, mode="truncate")
        if promote_every and (j + chunk) % promote_every == 0:
            acc, part = acc + part, np.zeros_like(part)
    return (acc + part).astype(np.float64)


def accumulation_errors(k_values: tuple[int, ...], m: int = 64, seed: int = 0, acc_bits: int = 13,
                        promote_every: int = 128) -> list[dict[str, Any]]:
    """(Lab 04) Per K: rel. error of fp8 (e4m3) products summed narrow, narrow + promoted, and in fp32."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in k_values:
        a = quantize_current(rng.standard_normal((m, k)))  # e4m3 values: their products are exact in fp32
        b = quantize_current(rng.standard_normal((k, m)))
        ref = a @ b  # float64
        rows.append({"K": k, "narrow": rel_err(limited_accumulation(a, b, acc_bits), ref),
                     "promoted": rel_err(limited_accumulation(a, b, acc_bits, promote_every=promote_every), ref),
                     "fp32": rel_err(a.astype(np.float32) @ b.astype(np.float32), ref)})
    return rows
