"""Number formats for deep learning: range, rounding, accumulation (Lab 04).

Every figure here is computed from the format itself -- ``ml_dtypes.finfo`` for the formats
numpy can hold (fp32, bf16, fp16, fp8 e4m3 / e5m2), ``np.iinfo`` for int8, and the IEEE-style
bit layout for tf32 (1 sign, 8 exponent, 10 mantissa bits), which is not a storage type at all:
it is how NVIDIA tensor cores (Ampere and later) read fp32 inputs. :func:`round_mantissa`
emulates it by rounding an fp32 mantissa to 10 bits with a bit mask. Which chips compute in
each format natively comes from :mod:`labkit.runtime.hardware`.

The demos the lab calls: :func:`range_probe` (overflow / underflow), :func:`rounding_errors`,
:func:`accumulation_errors` (long dot products, low-precision vs fp32 accumulation). The
default-matmul-precision measurement is :mod:`labkit.precision.matmul`, fp8 is :mod:`labkit.precision.fp8`,
loss scaling :mod:`labkit.precision.loss_scale`, training per precision :mod:`labkit.precision.train`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

import ml_dtypes
import numpy as np

from labkit.gpt.data import check_count, check_real
from labkit.runtime import hardware

# Course name -> numpy dtype (None: no storage type). "fp8_e4m3" is OCP/NVIDIA E4M3 ("fn":
# finite, no inf); "fp8_e5m2" is IEEE-like with inf. Order = the lab's table order.
_DTYPES: dict[str, Any] = {
    "fp32": np.float32,
    "tf32": None,  # a tensor-core input format: fp32 storage, 10 mantissa bits used
    "bf16": ml_dtypes.bfloat16,
    "fp16": np.float16,
    "fp8_e4m3": ml_dtypes.float8_e4m3fn,
    "fp8_e5m2": ml_dtypes.float8_e5m2,
    "int8": np.int8,
}
FORMATS: tuple[str, ...] = tuple(_DTYPES)
# Which labkit.runtime.hardware peak column a format's matmuls run at.
HW_KEY = {"fp32": "fp32", "tf32": "tf32", "bf16": "bf16", "fp16": "fp16", "fp8_e4m3": "fp8",
          "fp8_e5m2": "fp8", "int8": "int8"}
TF32_BITS = (1, 8, 10)  # sign, exponent, mantissa: NVIDIA A100 whitepaper, "TF32"


class UnknownFormatError(ValueError):
    """(Lab 04) A format name that is not in FORMATS."""


def check_format(name: str) -> str:
    """(Lab 04) Return name if it is a known format, else raise listing the valid ones."""
    if not isinstance(name, str):
        raise TypeError(f"a format must be a format name such as 'bf16' (one of {', '.join(FORMATS)}), "
                        f"got {type(name).__name__} {name!r}")
    if name not in _DTYPES:
        raise UnknownFormatError(f"unknown number format {name!r}; valid formats are "
                                 f"{', '.join(FORMATS)}")
    return name


def check_list(value: Any, name: str) -> list[Any]:
    """(Lab 04) ``value`` as a list; a lone str (or number) is refused, suggesting ``[value]``."""
    if isinstance(value, (str, bytes, numbers.Number)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a list, e.g. [{value!r}], got {type(value).__name__} {value!r}")
    return list(value)


def check_chips(chips: Any) -> list[str]:
    """(Lab 04) ``chips`` as a list of names labkit.runtime.hardware knows; unknown names are refused."""
    chips = check_list(chips, "chips")
    bad = [c for c in chips if not isinstance(c, str) or hardware.lookup(c) is None]
    if bad:
        raise ValueError(f"unknown chip name(s) {bad} (not in labkit.runtime.hardware); known chips: "
                         f"{', '.join(hardware.CHIPS)}")
    return chips


def dtype_of(name: str) -> Any:
    """(Lab 04) The numpy/ml_dtypes dtype that stores format ``name`` (tf32 -> float32)."""
    d = _DTYPES[check_format(name)]
    return np.float32 if d is None else d


@dataclass(frozen=True)
class Format:
    """(Lab 04) One number format's bit layout and range, computed from the format."""

    name: str
    bits: int                 # storage bits (tf32: 19 significant bits in a 32-bit word)
    sign_bits: int
    exponent_bits: int
    mantissa_bits: int        # explicit fraction bits; normal numbers have one more, implicit
    max: float                # largest finite value
    smallest_normal: float | None
    smallest_subnormal: float | None
    eps: float                # gap between 1 and the next value (int8: the integer step, 1)
    has_inf: bool             # False for fp8 e4m3 (overflow gives NaN) and int8
    native_on: tuple[str, ...]  # chips with a native matrix path (labkit.runtime.hardware)

    def as_row(self) -> dict[str, Any]:
        """(Lab 04) A JSON-able dict for the lab's table and the run report."""
        row = asdict(self)
        row["native_on"] = ", ".join(self.native_on) or "none in the table"
        return row


