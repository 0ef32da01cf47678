"""Diagnosis (Lab 04, issue 17): why did JAX's bf16 run end 0.29 nats *below* fp32 on an H100?

Not a test: a question for a GPU. Trains Lab 04's full-profile model (the "small" GPT, 200 AdamW
steps of 32 x 256 bytes, lr 3e-3, warm-up 20, clip 1.0) on the same batches of the corpus's training
split (``labkit.gpt.data.split``: the last 10% is held out). The runs (``--runs`` picks some):

- ``fp32``              JAX, true fp32 matmuls, init 0: the reference;
- ``fp32_init<k>``      the same from init k = 1 .. ``--inits`` - 1: how far two fp32 runs land apart;
- ``bf16``              JAX bf16 (Flax ``dtype=``: a bf16 residual stream), the attention kernel JAX picks
                        (cuDNN's fused kernel on an Ampere+ GPU);
- ``bf16_init1``        the same from init 1: how far two bf16 runs land apart;
- ``bf16_xla``          bf16 with XLA's own attention (``labkit.runtime.attention.xla_attention``);
- ``bf16_fp32res``      bf16 with the stream and LayerNorms in fp32 (``TrainConfig(jax_residual="fp32")``):
                        torch.autocast's recipe in JAX; ``bf16_fp32res_xla`` the same with XLA's attention;
- ``fp16_scaled``       JAX fp16 with dynamic loss scaling;
- ``torch_fp32``, ``torch_bf16``  the same split in PyTorch (true fp32; autocast bf16, an fp32 stream).

For each run it records the final training loss (mean of the last 5 steps), the signed gaps to fp32,
``steps_ahead_of_fp32`` (how many steps before fp32 its smoothed training loss reached fp32's final
smoothed loss), the training step's causality in its attention kernel (``causality.leak_ratio``;
above ``LEAK_LIMIT`` earlier positions saw later tokens), and the trained weights' loss on held-out
text through one true-fp32 JAX forward (``val_loss_fp32``: every run judged alike) and, for JAX
runs, through the run's own forward (``val_loss_own``). ``readings`` then prints what the numbers say,
with one yardstick: a held-out difference counts when it exceeds ``K`` times the spread of the
fp32 inits (at least ``MIN_SPREAD`` nats). What each reading tests:

- leak: any run whose step leaks the future (its losses are not comparable);
- bias: ``val_loss_own - val_loss_fp32`` of a low-precision run: its own forward reads low (or high);
- better model: a run's held-out gap to fp32 beyond the yardstick, and ``bf16_init1`` beside ``bf16``;
- the stream: ``bf16_fp32res`` against ``bf16`` (the same kernel, the stream in fp32 or not);
- the attention kernel: ``bf16_xla`` against ``bf16`` (the same stream, cuDNN's kernel or XLA's);
- the framework: ``torch_bf16`` against ``torch_fp32``, and against ``bf16_fp32res``.

On a CPU the bf16 runs with and without ``_xla`` are one program (XLA's attention either way);
``--profile smoke`` checks the script. Writes benchmarks/results/bf16_loss_<device>_<host>.json.

    python3 benchmarks/diag_bf16_loss.py                    # full profile: ~6 min on an H100
    python3 benchmarks/diag_bf16_loss.py --runs fp32,fp32_init1,bf16,bf16_fp32res   # the stream alone, ~2.5 min
    python3 benchmarks/diag_bf16_loss.py --steps 400        # does fp32 catch up? (~12 min)
    python3 benchmarks/diag_bf16_loss.py --profile smoke    # tiny model, about a minute on a CPU
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
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
from labkit.runtime import attention, device, versions

PROFILES = {  # Lab 04's Sizes: (model, steps, batch, warm-up)
    "full": ("small", 200, 32, 20),
    "smoke": ("test", 30, 8, 3),
}
RUNS = {  # name -> (framework, precision, XLA's attention, JAX residual stream, init)
    "fp32": ("jax", "fp32", False, "compute", 0), "bf16": ("jax", "bf16", False, "compute", 0),
    "bf16_init1": ("jax", "bf16", False, "compute", 1), "bf16_xla": ("jax", "bf16", True, "compute", 0),
    "bf16_fp32res": ("jax", "bf16", False, "fp32", 0), "bf16_fp32res_xla": ("jax", "bf16", True, "fp32", 0),
    "fp16_scaled": ("jax", "fp16_scaled", False, "compute", 0),
    "torch_fp32": ("torch", "fp32", False, "compute", 0), "torch_bf16": ("torch", "bf16", False, "compute", 0),
}
VAL_BATCHES = 16  # held-out windows per evaluation: 16 x batch x seq tokens
K = 2.0  # a held-out difference counts beyond K x the fp32 inits' spread (labkit.precision.noise.K_NOISE)
MIN_SPREAD = 0.01  # nats: the yardstick never goes below this (one pair of inits can land very close)


def one_run(spec: tuple, cfg, tc, train_tokens, val_tokens, flat, probe, batch: int, tdev) -> dict:
    """Train one run, probe its training step's causality and score its weights on held-out text."""
    fw, prec, xla, residual, _ = spec
    fp32_matmul = "highest" if prec == "fp32" else "default"  # the fp32 runs are true fp32
    run_tc = replace(tc, fp32_matmul=fp32_matmul, keep_params=True, jax_residual=residual)
    with attention.xla_attention() if xla else contextlib.nullcontext():  # traced and compiled inside
        kernel = attention.jax_attention_implementation(precision_train.compute_dtype(prec)) or "xla"
        t0 = time.perf_counter()
        r = precision_train.train(fw, cfg, prec, train_tokens, run_tc, flat, device=tdev)
        seconds = time.perf_counter() - t0
        # the attention kernel's causality (the probe builds the default-stream model: the stream is not a kernel)
        leak = causality.leak_ratio(fw, cfg, prec, flat, probe, device=tdev, fp32_matmul=fp32_matmul)
        val_own = (heldout_loss_jax(cfg, r.params, val_tokens, prec, VAL_BATCHES, batch, fp32_matmul=fp32_matmul,
                                    residual=residual) if fw == "jax" else None)  # torch: no JAX twin of autocast
    val_fp32 = heldout_loss_jax(cfg, r.params, val_tokens, "fp32", VAL_BATCHES, batch)  # one forward judges all
    return {"framework": fw, "precision": prec, "attention": kernel if fw == "jax" else "torch sdpa",
            "residual_stream": "fp32" if fw == "torch" or prec == "fp32" else residual, "final_loss": r.final_loss(),
            "losses": r.losses, "leak_ratio": leak, "causal": leak <= causality.LEAK_LIMIT, "seconds": seconds,
            "val_loss_fp32": val_fp32, "val_loss_own": val_own}



