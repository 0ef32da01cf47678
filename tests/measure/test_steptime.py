"""labkit.measure.steptime (Lab 02): one step timer for every step time, and when two of them agree."""

from __future__ import annotations

import numpy as np
import pytest

from labkit.gpt import data
from labkit.gpt.config import get_config
from labkit.gpt.convert import flat_params_numpy, torch_to_flax
from labkit.gpt.torch_model import TorchGPT
from labkit.gpt.train import JaxTrainer, TorchTrainer
from labkit.measure import bench, steptime
from labkit.measure.bench import Timing

CFG = get_config("test")  # 2 layers, d_model 32, 32 positions
TOKENS = data.synthetic_tokens(4000)


def test_step_batches_are_the_same_batches_for_the_same_shape() -> None:
    tt = TorchTrainer(TorchGPT(CFG))
    jt = JaxTrainer(torch_to_flax(flat_params_numpy(TorchGPT(CFG)), CFG))
    a, b = (steptime.step_batches(tt, TOKENS, 3, 16) for _ in range(2))
    assert len(a) == steptime.STEP_BATCHES and all(x.shape == y.shape == (3, 16) for x, y in a)
    assert all((x1 == x2).all() and (y1 == y2).all() for (x1, y1), (x2, y2) in zip(a, b))
    assert str(a[0][0].dtype) == "torch.int64"  # embedding index dtype
    j = steptime.step_batches(jt, TOKENS, 3, 16)
    assert np.array_equal(np.asarray(j[1][0]), a[1][0].numpy())  # jax and torch see the same tokens
    with pytest.raises(TypeError, match="JaxTrainer or TorchTrainer"):
        steptime.step_batches(object(), TOKENS, 3, 16)


def test_time_step_warms_up_cycles_the_batches_and_reports_the_median(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = {"t": 0.0}
    monkeypatch.setattr(bench.time, "perf_counter", lambda: clock["t"])
    tt = TorchTrainer(TorchGPT(CFG))
    seen: list[int] = []
    durations = iter([5.0, 5.0, 1.0, 3.0, 2.0, 9.0, 2.5])  # s: two warm-ups (compile-slow), then five repeats

    def fake_step(x: int, y: int) -> None:
        seen.append(x)
        clock["t"] += next(durations)

    monkeypatch.setattr(tt, "step", fake_step)
    batches = [(i, i) for i in range(3)]
    t = steptime.time_step(tt, batches, repeats=5)
    assert t.warmup == steptime.STEP_WARMUP == 2 and t.times_s == (1.0, 3.0, 2.0, 9.0, 2.5)
    assert seen == [0, 1, 2, 0, 1, 2, 0]  # prepared batches in turn, warm-ups included
    st = steptime.StepTime(t, batch=4, seq=8)
    assert st.step_s == 2.5 and st.tokens_per_s == pytest.approx(32 / 2.5)  # the median, not the fastest (1.0)
    assert "2.5e+03 ms/step" in str(st) and "13 tokens/s" in str(st)


@pytest.mark.parametrize("framework", ["jax", "torch"])
def test_measure_step_really_times_both_frameworks(framework: str) -> None:
    init = flat_params_numpy(TorchGPT(CFG))
    trainer = JaxTrainer(torch_to_flax(init, CFG)) if framework == "jax" else TorchTrainer(TorchGPT(CFG))
    st = steptime.measure_step(trainer, TOKENS, 2, 8, repeats=3)
    assert len(st.timing.times_s) == 3 and st.step_s > 0 and st.tokens == 16
    assert st.timing.label == f"{framework} step"


def _timing(median: float, iqr_fraction: float) -> Timing:
    """Eight repeats with the given median and IQR/median (statistics.quantiles, exclusive method)."""
    h = iqr_fraction * median / 2
    return Timing((median - 2 * h, median - h, median - h, median, median, median + h, median + h, median + 2 * h), 2)


def test_same_step_tolerance_follows_the_spread_with_a_floor() -> None:
    gpu_a, gpu_b = _timing(0.036, 0.01), _timing(0.044, 0.01)  # issue 15: 36 vs 44 ms, repeats within 1%
    assert steptime.agreement_tolerance(gpu_a, gpu_b) == steptime.AGREE_FLOOR
    assert not steptime.same_step(gpu_a, gpu_b)  # a 22% gap is no noise on a steady device
    assert steptime.same_step(gpu_a, _timing(0.037, 0.01))  # 2.8%: within the floor
    noisy = _timing(0.040, 0.1)  # a shared CPU: IQR 10% of the median
    assert steptime.agreement_tolerance(gpu_a, noisy) == pytest.approx(steptime.AGREE_IQRS * noisy.spread)
    assert steptime.same_step(gpu_a, noisy)  # an 11% gap is within what this noise explains
    very_noisy = _timing(0.044, 0.5)
    assert steptime.agreement_tolerance(gpu_a, very_noisy) == steptime.AGREE_CAP  # measure again, don't widen
    assert not steptime.same_step(_timing(0.036, 0.5), _timing(0.050, 0.5))  # 39% > the cap
    assert steptime.relative_gap(2.0, 3.0) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="positive"):
        steptime.relative_gap(0.0, 1.0)


def test_a_negative_step_time_never_becomes_a_negative_throughput() -> None:
    # Issue #19: StepTime(Timing((-1.0,), 0), 2, 8).tokens_per_s was -16.0.
    with pytest.raises(ValueError, match=r"times_s\[0\] >= 0"):
        steptime.StepTime(Timing((-1.0,), 0), 2, 8)
    with pytest.raises(ValueError, match="no timed repeats"):
        steptime.same_step(Timing((), 0), _timing(0.04, 0.01))


@pytest.mark.parametrize("a, b", [("1", 2.0), (1.0, float("nan")), (True, 2.0)])
def test_relative_gap_needs_two_positive_times(a, b) -> None:
    with pytest.raises(ValueError, match="need two positive times in seconds"):
        steptime.relative_gap(a, b)


def test_a_tie_is_within_the_floor_either_way_round() -> None:
    assert steptime.a_tie(9.8, 10.18) and steptime.a_tie(10.18, 9.8)  # 3.9% apart: no winner
    assert not steptime.a_tie(9.69, 10.18) and not steptime.a_tie(10.18, 9.69)  # 5.06%: bf16 is the faster step
    assert steptime.a_tie(1.0, 1.0 + 0.9 * steptime.AGREE_FLOOR) and not steptime.a_tie(1.0, 1.0 + 1.1 * steptime.AGREE_FLOOR)
    with pytest.raises(ValueError, match="need two positive"):
        steptime.a_tie(0.0, 1.0)
