"""(Lab 01) The four chips of the predicted shape sweeps: two TPU MXUs and two GPUs, one call for all.

An MXU goes through labkit.matmul.mxu: the weight-stationary cycle count of its array with
pipelined weight loads, under its chip's HBM roof; a GPU goes through labkit.matmul.simt with
its spec's SMs, tensor-core tiles and bandwidth -- the same roofline for both. Both answer the same question -- what fraction of the chip's peak an (M, K) @ (K, N)
GEMM reaches -- so a chip's name is all `predicted`, `at` and `square` need. `h100_cublas` reads
what cuBLAS measured at every shape of a committed H100 run, and `measured_over_model` divides them
by simt's prediction, for either of its schedules, and `h100_unaligned_ratios` pairs each unaligned shape of
the sweep with its aligned neighbour (UNALIGNED_EFFICIENCY's data); `drop_causes` says which of simt's factors
makes each drop of a GPU model's curve; `schedule_ratios` does both schedules at once for any GPU
(Lab 01 passes the one it ran on) and says which shapes the model counts as aligned; `l2_resident`
says which shapes' operands fit an H100's L2 (a probe that reuses its inputs reads those from L2).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from labkit.matmul import mxu, simt

DROP_KEEP = 0.98  # a curve drops where it keeps less than this of its value one size later (over 2% down)

BIG = 4096  # elements: the two dimensions that do not vary in a sweep
MXUS = {"MXU 128x128 (TPU v5e)": "TPU v5e", "MXU 256x256 (TPU v6e)": "TPU v6e"}  # spec name, bf16
GPUS = {"H100 (bf16)": ("NVIDIA H100 SXM", "bf16"), "T4 (fp16)": ("NVIDIA T4", "fp16")}  # (spec name, dtype)
MODELS = list(MXUS) + list(GPUS)
# cuBLAS measured where the models can be checked (torch 2.11 bf16, one H100 80GB HBM3, 2026-11-22,
# benchmarks/bench_shapes.py under the course's timing rule: median repeat, fresh inputs).
H100_SOURCE = "benchmarks/nvidia-h100-80gb-hbm3/shapes.json"
# A second H100 run (torch 2.11 bf16, one H100 80GB HBM3, 2026-11-26, best of 5 x 50 back-to-back calls on
# the same inputs): batch 1 and 16, wave edges, alignment edges. h100_cublas reads either run.
H100_PROBE_SOURCE = "benchmarks/nvidia-h100-80gb-hbm3/shape_probe.json"
H100_SOURCES = (H100_SOURCE, H100_PROBE_SOURCE)
# bytes: the H100 SXM5's L2 ("50 MB L2 cache", NVIDIA H100 Tensor Core GPU Architecture whitepaper, Hopper).
H100_L2_BYTES = 50e6
ROOT = Path(__file__).resolve().parents[2]  # the course's repository: benchmarks/ sits beside labkit/
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
    return np.array([p.fraction_of_peak for p in _gpu_sweep(model, sizes, vary)])


def _gpu_sweep(model: str, sizes: Sequence[int], vary: str) -> list[Any]:
    """simt's predictions for a GPU model as `vary` runs through `sizes`, the other two dimensions at BIG."""
    chip, dtype = GPUS[model]
    return simt.sweep(sizes, chip, dtype, vary=vary, fixed=_FIXED[vary])


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
    # Padding (N = 128 | 129, 4096 | 4097 square), streaming (M = 1, 16), the T4's row-block edge
    # (M = 640 | 641: tile padding) and the H100's wave edge (M = 1024 | 1025); every other dimension at BIG.
    return [{"model": m, "N=128": at(m, "N", 128), "N=129": at(m, "N", 129),
             "square 4096": square(m, 4096), "square 4097": square(m, 4097),
             "M=1": at(m, "M", 1), "M=16": at(m, "M", 16), "M=640": at(m, "M", 640),
             "M=641": at(m, "M", 641), "M=1024": at(m, "M", 1024), "M=1025": at(m, "M", 1025)}
            for m in models]


def drop_causes(model: str, sizes: Sequence[int], vary: str = "M", *, keep: float = DROP_KEEP) -> dict[str, list[int]]:
    """(Lab 01) Where a GPU model's curve drops as `vary` grows through `sizes`: {cause: the size after each drop}.

    A drop: the fraction of peak at sizes[i + 1] is under `keep` x the one at sizes[i] (the plot's test). It is
    charged to whichever of simt's factors fell most between the two: "padding" (useful / computed work, the
    partial row block or tile), "waves" (tiles / wave slots: a wave left part-empty) or "alignment" (N or K
    no longer whole 16-byte rows, UNALIGNED_EFFICIENCY).
    """
    _check_model(model)
    if model not in GPUS:
        raise ValueError(f"{model} is an MXU: drop causes come from simt's padding and wave factors, so use a GPU "
                         f"model, one of {', '.join(GPUS)}")
    if vary not in _FIXED:
        raise ValueError(f"vary must be 'M', 'N' or 'K', got {vary!r}")
    if not 0 < keep <= 1:
        raise ValueError(f"keep must be in (0, 1] (0.98: a drop of more than 2%), got {keep!r}")
    preds = _gpu_sweep(model, sizes, vary)
    out: dict[str, list[int]] = {"padding": [], "waves": [], "alignment": []}
    for a, b in zip(preds, preds[1:]):
        if b.fraction_of_peak >= keep * a.fraction_of_peak:
            continue
        fell = {"padding": b.padding_efficiency / a.padding_efficiency,  # each factor's new / old value
                "waves": b.wave_efficiency / a.wave_efficiency,
                "alignment": (simt.UNALIGNED_EFFICIENCY if a.aligned and not b.aligned else 1.0)}
        out[min(fell, key=fell.__getitem__)].append(int(getattr(b, vary)))
    return out


