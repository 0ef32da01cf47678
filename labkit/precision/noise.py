"""Is a low-precision loss curve different from fp32's, or only as different as another seed? (Lab 04)

Two runs that differ only in precision never give the same losses: rounding perturbs the first
step and training is chaotic after that. The question is whether the difference is larger than
the run-to-run noise we accept anyway. So we measure that noise: fp32 trained twice from two
inits (seeds 0 and 1) on the same batches -- paired, as the precision runs are -- is the **noise
floor**. (Changing the batch order too would add batch-sampling noise the precision runs never
see: on the smoke profile it triples the floor.)

Definitions (nats / token, every curve one loss per step):

- ``smooth(losses, w)``: the trailing mean of the last ``w`` steps (fewer at the start), so
  batch-to-batch jitter does not count as a difference between runs;
- ``curve_gap(a, b, start, w)``: mean over steps ``t >= start`` of
  ``|smooth(a)_t - smooth(b)_t|`` -- over the whole run after warm-up, not only its end;
- ``loss_noise_floor_fp32 = curve_gap(fp32 init 0, fp32 init 1)`` (same batches);
- ``loss_gap_<low>_vs_fp32 = curve_gap(<low> seed 0, fp32 seed 0)`` (same init, same batches).

Judgement: the low-precision curve is **within noise** when its gap is at most ``K_NOISE = 2``
times the floor. Why 2: the floor is measured from one pair of runs, so it is itself an
estimate, averaged over only about ``(steps - start) / w`` independent windows (the smoothing
correlates neighbouring steps); with 5-20 windows a mean of |differences| varies by roughly
±20-45% from pair to pair (1/sqrt(windows)). A gap under 1x the floor could be luck, one over
2x is outside that spread on any of our profiles; ``judge`` reports the window count so the
learner can see how much the floor can be trusted. The *signed* mean gap is reported too: a
drift (low precision consistently worse) shows as a mean gap close to the absolute one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from labkit.gpt.data import check_count, check_real

K_NOISE = 2.0  # gap <= K_NOISE * floor: within run-to-run noise (see the module docstring)


def smooth(losses: Sequence[float], window: int) -> np.ndarray:
    """(Lab 04) Trailing mean of the last ``window`` losses at each step (fewer at the start)."""
    window = check_count(window, "window", example=10)
    x = np.asarray(losses, np.float64)
    if x.ndim != 1:
        raise ValueError(f"losses must be 1-D (one loss per step), got shape {x.shape}; pass one run's curve")
    c = np.concatenate([[0.0], np.cumsum(x)])
    idx = np.arange(1, len(x) + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def default_window(steps: int) -> int:
    """(Lab 04) Smoothing window for a run of ``steps``: a tenth of it, at least 3 steps."""
    return max(3, steps // 10)


def _diff(a: Sequence[float], b: Sequence[float], start: int, window: int) -> np.ndarray:
    if len(a) != len(b):
        raise ValueError(f"curves have different lengths: {len(a)} vs {len(b)}")
    if not 0 <= check_count(start, "start", 0, example=0) < len(a):
        raise ValueError(f"start must be in [0, {len(a)}), got {start}")
    return (smooth(a, window) - smooth(b, window))[start:]


def curve_gap(a: Sequence[float], b: Sequence[float], start: int = 0, window: int = 1) -> float:
    """(Lab 04) Mean over steps >= ``start`` of |smooth(a) - smooth(b)| (nats / token)."""
    return float(np.mean(np.abs(_diff(a, b, start, window))))


def signed_gap(a: Sequence[float], b: Sequence[float], start: int = 0, window: int = 1) -> float:
    """(Lab 04) Mean over steps >= ``start`` of smooth(a) - smooth(b): > 0 means ``a`` is worse."""
    return float(np.mean(_diff(a, b, start, window)))


@dataclass(frozen=True)
class GapJudgement:
    """(Lab 04) A low-precision curve against fp32, measured in units of the fp32 noise floor."""

    gap: float          # curve_gap(low, fp32 seed 0), nats / token
    drift: float        # signed_gap(low, fp32 seed 0): > 0 = low precision trains worse
    floor: float        # curve_gap(fp32 init 0, fp32 init 1), same batches, nats / token
    k: float            # allowed multiple of the floor
    start: int          # first step compared (after warm-up)
    window: int         # smoothing window, steps
    windows: int        # independent windows the means average over: (steps - start) / window

    @property
    def ratio(self) -> float:
        """(Lab 04) gap / floor (inf if the floor is 0 and the gap is not)."""
        if self.floor > 0:
            return self.gap / self.floor
        return 0.0 if self.gap == 0 else math.inf

    @property
    def within_noise(self) -> bool:
        """(Lab 04) True when the gap is at most ``k`` times the fp32 noise floor."""
        return self.ratio <= self.k

    @property
    def one_signed(self) -> bool:
        """(Lab 04) A gap of at least one floor with (almost) one sign all run: a systematic difference is not ruled out.

        Two runs that differ only by noise cross each other; a curve that stays on one side of fp32
        by a floor or more may differ in what it computes. On an H100, JAX's bf16 run sat 1.0 floor
        below fp32 with signed gap = |gap| (and ended 0.29 nats lower) while passing the k = 2 rule.
        """
        return self.gap > 0 and self.ratio >= 1.0 and abs(self.drift) >= 0.9 * self.gap

    def sentence(self, name: str) -> str:
        """(Lab 04) One line for the lab: the gap in nats and in floors, and the verdict."""
        verdict = "within run-to-run noise" if self.within_noise else "LARGER than run-to-run noise"
        note = ""
        if self.one_signed:
            way = "worse" if self.drift > 0 else "better"
            note = (f"; but one-signed: it trained {way} than fp32 all run, by a floor or more -- "
                    "a systematic difference is not ruled out")
        return (f"{name}: mean |gap| {self.gap:.2g} nats = {self.ratio:.2g}x the fp32 run-to-run floor "
                f"{self.floor:.4f} (signed {self.drift:+.2g}; steps >= {self.start}, {self.window}-step "
                f"smoothing, ~{self.windows} windows): {verdict} (k = {self.k:g}){note}")


def judge(low: Sequence[float], ref: Sequence[float], ref_other_seed: Sequence[float], start: int,
          window: int | None = None, k: float = K_NOISE) -> GapJudgement:
    """(Lab 04) Judge ``low`` against ``ref`` (same seed) with the floor from ``ref`` vs another seed."""
    w = default_window(len(ref)) if window is None else window
    k = check_real(k, "k", 0.0, hint=f"; the allowed multiple of the noise floor, e.g. k={K_NOISE:g}")
    return GapJudgement(gap=curve_gap(low, ref, start, w), drift=signed_gap(low, ref, start, w),
                        floor=curve_gap(ref, ref_other_seed, start, w), k=k, start=start, window=w,
                        windows=max(1, (len(ref) - start) // w))
