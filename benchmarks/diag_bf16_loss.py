"""Diagnosis (Lab 04, issue 17): why did JAX's bf16 run end 0.29 nats *below* fp32 on an H100?

Not a test: a question for a GPU. Trains Lab 04's full-profile model (the "small" GPT, 200 AdamW
steps of 32 x 256 bytes, lr 3e-3, warm-up 20, clip 1.0) in JAX from one init on the same batches:

- ``fp32``         true fp32 matmuls: the reference;
- ``bf16``         the attention kernel JAX picks (cuDNN's fused kernel on an Ampere+ GPU);
- ``bf16_xla``     the same with XLA's own attention (``labkit.runtime.attention.xla_attention``);
- ``fp16_scaled``  fp16 with dynamic loss scaling (cuDNN's kernel too, on such a GPU).

For each it writes the final loss (mean of the last 5 steps), the mean signed gap to fp32 after
warm-up, and the forward's causality in the same attention kernel (``causality.leak_ratio``; above
``LEAK_LIMIT`` the earlier positions saw later tokens). How to read it:

- bf16 far below fp32 and leaking, bf16_xla not: cuDNN's kernel reads the future in bf16;
- bf16 below with a causal forward and bf16_xla not: the cuDNN path trains differently (its backward);
- bf16 and bf16_xla both below: bf16 on this GPU, not the attention kernel.

On a CPU the two bf16 runs are one program (XLA's attention either way); ``--profile smoke`` checks
the script. Writes benchmarks/results/bf16_loss_<device>_<host>.json.

    python3 benchmarks/diag_bf16_loss.py                    # full profile: ~2 min on an H100
    python3 benchmarks/diag_bf16_loss.py --profile smoke    # tiny model, seconds on a CPU
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

import labkit
from _results import default_path
from labkit.gpt.config import get_config
from labkit.gpt.data import ByteTokenizer, get_batch, load_corpus
from labkit.precision import causality, noise
from labkit.precision import train as precision_train
from labkit.runtime import attention, versions

PROFILES = {  # Lab 04's Sizes: (model, steps, batch, warm-up)
    "full": ("small", 200, 32, 20),
    "smoke": ("test", 30, 8, 3),
}
RUNS = {  # name -> (precision, use XLA's attention)
    "fp32": ("fp32", False), "bf16": ("bf16", False), "bf16_xla": ("bf16", True), "fp16_scaled": ("fp16_scaled", False),
}


def main() -> None:
    """(Lab 04) Train the four JAX runs, probe each forward's causality, write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=list(PROFILES), default="full")
    ap.add_argument("--out", type=Path, help="JSON path (default benchmarks/results/bf16_loss_<device>_<host>.json)")
    args = ap.parse_args()
    rt = labkit.setup(quiet=True)
    model, steps, batch, warmup = PROFILES[args.profile]
    cfg = get_config(model)
    tokens = ByteTokenizer().encode(load_corpus())
    flat = precision_train.init_flat(cfg, seed=0)
    tc = precision_train.TrainConfig(steps=steps, batch=batch, seq=cfg.seq_len, lr=3e-3, seed=0, warmup=warmup,
                                     clip_norm=1.0)
    probe = get_batch(tokens, batch, cfg.seq_len, np.random.default_rng(2))[0]  # (batch, seq) at the training shape
    runs = {}
    for name, (prec, xla) in RUNS.items():
        if prec == "bf16" and not rt.bf16:
            print(f"skip {name}: {rt.chip} has no bf16")
            continue
        with attention.xla_attention() if xla else contextlib.nullcontext():  # traced and compiled inside
            kernel = attention.jax_attention_implementation(precision_train.compute_dtype(prec)) or "xla"
            t0 = time.perf_counter()
            r = precision_train.train_jax(cfg, prec, tokens, replace(tc, fp32_matmul="highest" if prec == "fp32"
                                                                     else "default"), flat)
            leak = causality.leak_ratio("jax", cfg, prec, flat, probe)
        runs[name] = {"precision": prec, "attention": kernel, "final_loss": r.final_loss(), "losses": r.losses,
                      "leak_ratio": leak, "causal": leak <= causality.LEAK_LIMIT, "seconds": time.perf_counter() - t0}
        print(f"{name:12s} attention {kernel:5s} final loss {r.final_loss():.4f}  leak ratio {leak:.2g}")
    for name, v in runs.items():  # signed: below zero, the run beat fp32
        v["mean_signed_gap_vs_fp32"] = noise.signed_gap(v["losses"], runs["fp32"]["losses"], start=warmup)
        v["final_gap_vs_fp32"] = v["final_loss"] - runs["fp32"]["final_loss"]
        print(f"{name:12s} gap to fp32: final {v['final_gap_vs_fp32']:+.4f}, mean after warm-up "
              f"{v['mean_signed_gap_vs_fp32']:+.4f} nats")
    out = args.out or default_path("bf16_loss", rt.chip)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": rt.chip, "platform": rt.platform, "host": socket.gethostname(),
                               "date": time.strftime("%Y-%m-%d"), "profile": args.profile,
                               "versions": versions.collect(), "model": model, "steps": steps, "batch": batch,
                               "leak_limit": causality.LEAK_LIMIT, "runs": runs}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
