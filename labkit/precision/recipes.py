"""fp8 scaling recipes as they are trained with today: current, delayed, rowwise, per-block (MXFP8) (Lab 04).

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
- **rowwise** (per row): one scale per row of the activations and per column of the weights, i.e.
  per slice along the contraction axis, rounded to a power of two -- torchao's ``rowwise`` recipe
  (``Float8LinearRecipeName.ROWWISE``: axiswise scales, ``round_scales_to_power_of_2=True``), which
  is the block recipe with one block as long as the whole row. An outlier *token* then spoils only its
  own row; an outlier *channel* lies in every row, so it sets every row's scale.
- **block** (MXFP8, OCP Microscaling): one scale per 32 consecutive elements along the contraction
  axis, a power of two stored as E8M0 (8 exponent bits, no mantissa). Mind the direction: MX's
  scale X *dequantises*, x ≈ X · q (so X = 1 / s of the per-tensor recipes above, which multiply x
  before the cast, as TE's ``scale`` does). An outlier then spoils only
  its own block instead of the whole tensor. We pick the smallest power of two that fits the
  block (``2^ceil(log2(amax / max))``: nothing clips); the OCP spec's sample conversion uses
  ``2^(floor(log2 amax) - emax)``, which may clip a block's largest element.

Forward operands are cast to **e4m3** (more mantissa), gradients to **e5m2** (more range): TE's
``Format.HYBRID``. Casts **saturate**: values past the format's max are clipped to ±max, as the
hardware's ``satfinite`` conversions and TE do. A plain ``ml_dtypes`` cast gives NaN (e4m3, which
has no inf) or inf (e5m2) instead: :func:`plain_cast` shows it; the recipes use
:func:`saturating_cast`.

A negative control, not a recipe: **unscaled** (:data:`UNSCALED`) casts with scale 1, the bare cast
a recipe exists to avoid; small gradients then fall into the subnormals or to 0 (Lab 04's fp8 MLP).

Accumulation: DeepSeek-V3's technical report (section 3.3.2) observed that the accumulation of
fp8 GEMMs on NVIDIA H800 GPUs retains "around 14 bits", well short of fp32, giving a maximum
relative error of nearly 2% for K = 4096 random matrices; their fix promotes the partial sums to
fp32 registers on the CUDA cores every N_C = 128 elements. :func:`limited_accumulation` is a
*model* of that, with our assumptions (NVIDIA documents no accumulator width): each instruction's
32 products summed exactly, added to a running sum truncated to ``acc_bits`` fraction bits,
optionally promoted to fp32 every ``promote_every`` elements. It is a model, not a measurement:
no library exposes the tensor cores' partial sums, and a GPU's ``torch._scaled_mm(...,
use_fast_accum=True)`` against ``False`` is what would measure it.
All numpy (float32 accumulation stands in for the tensor cores' fp32 one).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from labkit.gpt.data import check_count, check_real
from labkit.precision.formats import check_list, dtype_of, format_info

E4M3, E5M2 = "fp8_e4m3", "fp8_e5m2"
RECIPES = ("current", "delayed", "rowwise", "block")  # coarse to fine scales
UNSCALED = "unscaled"  # scale 1: the bare cast -- a negative control for the recipes, not one of them
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


F32_MAX = float(np.finfo(np.float32).max)


def _check_scale(scale: Any, why: str = "") -> float:
    """A per-tensor scale as a float: finite, > 0, and still finite and non-zero in float32 (x * s runs there)."""
    s = check_real(scale, "scale", 0.0, hint=why or "; e.g. scale_for(amax, fmt)")
    if s > F32_MAX or not np.float32(s) > 0:  # too big for float32, or below its smallest subnormal
        raise ValueError(f"scale {s:g} does not fit float32 (the cast computes x * scale there){why}")
    return s


def _check_matmul(a: Any, b: Any, names: tuple[str, str] = ("a", "b")) -> tuple[np.ndarray, np.ndarray]:
    """a (m, k) and b (k, n) as arrays, or a ValueError with both shapes and the likely fix."""
    a, b = np.asarray(a), np.asarray(b)
    (na, nb), hint = names, ""
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"{na} and {nb} must be 2-D, (m, k) and (k, n); got {na} {a.shape} and {nb} {b.shape} "
                         "(a vector v: use v[None, :] as a row or v[:, None] as a column)")
    if a.shape[1] != b.shape[0]:
        if a.shape[1] == b.shape[1]:
            hint = f"; did you mean {nb}.T?"
        raise ValueError(f"{na} is {a.shape} and {nb} is {b.shape}: {na}'s columns ({a.shape[1]}) must equal "
                         f"{nb}'s rows ({b.shape[0]}){hint}")
    return a, b


def _amax(x: np.ndarray) -> float:
    amax = float(np.max(np.abs(x))) if x.size else 0.0
    if not np.isfinite(amax):  # a scale from NaN / inf would silently turn the whole tensor into NaN or 0
        raise ValueError(f"the tensor holds NaN or inf (max|x| = {amax}): fp8 scaling needs finite values")
    return amax


def scale_for(amax: float, fmt: str, margin: int = 0) -> float:
    """(Lab 04) Per-tensor scale that maps ``amax`` to the format's max / 2^margin (1.0 if amax is 0)."""
    fmax = _check_fp8(fmt)
    amax = check_real(amax, "amax", 0.0, closed="low", hint="; amax is max|x|, e.g. float(np.abs(x).max())")
    margin = check_count(margin, "margin", 0, example=0)
    if amax == 0:
        return 1.0
    with np.errstate(over="ignore"):
        s = float(np.float64(fmax) / amax / np.exp2(np.float64(margin)))
    return _check_scale(s, f" (from amax={amax:g}, margin={margin}: use a smaller margin, or check amax)")


