"""Tests for labkit.matmul.simt (Lab 01): wave quantization, padding and the roofline term."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pytest

from labkit.matmul import simt
from labkit.matmul.simt import GemmTiling, predict


@dataclass(frozen=True)
class FakeChip:
    """A ChipSpec look-alike: 10 SMs, 100 TFLOP/s bf16, 1000 GB/s (ridge 100 FLOP/byte)."""
    name: str = "Fake GPU"
    kind: str = "gpu"
    peak_tflops: Mapping[str, float | None] = field(
        default_factory=lambda: {"bf16": 100.0, "fp16": 100.0, "fp32": 10.0, "fp8": None})
    memory_gb: float = 16
    bandwidth_gbs: float = 1000.0
    sm_count: int | None = 10
    mma_shape: tuple[int, int, int] | None = (16, 8, 16)
    matrix_unit: str = "tensor cores (fake)"

    def peak(self, dtype: str) -> float | None:
        tflops = self.peak_tflops.get(dtype)
        return None if tflops is None else tflops * 1e12


CHIP = FakeChip()
TILE = GemmTiling(128, 128, 32, 64, 64, (16, 8, 16))
BIG_K = 1 << 16  # deep K keeps these GEMMs compute bound


def test_default_tiling_is_128x128x32_with_64x64_warps():
    t = simt.default_tiling(CHIP, "bf16")
    assert (t.block_m, t.block_n, t.block_k, t.warp_m, t.warp_n) == (128, 128, 32, 64, 64)
    assert t.mma == (16, 8, 16) and t.warps == 4
    assert simt.default_tiling(CHIP, "fp32").mma == (1, 1, 1)  # fp32 runs on CUDA cores


def test_wave_quantization_steps_at_sm_count():
    full = predict(128 * 10, 128, BIG_K, CHIP, tiling=TILE)   # 10 tiles on 10 SMs
    over = predict(128 * 11, 128, BIG_K, CHIP, tiling=TILE)   # 11 tiles: a second wave
    assert (full.tiles, full.waves, full.wave_efficiency) == (10, 1, 1.0)
    assert (over.tiles, over.waves) == (11, 2)
    assert over.wave_efficiency == pytest.approx(11 / 20)     # about half
    assert over.predicted_time_s == pytest.approx(2 * full.predicted_time_s)
    assert over.fraction_of_peak == pytest.approx(full.fraction_of_peak * 11 / 20)
    two_per_sm = GemmTiling(128, 128, 32, 64, 64, (16, 8, 16), blocks_per_sm=2)
    assert predict(128 * 11, 128, BIG_K, CHIP, tiling=two_per_sm).waves == 1


def test_padding_efficiency_is_one_at_multiples_and_drops_at_plus_one():
    assert predict(256, 384, 64, CHIP, tiling=TILE).padding_efficiency == 1.0
    assert predict(129, 128, 32, CHIP, tiling=TILE).padding_efficiency == pytest.approx(129 / 256)
    assert predict(128, 128, 33, CHIP, tiling=TILE).padding_efficiency == pytest.approx(33 / 64)


def test_compute_bound_fraction_is_wave_times_padding_efficiency():
    p = predict(1000, 704, BIG_K, CHIP, tiling=TILE)
    assert p.bound == "compute" and p.aligned
    assert p.fraction_of_peak == pytest.approx(p.wave_efficiency * p.padding_efficiency)
    assert p.predicted_tflops == pytest.approx(p.fraction_of_peak * 100.0)
    # N = 700 bf16 elements = 1400 bytes: not whole 16-byte vectors -> cuBLAS's unaligned kernels.
    q = predict(1000, 700, BIG_K, CHIP, tiling=TILE)
    assert not q.aligned
    assert q.fraction_of_peak == pytest.approx(
        q.wave_efficiency * q.padding_efficiency * simt.UNALIGNED_EFFICIENCY)


def test_alignment_needs_n_and_k_in_16_byte_rows_not_m():
    assert simt.is_aligned(4096, 4096, "bf16") and simt.is_aligned(8, 8, "bf16")
    assert not simt.is_aligned(4097, 4096, "bf16") and not simt.is_aligned(4096, 4097, "bf16")
    assert simt.is_aligned(4, 4, "fp32") and not simt.is_aligned(4, 2, "fp32")  # 4 x 4 B = 16 B
    assert simt.is_aligned(16, 16, "fp8") and not simt.is_aligned(8, 16, "fp8")
    h100 = "NVIDIA H100 SXM"
    odd_m = predict(4097, 4096, 4096, h100)
    assert odd_m.aligned and odd_m.fraction_of_peak > 0.7  # M only adds a row of tiles
    for p in (predict(4096, 4097, 4096, h100), predict(4096, 4096, 4097, h100)):
        assert not p.aligned and p.fraction_of_peak < 0.25  # measured on an H100: 0.13-0.14
    with pytest.raises(ValueError, match="dtype"):
        simt.is_aligned(8, 8, "fp64")


def test_gemm_bytes_by_hand_with_python_ints():
    assert simt.gemm_bytes(2, 3, 4, "bf16") == (2 * 4 + 4 * 3) * 2 + 2 * 3 * 2
    big = np.int32(100_000)  # np.int32 products would wrap around past 2**31
    assert simt.gemm_bytes(big, big, big, "fp32") == 3 * 100_000**2 * 4
    assert simt.is_aligned(np.int64(8), np.int64(8))


def test_memory_bound_roofline_term():
    small = GemmTiling(16, 16, 16, 16, 16, (16, 8, 16))
    p = predict(64, 64, 64, CHIP, tiling=small)
    nbytes = (64 * 64 + 64 * 64) * 2 + 64 * 64 * 2            # A, B read once, C written; bf16
    assert p.bound == "memory"
    assert p.arithmetic_intensity == pytest.approx(2 * 64**3 / nbytes)
    assert p.memory_time_s == pytest.approx(nbytes / 1e12)
    assert p.fraction_of_peak == pytest.approx(2 * 64**3 / (p.memory_time_s * 1e14))
    no_reuse = predict(64, 64, 64, CHIP, tiling=small, perfect_l2=False)  # 4 x 4 tiles
    assert no_reuse.memory_time_s == pytest.approx(((4 + 4) * 64 * 64 * 2 + 64 * 64 * 2) / 1e12)


def test_fraction_of_peak_in_range_and_big_squares_approach_the_limit():
    preds = simt.sweep([1, 7, 128, 129, 1000, 4096, 4097, 20000], CHIP, vary="M")
    assert all(0 < p.fraction_of_peak <= 1 for p in preds)
    squares = [predict(n, n, n, CHIP, tiling=TILE).fraction_of_peak
               for n in (128, 512, 2048, 8192, 32768)]
    assert squares[0] < squares[-1] and squares[-1] > 0.97
    assert [p.M for p in preds][:3] == [1, 7, 128] and preds[0].N == 4096


def test_real_chips_from_the_hardware_table():
    hardware = pytest.importorskip("labkit.runtime.hardware")
    for name in ("NVIDIA H100 SXM", "NVIDIA A100 SXM 80GB", "NVIDIA T4"):
        spec = hardware.lookup(name)
        dtype = "bf16" if spec.peak("bf16") else "fp16"
        by_name = predict(8192, 8192, 8192, name, dtype)
        assert by_name == predict(8192, 8192, 8192, spec, dtype) and by_name.chip == spec.name
        assert 0.9 < by_name.fraction_of_peak <= 1 and by_name.bound == "compute"


@pytest.mark.parametrize("call,message", [
    (lambda: predict(0, 8, 8, CHIP), "M must be a positive integer, got 0"),
    (lambda: predict(8, 8, -3, CHIP), "K must be a positive integer"),
    (lambda: predict(8, 8, 8, FakeChip(name="Fake TPU", sm_count=None)), "use.*labkit.matmul.systolic"),
    (lambda: predict(8, 8, 8, "Imaginary GPU 9000"), "unknown chip.*pass a ChipSpec"),
    (lambda: predict(8, 8, 8, CHIP, "fp8"), "no fp8 peak; pick one of fp32, bf16, fp16"),
    (lambda: predict(8, 8, 8, CHIP, "fp64"), "unknown dtype 'fp64'"),
    (lambda: GemmTiling(128, 128, 32, 48, 64), "block_m=128 is not a multiple of warp_m=48"),
    (lambda: GemmTiling(128, 128, 24, 64, 64, (16, 8, 16)),
     "block_k=24 is not a multiple of mma k=16"),
    (lambda: simt.sweep([8], CHIP, vary="Q"), "vary must be 'M', 'N' or 'K'"),
    (lambda: simt.gemm_bytes(-1, 4, 4), "M must be a positive integer, got -1"),  # once 16 bytes
    (lambda: simt.gemm_bytes(0, 0, 0), "M must be a positive integer, got 0"),  # once 0 bytes
    (lambda: simt.gemm_bytes(8, 8, 2.5), "K must be a positive integer, got 2.5"),
    (lambda: simt.is_aligned(-8, 8), "N must be a positive integer, got -8"),  # these three were "aligned"
    (lambda: simt.is_aligned(8.0, 8), "N must be a positive integer, got 8.0"),
    (lambda: simt.is_aligned(8, 0), "K must be a positive integer, got 0"),
])
def test_bad_input_names_the_problem(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("bad", [2.5, float("nan"), "16", 0])
def test_sweep_refuses_a_size_that_is_not_a_positive_integer(bad) -> None:
    # Issue #11: sweep([8, 2.5]) silently predicted M=2 (int(2.5)); NaN gave a raw int() error.
    with pytest.raises(ValueError, match=r"sizes\[1\] must be a positive integer"):
        simt.sweep([8, bad], "NVIDIA T4", "fp16")
    assert [p.M for p in simt.sweep(np.arange(8, 11), "NVIDIA T4", "fp16")] == [8, 9, 10]  # numpy ints are fine


def test_predict_refuses_no_chip_and_a_str_tiling() -> None:
    # Issue #8: AttributeErrors ('NoneType' has no attribute 'sm_count'; 'str' has no attribute 'block_m').
    with pytest.raises(TypeError, match="chip must be a chip name"):
        predict(8, 8, 8, None)
    with pytest.raises(TypeError, match="tiling must be a GemmTiling.*got 'big'"):
        predict(8, 8, 8, "NVIDIA T4", "fp16", tiling="big")  # type: ignore[arg-type]


def test_stream_k_spreads_iterations_evenly_so_no_wave_is_lost():
    # 11 tiles of 2048 K-steps on 10 SMs: whole tiles need 2 waves (11/20 busy); Stream-K gives each SM
    # ceil(11 * 2048 / 10) = 2253 iterations, so it takes 2253/2048 of one tile's time, not 2 tiles'.
    tiles = predict(128 * 11, 128, BIG_K, CHIP, tiling=TILE)
    sk = predict(128 * 11, 128, BIG_K, CHIP, tiling=TILE, schedule="stream-k")
    one = predict(128 * 10, 128, BIG_K, CHIP, tiling=TILE)
    assert (sk.schedule, sk.tiles, sk.waves) == ("stream-k", 11, 2)  # 2253 iterations = 2 tile-lengths begun
    assert sk.wave_efficiency == pytest.approx(11 * 2048 / (2253 * 10))
    assert sk.predicted_time_s == pytest.approx(one.predicted_time_s * 2253 / 2048)
    assert tiles.predicted_time_s == pytest.approx(2 * one.predicted_time_s)
    assert sk.partials == 9 and tiles.partials == 0  # every seam 2253 * i falls inside a tile
    # Tiles that fill whole waves: the two schedules agree exactly.
    even = predict(128 * 10, 128, BIG_K, CHIP, tiling=TILE, schedule="stream-k")
    assert even.predicted_time_s == one.predicted_time_s and even.partials == 0


def test_stream_k_partials_by_hand():
    # 3 tiles of 4 iterations on 8 slots: q = ceil(12 / 8) = 2, seams at 2, 4, 6, 8, 10; 2, 6, 10 cut a tile.
    assert simt.stream_k_partials(12, 4, 8) == 3
    assert simt.stream_k_partials(8, 2, 4) == 0   # q = 2: every seam on a tile boundary
    assert simt.stream_k_partials(5, 5, 1) == 0   # one slot has no seams
    with pytest.raises(ValueError, match="slots must be a positive integer, got 0"):
        simt.stream_k_partials(8, 2, 0)


def test_stream_k_partial_tiles_are_dram_traffic_only_without_a_perfect_l2():
    small_k = 64 * 32  # 64 iterations per tile
    base = dict(M=128 * 3, N=128, K=small_k, chip=CHIP, tiling=TILE, schedule="stream-k")
    l2, dram = predict(**base), predict(**base, perfect_l2=False)
    assert l2.partials == dram.partials == simt.stream_k_partials(3 * 64, 64, 10) > 0
    plain = predict(**{**base, "schedule": "tiles"}, perfect_l2=False)  # 3 tiles: A read once, B 3 times
    extra = dram.partials * 2 * 128 * 128 * 4  # bytes: fp32 partials written, then read
    assert dram.memory_time_s * 1e12 == pytest.approx(plain.memory_time_s * 1e12 + extra)
    assert l2.memory_time_s == pytest.approx(simt.gemm_bytes(128 * 3, 128, small_k) / 1e12)


def test_stream_k_batch_1_sits_on_the_memory_roof_of_an_h100():
    # The fixed tile pads M = 1 to 128 rows and is compute-bound; spread over all SMs it is the weight read.
    tiles = predict(1, 4096, 4096, "NVIDIA H100 SXM")
    sk = predict(1, 4096, 4096, "NVIDIA H100 SXM", schedule="stream-k")
    assert tiles.bound == "compute" and sk.bound == "memory"
    assert sk.predicted_time_s == pytest.approx(simt.gemm_bytes(1, 4096, 4096) / 3.35e12)


def test_unknown_schedule_is_named():
    with pytest.raises(ValueError, match="unknown schedule 'split-k': use one of 'tiles', 'stream-k'"):
        predict(8, 8, 8, CHIP, schedule="split-k")
    with pytest.raises(ValueError, match="unknown schedule"):
        simt.sweep([8], CHIP, schedule="")
