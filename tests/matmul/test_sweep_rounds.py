"""Tests for labkit.matmul.sweep_rounds (Lab 01): interleaved rounds, per-round ratios and their spread."""
from __future__ import annotations

import numpy as np
import pytest

from labkit.matmul import sweep_rounds as sr

SHAPES = [(256, 256, 256), (256, 257, 256), (256, 264, 256)]


def test_rounds_alternate_direction_and_keep_each_shape_in_its_column():
    calls = []

    def time_one(m, n, k):
        calls.append(n)
        return 1e9 * n  # FLOP/s: a made-up rate that names the shape

    got = sr.measure_rounds(SHAPES, time_one, rounds=3)
    assert calls == [256, 257, 264, 264, 257, 256, 256, 257, 264]  # forward, backward, forward
    assert got.flops_per_s.shape == (3, 3) and np.all(got.flops_per_s == [[2.56e11, 2.57e11, 2.64e11]] * 3)
    np.testing.assert_allclose(got.median, [2.56e11, 2.57e11, 2.64e11])


def test_a_drift_that_slows_one_sweep_order_cancels_in_the_per_round_ratio():
    # The machine gets slower call by call (another program takes the cores): timed shape after shape,
    # the last shape looks 2x slower than the first although both do the same work.
    tick = iter(range(100))
    got = sr.measure_rounds([(8, 8, 8), (8, 8, 8)], lambda m, n, k: 1.0 / (1 + next(tick)), rounds=4)
    r = got.ratio(1, over=0)
    assert r.per_round[0] == pytest.approx(0.5) and r.per_round[1] == pytest.approx(4 / 3)
    assert r.spread > abs(1 - r.median)  # the spread is bigger than the "effect": not a result
    assert not r.clears(r.spread)


def test_ratio_median_spread_and_clears():
    r = sr.Ratio((0.2, 0.25, 0.22))
    assert r.median == pytest.approx(0.22) and r.spread == pytest.approx(0.05)
    assert r.clears(0.1) and not sr.Ratio((0.95, 1.3, 0.7)).clears(0.6)


