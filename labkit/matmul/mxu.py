"""(Lab 01) A TPU's matrix unit (MXU) as the chip runs it: pipelined weight loads and a memory roof.

The MXU is a weight-stationary systolic array (labkit.matmul.systolic, dataflow "ws"): a
(K, N) weight matrix is cut into R x C tiles, and the M rows of activations (tokens) stream
through each tile. This model adds two things the fold-by-fold cycle count leaves out:

- pipelined weight loading (default): the MXU double-buffers its weights, loading the next
  tile (R cycles) while the current one streams, so only the first fold pays the preload and
  only the last the skew (`systolic.cycles(..., pipelined=True)`); `pipelined=False` is the
  fold-by-fold count, which charges fill and skew on every fold;
- a memory roof, the same roofline as labkit.matmul.simt: A and B are read from HBM once and C
  written once (perfect reuse, `simt.gemm_bytes`), compute and memory overlap perfectly, and
  the slower of the two sets the time.

Assumptions: every MXU of the chip is as busy as the one modelled (the work splits evenly);
the chip's dtype peak is reached at utilization 1; no vector-unit or launch overheads.
Below about peak / bandwidth FLOP per byte -- for a (M, K) @ (K, N) weight matmul, M of
roughly peak / bandwidth tokens -- the weights' trip from HBM takes longer than the math.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from labkit.matmul import simt, systolic


@dataclass(frozen=True)
class MxuPrediction:
    """(Lab 01) What the MXU model predicts for one (M, K) @ (K, N) on one TPU chip."""
    M: int
    K: int
    N: int
    chip: str
    dtype: str
    array: tuple[int, int]       # (rows, cols) of one MXU
    pipelined: bool              # next weight tile loads while the current one streams
    utilization: float           # useful MACs / (cycles * R * C), from systolic.cycles
    arithmetic_intensity: float  # FLOP / HBM byte
    compute_time_s: float        # s, the MXUs at `utilization` of the dtype's peak
    memory_time_s: float         # s, HBM bytes / bandwidth
    predicted_time_s: float      # s, max of the two (perfect overlap)
    fraction_of_peak: float      # useful FLOP/s over the dtype's spec peak, in (0, 1]
    bound: str                   # "compute" or "memory"


def _tpu(chip: Any, dtype: str) -> tuple[Any, float]:
    """The chip's spec and its dtype peak in FLOP/s (all MXUs); a clear ValueError for a GPU or a missing peak."""
    spec = simt.resolve_chip(chip)
    if not getattr(spec, "mxu_shape", None):
        raise ValueError(f"{spec.name} has no MXU (mxu_shape is None): for a GPU use "
                         "labkit.matmul.simt, which models SMs and tiles")
    simt.in_bytes(dtype)  # an unknown dtype lists the known ones
    peak = spec.peak(dtype)  # FLOP/s, all MXUs of the chip
    if peak is None or not spec.bandwidth_gbs:
        have = [d for d in simt._IN_BYTES if spec.peak(d) is not None]
        raise ValueError(f"{spec.name} needs a {dtype} peak and a memory bandwidth for this model; it has a peak "
                         f"for {', '.join(have) or 'no dtype'}: pass dtype={have[0] if have else 'bf16'!r}")
    return spec, peak


def predict(M: int, K: int, N: int, chip: Any = "TPU v5e", dtype: str = "bf16", *,
            pipelined: bool = True) -> MxuPrediction:
    """(Lab 01) Predict time and fraction of peak of an (M, K) @ (K, N) GEMM on a TPU's MXUs."""
    spec, peak = _tpu(chip, dtype)
    rows, cols = spec.mxu_shape
    model = systolic.cycles(M, K, N, rows, cols, "ws", pipelined=pipelined)
    flops = 2 * model.macs                       # useful FLOP (one multiply + one add per MAC)
    nbytes = simt.gemm_bytes(M, N, K, dtype)     # bytes: A, B read once, C written once
    compute_s = flops / (peak * model.utilization)
    memory_s = nbytes / (spec.bandwidth_gbs * 1e9)
    time_s = max(compute_s, memory_s)
    return MxuPrediction(int(M), int(K), int(N), spec.name, dtype, (rows, cols), pipelined,
                         model.utilization, flops / nbytes, compute_s, memory_s, time_s,
                         flops / (time_s * peak), "compute" if compute_s >= memory_s else "memory")


def compute_bound_batch(K: int, N: int, chip: Any = "TPU v5e", dtype: str = "bf16", *,
                        pipelined: bool = True, limit: int = 1 << 16) -> int | None:
    """(Lab 01) Smallest batch M (rows, tokens) whose (M, K) @ (K, N) the model calls compute-bound."""
    spec, _ = _tpu(chip, dtype)  # looked up once: the scan calls predict many times
    simt._check_positive(limit=limit)  # 0 would scan nothing and answer "never compute-bound"
    for m in range(1, limit + 1):   # upwards: below the answer every batch is memory-bound
        if predict(m, K, N, spec, dtype, pipelined=pipelined).bound == "compute":
            return m
    return None


def ridge_batch(chip: Any = "TPU v5e", dtype: str = "bf16") -> float:
    """(Lab 01) The batch where weight traffic alone balances the math: peak / bandwidth for bf16."""
    spec, peak = _tpu(chip, dtype)
    # (M, K) @ (K, N): 2 M K N FLOP against K N weights of b bytes -> compute-bound above
    # M = peak * b / (2 * bandwidth) tokens, ignoring the activations' own traffic.
    return peak * simt.in_bytes(dtype) / (2 * spec.bandwidth_gbs * 1e9)
