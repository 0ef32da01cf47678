#!/usr/bin/env python3
"""Rebuild datasets/lab05_reference: a small trained GPT and its CPU fp32 outputs on fixed prompts (Lab 05).

Usage (from the repository root, with the course installed):

    python datasets/lab05_reference/build.py

What it does:
1. trains the course GPT at config "test" (2 layers, d_model 32, 2 heads, context 32, byte tokens) in
   PyTorch on the CPU, one thread, seed 0, STEPS AdamW steps on the shipped Shakespeare corpus's
   training split; writes ``weights.safetensors`` with labkit's manifest (labkit.export.weights);
2. takes N_PROMPTS windows of seq_len tokens from the corpus's validation split at fixed offsets
   (``tokens``); runs the model's ``jax.export`` forward program (labkit.export.stablehlo, matmul
   precision "highest") on the CPU for the ``logits`` and, by full recomputation, the greedy
   continuation of each window's first PROMPT_LEN tokens (``greedy``) with the top-1 minus top-2
   logit behind each greedy token (``margin``); checks both against PyTorch fp32 on the CPU (1e-4);
3. writes ``reference.npz``, ``SHA256SUMS`` and ``PROVENANCE.md``.

Training on another torch version or CPU may round differently, so a rebuild can give other bytes:
the shipped files are the reference, their checksums the contract, PROVENANCE.md the versions.
"""
from __future__ import annotations

import datetime
import hashlib
import io
import os
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent
STEPS, BATCH, LR, SEED = 400, 16, 3e-3, 0
N_PROMPTS, PROMPT_LEN = 8, 16
OFFSETS_EVERY = 9973  # bytes between prompt windows in the validation split (a prime: varied text)


def main() -> int:
    """Train, compute the reference outputs, write the files (Lab 05)."""
    import jax
    import torch

    from labkit.export import reference, stablehlo, weights
    from labkit.gpt.config import get_config
    from labkit.gpt.data import Batcher, ByteTokenizer, load_corpus, split, to_torch
    from labkit.gpt.torch_model import TorchGPT, torch_loss
    from labkit.runtime import versions

    torch.manual_seed(SEED)
    torch.set_num_threads(1)  # one thread: reductions in a fixed order
    cfg = get_config("test")
    train, val = split(ByteTokenizer().encode(load_corpus()))
    model = TorchGPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    losses = []
    for _, (x, y) in zip(range(STEPS), Batcher(train, BATCH, cfg.seq_len, seed=SEED)):
        loss = torch_loss(model, to_torch(x, "cpu"), to_torch(y, "cpu"))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    model.eval()
    weights.save_weights(model, OUT / "weights.safetensors", source="torch")

    tokens = np.stack([val[i * OFFSETS_EVERY:i * OFFSETS_EVERY + cfg.seq_len] for i in range(N_PROMPTS)])
    tokens = tokens.astype(np.int32)  # (N_PROMPTS, seq_len)
    flat, _ = weights.read_weights(OUT / "weights.safetensors", cfg)
    with jax.default_matmul_precision("highest"):
        exp = stablehlo.export_forward(cfg, platforms=("cpu",))
        run = jax.jit(lambda t: exp.call(flat, t))
        logits = np.asarray(run(tokens), dtype=np.float32)
        greedy = reference.greedy_tokens(run, tokens[:, :PROMPT_LEN], cfg.seq_len - PROMPT_LEN)
        full = np.concatenate([tokens[:, :PROMPT_LEN], greedy.astype(np.int32)], axis=1)
        behind = np.asarray(run(full))[:, PROMPT_LEN - 1:-1]  # logits that chose each greedy token
    with torch.no_grad():
        torch_logits = model(torch.from_numpy(tokens).long()).numpy()
        torch_greedy = reference.greedy_tokens(lambda t: model(torch.from_numpy(t).long()).numpy(),
                                               tokens[:, :PROMPT_LEN], cfg.seq_len - PROMPT_LEN)
    diff = float(np.abs(torch_logits - logits).max())
    assert diff < 1e-4 and np.array_equal(torch_greedy, greedy), (diff, torch_greedy, greedy)

    buf = io.BytesIO()
    np.savez_compressed(buf, tokens=tokens, logits=logits, prompt_len=np.int64(PROMPT_LEN), greedy=greedy,
                        margin=reference.top2_margin(behind).astype(np.float32))
    (OUT / "reference.npz").write_bytes(buf.getvalue())
    sums = {n: hashlib.sha256((OUT / n).read_bytes()).hexdigest() for n in reference.FILES}
    (OUT / "SHA256SUMS").write_text("".join(f"{h}  {n}\n" for n, h in sums.items()))
    v = versions.collect()
    (OUT / "PROVENANCE.md").write_text(provenance(cfg, losses, diff, sums, v))
    print(f"loss {losses[0]:.2f} -> {losses[-1]:.2f}; torch vs StableHLO on CPU {diff:.1e}; wrote {OUT}")
    return 0


def provenance(cfg, losses: list[float], diff: float, sums: dict[str, str], v: dict[str, str]) -> str:
    """The PROVENANCE.md text."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")  # reproducible-builds convention for the date
    when = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch
            else datetime.datetime.now(datetime.timezone.utc)).date().isoformat()
    rows = "\n".join(f"| `{n}` | {(OUT / n).stat().st_size} | `{h}` |" for n, h in sums.items())
    return f"""# Lab 05 reference: provenance

A small trained GPT and its outputs on fixed prompts, computed on a CPU in fp32, so that any
runtime (GPU, TPU, laptop) can check its own route against them (`labkit.export.reference`).

| file | bytes | SHA-256 (also in `SHA256SUMS`, checked by `load_reference`) |
| --- | --- | --- |
{rows}

## Contents

- `weights.safetensors`: labkit weights file (manifest inside: config, tensors, content hash).
  Config {cfg}. Trained by `build.py`: PyTorch on the CPU, one thread, seed {SEED}, {STEPS} AdamW
  steps (lr {LR}, batch {BATCH} x {cfg.seq_len} tokens) on the training split of
  `datasets/shakespeare/shakespeare.txt` (its own provenance there); loss {losses[0]:.3f} -> {losses[-1]:.3f}
  nats/token.
- `reference.npz`: `tokens` ({N_PROMPTS}, {cfg.seq_len}) int32, windows of the validation split at byte offsets
  0, {OFFSETS_EVERY}, ... ; `logits` ({N_PROMPTS}, {cfg.seq_len}, {cfg.vocab_size}) float32 from the model's
  `jax.export` forward program on the CPU (matmul precision "highest"); `greedy` ({N_PROMPTS},
  {cfg.seq_len - PROMPT_LEN}) greedy continuation of the first `prompt_len` = {PROMPT_LEN} tokens, by full
  recomputation; `margin`: top-1 minus top-2 logit behind each greedy token. PyTorch fp32 on the CPU
  agrees to {diff:.1e} in logits and exactly in greedy tokens (checked by the build).

## Versions

python {v.get('python')}, jax {v.get('jax')}, torch {v.get('torch')}, numpy {v.get('numpy')},
safetensors {v.get('safetensors')}.

## Licence

Derived from the public-domain plays in `datasets/shakespeare` (see its PROVENANCE.md).

## Rebuild

Built {when}. From the repository root: `python datasets/lab05_reference/build.py`. Another torch
or CPU may round the training differently and give other bytes; the shipped files and their
checksums are the reference.
"""


if __name__ == "__main__":
    sys.exit(main())
