"""Tests for labkit.matmul.systolic (Lab 01): the simulator against numpy and its own closed form."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from labkit.matmul import systolic
from labkit.matmul.systolic import activity_over_time, cycles, scalesim_cycles, simulate

DATAFLOWS = ("os", "ws", "is")


def _random_cases(n: int, seed: int = 2024) -> list[tuple[int, int, int, int, int]]:
    """(M, K, N, rows, cols) with sizes that are mostly not multiples of the array."""
    rng = np.random.default_rng(seed)
    cases = [(1, 1, 1, 1, 1), (1, 9, 1, 4, 4), (7, 1, 5, 3, 2), (8, 8, 8, 4, 4), (9, 4, 5, 4, 4)]
    while len(cases) < n:
        m, k, nn = (int(v) for v in rng.integers(1, 19, size=3))
        r, c = (int(v) for v in rng.integers(1, 7, size=2))
        cases.append((m, k, nn, r, c))
    return cases


CASES = _random_cases(24)


def _expected_reads(M: int, K: int, N: int, R: int, C: int, df: str) -> dict[str, int]:
    """Hand count: each fold reads its A and B blocks once; WS/IS write a partial per K fold."""
    if df == "os":   # A re-read per column fold, B per row fold, C written once
        return {"A": M * K * math.ceil(N / C), "B": K * N * math.ceil(M / R), "psum": 0,
                "out": M * N}
    k_folds = math.ceil(K / R)
    partials = {"psum": M * N * (k_folds - 1), "out": M * N * k_folds}
    if df == "ws":   # B (stationary) read once, A streamed once per N fold
        return {"A": M * K * math.ceil(N / C), "B": K * N, **partials}
    return {"A": M * K, "B": K * N * math.ceil(M / C), **partials}  # is: A stationary


CONVENTIONS = systolic.CONVENTIONS


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("dataflow", DATAFLOWS)
@pytest.mark.parametrize("M,K,N,R,C", CASES)
def test_simulator_matches_numpy_and_closed_form(M, K, N, R, C, dataflow, convention):
    rng = np.random.default_rng(M * 1000 + K * 100 + N)
    A = rng.integers(-50, 50, size=(M, K), dtype=np.int32)
    B = rng.integers(-50, 50, size=(K, N), dtype=np.int32)
    res = simulate(A, B, R, C, dataflow, convention=convention)
    assert res.product.dtype == np.int64
    np.testing.assert_array_equal(res.product, A.astype(np.int64) @ B.astype(np.int64))

    model = cycles(M, K, N, R, C, dataflow, convention=convention)
    sr, sc, _ = res.mapping
    assert res.cycles == model.cycles and res.count == model.count == model.folds * model.per_fold
    assert res.cycles == res.count - (convention == "scalesim")  # SCALE-Sim: last cycle's index
    assert res.folds == model.folds == math.ceil(sr / R) * math.ceil(sc / C)
    assert res.utilization == pytest.approx(M * N * K / (res.count * R * C))
    assert res.utilization == pytest.approx(model.utilization)
    assert res.activity.shape == (res.count, R, C)
    assert int(res.activity.sum()) == M * N * K  # every MAC happens exactly once
    assert res.operand_reads == _expected_reads(M, K, N, R, C, dataflow)


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_simulator_on_many_shapes_and_bigger_arrays(dataflow):
    # Multi-fold runs on both sides of the array size, floats and integers, both conventions.
    rng = np.random.default_rng(11)
    for _ in range(12):
        R, C = (int(v) for v in rng.integers(2, 17, size=2))
        M, K, N = (int(v) for v in rng.integers(1, 3 * max(R, C) + 2, size=3))
        A, B = rng.integers(-9, 10, (M, K)), rng.integers(-9, 10, (K, N))
        for conv in CONVENTIONS:
            res = simulate(A, B, R, C, dataflow, record_activity=False, convention=conv)
            np.testing.assert_array_equal(res.product, A @ B)
            assert res.cycles == cycles(M, K, N, R, C, dataflow, convention=conv).cycles


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_floats_match_numpy(dataflow):
    rng = np.random.default_rng(7)
    for M, K, N, R, C in CASES[:10]:
        A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N)).astype(np.float32)
        res = simulate(A, B, R, C, dataflow, record_activity=False)
        assert res.product.dtype == np.float64 and res.activity is None
        np.testing.assert_allclose(res.product, A @ B.astype(np.float64), rtol=1e-12, atol=1e-12)


def test_lab_reference_points_8x8_64x32x48(capsys):
    M, K, N, R = 64, 32, 48, 8
    rng = np.random.default_rng(0)
    A, B = rng.integers(-8, 8, (M, K)), rng.integers(-8, 8, (K, N))
    got = {(df, conv): simulate(A, B, R, R, df, record_activity=False, convention=conv).cycles
           for df in DATAFLOWS for conv in CONVENTIONS}
    # Hand derivation: folds = ceil(Sr/8) * ceil(Sc/8); per fold = preload (WS/IS: 8 rows)
    # + T streaming + 8 + 8 - 2 skew + drain (OS: 8 rows, "drain" only).
    hand = {"os": (64 // 8) * (48 // 8) * (0 + 32 + 14 + 8),   # (Sr,Sc,T)=(64,48,32): 48 x 54
            "ws": (32 // 8) * (48 // 8) * (8 + 64 + 14 + 0),   # (32,48,64): 24 x 86
            "is": (32 // 8) * (64 // 8) * (8 + 48 + 14 + 0)}   # (32,64,48): 32 x 70
    assert {df: got[(df, "drain")] for df in DATAFLOWS} == hand == {"os": 2592, "ws": 2064, "is": 2240}
    # SCALE-Sim 3.0: OS 48 folds x (8 + 8 + 32 - 2) with no drain, and every total less one.
    scalesim = {df: got[(df, "scalesim")] for df in DATAFLOWS}
    assert scalesim == {"os": 48 * 46 - 1, "ws": 2063, "is": 2239} == {"os": 2207, "ws": 2063, "is": 2239}
    with capsys.disabled():
        for df in DATAFLOWS:
            print(f"\nsim_cycles_{df}_8x8_64x32x48 = {scalesim[df]} (SCALE-Sim), {hand[df]} (drain)", end="")
        print()


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_the_two_conventions_differ_only_by_the_os_drain_and_one(dataflow):
    # SCALE-Sim's count lacks labkit's R-cycle drain per OS fold and reports count - 1:
    # OS differs by R * folds + 1 (the check against SCALE-Sim 3.0), WS / IS by 1.
    for M, K, N, R, C in CASES + [(100_000, 4097, 129, 128, 128), (1, 100_000, 8, 256, 256)]:
        ours, theirs = (cycles(M, K, N, R, C, dataflow, convention=c) for c in CONVENTIONS)
        assert theirs.cycles == scalesim_cycles(M, K, N, R, C, dataflow)
        gap = R * ours.folds + 1 if dataflow == "os" else 1
        assert ours.cycles - theirs.cycles == gap
        assert ours.fill + ours.skew_drain == R + (R + C - 2)
        assert theirs.utilization >= ours.utilization


def test_unknown_convention_is_named():
    with pytest.raises(ValueError, match="unknown convention 'scale-sim'"):
        cycles(4, 4, 4, 2, 2, "os", convention="scale-sim")
    with pytest.raises(ValueError, match="unknown convention"):
        simulate(np.ones((2, 2)), np.ones((2, 2)), 2, 2, "os", convention="x")
    with pytest.raises(ValueError, match="one after another"):
        cycles(4, 4, 4, 2, 2, "ws", convention="scalesim", pipelined=True)


def test_closed_form_handles_tpu_sizes_exactly():
    model = cycles(100_000, 100_000, 100_000, 256, 256, "ws")
    assert isinstance(model.cycles, int) and model.folds == 391 * 391
    assert model.cycles == 391 * 391 * (2 * 256 + 256 + 100_000 - 2)
    assert 0.0 < model.utilization <= 1.0


def test_padding_cliffs_and_small_batch():
    u = systolic.utilization_sweep([128, 129], 128, 128, "os", vary="M",
                                   fixed={"K": 4096, "N": 4096})
    assert u[1] < 0.6 * u[0]  # 129 rows need a second, almost empty, row of folds
    u = systolic.utilization_sweep([4096, 4097], 128, 128, "ws", vary="N")
    assert u[1] < u[0]
    small = systolic.utilization_sweep(range(1, 9), 128, 128, "ws", vary="M")
    assert np.all(np.diff(small) > 0) and small[0] < 0.01  # batch 1 wastes the array


def test_long_dataflow_names_are_accepted():
    A, B = np.ones((3, 2), int), np.ones((2, 4), int)
    for long, short in [("output_stationary", "os"), ("Weight-Stationary", "ws"),
                        ("input_stationary", "is")]:
        assert simulate(A, B, 2, 2, long).dataflow == short
        assert cycles(3, 2, 4, 2, 2, long) == cycles(3, 2, 4, 2, 2, short)


def test_os_registers_move_one_pe_per_cycle():
    A = np.arange(1, 21).reshape(4, 5)          # (M=4, K=5) on a 4 x 4 array: one fold
    B = np.arange(1, 21).reshape(5, 4) * 100
    res = simulate(A, B, 4, 4, "os", snapshot_cycles=(3, 4 + 5 + 4 - 3))
    snap = res.snapshots[3]
    for i in range(4):
        for j in range(4):
            k = 3 - i - j                        # A[i, k] and B[k, j] meet at PE (i, j) at i+j+k
            want = (A[i, k], B[k, j]) if 0 <= k < 5 else (0, 0)
            assert (snap["A"][i, j], snap["B"][i, j]) == want
    # Last compute cycle (T + R + C - 3): every accumulator holds its finished dot product.
    np.testing.assert_array_equal(res.snapshots[10]["acc"], A @ B)
    first_busy = res.activity.argmax(axis=0)    # (rows, cols) first useful cycle of each PE
    np.testing.assert_array_equal(first_busy, np.add.outer(np.arange(4), np.arange(4)))


def test_os_drain_shifts_sums_out_with_empty_operand_registers():
    A = np.arange(1, 21).reshape(4, 5)
    B = np.arange(1, 21).reshape(5, 4) * 100
    last = 4 + 5 + 4 - 3                         # the last compute cycle; the drain follows
    res = simulate(A, B, 4, 4, "os", snapshot_cycles=(last + 1, last + 2))
    for d, cyc in enumerate((last + 1, last + 2)):
        snap = res.snapshots[cyc]
        assert not snap["A"].any() and not snap["B"].any()  # every operand has left the array
        # the bottom row has left d + 1 times: the top d + 1 rows are empty, the sums moved down
        assert not snap["acc"][: d + 1].any()
        np.testing.assert_array_equal(snap["acc"][d + 1:], (A @ B)[: 4 - d - 1])


@pytest.mark.parametrize("dataflow,held", [("ws", "B"), ("is", "A")])
def test_stationary_tile_is_preloaded_in_rows_cycles(dataflow, held):
    A, B = np.arange(12).reshape(3, 4), np.arange(8).reshape(4, 2)
    res = simulate(A, B, 4, 4, dataflow, snapshot_cycles=(3,))
    tile = res.snapshots[3][held][:4, :]         # after R = 4 preload cycles
    want = B if dataflow == "ws" else A.T        # IS holds A transposed: PE (i, j) = A[j, i]
    np.testing.assert_array_equal(tile[:want.shape[0], :want.shape[1]], want)
    assert not res.activity[:4].any()            # no MACs while preloading


def test_activity_over_time_averages_to_utilization():
    rng = np.random.default_rng(1)
    res = simulate(rng.integers(0, 5, (10, 6)), rng.integers(0, 5, (6, 9)), 4, 3, "ws")
    busy = activity_over_time(res)
    assert busy.shape == (res.cycles,) and busy.min() >= 0 and busy.max() <= 1
    assert busy.mean() == pytest.approx(res.utilization)
    no_record = simulate(np.ones((2, 2)), np.ones((2, 2)), 2, 2, "os", record_activity=False)
    with pytest.raises(ValueError, match="record_activity=True"):
        activity_over_time(no_record)


@pytest.mark.parametrize("call,message", [
    (lambda: cycles(0, 4, 4, 8, 8, "os"), "M must be a positive integer, got 0"),
    (lambda: cycles(4, 4, 4, 8, -1, "os"), "cols must be a positive integer"),
    (lambda: simulate(np.ones((2, 2)), np.ones((2, 2)), 0, 2, "os"), "rows must be a positive"),
    (lambda: simulate(np.ones((2, 3)), np.ones((4, 5)), 2, 2, "os"),
     r"A has shape \(2, 3\) and B has shape \(4, 5\)"),
    (lambda: simulate(np.ones((2, 2)), np.ones((2, 2)), 2, 2, "xs"),
     "unknown dataflow 'xs': use one of 'os'.*'input_stationary'"),
    (lambda: simulate(np.ones(3), np.ones((3, 2)), 2, 2, "os"), "A must be a 2-D matrix"),
    (lambda: simulate(np.ones((0, 3)), np.ones((3, 2)), 2, 2, "os"), "sizes must be positive"),
    (lambda: simulate(np.ones((2, 2), complex), np.ones((2, 2)), 2, 2, "os"), "real floats"),
    (lambda: simulate(np.ones((2, 2)), np.ones((2, 2)), 2, 2, "os", snapshot_cycles=(99,)),
     "outside this run"),
    # issue 20: [[2**62]] @ [[4]] used to come back as [[0]] (int64 wrapped silently)
    (lambda: simulate(np.array([[2**62]]), np.array([[4]]), 1, 1, "os"), r"overflow int64: .* = 18446744073709551616"),
    (lambda: simulate(np.full((1, 3), 2**31), np.full((3, 1), 2**31), 1, 1, "ws"), "overflow int64"),
    (lambda: simulate(np.array([[2**63]], dtype=np.uint64), np.ones((1, 1), int), 1, 1, "os"), "overflow int64"),
])
def test_bad_input_names_the_problem(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_largest_safe_integers_stay_exact():
    big = np.array([[2**31 - 1, 2**31 - 1]])  # K * max^2 = 2 * (2**31 - 1)**2 < 2**63: exact in int64
    out = simulate(big, big.T, 2, 2, "os").product
    assert int(out[0, 0]) == 2 * (2**31 - 1) ** 2


SCALESIM = json.loads((Path(__file__).parent / "scalesim_3_0_cycles.json").read_text())


@pytest.mark.parametrize("case", SCALESIM["cases"], ids=lambda c: f"{c['M']}x{c['K']}x{c['N']}-{c['rows']}x{c['cols']}-{c['dataflow']}")
def test_scalesim_convention_reproduces_scalesim_3_0(case):
    # Figures printed by the real SCALE-Sim 3.0 (provenance in the JSON): closed form and simulator.
    M, K, N, R, C, df = (case[k] for k in ("M", "K", "N", "rows", "cols", "dataflow"))
    assert scalesim_cycles(M, K, N, R, C, df) == case["total_cycles"]
    assert cycles(M, K, N, R, C, df, convention="scalesim").cycles == case["total_cycles"]
    rng = np.random.default_rng(0)
    res = simulate(rng.integers(-5, 6, (M, K)), rng.integers(-5, 6, (K, N)), R, C, df,
                   record_activity=False, convention="scalesim")
    assert res.cycles == case["total_cycles"]
    # labkit's own count: SCALE-Sim's + 1, plus the R-cycle output drain of every OS fold.
    drain = cycles(M, K, N, R, C, df).cycles
    assert drain == case["total_cycles"] + 1 + (R * res.folds if df == "os" else 0)
