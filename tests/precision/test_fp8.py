"""labkit.precision.fp8: which chips have fp8, scaled quantization, and the e4m3/e5m2 matmul vs numpy."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from labkit.measure import bench
from labkit.precision import fp8
from labkit.runtime import hardware


def test_fp8_chips_come_from_the_spec_table() -> None:
    chips = fp8.fp8_chips()
    assert {"NVIDIA H100 SXM", "NVIDIA H200 SXM", "NVIDIA L4"} <= set(chips)
    assert not {"NVIDIA T4", "NVIDIA A100 SXM 80GB", "TPU v5e"} & set(chips)
    assert fp8.fp8_native("NVIDIA H100 80GB HBM3") and not fp8.fp8_native("Tesla T4")


@pytest.mark.parametrize("chip, named", [("Tesla T4", "NVIDIA T4"), ("TPU v5 lite", "TPU v5e"),
                                         ("Intel(R) Xeon(R) Processor", "Intel(R) Xeon(R) Processor")])
def test_fp8_on_a_chip_without_it_names_the_chip_and_where_it_runs(chip: str, named: str) -> None:
    if hardware.lookup(chip) is None and "Xeon" not in chip:
        pytest.skip(f"{chip!r} is not a name labkit.runtime.hardware recognises")
    with pytest.raises(fp8.Fp8UnsupportedError) as e:
        fp8.require_fp8(chip)
    msg = str(e.value)
    assert named in msg and "NVIDIA H100 SXM" in msg and "NVIDIA L4" in msg and "emulated" in msg
    assert isinstance(e.value, hardware.UnsupportedDtypeError)
    assert fp8.status(chip).startswith("emulated fp8")
    assert fp8.require_fp8("NVIDIA H100 80GB HBM3").name == "NVIDIA H100 SXM"


def test_quantize_scales_amax_to_max_and_round_trips() -> None:
    x = np.random.default_rng(0).standard_normal(1000) * 1e-3
    for fmt, fmax, eps in (("fp8_e4m3", 448.0, 2.0**-3), ("fp8_e5m2", 57344.0, 2.0**-2)):
        q, s = fp8.quantize(x, fmt)
        assert q.dtype == (ml_dtypes.float8_e4m3fn if fmt == "fp8_e4m3" else ml_dtypes.float8_e5m2)
        assert float(np.abs(q.astype(np.float32)).max()) == fmax and s == pytest.approx(fmax / np.abs(x).max())
        back = fp8.dequantize(q, s).astype(np.float64)
        normal = np.abs(x * s) >= 2.0 ** -6  # normal range of both formats after scaling
        assert np.all(np.abs(back - x)[normal] <= eps / 2 * np.abs(x)[normal] * (1 + 1e-6))
    assert fp8.quantization_error(x, "fp8_e4m3", scaled=False) > 0.3  # 1e-3 is below e4m3's normals
    assert fp8.quantization_error(x, "fp8_e4m3") < 0.05
    q, s = fp8.quantize(np.array([1e6, -1e6, 1.0]), "fp8_e4m3", scaled=False)  # saturates, no NaN
    assert s == 1.0 and list(q.astype(np.float32)[:2]) == [448.0, -448.0]
    with pytest.raises(ValueError, match="needs an fp8 format"):
        fp8.quantize(x, "bf16")


def _emulated(x: np.ndarray, fmt: str) -> np.ndarray:
    return fp8.dequantize(*fp8.quantize(x, fmt)).astype(np.float64)


def test_fp8_matmul_and_grads_equal_numpy_emulation() -> None:
    rng = np.random.default_rng(1)
    x, w, g = (rng.standard_normal(s).astype(np.float32) for s in ((16, 64), (64, 8), (16, 8)))
    y, vjp = jax.vjp(fp8.fp8_matmul, jnp.asarray(x), jnp.asarray(w))
    dx, dw = vjp(jnp.asarray(g))
    xq, wq, gq = _emulated(x, "fp8_e4m3"), _emulated(w, "fp8_e4m3"), _emulated(g, "fp8_e5m2")
    np.testing.assert_allclose(np.asarray(y), xq @ wq, rtol=1e-5, atol=1e-5)  # fp32 accumulation
    np.testing.assert_allclose(np.asarray(dx), gq @ wq.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(dw), xq.T @ gq, rtol=1e-5, atol=1e-5)
    assert y.dtype == jnp.float32


def test_matmul_errors_are_fp8_sized() -> None:
    e = fp8.matmul_errors(64, 256, 64, seed=0)
    assert 0.005 < e["y (e4m3 x e4m3)"] < 0.06  # ~ e4m3 unit roundoff 2^-4 / sqrt-ish averaging
    assert e["y (e4m3 x e4m3)"] < e["dx (e5m2 x e4m3)"] < 0.1  # e5m2 has one mantissa bit less
    small = fp8.matmul_errors(64, 256, 64, seed=0, std=1e-4)  # the scales make magnitude irrelevant
    assert small["y (e4m3 x e4m3)"] == pytest.approx(e["y (e4m3 x e4m3)"], rel=1e-3)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matmul_errors_match_the_inputs_rounding_errors_added_in_quadrature(seed: int) -> None:
    """Closed form (review): y's error is sqrt(e_x^2 + e_w^2) of the operands' own quantization errors, dx's
    sqrt(e_g^2 + e_w^2) with g in e5m2 -- a reference the lab asserts against, not a loose bound."""
    got, want = fp8.matmul_errors(64, 256, 64, seed=seed), fp8.predicted_matmul_errors(64, 256, 64, seed=seed)
    assert got.keys() == want.keys()
    for key in got:
        assert got[key] == pytest.approx(want[key], rel=0.05), key
    x, w, _ = fp8._operands(64, 256, 64, seed, 1.0)
    assert want["y (e4m3 x e4m3)"] == pytest.approx(math.hypot(fp8.quantization_error(x), fp8.quantization_error(w)))


def test_the_gemm_alone_equals_the_full_fp8_matmul() -> None:
    rng = np.random.default_rng(2)
    x, w = (jnp.asarray(rng.standard_normal(s).astype(np.float32)) for s in ((16, 64), (64, 8)))
    qx, sx = fp8.quantize_jax(x)
    qw, sw = fp8.quantize_jax(w)
    assert qx.dtype == jnp.float8_e4m3fn and float(jnp.abs(qx.astype(jnp.float32)).max()) == 448.0
    np.testing.assert_array_equal(np.asarray(fp8.scaled_dot(qx, sx, qw, sw)), np.asarray(fp8.fp8_matmul(x, w)))


def _timing(median_ms: float, iqr_ms: float = 0.0, label: str = "") -> bench.Timing:
    """Five repeats with the given median and IQR (quartiles of (m-h, m-h, m, m+h, m+h) are m -/+ h), in ms."""
    m, h = median_ms * 1e-3, iqr_ms * 1e-3 / 2
    return bench.Timing((m - h, m - h, m, m + h, m + h), warmup=1, label=label)


def test_speed_summary_ratios_match_hand_computation() -> None:
    s = fp8.speed_summary(_timing(4.0), _timing(2.5), _timing(2.0), spec_ratio=1670.5 / 835.5)
    assert s.speedup == pytest.approx(4.0 / 2.5) and s.gemm_speedup == pytest.approx(4.0 / 2.0)  # 1.6x, 2x
    assert s.cost_s == pytest.approx(0.5e-3) and s.jitter_s == pytest.approx(0.0, abs=1e-12)
    assert str(s) == ("spec fp8/bf16: 2.0x; measured 1.60x with quantization, 2.00x for the GEMM alone; "
                      "quantizing costs 0.500 ms")
    plain = fp8.speed_summary(4e-3, 2.5e-3, 2e-3, 2.0)  # plain seconds: no spread
    assert (plain.speedup, plain.gemm_speedup, plain.case) == (pytest.approx(1.6), pytest.approx(2.0), "cost")


@pytest.mark.parametrize("fp8_ms, dot_iqr_ms, case, words", [
    (2.5, 0.2, "cost", "quantizing costs 0.500 ms"),  # 0.5 ms extra > 0.2 ms spread
    (2.1, 0.2, "noise", "inside the repeats' spread (+0.100 ms)"),  # 0.1 ms extra, 0.2 ms spread
    (1.9, 0.2, "noise", "inside the repeats' spread (-0.100 ms)"),
    (1.5, 0.2, "faster", "ran 0.500 ms faster: XLA compiled the two programs differently"),  # -0.5 ms
])
def test_speed_summary_judges_the_quantization_cost_against_the_jitter(fp8_ms: float, dot_iqr_ms: float,
                                                                      case: str, words: str) -> None:
    s = fp8.speed_summary(_timing(4.0), _timing(fp8_ms), _timing(2.0, dot_iqr_ms), 2.0)
    assert s.case == case and words in s.verdict and s.verdict in str(s)
    assert s.cost_s == pytest.approx((fp8_ms - 2.0) * 1e-3) and s.jitter_s == pytest.approx(dot_iqr_ms * 1e-3)
    no_jitter = fp8.speed_summary(_timing(4.0), _timing(fp8_ms), _timing(2.0), 2.0)  # same means, no spread
    assert no_jitter.case == ("cost" if fp8_ms > 2.0 else "faster")


def test_speed_summary_bad_input_names_the_value() -> None:
    with pytest.raises(ValueError, match=r"t_fp8 \(s\) > 0 .*got -0.001"):
        fp8.speed_summary(4e-3, -1e-3, 2e-3, 2.0)
    with pytest.raises(ValueError, match=r"t_bf16 \(bf16\) median time \(s\) > 0 .*got 0.0"):
        fp8.speed_summary(bench.Timing((0.0, 0.0, 0.0), 1, "bf16"), 2e-3, 2e-3, 2.0)
    with pytest.raises(ValueError, match=r"t_dot \(s\) > 0 .*got nan"):
        fp8.speed_summary(4e-3, 2e-3, float("nan"), 2.0)
    with pytest.raises(ValueError, match=r"spec_ratio .*> 0 .*got 0"):
        fp8.speed_summary(4e-3, 2e-3, 2e-3, 0)


def test_fp8_quantizers_refuse_what_they_cannot_scale() -> None:
    """A probe found a bf16 'quantization' (scale 3.4e38), an inf giving scale 0, and NaN errors for std=0."""
    x = np.array([[1.0, -2.0], [np.inf, 0.5]], np.float32)
    with pytest.raises(ValueError, match=r"quantize_jax: x has a non-finite value \(inf\) at index \(1, 0\)"):
        fp8.quantize_jax(jnp.asarray(x))
    with pytest.raises(ValueError, match=r"quantize: x has a non-finite value \(inf\) at index \(1, 0\)"):
        fp8.quantize(x)
    with pytest.raises(ValueError, match="quantize_jax needs an fp8 format .* got 'bf16'"):
        fp8.quantize_jax(jnp.ones((2, 2)), "bf16")
    with pytest.raises(ValueError, match="non-empty float array, got int32"):
        fp8.quantize_jax(jnp.arange(4))
    with pytest.raises(ValueError, match=r"all zeros \(shape \(3,\)\)"):
        fp8.quantization_error(np.zeros(3))
    with pytest.raises(ValueError, match="std must be a finite number > 0, got 0"):
        fp8.matmul_errors(16, 16, 16, std=0)
    with pytest.raises(ValueError, match="m must be >= 1, got 0"):
        fp8.matmul_errors(0, 16, 16)
    q, s = jax.jit(fp8.quantize_jax)(jnp.ones((2, 2)))  # under jit the values are not checked (traced), still works
    assert float(s) == pytest.approx(448.0)


def test_quantize_jax_takes_the_bf16_operands_of_labs_fp8_timing_cell() -> None:
    """Lab 04's GPU-only fp8 cell quantizes bf16 operands: an ml_dtypes type that np.floating does not cover."""
    x = jax.random.normal(jax.random.key(0), (16, 16), jnp.bfloat16)
    q, s = fp8.quantize_jax(x)
    assert q.dtype == jnp.float8_e4m3fn
    assert float(s) == pytest.approx(448.0 / float(jnp.max(jnp.abs(x.astype(jnp.float32)))))
    for dt in (jnp.float16, jnp.float8_e5m2):
        assert fp8.quantize_jax(jnp.ones((2, 2), dt))[0].dtype == jnp.float8_e4m3fn


def test_fp8_on_an_unlisted_chip_says_it_is_unlisted_and_how_to_time_it() -> None:
    # A Blackwell runtime reports "NVIDIA B200": fp8 hardware, but not in the spec table, so nothing is timed.
    assert hardware.lookup("NVIDIA B200") is None
    with pytest.raises(fp8.Fp8UnsupportedError, match=r"'NVIDIA B200' is not in labkit.runtime.hardware") as e:
        fp8.require_fp8("NVIDIA B200")
    assert "does not list yet" in str(e.value) and "labkit.runtime.hardware.CHIPS" in str(e.value)
    assert "NVIDIA H100 SXM" in str(e.value) and fp8.status("NVIDIA B200").startswith("emulated fp8")
