"""(Lab 01) A first-order model of a tiled GEMM on a GPU: tiles, waves, padding, roofline.

A GPU GEMM kernel cuts C (M, N) into thread-block tiles (block_m, block_n), walks K in steps
of block_k, and splits each block tile into warp tiles made of tensor-core instructions
(mma shape). The tiles are spread over the SMs in waves. This model predicts the achieved
fraction of peak from the shape alone. Its assumptions, all optimistic unless noted:

- ideal tile efficiency: a running block gets its full share of the SM's peak (no pipeline
  prologue or epilogue, no bank conflicts, perfect latency hiding, spec clocks);
- schedule "tiles" (the default: one thread block per output tile, like this lab's Triton kernel):
  every tile takes the same time and a wave lasts one tile, so a partial last wave costs a whole
  wave (wave quantization). Schedule "stream-k" (Osama, Merrill, Cecka, Garland and Owens,
  "Stream-K: Work-centric Parallel Decomposition for Dense Matrix-Matrix Multiplication on the
  GPU", PPoPP 2023; CUTLASS ships it) gives every SM an even share of all tiles' K-loop
  iterations, so a seam between two SMs' shares can fall inside a tile: no wave quantization. It
  is the paper's basic schedule, not its data-parallel + Stream-K hybrid, and keeps the one tile.
  Each seam inside a tile is one fp32 partial tile written by one SM and read by the SM that
  finishes the tile: DRAM traffic only with perfect_l2=False (with a perfect L2 it stays there);
  the fixup's additions are free;
- edge tiles compute a full tile (masked loads save memory traffic, not tensor-core time),
  and K is padded to a multiple of block_k (padding waste);
- memory: A and B come from DRAM once (perfect L2 reuse) and C is written once; with
  perfect_l2=False each tile reads its own strips of A and B (no reuse across blocks);
  no L2 bandwidth limit; compute and memory overlap perfectly (roofline: the slower wins);
- blocks_per_sm is given, not derived from registers or shared memory; no launch latency;
- alignment (pessimistic, measured): cuBLAS's tensor-core kernels load rows of A (K elements)
  and B and C (N elements) in 16-byte vectors (TMA on Hopper). When K or N is not a multiple of
  16 bytes (8 bf16 elements), cuBLAS falls back to kernels that ran at UNALIGNED_EFFICIENCY of the
  aligned speed on an H100 (benchmarks/nvidia-h100-80gb-hbm3/shapes.json: 4097 vs 4096). The
  factor is that one measurement, assumed for every GPU; M needs no alignment.

For TPUs (a systolic matrix unit, no SMs) use labkit.matmul.systolic instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral  # int and numpy integers
from typing import Any, Mapping, Sequence

# Bytes per element of A and B, and of C (fp8 GEMMs write bf16, int8 GEMMs write int32).
_IN_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}
_OUT_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 2, "int8": 4}
ALIGN_BYTES = 16  # bytes: the row alignment cuBLAS's vectorised (tensor-core) loads need
# Unaligned / aligned speed: median (0.200) over the 14 (2^k + 1, 2^k) pairs of N, K and square sizes
# measured with torch bf16 on an H100 80GB HBM3 (bench_shapes.py, 2026-11-22); range 0.13-0.34.
UNALIGNED_EFFICIENCY = 0.2
SCHEDULES = ("tiles", "stream-k")  # how output tiles are spread over the SMs (see the docstring)


def _check_positive(**sizes: int) -> None:
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, Integral) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class GemmTiling:
    """(Lab 01) How a GEMM kernel tiles C: block tile, warp tile, MMA instruction, pipeline."""
    block_m: int = 128
    block_n: int = 128
    block_k: int = 32                     # K step per main-loop iteration
    warp_m: int = 64
    warp_n: int = 64
    mma: tuple[int, int, int] = (16, 8, 16)  # (m, n, k) of one tensor-core instruction
    stages: int = 3                       # shared-memory pipeline depth (for reading; not timed)
    blocks_per_sm: int = 1                # resident thread blocks per SM (occupancy)

    def __post_init__(self) -> None:
        _check_positive(block_m=self.block_m, block_n=self.block_n, block_k=self.block_k,
                        warp_m=self.warp_m, warp_n=self.warp_n, stages=self.stages,
                        blocks_per_sm=self.blocks_per_sm)
        if len(self.mma) != 3:
            raise ValueError(f"mma must be an (m, n, k) triple, got {self.mma!r}")
        _check_positive(mma_m=self.mma[0], mma_n=self.mma[1], mma_k=self.mma[2])
        pairs = [("block_m", self.block_m, "warp_m", self.warp_m),
                 ("block_n", self.block_n, "warp_n", self.warp_n),
                 ("warp_m", self.warp_m, "mma m", self.mma[0]),
                 ("warp_n", self.warp_n, "mma n", self.mma[1]),
                 ("block_k", self.block_k, "mma k", self.mma[2])]
        for outer, big, inner, small in pairs:
            if big % small:
                raise ValueError(f"{outer}={big} is not a multiple of {inner}={small}: a tile "
                                 f"must be a whole number of the smaller tiles it is made of")

    @property
    def warps(self) -> int:
        """(Lab 01) Warp tiles (warps, or warpgroups on Hopper) per thread block."""
        return (self.block_m // self.warp_m) * (self.block_n // self.warp_n)


def _mma_for(chip: Any, dtype: str) -> tuple[int, int, int]:
    """The tensor-core instruction shape for dtype; (1, 1, 1) means CUDA-core FMAs."""
    if chip.mma_shape is None or dtype == "fp32":  # fp32 GEMMs run on CUDA cores
        return (1, 1, 1)
    m, n, k = chip.mma_shape  # recorded for 16-bit inputs; one instruction reads the same
    return (m, n, max(1, k * 2 // _IN_BYTES[dtype]))  # bytes of K: tf32 halves k, 8-bit doubles


def default_tiling(chip: Any, dtype: str = "bf16") -> GemmTiling:
    """(Lab 01) A typical CUTLASS/cuBLAS-like tiling for this GPU and dtype."""
    spec = resolve_chip(chip)
    _check_dtype(dtype)
    mma = _mma_for(spec, dtype)
    if mma[1] > 64:  # Hopper warpgroup MMA (wgmma, 64 x 256 x 16): 2 warpgroups of 64 x 256
        return GemmTiling(128, 256, max(64, mma[2]), 64, 256, mma)
    return GemmTiling(128, 128, max(32, mma[2]), 64, 64, mma)  # Volta..Ada: 4 warps of 64 x 64


def _check_dtype(dtype: str) -> None:
    if dtype not in _IN_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}: use one of {', '.join(_IN_BYTES)}")


def resolve_chip(chip: Any) -> Any:
    """(Lab 01) A ChipSpec (or look-alike) as given, or labkit.runtime.hardware.lookup(name)."""
    if not isinstance(chip, str):
        if not all(hasattr(chip, a) for a in ("name", "peak", "bandwidth_gbs")):
            raise TypeError(f"chip must be a chip name such as 'TPU v5e' or 'NVIDIA T4' (labkit.runtime.hardware.CHIPS) "
                            f"or a ChipSpec, got {chip!r}")
        return chip
    from labkit.runtime import hardware  # imported here: the model itself needs no spec table

    spec = hardware.lookup(chip)
    if spec is None:
        raise ValueError(f"unknown chip {chip!r}: labkit.runtime.hardware has no entry for it; pass a "
                         "ChipSpec (any object with name, sm_count, mma_shape, bandwidth_gbs "
                         "and peak(dtype)) instead of a name")
    return spec


@dataclass(frozen=True)
class SimtPrediction:
    """(Lab 01) What the tiled-GEMM model predicts for one (M, N, K) on one GPU."""
    M: int
    N: int
    K: int
    chip: str
    dtype: str
    tiling: GemmTiling
    tiles: int                   # thread-block tiles: ceil(M/block_m) * ceil(N/block_n)
    waves: int                   # tile-lengths begun per slot: ceil(tiles / slots) waves for "tiles"
    wave_efficiency: float       # share of the slots' time on (padded) tile work, in (0, 1]
    padding_efficiency: float    # M*N*K / (padded M * padded N * padded K)
    aligned: bool                # K and N rows are whole 16-byte vectors (see ALIGN_BYTES)
    arithmetic_intensity: float  # FLOP / DRAM byte
    compute_time_s: float        # s, the busiest slot's tensor-core time on padded tiles
    memory_time_s: float         # s, DRAM bytes / bandwidth
    predicted_time_s: float      # s, max of the two (perfect overlap)
    fraction_of_peak: float      # useful FLOP/s over the dtype's spec peak, in (0, 1]
    predicted_tflops: float      # useful TFLOP/s
    bound: str                   # "compute" or "memory"
    schedule: str = "tiles"      # one of SCHEDULES
    partials: int = 0            # "stream-k": fp32 partial tiles handed between SMs, one per seam in a tile


def in_bytes(dtype: str) -> int:
    """(Lab 01) Bytes per element of A and B in a GEMM of this dtype (fp8/int8 1, bf16 2, fp32 4)."""
    _check_dtype(dtype)
    return _IN_BYTES[dtype]


def gemm_bytes(M: int, N: int, K: int, dtype: str = "bf16") -> int:
    """(Lab 01) DRAM bytes of an (M, K) @ (K, N) GEMM with perfect reuse: A, B read once, C written once."""
    _check_positive(M=M, N=N, K=K)  # -1 gave 16 bytes, a float a fractional count
    _check_dtype(dtype)
    M, N, K = int(M), int(N), int(K)  # np.int32 would overflow at large sizes; Python ints do not
    return (M * K + K * N) * _IN_BYTES[dtype] + M * N * _OUT_BYTES[dtype]


def is_aligned(N: int, K: int, dtype: str = "bf16") -> bool:
    """(Lab 01) Whether rows of K and N elements of ``dtype`` are whole 16-byte vectors."""
    _check_positive(N=N, K=K)  # -8, 8.0 and 0 were all "aligned"
    _check_dtype(dtype)
    return (N * _IN_BYTES[dtype]) % ALIGN_BYTES == 0 and (K * _IN_BYTES[dtype]) % ALIGN_BYTES == 0


def predict(M: int, N: int, K: int, chip: Any, dtype: str = "bf16",
            tiling: GemmTiling | None = None, *, perfect_l2: bool = True,
            schedule: str = "tiles") -> SimtPrediction:
    """(Lab 01) Predict time and fraction of peak of an (M, K) @ (K, N) GEMM on a GPU."""
    _check_positive(M=M, N=N, K=K)
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}: use one of {', '.join(map(repr, SCHEDULES))}")
    M, N, K = int(M), int(N), int(K)  # Python ints: exact FLOP counts at any size
    _check_dtype(dtype)
    spec = resolve_chip(chip)
    if spec.sm_count is None:
        raise ValueError(f"{spec.name} has no SMs (sm_count is None): it is not a SIMT GPU; "
                         "for a TPU use labkit.matmul.systolic, which models its systolic array")
    peak = spec.peak(dtype)  # FLOP/s
    if peak is None:
        have = [d for d in _IN_BYTES if spec.peak(d) is not None]
        raise ValueError(f"{spec.name} has no {dtype} peak; pick one of {', '.join(have)}")
    if not spec.bandwidth_gbs:
        raise ValueError(f"{spec.name} has no memory bandwidth figure (bandwidth_gbs)")
    if tiling is not None and not isinstance(tiling, GemmTiling):
        raise TypeError(f"tiling must be a GemmTiling, e.g. GemmTiling(block_m=128, block_n=128), or None for "
                        f"default_tiling(chip, dtype), got {tiling!r}")
    t = tiling or default_tiling(spec, dtype)
    tiles_m, tiles_n, steps_k = (_ceil_div(M, t.block_m), _ceil_div(N, t.block_n),
                                 _ceil_div(K, t.block_k))
    tiles = tiles_m * tiles_n
    slots = spec.sm_count * t.blocks_per_sm  # thread blocks running at once
    flops = 2 * M * N * K                    # useful FLOP (one multiply + one add per MAC)
    iters = tiles * steps_k                  # K-loop iterations: one block_k step of one tile
    if schedule == "tiles":                  # whole tiles in waves: each wave lasts one tile
        per_slot, seams = _ceil_div(tiles, slots) * steps_k, 0
    else:                                    # an even share of all iterations per slot
        per_slot = _ceil_div(iters, slots)
        seams = stream_k_partials(iters, steps_k, slots)
    waves = _ceil_div(per_slot, steps_k)     # "tiles": ceil(tiles / slots)
    iter_flops = 2 * t.block_m * t.block_n * t.block_k  # FLOP of one padded iteration
    compute_s = per_slot * iter_flops / (peak / slots)  # each slot runs at 1/slots of peak
    aligned = is_aligned(N, K, dtype)
    if not aligned:
        compute_s /= UNALIGNED_EFFICIENCY  # cuBLAS's slower unaligned kernels
    a_reads, b_reads = (1, 1) if perfect_l2 else (tiles_n, tiles_m)  # times A, B leave DRAM
    nbytes = ((a_reads * M * K + b_reads * K * N) * _IN_BYTES[dtype]
              + M * N * _OUT_BYTES[dtype])   # bytes; perfect_l2: gemm_bytes(M, N, K, dtype)
    if not perfect_l2:  # each fp32 partial tile: written by one SM, read by the SM that finishes the tile
        nbytes += seams * 2 * t.block_m * t.block_n * 4
    memory_s = nbytes / (spec.bandwidth_gbs * 1e9)
    time_s = max(compute_s, memory_s)
    return SimtPrediction(
        M, N, K, spec.name, dtype, t, tiles, waves,
        wave_efficiency=iters / (per_slot * slots),
        padding_efficiency=flops / (iters * iter_flops), aligned=aligned,
        arithmetic_intensity=flops / nbytes,
        compute_time_s=compute_s, memory_time_s=memory_s, predicted_time_s=time_s,
        fraction_of_peak=flops / (time_s * peak), predicted_tflops=flops / time_s / 1e12,
        bound="compute" if compute_s >= memory_s else "memory", schedule=schedule, partials=seams)


def stream_k_partials(iters: int, steps_k: int, slots: int) -> int:
    """(Lab 01) fp32 partial tiles a Stream-K schedule hands between SMs: the seams inside a tile."""
    # Slot i runs iterations [i * q, (i + 1) * q), q = ceil(iters / slots); tile t owns
    # [t * steps_k, (t + 1) * steps_k). A seam i * q that is not a tile boundary splits a tile.
    _check_positive(iters=iters, steps_k=steps_k, slots=slots)
    q = _ceil_div(iters, slots)
    return sum(1 for i in range(1, slots) if i * q < iters and (i * q) % steps_k)


def sweep(sizes: Sequence[int], chip: Any, dtype: str = "bf16",
          tiling: GemmTiling | None = None, *, vary: str = "M",
          fixed: Mapping[str, int] | None = None,
          perfect_l2: bool = True, schedule: str = "tiles") -> list[SimtPrediction]:
    """(Lab 01) Predictions as one of M, N, K takes each value in `sizes` (for plots)."""
    dims = {"M": 4096, "N": 4096, "K": 4096, **(fixed or {})}
    if vary not in dims or set(dims) != {"M", "N", "K"}:
        raise ValueError(f"vary must be 'M', 'N' or 'K' and fixed may only name those, "
                         f"got vary={vary!r}, fixed={dict(fixed or {})}")
    for i, s in enumerate(sizes):  # each checked, never int(s): 12.5 must not quietly become 12
        _check_positive(**{f"sizes[{i}]": s})
    return [predict(**{**dims, vary: s}, chip=chip, dtype=dtype, tiling=tiling,
                    perfect_l2=perfect_l2, schedule=schedule) for s in sizes]
