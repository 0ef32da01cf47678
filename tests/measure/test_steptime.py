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


def _twins() -> tuple[JaxTrainer, JaxTrainer, list]:
    init = flat_params_numpy(TorchGPT(CFG))
    a, b = (JaxTrainer(torch_to_flax(init, CFG)) for _ in range(2))
    return a, b, steptime.step_batches(a, TOKENS, 2, 16)


def test_the_copy_without_command_buffers_trains_the_trainers_own_state() -> None:
    # On a GPU the copy is the same step compiled without CUDA graphs; here the CPU compiles it with the
    # GPU's option (a no-op on a CPU), so its updates must equal the trainer's own step's, bit for bit.
    import jax

    a, b, batches = _twins()
    t = steptime.time_without_command_buffers(a, batches, repeats=3, platform="gpu")
    assert isinstance(t, Timing) and len(t.times_s) == 3 and t.label == "jax step, no command buffers"
    for i in range(steptime.STEP_WARMUP + 3):  # the calls time_jax made: warm-ups, then one per repeat
        b.step(*batches[i % len(batches)])
    same = jax.tree.map(lambda p, q: bool(np.array_equal(np.asarray(p), np.asarray(q))), a.params, b.params)
    assert all(jax.tree.leaves(same))  # a holds the copy's newest state, not donated (deleted) buffers
    assert float(a.step(*batches[0])) == float(b.step(*batches[0]))


