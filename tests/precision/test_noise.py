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
    """A curve below fp32 on every step by 1.2 floors: within k = 2, but flagged as beating fp32."""
    rng = np.random.default_rng(0)
    ref, other = _curves(rng)
    floor = noise.judge(ref, ref, other, start=20).floor
    below = ref - 1.2 * floor  # trains better than fp32 on every step, by 1.2 floors
    j = noise.judge(below, ref, other, start=20)
    assert j.ratio <= noise.K_NOISE and j.one_signed and j.same_sign and j.drift < 0
    assert j.end_gap == pytest.approx(-1.2 * floor) and j.beats_fp32 == (j.end_ratio > 1)
    crossing = ref + 1.5 * floor * np.sign(np.sin(np.arange(200) / 15.0))  # same size, both signs: noise-like
    j = noise.judge(crossing, ref, other, start=20)
    assert j.ratio >= 1 and not j.one_signed and not j.beats_fp32 and "both signs" in j.sentence("jax bf16")
    small = ref + 0.3 * floor  # one-signed but under half a floor (torch bf16 on the H100: 0.12x): described only
    j = noise.judge(small, ref, other, start=20)
    assert j.same_sign and not j.one_signed and "mostly one-signed, worse on all 180 steps" in j.sentence("jax bf16")
    assert "but one-signed" not in j.sentence("jax bf16")
    assert " nats" not in j.sentence("MLP fp8", unit="(squared error)") and "(squared error) =" in j.sentence("MLP", "(squared error)")


def test_one_signedness_is_flagged_below_one_floor() -> None:
    """Issue: the flag needed ratio >= 1, so a one-signed gap of 0.6 floors (or 0.99977) passed silently."""
    rng = np.random.default_rng(0)
    ref, other = _curves(rng)
    floor = noise.judge(ref, ref, other, start=20).floor
    j = noise.judge(ref + 0.6 * floor, ref, other, start=20)
    assert j.within_noise and j.one_signed and not j.beats_fp32
    assert "but mostly one-signed at 0.6 floors: it trained worse than fp32 on most steps" in j.sentence("MLP fp8 delayed")


def _h100_jax_bf16() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Curves shaped like the H100 full run (200 steps, warm-up 20): JAX bf16 vs fp32 and the fp32 seed pair.

    Known from that run: floor 0.062764 nats, bf16's mean |gap| 0.062749 (ratio 0.99977) with signed gap
    = -|gap|, and final losses (mean of the last 5 steps) 2.224 for bf16 vs 2.509 for fp32: 0.285 nats lower.
    The synthetic bf16 curve sits a constant `a` below fp32 and a quadratic ramp from step 150 on adds the
    late growth; `a` and the ramp's size are solved for those two numbers.
    """
    n, start, w = 200, 20, noise.default_window(200)
    t = np.arange(n)
    ref = 2.5 + 3.0 * np.exp(-t / 30)
    other = ref + 0.062764  # a constant init-to-init offset: the floor, and the end floor, exactly
    h = np.maximum(0, t - 150) ** 2.0
    hs = noise.smooth(h, w)[start:]
    # unknowns (a, b) of g = a + b h: mean smoothed g over the judged steps, and mean of g's last 5 raw steps
    a, b = np.linalg.solve([[1.0, hs.mean()], [1.0, h[-5:].mean()]], [0.062749, 0.285])
    return ref - (a + b * h), ref, other


def test_the_h100_anomaly_is_caught() -> None:
    """The H100's JAX bf16 run passed the old judgement (within noise, not one-signed); now it is flagged."""
    low, ref, other = _h100_jax_bf16()
    j = noise.judge(low, ref, other, start=20)
    assert j.gap == pytest.approx(0.062749) and j.floor == pytest.approx(0.062764)
    assert j.ratio == pytest.approx(0.99977, abs=1e-5) and j.drift == pytest.approx(-j.gap)
    assert ref[-5:].mean() - low[-5:].mean() == pytest.approx(0.285)
    # The last fifth (36 steps, 20-step smoothing) sits 1.8 floors below fp32 on this shape: inside k = 2,
    # so the k rule alone would still pass it -- the flag is what names it (a leak or an earlier plateau exit).
    assert j.tail == 36 and 1 < j.end_ratio < noise.K_NOISE and j.end_gap < 0
    assert j.one_signed and j.beats_fp32
    assert "BELOW fp32 (better on all 180 steps)" in j.sentence("jax bf16") and "plateau" in j.sentence("jax bf16")


