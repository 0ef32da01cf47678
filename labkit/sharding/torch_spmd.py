"""The PyTorch side of Lab 03: torch-xla SPMD layouts and torchrun DDP (Lab 03).

Two ways PyTorch spreads one training step over devices:

- **PyTorch/XLA SPMD** (``xs.Mesh``, ``xs.mark_sharding``): the same annotate -> propagate ->
  partition -> insert-collectives pipeline as JAX, run by XLA's GSPMD partitioner (JAX now
  uses Shardy; the idea is the same). Optional: needs torch-xla (extra ``xla``); the entry
  points raise a clear RuntimeError without it, via ``labkit.runtime.device.xla_spmd``.
- **DDP over gloo** (``torch.distributed``): one process per device (here: per CPU process),
  started by ``torchrun``; gradients are all-reduced by DDP hooks, not by a compiler.

``python -m labkit.sharding.torch_spmd ddp ...`` is the DDP worker that :func:`torchrun_cmd`
starts; the lab runs that command under :func:`labkit.sharding.launch.launch` for timeouts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import timedelta
from typing import Any

import numpy as np

from labkit.gpt.config import GPTConfig
from labkit.sharding.train_step import LR, save_step


def torchrun_cmd(nproc: int, port: int, *worker_args: str) -> list[str]:
    """(Lab 03) ``torchrun`` (torch.distributed.run) on 127.0.0.1 starting nproc DDP workers."""
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes=1",
            f"--nproc-per-node={nproc}", "--master-addr=127.0.0.1", f"--master-port={port}",
            "--max-restarts=0", "-m", "labkit.sharding.torch_spmd", "ddp", *worker_args]


def ddp_step(cfg: GPTConfig, params: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray,
             lr: float = LR) -> tuple[float, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(Lab 03) One DDP Adam step of TorchGPT on this rank's slice of the global batch (gloo).

    Needs an initialised process group. Returns (global mean loss, canonical new weights, canonical
    gradients as DDP left them: the mean over ranks). The gradients are the check that sees a reduction's
    scale: Adam's first update, lr·g / (|g| + eps), is the same for g and 2·g.
    """
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from labkit.gpt.torch_model import TorchGPT, torch_flat_params, torch_load_flat, torch_loss
    from labkit.sharding.train_step import flat_from_params

    rank, world = dist.get_rank(), dist.get_world_size()
    if len(x) % world:
        raise ValueError(f"global batch {len(x)} is not divisible by {world} DDP processes")
    torch.manual_seed(0)
    model = torch_load_flat(TorchGPT(cfg), flat_from_params(params, cfg))
    ddp = DDP(model)  # broadcasts rank 0's weights, then all-reduces (averages) grads in backward
    # optax.adam and torch.optim.Adam: same b1, b2, and eps added outside the sqrt.
    opt = torch.optim.Adam(ddp.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8)
    b = len(x) // world
    xs = torch.from_numpy(x[rank * b:(rank + 1) * b]).long()  # (batch / world, seq)
    ys = torch.from_numpy(y[rank * b:(rank + 1) * b]).long()
    loss = torch_loss(ddp, xs, ys)  # mean over this rank's tokens
    opt.zero_grad()
    loss.backward()  # DDP: gradient buckets all-reduced (sum / world) over gloo
    grads = {k: p.grad.detach().to(torch.float32).numpy().copy() for k, p in model.named_parameters()}
    opt.step()
    total = loss.detach().clone()
    dist.all_reduce(total)  # equal shards: the mean of the rank means is the global mean
    return float(total) / world, torch_flat_params(model), grads


def ddp_main(argv: list[str]) -> int:
    """(Lab 03) DDP worker (under torchrun): one step, rank 0 writes loss + weights (.npz)."""
    ap = argparse.ArgumentParser(prog="python -m labkit.sharding.torch_spmd ddp")
    ap.add_argument("--config", required=True, help="GPTConfig fields as JSON")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=60, help="seconds to wait for the others")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    import torch
    import torch.distributed as dist

    from labkit.sharding.train_step import demo_batch, init_params

    torch.set_num_threads(1)  # several processes share a few cores
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))  # env:// (torchrun)
    try:
        cfg = GPTConfig(**json.loads(args.config))
        params, (x, y) = init_params(cfg, args.seed), demo_batch(cfg, args.batch, args.seed)
        loss, flat, grads = ddp_step(cfg, params, x, y)
        print(f"rank {dist.get_rank()}/{dist.get_world_size()}: loss {loss:.6f}", flush=True)
        if dist.get_rank() == 0:  # weights and gradients under their canonical names
            save_step(args.out, loss, flat, grads)
        dist.barrier()  # nobody tears down its gloo pairs while a peer still uses them
    finally:
        dist.destroy_process_group()
    return 0