def test_time_without_command_buffers_is_none_where_there_are_none(monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit.runtime import compile_options

    a, _, batches = _twins()
    assert steptime.time_without_command_buffers(a, batches, 2) is None  # this CPU: nothing to turn off
    assert steptime.time_without_command_buffers(a, batches, 2, platform="tpu") is None
    monkeypatch.setattr(compile_options, "compile_traceable", lambda lowered, platform: (lowered, False))
    assert steptime.time_without_command_buffers(a, batches, 2, platform="gpu") is None  # XLA refused the option
    with pytest.raises(TypeError, match="pass a JaxTrainer"):
        steptime.time_without_command_buffers(TorchTrainer(TorchGPT(CFG)), batches, 2)
    with pytest.raises(ValueError, match="at least one prepared"):
        steptime.time_without_command_buffers(a, [], 2, platform="gpu")
    with pytest.raises(ValueError, match="at least one prepared"):
        steptime.time_compiled(a, object(), [], 2)
    assert steptime.without_command_buffers(a, batches[0]) is None  # this CPU: its own program is the one to run


def test_threaded_hands_the_state_back_when_a_step_fails() -> None:
    a, _, batches = _twins()
    calls: list[int] = []

    def compiled(p, s, x, y):  # noqa: ANN001, ANN202  a copy that updates once, then fails
        if calls:
            raise RuntimeError("out of memory")
        calls.append(1)
        return "new params", "new state", 0.0

    with pytest.raises(RuntimeError, match="out of memory"):
        with steptime.threaded(a, compiled) as step:
            step(*batches[0])
            step(*batches[0])
    assert (a.params, a.opt_state) == ("new params", "new state")  # the last state the copy returned


def test_host_share_is_the_time_to_queue_a_step_and_the_time_to_finish_it(monkeypatch: pytest.MonkeyPatch) -> None:
    a, _, batches = _twins()
    queued, done = steptime.host_share(a, batches[0])
    assert 0 < queued <= done
    tt = TorchTrainer(TorchGPT(CFG))
    synced: list[int] = []
    real = tt.step
    monkeypatch.setattr(tt, "step", lambda x, y: synced.append(0) or real(x, y))
    queued, done = steptime.host_share(tt, steptime.step_batches(tt, TOKENS, 2, 16)[0], repeats=2)
    assert 0 < queued <= done and len(synced) == 3  # one warm-up, then the repeats
    with pytest.raises(TypeError, match="JaxTrainer or TorchTrainer"):
        steptime.host_share(object(), batches[0])


def test_why_slower_charges_a_slowdown_to_the_host_or_the_device() -> None:
    # Lab 02 on an H100 (2026-11-27): the JAX step took 35.1 ms in the timing cell and 48.5 ms again.
    host = steptime.why_slower(0.0351, 0.0485, 0.0020, 0.0150)  # queuing grew by 13 of the 13.4 ms
    assert "97% of the 13.4 ms" in host and "host kept the device waiting" in host
    dev = steptime.why_slower(0.0351, 0.0485, 0.0020, 0.0021)
    assert "host explains 1% of the 13.4 ms" in dev and "device spent it" in dev
    edge = steptime.why_slower(0.0351, 0.0485, 0.0020, 0.0020 + steptime.HOST_SHARE * (0.0485 - 0.0351))  # exactly HOST_SHARE: the host's
    assert "host kept the device waiting" in edge
    assert steptime.why_slower(0.0351, 0.0485, 0.0050, 0.0020).count("host explains 0%") == 1  # queued faster
    assert steptime.why_slower(0.0485, 0.0351, 0.002, 0.002).startswith("not slower (48.5 -> 35.1 ms)")
    with pytest.raises(ValueError, match="two positive times"):
        steptime.why_slower(0.0351, 0.0485, 0.0, 0.002)


def test_no_winner_widens_with_the_noisier_timing() -> None:
    from dataclasses import replace

    from labkit.measure import mfu

    peak = mfu.explicit_peak(100.0, "bf16", "test chip")
    a, b = (mfu.mfu(1e12, t, peak) for t in (0.100, 0.110))  # 10% apart
    assert not steptime.no_winner(a, b)  # no spreads given: the 5% floor, so the faster one wins
    assert steptime.no_winner(replace(a, spread=0.06), b)  # a 6% IQR/median: 12% is noise
    assert not steptime.no_winner(replace(a, spread=0.04), replace(b, spread=0.02))  # 8%: still a winner
    assert steptime.no_winner(replace(a, spread=0.5), b) and steptime.spread_tolerance(0.5, 0.0) == steptime.AGREE_CAP
    assert steptime.spread_tolerance(0.01, 0.02) == steptime.AGREE_FLOOR
    # Unequal FLOPs (Lab 02's equal-token shapes differ in attention work): judged on the rate, not the time.
    c = mfu.mfu(1.2e12, 0.110, peak)  # 20% more FLOPs in the same 110 ms: a 20% faster rate, though no faster step
    assert not steptime.no_winner(b, c) and steptime.no_winner(replace(b, spread=0.1), c)


def test_fixed_share_solves_fixed_plus_work_and_refuses_a_gap_faster_than_the_peak() -> None:
    # 2 ms fixed + 1 ms per unit of work: 1 unit -> 3 ms, 8 units -> 10 ms; the fixed cost is 2/3 of the small step.
    assert steptime.fixed_share(0.003, 0.010, 8, 7e9, 1e13) == pytest.approx(2 / 3)
    assert steptime.fixed_share(0.003, 0.024, 8, 7e9, 1e13) == pytest.approx(0.0)  # all work: 8x the time
    assert steptime.fixed_share(0.0017, 0.0139, 8, 7e9, 1e13) < 0  # more than 8x: more per token (Lab 02, a CPU)
    # Lab 02 on a 2-core CPU: batch 8 took 0.75 ms more than batch 1 for 8x the FLOPs, which need >= 2.5 ms at peak.
    assert steptime.fixed_share(0.0124, 0.01315, 8, 3.5e8, 1.4e11) is None
    with pytest.raises(ValueError, match="ratio must be > 1"):
        steptime.fixed_share(0.003, 0.010, 1, 7e9, 1e13)
    with pytest.raises(ValueError, match="positive"):
        steptime.fixed_share(0.003, 0.010, 8, 7e9, 0.0)
