"""Benchmark (Lab 04): training step time and memory of the course GPT per precision.

Not a test (timings flake on a busy machine). Runs the JAX and PyTorch loops of
``labkit.precision.train`` in fp32 without TF32 ("fp32 highest": the honest fp32 baseline),
fp32 with TF32 allowed, bf16 (fp32 master weights) and fp16 with dynamic loss scaling, and
writes benchmarks/results/precision_<device>_<host>.json with the device and library versions:

    .venv/bin/python benchmarks/bench_precision.py                   # full profile (accelerator)
    .venv/bin/python benchmarks/bench_precision.py --profile smoke   # tiny model, CPU-friendly

Lab 04's goal on an H100-class GPU (issue 17): the bf16 step at least 2x the TF32 step in both
frameworks (and far more than true fp32). The full profile is Lab 04's full timing model: GPT-2
small's shape on bytes, 16 x 512 tokens -- compute-bound on an H100 and, by
labkit.precision.speed.memory_estimate, under 16 GB even in fp32 (a T4 / TPU v5e).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import time
from pathlib import Path
from typing import Any

import labkit
from labkit.measure import flops, xla_breakdown
from labkit.runtime import hardware, versions
from labkit.precision import speed
from labkit.precision import train as precision_train
from labkit.gpt.data import ByteTokenizer, load_corpus
from labkit.gpt.config import get_config, n_params

# (model config, overrides, batch, steps): "full" is Lab 04's full timing model (Sizes.speed);
# "smoke" is the tiny test model for a CPU.
PROFILES = {
    "full": ("gpt2-small", {"vocab_size": 256, "seq_len": 512}, 16, 30),
    "smoke": ("test", {}, 8, 20),
}
# name in the report -> (training precision, fp32_matmul setting)
VARIANTS = {
    "fp32_highest": ("fp32", "highest"),
    "fp32_tf32": ("fp32", "tf32"),
    "bf16": ("bf16", "default"),
    "fp16_scaled": ("fp16_scaled", "default"),
}


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


def _device_time(r: Any, cfg: Any, batch: int, chip: str, variant: str) -> dict[str, Any] | None:
    """The traced JAX steps' device time by op category and pass, and where the step went (issue 17)."""
    if r.device_time is None:
        return None
    dtype = {"fp32_highest": "fp32", "fp32_tf32": "tf32", "bf16": "bf16", "fp16_scaled": "fp16"}.get(variant)
    try:  # the datasheet peak of the dtype the matmuls ran in, where labkit.runtime.hardware knows the chip
        peak = hardware.peak_flops(chip, dtype) if dtype else None
    except (hardware.UnknownChipError, hardware.UnsupportedDtypeError):
        peak = None
    mm = flops.flops_per_step(cfg, batch, cfg.seq_len, "matmul")  # every matmul FLOP, attention included
    return xla_breakdown.report(r.device_time, r.step_time_s, mm, peak, f"the datasheet {dtype} peak of {chip}")


