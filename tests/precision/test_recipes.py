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


def test_rowwise_is_one_power_of_two_scale_per_row_by_hand() -> None:
    x = np.array([[1.0, -3.0, 0.5, 2.0], [100.0, 7.0, -1.0, 0.25]], np.float32)
    q = R.quantize_rowwise(x, axis=1)
    # row amaxes 3 and 100: dequantising multipliers 2^ceil(log2(amax / 448)) = 2^-7 and 2^-2
    want = [ml_dtypes.float8_e4m3fn(v / 2.0**-7).astype(np.float64) * 2.0**-7 for v in x[0]]
    np.testing.assert_array_equal(q[0], want)
    np.testing.assert_array_equal(q[1], [float(ml_dtypes.float8_e4m3fn(v / 0.25)) * 0.25 for v in x[1]])
    np.testing.assert_array_equal(q, R.quantize_block(x, block=4, axis=1))  # a block the whole row long
    np.testing.assert_array_equal(R.quantize_rowwise(x.T, axis=0), q.T)  # a weight: one scale per column
    assert np.array_equal(R.quantize(x, "rowwise", axis=1), q)


def test_outlier_tokens_spare_rowwise_and_outlier_channels_do_not() -> None:
    rng = np.random.default_rng(3)
    w = rng.standard_normal((256, 32)).astype(np.float32)
    xt, rows = R.outlier_tokens(64, 256, seed=0, factor=1e5)
    tok = R.recipe_errors(xt, w, [], rows=rows)
    # a token's own scale: the ordinary rows keep e4m3's accuracy; one scale for the tensor crushes them
    assert tok["rowwise"] < ERR_HI < tok["current"] and tok["block"] < ERR_HI
    w = rng.standard_normal((1024, 32)).astype(np.float32)  # 32 blocks per row: 4 outliers spoil at most 4
    xc, cols = R.outlier_channels(64, 1024, seed=0, factor=1e5)
    assert cols.size == 1020 and np.all(np.abs(xc[:, cols]) < 10)  # the 4 outliers are whole columns, all else N(0, 1)
    ch = R.recipe_errors(xc, w, [], channels=cols)
    # 1e5x channels in every row: every row's scale leaves its ordinary values ~2e-3, among e4m3's subnormals
    # (steps of 2^-9 ~ 2e-3), so per row is as bad as per tensor; a block spoils only its outlier's 31 neighbours
    assert ch["rowwise"] > 2 * ERR_HI and ch["current"] > 2 * ERR_HI
    assert ch["block"] < ch["rowwise"] / 3
    same = R.recipe_errors(xc, w, [], channels=np.arange(1024))
    assert same == R.recipe_errors(xc, w, [])  # every channel: the plain matmul error


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


def test_the_accumulation_model_gets_e4m3_values_and_an_exact_reference() -> None:
    """Review: the inputs were q / s with a scale that is no power of two -- not e4m3 values -- so the "fp32"
    column (2.8e-7) held input rounding too. On e4m3 codes the products are exact and fp32 only adds its sums'."""
    codes = R.e4m3_codes(np.random.default_rng(0).standard_normal((8, 256)))
    assert np.array_equal(codes, codes.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)) and np.abs(codes).max() == 448
    rows = {r["K"]: r for r in R.accumulation_errors((256, 4096), m=32)}
    assert all(r["fp32"] < 1e-7 for r in rows.values())  # fp32 sums alone (~2e-8 to 6e-8); q / s inputs gave 2.8e-7
    one = R.limited_accumulation(codes[:, :32], codes[:, :32].T, acc_bits=23, rounding="nearest")  # one chunk: exact
    np.testing.assert_array_equal(one, np.float64(np.float32(codes[:, :32] @ codes[:, :32].T)))