def fake_quant(x: Any, fmt: str, scale: float) -> np.ndarray:
    """(Lab 04) ``x`` through fp8 with a per-tensor ``scale`` and back: saturating_cast(x*s) / s, float64."""
    scale = _check_scale(scale)
    return _scaled_cast(np.asarray(x, np.float32), fmt, scale).astype(np.float64) / scale


def _scaled_cast(x32: np.ndarray, fmt: str, scale: float) -> np.ndarray:
    """The fp8 values a cast of float32 ``x32`` at ``scale`` stores: saturating_cast(x32 * s), in ``fmt``."""
    return saturating_cast(x32 * np.float32(scale), fmt)


def quantize_current(x: Any, fmt: str = E4M3) -> np.ndarray:
    """(Lab 04) Current scaling: the scale from this tensor's own amax; returns the dequantized float64."""
    x32 = np.asarray(x, np.float32)
    return fake_quant(x32, fmt, scale_for(_amax(x32), fmt))


class DelayedScaling:
    """(Lab 04) Transformer Engine's delayed scaling: per-tensor scales from an amax history per name."""

    def __init__(self, history_len: int = TE_HISTORY_LEN, algo: str = "max", margin: int = 0) -> None:
        history_len = check_count(history_len, "history_len", example=TE_HISTORY_LEN)
        if algo not in ("max", "most_recent"):
            raise ValueError(f"algo must be 'max' or 'most_recent', got {algo!r}")
        self.history_len, self.algo, self.margin = history_len, algo, check_count(margin, "margin", 0, example=0)
        self.history: dict[str, deque[float]] = {}

    def scale(self, name: str, fmt: str) -> float:
        """(Lab 04) The scale the next cast of ``name`` uses: from past amaxes only (1.0 before any, as TE)."""
        h = self.history.get(name)
        if not h:
            return 1.0
        return scale_for(max(h) if self.algo == "max" else h[-1], fmt, self.margin)

    def observe(self, name: str, amax: float) -> None:
        """(Lab 04) Record this step's amax of ``name``; the oldest falls out of the window."""
        amax = check_real(amax, "amax", 0.0, closed="low", hint=f" (for {name!r}: max|x| of this step's tensor)")
        self.history.setdefault(name, deque(maxlen=self.history_len)).append(amax)

    def quantize(self, x: Any, name: str, fmt: str = E4M3) -> np.ndarray:
        """(Lab 04) Cast ``x`` with the scale from history, then record its amax (dequantized float64)."""
        x32 = np.asarray(x, np.float32)
        out = fake_quant(x32, fmt, self.scale(name, fmt))
        self.observe(name, _amax(x32))
        return out