def readings(runs: dict, spread: float | None) -> list[str]:
    """What the held-out losses say, each difference against K x the fp32 inits' spread."""
    bar = K * max(spread or 0.0, MIN_SPREAD)
    out = [f"yardstick: a held-out difference counts beyond {bar:.4f} nats (K={K:g} x the fp32 inits' spread "
           f"{spread if spread is None else f'{spread:.4f}'}, at least {K * MIN_SPREAD:g})"]
    leaks = [n for n, v in runs.items() if not v["causal"]]
    out.append(f"leak: {', '.join(leaks)} read later tokens: not comparable" if leaks else "leak: every run causal")

    def cmp(a: str, b: str, what: str) -> None:
        if a in runs and b in runs:
            d = runs[a]["val_loss_fp32"] - runs[b]["val_loss_fp32"]
            verdict = "within noise" if abs(d) <= bar else ("lower (better)" if d < 0 else "higher (worse)")
            out.append(f"{what}: {a} {d:+.4f} nats held-out against {b}: {verdict}")

    for n, v in runs.items():
        if v["val_loss_own"] is not None and v["precision"] != "fp32":
            b = v["val_loss_own"] - v["val_loss_fp32"]
            out.append(f"bias: {n}'s own forward reads {b:+.4f} nats against an fp32 forward of the same weights"
                       + (" (beyond the yardstick: its training loss is biased)" if abs(b) > bar else ""))
    for n in ("bf16", "bf16_init1", "bf16_xla", "bf16_fp32res", "fp16_scaled", "torch_bf16"):
        cmp(n, "fp32", "against fp32")
    cmp("bf16_init1", "bf16", "bf16 run to run")
    cmp("bf16_fp32res", "bf16", "the stream (cuDNN attention)")
    cmp("bf16_fp32res_xla", "bf16_xla", "the stream (XLA attention)")
    cmp("bf16_xla", "bf16", "the attention kernel (bf16 stream)")
    cmp("torch_bf16", "torch_fp32", "torch")
    cmp("bf16_fp32res", "torch_bf16", "autocast's recipe, JAX against torch")
    return out