def test_truncation_grows_linearly_in_k_and_rounding_as_its_square_root() -> None:
    """The model's assumption, measured both ways: truncation errs toward zero every time (errors add, ~K),
    round-to-nearest errors have random signs (they partly cancel, ~sqrt(K))."""
    rows = R.accumulation_errors((256, 4096), m=32)
    slope = {c: math.log(rows[1][c] / rows[0][c]) / math.log(16) for c in ("narrow", "narrow, round-to-nearest")}
    assert 0.8 < slope["narrow"] < 1.2 and 0.3 < slope["narrow, round-to-nearest"] < 0.7, slope
    assert rows[1]["narrow, round-to-nearest"] < rows[1]["narrow"] / 5
    assert 0.005 < rows[1]["narrow, max error / RMS"] < 0.05  # DeepSeek-V3: "nearly 2%" at K = 4096
    with pytest.raises(ValueError, match="rounding must be 'truncate' or 'nearest', got 'up'"):
        R.limited_accumulation(codes := np.ones((2, 32)), codes.T, rounding="up")


def test_unscaled_is_the_bare_cast_a_recipe_avoids() -> None:
    small = np.full(64, 1e-4, np.float32)  # below e4m3's smallest subnormal 2^-9 / 2: the bare cast gives 0
    assert not R.quantize(small, R.UNSCALED).any() and R.UNSCALED not in R.RECIPES
    np.testing.assert_allclose(R.quantize(small, "current"), small, rtol=2.0**-4)  # a scale keeps them
    x = np.random.default_rng(0).standard_normal(64)
    np.testing.assert_array_equal(R.quantize(x, R.UNSCALED, R.E5M2), R.fake_quant(x, R.E5M2, 1.0))
    with pytest.raises(ValueError, match="or 'unscaled', the control"):
        R.quantize(x, "none")


# ------------------------------------------------------------ bad input (issues #10, #12, #17)

X = np.ones((4, 64), np.float32)