@pytest.mark.parametrize("call,message", [
    (lambda: sr.measure_rounds(SHAPES, lambda *s: 1.0, rounds=1), "rounds must be a whole number >= 2"),
    (lambda: sr.measure_rounds(SHAPES, lambda *s: 1.0, rounds=2.5), "rounds must be a whole number >= 2"),
    (lambda: sr.measure_rounds([], lambda *s: 1.0, rounds=2), "shapes must be a non-empty list"),
    (lambda: sr.measure_rounds([(0, 8, 8)], lambda *s: 1.0, rounds=2), "positive sizes"),
    (lambda: sr.measure_rounds(SHAPES, lambda *s: float("nan"), rounds=2), r"time_one\(256, 256, 256\) returned nan"),
    (lambda: sr.measure_rounds(SHAPES, lambda *s: 1.0, rounds=2).ratio(3, over=0), "i must be an index into the 3"),
])
def test_bad_input_names_the_value(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_edge_verdict_needs_an_effect_bigger_than_the_noise() -> None:
    r = lambda *xs: sr.Ratio(tuple(xs))  # noqa: E731  per-round ratios over the edge's speed
    assert sr.edge_verdict(r(0.2, 0.2), r(1.0, 1.0), 0.05) == "alignment: the aligned size recovers"
    assert sr.edge_verdict(r(0.5, 0.5), r(0.5, 0.5), 0.05).startswith("a step")
    assert sr.edge_verdict(r(0.98, 0.99), r(1.0, 1.0), 0.02) == "no cliff: one past the edge is not 10% slower"
    assert "hides a 10% step" in sr.edge_verdict(r(0.98, 0.99), r(1.0, 1.0), 0.3)
    assert "exceeds the effect" in sr.edge_verdict(r(0.8, 0.8), r(1.0, 1.0), 0.5)


def test_edge_verdict_on_the_committed_h100_probe() -> None:
    # Issue: at N = 128 cuBLAS recovers from 0.16x (129) only to 0.54x (136): alignment AND a step, where the
    # H100 model predicts 136 at 1.06x; at 4096 the aligned 4104 keeps 0.95x: alignment alone.
    from labkit.matmul import reference_chips as rc

    probe = rc.h100_cublas(rc.H100_PROBE_SOURCE)  # TFLOP/s by (M, N, K)
    kept = lambda n, edge: sr.Ratio((probe[(4096, n, 4096)] / probe[(4096, edge, 4096)],))  # noqa: E731
    assert kept(129, 128).median == pytest.approx(0.159, abs=0.001) and kept(136, 128).median == pytest.approx(0.545, abs=0.001)
    assert sr.edge_verdict(kept(129, 128), kept(136, 128), 0.1).startswith("partial recovery")
    assert sr.edge_verdict(kept(4097, 4096), kept(4104, 4096), 0.1) == "alignment: the aligned size recovers"
    # 0.85x is a step beyond a noise of 0.1, not beyond one of 0.2: then it is plain alignment.
    assert sr.edge_verdict(sr.Ratio((0.2,)), sr.Ratio((0.85,)), 0.1).startswith("partial recovery")
    assert sr.edge_verdict(sr.Ratio((0.2,)), sr.Ratio((0.85,)), 0.2) == "alignment: the aligned size recovers"


M_SMOKE = [1, 4, 16, 64, 128, 256]


def _work(ms, base=256):
    return [2 * m * base * base for m in ms]  # FLOP per call


def test_time_floors_finds_the_cold_runs_latency_floor() -> None:
    # The cold run's torch on a loaded 2-core CPU: ~5 ms a call from M = 1 to 64 (64x the work), then 58 us.
    got = sr.time_floors(_work(M_SMOKE), [5.0e-3, 5.1e-3, 4.8e-3, 4.9e-3, 58e-6, 60e-6])
    assert got == [sr.Floor(0, 4, 64.0, "latency floor")]
    assert got[0].describe() == "latency floor (time per call within 2x over 64x the work)"
    np.testing.assert_array_equal(sr.on_floor(got, 6), [True] * 4 + [False] * 2)
    # A floor in mid-sweep (torch fast at M = 1, then its threads waiting 10-18 ms from M = 4 to 64) is one too.
    mid = sr.time_floors(_work(M_SMOKE), [34e-6, 18e-3, 14e-3, 10.7e-3, 38e-6, 41e-6])
    assert [(f.start, f.stop) for f in mid] == [(1, 4)]


def test_time_floors_calls_the_h100s_small_batches_a_memory_floor() -> None:
    # Committed sweep: torch on an H100, (M, 4096) @ (4096, 4096): 18.8 us at M = 1 ... 25.5 us at M = 512,
    # about twice the 10 us its 33.6 MB of operands take at the spec 3.35 TB/s; 46 us at M = 1024.
    import json
    from pathlib import Path

    from labkit.matmul import reference_chips as rc, simt

    rows = json.loads((Path(rc.ROOT) / rc.H100_SOURCE).read_text())["sweeps"]["batch M"]
    ms = [r["M"] for r in rows]
    mem = [simt.gemm_bytes(m, 4096, 4096) / 3350e9 for m in ms]  # s
    got = sr.time_floors(_work(ms, 4096), [r["measured_s"] for r in rows], memory_s=mem)
    # M = 256 and 512 ran at 0.53 and 0.91 of the best: doing the work at speed, so the floor stops at M = 128.
    assert got == [sr.Floor(0, ms.index(128) + 1, 128.0, "memory floor")]
    # Without a bandwidth to compare with (a CPU) the same times read as a latency floor.
    assert sr.time_floors(_work(ms, 4096), [r["measured_s"] for r in rows])[0].kind == "latency floor"


def test_time_floors_finds_nothing_where_time_grows_with_the_work() -> None:
    assert sr.time_floors(_work(M_SMOKE), [m * 1e-6 for m in M_SMOKE]) == []  # compute-bound: time ~ work
    assert sr.time_floors(_work([1, 2]), [1e-3, 1e-3]) == []  # flat, but over 2x the work only
    # 4x the work in about the same time, once, is not yet a floor (one noisy point can do that); 8x is.
    assert sr.time_floors(_work([1, 4, 16]), [30e-6, 41e-6, 300e-6]) == []
    assert sr.time_floors(_work([1, 4, 16]), [30e-6, 41e-6, 300e-6], min_work=4, busy=1.0) == [
        sr.Floor(0, 2, 4.0, "latency floor")]
    assert not sr.on_floor([], 3).any()


@pytest.mark.parametrize("work,seconds,message", [
    ([1.0, 2.0], [1.0], "equally long lists of positive numbers"),
    ([1.0, 2.0], [1.0, 0.0], "equally long lists of positive numbers"),
    ([2.0, 1.0], [1.0, 1.0], "work must grow"),
])
def test_time_floors_names_bad_input(work, seconds, message) -> None:
    with pytest.raises(ValueError, match=message):
        sr.time_floors(work, seconds)


def test_expected_cliff_where_lab01_asserts_one() -> None:
    # The lab's GPU/TPU-only assertion, forced on the CPU: `odd.median < limit` with this run's figures.
    from labkit.matmul import mxu, reference_chips as rc
    from labkit.runtime import hardware

    probe, sweep = rc.h100_cublas(rc.H100_PROBE_SOURCE), rc.h100_cublas()
    limit = sr.expected_cliff("gpu", "torch", 128, 4096)
    for run in (probe, sweep):  # cuBLAS on an H100 kept 0.16x (probe) and 0.25x (sweep): both pass
        assert run[(4096, 129, 4096)] / run[(4096, 128, 4096)] < limit == 0.7
    v5e, v6e = hardware.lookup("TPU v5e"), hardware.lookup("TPU v6e")
    limit = sr.expected_cliff("tpu", "jax", 256, 4096, v5e)
    kept = mxu.predict(4096, 4096, 257, v5e).fraction_of_peak / mxu.predict(4096, 4096, 256, v5e).fraction_of_peak
    assert limit == 0.9 and kept < limit  # what the model expects a v5e to measure: ~0.71x
    assert not 0.98 < limit  # a flat measurement (no cliff) fails the lab's assert
    assert sr.expected_cliff("tpu", "jax", 128, 4096, v5e) is None   # N = 128 and 129 memory-bound on a v5e
    assert sr.expected_cliff("tpu", "jax", 256, 4096, v6e) is None   # 257 pads to 512 yet stays memory-bound
    assert sr.expected_cliff("tpu", "jax", 256, 256, v5e) is None    # smoke sizes: memory-bound, the tooth hides
    assert sr.expected_cliff("tpu", "jax", 256, 4096) is None        # no chip spec: nothing to predict with
    for args in (("cpu", "torch", 128, 256), ("gpu", "jax", 128, 4096), ("gpu", "torch", 256, 4096)):
        assert sr.expected_cliff(*args) is None


def test_a_fast_size_is_never_on_a_floor() -> None:
    # JAX on the H100 probe: 48 µs at M = 1, 38.9 at 512, 48 at 1024, 61 at 1025 (0.9 of its best at the wave
    # edge): flat time, but the last three do the work at speed, so only a slow stretch could be a floor.
    ms = [1, 512, 1024, 1025]
    got = sr.time_floors(_work(ms, 4096), [48e-6, 38.9e-6, 48e-6, 61e-6])
    assert got == []  # M = 1 alone is slow: no stretch of 8x the work
    assert sr.time_floors(_work(ms, 4096), [48e-6, 38.9e-6, 48e-6, 61e-6], busy=1.0)[0].stop == 4  # the old reading


# Lab 01 on the H100, 2026-11-27 (benchmarks/nvidia-h100-80gb-hbm3/2026-11-27/01_systolic_vs_cuda_cores.ipynb,
# bf16, M = K = 4096): each N's FLOP/s over its framework's best in the N sweep, from what the run printed (its
# worst / best, the "one past an edge" ratios and the N = edge + 8 verdicts) and, for the edges 256, 512, 1024,
# 2048 and torch's 128, read off the run's figure.
H100_N = [128, 129, 136, 256, 257, 264, 512, 513, 1024, 1025, 2048, 2049, 4096, 4097, 4104]
JAX_N = dict(zip(H100_N, [0.0858, 0.0858 * 1.31, 0.0858 * 1.31, 0.159, 0.159 * 1.07, 0.159 * 0.93, 0.284,
                          0.284 * 0.615, 0.918, 0.918 * 0.286, 0.966, 0.966 * 0.323, 1.0, 0.311, 0.95]))
TORCH_N = dict(zip(H100_N, [0.32, 0.0688, 0.32 * 0.81, 0.527, 0.527 * 0.157, 0.527 * 0.87, 0.85, 0.85 * 0.13,
                            0.96, 0.96 * 0.128, 1.0, 0.153, 0.888, 0.888 * 0.188, 0.888 * 0.95]))
BEST = {"jax": 741e12, "torch": 757e12}  # FLOP/s, as printed
# The same run's batch sweeps: JAX's latency floor as printed (46.2 us a call at M = 1, 65.3 us at M = 128,
# "flat over 128x the work"); torch's calls, 18.8 us at M = 1 and 16.7 at M = 64 printed, the rest off the figure.
JAX_FLOOR = sr.Floor(0, 8, 128.0, "latency floor", (46.2e-6, 65.3e-6))
TORCH_M = [1, 64, 128, 256, 512, 1024, 2048, 4096]
TORCH_M_S = [18.8e-6, 16.7e-6, 17.7e-6, 20.3e-6, 26.8e-6, 52.6e-6, 98.6e-6, 191.7e-6]


def _n_sweep(of_best: dict, fw: str):
    from labkit.matmul import simt

    work = np.array([2 * 4096 * n * 4096 for n in H100_N], float)  # FLOP per call
    mem = [simt.gemm_bytes(4096, n, 4096) / 3350e9 for n in H100_N]  # s: the operands at the spec bandwidth
    return work, work / (np.array([of_best[n] for n in H100_N]) * BEST[fw]), mem


def test_jax_small_n_sits_on_the_h100_batch_sweeps_latency_floor() -> None:
    # Issue: 4096x128x4096 is 4.3 GFLOP, 5.8 us at the 741 TFLOP/s JAX reached at N = 4096, yet its call took
    # 68 us: JAX's fixed cost per call. The run printed 129/128 at 1.31 and 513/512 at 0.615 as shape effects.
    work, secs, mem = _n_sweep(JAX_N, "jax")
    assert secs[0] == pytest.approx(67.5e-6, rel=0.01) and work[0] / BEST["jax"] == pytest.approx(5.8e-6, rel=0.01)
    assert sr.time_floors(work, secs, memory_s=mem) == []  # 128 to 512 is 4x the work: too little for a floor
    kinds = sr.floor_kinds(work, secs, floors=[JAX_FLOOR], memory_s=mem)
    assert [n for n, k in zip(H100_N, kinds) if k] == [128, 129, 136, 256, 257, 264, 512]
    assert set(kinds) == {"latency floor", None}  # never a memory floor: the read explains under 25% of a call
    assert set(sr.floor_kinds(work, secs, memory_s=mem)) == {None}  # no batch floor to join: nothing
    of_best = np.array([JAX_N[n] for n in H100_N])  # the notebook's "worst / best (floors left out)"
    assert min(of_best[[k is None for k in kinds]]) == pytest.approx(0.175, abs=0.001)  # N = 513, not 128's 0.0858
    on = dict(zip(H100_N, kinds))
    reading = lambda edge, *ns: sr.floor_reading({f"N={n}": on[n] for n in (edge, *ns)}, f"N={edge}")  # noqa: E731
    assert reading(128, 129, 136) == (False, "N=128, N=129, N=136 on a latency floor: no shape to read there")
    assert reading(256, 257, 264)[0] is False
    # 512 on the floor, 513 off it (133 us): 0.615 is only an upper bound on what 513 keeps.
    assert reading(512, 513) == (True, " (N=512 on a latency floor: an upper bound, its own kernel may be faster)")
    assert reading(4096, 4097, 4104) == (True, "")
    assert sr.floor_sizes(kinds, H100_N) == {"latency floor": [128, 129, 136, 256, 257, 264, 512]}


def test_torch_batch_floor_on_the_h100_reaches_m128_and_says_what_the_read_explains() -> None:
    # Issue: torch at M = 128 took 17.7 us, as flat as M = 1 to 64 (16.7-18.8 us), at 0.34 of its best: a 0.3
    # cutoff kept it off the floor. On a floor the work at the best rate takes at most half of each call.
    from labkit.matmul import simt

    work = [2 * m * 4096 * 4096 for m in TORCH_M]
    mem = [simt.gemm_bytes(m, 4096, 4096) / 3350e9 for m in TORCH_M]
    got = sr.time_floors(work, TORCH_M_S, memory_s=mem)
    assert got == [sr.Floor(0, 3, 128.0, "memory floor")] and got[0].seconds == tuple(TORCH_M_S[:3])
    assert sr.time_floors(work, TORCH_M_S, memory_s=mem, busy=0.3)[0].stop == 2  # the old cutoff: M = 64
    # The 33.6 MB read takes 10.0 us at 3.35 TB/s: "reading the operands sets the time" overstated 53%.
    assert sr.describe_floor(got[0], TORCH_M, TORCH_M_S, mem) == (
        "memory floor (time per call within 2x over 128x the work): 18.8 us per call at M = 1, 17.7 us at M = 128; "
        "the operands' read at spec bandwidth explains 53% and 60% of those calls (the rest: the read below "
        "spec bandwidth, or a fixed cost per call): no shape to read there")
    jax_line = sr.describe_floor(JAX_FLOOR, [1, 2, 4, 8, 16, 32, 64, 128], [46.2e-6] + [50e-6] * 6 + [65.3e-6])
    assert jax_line == ("latency floor (time per call within 2x over 128x the work): 46.2 us per call at M = 1, "
                        "65.3 us at M = 128 (a fixed cost per call sets the time): no shape to read there")


def test_torch_n128_on_the_h100_is_a_memory_floor_and_the_cublas_cliff_still_reads() -> None:
    # The same rule on torch's N sweep: N = 128 (17.7 us, the read 10.6 us) joins torch's memory floor, 129
    # (83 us) and 136 (23 us) do not. The edge alone on a floor leaves upper bounds: the cliff and the lab's
    # assertion stand, and the verdict the committed probe also gives (partial recovery).
    from labkit.matmul import simt

    work_m = [2 * m * 4096 * 4096 for m in TORCH_M]
    floors = sr.time_floors(work_m, TORCH_M_S, memory_s=[simt.gemm_bytes(m, 4096, 4096) / 3350e9 for m in TORCH_M])
    work, secs, mem = _n_sweep(TORCH_N, "torch")
    kinds = sr.floor_kinds(work, secs, floors=floors, memory_s=mem)
    assert [(n, k) for n, k in zip(H100_N, kinds) if k] == [(128, "memory floor")]
    ok, note = sr.floor_reading({"N=128": kinds[0], "N=129": kinds[1], "N=136": kinds[2]}, "N=128")
    assert ok and note.endswith("an upper bound, its own kernel may be faster)")
    odd, aligned = sr.Ratio((0.215,)), sr.Ratio((0.81,))  # the run's medians over N = 128
    assert sr.edge_verdict(odd, aligned, 0.1).startswith("partial recovery")
    assert odd.median < sr.expected_cliff("gpu", "torch", 128, 4096)
    # A latency floor is joined by its calls, a memory floor by each size's own read: none without a bandwidth.
    assert set(sr.floor_kinds(work, secs, floors=floors)) == {None}


def test_floor_kinds_joins_a_size_outside_the_stretch_and_checks_its_input() -> None:
    # JAX's batch sweep on the H100: M = 512 took ~62 us at 0.38 of its best, within 2x of the floor's calls,
    # but M = 256 (104 us) broke the stretch: it joins the floor; a fast size never does.
    ms = [1, 4, 16, 64, 128, 256, 512, 1024]
    secs = [46.2e-6, 47e-6, 48e-6, 50.4e-6, 65.3e-6, 104e-6, 61.7e-6, 46.8e-6]
    kinds = sr.floor_kinds(_work(ms, 4096), secs)
    assert kinds == ["latency floor"] * 5 + [None, "latency floor", None]
    floors = sr.time_floors(_work(ms, 4096), secs)
    assert sr.floor_sizes(kinds, ms, skip=floors) == {"latency floor": [512]}
    with pytest.raises(ValueError, match="equally long lists"):
        sr.floor_kinds([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="edge must be one of the sizes"):
        sr.floor_reading({"N=129": None}, "N=128")