# --------------------------------------------------------------------------------------
# PyTorch/XLA SPMD: the same layouts through GSPMD (needs torch-xla)
# --------------------------------------------------------------------------------------


def xla_spmd_mlp(layout: str = "dp", batch: int = 16, d: int = 64, f: int = 256,
                 seed: int = 0) -> dict[str, Any]:
    """(Lab 03) A Megatron MLP fwd+bwd under torch-xla SPMD ("dp" or "tp") vs torch on CPU.

    "dp": x split over "data"; weights replicated. "tp": W1 split by rows (d_ff) and W2 by
    columns over "model" — XLA inserts the all-reduce. Returns max |diff| of output and grads
    vs plain torch, plus the annotated HLO (the "annotate" step: ``sharding={...}``).
    """
    import torch
    import torch.nn.functional as F

    from labkit.runtime import device

    if layout not in ("dp", "tp"):
        raise ValueError(f"layout must be 'dp' or 'tp', got {layout!r}")
    spmd = device.xla_spmd()  # RuntimeError with install advice when torch-xla is absent
    xs, n = spmd.xs, spmd.n_devices
    shape = (n, 1) if layout == "dp" else (1, n)  # (data, model)
    mesh = xs.Mesh(np.arange(n), shape, ("data", "model"))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, d, generator=g)  # (batch, d_model)
    w1 = (0.02 * torch.randn(f, d, generator=g)).requires_grad_()  # (d_ff, d_model), nn.Linear layout
    w2 = (0.02 * torch.randn(d, f, generator=g)).requires_grad_()  # (d_model, d_ff)

    def mlp(x: Any, w1: Any, w2: Any) -> Any:
        return F.linear(F.gelu(F.linear(x, w1), approximate="tanh"), w2)  # (batch, d_model)

    ref = mlp(x, w1, w2)
    ref.square().sum().backward()
    xx = x.to(spmd.device)
    w1x = w1.detach().to(spmd.device).requires_grad_()
    w2x = w2.detach().to(spmd.device).requires_grad_()
    if layout == "dp":
        xs.mark_sharding(xx, mesh, ("data", None))  # split the batch
    else:
        xs.mark_sharding(w1x, mesh, ("model", None))  # column-parallel: split d_ff
        xs.mark_sharding(w2x, mesh, (None, "model"))  # row-parallel: split d_ff again
    out = mlp(xx, w1x, w2x)
    out.square().sum().backward()
    hlo = spmd.hlo([out, w1x.grad, w2x.grad])
    spmd.sync()
    diff = max(float((a.detach().cpu() - b.detach()).abs().max()) for a, b in
               ((out, ref), (w1x.grad, w1.grad), (w2x.grad, w2.grad)))
    return {"layout": layout, "devices": n, "max_abs_diff": diff,
            "annotations": sorted(set(s for s in _shardings(hlo))), "hlo": hlo}


def _shardings(hlo: str) -> list[str]:
    import re

    return re.findall(r"sharding=\{[^}]*\}", hlo)


def main(argv: list[str] | None = None) -> int:
    """(Lab 03) ``python -m labkit.sharding.torch_spmd ddp ...``: the DDP worker entry."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "ddp":
        print("usage: python -m labkit.sharding.torch_spmd ddp --config JSON --out FILE.npz", file=sys.stderr)
        return 2
    return ddp_main(argv[1:])


if __name__ == "__main__":
    code = main()
    # The step is done and its file written. torch 2.9-2.11 can still abort a gloo worker
    # while the interpreter tears down (a C++ thread outlives its owner: "terminate called
    # without an active exception", about 1 run in 20 on a busy host), so leave at once.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