def h100_unaligned_ratios(source: str = H100_SOURCE) -> dict[tuple[int, int, int], float]:
    """(Lab 01) cuBLAS's speed at each 2^k + 1 shape of the committed H100 sweep over its 2^k neighbour's.

    Keys are the unaligned (M, N, K); each value is its TFLOP/s over the shape with every 2^k + 1 size one
    smaller, timed in the same sweep of shapes.json (N, K and square: the pairs simt.UNALIGNED_EFFICIENCY is the
    median of).
    """
    if source != H100_SOURCE:
        raise ValueError(f"only the sweep {H100_SOURCE} times its pairs in one sweep each; got {source!r}")
    data = json.loads(_committed(source).read_text())
    odd = lambda x: x > 2 and (x - 1) & (x - 2) == 0  # noqa: E731  2^k + 1, k >= 1
    out = {}
    for rows in data["sweeps"].values():  # a pair is timed within one sweep, under the same conditions
        tf = {(int(r["M"]), int(r["N"]), int(r["K"])): float(r["measured_tflops"]) for r in rows}
        for shape, t in tf.items():
            even = tuple(x - 1 if odd(x) else x for x in shape)
            if even != shape and even in tf:
                out[shape] = t / tf[even]
    return out


def _committed(source: str) -> Path:
    """The committed run's file, or a clear error when labkit was installed without the repository."""
    path = ROOT / source
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: the committed H100 runs come with the course's repository "
                                "(git clone it; a pip-installed labkit carries no benchmarks/)")
    return path


def h100_cublas(source: str = H100_SOURCE) -> dict[tuple[int, int, int], float]:
    """(Lab 01) cuBLAS's TFLOP/s (torch bf16) by (M, N, K) from a committed H100 run, the sweep or the probe."""
    if source not in H100_SOURCES:
        raise ValueError(f"unknown source {source!r}: use one of {', '.join(H100_SOURCES)}")
    data = json.loads(_committed(source).read_text())
    # A shape timed in several sweeps (4096^3: batch, N, K and square) keeps the last one's figure (square's).
    if "sweeps" in data:  # bench_shapes.py: sweeps of rows, each with measured_tflops
        rows = [(r["M"], r["N"], r["K"], r["measured_tflops"]) for sweep in data["sweeps"].values() for r in sweep]
    else:                 # probe_shapes.py: points with torch_tflops (and jax_tflops)
        rows = [(r["M"], r["N"], r["K"], r["torch_tflops"]) for r in data["points"]]
    return {(int(m), int(n), int(k)): float(t) for m, n, k, t in rows}


def measured_over_model(measured: Mapping[tuple[int, int, int], float],
                        model: str | tuple[Any, str] = "H100 (bf16)", schedule: str = "tiles") -> np.ndarray:
    """(Lab 01) Measured TFLOP/s over simt's prediction for each (M, N, K): above 1, the model is no bound.

    model is a key of GPUS or a (chip, dtype) pair for any GPU simt can model (a ChipSpec or a spec name:
    Lab 01 passes the GPU it runs on).
    """
    if isinstance(model, tuple) and len(model) == 2:
        chip, dtype = model  # simt.predict names a chip it cannot model (no SMs, no such dtype peak)
    elif isinstance(model, str) and model in GPUS:
        chip, dtype = GPUS[model]
    else:
        raise ValueError(f"{model!r} is not a GPU model: use one of {', '.join(GPUS)} or a (chip, dtype) pair")
    if not measured:
        raise ValueError("measured is empty: pass {(M, N, K): TFLOP/s, ...}, e.g. h100_cublas()")
    for shape, tflops in measured.items():
        if not (isinstance(shape, tuple) and len(shape) == 3):
            raise ValueError(f"measured's keys are (M, N, K) triples, got {shape!r}")
        if isinstance(tflops, bool) or not isinstance(tflops, (int, float)) or not tflops > 0:
            raise ValueError(f"measured TFLOP/s for {shape} must be a positive number, got {tflops!r}")
    return np.array([tflops / simt.predict(m, n, k, chip, dtype, schedule=schedule).predicted_tflops
                     for (m, n, k), tflops in measured.items()])


def schedule_ratios(measured: Mapping[tuple[int, int, int], float],
                    model: str | tuple[Any, str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(Lab 01) measured_over_model for every simt schedule, and which shapes the model counts as aligned.

    The mask is False where simt applies UNALIGNED_EFFICIENCY (a factor fitted on one H100's cuBLAS), so a
    bound is judged on the aligned shapes, where the model uses only the chip's spec figures.
    """
    ratios = {s: measured_over_model(measured, model, schedule=s) for s in simt.SCHEDULES}
    dtype = GPUS[model][1] if isinstance(model, str) else model[1]
    aligned = np.array([simt.is_aligned(n, k, dtype) for _, n, k in measured])  # what predict() calls aligned
    return ratios, aligned


def l2_resident(shapes: Sequence[tuple[int, int, int]], dtype: str = "bf16",
                l2_bytes: float = H100_L2_BYTES) -> np.ndarray:
    """(Lab 01) For each (M, N, K): whether A, B and C together fit in the L2 (an H100's by default).

    Called back to back on the same inputs (the probe), such a GEMM reads its operands from L2, not DRAM:
    its figure says nothing about the DRAM roof. Fresh inputs every call (the sweep) come from DRAM.
    """
    if not l2_bytes > 0:
        raise ValueError(f"l2_bytes must be a positive number of bytes, got {l2_bytes!r}")
    return np.array([simt.gemm_bytes(m, n, k, dtype) <= l2_bytes for m, n, k in shapes], dtype=bool)
