"""labkit.precision.formats: the format table equals finfo; rounding and accumulation vs float64."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.runtime import hardware

from labkit.precision import formats as precision
from labkit.course.exercises.lab04 import round_to_bits  # independent float64 (frexp) reference

FLOATS = {"fp32": np.float32, "bf16": ml_dtypes.bfloat16, "fp16": np.float16,
          "fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}


@pytest.mark.parametrize("name", list(FLOATS))
def test_table_values_equal_finfo(name: str) -> None:
    fi = ml_dtypes.finfo(FLOATS[name])
    row = next(r for r in precision.format_table() if r["name"] == name)
    assert (row["bits"], row["exponent_bits"], row["mantissa_bits"]) == (fi.bits, fi.nexp, fi.nmant)
    assert row["max"] == float(fi.max) and row["eps"] == float(fi.eps)
    assert row["smallest_normal"] == float(fi.smallest_normal)
    assert row["smallest_subnormal"] == float(fi.smallest_subnormal)
    assert row["has_inf"] is (name != "fp8_e4m3")  # e4m3fn: finite only, overflow -> NaN


def test_known_values() -> None:
    assert precision.format_info("fp16").max == 65504.0
    assert precision.format_info("fp8_e4m3").max == 448.0
    assert precision.format_info("fp8_e5m2").max == 57344.0
    assert precision.format_info("bf16").eps == 2.0**-7


@pytest.mark.parametrize("name", ["fp32", "bf16", "fp16", "fp8_e5m2"])
def test_ieee_formula_matches_finfo(name: str) -> None:
    fi = ml_dtypes.finfo(FLOATS[name])
    assert precision.ieee_like(int(fi.nexp), int(fi.nmant)) == {
        "max": float(fi.max), "smallest_normal": float(fi.smallest_normal),
        "smallest_subnormal": float(fi.smallest_subnormal), "eps": float(fi.eps)}


def test_tf32_and_int8_rows() -> None:
    tf = precision.format_info("tf32")
    assert (tf.sign_bits, tf.exponent_bits, tf.mantissa_bits, tf.bits) == (1, 8, 10, 19)
    assert tf.max == (2 - 2.0**-10) * 2.0**127 and tf.smallest_normal == 2.0**-126
    assert tf.eps == 2.0**-10
    i8 = precision.format_info("int8")
    assert (i8.max, i8.eps, i8.has_inf) == (float(np.iinfo(np.int8).max), 1.0, False)


def test_native_chips_come_from_hardware() -> None:
    assert "TPU v5e" in precision.native_chips("bf16") and "NVIDIA T4" not in precision.native_chips("bf16")
    assert "TPU v5e" not in precision.native_chips("fp32")  # fp32 matmuls are bf16 passes there
    fp8 = {n for n, s in hardware.CHIPS.items() if s.peak_tflops.get("fp8") is not None}
    assert set(precision.native_chips("fp8_e4m3")) == fp8 == set(precision.native_chips("fp8_e5m2"))
    assert "NVIDIA H100 SXM" in fp8 and "NVIDIA A100 SXM 40GB" not in fp8
    assert precision.native_chips("tf32", ["NVIDIA T4", "NVIDIA A100 SXM 40GB"]) == ("NVIDIA A100 SXM 40GB",)


def test_unknown_format_lists_the_valid_ones() -> None:
    for call in (lambda: precision.format_info("fp4"), lambda: precision.round_to(1.0, "float8"),
                 lambda: precision.native_chips("e4m3")):
        with pytest.raises(precision.UnknownFormatError, match="valid formats are fp32, tf32, bf16"):
            call()


# ------------------------------------------------------------------------- rounding


@settings(max_examples=300, deadline=None)
@given(st.floats(width=32, allow_nan=True, allow_infinity=True))
def test_round_mantissa_7_bits_is_a_bf16_cast(x: float) -> None:
    got = precision.round_mantissa(np.float32(x), 7)
    want = np.float32(x).astype(ml_dtypes.bfloat16).astype(np.float32)
    assert (np.isnan(got) and np.isnan(want)) or got == want


def test_round_mantissa_bulk_and_edges() -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(200_000) * 10.0 ** rng.uniform(-44, 38, 200_000)).astype(np.float32)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, 3.3895e38, 3.4e38, 1e-45, 1.0 + 2.0**-8,
                      1.0 + 3 * 2.0**-8], np.float32)  # ties: 1 + half ulp -> 1; 1 + 1.5 ulp -> 1 + 2 ulp
    x = np.concatenate([x, edges])
    np.testing.assert_array_equal(precision.round_mantissa(x, 7),
                                  x.astype(ml_dtypes.bfloat16).astype(np.float32))


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=2.0**-125, max_value=2.0**126, width=32), st.booleans())
def test_tf32_rounding_vs_float64_reference(x: float, neg: bool) -> None:
    x = -x if neg else x
    got = float(precision.round_mantissa(np.float32(x), 10))
    assert got == round_to_bits(float(np.float32(x)), 10)
    assert abs(got - x) <= 2.0**-11 * abs(x)  # unit roundoff of a 10-bit mantissa


def test_truncate_mode_chops_toward_zero() -> None:
    x = np.float32(1.0 + 2.0**-10 * 0.999)  # just under one tf32 step above 1
    assert precision.round_mantissa(x, 10, "truncate") == 1.0
    assert precision.round_mantissa(x, 10) == np.float32(1.0 + 2.0**-10)
    assert precision.round_mantissa(-x, 10, "truncate") == -1.0
    with pytest.raises(ValueError, match="mode"):
        precision.round_mantissa(x, 10, "up")
    with pytest.raises(ValueError, match="mantissa_bits"):
        precision.round_mantissa(x, 24)


@pytest.mark.parametrize("name", ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2"])
def test_round_to_and_rounding_errors_vs_float64(name: str) -> None:
    f = precision.format_info(name)
    rng = np.random.default_rng(1)
    # normal range only, below max: round-to-nearest with m bits, computed in float64 by frexp
    xs = np.exp(rng.uniform(math.log(f.smallest_normal), math.log(f.max / 2), 2000))
    xs *= rng.choice([-1, 1], xs.size)
    got = precision.round_to(xs, name)
    want = np.array([round_to_bits(float(v), f.mantissa_bits) for v in xs])
    np.testing.assert_array_equal(got, want)
    for v in xs[:50]:
        row = next(r for r in precision.rounding_errors(float(v), [name]))
        assert row["rel error"] <= f.eps / 2 and row["stored"] == round_to_bits(float(v), f.mantissa_bits)


def test_range_probe_overflow_underflow() -> None:
    rows = {(r["value"], r["format"]): r for r in precision.range_probe([1e-8, 1e5, 500.0, 1e39])}
    assert math.isinf(rows[(1e5, "fp16")]["stored"]) and rows[(1e5, "fp16")]["what happened"] == "overflow -> inf"
    assert math.isnan(rows[(500.0, "fp8_e4m3")]["stored"]) and "NaN" in rows[(500.0, "fp8_e4m3")]["what happened"]
    assert rows[(500.0, "fp8_e5m2")]["stored"] == 512.0
    assert rows[(1e-8, "fp16")]["stored"] == 0.0 and rows[(1e-8, "fp16")]["what happened"] == "underflow -> 0"
    assert rows[(1e-8, "bf16")]["stored"] > 0 and math.isfinite(rows[(1e5, "bf16")]["stored"])
    assert math.isinf(rows[(1e39, "fp32")]["stored"]) and math.isinf(rows[(1e39, "bf16")]["stored"])
    assert rows[(1e5, "int8")]["stored"] == 127 and "saturates" in rows[(1e5, "int8")]["what happened"]
    sub = precision.range_probe([1e-6], ["fp16"])[0]  # between fp16's subnormal min and normal min
    assert sub["what happened"] == "subnormal (fewer significant bits)"


@pytest.mark.parametrize("name, count", [("fp8_e4m3", 127), ("fp8_e5m2", 124), ("fp16", 31744), ("bf16", 32640)])
def test_representable_values_and_spacing(name: str, count: int) -> None:
    vals = precision.representable(name)  # 0, subnormals, normals up to max (no inf / NaN)
    assert len(vals) == count and vals[0] == 0.0 and vals[-1] == precision.format_info(name).max
    assert vals[1] == precision.format_info(name).smallest_subnormal
    np.testing.assert_array_equal(np.diff(vals[1:]), precision.spacing(name, vals[1:-1]))
    with pytest.raises(ValueError, match="too many values"):
        precision.representable("fp32")


# --------------------------------------------------------------------- accumulation


def test_sequential_sum_rounds_every_partial_sum() -> None:
    rng = np.random.default_rng(2)
    v = rng.random(300).astype(ml_dtypes.bfloat16).astype(np.float64)
    acc = 0.0
    for t in v:  # two bf16 values add exactly in float64; then round to 7 bits
        acc = round_to_bits(acc + t, 7)
    assert precision.sequential_sum(v, "bf16") == acc
    assert abs(acc - v.sum()) > 0  # and it is not the exact sum


def test_accumulation_errors_vs_float64() -> None:
    rows = precision.accumulation_errors([64, 4096, 65536], "bf16", trials=2)
    err = {(r["method"], r["n"]): r["rel error"] for r in rows}
    for n in (64, 4096, 65536):
        assert err[("jax dot, preferred_element_type=fp32", n)] < 1e-6
        assert err[("torch dot, fp32 accumulation", n)] < 1e-6
        assert err[("jax dot, bf16 out", n)] <= 2.0**-8  # one final rounding to bf16
    seq = "sequential bf16 accumulator"
    assert err[(seq, 64)] < err[(seq, 4096)] < err[(seq, 65536)]  # grows with length ...
    assert err[(seq, 65536)] > 0.9  # ... until the sum stalls at 256-ish: most of 16384 lost
    with pytest.raises(precision.UnknownFormatError):
        precision.accumulation_errors([8], "bf17")


# ------------------------------------------------------------ bad input (issues #12, #18)


@pytest.mark.parametrize(("call", "err", "match"), [
    (lambda: precision.rounding_errors(0.1, formats="bf16"), TypeError, r"formats must be a list, e.g. \['bf16'\]"),
    (lambda: precision.rounding_errors("0.1"), TypeError, "value must be a finite number"),
    (lambda: precision.range_probe(1e5, ["bf16"]), TypeError, r"values must be a list, e.g. \[100000.0\]"),
    (lambda: precision.native_chips("bf16", "NVIDIA T4"), TypeError, r"chips must be a list, e.g. \['NVIDIA T4'\]"),
    (lambda: precision.format_info("bf16", chips=["bogus"]), ValueError, r"unknown chip name\(s\) \['bogus'\].*NVIDIA T4"),
    (lambda: precision.format_table(["TPU v5e", "H800X"]), ValueError, r"\['H800X'\]"),
    (lambda: precision.check_format(["bf16"]), TypeError, r"a format name such as 'bf16'.*got list \['bf16'\]"),
    (lambda: precision.round_mantissa(1.0, 2.5), TypeError, "mantissa_bits must be a whole number >= 0, got 2.5"),
    (lambda: precision.round_mantissa("abc", 10), TypeError, r"x must be numbers \(a float, list or array\), got 'abc'"),
    (lambda: precision.sequential_sum(np.ones((2, 2)), "bf16"), ValueError, r"values must be 1-D.*\(2, 2\)"),
    (lambda: precision.accumulation_errors([0], frameworks=()), ValueError, r"lengths\[0\] must be >= 1, got 0"),
    (lambda: precision.accumulation_errors([-1], frameworks=()), ValueError, r"lengths\[0\] must be >= 1, got -1"),
    (lambda: precision.accumulation_errors([8], trials=0, frameworks=()), ValueError, "trials must be >= 1, got 0"),
    (lambda: precision.accumulation_errors([8], "int8", frameworks=()), ValueError, "needs a float format.*int8"),
    (lambda: precision.accumulation_errors([8], frameworks="torch"), TypeError, r"frameworks must be a list"),
    (lambda: precision.accumulation_errors([8], frameworks=("numpy",)), ValueError, "'jax' and/or 'torch'"),
    # ieee_like: a negative mantissa gave max 0.0, 1 exponent bit a smallest normal above the max,
    # 0 / -1 / 8.0 a raw ldexp error, 64 an OverflowError
    (lambda: precision.ieee_like(8, -1), ValueError, "mantissa_bits must be >= 0, got -1"),
    (lambda: precision.ieee_like(1, 7), ValueError,
     r"exponent_bits must be an integer in 2..11, mantissa_bits in 0..52 .*got exponent_bits=1, mantissa_bits=7"),
    (lambda: precision.ieee_like(0, 7), ValueError, "exponent_bits must be an integer in 2..11.*got exponent_bits=0"),
    (lambda: precision.ieee_like(-1, 7), ValueError, "exponent_bits must be >= 0, got -1"),
    (lambda: precision.ieee_like(8.0, 7), TypeError, "exponent_bits must be a whole number >= 0, got 8.0"),
    (lambda: precision.ieee_like(64, 7), ValueError, "exponent_bits must be an integer in 2..11.*got exponent_bits=64"),
    (lambda: precision.ieee_like(11, 53), ValueError, "mantissa_bits in 0..52.*got exponent_bits=11, mantissa_bits=53"),
    (lambda: precision.ieee_like(8, True), TypeError, "mantissa_bits must be a whole number >= 0, got True"),
    # round_to: None was NaN, a complex array lost its imaginary part
    (lambda: precision.round_to(None, "bf16"), TypeError,
     r"x must be real numbers \(a float, list or array\), got NoneType None"),
    (lambda: precision.round_to(1 + 2j, "bf16"), TypeError,
     r"x must be real numbers.*got complex \(1\+2j\); pass x.real"),
    (lambda: precision.round_to(np.array([1 + 2j]), "fp16"), TypeError, "x must be real numbers.*dtype complex128"),
    (lambda: precision.round_to("0.1", "bf16"), TypeError, "x must be real numbers.*got str '0.1'"),
    (lambda: precision.round_to([1.0, [2.0]], "bf16"), TypeError, r"x must be real numbers.*got list \[1.0, \[2.0\]\]"),
    (lambda: precision.range_probe([None], ["bf16"]), TypeError, "x must be real numbers.*got NoneType None"),
    # spacing: a value above the max got the gap of a binade the format does not have (5.3e36 for 1e39 in bf16)
    (lambda: precision.spacing("bf16", 1e39), ValueError, r"1e\+39 exceeds bf16's max 3.39e\+38"),
    (lambda: precision.spacing("fp16", [1.0, -7e4]), ValueError, r"-70000 exceeds fp16's max 6.55e\+04"),
    (lambda: precision.spacing("int8", 300), ValueError, r"300 exceeds int8's max 127.*\[-128, 127\]"),
    (lambda: precision.spacing("bf16", None), TypeError, "x must be real numbers.*got NoneType None"),
])
def test_bad_input_is_refused_with_the_value_and_the_fix(call, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        call()


def test_edge_values_get_truthful_answers() -> None:
    assert precision.sequential_sum(np.array([]), "bf16") == 0.0  # the empty sum
    assert precision.native_chips("bf16", ["TPU v5e", "NVIDIA T4"]) == ("TPU v5e",)
    got = precision.spacing("bf16", [np.nan, np.inf, -np.inf, 1.0])  # no next value above inf / NaN
    assert np.isnan(got[:3]).all() and got[3] == 2.0**-7
    assert np.isnan(precision.spacing("int8", np.nan)) and precision.spacing("int8", 5.0) == 1.0
    fate = {(r["value"] if r["value"] == r["value"] else "nan", r["format"]): r["what happened"]
            for r in precision.range_probe([np.nan, np.inf], ["int8", "bf16", "fp8_e4m3"])}
    assert fate[("nan", "int8")].startswith("NaN has no int8 value") and fate[("nan", "bf16")] == "NaN stays NaN"
    assert fate[(np.inf, "bf16")] == "inf stays inf" and "no inf" in fate[(np.inf, "fp8_e4m3")]
    assert precision.round_mantissa(1.0, np.int64(10)) == 1.0
    assert precision.rounding_errors(np.float32(0.5), ["bf16"])[0]["abs error"] == 0.0
    # int8's step is absolute (1), not relative: the table showed "unit roundoff (eps/2) 0.5" beside 0.1's 100% error
    assert precision.rounding_errors(0.1, ["int8", "fp16"])[0]["unit roundoff (eps/2)"] is None
    assert precision.rounding_errors(0.1, ["int8", "fp16"])[1]["unit roundoff (eps/2)"] == 2.0**-11
    assert precision.ieee_like(np.int64(11), np.int64(52))["max"] == float(np.finfo(np.float64).max)  # fp64: the top
    assert precision.ieee_like(2, 0)["eps"] == 1.0  # the smallest layout allowed
    bf = precision.format_info("bf16").max
    assert precision.spacing("bf16", [bf, -bf])[0] == 2.0 ** (127 - 7)  # the max itself has the top binade's gap
    assert precision.spacing("int8", -128) == 1.0
    as_bf16 = np.array([1.1, 3.0], dtype=ml_dtypes.bfloat16)  # ml_dtypes arrays (dtype kind "V") are real numbers
    assert precision.round_to(as_bf16, "fp16").tolist() == [float(as_bf16[0]), 3.0]
    assert precision.round_to(np.int64(3), "bf16") == 3.0