def ieee_like(exponent_bits: int, mantissa_bits: int) -> dict[str, float]:
    """(Lab 04) max / smallest normal / smallest subnormal / eps of an IEEE-style layout.

    IEEE-style: bias = 2**(e-1) - 1 and the all-ones exponent is reserved for inf/NaN, so the
    largest exponent is bias; a normal value is 1.m * 2**exp (the 1 is the implicit bit).
    Layouts from fp8 (e4m3 / e5m2) to fp64 (e11m52): 1 exponent bit leaves no normal range (its smallest
    normal, 2, exceeds its max), and past fp64 the figures do not fit a Python float.
    """
    e = check_count(exponent_bits, "exponent_bits", 0, example=8)  # np.int64 -> int (ldexp takes an int)
    m = check_count(mantissa_bits, "mantissa_bits", 0, example=7)
    if not (2 <= e <= 11 and m <= 52):
        raise ValueError(f"exponent_bits must be an integer in 2..11, mantissa_bits in 0..52 (fp8 e4m3 ... fp64 "
                         f"e11m52), got exponent_bits={e}, mantissa_bits={m}")
    bias = 2 ** (e - 1) - 1
    return {"max": math.ldexp(2.0 - 2.0 ** -m, bias),
            "smallest_normal": math.ldexp(1.0, 1 - bias),
            "smallest_subnormal": math.ldexp(1.0, 1 - bias - m),
            "eps": 2.0 ** -m}


def native_chips(name: str, chips: Sequence[str] | None = None) -> tuple[str, ...]:
    """(Lab 04) Canonical names of chips (default: all in labkit.runtime.hardware) computing in ``name``."""
    key = HW_KEY[check_format(name)]
    specs = [hardware.lookup(c) for c in (check_chips(chips) if chips is not None else hardware.CHIPS)]
    return tuple(s.name for s in specs if s is not None and s.peak_tflops.get(key) is not None)


def format_info(name: str, chips: Sequence[str] | None = None) -> Format:
    """(Lab 04) The Format of ``name``: finfo / iinfo, or the bit layout for tf32."""
    check_format(name)
    native = native_chips(name, chips)
    if name == "tf32":
        _, e, m = TF32_BITS
        f = ieee_like(e, m)
        return Format(name, 1 + e + m, 1, e, m, f["max"], f["smallest_normal"],
                      f["smallest_subnormal"], f["eps"], True, native)
    dt = _DTYPES[name]
    if name == "int8":
        ii = np.iinfo(dt)
        return Format(name, ii.bits, 1, 0, ii.bits - 1, float(ii.max), None, None, 1.0, False,
                      native)
    fi = ml_dtypes.finfo(dt)
    inf = np.array(np.inf, np.float32).astype(dt).astype(np.float32)  # what inf becomes
    return Format(name, int(fi.bits), 1, int(fi.nexp), int(fi.nmant), float(fi.max),
                  float(fi.smallest_normal), float(fi.smallest_subnormal), float(fi.eps),
                  bool(np.isinf(inf)), native)