def test_a_late_gap_is_judged_even_when_the_mean_hides_it() -> None:
    """Worse-only late divergence: mean |gap| 0.4 floors, the last fifth 3 floors worse: not within noise."""
    rng = np.random.default_rng(0)
    ref, other = _curves(rng)
    floor = noise.judge(ref, ref, other, start=20).floor
    late = ref + np.where(np.arange(200) >= 160, 3.5 * floor, 0.0)
    j = noise.judge(late, ref, other, start=20)
    assert j.ratio < 1 and j.end_ratio > noise.K_NOISE and not j.within_noise and not j.beats_fp32


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


@pytest.mark.parametrize("n, start", [(30, 3), (200, 20)])  # the smoke and full profiles' warm-ups
def test_end_gap_and_flags_rarely_fire_on_noise_only_runs(n: int, start: int) -> None:
    rng = np.random.default_rng(2)
    alarms, beats = 0, 0
    for _ in range(400):
        ref, other = _curves(rng, n)
        j = noise.judge(_curves(rng, n)[0], ref, other, start=start)
        alarms += not j.within_noise
        beats += j.beats_fp32
    assert alarms / 400 < 0.05 and beats / 400 < 0.02


def _diverged(step: int, bad: float = math.nan, n: int = 100) -> list[float]:
    losses = [2.0] * n
    losses[step] = bad
    return losses


@pytest.mark.parametrize(("call", "err", "match"), [
    (lambda: noise.smooth([1.0, 2.0, 3.0], 2.5), TypeError, "window must be a whole number >= 1, got 2.5"),
    (lambda: noise.smooth([1.0, 2.0, 3.0], math.nan), TypeError, "window must be a whole number >= 1, got nan"),
    (lambda: noise.smooth([[1, 2], [3, 4]], 1), ValueError, r"losses must be 1-D.*\(2, 2\)"),
    (lambda: noise.curve_gap([1.0, 2.0], [1.0, 2.0], start=0.5), TypeError, "start must be a whole number >= 0, got 0.5"),
    (lambda: noise.judge([1.0] * 20, [1.0] * 20, [1.1] * 20, start=2, k=math.nan), ValueError, "k must be a finite number > 0"),
    # a diverged run gave a GapJudgement with gap=nan and no verdict
    (lambda: noise.judge(_diverged(50), [2.0] * 100, [2.1] * 100, start=0), ValueError,
     r"low has a non-finite loss \(nan\) at step 50 \(the run diverged\); judge finite curves, "
     r"e.g. every curve cut to \[:50\]"),
    (lambda: noise.judge([2.0] * 100, _diverged(0, math.inf), [2.1] * 100, start=10), ValueError,
     r"ref has a non-finite loss \(inf\) at step 0 \(the run diverged\); judge finite curves$"),
    (lambda: noise.judge([2.0] * 100, [2.0] * 100, _diverged(99, -math.inf), start=10), ValueError,
     r"ref_other_seed has a non-finite loss \(-inf\) at step 99"),
    (lambda: noise.curve_gap([2.0] * 100, _diverged(7), start=10), ValueError, "b has a non-finite loss .*at step 7"),
    (lambda: noise.signed_gap(["x"] * 4, [2.0] * 4), TypeError, r"a must be one loss \(a number\) per step, got \['x'"),
])
def test_bad_windows_and_curves_name_the_value(call, err: type, match: str) -> None:
    """Issue #20: float windows and 2-D losses were an IndexError or a silent wrong curve."""
    with pytest.raises(err, match=match):
        call()
    assert noise.smooth(np.arange(4.0), np.int64(2))[-1] == 2.5  # numpy ints are fine


def test_steps_to_reach_counts_the_steps_of_a_plateau_left_sooner() -> None:
    """Two curves on a plateau at 2.5 that drop to 2.2, one at step 60, one at step 120 (known answers)."""
    steps = np.arange(200)
    early = np.where(steps < 60, 2.5, 2.2)  # leaves the plateau at step 60
    late = np.where(steps < 120, 2.5, 2.2)
    target = float(noise.smooth(late, 5)[-1])  # 2.2: where the late run ends
    # The trailing 5-step mean first reaches 2.2 once the window holds only post-drop steps: drop + 4.
    assert noise.steps_to_reach(early, target, 5) == 64 and noise.steps_to_reach(late, target, 5) == 124
    assert noise.steps_to_reach(early, target, 1) == 60  # no smoothing: the drop itself
    assert noise.steps_to_reach(late, 2.1, 5) is None  # never that low
    assert noise.steps_to_reach(list(early), 2.5, 5) == 0  # a list works; at the target counts
    with pytest.raises(TypeError, match="target must be a finite number, got None"):
        noise.steps_to_reach(early, None, 5)
    with pytest.raises(ValueError, match="window must be >= 1"):
        noise.steps_to_reach(early, 2.2, 0)


