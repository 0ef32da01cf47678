"""Tests for labkit.matmul.mxu and systolic.cycles(pipelined=True) (Lab 01): the MXU as the chip runs it."""
from __future__ import annotations

import numpy as np
import pytest

from labkit.matmul import mxu, simt, systolic
from labkit.runtime import hardware

V5E = hardware.lookup("TPU v5e")


def _event_count(M: int, K: int, N: int, R: int, C: int, df: str) -> int:
    """Reference: a double-buffered schedule, event by event. A tile loads in R cycles on one
    port, into the shadow buffer, which frees when the previous tile starts streaming; a stream
    starts when its tile is loaded and the previous stream's last element has entered."""
    sr, sc, t = systolic.mapping(M, K, N, df)
    folds = -(-sr // R) * -(-sc // C)
    load_end, prev_start, start = 0, None, 0
    for _ in range(folds):
        load_start = max(load_end, prev_start if prev_start is not None else 0)
        load_end = load_start + R
        start = load_end if prev_start is None else max(load_end, prev_start + t)
        prev_start = start
    return start + t + R + C - 2  # the last fold's wavefront crosses the array


@pytest.mark.parametrize("df", ["ws", "is"])
def test_pipelined_count_matches_a_double_buffered_schedule(df):
    rng = np.random.default_rng(5)
    cases = [(1, 1, 1, 1, 1), (3, 40, 40, 8, 8), (64, 32, 48, 8, 8), (4096, 4096, 4096, 128, 128)]
    cases += [tuple(int(v) for v in rng.integers(1, 60, 3)) + tuple(int(v) for v in rng.integers(1, 17, 2))
              for _ in range(40)]
    for M, K, N, R, C in cases:
        assert systolic.cycles(M, K, N, R, C, df, pipelined=True).count == _event_count(M, K, N, R, C, df)


@pytest.mark.parametrize("df", ["os", "ws", "is"])
def test_pipelining_pays_fill_and_skew_once(df):
    for M, K, N, R, C in [(64, 32, 48, 8, 8), (7, 5, 9, 4, 4), (4096, 4096, 8, 128, 128)]:
        slow = systolic.cycles(M, K, N, R, C, df)
        fast = systolic.cycles(M, K, N, R, C, df, pipelined=True)
        assert fast.pipelined and fast.count <= slow.count and fast.utilization >= slow.utilization
        if fast.stream >= R:  # the load hides behind the stream: only fold 1 pays it, only the last the skew
            assert fast.count == fast.folds * fast.stream + fast.fill + fast.skew_drain
    one = (8, 8, 8, 8, 8)  # a single fold: nothing to overlap
    assert systolic.cycles(*one, df, pipelined=True).count == systolic.cycles(*one, df).count


def test_fold_by_fold_wastes_a_small_batch_pipelined_does_not():
    # Batch 256 through a 4096 x 4096 weight on a 128 x 128 MXU: 1024 folds of T = 256 rows.
    slow = systolic.cycles(256, 4096, 4096, 128, 128, "ws")
    fast = systolic.cycles(256, 4096, 4096, 128, 128, "ws", pipelined=True)
    assert slow.utilization == pytest.approx(256 / (256 + 3 * 128 - 2))  # fill + skew every fold
    assert fast.utilization > 0.99


def test_roof_is_the_simt_roofline_bytes():
    for M, K, N in [(1, 4096, 4096), (300, 129, 7000)]:
        gpu = simt.predict(M, N, K, "NVIDIA H100 SXM", "bf16")
        assert 2 * M * N * K / simt.gemm_bytes(M, N, K, "bf16") == pytest.approx(gpu.arithmetic_intensity)
        assert mxu.predict(M, K, N).arithmetic_intensity == pytest.approx(gpu.arithmetic_intensity)


def test_small_batch_is_memory_bound_at_the_bandwidth_roof():
    p = mxu.predict(1, 4096, 4096)
    assert p.bound == "memory" and p.chip == "TPU v5e" and p.array == (128, 128)
    # On the roof: FLOP/s = arithmetic intensity x bandwidth.
    assert p.fraction_of_peak == pytest.approx(p.arithmetic_intensity * V5E.bandwidth_gbs * 1e9 / V5E.peak("bf16"))
    big = mxu.predict(4096, 4096, 4096)
    assert big.bound == "compute" and big.fraction_of_peak == pytest.approx(big.utilization)


def test_compute_bound_batch_is_the_first_batch_past_the_roof():
    K = N = 4096
    m = mxu.compute_bound_batch(K, N)
    peak, bw = V5E.peak("bf16"), V5E.bandwidth_gbs * 1e9  # FLOP/s, B/s

    def compute_bound(M: int) -> bool:  # the roofline inequality, written out
        u = systolic.cycles(M, K, N, 128, 128, "ws", pipelined=True).utilization
        return 2 * M * K * N / (peak * u) >= ((M * K + K * N) * 2 + M * N * 2) / bw

    assert compute_bound(m) and not any(compute_bound(x) for x in range(1, m))
    ridge = mxu.ridge_batch()  # peak / bandwidth: 197e12 / 819e9 = 240.5 tokens
    assert ridge == pytest.approx(197e12 / 819e9)
    # The activations' own traffic (M x K in, M x N out) lifts it a little above the ridge ...
    assert ridge < m < 1.2 * ridge
    # ... and less so as the weight grows, where the practitioners' peak / bandwidth is exact.
    assert mxu.compute_bound_batch(65536, 65536) == pytest.approx(ridge, rel=0.02)


def test_fold_by_fold_model_never_sees_the_memory_roof():
    # Charging fill and skew on every fold makes even batch 1 "compute-bound": the model, not the chip.
    assert mxu.compute_bound_batch(4096, 4096, pipelined=False) == 1
    assert mxu.predict(1, 4096, 4096, pipelined=False).bound == "compute"


def test_mxu_model_refuses_a_gpu():
    with pytest.raises(ValueError, match="has no MXU"):
        mxu.predict(8, 8, 8, "NVIDIA H100 SXM")


@pytest.mark.parametrize("chip, dtype, match", [
    ("TPU v5e", "fp8", "TPU v5e needs a fp8 peak.*bf16, int8: pass dtype='bf16'"),
    ("TPU v5e", "fp32", "TPU v5e needs a fp32 peak"),
    ("NVIDIA T4", "bf16", "NVIDIA T4 has no MXU"),
])
def test_ridge_batch_refuses_what_predict_refuses(chip, dtype, match):
    # Issue #8: these gave "unsupported operand type(s) for *: 'NoneType' and 'int'".
    with pytest.raises(ValueError, match=match):
        mxu.ridge_batch(chip, dtype)
    with pytest.raises(ValueError, match=match):
        mxu.compute_bound_batch(128, 128, chip, dtype)


def test_no_chip_and_an_empty_scan_are_refused():
    with pytest.raises(TypeError, match="chip must be a chip name such as 'TPU v5e'.*got None"):
        mxu.predict(8, 128, 128, chip=None)
    with pytest.raises(ValueError, match="limit must be a positive integer, got 0"):  # was None: "never compute-bound"
        mxu.compute_bound_batch(128, 128, limit=0)
