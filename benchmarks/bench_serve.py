"""Benchmark: serving the course GPT with a KV cache — TTFT, per-token latency and tokens/s vs batch.

Not a test (timings depend on the machine). Run it on the runtime you want to measure:

    .venv/bin/python benchmarks/bench_serve.py                  # full profile: the "small" GPT
    .venv/bin/python benchmarks/bench_serve.py --profile smoke  # a CPU-sized check that the script works

Paths (labkit.export.serve, labkit.export.cuda_graph): torch eager, torch.compile (on CUDA;
``--torch-compile on`` elsewhere), the static-cache decoder (on CUDA: the step replayed as a CUDA
graph, eager ops and torch.compile'd; on a CPU: the same static buffers without graphs),
torch.export, JAX jit, and the StableHLO artifact (jax.export, deserialized) — all fp32, the
same weights, greedy decoding, checked to give the same tokens before any timing. JAX runs on its
default device, torch on CUDA if present else the CPU. Writes
benchmarks/results/serve_<device>_<host>.json with device, versions, config and p50/p95 TTFT and
TPOT (ms) and tokens/s per path and batch.

Goal (issue 18 §3, one H100-class GPU): the best torch path reaches >= 90% of JAX jit's tokens/s
at batch 32 and at batch 1 (within 10%). The ratio is reported on every device; "met" is judged
only where torch runs on CUDA (on a CPU it is null: the goal is about GPU launch overhead).
"""

from __future__ import annotations

import argparse
import json
import socket
import time
from dataclasses import asdict
from pathlib import Path

import labkit
from _results import default_path
from labkit.export import cuda_graph, routes as export, stablehlo as export_hlo, serve
from labkit.runtime import versions
from labkit.gpt.flax_model import FlaxGPT
from labkit.gpt.convert import flax_to_torch, flat_params_numpy
from labkit.gpt.config import get_config

GOAL = 0.90  # best torch path tokens/s / JAX jit tokens/s, on the same GPU (issue 18 §3)
GOAL_BATCHES = (1, 32)
PROFILES = {  # model, batch sizes, prompt and generated tokens, timed generations per point
    "full": dict(model="small", overrides={}, batches=(1, 8, 32, 64), prompt=64, new=64, repeats=10),
    "smoke": dict(model="test", overrides={"d_model": 64, "n_head": 4, "seq_len": 64}, batches=(1, 4, 32),
                  prompt=16, new=16, repeats=3),
}



def main() -> None:
    """(Lab 05) Build every serving path, sweep batch sizes, print a table and write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", choices=list(PROFILES), default="full")
    ap.add_argument("--batches", type=int, nargs="+", help="batch sizes (default: the profile's)")
    ap.add_argument("--torch-compile", choices=("auto", "on", "off"), default="auto",
                    help="auto: on with CUDA, off on a CPU (Inductor's C++ compile takes minutes there)")
    ap.add_argument("--out", type=Path, help="JSON path (default benchmarks/results/serve_<device>_<host>.json)")
    args = ap.parse_args()

    rt = labkit.setup()
    import jax
    import torch
    from flax import nnx

    from labkit.runtime import device

    prof = PROFILES[args.profile]
    cfg = get_config(prof["model"], **prof["overrides"])
    batches = tuple(args.batches or prof["batches"])
    tdev = torch.device("cuda" if device.torch_device_kind() == "cuda" else "cpu")
    compile_torch = {"on": True, "off": False, "auto": tdev.type == "cuda"}[args.torch_compile]
    if tdev.type == "cpu":
        torch.set_num_threads(1)  # steady timings on a shared CPU: a decode step is too small to split
    fm = FlaxGPT(cfg, rngs=nnx.Rngs(0))  # values do not change the speed; the shapes do
    flat = flat_params_numpy(fm)
    tm = flax_to_torch(fm).to(tdev).eval()
    print(f"{rt.chip}: JAX on {jax.devices()[0].platform}, torch on {tdev.type}; {cfg}")

    build_s: dict[str, float] = {}
    t0 = time.perf_counter()
    program = export.export_torch_step(tm)
    build_s["torch.export"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with jax.default_matmul_precision("highest"):  # fp32 like torch (TF32 off by default)
        artifact = jax.export.deserialize(export_hlo.export_step(cfg).serialize())
    build_s["StableHLO"] = time.perf_counter() - t0
    decoders = [serve.TorchDecoder(tm, "eager", device=tdev)]
    if compile_torch:
        decoders.append(serve.TorchDecoder(tm, "compile", device=tdev))
    # static KV cache: a CUDA graph per shape on CUDA, plain static buffers on a CPU
    decoders.append(cuda_graph.StaticTorchDecoder(tm, device=tdev))
    if compile_torch and tdev.type == "cuda":
        decoders.append(cuda_graph.StaticTorchDecoder(tm, compiled=True, device=tdev))
    decoders += [serve.TorchDecoder(tm, "export", device=tdev, program=program),
                 serve.JaxDecoder.native(cfg, flat),
                 serve.JaxDecoder.from_exported(artifact, cfg, flat)]

    # Same greedy tokens on every path before any timing: a fast wrong server is no server.
    check = serve.left_pad(["ROMEO:", "JULIET:\nO Romeo"], cfg, 8)
    ref = serve.generate(decoders[0], check, 8).tokens
    for d in decoders[1:]:
        assert (serve.generate(d, check, 8).tokens == ref).all(), f"{d.name} generates different tokens"

    stats = []
    for d in decoders:
        for b in batches:
            t0 = time.perf_counter()
            s = serve.benchmark(d, b, prof["prompt"], prof["new"], repeats=prof["repeats"])
            stats.append(s)
            print(f"{s.path:14s} batch {b:4d}  TTFT p50 {s.ttft_p50_ms:8.2f} ms  p95 {s.ttft_p95_ms:8.2f}  "
                  f"TPOT p50 {s.tpot_p50_ms:7.3f} ms  p95 {s.tpot_p95_ms:7.3f}  {s.tokens_per_s:10.0f} tok/s  "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)

    goal = []
    on_gpu = rt.platform == "gpu" and tdev.type == "cuda"
    for b in GOAL_BATCHES:
        cmp = serve.torch_over_jax(stats, b)
        if cmp is None:
            continue
        cmp.pop("by_path")
        ratio = cmp["best_torch_over_jax"]
        goal.append({**cmp, "goal": GOAL, "met": (ratio >= GOAL) if on_gpu else None})
        print(f"batch {b}: best torch path {cmp['best_torch_path']} / JAX jit = {ratio:.0%} (goal >= {GOAL:.0%} on a GPU"
              f"{'' if on_gpu else '; not judged here'})")
    result = {
        "device": rt.chip, "platform": rt.platform, "torch_device": tdev.type, "host": socket.gethostname(),
        "date": time.strftime("%Y-%m-%d"), "profile": args.profile, "versions": versions.collect(),
        "model": {"name": prof["model"], "config": asdict(cfg)}, "dtype": "fp32", "decoding": "greedy",
        "prompt_tokens": prof["prompt"], "new_tokens": prof["new"], "repeats": prof["repeats"],
        "torch_compile": compile_torch if compile_torch else "skipped (CPU: Inductor compile takes minutes)",
        "torch_threads": torch.get_num_threads(), "build_s": build_s,
        "results": [s.row() for s in stats], "goal": goal,
    }
    out = args.out or default_path("serve", rt.chip)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