def test_the_fp32_pairs_own_sign_is_measured_and_said() -> None:
    """Cold read of a CPU run: seed 1 sat above seed 0 on 85% of the steps (signed / |gap| 0.977), so one sign
    is what init noise did there too; the summary must say so instead of reading it as a difference."""
    rng = np.random.default_rng(0)
    ref, crossing_pair = _curves(rng)  # i.i.d. noise around one curve: the pair crosses
    floor = noise.judge(ref, ref, crossing_pair, start=20).floor
    low = ref + 0.6 * floor  # one-signed, worse
    crossed = noise.judge(low, ref, crossing_pair, start=20)
    assert not crossed.floor_same_sign and crossed.one_signed
    offset_pair = ref + 0.1  # a luckier init: one side of the reference on every step
    sided = noise.judge(low, ref, offset_pair, start=20)
    assert sided.floor_same_sign and sided.floor_drift == pytest.approx(0.1)
    said = noise.sign_summary({"jax bf16": sided, "torch bf16": noise.judge(ref, ref, offset_pair, start=20)})
    assert said.startswith("mostly on one side of fp32 (signed mean >= 90% of mean |gap|): jax bf16 (worse on all "
                           "180 steps, ") and "torch bf16" not in said
    assert "the two fp32 inits mostly kept one side of each other too (init 1 above init 0 on 180 of 180 steps)" in said
    assert "not what init noise did here" in noise.sign_summary({"jax bf16": crossed})
    assert "disagree" in noise.sign_summary({"jax bf16": crossed, "torch bf16": sided})
    assert noise.sign_summary({"twin": noise.judge(ref, ref, offset_pair, start=20)}).startswith("no curve was mostly")


def test_the_sentence_names_what_the_end_gap_is_divided_by() -> None:
    """The end ratio divides by the larger of the floor and the inits' end distance; the sentence says which."""
    t = np.arange(200)
    ref = 2.5 + 3.0 * np.exp(-t / 30)
    other = ref + 0.05 + 0.5 * (t >= 150)  # the inits drift apart at the end: end distance > the whole-run floor
    j = noise.judge(ref + 0.2, ref, other, start=20)
    assert j.end_floor > j.floor and j.end_divisor == j.end_floor
    assert j.end_ratio == pytest.approx(0.2 / j.end_floor)
    assert f"= {j.end_ratio:.2g}x the inits' end distance {j.end_floor:.3g} (" in j.sentence("jax bf16")
    flat = noise.judge(ref + 0.2, ref, ref + 0.05, start=20)  # a constant offset: end distance == floor
    assert flat.end_divisor == flat.floor and f"= {flat.end_ratio:.2g}x the floor (" in flat.sentence("jax bf16")


def test_mostly_one_signed_is_said_with_the_steps_on_each_side() -> None:
    """Cold read of a CPU run: the fp32 inits crossed on 27 of 180 judged steps (signed / |gap| 0.977), and the lab
    printed "kept one side of each other all run". The rule is about sizes; the lines must count the steps."""
    n, start = 200, 20
    t = np.arange(n)
    ref = 2.5 + 3.0 * np.exp(-t / 30)
    bump = np.where((t >= 40) & (t < 67), -0.02, 0.1)  # 27 judged steps below, the rest above (window 1: no smoothing)
    pair = noise.judge(ref, ref, ref + bump, start=start, window=1)  # init 1 - init 0 = bump
    low = noise.judge(ref + bump, ref, ref + bump, start=start, window=1)
    assert pair.floor_same_sign and low.same_sign  # mostly one-signed: 0.1 x 153 vs 0.02 x 27
    assert (low.judged_steps, low.steps_worse, low.steps_better, low.floor_steps_above) == (180, 153, 27, 153)
    said = low.sentence("jax bf16")
    assert "mostly one-signed, worse on 153 of 180 steps" in said and "all run" not in said
    summary = noise.sign_summary({"jax bf16": low})
    assert "(init 1 above init 0 on 153 of 180 steps)" in summary and "all run" not in summary
    crossing = noise.judge(ref + 0.1 * np.sign(np.sin(t / 9.0)), ref, ref + bump, start=start, window=1)
    assert not crossing.same_sign and f"worse on {crossing.steps_worse}, better on {crossing.steps_better} of 180" \
        in crossing.sentence("x")
    assert crossing.steps_worse + crossing.steps_better == 180


def test_a_run_larger_than_the_noise_and_one_signed_is_not_called_doubtful() -> None:
    """The negative control printed "LARGER ... but one-signed ... a systematic difference is not ruled out"."""
    rng = np.random.default_rng(0)
    ref, other = _curves(rng)
    j = noise.judge(ref + 0.5, ref, other, start=20)  # ten floors worse on every step
    assert not j.within_noise and j.one_signed
    assert j.sentence("control").endswith("; and mostly one-signed (worse): a systematic difference, not run-to-run noise")
    assert "not ruled out" not in j.sentence("control")