def block_exponents(x: Any, fmt: str = E4M3, block: int = BLOCK, axis: int = -1) -> np.ndarray:
    """(Lab 04) E8M0 exponent e per block of ``block`` along ``axis``: block values are stored as x / 2^e."""
    fmax, x32 = _check_fp8(fmt), np.asarray(x, np.float32)
    block = check_count(block, "block", example=BLOCK)
    if x32.ndim == 0:
        raise ValueError(f"block scaling needs an array (scales run along an axis), got the scalar {x!r}")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -x32.ndim <= axis < x32.ndim:
        raise ValueError(f"axis must be an integer in [{-x32.ndim}, {x32.ndim}) for an array of shape "
                         f"{x32.shape}, got {axis!r}")
    xb = _blocks(x32, block, axis)  # (..., n_blocks, block)
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


def quantize_rowwise(x: Any, fmt: str = E4M3, axis: int = -1) -> np.ndarray:
    """(Lab 04) torchao's rowwise: one power-of-two scale per slice along ``axis`` (a block the whole axis long)."""
    x32 = np.asarray(x, np.float32)
    if x32.ndim == 0:
        raise ValueError(f"rowwise scaling needs an array (scales run along an axis), got the scalar {x!r}")
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -x32.ndim <= axis < x32.ndim:
        raise ValueError(f"axis must be an integer in [{-x32.ndim}, {x32.ndim}) for an array of shape "
                         f"{x32.shape}, got {axis!r}")
    return quantize_block(x32, fmt, max(x32.shape[axis], 1), axis)


def quantize(x: Any, recipe: str, fmt: str = E4M3, axis: int = -1, delayed: DelayedScaling | None = None,
             name: str = "") -> np.ndarray:
    """(Lab 04) ``x`` through fp8 by ``recipe`` (current / delayed / rowwise / block / unscaled), scales along ``axis``."""
    if recipe == UNSCALED:  # no scale: what the cast alone keeps (values below the subnormals -> 0)
        return fake_quant(x, fmt, 1.0)
    if recipe == "current":
        return quantize_current(x, fmt)
    if recipe == "delayed":
        if delayed is None:
            raise ValueError("the delayed recipe needs its DelayedScaling state (the amax history)")
        return delayed.quantize(x, name, fmt)
    if recipe == "rowwise":
        return quantize_rowwise(x, fmt, axis)
    if recipe == "block":
        return quantize_block(x, fmt, BLOCK, axis)
    raise ValueError(f"unknown fp8 recipe {recipe!r}; valid: {', '.join(RECIPES)} (or {UNSCALED!r}, the control)")


def quantized_operands(a: Any, b: Any, recipe: str | None, fmts: tuple[str, str] = (E4M3, E4M3),
                       delayed: DelayedScaling | None = None,
                       names: tuple[str, str] = ("a", "b")) -> tuple[np.ndarray, np.ndarray]:
    """(Lab 04) a (m, k) and b (k, n) as an fp8 matmul sees them (None: fp32), as float32 arrays."""
    a, b = _check_matmul(a, b, tuple(check_list(names, "names")))
    fmts = check_list(fmts, "fmts")
    if len(fmts) != 2:
        raise ValueError(f"fmts must be two formats (a's, b's), e.g. ['{E4M3}', '{E4M3}'], got {fmts}")
    if recipe is not None:  # rowwise and block scales run along the contraction axis k of both operands
        a = quantize(a, recipe, fmts[0], axis=1, delayed=delayed, name=names[0])
        b = quantize(b, recipe, fmts[1], axis=0, delayed=delayed, name=names[1])
    return np.asarray(a, np.float32), np.asarray(b, np.float32)


def qmatmul(a: Any, b: Any, recipe: str | None, fmts: tuple[str, str] = (E4M3, E4M3),
            delayed: DelayedScaling | None = None, names: tuple[str, str] = ("a", "b")) -> np.ndarray:
    """(Lab 04) a (m, k) @ b (k, n) with both operands through fp8 by ``recipe`` (None: fp32); fp32 accumulate."""
    qa, qb = quantized_operands(a, b, recipe, fmts, delayed, names)
    return (qa @ qb).astype(np.float64)


