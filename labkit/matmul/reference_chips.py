"""(Lab 01) The four chips of the predicted shape sweeps: two TPU MXUs and two GPUs, one call for all.

An MXU goes through labkit.matmul.mxu: the weight-stationary cycle count of its array with
pipelined weight loads, under its chip's HBM roof; a GPU goes through labkit.matmul.simt with
its spec's SMs, tensor-core tiles and bandwidth -- the same roofline for both. Both answer the same question -- what fraction of the chip's peak an (M, K) @ (K, N)
GEMM reaches -- so a chip's name is all `predicted`, `at` and `square` need. H100_CUBLAS_TFLOPS
and H100_PROBE_TFLOPS hold what cuBLAS measured on an H100 at some of those shapes, to set beside
the model; `measured_over_model` divides one by the other, for either of simt's schedules.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from labkit.matmul import mxu, simt

BIG = 4096  # elements: the two dimensions that do not vary in a sweep
MXUS = {"MXU 128x128 (TPU v5e)": "TPU v5e", "MXU 256x256 (TPU v6e)": "TPU v6e"}  # spec name, bf16
GPUS = {"H100 (bf16)": ("NVIDIA H100 SXM", "bf16"), "T4 (fp16)": ("NVIDIA T4", "fp16")}  # (spec name, dtype)
MODELS = list(MXUS) + list(GPUS)
# cuBLAS measured where the models can be checked (torch 2.11 bf16, one H100 80GB HBM3, 2026-11-22):
# TFLOP/s by (M, N, K), from H100_SOURCE. The fastest shape of that whole sweep is the first; the
# spec peak the H100 model calls 1.0 is 989 TFLOP/s.
H100_SOURCE = "benchmarks/nvidia-h100-80gb-hbm3/shapes.json"
H100_CUBLAS_TFLOPS = {(4096, 2048, 4096): 753.2, (4096, 4096, 4096): 715.2, (5120, 5120, 5120): 705.0}
# A second H100 probe (torch 2.11 bf16, one H100 80GB HBM3, 2026-11-26): small M, wave edges, alignment,
# TFLOP/s by (M, N, K), from H100_PROBE_SOURCE; Lab 01 sets both of simt's schedules against it.
H100_PROBE_SOURCE = "benchmarks/nvidia-h100-80gb-hbm3/shape_probe.json"
H100_PROBE_TFLOPS = {
    (1, 4096, 4096): 2.296, (16, 4096, 4096): 22.78, (512, 4096, 4096): 675.8, (640, 4096, 4096): 702.9,
    (1024, 4096, 4096): 745.5, (1025, 4096, 4096): 733.2, (1152, 4096, 4096): 742.2, (2048, 4096, 4096): 770.8,
    (2049, 4096, 4096): 754.6, (2176, 4096, 4096): 719.9, (4096, 4096, 4096): 788.2, (4224, 4096, 4096): 712.5,
    (4096, 128, 4096): 343.2, (4096, 129, 4096): 54.62, (4096, 136, 4096): 187.0, (4096, 4096, 4097): 144.7,
    (4096, 4097, 4096): 129.0, (4096, 4104, 4096): 749.1, (5120, 5120, 5120): 788.4}
_FIXED = {"M": {"N": BIG, "K": BIG}, "N": {"M": BIG, "K": BIG}, "K": {"M": BIG, "N": BIG}}


def _check_model(model: str) -> None:
    if model not in MXUS and model not in GPUS:
        raise ValueError(f"unknown model {model!r}: use one of {', '.join(MODELS)}")


def _check_roof(model: str, roof: bool) -> None:
    if not roof and model not in MXUS:
        raise ValueError(f"{model} is a GPU: labkit.matmul.simt always applies its memory roof; "
                         "roof=False (the array's own utilization) is for the MXUs")


def predicted(model: str, sizes: Sequence[int], vary: str, *, roof: bool = True) -> np.ndarray:
    """(Lab 01) Predicted fraction of peak for each size of dimension `vary`, the other two at BIG."""
    # roof=False (MXUs only): the array's utilization alone, as if HBM were infinitely fast.
    _check_model(model)
    _check_roof(model, roof)
    if vary not in _FIXED:
        raise ValueError(f"vary must be 'M', 'N' or 'K', got {vary!r}")
    if model in MXUS:
        chip = simt.resolve_chip(MXUS[model])  # looked up once for the whole sweep
        preds = [mxu.predict(**{**_FIXED[vary], vary: s}, chip=chip) for s in sizes]  # 2.5 refused, not cut to 2
        return np.array([p.fraction_of_peak if roof else p.utilization for p in preds])
    chip, dtype = GPUS[model]
    return np.array([p.fraction_of_peak for p in simt.sweep(sizes, chip, dtype, vary=vary, fixed=_FIXED[vary])])


def at(model: str, vary: str, size: int, *, roof: bool = True) -> float:
    """(Lab 01) Predicted fraction of peak at one size of `vary`, the other two dimensions at BIG."""
    return float(predicted(model, [size], vary, roof=roof)[0])


def square(model: str, n: int) -> float:
    """(Lab 01) Predicted fraction of peak of a square n x n x n GEMM: all three dimensions pad."""
    _check_model(model)
    if model in MXUS:
        return mxu.predict(n, n, n, MXUS[model]).fraction_of_peak
    chip, dtype = GPUS[model]
    return simt.predict(n, n, n, chip, dtype).fraction_of_peak


def cliff_table(models: Sequence[str] = tuple(MODELS)) -> list[dict[str, Any]]:
    """(Lab 01) One row per model: predicted fraction of peak on both sides of each cliff."""
    # Padding (N = 128 | 129, 4096 | 4097 square), streaming (M = 1, 16) and the T4 / H100 wave
    # edges (M = 640 | 641, 1024 | 1025); every other dimension at BIG.
    return [{"model": m, "N=128": at(m, "N", 128), "N=129": at(m, "N", 129),
             "square 4096": square(m, 4096), "square 4097": square(m, 4097),
             "M=1": at(m, "M", 1), "M=16": at(m, "M", 16), "M=640": at(m, "M", 640),
             "M=641": at(m, "M", 641), "M=1024": at(m, "M", 1024), "M=1025": at(m, "M", 1025)}
            for m in models]


def measured_over_model(measured: Mapping[tuple[int, int, int], float], model: str = "H100 (bf16)",
                        schedule: str = "tiles") -> np.ndarray:
    """(Lab 01) Measured TFLOP/s over simt's prediction for each (M, N, K): above 1, the model is no bound."""
    if model not in GPUS:
        raise ValueError(f"{model!r} is not a GPU model: use one of {', '.join(GPUS)}")
    if not measured:
        raise ValueError("measured is empty: pass {(M, N, K): TFLOP/s, ...}, e.g. H100_PROBE_TFLOPS")
    chip, dtype = GPUS[model]
    return np.array([tflops / simt.predict(m, n, k, chip, dtype, schedule=schedule).predicted_tflops
                     for (m, n, k), tflops in measured.items()])

