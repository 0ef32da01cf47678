"""PyTorch AMP as users meet it: what autocast keeps in fp32, unscale before clipping, bf16 without a scaler (Lab 04).

``torch.autocast`` runs each op in a dtype chosen per op: matmuls and convolutions in the low
precision, and a list of ops "that can autocast to float32" -- on CUDA that list includes
``softmax``, ``log_softmax``, ``layer_norm``, ``group_norm``, ``cross_entropy``, ``mse_loss``,
``exp``, ``sum`` (PyTorch AMP docs, "Autocast Op Reference"): exponentials, normalisation
statistics and long sums need fp32's range and precision. The CPU lists differ (losses are
fp32; softmax and layer_norm return bf16 there, computed in fp32 inside the kernel), so
:func:`autocast_dtypes` *measures* what this runtime does instead of quoting a list. What Lab 04
observes on a CPU (torch 2.13): ``log_softmax`` is not upcast there -- its output equals the bf16
kernel's without autocast -- and that kernel's error is several bf16 roundings of its result
where the result is near 0 (a row's largest logit, log p ~ -0.08): the error is one rounding of
an intermediate near 1, not of the small result; :func:`worst_element` shows that element.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Ops the lab probes: name -> the CUDA autocast list PyTorch's AMP docs put it on: "float32" (autocast to fp32),
# "low precision" (to the autocast dtype), or neither (it runs in its input's dtype).
_FP32, _LOW, _NEITHER = "float32", "low precision", "not listed (input dtype)"
CUDA_AUTOCAST_LIST = {"matmul": _LOW, "linear": _LOW, "gelu": _NEITHER, "softmax": _FP32, "log_softmax": _FP32,
                  "layer_norm": _FP32, "cross_entropy": _FP32, "mse_loss": _FP32}


def _ops() -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    return {"matmul": lambda h, w, y: h @ w, "linear": lambda h, w, y: F.linear(h, w),
            "gelu": lambda h, w, y: F.gelu(h), "softmax": lambda h, w, y: torch.softmax(h, -1),
            "log_softmax": lambda h, w, y: F.log_softmax(h, -1),
            "layer_norm": lambda h, w, y: F.layer_norm(h, h.shape[-1:]),
            "cross_entropy": lambda h, w, y: F.cross_entropy(h, y), "mse_loss": lambda h, w, y: F.mse_loss(h, h * 0.5)}


def _roundings(out: Any, ref: Any, dtype: Any) -> float:
    import torch

    u = torch.finfo(dtype).eps / 2  # unit roundoff: one correct rounding errs by <= u relative
    err = (out.double() - ref.double()).abs()
    ok = ref.abs() > 0
    return float((err[ok] / (ref.double().abs()[ok] * u)).max())


def _probe_inputs(device: str, seed: int) -> tuple[Any, Any, Any]:
    """x (64, 256) logits-sized, w (256, 256), y (64,) class labels: what every autocast probe runs on."""
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 256, generator=g).to(device) * 4  # (tokens, features): logits-sized values
    w = torch.randn(256, 256, generator=g).to(device) / 16
    y = torch.randint(0, 256, (64,), generator=g).to(device)
    return x, w, y


def autocast_dtypes(device: str = "cpu", dtype: Any = None, seed: int = 0) -> list[dict[str, Any]]:
    """(Lab 04) Per op under autocast: output dtype, and its max error vs fp32 in units of one low-precision rounding."""
    import torch

    dtype = torch.bfloat16 if dtype is None else dtype
    x, w, y = _probe_inputs(device, seed)
    rows = []
    for name, f in _ops().items():
        h = x.to(dtype)  # what a previous autocast matmul hands on: a low-precision activation
        with torch.autocast(device, dtype=dtype):
            out = f(h, w, y)
        ref = f(h.float(), w.to(dtype).float(), y)  # the same op on the same (rounded) inputs, in fp32
        rows.append({"op": name, "output dtype": str(out.dtype).replace("torch.", ""),
                     "max error (roundings)": _roundings(out, ref, dtype),
                     "CUDA autocast list (docs)": CUDA_AUTOCAST_LIST[name]})
    return rows


def fp32_list_misses(rows: list[dict[str, Any]], device: str) -> list[str]:
    """(Lab 04) Ops on CUDA autocast's documented fp32 list whose measured output is not float32 ([] off CUDA).

    On CUDA, autocast runs those ops in fp32 outright, so their output dtype *is* the check (their
    error is then ~0 roundings). CPU autocast keeps its own, shorter list (softmax and layer_norm
    return bf16 there), so on any other device nothing is expected of them.
    """
    if device != "cuda":
        return []
    return [r["op"] for r in rows if CUDA_AUTOCAST_LIST.get(r["op"]) == _FP32 and r["output dtype"] != "float32"]


def worst_element(op: str = "log_softmax", device: str = "cpu", dtype: Any = None, seed: int = 0) -> dict[str, Any]:
    """(Lab 04) The element where ``op`` under autocast errs most: its value, fp32's, one rounding of fp32's."""
    import torch

    dtype = torch.bfloat16 if dtype is None else dtype
    x, w, y = _probe_inputs(device, seed)  # the inputs autocast_dtypes uses
    f, h = _ops()[op], x.to(dtype)
    with torch.autocast(device, dtype=dtype):
        out = f(h, w, y)
    plain = f(h, w.to(dtype), y)  # the same op on the low-precision inputs, autocast off
    ref = f(h.float(), w.to(dtype).float(), y)
    err = ((out.double() - ref.double()).abs() / ref.double().abs()).nan_to_num(0.0, 0.0, 0.0)
    i = int(err.flatten().argmax())
    at = lambda t: float(t.flatten()[i])  # noqa: E731
    return {"op": op, "autocast": at(out), "fp32": at(ref), "fp32 rounded once": at(ref.to(dtype)),
            "roundings": _roundings(out, ref, dtype), "same as without autocast": bool(torch.equal(out, plain))}


def softmax_in_low_precision(device: str = "cpu", dtype: Any = None, seed: int = 0) -> float:
    """(Lab 04) Max error (in roundings) of a softmax whose exp and running sum are kept in ``dtype``: why fp32."""
    import torch

    dtype = torch.bfloat16 if dtype is None else dtype
    x = (torch.randn(64, 256, generator=torch.Generator().manual_seed(seed)) * 4).to(device).to(dtype)
    e = (x - x.max(-1, keepdim=True).values).exp()  # (64, 256) in dtype
    s = torch.zeros(64, 1, dtype=dtype, device=device)
    for j in range(e.shape[1]):  # a running sum that stays in the low precision
        s = s + e[:, j:j + 1]
    return _roundings(e / s, torch.softmax(x.float(), -1), dtype)


OPTIMIZERS = ("sgd", "adamw")  # clip_after_scaling's optimizers: SGD(lr=1) shows the update's size directly


def clip_after_scaling(scale: float = 2.0**16, max_norm: float = 1.0, seed: int = 0,
                       optimizer: str = "sgd") -> dict[str, float]:
    """(Lab 04) Norm of one applied update when clipping after ``GradScaler.unscale_`` vs on the scaled grads.

    ``optimizer="sgd"`` (lr 1): the update is the applied gradient, so clipping the scaled gradients
    shrinks it by the scale. ``"adamw"`` (lr 1e-3, no weight decay, as Lab 04's training): Adam divides
    by the gradient's own running size, so the scale mostly cancels and the update barely changes;
    what breaks there is the clip itself, which sees ``scale`` x the true norm and fires on every step.
    """
    import torch

    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    out = {}
    for unscale_first in (True, False):
        torch.manual_seed(seed)
        p = torch.nn.Parameter(torch.randn(1000))
        opt = (torch.optim.SGD([p], lr=1.0) if optimizer == "sgd"
               else torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0))
        scaler = torch.amp.GradScaler("cpu", init_scale=scale, growth_interval=10**6)
        before = p.detach().clone()
        scaler.scale((p * torch.randn(1000, generator=torch.Generator().manual_seed(1))).sum()).backward()
        out["true grad norm"] = float(p.grad.norm()) / scale
        if unscale_first:
            scaler.unscale_(opt)  # grads / scale, in place, remembered: step() will not divide again
        else:
            out["norm the clip sees"] = float(p.grad.norm())  # scale x the true norm
        torch.nn.utils.clip_grad_norm_([p], max_norm)
        scaler.step(opt)  # SGD lr 1: the update is minus the applied gradient
        scaler.update()
        out["unscale_ then clip" if unscale_first else "clip scaled grads"] = float((before - p.detach()).norm())
    return out


def flushed_to_zero(values: Any, dtype: Any) -> float:
    """(Lab 04) Fraction of nonzero ``values`` that become 0 when cast to ``dtype`` (torch)."""
    import torch

    v = torch.as_tensor(np.asarray(values, np.float32))
    v = v[v != 0]
    return float((v.to(dtype) == 0).double().mean())  # float64: 4973 / 10000 prints as 0.4973