def rel_err(got: Any, ref: Any) -> float:
    """(Lab 04) ||got - ref|| / ||ref|| in float64."""
    got64, ref64 = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if got64.shape != ref64.shape:
        raise ValueError(f"got has shape {got64.shape} but ref has {ref64.shape}: they must match (compare like with like)")
    norm = np.linalg.norm(ref64)
    if not norm > 0:
        raise ValueError("ref is all zeros (or empty): a relative error is undefined; compare absolute errors")
    return float(np.linalg.norm(got64 - ref64) / norm)


def _outliers(m: int, k: int, seed: int, n_outliers: int, factor: float,
              axis: int) -> tuple[np.ndarray, np.ndarray]:
    m, k = check_count(m, "m", example=128), check_count(k, "k", example=1024)
    n_outliers = check_count(n_outliers, "n_outliers", 0, example=4)
    n, what = (m, "m tokens") if axis == 0 else (k, "k channels")
    if n_outliers > n:
        raise ValueError(f"n_outliers={n_outliers} is more than the {what.replace(' ', f'={n} ', 1)}; "
                         f"e.g. n_outliers={min(4, n)}")
    factor = check_real(factor, "factor", 0.0, hint="; e.g. factor=1e5")
    rng = np.random.default_rng(check_count(seed, "seed", 0, example=0))
    x = rng.standard_normal((m, k))
    picked = rng.choice(n, n_outliers, replace=False)
    x[(picked, slice(None)) if axis == 0 else (slice(None), picked)] *= factor
    return x.astype(np.float32), np.setdiff1d(np.arange(n), picked)


def outlier_tokens(m: int, k: int, seed: int = 0, n_outliers: int = 4,
                   factor: float = 1e5) -> tuple[np.ndarray, np.ndarray]:
    """(Lab 04) N(0, 1) activations (m tokens, k) with ``n_outliers`` tokens ``factor``x larger; and the ordinary rows."""
    return _outliers(m, k, seed, n_outliers, factor, axis=0)  # a few tokens one per-tensor scale must cover


def outlier_channels(m: int, k: int, seed: int = 0, n_outliers: int = 4,
                     factor: float = 1e5) -> tuple[np.ndarray, np.ndarray]:
    """(Lab 04) N(0, 1) activations (m, k channels), ``n_outliers`` channels ``factor``x larger in every token;
    and the ordinary channels (outlier features: in every row, so no per-row scale escapes them)."""
    return _outliers(m, k, seed, n_outliers, factor, axis=1)


def recipe_errors(x: np.ndarray, w: np.ndarray, history: list[np.ndarray],
                  history_w: list[np.ndarray] | None = None, rows: np.ndarray | None = None,
                  channels: np.ndarray | None = None) -> dict[str, float]:
    """(Lab 04) Rel. error vs float64 of y = x @ w per recipe, over ``rows`` of y and the contraction
    ``channels`` (their part of the sum: what the quantized tensor kept of them); delayed saw ``history`` first."""
    x, w = _check_matmul(x, w, ("x", "w"))
    ch = slice(None) if channels is None else np.asarray(channels)
    sel = slice(None) if rows is None else rows
    ref = x[:, ch].astype(np.float64) @ w[ch].astype(np.float64)
    out = {}
    for recipe in RECIPES:
        d = DelayedScaling() if recipe == "delayed" else None
        if d is not None:
            for i, past in enumerate(history):  # earlier steps' casts fill the amax history
                d.observe("x", _amax(past))
                d.observe("w", _amax((history_w or [w] * len(history))[i]))
        qx, qw = quantized_operands(x, w, recipe, delayed=d, names=("x", "w"))  # scales from the whole tensors
        out[recipe] = rel_err((qx[:, ch] @ qw[ch]).astype(np.float64)[sel], ref[sel])
    return out


def _round_bits64(x: np.ndarray, bits: int, rounding: str) -> np.ndarray:
    """float64 ``x`` with ``bits`` fraction bits kept (exact: frexp, no detour through float32)."""
    m, e = np.frexp(x)  # x = m * 2**e, 0.5 <= |m| < 1: m carries the implicit one
    scaled = m * 2.0 ** (bits + 1)
    kept = np.trunc(scaled) if rounding == "truncate" else np.rint(scaled)  # rint: to nearest, ties to even
    return np.ldexp(kept, e - bits - 1)


