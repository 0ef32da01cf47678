"""Benchmark (Lab 01): a GPU's measured matmul shape sweep beside labkit.matmul.simt's prediction.

Not a test (timings depend on the machine). Run it on the GPU you want to measure:

    .venv/bin/python benchmarks/bench_shapes.py                 # this GPU, bf16 (fp16 where no bf16)
    .venv/bin/python benchmarks/bench_shapes.py --profile smoke  # CPU-sized: checks the script works
    .venv/bin/python benchmarks/bench_shapes.py --rescore benchmarks/<device>/shapes.json
                                                  # today's model beside a committed measurement

Four sweeps, all through torch.matmul (cuBLAS) with Lab 00's timing (warm-up, sync, fresh inputs,
median): batch M with N = K = base; N and K around tile edges with the other two at base; and
square n x n x n across wave boundaries. Each point is set beside ``simt.predict`` for this chip
(from labkit.runtime.hardware) and the error is stated two ways:

- absolute: measured fraction of the spec peak minus the predicted one (percentage points);
- shape: each curve over its own best point, as Lab 01 plots it (what the model is for: *which*
  shapes are slow, not the absolute speed that cuBLAS's kernel choice and clocks set).

Writes JSON (and a PNG of the sweeps) to --out, default benchmarks/results/shapes_<device>_<host>.json.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np

from _results import default_path
from labkit.runtime import device, hardware, versions
from labkit.measure import roofline
from labkit.matmul import simt

PROFILES = {
    "full": dict(base=4096, repeats=10,
                 batch=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192),
                 edge=(128, 129, 192, 256, 257, 384, 512, 513, 1024, 1025, 2048, 2049, 4096, 4097),
                 square=(1024, 2048, 3072, 4096, 4097, 5120, 6144, 7168, 8192, 8193)),
    "smoke": dict(base=256, repeats=3, batch=(1, 16, 256), edge=(128, 129, 256), square=(128, 256)),
}



def shapes(p: dict[str, Any]) -> dict[str, list[tuple[int, int, int]]]:
    """(Lab 01) The (M, N, K) of each sweep."""
    b = p["base"]
    return {
        "batch M": [(m, b, b) for m in p["batch"]],
        "N": [(b, n, b) for n in p["edge"]],
        "K": [(b, b, k) for k in p["edge"]],
        "square": [(n, n, n) for n in p["square"]],
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, float]:
    """(Lab 01) The model's error over a sweep: absolute (points of peak) and shape (own-best normalised)."""
    meas = np.array([r["measured_fraction"] for r in rows])
    pred = np.array([r["predicted_fraction"] for r in rows])
    abs_err = meas - pred
    shape_err = meas / meas.max() - pred / pred.max()
    rel_time = np.array([r["predicted_s"] / r["measured_s"] for r in rows])  # < 1: model optimistic
    return {
        "mean_abs_error_pts": float(np.abs(abs_err).mean() * 100),
        "max_abs_error_pts": float(np.abs(abs_err).max() * 100),
        "mean_shape_error_pts": float(np.abs(shape_err).mean() * 100),
        "max_shape_error_pts": float(np.abs(shape_err).max() * 100),
        "median_predicted_over_measured_time": float(np.median(rel_time)),
    }


def plot(sweeps: dict[str, list[dict[str, Any]]], chip: str, dtype: str, path: Path) -> None:
    """(Lab 01) Measured vs predicted fraction of peak, one panel per sweep."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(sweeps), figsize=(4.2 * len(sweeps), 3.8), sharey=True)
    for ax, (name, rows) in zip(axes, sweeps.items()):
        key = {"batch M": "M", "N": "N", "K": "K", "square": "M"}[name]
        xs = [r[key] for r in rows]
        ax.plot(xs, [r["measured_fraction"] for r in rows], "o-", label="measured (torch/cuBLAS)")
        ax.plot(xs, [r["predicted_fraction"] for r in rows], "s--", label="labkit.matmul.simt")
        ax.set_xscale("log", base=2)
        ax.set_title(f"vary {name}")
        ax.set_xlabel(key)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"fraction of spec {dtype} peak")
    axes[0].legend()
    fig.suptitle(f"{chip}: measured matmul vs the tiled-GEMM model")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def predicted_fields(m: int, n: int, k: int, spec: Any, dtype: str) -> dict[str, Any]:
    """(Lab 01) The model's columns of one sweep row."""
    pred = simt.predict(m, n, k, spec, dtype)
    return {"predicted_s": pred.predicted_time_s, "predicted_tflops": pred.predicted_tflops,
            "predicted_fraction": pred.fraction_of_peak, "bound": pred.bound, "waves": pred.waves,
            "wave_efficiency": pred.wave_efficiency, "padding_efficiency": pred.padding_efficiency,
            "aligned": pred.aligned}


