"""Diagnosis (Lab 04, issue 17): why did JAX's bf16 run end 0.29 nats *below* fp32 on an H100?

Not a test: a question for a GPU. Trains Lab 04's full-profile model (the "small" GPT, 200 AdamW
steps of 32 x 256 bytes, lr 3e-3, warm-up 20, clip 1.0) in JAX on the same batches of the corpus's
training split (``labkit.gpt.data.split``: the last 10% is held out):

- ``fp32``         true fp32 matmuls, init 0: the reference;
- ``fp32_init<k>`` the same from init k = 1 .. ``--inits`` - 1: how far two fp32 runs land apart;
- ``bf16``         init 0, the attention kernel JAX picks (cuDNN's fused kernel on an Ampere+ GPU);
- ``bf16_xla``     the same with XLA's own attention (``labkit.runtime.attention.xla_attention``);
- ``bf16_fp32res`` bf16 with the residual stream in fp32 (``TrainConfig(jax_residual="fp32")``): what
                   ``torch.autocast`` computes, whose H100 bf16 run ended level with fp32;
- ``fp16_scaled``  fp16 with dynamic loss scaling (cuDNN's kernel too, on such a GPU).

For each run it writes the final training loss (mean of the last 5 steps), the signed gaps to fp32,
``steps_to_fp32_final`` (the first step whose smoothed loss reaches fp32's final smoothed loss), the
forward's causality in the same attention kernel (``causality.leak_ratio``; above ``LEAK_LIMIT`` the
earlier positions saw later tokens), and the trained weights' loss on held-out text, once through an
fp32 forward (``val_loss_fp32``) and once through the run's own (``val_loss_own``). How to read it:

- a leak (bf16 leaking, bf16_xla not): cuDNN's kernel reads the future in bf16;
- bf16 below fp32 and bf16_fp32res level with it: the bf16 residual stream (Flax's ``dtype=``) is the cause;
- ``val_loss_own`` well below ``val_loss_fp32`` for bf16: its forward *reads* low, the training loss is
  biased and the weights are no better;
- bf16's ``val_loss_fp32`` below fp32's by more than the fp32 inits' spread: the bf16 run trained a
  better model in these steps (``steps_to_fp32_final`` says how many steps earlier it got there: a
  plateau left sooner); ``--steps 400`` shows whether fp32 catches up;
- both within the inits' spread: the gap is run-to-run noise after all.

On a CPU the two bf16 runs are one program (XLA's attention either way); ``--profile smoke`` checks
the script. Writes benchmarks/results/bf16_loss_<device>_<host>.json.

    python3 benchmarks/diag_bf16_loss.py                    # full profile: ~3.5 min on an H100
    python3 benchmarks/diag_bf16_loss.py --steps 400        # does fp32 catch up? (~6 min)
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
from labkit.gpt.data import ByteTokenizer, get_batch, load_corpus, split
from labkit.precision import causality, noise
from labkit.precision import train as precision_train
from labkit.precision.train_jax import heldout_loss_jax
from labkit.runtime import attention, versions

PROFILES = {  # Lab 04's Sizes: (model, steps, batch, warm-up)
    "full": ("small", 200, 32, 20),
    "smoke": ("test", 30, 8, 3),
}
RUNS = {  # name -> (precision, use XLA's attention, JAX residual stream); fp32_init<k> runs are added by --inits
    "fp32": ("fp32", False, "compute"), "bf16": ("bf16", False, "compute"), "bf16_xla": ("bf16", True, "compute"),
    "bf16_fp32res": ("bf16", False, "fp32"), "fp16_scaled": ("fp16_scaled", False, "compute"),
}
VAL_BATCHES = 16  # held-out windows per evaluation: 16 x batch x seq tokens


def one_run(cfg, prec: str, xla: bool, residual: str, tc, train_tokens, val_tokens, flat, probe, batch: int) -> dict:
    """Train one run, probe its causality (the attention kernel's: the default stream) and score it on held-out text."""
    with attention.xla_attention() if xla else contextlib.nullcontext():  # traced and compiled inside
        kernel = attention.jax_attention_implementation(precision_train.compute_dtype(prec)) or "xla"
        t0 = time.perf_counter()
        r = precision_train.train_jax(cfg, prec, train_tokens, replace(
            tc, fp32_matmul="highest" if prec == "fp32" else "default", keep_params=True, jax_residual=residual), flat)
        seconds = time.perf_counter() - t0
        leak = causality.leak_ratio("jax", cfg, prec, flat, probe)
        val_own = heldout_loss_jax(cfg, r.params, val_tokens, prec, VAL_BATCHES, batch, fp32_matmul="default",
                                   residual=residual)
    val_fp32 = heldout_loss_jax(cfg, r.params, val_tokens, "fp32", VAL_BATCHES, batch)  # one forward judges all
    return {"precision": prec, "attention": kernel, "residual_stream": residual, "final_loss": r.final_loss(),
            "losses": r.losses, "leak_ratio": leak, "causal": leak <= causality.LEAK_LIMIT, "seconds": seconds,
            "val_loss_fp32": val_fp32, "val_loss_own": val_own}


def main() -> None:
    """(Lab 04) Train the JAX runs, probe each forward's causality, evaluate on held-out text, write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=list(PROFILES), default="full")
    ap.add_argument("--steps", type=int, help="training steps (default: the profile's)")
    ap.add_argument("--inits", type=int, default=2, help="fp32 runs from inits 0 .. inits-1 (default 2)")
    ap.add_argument("--out", type=Path, help="JSON path (default benchmarks/results/bf16_loss_<device>_<host>.json)")
    args = ap.parse_args()
    if args.inits < 1 or (args.steps is not None and args.steps < 1):
        ap.error(f"--inits and --steps must be >= 1, got --inits {args.inits} --steps {args.steps}")
    rt = labkit.setup(quiet=True)
    model, steps, batch, warmup = PROFILES[args.profile]
    steps = args.steps or steps
    cfg = get_config(model)
    train_tokens, val_tokens = split(ByteTokenizer().encode(load_corpus()))
    tc = precision_train.TrainConfig(steps=steps, batch=batch, seq=cfg.seq_len, lr=3e-3, seed=0, warmup=warmup,
                                     clip_norm=1.0)
    probe = get_batch(train_tokens, batch, cfg.seq_len, np.random.default_rng(2))[0]  # (batch, seq) as trained
    plan = {**RUNS, **{f"fp32_init{k}": ("fp32", False, "compute") for k in range(1, args.inits)}}
    runs = {}
    for name, (prec, xla, residual) in plan.items():
        if prec == "bf16" and not rt.bf16:
            print(f"skip {name}: {rt.chip} has no bf16")
            continue
        init = int(name.removeprefix("fp32_init")) if name.startswith("fp32_init") else 0
        runs[name] = v = one_run(cfg, prec, xla, residual, tc, train_tokens, val_tokens,
                                 precision_train.init_flat(cfg, seed=init), probe, batch)
        print(f"{name:12s} attention {v['attention']:5s} final loss {v['final_loss']:.4f}  leak ratio "
              f"{v['leak_ratio']:.2g}  held-out: fp32 forward {v['val_loss_fp32']:.4f}, own {v['val_loss_own']:.4f}")
    window, ref = noise.default_window(steps), runs["fp32"]
    target = float(noise.smooth(ref["losses"], window)[-1])  # fp32's final smoothed training loss
    for name, v in runs.items():  # signed: below zero, the run beat fp32
        v["mean_signed_gap_vs_fp32"] = noise.signed_gap(v["losses"], ref["losses"], start=warmup)
        v["final_gap_vs_fp32"] = v["final_loss"] - ref["final_loss"]
        v["val_gap_vs_fp32"] = v["val_loss_fp32"] - ref["val_loss_fp32"]
        v["steps_to_fp32_final"] = noise.steps_to_reach(v["losses"], target, window)
        print(f"{name:12s} gap to fp32: final {v['final_gap_vs_fp32']:+.4f}, mean after warm-up "
              f"{v['mean_signed_gap_vs_fp32']:+.4f}, held-out {v['val_gap_vs_fp32']:+.4f} nats; reached fp32's "
              f"final loss at step {v['steps_to_fp32_final']}")
    fp32_vals = [v["val_loss_fp32"] for v in runs.values() if v["precision"] == "fp32"]
    spread = max(fp32_vals) - min(fp32_vals) if len(fp32_vals) > 1 else None
    print(f"fp32 inits' held-out spread: {spread if spread is None else f'{spread:.4f}'} nats")
    out = args.out or default_path("bf16_loss", rt.chip)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": rt.chip, "platform": rt.platform, "host": socket.gethostname(),
                               "date": time.strftime("%Y-%m-%d"), "profile": args.profile,
                               "versions": versions.collect(), "model": model, "steps": steps, "batch": batch,
                               "train_split": "labkit.gpt.data.split: first 90% trains, last 10% is held out",
                               "val_tokens_per_eval": VAL_BATCHES * batch * cfg.seq_len, "smoothing_window": window,
                               "fp32_init_val_spread": spread, "leak_limit": causality.LEAK_LIMIT, "runs": runs},
                              indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
