"""Benchmark (Lab 01): GEMMs at the edges Lab 01 teaches, torch (cuBLAS) and JAX (XLA), one GPU.

Not a test (timings depend on the machine). Run it on the GPU you want to measure:

    .venv/bin/python benchmarks/probe_shapes.py                  # this GPU, bf16 (fp16 where no bf16)
    .venv/bin/python benchmarks/probe_shapes.py --profile smoke  # CPU-sized (shapes / 16, fp32): checks the script
    .venv/bin/python benchmarks/probe_shapes.py --hlo            # also print what XLA compiles N = 129 to

The shapes: M 1024 / 1025 / 1152 and 2048 / 2049 / 2176 (the edge of the H100 model's first and second
wave, one past it, the next 128-row tile), M 512, 640, 4224, batch 1 and 16; N 128 / 129 / 136 and
4096 / 4097 / 4104 (aligned, one past, the next multiple of 8); K 4097; 5120^3. Timing is Lab 00's
(``labkit.measure.roofline.matmul_torch`` / ``matmul_jax``: ``bench.TIMING_RULE``, back-to-back calls
per repeat on an accelerator), so the figures compare with ``bench_shapes.py``'s sweep and with Lab 01's
own measurements. The first committed probe (2026-11-26, ``nvidia-h100-80gb-hbm3/shape_probe.json``) was
taken by another rule, best of 5 x 50 calls on the same inputs; each file's ``method`` names its rule.

Writes the schema ``labkit.matmul.reference_chips.h100_cublas`` reads: device, date, versions, dtype,
method, made_by and ``points`` [{M, N, K, torch_tflops, jax_tflops}], to --out (default
benchmarks/results/shape_probe_<device>_<host>.json).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _results import default_path
from labkit.measure import bench, roofline
from labkit.runtime import device, versions

B = 4096  # elements: the dimensions a shape does not vary
SHAPES = [(1024, B, B), (1025, B, B), (1152, B, B), (2048, B, B), (2049, B, B), (2176, B, B), (512, B, B),
          (640, B, B), (1, B, B), (16, B, B), (B, 128, B), (B, 129, B), (B, 136, B), (B, B, B), (B, 4097, B),
          (B, 4104, B), (B, B, 4097), (5120, 5120, 5120), (B + 128, B, B)]  # (M, N, K)
PROFILES = {"full": dict(scale=1, repeats=10), "smoke": dict(scale=16, repeats=3)}


def probe_shapes(scale: int) -> list[tuple[int, int, int]]:
    """(Lab 01) The probe's (M, N, K), each dimension divided by ``scale`` (at least 1)."""
    return [(max(m // scale, 1), max(n // scale, 1), max(k // scale, 1)) for m, n, k in SHAPES]


def xla_n129(dtype: str) -> str:
    """(Lab 01) The lines of XLA's compiled (4096, 4096) @ (4096, 129) that pad, fuse or call a library."""
    import jax
    import jax.numpy as jnp

    dt = {"bf16": jnp.bfloat16, "fp16": jnp.float16, "fp32": jnp.float32}[dtype]
    text = jax.jit(lambda a, b: a @ b).lower(jnp.zeros((B, B), dt), jnp.zeros((B, 129), dt)).compile().as_text()
    return "\n".join(line for line in text.splitlines()
                     if "pad" in line or "custom-call" in line or ("fusion" in line and "kind" in line))


def main() -> None:
    """Time every probe shape in torch and JAX, print a table, write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--profile", choices=list(PROFILES), default="full")
    ap.add_argument("--hlo", action="store_true", help="print what XLA compiles the N = 129 shape to")
    ap.add_argument("--out", type=Path, help="JSON path (default benchmarks/results/shape_probe_<device>_<host>.json)")
    args = ap.parse_args()
    p = PROFILES[args.profile]
    rt, tdev = device.detect(), device.torch_device()
    if rt.platform != "gpu" and args.profile == "full":
        raise SystemExit(f"this probe times a GPU's GEMMs; this runtime is {rt.platform} ({rt.chip}). "
                         "Run it on a GPU, or pass --profile smoke to check the script here.")
    dtype = ("bf16" if rt.bf16 else "fp16") if rt.platform == "gpu" else "fp32"  # CPU bf16 is emulated: smoke only
    points = []
    for m, n, k in probe_shapes(p["scale"]):
        tf = {"torch": roofline.matmul_torch(m, n, k, dtype, tdev, p["repeats"]).flops_per_s / 1e12,  # TFLOP/s
              "jax": roofline.matmul_jax(m, n, k, dtype, p["repeats"]).flops_per_s / 1e12}  # median repeat
        points.append({"M": m, "N": n, "K": k, "torch_tflops": tf["torch"], "jax_tflops": tf["jax"]})
        print(f"M={m:5d} N={n:5d} K={k:5d}  torch {tf['torch']:8.2f}  jax {tf['jax']:8.2f} TFLOP/s", flush=True)
    if args.hlo:
        print(xla_n129(dtype))
    result = {"device": rt.chip, "date": time.strftime("%Y-%m-%d"), "versions": versions.collect(), "dtype": dtype,
              "profile": args.profile, "method": f"{bench.TIMING_RULE} (labkit.measure.roofline.matmul_torch / "
              "matmul_jax: back-to-back calls per repeat on an accelerator); FLOPs 2*M*N*K",
              "made_by": "benchmarks/probe_shapes.py", "points": points}
    out = args.out or default_path("shape_probe", rt.chip)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