def format_table(chips: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """(Lab 04) One row per format in FORMATS; ``native_on`` limited to ``chips`` if given."""
    return [format_info(n, chips).as_row() for n in FORMATS]


# --------------------------------------------------------------------------- rounding


def round_mantissa(x: Any, mantissa_bits: int, mode: str = "nearest") -> np.ndarray:
    """(Lab 04) fp32 values with the mantissa cut to ``mantissa_bits`` by bit masking (tf32 = 10).

    ``mode="nearest"``: round to nearest, ties to even (what a cast does); ``"truncate"``: chop
    the low bits (toward zero). NVIDIA does not document which one cuBLAS uses for tf32; the
    two differ by at most one tf32 step. Overflow past the format's max carries into the
    exponent and gives inf, as a real cast would; NaN stays NaN.
    """
    mantissa_bits = check_count(mantissa_bits, "mantissa_bits", 0, example=10)  # np.int64 -> int (bit shifts)
    if not mantissa_bits <= 23:
        raise ValueError(f"mantissa_bits must be in [0, 23] for fp32 input, got {mantissa_bits}")
    if mode not in ("nearest", "truncate"):
        raise ValueError(f"mode must be 'nearest' or 'truncate', got {mode!r}")
    try:
        x32 = np.asarray(x, dtype=np.float32)
    except (TypeError, ValueError) as e:  # 'abc', None, a ragged list: numpy's message names no argument
        raise TypeError(f"x must be numbers (a float, list or array), got {x!r}: {e}") from None
    bits = x32.view(np.uint32).astype(np.uint64)  # 1 sign | 8 exponent | 23 mantissa bits
    drop = 23 - mantissa_bits  # low mantissa bits to remove
    if drop == 0:
        return x32.copy()
    if mode == "nearest":
        half = (1 << (drop - 1)) - 1  # just under half an ulp of the target format ...
        bits = bits + half + ((bits >> drop) & 1)  # ... plus 1 if the kept lsb is odd: ties-to-even
    mask = np.uint64(0xFFFFFFFF ^ ((1 << drop) - 1))
    out = (bits & mask).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x32), x32, out)


def _reals(x: Any, name: str = "x") -> np.ndarray:
    """``x`` as a float64 array; None, text, bools and complex numbers are refused, not made NaN or cut to .real."""
    try:
        arr = None if x is None or isinstance(x, (str, bytes)) else np.asarray(x)
    except (TypeError, ValueError):  # a ragged list
        arr = None
    ok = arr is not None and (arr.dtype.kind in "iuf" or (arr.dtype.kind == "V" and _is_ml_float(arr.dtype)))
    if not ok:
        got = f"{type(x).__name__} {x!r:.60}" if arr is None or arr.ndim == 0 else f"an array of dtype {arr.dtype}"
        raise TypeError(f"{name} must be real numbers (a float, list or array), got {got}"
                        + ("; pass x.real (or abs(x)) explicitly" if arr is not None and arr.dtype.kind == "c" else ""))
    return arr.astype(np.float64)


def _is_ml_float(dt: np.dtype) -> bool:
    try:  # ml_dtypes' floats (bfloat16, float8_*) have dtype kind "V"
        ml_dtypes.finfo(dt)
        return True
    except (TypeError, ValueError):
        return False


def round_to(x: Any, name: str) -> np.ndarray:
    """(Lab 04) ``x`` stored in format ``name`` and read back as float64.

    Floats round to nearest (ties to even); out-of-range values become inf, or NaN for fp8 e4m3
    (no inf). int8 has no scale of its own here: round to an integer, saturate to [-128, 127].
    """
    check_format(name)
    x64 = _reals(x)
    if name == "int8":
        return np.clip(np.rint(x64), -128, 127)
    with np.errstate(over="ignore"):  # overflow to inf is the point of the range demo
        if name == "tf32":
            return round_mantissa(x64.astype(np.float32), TF32_BITS[2]).astype(np.float64)
        return x64.astype(_DTYPES[name]).astype(np.float64)


