#!/usr/bin/env python3
"""Rebuild datasets/lab05_reference: a small trained GPT, its exported program, and CPU fp32 outputs (Lab 05).

Usage (from the repository root, with the course installed):

    python datasets/lab05_reference/build.py              # train, export, compute the reference
    python datasets/lab05_reference/build.py --reexport   # keep weights and outputs; export again

What it does:
1. trains the course GPT at config "test" (2 layers, d_model 32, 2 heads, context 32, byte tokens) in
   PyTorch on the CPU, one thread, seed 0, STEPS AdamW steps on the shipped Shakespeare corpus's
   training split;
2. writes ``bundle/``, a Lab 05 bundle (labkit.export.routes.save_bundle): the weights, the model's
   ``jax.export`` forward program lowered for CPU, CUDA and TPU (matmul precision "highest"), and the
   manifest binding them, which names the JAX that exported it;
3. takes N_PROMPTS windows of seq_len tokens from the corpus's validation split at fixed offsets
   (``tokens``); runs the bundle's program on the CPU for the ``logits`` and, by full recomputation,
   the greedy continuation of each window's first PROMPT_LEN tokens (``greedy``) with the top-1 minus
   top-2 logit behind each greedy token (``margin``); checks both against PyTorch fp32 on the CPU (1e-4);
4. writes ``reference.npz``, ``SHA256SUMS`` and ``PROVENANCE.md``.

``--reexport`` is what a deployment does on a new JAX release: the weights and ``reference.npz`` stay;
the program is exported again by this JAX, and must reproduce the shipped logits on the CPU within
REEXPORT_TOL. Training on another torch version or CPU may round differently, so a full rebuild can
give other bytes: the shipped files are the reference, their checksums the contract.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import io
import os
import re
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent
STEPS, BATCH, LR, SEED = 400, 16, 3e-3, 0
N_PROMPTS, PROMPT_LEN = 8, 16
OFFSETS_EVERY = 9973  # bytes between prompt windows in the validation split (a prime: varied text)
REEXPORT_TOL = 1e-5  # max |logit diff| a re-exported program may differ from the shipped logits by (CPU, fp32)


def train():
    """The torch GPT trained on the CPU, and its per-step losses."""
    import torch

    from labkit.gpt.config import get_config
    from labkit.gpt.data import Batcher, ByteTokenizer, load_corpus, split, to_torch
    from labkit.gpt.torch_model import TorchGPT, torch_loss

    torch.manual_seed(SEED)
    torch.set_num_threads(1)  # one thread: reductions in a fixed order
    cfg = get_config("test")
    train_split, _ = split(ByteTokenizer().encode(load_corpus()))
    model = TorchGPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    losses = []
    for _, (x, y) in zip(range(STEPS), Batcher(train_split, BATCH, cfg.seq_len, seed=SEED)):
        loss = torch_loss(model, to_torch(x, "cpu"), to_torch(y, "cpu"))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return model.eval(), losses


def shipped_model():
    """The torch GPT from the shipped bundle's weights, and the training losses PROVENANCE.md recorded."""
    from labkit.export import weights
    from labkit.gpt.config import GPTConfig
    from labkit.gpt.torch_model import TorchGPT

    path = OUT / "bundle" / "weights.safetensors"  # its manifest's content hash is checked on load
    m = re.search(r"loss ([\d.]+) -> ([\d.]+)", (OUT / "PROVENANCE.md").read_text())
    if m is None:
        raise SystemExit("PROVENANCE.md has no 'loss A -> B' line: run a full rebuild instead")
    model = TorchGPT(GPTConfig(**weights.read_manifest(path)["config"]))
    return weights.load_weights(path, model).eval(), [float(m[1]), float(m[2])]