def rescore(path: Path, out: Path | None) -> None:
    """Re-predict a committed measurement with today's labkit.matmul.simt; measured columns unchanged."""
    result = json.loads(path.read_text())
    if result.get("benchmark") != "shapes" or "sweeps" not in result:
        raise SystemExit(f"{path} is not a bench_shapes.py result (no 'sweeps'); pass its shapes.json")
    spec = hardware.lookup(result["modelled_chip"])
    if spec is None:
        raise SystemExit(f"labkit.runtime.hardware no longer knows {result['modelled_chip']!r}")
    for rows in result["sweeps"].values():
        for r in rows:
            r.update(predicted_fields(r["M"], r["N"], r["K"], spec, result["dtype"]))
    result["errors"] = {name: summarize(rows) for name, rows in result["sweeps"].items()}
    result["errors"]["all"] = summarize([r for rows in result["sweeps"].values() for r in rows])
    result["tiling"] = str(simt.default_tiling(spec, result["dtype"]))
    result["model_rescored"] = {"date": time.strftime("%Y-%m-%d"),
                                "unaligned_efficiency": simt.UNALIGNED_EFFICIENCY}
    out = out or path
    out.write_text(json.dumps(result, indent=2))
    plot(result["sweeps"], spec.name, result["dtype"], out.with_suffix(".png"))
    report(result["errors"])
    print(f"wrote {out}")


def report(errors: dict[str, dict[str, float]]) -> None:
    """Print the model's error per sweep."""
    for name, e in errors.items():
        print(f"{name:>8}: |measured - model| mean {e['mean_abs_error_pts']:.1f} pts (max {e['max_abs_error_pts']:.1f}); "
              f"shape error mean {e['mean_shape_error_pts']:.1f} pts (max {e['max_shape_error_pts']:.1f}); "
              f"median predicted/measured time {e['median_predicted_over_measured_time']:.2f}")


def main() -> None:
    """Measure the sweeps on this device's torch and write them beside the model's prediction."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", choices=list(PROFILES), default="full")
    ap.add_argument("--chip", help="spec-table chip to model (default: this GPU; on a CPU: NVIDIA H100 SXM)")
    ap.add_argument("--out", type=Path, help="JSON path (default benchmarks/results/shapes_<device>_<host>.json)")
    ap.add_argument("--rescore", type=Path, help="a committed shapes.json: re-predict it, measure nothing")
    args = ap.parse_args()
    if args.rescore:
        return rescore(args.rescore, args.out)
    p = PROFILES[args.profile]
    rt = device.detect()
    tdev = device.torch_device()
    if rt.platform != "gpu" and args.profile == "full":
        raise SystemExit(f"this benchmark models GPUs; this runtime is {rt.platform} ({rt.chip}). "
                         "Run it on a CUDA GPU, or use --profile smoke to check the script on a CPU.")
    chip_name = args.chip or (rt.chip if rt.platform == "gpu" else "NVIDIA H100 SXM")
    spec = hardware.lookup(chip_name)
    if spec is None or not spec.sm_count:
        raise SystemExit(f"labkit.runtime.hardware has no GPU entry for {chip_name!r}; pass --chip with a "
                         "name from labkit.runtime.hardware (e.g. 'NVIDIA H100 SXM')")
    dtype = "bf16" if spec.peak("bf16") and rt.bf16 else "fp16"
    measure_dtype = dtype if rt.platform == "gpu" else "fp32"  # CPU bf16 is emulated: smoke only
    peak = spec.peak(dtype)
    sweeps: dict[str, list[dict[str, Any]]] = {}
    for name, shp in shapes(p).items():
        rows = []
        for m, n, k in shp:
            pt = roofline.matmul_torch(m, n, k, measure_dtype, tdev, p["repeats"])
            rows.append({"M": m, "N": n, "K": k, "measured_s": pt.timing.median_s, "measured_tflops": pt.flops_per_s / 1e12,
                         "measured_fraction": pt.flops_per_s / peak, **predicted_fields(m, n, k, spec, dtype)})
            r = rows[-1]
            print(f"{name:>8} {m:>5}x{n:>5}x{k:>5}: measured {r['measured_fraction']:6.1%}  "
                  f"model {r['predicted_fraction']:6.1%} ({r['bound']}, {r['waves']} waves)", flush=True)
        sweeps[name] = rows
    errors = {name: summarize(rows) for name, rows in sweeps.items()}
    errors["all"] = summarize([r for rows in sweeps.values() for r in rows])
    result = {
        "benchmark": "shapes", "profile": args.profile, "date": time.strftime("%Y-%m-%d"),
        "device": rt.chip, "platform": rt.platform, "modelled_chip": spec.name, "dtype": dtype,
        "measured_dtype": measure_dtype, "spec_peak_tflops": peak / 1e12, "tiling": str(simt.default_tiling(spec, dtype)),
        "host": socket.gethostname(), "versions": versions.collect(), "sweeps": sweeps, "errors": errors,
    }
    out = args.out or default_path("shapes", rt.chip)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    plot(sweeps, spec.name, dtype, out.with_suffix(".png"))
    report(errors)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
