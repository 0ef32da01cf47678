"""labkit.measure.bench: a fake clock proves sync is inside and input creation outside the timed region."""

from __future__ import annotations

import random
import statistics

import numpy as np

import pytest

from labkit.measure import bench


class FakeClock:
    """perf_counter replacement: advances only when the fake device or input maker says so."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_time_fn_syncs_inside_and_makes_inputs_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(bench.time, "perf_counter", clock)
    made: list[int] = []

    def make(i: int) -> tuple[int]:
        made.append(i)
        clock.t += 100.0  # slow input generation must not be timed
        return (i,)

    def fn(x: int) -> str:
        clock.t += 1.0  # queueing the work is cheap...
        return "pending"

    def sync(x: object) -> None:
        if x == "pending":
            clock.t += 10.0  # ...the device work is what we wait for

    t = bench.time_fn(fn, make, sync=sync, warmup=3, repeats=7)
    assert t.times_s == (11.0,) * 7  # queue + device, never input generation
    assert made == list(range(10))  # fresh inputs for every warm-up and repeat
    assert t.warmup == 3 and t.median_s == 11.0 and t.spread == 0.0


def test_without_sync_the_timer_would_lie(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(bench.time, "perf_counter", clock)

    def fn() -> str:
        clock.t += 1.0
        return "pending"

    t = bench.time_fn(fn, sync=lambda x: None, warmup=0, repeats=3)
    assert t.median_s == 1.0  # only the queueing time: what a missing sync measures


class QueueingDevice:
    """A fake accelerator: a call queues 1 s of work (and costs 0.1 s to queue); sync waits it out."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock, self.queued, self.calls = clock, 0.0, []

    def fn(self, x: int) -> str:
        self.calls.append(x)
        self.clock.t += 0.1
        self.queued += 1.0
        return "pending"

    def sync(self, x: object) -> None:
        self.clock.t += self.queued + 0.05  # the queued work, plus a 0.05 s round trip
        self.queued = 0.0


def test_back_to_back_calls_time_throughput_and_alternate_fresh_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(bench.time, "perf_counter", clock)
    dev = QueueingDevice(clock)
    made: list[int] = []
    make = lambda i: (made.append(i), (i,))[1]  # noqa: E731
    one = bench.time_fn(dev.fn, make, sync=dev.sync, warmup=1, repeats=2, calls=1)
    assert one.times_s == pytest.approx((1.15, 1.15))  # queue + work + one round trip per call
    made.clear()
    dev.calls.clear()
    many = bench.time_fn(dev.fn, make, sync=dev.sync, warmup=1, repeats=2, calls=5)
    # 5 calls share one round trip: (5 x (0.1 + 1) + 0.05) / 5 per call
    assert many.times_s == pytest.approx(((5 * 1.1 + 0.05) / 5,) * 2)
    assert many.meta == {"calls": 5}
    assert made == [0, 1, 2, 3, 4]  # warm-up, then two fresh input sets per repeat
    assert dev.calls == [0, 1, 2, 1, 2, 1, 3, 4, 3, 4, 3]  # alternating within a repeat


