"""Train on TPU, serve on GPU: the ways a model leaves the framework it was trained in (Lab 05).

Three routes, each with its own module, collected here — and **one bundle, one loader** for all
of them: :func:`save_bundle` writes the weights and the exported programs into one folder bound by
a manifest (``labkit.export.bundle``; written whole by ``labkit.export.publish``), optionally
signed; :func:`load_bundle` (Flax or torch, any device), ``bundle.verify(...).program(...)`` (JAX
in this process) and ``stablehlo.run_fresh_process`` (a new process) all go through
``bundle.verify`` first.

1. **Program (StableHLO)** — ``labkit.export.stablehlo``: ``jax.export`` serializes the Flax GPT's
   forward pass and its KV-cache decode step for CPU, CUDA and TPU at once, with a symbolic
   batch; a fresh process with only ``jax`` runs it.
2. **Weights (safetensors + manifest)** — ``labkit.export.weights``: Flax parameters -> one
   safetensors file -> the PyTorch GPT (and back), bit-exact in fp32, validated by a manifest
   and a content hash; never a pickle.
3. **PyTorch-native (legacy)** — :func:`train_torch_xla`: train the PyTorch GPT with
   PyTorch/XLA on a TPU (or on CPU with ``PJRT_DEVICE=CPU``), then save it through route 2
   and load it on CUDA. torch-xla 2.9 is its last release (pinned to torch 2.9) and its
   successor is announced, so this route is kept working but marked legacy; it needs the
   optional ``xla`` extra and is skipped, with a message, where torch-xla is absent.

**Serving export** — :func:`export_torch_step`: ``torch.export`` of the KV-cache decode
step (``labkit.export.kv_cache.torch_step``) with a dynamic batch and token count: a graph with no
Python in it, the input of AOTInductor / ExecuTorch style serving runtimes.

**ONNX + onnxruntime: left out, on purpose.** (1) The lab's question is XLA <-> PyTorch;
StableHLO and ``torch.export`` already give a framework-free program on both sides, and
ONNX would add a third format plus two large dependencies (``onnxruntime-gpu`` is built
per CUDA major version, and Colab/Kaggle images do not ship it). (2) ``torch.onnx.export``
now goes *through* ``torch.export`` (``dynamo=True``), so it teaches no new step — only a
different runtime. (3) onnxruntime has no TPU execution provider, so it cannot serve the
mixed-fleet case this lab is about. (4) The decode step mutates its cache in place and
uses a boolean attention mask with dynamic shapes: exactly where ONNX exporters need a
rewrite. If your serving stack is ONNX Runtime or TensorRT, export the same
``ExportedProgram`` with ``torch.onnx.export(..., dynamo=True)``.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from labkit.export import bundle, publish
from labkit.export.bundle import BundleError, Verified
from labkit.export.stablehlo import (PLATFORMS, artifact_facts, describe, export_forward, export_step,
                                     run_fresh_process, stablehlo_excerpt)
from labkit.export.kv_cache import torch_new_cache, torch_step_module
from labkit.gpt.config import GPTConfig, param_shapes
from labkit.gpt.convert import load_flat_params
from labkit.export.weights import (WeightsError, load_torch_state_dict, load_weights, read_manifest,
                                   read_weights, save_weights, weights_bytes)

__all__ = [
    "PLATFORMS", "describe", "export_forward", "export_step", "run_fresh_process", "stablehlo_excerpt",
    "BundleError", "WeightsError", "load_torch_state_dict", "load_weights", "read_manifest", "read_weights",
    "save_weights", "save_bundle", "load_bundle", "export_torch_step", "torch_program_summary",
    "max_abs_diff", "train_torch_xla",
]


def save_bundle(model: Any, path: str | Path, programs: tuple[str, ...] = ("forward",), key: Any = None,
                platforms: tuple[str, ...] = PLATFORMS, source: str | None = None, name: str | None = None,
                version: str | None = None) -> dict[str, Any]:
    """Write a model's weights and its exported programs ("forward", "step") as one bundle; sign if `key` (Lab 05).

    ``name`` and ``version`` go into the (signed) manifest: what ``bundle.verify(..., expected=...)`` pins.

    Everything (programs, key, manifest) is checked before the disk is touched, and the folder is
    swapped in whole (``labkit.export.publish``): a failure leaves the previous bundle as it was.
    """
    if isinstance(programs, str):  # a str is a sequence of letters: "forward" would ask for 'f', 'o', ...
        raise TypeError(f"programs must be a list of names, got the str {programs!r}: pass [{programs!r}]")
    export = {"forward": export_forward, "step": export_step}
    unknown = set(programs) - set(export)
    if unknown:
        raise ValueError(f"unknown programs {sorted(unknown)}; choose from {sorted(export)}")
    if key is not None:
        bundle._as_key(key, private=True)  # a bad key is refused now, not after minutes of exporting
    cfg: GPTConfig = model.cfg
    data, wmanifest = weights_bytes(model, source)
    progs, exps = {}, []
    for prog in programs:  # each export bakes "highest" matmul precision in: true fp32 matmuls everywhere
        exps.append(exp := export[prog](cfg, platforms=platforms))
        progs[prog] = (exp.serialize(), list(exp.platforms))
    facts = artifact_facts(exps[-1]) if exps else {}  # one exporter: every program has its versions
    import jax
    import jaxlib

    # The exporter's versions: whether another JAX loads the programs depends on how far apart the two
    # jaxlib builds are (their dates, not their numbers). Self-reported: only a signature vouches for them.
    info = {"frameworks": wmanifest["frameworks"], "source": wmanifest["source"],
            "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "exported_with": {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "stablehlo": facts.get("stablehlo"),
                              "calling_convention": facts.get("calling_convention")}}
    info.update({k: v for k, v in (("name", name), ("version", version)) if v is not None})
    return publish.write(path, asdict(cfg), data, progs, info, key=key)  # signed inside: one swap


def load_bundle(path: str | Path, model: Any, key: Any = None,
                expected: dict[str, str] | None = None) -> tuple[Any, Verified]:
    """Verify a bundle, then fill a FlaxGPT or TorchGPT (any device) from it -> (model, Verified) (Lab 05).

    Everything is checked before the model is touched: a refused bundle leaves it unchanged.
    """
    v = bundle.verify(path, key, expected)  # expected: the name/version the server pins
    where = f"{v.root.name}/{v.manifest['weights']['file']}"
    try:
        cfg = GPTConfig(**v.manifest["config"])
    except (TypeError, ValueError) as e:
        raise BundleError(f"{v.root.name}: the manifest's config is not a GPTConfig ({e})") from None
    if cfg != model.cfg:
        diff = {k: (val, getattr(model.cfg, k)) for k, val in asdict(cfg).items() if getattr(model.cfg, k) != val}
        raise BundleError(f"{where}: weights for another model: (bundle, model) differ in {diff}")
    flat = v.tensors()
    want = param_shapes(cfg)
    bad = [n for n in set(want) | set(flat) if n not in flat or n not in want or flat[n].shape != want[n]
           or flat[n].dtype != np.float32]
    if bad:
        raise BundleError(f"{where}: tensors missing, extra, or of the wrong shape/dtype: {sorted(bad)[:4]}")
    return load_flat_params(model, {n: flat[n] for n in want}), v


def export_torch_step(model: Any, max_len: int | None = None) -> Any:
    """torch.export of the KV-cache step of a TorchGPT; batch and token count dynamic (Lab 05)."""
    import torch

    cfg: GPTConfig = model.cfg
    max_len = max_len or cfg.seq_len
    dev = next(model.parameters()).device
    module = torch_step_module(model)
    k, v = torch_new_cache(cfg, 2, max_len, device=dev)  # example batch 2: 1 would specialize
    args = (torch.zeros((2, 3), dtype=torch.long, device=dev), k, v,
            torch.tensor(0, device=dev), torch.zeros(2, dtype=torch.long, device=dev))
    batch = torch.export.Dim("batch", min=1, max=4096)
    t = torch.export.Dim("t", min=1, max=max_len)
    # Only the cache's batch dim is dynamic: its length max_len is baked into the program.
    dynamic = ({0: batch, 1: t}, {1: batch}, {1: batch}, None, {0: batch})
    with torch.no_grad():
        return torch.export.export(module, args, dynamic_shapes=dynamic)


def torch_program_summary(ep: Any, top: int = 6) -> dict[str, Any]:
    """Node count, most frequent aten ops and in-place ops (the cache writes) of an ExportedProgram (Lab 05)."""
    counts: dict[str, int] = {}
    for node in ep.graph.nodes:
        if node.op == "call_function" and str(node.target).startswith("aten."):
            name = str(node.target).removeprefix("aten.").removesuffix(".default")
            counts[name] = counts.get(name, 0) + 1
    sig = ep.graph_signature
    return {
        "graph_nodes": len(ep.graph.nodes),
        "aten_ops": dict(sorted(counts.items(), key=lambda kv: -kv[1])[:top]),
        # torch.export's default IR keeps in-place ops; run_decompositions() turns them into
        # functional ops plus "user input mutations", the form AOT compilers consume.
        "in_place_ops": {k: v for k, v in counts.items()
                         if k.split(".")[0].endswith("_") and not k.startswith("__")},  # not __or__
        "user_inputs": list(sig.user_inputs),
        "parameters": len(sig.parameters),
    }


def max_abs_diff(a: Any, b: Any) -> float:
    """max |a - b| over two arrays or tensors of the same shape, as a float (Lab 05)."""
    a, b = (np.asarray(x.detach().cpu() if hasattr(x, "detach") else x, dtype=np.float64) for x in (a, b))
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def train_torch_xla(cfg: GPTConfig, tokens: np.ndarray, steps: int = 20, batch: int = 8,
                    lr: float = 3e-3, seed: int = 0) -> tuple[Any, list[float]]:
    """LEGACY route: train a TorchGPT with PyTorch/XLA (TPU, or CPU); returns (model, losses) (Lab 05).

    Save the result with ``labkit.export.weights.save_weights(model, path, source="torch_xla")``
    (tensors are copied to the host first, as torch-xla's ``xm.save`` does) and load it on
    CUDA with ``load_weights(path, TorchGPT(cfg).to("cuda"))``. Requires torch-xla 2.9
    (``pip install -e '.[xla]'``); :func:`labkit.runtime.device.xla_device` raises a clear error
    otherwise.
    """
    import torch

    from labkit.runtime import device
    from labkit.gpt.data import Batcher, to_torch
    from labkit.gpt.torch_model import TorchGPT, torch_loss

    dev = device.xla_device()  # the only sanctioned way to reach torch_xla
    sync = device.torch_sync(dev)  # torch_xla.sync(): cut the lazy graph, run it, wait
    torch.manual_seed(seed)
    model = TorchGPT(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    for x, y in Batcher(tokens, batch, min(cfg.seq_len, 64), seed=seed):
        if len(losses) == steps:
            break
        loss = torch_loss(model, to_torch(x, dev), to_torch(y, dev))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()  # one XLA graph per step; without it the lazy graph grows every step
        losses.append(float(loss.detach().cpu()))
    return model, losses