def main() -> None:
    """(Lab 04) Time every precision variant in both frameworks and write the JSON result."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=("auto", *PROFILES), default="auto")
    ap.add_argument("--frameworks", nargs="+", default=["jax", "torch"], choices=["jax", "torch"])
    ap.add_argument("--steps", type=int, default=None, help="override the profile's step count")
    ap.add_argument("--no-breakdown", action="store_true",
                    help="skip tracing 3 more JAX steps per variant (device time by HLO op, 'device_time')")
    ap.add_argument("--out", type=Path, default=None, help="output JSON (default: results/...)")
    args = ap.parse_args()

    rt = labkit.setup(quiet=True)
    profile = args.profile if args.profile != "auto" else ("smoke" if rt.platform == "cpu" else "full")
    name, overrides, batch, steps = PROFILES[profile]
    cfg = get_config(name, **overrides)
    tc_base = dict(steps=args.steps or steps, batch=batch, seq=cfg.seq_len, lr=3e-4, seed=0)
    tokens = ByteTokenizer().encode(load_corpus())
    flat = precision_train.init_flat(cfg, seed=0)

    from labkit.runtime.device import torch_device

    tdev = torch_device()
    torch_ok = not (rt.platform != "cpu" and tdev.type == "cpu")  # no torch-xla: skip torch on TPU
    if profile == "smoke" and rt.platform == "cpu":
        import torch

        torch.set_num_threads(1)  # the tiny model: thread synchronisation costs more than it saves
    plan, why = precision_train.plan(rt.platform, rt.bf16, rt.chip)
    rows = []
    for variant, (prec, fp32_matmul) in VARIANTS.items():
        if prec not in plan:
            print(f"skip {variant}: {why}")
            continue
        timeable, missing = speed.variants_for(rt.platform, rt.bf16)
        if variant == "fp32_tf32" and "tf32" not in timeable:  # e.g. a CPU: TF32 does not exist there
            print(f"skip {variant}: {missing['tf32']}")
            continue
        tc = precision_train.TrainConfig(**tc_base, fp32_matmul=fp32_matmul, trace_steps=0 if args.no_breakdown else 3)
        for fw in args.frameworks:
            if fw == "torch" and not torch_ok:
                continue
            t0 = time.perf_counter()
            if fw == "jax":
                r = precision_train.train_jax(cfg, prec, tokens, tc, flat)
            else:
                r = precision_train.train_torch(cfg, prec, tokens, tc, flat, device=tdev)
            times_ms = sorted(t * 1e3 for t in r.step_times_s)
            rows.append({"framework": fw, "variant": variant, "precision": prec, "fp32_matmul": fp32_matmul,
                         "step_ms_median": r.step_time_s * 1e3, "step_ms_min": times_ms[0],
                         "step_ms_max": times_ms[-1], "tokens_per_s": batch * cfg.seq_len / r.step_time_s,
                         "final_loss": r.final_loss(), "skipped_steps": r.skipped,
                         "memory_bytes": r.memory, "measured_bytes": speed.measured_bytes(r.memory),
                         "estimated_bytes": speed.memory_estimate(cfg, batch, cfg.seq_len,
                                                                  4 if prec == "fp32" else 2)["total"],
                         "wall_s": time.perf_counter() - t0,
                         "device_time": _device_time(r, cfg, batch, rt.chip, variant)})
            print(f"{fw:5s} {variant:13s} {r.step_time_s * 1e3:9.2f} ms/step  loss {r.final_loss():.3f}  "
                  f"saved-for-backward {r.memory['saved_for_backward'] / 1e6:8.1f} MB")
            if rows[-1]["device_time"]:
                print(f"      {rows[-1]['device_time']['limited_by']}")

    def speedup(fw: str, num: str, den: str) -> float | None:
        t = {r["variant"]: r["step_ms_median"] for r in rows if r["framework"] == fw}
        return t[num] / t[den] if num in t and den in t else None

    result = {
        "profile": profile,
        "model": {"config": name, **overrides, "n_params": n_params(cfg), "batch": batch,
                  "seq": cfg.seq_len, "steps": tc_base["steps"]},
        "device": {"platform": rt.platform, "chip": rt.chip, "spec": hardware.describe(rt.chip),
                   "bf16_native": rt.bf16, "torch_device": str(tdev)},
        "machine": {"hostname": socket.gethostname(), "platform": platform.platform(),
                    "cpu_count": os.cpu_count()},
        "versions": versions.collect(),
        "date": time.strftime("%Y-%m-%d"),
        "results": rows,
        # the names Lab 04 records: bf16_speedup_vs_fp32_<fw> (true fp32) and bf16_speedup_vs_tf32_<fw>
        **{f"bf16_speedup_vs_fp32_{fw}": speedup(fw, "fp32_highest", "bf16") for fw in args.frameworks},
        **{f"bf16_speedup_vs_tf32_{fw}": speedup(fw, "fp32_tf32", "bf16") for fw in args.frameworks},
        "note": why,
    }
    device = _slug(hardware.describe(rt.chip) if hardware.lookup(rt.chip) else rt.platform)
    out = args.out or Path(__file__).parent / "results" / f"precision_{device}_{_slug(socket.gethostname())}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print({k: v for k, v in result.items() if k.startswith("bf16_speedup")})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