def limited_accumulation(a: np.ndarray, b: np.ndarray, acc_bits: int = 13, chunk: int = 32,
                         promote_every: int | None = None, rounding: str = "truncate") -> np.ndarray:
    """(Lab 04) a @ b summed into a narrow accumulator, optionally promoted to fp32 every N (a model of Hopper fp8).

    Each ``chunk`` of K (32: the K of one Hopper fp8 ``wgmma`` instruction) is summed exactly (float64:
    exact for fp8 inputs, whose products have at most 8 significant bits), then added to a running sum
    cut to ``acc_bits`` fraction bits (13: "around 14 bits" with the implicit one) -- ``rounding``
    "truncate" (toward zero, the model's assumption) or "nearest" (the comparison). ``promote_every``
    K-elements the running sum is added to fp32 and restarted.
    """
    a, b = _check_matmul(a, b)
    if check_count(acc_bits, "acc_bits", 0, example=13) > 23:
        raise ValueError(f"acc_bits must be in [0, 23] (fraction bits kept of fp32's 23), got {acc_bits}")
    chunk = check_count(chunk, "chunk", example="32 (K per instruction)")
    if promote_every is not None and check_count(promote_every, "promote_every", example=128) % chunk:
        raise ValueError(f"promote_every={promote_every} must be a multiple of chunk={chunk} (the sum is promoted "
                         f"between instructions), e.g. promote_every={max(1, round(promote_every / chunk)) * chunk}")
    if rounding not in ("truncate", "nearest"):
        raise ValueError(f"rounding must be 'truncate' or 'nearest', got {rounding!r}")
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    acc = np.zeros((a64.shape[0], b64.shape[1]), np.float32)  # fp32 registers (the CUDA cores)
    part = np.zeros(acc.shape)  # the tensor cores' narrow accumulator (its values: acc_bits fraction bits)
    for j in range(0, a64.shape[1], chunk):
        part = _round_bits64(part + a64[:, j:j + chunk] @ b64[j:j + chunk], acc_bits, rounding)
        if promote_every and (j + chunk) % promote_every == 0:
            acc, part = acc + part.astype(np.float32), np.zeros_like(part)
    return (acc + part.astype(np.float32)).astype(np.float64)


def e4m3_codes(x: Any) -> np.ndarray:
    """(Lab 04) The e4m3 values a current-scaled cast of ``x`` stores (x * s, s = 448 / amax), as float64."""
    x32 = np.asarray(x, np.float32)
    return _scaled_cast(x32, E4M3, scale_for(_amax(x32), E4M3)).astype(np.float64)


def accumulation_errors(k_values: tuple[int, ...], m: int = 64, seed: int = 0, acc_bits: int = 13,
                        promote_every: int = 128) -> list[dict[str, Any]]:
    """(Lab 04) Per K: rel. error of e4m3 products summed narrow (truncated, or rounded), narrow + promoted, in fp32.

    The operands are the e4m3 codes themselves (what the tensor cores multiply; the scales are divided out
    after the sum): their products are exact in fp32 and float64, so the float64 reference is the exact sum
    and every column is accumulation error only.
    """
    k_values = [check_count(k, f"k_values[{i}]", example=4096) for i, k in enumerate(check_list(k_values, "k_values"))]
    m = check_count(m, "m", example=64)
    rng = np.random.default_rng(check_count(seed, "seed", 0, example=0))
    rows = []
    for k in k_values:
        a, b = e4m3_codes(rng.standard_normal((m, k))), e4m3_codes(rng.standard_normal((k, m)))  # values up to 448
        ref = a @ b  # float64, exact: products of e4m3 values, summed well inside float64's 53 bits
        narrow = limited_accumulation(a, b, acc_bits)
        rows.append({"K": k, "narrow": rel_err(narrow, ref),
                     # the largest single error against the outputs' RMS: a worst case, as DeepSeek-V3's "maximum"
                     "narrow, max error / RMS": float(np.max(np.abs(narrow - ref)) / np.sqrt(np.mean(ref**2))),
                     "narrow, round-to-nearest": rel_err(limited_accumulation(a, b, acc_bits, rounding="nearest"), ref),
                     "promoted": rel_err(limited_accumulation(a, b, acc_bits, promote_every=promote_every), ref),
                     "fp32": rel_err(a.astype(np.float32) @ b.astype(np.float32), ref)})
    return rows
