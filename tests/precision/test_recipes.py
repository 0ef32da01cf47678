"""labkit.precision.recipes (Lab 04): fp8 current / delayed / block scaling against float64, with stated bounds.

Error bound: e4m3 keeps 3 fraction bits, so a correctly rounded value in the normal range is off by at
most u = 2^-4 relative. Each product a*b is then off by at most 2u + u^2; with independent rounding
errors the relative (Frobenius) error of a random matmul is about their RMS, sqrt(2/3) u ~ 0.05, and
never near the single-product worst case. We check ERR_LO < error < ERR_HI = 2u = 0.125 (ERR_LO = u/4:
the cast really happened).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from labkit.precision import recipes as R

U = 2.0**-4  # e4m3 unit roundoff
ERR_LO, ERR_HI = U / 4, 2 * U


def _xw(seed: int = 0, m: int = 64, k: int = 512, n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def test_each_recipe_against_float64_within_the_e4m3_bound() -> None:
    x, w = _xw()
    history = [_xw(s)[0] for s in range(1, 5)]  # earlier steps from the same distribution
    errs = R.recipe_errors(x, w, history)
    assert set(errs) == set(R.RECIPES)
    for recipe, e in errs.items():
        assert ERR_LO < e < ERR_HI, (recipe, e)
        assert abs(e - math.sqrt(2 / 3) * U) < 0.5 * U, (recipe, e)  # about the RMS estimate
    tiny = R.recipe_errors(x * 1e-6, w * 1e-6, [h * 1e-6 for h in history], [w * 1e-6] * 4)
    assert tiny["current"] == pytest.approx(errs["current"], rel=1e-2)  # scales make magnitude irrelevant
    s = 2.0**-20  # a power of two: E8M0 block scales absorb it exactly
    assert R.recipe_errors(x * s, w * s, history)["block"] == pytest.approx(errs["block"], rel=1e-9)


def test_delayed_scaling_follows_its_amax_history() -> None:
    d = R.DelayedScaling(history_len=3)
    assert d.scale("x", R.E4M3) == 1.0  # no history yet: TE starts from scale 1
    for amax, want in ((1.0, 448 / 1), (4.0, 448 / 4), (2.0, 448 / 4), (1.0, 448 / 4), (1.0, 448 / 2), (1.0, 448 / 1)):
        d.observe("x", amax)
        assert d.scale("x", R.E4M3) == want  # max over the last 3 amaxes; 4 falls out after 3 more
    assert d.scale("w", R.E4M3) == 1.0  # histories are per tensor
    recent = R.DelayedScaling(history_len=3, algo="most_recent")
    for amax in (4.0, 2.0):
        recent.observe("x", amax)
    assert recent.scale("x", R.E5M2) == 57344 / 2
    assert R.DelayedScaling(margin=1).scale("x", R.E4M3) == 1.0


def test_delayed_scaling_clips_a_spike_then_adapts() -> None:
    d = R.DelayedScaling(history_len=4)
    d.observe("x", 1.0)
    spike = np.array([10.0, -10.0, 0.5], np.float32)  # 10x the amax the history has seen
    out = d.quantize(spike, "x")
    assert list(out[:2]) == [1.0, -1.0] and out[2] == 0.5  # saturated at 448 / scale = 1.0, no NaN
    assert d.scale("x", R.E4M3) == pytest.approx(44.8)  # the spike's amax is now in the history
    assert R.quantize_current(spike)[0] == 10.0  # current scaling fits it at once


def test_block_scaling_beats_per_tensor_on_a_tensor_with_outliers() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 1024)).astype(np.float32)
    idx = rng.choice(x.size, 8, replace=False)
    x.flat[idx] = 1e5  # beyond e4m3's normal range (448 / 2^-6 = 28672) times the typical |x|
    ordinary = np.ones(x.size, bool)
    ordinary[idx] = False
    err = {name: R.rel_err(q.ravel()[ordinary], x.ravel()[ordinary])
           for name, q in (("tensor", R.quantize_current(x)), ("block", R.quantize_block(x)))}
    assert err["block"] < ERR_HI / 2 < err["tensor"], err  # the ordinary values fell into subnormals
    e = R.block_exponents(x)
    assert e.shape == (64, 1024 // R.BLOCK) and e.dtype == np.int32
    clean = x[:, :R.BLOCK] if not (np.abs(x[:, :R.BLOCK]) > 1e4).any() else x[:, -R.BLOCK:]
    scaled = np.abs(clean) / 2.0 ** R.block_exponents(clean)  # each block's amax lands in (max/2, max]
    assert np.all(scaled.max(axis=1) <= 448) and np.all(scaled.max(axis=1) > 224)


def test_block_handles_ragged_axes_zeros_and_the_e8m0_range() -> None:
    x = np.zeros((3, 40), np.float32)
    x[0, 35] = 3.0
    q = R.quantize_block(x, axis=1)
    assert q.shape == x.shape and q[0, 35] == 3.0 and np.count_nonzero(q) == 1
    assert R.block_exponents(np.full((1, 32), 1e-38, np.float32)).min() >= R.E8M0_EXP[0]
    np.testing.assert_array_equal(R.quantize_block(x.T, axis=0), q.T)


def test_casts_saturate_where_ml_dtypes_gives_nan_or_inf() -> None:
    big = np.array([500.0, -1e6, 448.0], np.float32)
    plain = R.plain_cast(big, R.E4M3).astype(np.float32)
    assert np.isnan(plain[0]) and np.isnan(plain[1]) and plain[2] == 448  # e4m3fn has no inf
    assert list(R.saturating_cast(big, R.E4M3).astype(np.float32)) == [448, -448, 448]
    assert np.isinf(R.plain_cast(np.array([1e6], np.float32), R.E5M2).astype(np.float32)[0])
    assert R.saturating_cast(np.array([1e6], np.float32), R.E5M2).astype(np.float32)[0] == 57344
    assert R.saturating_cast(big, R.E4M3).dtype == ml_dtypes.float8_e4m3fn
    with pytest.raises(ValueError, match="fp8 format"):
        R.saturating_cast(big, "bf16")
    with pytest.raises(ValueError, match="unknown fp8 recipe"):
        R.quantize(big, "nvfp4")
    with pytest.raises(ValueError, match="amax history"):
        R.quantize(big, "delayed")


def test_narrow_accumulation_grows_with_k_and_promotion_stops_it() -> None:
    rows = {r["K"]: r for r in R.accumulation_errors((256, 4096), m=32)}
    assert rows[4096]["narrow"] > 4 * rows[256]["narrow"]  # truncation errors pile up along K
    assert rows[4096]["promoted"] < rows[4096]["narrow"] / 10  # every 128: the pile restarts in fp32
    assert rows[4096]["promoted"] < 2 * rows[256]["promoted"]
    assert all(r["fp32"] < 1e-6 for r in rows.values())
    a, b = _xw(1, 8, 256, 8)
    np.testing.assert_allclose(R.limited_accumulation(a, b, acc_bits=23), a.astype(np.float64) @ b, rtol=1e-5)
