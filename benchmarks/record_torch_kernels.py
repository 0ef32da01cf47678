"""Record which GPU kernels a PyTorch GPT training step launches, and which aten op launched each.

A fixture recorder, not a speed benchmark: on a CUDA machine it profiles a few training steps of
the course GPT (eager and torch.compile, bf16 autocast) and writes, per kernel, its name, its
device time per step and the stack of CPU ops that were open when it was launched (innermost
first), joined through the profiler's launch correlation id. Lab 02's per-op breakdown is
tested against this file, so that test sees real Hopper kernel names (cuBLAS's ``nvjet_*``,
``sm90_xmma_*``, cutlass, flash / cuDNN attention, Triton ``triton_*`` fusions) without a GPU.

    python benchmarks/record_torch_kernels.py --out tests/measure/fixtures/torch_kernels_h100.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing labkit


def kernels_with_launchers(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """Kernel events of a Chrome trace, each with the CPU ops open at its launch (innermost first)."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    # cudaLaunchKernel is a runtime call; cuBLAS (nvjet), cuDNN and Triton launch through the
    # driver (cuLaunchKernelEx): both carry the correlation id of the kernel they launch.
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    out = []
    for k in (e for e in events if e.get("cat") == "kernel"):
        launch = launches.get(k.get("args", {}).get("correlation"))
        stack: list[str] = []
        if launch is not None:  # ops on the launching thread whose span holds the launch, innermost first
            t = launch["ts"]
            open_ops = [o for o in ops if o["tid"] == launch["tid"] and o["ts"] <= t <= o["ts"] + o["dur"]]
            stack = [o["name"] for o in sorted(open_ops, key=lambda o: o["dur"])]
        out.append({"kernel": k["name"], "us": float(k["dur"]), "launched_by": stack})
    return out


def record(compile: bool, steps: int, batch: int, config: str) -> dict[str, Any]:
    """Profile ``steps`` training steps on CUDA and summarise each distinct (kernel, launcher) pair."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from labkit.gpt.config import get_config
    from labkit.gpt.data import synthetic_tokens
    from labkit.gpt.torch_model import TorchGPT
    from labkit.gpt.train import TorchTrainer

    cfg = get_config(config, vocab_size=256)
    trainer = TorchTrainer(TorchGPT(cfg).cuda(), dtype="bf16", compile=compile)
    tokens = torch.as_tensor(synthetic_tokens(batch * (cfg.seq_len + 1) * 2, cfg.vocab_size, seed=0)).cuda()
    x = tokens[: batch * cfg.seq_len].view(batch, cfg.seq_len).long()
    y = tokens[1: batch * cfg.seq_len + 1].view(batch, cfg.seq_len).long()
    for _ in range(3):  # compile and warm up outside the profile
        trainer.step(x, y)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            trainer.step(x, y)
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        prof.export_chrome_trace(f"{d}/trace.json")
        trace = json.loads(Path(f"{d}/trace.json").read_text())
    rows: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
    for k in kernels_with_launchers(trace):
        key = (k["kernel"], tuple(k["launched_by"][:4]))  # the innermost ops name the launcher
        r = rows.setdefault(key, {"kernel": k["kernel"], "launched_by": list(key[1]), "calls": 0, "us_per_step": 0.0})
        r["calls"] += 1
        r["us_per_step"] += k["us"] / steps
    step_us = sum(r["us_per_step"] for r in rows.values())
    return {"compile": compile, "config": config, "batch": batch, "seq_len": cfg.seq_len, "steps": steps,
            "kernel_us_per_step": step_us, "kernels": sorted(rows.values(), key=lambda r: -r["us_per_step"])}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--config", default="small", help="labkit.gpt.config name (vocab 256)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        sys.exit("record_torch_kernels.py needs a CUDA GPU: the point is the names of real GPU kernels.")
    from labkit.runtime import versions

    result = {"device": torch.cuda.get_device_name(), "versions": versions.collect(),
              "runs": [record(c, args.steps, args.batch, args.config) for c in (False, True)]}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    for run in result["runs"]:
        print(f"compile={run['compile']}: {len(run['kernels'])} (kernel, launcher) pairs, "
              f"{run['kernel_us_per_step'] / 1e3:.2f} ms of kernels per step; top: "
              + ", ".join(f"{r['kernel'][:40]} <- {(r['launched_by'] or ['?'])[0]}" for r in run["kernels"][:4]))


if __name__ == "__main__":
    main()