@pytest.mark.parametrize(("call", "err", "match"), [
    (lambda: R.limited_accumulation(X, X.T, chunk=-1), ValueError, "chunk must be >= 1, got -1"),
    (lambda: R.limited_accumulation(X, X.T, chunk=0), ValueError, "chunk must be >= 1, got 0"),
    (lambda: R.limited_accumulation(X, X.T, chunk=2.5), TypeError, "chunk must be a whole number"),
    (lambda: R.limited_accumulation(X, X.T, chunk=32, promote_every=48), ValueError,
     "promote_every=48 must be a multiple of chunk=32"),
    (lambda: R.limited_accumulation(X, X.T, promote_every=0), ValueError, "promote_every must be >= 1"),
    (lambda: R.limited_accumulation(X, X.T, acc_bits=30), ValueError, r"acc_bits must be in \[0, 23\]"),
    (lambda: R.limited_accumulation(X[0], X[0]), ValueError, r"must be 2-D.*a \(64,\) and b \(64,\)"),
    (lambda: R.limited_accumulation(X, X), ValueError, r"a is \(4, 64\) and b is \(4, 64\).*did you mean b.T\?"),
    (lambda: R.qmatmul(X, X, "current"), ValueError, r"a's columns \(64\) must equal b's rows \(4\); did you mean b.T"),
    (lambda: R.qmatmul(X, X.T, "current", fmts="fp8_e4m3"), TypeError, r"fmts must be a list, e.g. \['fp8_e4m3'\]"),
    (lambda: R.recipe_errors(X, X, []), ValueError, r"x is \(4, 64\) and w is \(4, 64\).*did you mean w.T"),
    (lambda: R.rel_err(X, X[:2]), ValueError, r"got has shape \(4, 64\) but ref has \(2, 64\)"),
    (lambda: R.rel_err(X, 0 * X), ValueError, "ref is all zeros"),
    (lambda: R.block_exponents(X, block=0), ValueError, "block must be >= 1, got 0"),
    (lambda: R.quantize_block(X, block=-4), ValueError, "block must be >= 1, got -4"),
    (lambda: R.quantize_block(X, axis=5), ValueError, r"axis must be an integer in \[-2, 2\).*got 5"),
    (lambda: R.quantize_block(3.0), ValueError, "block scaling needs an array"),
    (lambda: R.quantize_rowwise(3.0), ValueError, "rowwise scaling needs an array"),
    (lambda: R.quantize_rowwise(X, axis=2), ValueError, r"axis must be an integer in \[-2, 2\).*got 2"),
    (lambda: R.outlier_channels(4, 8, n_outliers=9), ValueError, "n_outliers=9 is more than the k=8 channels"),
    (lambda: R.quantize(X, "per-row"), ValueError, "unknown fp8 recipe 'per-row'; valid: current, delayed, rowwise"),
    (lambda: R.scale_for(math.inf, R.E4M3), ValueError, "amax must be a finite number >= 0, got inf"),
    (lambda: R.scale_for(math.nan, R.E4M3), ValueError, "amax must be a finite number >= 0, got nan"),
    (lambda: R.scale_for(-5, R.E4M3), ValueError, "amax must be a finite number >= 0, got -5"),
    (lambda: R.scale_for(1, R.E4M3, margin=-2000), ValueError, "margin must be >= 0, got -2000"),
    (lambda: R.scale_for(1, R.E4M3, margin=2000), ValueError, r"scale must be .* got 0.0 \(from amax=1, margin=2000"),
    (lambda: R.scale_for(1e-45, R.E4M3), ValueError, "does not fit float32.*amax=1e-45"),
    (lambda: R.fake_quant(X, R.E4M3, 0.0), ValueError, "scale must be a finite number > 0, got 0.0"),
    (lambda: R.fake_quant(X, R.E4M3, -1), ValueError, "scale must be a finite number > 0, got -1"),
    (lambda: R.fake_quant(X, R.E4M3, math.inf), ValueError, "scale must be a finite number > 0, got inf"),
    (lambda: R.quantize_current(np.array([1.0, math.nan])), ValueError, "holds NaN or inf"),
    (lambda: R.DelayedScaling(history_len=2.5), TypeError, "history_len must be a whole number"),
    (lambda: R.DelayedScaling(history_len=math.nan), TypeError, "history_len must be a whole number.*nan"),
    (lambda: R.DelayedScaling().observe("a", math.nan), ValueError, "amax must be a finite number >= 0, got nan"),
    (lambda: R.outlier_tokens(4, 8, n_outliers=10), ValueError, "n_outliers=10 is more than the m=4 tokens"),
    (lambda: R.outlier_tokens(0, 8), ValueError, "m must be >= 1, got 0"),
    (lambda: R.outlier_tokens(4, 0), ValueError, "k must be >= 1, got 0"),
    (lambda: R.accumulation_errors((0,), m=4), ValueError, r"k_values\[0\] must be >= 1, got 0"),
    (lambda: R.accumulation_errors((8,), m=0), ValueError, "m must be >= 1, got 0"),
    (lambda: R.accumulation_errors(8), TypeError, r"k_values must be a list, e.g. \[8\]"),
])
def test_bad_input_is_refused_with_the_value_and_the_fix(call, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        call()


def test_valid_neighbours_still_work() -> None:
    assert R.limited_accumulation(X, X.T, chunk=32, promote_every=64).shape == (4, 4)
    assert R.limited_accumulation(X, X.T, chunk=16, promote_every=None)[0, 0] == 64.0
    assert R.scale_for(np.float32(2.0), R.E4M3) == 224.0 and R.scale_for(0.0, R.E4M3) == 1.0
    d = R.DelayedScaling(history_len=np.int64(2))
    d.observe("a", np.float32(4.0))
    assert d.scale("a", R.E4M3) == 112.0
    x, rows = R.outlier_tokens(4, 8, n_outliers=4)
    assert x.shape == (4, 8) and rows.size == 0
    assert R.quantize_block(X, block=np.int64(32), axis=np.int64(0)).shape == X.shape