def rounding_errors(value: float, formats: Sequence[str] = FORMATS) -> list[dict[str, Any]]:
    """(Lab 04) What each format stores for ``value``, with absolute and relative error."""
    value, rows = check_real(value, "value", hint="; e.g. rounding_errors(0.1)"), []
    for name in check_list(formats, "formats"):
        stored = float(round_to(value, name))
        err = abs(stored - value) if math.isfinite(stored) else math.inf
        rows.append({"format": name, "stored": stored, "abs error": err,
                     "rel error": err / abs(value) if value else err,
                     # int8's step is 1 in absolute terms: no relative bound, so no unit roundoff (shown as —)
                     "unit roundoff (eps/2)": None if format_info(name).exponent_bits == 0 else format_info(name).eps / 2})
    return rows


def _fate(x: float, stored: float, f: Format) -> str:
    if math.isnan(x):
        return "NaN has no int8 value (a real cast is undefined)" if f.name == "int8" else "NaN stays NaN"
    if math.isinf(x) and f.name != "int8":
        return "inf stays inf" if f.has_inf else "inf -> NaN (no inf in this format)"
    if f.name == "int8":
        if abs(x) > 127.5:
            return "saturates (int8 has no inf)"
        return "rounds to 0 (integer step 1: int8 needs a scale)" if stored == 0 and x else (
            "ok" if stored == x else "rounds to an integer")
    if math.isnan(stored):
        return "overflow -> NaN (no inf in this format)"
    if math.isinf(stored):
        return "overflow -> inf"
    if stored == 0.0 and x != 0.0:
        return "underflow -> 0"
    if f.smallest_normal is not None and abs(x) < f.smallest_normal:
        return "subnormal (fewer significant bits)"
    return "ok" if stored == x else "rounded"


def range_probe(values: Sequence[float], formats: Sequence[str] = FORMATS) -> list[dict[str, Any]]:
    """(Lab 04) For each value and format: what is stored and what happened (overflow, ...)."""
    rows, formats = [], [check_format(n) for n in check_list(formats, "formats")]
    for x in check_list(values, "values"):
        for name in formats:
            stored = float(round_to(x, name))
            rows.append({"value": float(x), "format": name, "stored": stored,
                         "what happened": _fate(float(x), stored, format_info(name))})
    return rows


def representable(name: str) -> np.ndarray:
    """(Lab 04) All finite non-negative values of a <=16-bit float format, sorted (enumerated)."""
    f = format_info(name)
    if name in ("fp32", "tf32", "int8"):
        raise ValueError(f"{name} has too many values (or is not a float) to enumerate; "
                         "use spacing() for fp32/tf32")
    codes = np.arange(2 ** (f.bits - 1), dtype=np.uint16 if f.bits == 16 else np.uint8)
    with np.errstate(invalid="ignore"):  # NaN bit patterns are dropped below
        vals = codes.view(_DTYPES[name]).astype(np.float64)  # sign bit 0: every +value
    return np.sort(vals[np.isfinite(vals)])


def spacing(name: str, x: Any) -> np.ndarray:
    """(Lab 04) Gap to the next representable value above |x| (the ulp), from the bit layout; NaN for NaN or inf.

    There is no "next value" above inf or NaN, so their gap is NaN (as numpy's np.spacing(np.inf)).
    """
    f = format_info(name)
    xs = _reals(x)
    ax = np.abs(xs)
    finite = np.isfinite(ax)
    out = finite & ((xs > 127) | (xs < -128) if name == "int8" else (ax > f.max))
    if out.any():  # its gap was made up from a binade the format does not have
        big, span = xs.reshape(-1)[np.flatnonzero(out)[0]], "[-128, 127]" if name == "int8" else f"+-{f.max:.3g}"
        raise ValueError(f"{big:g} exceeds {name}'s max {f.max:.3g}: it overflows there and has no gap; "
                         f"pass values within {span}")
    if name == "int8":
        return np.where(finite, 1.0, np.nan)
    safe = np.where(finite, np.maximum(ax, f.smallest_normal), 1.0)  # subnormals share the lowest binade
    gap = np.ldexp(1.0, (np.floor(np.log2(safe)) - f.mantissa_bits).astype(int))
    return np.where(finite, gap, np.nan)


# ------------------------------------------------------------------------- accumulation