def main() -> None:
    """(Lab 04) Train the runs, probe each step's causality, score them on held-out text, print the readings."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=list(PROFILES), default="full")
    ap.add_argument("--steps", type=int, help="training steps (default: the profile's)")
    ap.add_argument("--inits", type=int, default=2, help="fp32 runs from inits 0 .. inits-1 (default 2)")
    ap.add_argument("--runs", help=f"comma-separated subset of {', '.join(RUNS)} (fp32 is always run)")
    ap.add_argument("--out", type=Path, help="JSON path (default benchmarks/results/bf16_loss_<device>_<host>.json)")
    args = ap.parse_args()
    if args.inits < 1 or (args.steps is not None and args.steps < 1):
        ap.error(f"--inits and --steps must be >= 1, got --inits {args.inits} --steps {args.steps}")
    plan = {**RUNS, **{f"fp32_init{k}": ("jax", "fp32", False, "compute", k) for k in range(1, args.inits)}}
    if args.runs:
        asked = {n.strip() for n in args.runs.split(",") if n.strip()}
        if unknown := asked - set(plan):
            ap.error(f"--runs: unknown {', '.join(sorted(unknown))}; choose from {', '.join(plan)}")
        plan = {n: v for n, v in plan.items() if n in asked | {"fp32"}}
    rt = labkit.setup(quiet=True)
    tdev = device.torch_device()
    model, steps, batch, warmup = PROFILES[args.profile]
    steps = args.steps or steps
    cfg = get_config(model)
    train_tokens, val_tokens = split(ByteTokenizer().encode(load_corpus()))
    tc = precision_train.TrainConfig(steps=steps, batch=batch, seq=cfg.seq_len, lr=3e-3, seed=0, warmup=warmup,
                                     clip_norm=1.0)
    probe = get_batch(train_tokens, batch, cfg.seq_len, np.random.default_rng(2))[0]  # (batch, seq) as trained
    runs = {}
    for name, spec in plan.items():
        if spec[1] == "bf16" and not rt.bf16:
            print(f"skip {name}: {rt.chip} has no bf16")
            continue
        if spec[0] == "torch" and not device.torch_on_chip(rt.platform, tdev):
            print(f"skip {name}: torch would run on the host CPU here, not on {rt.chip}")
            continue
        runs[name] = v = one_run(spec, cfg, tc, train_tokens, val_tokens, precision_train.init_flat(cfg, seed=spec[4]),
                                 probe, batch, tdev)
        own = "" if v["val_loss_own"] is None else f", own {v['val_loss_own']:.4f}"
        print(f"{name:16s} {v['attention']:10s} final loss {v['final_loss']:.4f}  leak {v['leak_ratio']:.2g}  "
              f"held-out: fp32 forward {v['val_loss_fp32']:.4f}{own}  ({v['seconds']:.0f} s)")
    window, ref = noise.default_window(steps), runs["fp32"]
    target = float(noise.smooth(ref["losses"], window)[-1])  # fp32's final smoothed training loss
    ref_step = noise.steps_to_reach(ref["losses"], target, window)  # fp32's own crossing: the step it got there
    for name, v in runs.items():  # signed: below zero, the run beat fp32
        bad = [i for i, x in enumerate(v["losses"]) if not math.isfinite(x)]
        v["diverged_at_step"] = bad[0] if bad else None  # a diverged run is a finding: recorded, not a crash
        v["mean_signed_gap_vs_fp32"] = None if bad else noise.signed_gap(v["losses"], ref["losses"], start=warmup)
        if bad:
            print(f"{name:16s} diverged: non-finite loss from step {bad[0]}; no mean gap to fp32")
        v["final_gap_vs_fp32"] = v["final_loss"] - ref["final_loss"]
        v["val_gap_vs_fp32"] = v["val_loss_fp32"] - ref["val_loss_fp32"]
        reached = noise.steps_to_reach(v["losses"], target, window)
        v["steps_ahead_of_fp32"] = None if reached is None else ref_step - reached
        mean = "n/a (diverged)" if bad else f"{v['mean_signed_gap_vs_fp32']:+.4f}"
        print(f"{name:16s} gap to fp32: final {v['final_gap_vs_fp32']:+.4f}, mean after warm-up "
              f"{mean}, held-out {v['val_gap_vs_fp32']:+.4f} nats; "
              + ("never reached fp32's final loss" if reached is None
                 else f"reached fp32's final loss {v['steps_ahead_of_fp32']} steps ahead of fp32"))
    fp32_vals = [v["val_loss_fp32"] for n, v in runs.items() if n == "fp32" or n.startswith("fp32_init")]
    spread = max(fp32_vals) - min(fp32_vals) if len(fp32_vals) > 1 else None
    found = readings(runs, spread)
    print("\n".join(found))
    out = args.out or default_path("bf16_loss", rt.chip)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": rt.chip, "platform": rt.platform, "host": socket.gethostname(),
                               "date": time.strftime("%Y-%m-%d"), "profile": args.profile,
                               "versions": versions.collect(), "model": model, "steps": steps, "batch": batch,
                               "train_split": "labkit.gpt.data.split: first 90% trains, last 10% is held out",
                               "val_tokens_per_eval": VAL_BATCHES * batch * cfg.seq_len, "smoothing_window": window,
                               "fp32_init_val_spread": spread, "k": K, "min_spread": MIN_SPREAD,
                               "leak_limit": causality.LEAK_LIMIT, "readings": found, "runs": runs}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