def main(argv: list[str] | None = None) -> int:
    """Train (or keep the weights), export, compute or check the reference outputs, write the files (Lab 05)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reexport", action="store_true", help="keep weights and reference.npz; export the program again")
    args = ap.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the reference is a CPU's, on a GPU machine too
    import jax
    import torch

    from labkit.export import bundle, reference, routes
    from labkit.gpt.data import ByteTokenizer, load_corpus, split
    from labkit.runtime import versions

    model, losses = shipped_model() if args.reexport else train()
    routes.save_bundle(model, OUT / "bundle", programs=("forward",), source="torch")
    v = bundle.verify(OUT / "bundle")
    exp, flat, cfg = v.program("forward"), v.tensors(), model.cfg

    _, val = split(ByteTokenizer().encode(load_corpus()))
    tokens = np.stack([val[i * OFFSETS_EVERY:i * OFFSETS_EVERY + cfg.seq_len] for i in range(N_PROMPTS)])
    tokens = tokens.astype(np.int32)  # (N_PROMPTS, seq_len)
    run = jax.jit(lambda t: exp.call(flat, t))  # the bundle's program, CPU lowering ("highest" baked in)
    logits = np.asarray(run(tokens), dtype=np.float32)
    if args.reexport:
        with np.load(OUT / "reference.npz") as z:
            shipped = z["logits"]
            greedy = z["greedy"]
        drift: float | None = float(np.abs(logits - shipped).max())
        assert drift <= REEXPORT_TOL, f"the re-exported program moved the logits by {drift:.1e} (> {REEXPORT_TOL:.0e})"
        print(f"re-exported by jax {jax.__version__}: logits within {drift:.1e} of the shipped reference")
    else:
        drift = None
        greedy = reference.greedy_tokens(run, tokens[:, :PROMPT_LEN], cfg.seq_len - PROMPT_LEN)
        full = np.concatenate([tokens[:, :PROMPT_LEN], greedy.astype(np.int32)], axis=1)
        behind = np.asarray(run(full))[:, PROMPT_LEN - 1:-1]  # logits that chose each greedy token
        buf = io.BytesIO()
        np.savez_compressed(buf, tokens=tokens, logits=logits, prompt_len=np.int64(PROMPT_LEN), greedy=greedy,
                            margin=reference.top2_margin(behind).astype(np.float32))
        (OUT / "reference.npz").write_bytes(buf.getvalue())
    with torch.no_grad():
        torch_logits = model(torch.from_numpy(tokens).long()).numpy()
        torch_greedy = reference.greedy_tokens(lambda t: model(torch.from_numpy(t).long()).numpy(),
                                               tokens[:, :PROMPT_LEN], cfg.seq_len - PROMPT_LEN)
    diff = float(np.abs(torch_logits - logits).max())
    assert diff < 1e-4 and np.array_equal(torch_greedy, greedy), (diff, torch_greedy, greedy)

    sums = {n: hashlib.sha256((OUT / n).read_bytes()).hexdigest() for n in reference.FILES}
    (OUT / "SHA256SUMS").write_text("".join(f"{h}  {n}\n" for n, h in sums.items()))
    (OUT / "PROVENANCE.md").write_text(provenance(cfg, losses, diff, sums, versions.collect(), v.manifest, drift))
    print(f"loss {losses[0]:.2f} -> {losses[-1]:.2f}; torch vs StableHLO on CPU {diff:.1e}; wrote {OUT}")
    return 0


def provenance(cfg, losses: list[float], diff: float, sums: dict[str, str], v: dict[str, str],
               manifest: dict, drift: float | None) -> str:
    """The PROVENANCE.md text."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")  # reproducible-builds convention for the date
    when = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch
            else datetime.datetime.now(datetime.timezone.utc)).date().isoformat()
    rows = "\n".join(f"| `{n}` | {(OUT / n).stat().st_size} | `{h}` |" for n, h in sums.items())
    exp = manifest["exported_with"]
    prog = manifest["programs"]["forward"]
    since = ("" if drift is None else f" The program in `bundle/` was exported again since (`--reexport`) and "
             f"reproduces these logits within {drift:.1e}.")
    return f"""# Lab 05 reference: provenance

A small trained GPT, its exported program and its outputs on fixed prompts, computed on a CPU in fp32,
so that any runtime (GPU, TPU, laptop) can check its own route against them (`labkit.export.reference`),
and run an artifact that another JAX exported.

| file | bytes | SHA-256 (also in `SHA256SUMS`, checked by `load_reference`) |
| --- | --- | --- |
{rows}

## Contents

- `bundle/`: a Lab 05 bundle (`labkit.export.bundle`; check it with `labkit verify
  datasets/lab05_reference/bundle`), unsigned: `SHA256SUMS` is this folder's integrity check.
  - `weights.safetensors`: labkit weights file (manifest inside: config, tensors, content hash).
    Config {cfg}. Trained by `build.py`: PyTorch on the CPU, one thread, seed {SEED}, {STEPS} AdamW
    steps (lr {LR}, batch {BATCH} x {cfg.seq_len} tokens) on the training split of
    `datasets/shakespeare/shakespeare.txt` (its own provenance there); loss {losses[0]:.3f} -> {losses[-1]:.3f}
    nats/token.
  - `forward.jaxexport`: the model's `jax.export` forward pass, symbolic batch and length, lowered for
    {', '.join(prog['platforms'])} with matmul precision "highest"; exported {manifest['created_utc'][:10]} by
    jax {exp['jax']} (jaxlib {exp['jaxlib']}), which `bundle.json` records as `exported_with`.
  - `bundle.json`: the manifest binding the config, every tensor's and the program's SHA-256, and the
    program's platforms.
- `reference.npz`: `tokens` ({N_PROMPTS}, {cfg.seq_len}) int32, windows of the validation split at byte offsets
  0, {OFFSETS_EVERY}, ... ; `logits` ({N_PROMPTS}, {cfg.seq_len}, {cfg.vocab_size}) float32 from the model's
  `jax.export` forward program on the CPU; `greedy` ({N_PROMPTS}, {cfg.seq_len - PROMPT_LEN}) greedy
  continuation of the first `prompt_len` = {PROMPT_LEN} tokens, by full recomputation; `margin`: top-1 minus
  top-2 logit behind each greedy token. PyTorch fp32 on the CPU agrees to {diff:.1e} in logits and exactly in
  greedy tokens (checked by the build).{since}

## Versions

Last build: python {v.get('python')}, jax {v.get('jax')}, torch {v.get('torch')}, numpy {v.get('numpy')},
safetensors {v.get('safetensors')}.

## Licence

Derived from the public-domain plays in `datasets/shakespeare` (see its PROVENANCE.md).

## Rebuild

Built {when}. From the repository root: `python datasets/lab05_reference/build.py` (train, export,
compute), or `python datasets/lab05_reference/build.py --reexport` (keep the weights and `reference.npz`,
export the program again with this JAX; it must reproduce the shipped logits within {REEXPORT_TOL:.0e}). Another
torch or CPU may round the training differently and give other bytes; the shipped files and their
checksums are the reference.
"""


if __name__ == "__main__":
    sys.exit(main())
