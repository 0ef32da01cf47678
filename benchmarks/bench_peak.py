"""Benchmark (Lab 00): does Lab 00's measured matmul peak reach what torch itself reaches here?

Not a test (timings depend on the machine). Run it on the runtime you want to measure:

    .venv/bin/python benchmarks/bench_peak.py                  # full: Lab 00's sizes, bf16 on a GPU
    .venv/bin/python benchmarks/bench_peak.py --profile smoke  # CPU-sized: checks the script works

Lab 00's number is ``roofline.matmul_sweep`` (JAX and torch, fresh inputs, back-to-back calls
on an accelerator, median) and its best point. The reference is torch's own benchmarking tool,
``torch.utils.benchmark.Timer.blocked_autorange`` on the same shapes and dtype with fixed inputs:
the best large-matmul throughput torch reaches on this device. Goal (issue 2): Lab 00's peak is at
least 90% of the reference.

Bandwidth the same way (issue 15): Lab 00's figure is ``roofline.measured_bandwidth`` over its probes
(read-only and read+write, JAX and torch, median); the reference is torch's own device-to-device
``copy_`` of the same buffer timed by ``blocked_autorange``. Goal: Lab 00's bandwidth is at least
90% of that copy rate. Writes benchmarks/results/peak_<device>_<host>.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import socket
import time
from pathlib import Path

from _results import default_path
from labkit.runtime import device, versions
from labkit.measure import roofline

GOAL = 0.90
PROFILES = {"full": dict(sizes=(2048, 4096, 8192), repeats=20, stream_mib=1024),
            "smoke": dict(sizes=(256, 512), repeats=5, stream_mib=64)}



def torch_reference(n: int, dtype: str, tdev: object) -> float:
    """(Lab 00) FLOP/s of an n^3 matmul by torch.utils.benchmark's blocked_autorange (median)."""
    import torch
    from torch.utils import benchmark

    dt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    a = torch.randn(n, n, device=tdev).to(dt)
    b = torch.randn(n, n, device=tdev).to(dt)
    for _ in range(3):  # warm-up: cuBLAS heuristics, clocks
        torch.matmul(a, b)
    m = benchmark.Timer("torch.matmul(a, b)", globals={"torch": torch, "a": a, "b": b},
                        num_threads=torch.get_num_threads()).blocked_autorange(min_run_time=1.0)
    return 2 * n**3 / m.median


def torch_copy_reference(n_elements: int, tdev: object) -> float:
    """(Lab 00) bytes/s (read + write) of torch's fp32 device-to-device ``copy_`` by blocked_autorange (median)."""
    import torch
    from torch.utils import benchmark

    x = torch.randn(n_elements, device=tdev)
    out = torch.empty_like(x)
    for _ in range(3):
        out.copy_(x)
    m = benchmark.Timer("out.copy_(x)", globals={"out": out, "x": x},
                        num_threads=torch.get_num_threads()).blocked_autorange(min_run_time=1.0)
    return 2 * 4 * n_elements / m.median


def main() -> None:
    """Measure Lab 00's peak and torch's reference on the same shapes; write the ratio."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", choices=list(PROFILES), default="full")
    ap.add_argument("--out", type=Path, help="JSON path (default benchmarks/results/peak_<device>_<host>.json)")
    args = ap.parse_args()
    p = PROFILES[args.profile]
    rt = device.detect()
    tdev = device.torch_device()
    if tdev.type not in ("cpu", "cuda"):
        raise SystemExit(f"torch.utils.benchmark times CPU and CUDA; torch here runs on {tdev.type}")
    dtype = "fp32" if rt.platform == "cpu" else ("bf16" if rt.bf16 else "fp16")
    lab = {fw: roofline.matmul_sweep(fw, p["sizes"], dtype, p["repeats"], device=tdev) for fw in ("jax", "torch")}
    lab_best = {fw: roofline.best(pts).flops_per_s for fw, pts in lab.items()}
    ref = {n: torch_reference(n, dtype, tdev) for n in p["sizes"]}
    ref_best = max(ref.values())
    best_lab = max(lab_best.values())
    n_stream = p["stream_mib"] * 2**20 // 4  # fp32 elements, as Lab 00
    probes = roofline.bandwidth_probes(n_stream, "fp32", tdev, p["repeats"])
    bw_lab = roofline.measured_bandwidth(probes)
    bw_ref = torch_copy_reference(n_stream, tdev)
    result = {
        "benchmark": "peak", "profile": args.profile, "date": time.strftime("%Y-%m-%d"), "device": rt.chip,
        "platform": rt.platform, "dtype": dtype, "host": socket.gethostname(), "versions": versions.collect(),
        "lab00_tflops": {fw: {pt.name: pt.flops_per_s / 1e12 for pt in pts} for fw, pts in lab.items()},
        "lab00_best_tflops": {fw: v / 1e12 for fw, v in lab_best.items()},
        "torch_blocked_autorange_tflops": {f"matmul {n}x{n}x{n}": v / 1e12 for n, v in ref.items()},
        "reference_best_tflops": ref_best / 1e12,
        "lab00_over_reference": best_lab / ref_best, "goal": GOAL, "meets_goal": best_lab / ref_best >= GOAL,
        "lab00_bandwidth_probes_gbs": {f"{q.framework} {q.name}": q.bytes_per_s / 1e9 for q in probes},
        "lab00_bandwidth_gbs": bw_lab / 1e9, "torch_copy_blocked_autorange_gbs": bw_ref / 1e9,
        "bandwidth_over_reference": bw_lab / bw_ref, "bandwidth_meets_goal": bw_lab / bw_ref >= GOAL,
    }
    out = args.out or default_path("peak", rt.chip)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: result[k] for k in ("device", "dtype", "lab00_best_tflops", "reference_best_tflops",
                                              "lab00_over_reference", "meets_goal", "lab00_bandwidth_gbs",
                                              "torch_copy_blocked_autorange_gbs", "bandwidth_over_reference")}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