def sequential_sum(values: np.ndarray, name: str) -> float:
    """(Lab 04) Left-to-right sum with every partial sum rounded to ``name`` (a narrow accumulator)."""
    dt, v = dtype_of(name), np.asarray(values)
    if v.ndim != 1:
        raise ValueError(f"values must be 1-D (the terms of one sum), got shape {v.shape}")
    if v.size == 0:
        return 0.0  # the empty sum
    return float(np.add.accumulate(v.astype(dt))[-1])  # ml_dtypes rounds per add


def accumulation_errors(lengths: Sequence[int], name: str = "bf16", seed: int = 0,
                        frameworks: Sequence[str] = ("jax", "torch"), torch_device: Any = "cpu",
                        trials: int = 3) -> list[dict[str, Any]]:
    """(Lab 04) Mean relative error vs float64 of length-n dot products of ``name`` inputs, per method.

    Inputs are uniform in [0, 1) and already rounded to ``name``, and the float64 reference uses
    those rounded inputs, so the error is accumulation (and output rounding) only; averaged over
    ``trials`` random draws. Methods: a narrow sequential accumulator (numpy + ml_dtypes: each
    product and partial sum rounded), ``jnp.dot`` returning ``name`` vs
    ``preferred_element_type=float32``, and ``torch.dot`` on ``name`` tensors vs on fp32 copies
    (fp32 accumulation dtype).
    """
    dt = dtype_of(check_format(name))
    if name == "int8":  # inputs in [0, 1) round to 0 in int8: every dot product, and the reference, is 0
        raise ValueError("accumulation_errors needs a float format: int8 has no scale here, so inputs in "
                         "[0, 1) all round to 0; use e.g. name='bf16' (int8 needs a scale: see recipes)")
    lengths = [check_count(n, f"lengths[{i}]", example=1024) for i, n in enumerate(check_list(lengths, "lengths"))]
    frameworks = check_list(frameworks, "frameworks")
    if set(frameworks) - {"jax", "torch"}:
        raise ValueError(f"frameworks must hold 'jax' and/or 'torch', got {frameworks}")
    trials = check_count(trials, "trials", example=3)
    rng = np.random.default_rng(check_count(seed, "seed", 0, example=0))
    errs: dict[tuple[int, str], list[float]] = {}
    for n in lengths:
        for _ in range(trials):
            a = rng.random(n).astype(dt)
            b = rng.random(n).astype(dt)
            ref = float(np.dot(a.astype(np.float64), b.astype(np.float64)))  # exact enough: n<2**30
            if ref == 0:  # every product rounded to 0 (only fp8 with n tiny): a relative error is undefined
                raise ValueError(f"all {n} products round to 0 in {name} (seed={seed}): the relative error is "
                                 "undefined; use a longer n or another seed")
            for method, v in _dots(a, b, name, frameworks, torch_device).items():
                errs.setdefault((int(n), method), []).append(abs(v - ref) / abs(ref))
    return [{"n": n, "method": m, "rel error": float(np.mean(e)), "trials": len(e)}
            for (n, m), e in errs.items()]


def _dots(a: np.ndarray, b: np.ndarray, name: str, frameworks: Sequence[str],
          torch_device: Any) -> dict[str, float]:
    got = {f"sequential {name} accumulator": sequential_sum(a.astype(np.float32) *
                                                              b.astype(np.float32), name)}
    if "jax" in frameworks:
        import jax.numpy as jnp

        ja, jb = jnp.asarray(a), jnp.asarray(b)
        got[f"jax dot, {name} out"] = float(jnp.dot(ja, jb))
        got["jax dot, preferred_element_type=fp32"] = float(
            jnp.dot(ja, jb, preferred_element_type=jnp.float32))
    if "torch" in frameworks:
        import torch

        ta = torch.from_numpy(a.astype(np.float32)).to(torch_device)
        tb = torch.from_numpy(b.astype(np.float32)).to(torch_device)
        tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(name, torch.float32)
        got[f"torch dot, {name} tensors"] = float(torch.dot(ta.to(tdt), tb.to(tdt)))
        got["torch dot, fp32 accumulation"] = float(torch.dot(ta, tb))
    return got
