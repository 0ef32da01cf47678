"""labkit.precision.noise (Lab 04): smoothing, curve gaps and the noise-floor judgement on synthetic curves with known answers."""
from __future__ import annotations

import math

import numpy as np
import pytest

from labkit.precision import noise


def test_smooth_is_a_trailing_mean() -> None:
    np.testing.assert_allclose(noise.smooth([3.0, 6.0, 9.0, 12.0], 3), [3.0, 4.5, 6.0, 9.0])
    np.testing.assert_allclose(noise.smooth([1.0, 2.0], 1), [1.0, 2.0])
    with pytest.raises(ValueError, match="window must be >= 1"):
        noise.smooth([1.0], 0)


def test_constant_offset_is_the_gap_whatever_the_window() -> None:
    base = 3.0 + 2.0 * np.exp(-np.arange(40) / 8)
    for w in (1, 4, 10):
        assert noise.curve_gap(base + 0.1, base, start=5, window=w) == pytest.approx(0.1)
        assert noise.signed_gap(base - 0.1, base, start=5, window=w) == pytest.approx(-0.1)


def test_smoothing_removes_alternating_jitter_and_start_skips_the_warmup() -> None:
    base = np.linspace(5.0, 3.0, 40)
    jitter = base + 0.2 * (-1.0) ** np.arange(40)  # +-0.2 every other step: batch noise, no drift
    assert noise.curve_gap(jitter, base, start=0, window=1) == pytest.approx(0.2)
    assert noise.curve_gap(jitter, base, start=1, window=2) == pytest.approx(0.0, abs=1e-12)
    spike = base.copy()
    spike[0] += 5.0  # a warm-up spike on step 0 only
    assert noise.curve_gap(spike, base, start=1, window=1) == pytest.approx(0.0, abs=1e-12)
    assert noise.curve_gap(spike, base, start=0, window=1) == pytest.approx(5.0 / 40)


def test_bad_curves_are_refused() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        noise.curve_gap([1.0, 2.0], [1.0], 0)
    with pytest.raises(ValueError, match="start must be in"):
        noise.curve_gap([1.0, 2.0], [1.0, 2.0], start=2)


def _curves(rng: np.random.Generator, n: int = 200, sigma: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    base = 2.5 + 3.0 * np.exp(-np.arange(n) / 30)
    return base + sigma * rng.standard_normal(n), base + sigma * rng.standard_normal(n)


def test_judge_a_drift_and_a_twin_with_known_answers() -> None:
    rng = np.random.default_rng(0)
    ref, other = _curves(rng)
    drift = ref + 0.15  # low precision consistently 0.15 nats worse: the H100 symptom of issue 17
    j = noise.judge(drift, ref, other, start=20)
    assert j.gap == pytest.approx(0.15) and j.drift == pytest.approx(0.15)
    assert j.window == noise.default_window(200) == 20 and j.windows == 9
    assert not j.within_noise and j.ratio > noise.K_NOISE and "LARGER" in j.sentence("jax bf16")
    twin = ref + 0.01 * rng.standard_normal(200)  # rounding noise well under the seed noise
    j = noise.judge(twin, ref, other, start=20)
    assert j.within_noise and j.ratio < 1 and "within run-to-run noise" in j.sentence("jax bf16")


def test_a_one_signed_gap_of_a_floor_is_flagged_inside_the_bound() -> None:
    """The H100's JAX bf16 run: 1.0x the floor, signed gap = -|gap| -- within k = 2, flagged, not failed."""
    rng = np.random.default_rng(0)
    ref, other = _curves(rng)
    floor = noise.judge(ref, ref, other, start=20).floor
    below = ref - 1.2 * floor  # trains better than fp32 all run, by 1.2 floors
    j = noise.judge(below, ref, other, start=20)
    assert j.within_noise and j.one_signed and j.drift < 0
    assert "within run-to-run noise" in j.sentence("jax bf16") and "trained better than fp32 all run" in j.sentence("jax bf16")
    crossing = ref + 1.5 * floor * np.sign(np.sin(np.arange(200) / 15.0))  # same size, both signs: noise-like
    j = noise.judge(crossing, ref, other, start=20)
    assert j.ratio >= 1 and not j.one_signed and "one-signed" not in j.sentence("jax bf16")
    small = ref + 0.3 * floor  # one-signed but under a floor (torch bf16 on the H100: 0.12x): not flagged
    assert not noise.judge(small, ref, other, start=20).one_signed


def test_zero_floor() -> None:
    flat = [3.0] * 20
    assert noise.judge(flat, flat, flat, start=5).ratio == 0.0
    j = noise.judge([3.1] * 20, flat, flat, start=5)
    assert j.ratio == math.inf and not j.within_noise


@pytest.mark.parametrize("n, start", [(30, 10), (200, 20)])  # the smoke and full profiles' shapes
def test_k_is_outside_the_spread_of_two_noise_only_runs(n: int, start: int) -> None:
    # If the low-precision run were just another draw of the same noise, how often would its gap
    # exceed K_NOISE floors? Both gaps are means of |smoothed differences| of i.i.d. noise.
    rng = np.random.default_rng(1)
    ratios = []
    for _ in range(400):
        ref, other = _curves(rng, n)
        low = _curves(rng, n)[0]
        ratios.append(noise.judge(low, ref, other, start=start).ratio)
    ratios = np.asarray(ratios)
    assert np.mean(ratios > noise.K_NOISE) < 0.05  # a false alarm is rare ...
    assert np.mean(ratios > 1.0) > 0.3  # ... while k = 1 would raise one often


@pytest.mark.parametrize(("call", "err", "match"), [
    (lambda: noise.smooth([1.0, 2.0, 3.0], 2.5), TypeError, "window must be a whole number >= 1, got 2.5"),
    (lambda: noise.smooth([1.0, 2.0, 3.0], math.nan), TypeError, "window must be a whole number >= 1, got nan"),
    (lambda: noise.smooth([[1, 2], [3, 4]], 1), ValueError, r"losses must be 1-D.*\(2, 2\)"),
    (lambda: noise.curve_gap([1.0, 2.0], [1.0, 2.0], start=0.5), TypeError, "start must be a whole number >= 0, got 0.5"),
    (lambda: noise.judge([1.0] * 20, [1.0] * 20, [1.1] * 20, start=2, k=math.nan), ValueError, "k must be a finite number > 0"),
])
def test_bad_windows_and_curves_name_the_value(call, err: type, match: str) -> None:
    """Issue #20: float windows and 2-D losses were an IndexError or a silent wrong curve."""
    with pytest.raises(err, match=match):
        call()
    assert noise.smooth(np.arange(4.0), np.int64(2))[-1] == 2.5  # numpy ints are fine