def test_calls_none_fills_the_minimum_window(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(bench.time, "perf_counter", clock)
    dev = QueueingDevice(clock)
    t = bench.time_fn(dev.fn, lambda i: (i,), sync=dev.sync, warmup=0, repeats=1, calls=None)
    assert t.meta["calls"] == 1  # one call (1.15 s) already outlasts MIN_WINDOW_S
    monkeypatch.setattr(bench, "MIN_WINDOW_S", 5.0)
    t = bench.time_fn(dev.fn, lambda i: (i,), sync=dev.sync, warmup=0, repeats=1, calls=None)
    assert t.meta["calls"] == 5  # ceil(5.0 / 1.15)
    monkeypatch.setattr(bench, "MIN_WINDOW_S", 1e6)
    t = bench.time_fn(dev.fn, lambda i: (i,), sync=dev.sync, warmup=0, repeats=1, calls=None)
    assert t.meta["calls"] == bench.MAX_CALLS


def test_timing_statistics_match_numpy() -> None:
    times = (3.0, 1.0, 2.0, 10.0, 4.0, 2.5)
    t = bench.Timing(times, warmup=0)
    assert t.median_s == pytest.approx(np.median(times))
    assert (t.min_s, t.max_s) == (1.0, 10.0)
    q1, _, q3 = statistics.quantiles(times, n=4)
    assert t.spread == pytest.approx((q3 - q1) / np.median(times))
    assert t.rate(6.0) == pytest.approx(6.0 / np.median(times))
    assert "median" in str(t)


def test_bad_repeat_counts() -> None:
    with pytest.raises(ValueError, match="repeats >= 1"):
        bench.time_fn(lambda: None, sync=lambda x: None, repeats=0)
    with pytest.raises(ValueError, match="calls >= 1"):
        bench.time_fn(lambda: None, sync=lambda x: None, calls=0)


def test_time_jax_and_torch_really_run() -> None:
    import jax.numpy as jnp
    import torch

    tj = bench.time_jax(lambda a: a @ a, lambda i: (jnp.full((64, 64), float(i)),), warmup=1, repeats=3)
    tt = bench.time_torch(lambda a: a @ a, lambda i: (torch.full((64, 64), float(i)),), device="cpu", repeats=3)
    assert len(tj.times_s) == 3 and len(tt.times_s) == 3
    assert all(x > 0 for x in tj.times_s + tt.times_s)


def test_progress_yields_everything() -> None:
    assert list(bench.progress(range(5), desc="x")) == [0, 1, 2, 3, 4]


def test_progress_is_quiet_for_tiny_sweeps_and_headless_runs(monkeypatch) -> None:
    monkeypatch.delenv(bench.HEADLESS_ENV, raising=False)
    assert bench.progress([1, 2], desc="x").disable is True        # two points: no bar
    assert bench.progress(range(5), desc="x").disable is False     # a real sweep, watched
    monkeypatch.setenv(bench.HEADLESS_ENV, "/tmp/m.json")          # `labkit run` sets this per lab
    bar = bench.progress(range(5), desc="x")
    assert bar.disable is True and list(bar) == [0, 1, 2, 3, 4]


def test_confirm_keeps_each_points_best_until_the_claim_holds() -> None:
    # Two noisy measurements of (batch 1 rate, batch 8 rate): the claim "8 beats 1" is hidden at first.
    runs = iter([(5.0, 4.0), (3.0, 6.0), (9.0, 9.0)])
    got = bench.confirm(lambda: next(runs), lambda v: v[1] > v[0])
    assert got.values == (5.0, 6.0) and got.attempts == 2 and got.holds  # (9, 9) never measured
    got = bench.confirm(lambda: next(iter([(1.0, 2.0)])), lambda v: v[1] > v[0])
    assert got.values == (1.0, 2.0) and got.attempts == 1 and got.holds


def test_confirm_reports_a_false_claim_after_every_attempt() -> None:
    calls = []

    def measure() -> tuple[float, float]:
        calls.append(1)
        return (2.0, 1.0)  # times in seconds: the second is always faster

    got = bench.confirm(measure, lambda v: v[1] > v[0], higher_is_better=False, attempts=4)
    assert not got.holds and got.attempts == 4 and len(calls) == 4 and got.values == (2.0, 1.0)
    assert str(got) == "claim does NOT hold after 4 measurement(s), each point at its best: 2, 1"
    held = bench.confirm(iter([(1.0, 1.0), (1.0, 2.0)]).__next__, lambda v: v[1] > v[0])
    assert str(held) == "claim holds (on measurement 2: noise hid it at first, or made it)"


def test_confirm_favours_the_claim_unless_it_asks_for_a_margin() -> None:
    # Two points with no real difference (rates; noise only adds time, 3% on average): each attempt is a
    # new chance for noise to order them as claimed, so "b beats a" mostly "holds" by chance. A 5% margin
    # above the noise, as Lab 02's batch claim asks, makes that rare.
    rng = random.Random(0)

    def same_point_twice() -> list[float]:
        return [1.0 / (1.0 + rng.expovariate(1 / 0.03)) for _ in range(2)]

    def rate(margin: float) -> float:
        return sum(bench.confirm(same_point_twice, lambda v: v[1] > (1 + margin) * v[0], attempts=5).holds
                   for _ in range(1000)) / 1000

    assert rate(0.0) > 0.6 and rate(0.05) < 0.15


def test_confirm_merges_times_by_minimum_and_counts_the_first_measurement() -> None:
    got = bench.confirm(lambda: (0.5, 0.9), lambda v: v[0] < 0.6, higher_is_better=False, first=(0.8, 0.7))
    assert got.values == (0.5, 0.7) and got.attempts == 2 and got.holds
    assert "on measurement 2" in str(got)
    with pytest.raises(ValueError, match="attempts"):
        bench.confirm(lambda: (1.0,), lambda v: True, attempts=0)
    with pytest.raises(ValueError, match="returned 1 values"):
        bench.confirm(lambda: (1.0,), lambda v: False, first=(1.0, 2.0))


def test_queue_and_run_separates_queueing_from_running(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(bench.time, "perf_counter", clock)
    # An asynchronous device: a call costs 0.1 s to queue 1 s of work; sync waits it out (+0.05 s).
    dev = QueueingDevice(clock)
    queued, done = bench.queue_and_run_s(lambda: dev.fn(0), dev.sync)
    assert queued == pytest.approx(0.1) and done == pytest.approx(1.15)
    # A synchronous device (torch on CPU): fn does the 1 s of work, the sync has nothing left.
    def work() -> None:
        clock.t += 1.0

    queued, done = bench.queue_and_run_s(work, lambda out: None, warmup=0, repeats=2)
    assert queued == done == pytest.approx(1.0)
    with pytest.raises(ValueError, match="repeats"):
        bench.queue_and_run_s(lambda: None, lambda out: None, repeats=0)


def test_one_timing_rule_everywhere() -> None:
    """No labkit module but bench reads the fastest repeat; a lab uses it only inside an assertion (spread)."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for p in (root / "labkit").rglob("*.py"):
        if p.name != "bench.py":
            text = p.read_text()
            assert ".min_s" not in text and "fastest_flops" not in text, f"{p}: a figure from the fastest repeat"
    for nb in sorted((root / "labs").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            for line in "".join(cell["source"]).splitlines():
                if ".min_s" in line:
                    assert line.strip().startswith("assert"), f"{nb.name}: {line.strip()!r} reports the fastest repeat"
    assert "median" in bench.TIMING_RULE and "spread" in bench.TIMING_RULE


def test_noisy_flags_repeats_that_disagree() -> None:
    steady = bench.Timing((1.0, 1.01, 0.99, 1.0, 1.02), warmup=0)
    scattered = bench.Timing((1.0, 3.0, 0.5, 2.5, 1.0), warmup=0)  # IQR/median well above 0.5
    assert not steady.noisy and scattered.noisy
    assert scattered.spread > bench.NOISY_SPREAD >= steady.spread


def test_a_timing_needs_times_and_a_rate_needs_a_positive_median() -> None:
    # Issue #19: StatisticsError on no times; ZeroDivisionError at 0 s; -5.0 work/s from a negative time.
    with pytest.raises(ValueError, match="no timed repeats: a Timing needs at least one time"):
        bench.Timing((), 0)
    with pytest.raises(ValueError, match=r"need times_s\[1\] >= 0.*got -1.0"):
        bench.Timing((1.0, -1.0), 0)
    with pytest.raises(ValueError, match="need the median time \\(s\\) > 0"):
        bench.Timing((0.0,), 0).rate(5)


@pytest.mark.parametrize("kwargs", [{"repeats": float("nan")}, {"repeats": 2.5}, {"repeats": "3"}, {"warmup": 1.5},
                                    {"warmup": -1}, {"calls": float("inf")}, {"calls": 0}])
def test_time_fn_counts_must_be_whole_numbers(kwargs: dict) -> None:
    # Issue #19: NaN passed the "< 1" check; 2.5 / 1.5 / inf gave range()'s TypeError; '3' a comparison error.
    (name, value), = kwargs.items()
    with pytest.raises((ValueError, TypeError), match=f"need {name} >= [01] \\(a whole number\\), got {value!r}"):
        bench.time_fn(lambda: None, sync=lambda x: None, **kwargs)
    assert bench.time_fn(lambda: None, sync=lambda x: None, repeats=np.int64(2), calls=None).meta["calls"] >= 1


def test_confirm_and_queue_and_run_check_their_counts() -> None:
    with pytest.raises(TypeError, match="need attempts >= 1 \\(a whole number\\), got 2.5"):  # was: 3 attempts
        bench.confirm(lambda: (1.0,), lambda v: False, attempts=2.5)
    with pytest.raises(ValueError, match="measure\\(\\) returned no values"):  # was: an IndexError
        bench.confirm(lambda: [], lambda v: v[0] > 0)
    with pytest.raises(ValueError, match="need warmup >= 0"):  # was accepted
        bench.queue_and_run_s(lambda: None, lambda out: None, warmup=-1)


def test_time_fn_says_how_to_pass_inputs() -> None:
    """A probe passed lambda i: a (an array): it was unpacked along its first axis ('takes 1 argument but 8')."""
    a = np.ones((8, 4))
    with pytest.raises(TypeError, match=r"make_inputs\(0\) returned a ndarray, not a tuple .* lambda i: \(a,\)"):
        bench.time_fn(lambda x: x, lambda i: a, sync=lambda _: None, warmup=1, repeats=1)
    with pytest.raises(TypeError, match=r"make_inputs must be a function, got tuple"):
        bench.time_fn(lambda x: x, (a,), sync=lambda _: None)
    with pytest.raises(TypeError, match=r"fn must be a function, got ndarray"):
        bench.time_fn(a, sync=lambda _: None)
    with pytest.raises(TypeError, match=r"sync must be a function that blocks .* got int 5"):
        bench.time_fn(lambda: None, sync=5)  # was "'int' object is not callable", naming nothing
    t = bench.time_fn(lambda x: x, lambda i: [a], sync=lambda _: None, warmup=0, repeats=2)
    assert len(t.times_s) == 2
