"""Loss scaling for fp16 training: static and dynamic, JAX and PyTorch (Lab 04).

fp16's smallest subnormal is 2**-24 ≈ 6e-8: backward-pass values smaller than that become 0
(gradient underflow). Multiplying the loss by a scale S multiplies every gradient by S (the
chain rule is linear), lifting them into range; the fp32 gradients are divided by S before the
optimizer sees them. Too large an S overflows to inf, so a step whose gradients are not finite
is *skipped* and, with dynamic scaling, S is halved ("backoff"); after ``growth_interval``
finite steps in a row S is doubled ("growth").

Which implementation, and why:

- **PyTorch**: ``torch.amp.GradScaler`` itself (:func:`torch_grad_scaler`). It works with
  ``device="cpu"`` in torch 2.13 (checked by the tests), so there is no CPU substitute. We only
  add argument checks: GradScaler accepts ``init_scale=-1`` silently.
- **JAX**: our own small implementation (:class:`LossScaleState`, :func:`update`), with
  exactly GradScaler's rule. Optax has ``apply_if_finite`` (skips non-finite updates) but no
  loss scale; ``jmp`` is not installed (its ``DynamicLossScale.adjust`` grows on the same step as
  GradScaler, ``counter == period - 1``, but backs off no lower than ``min_loss_scale``, default 1).
  ``flax.training.dynamic_scale.DynamicScale`` works
  with NNX (via ``nnx.split``: it wraps ``jax.value_and_grad`` of a pure function), but (1) it
  grows the scale on the (N+1)-th finite step where GradScaler grows on the N-th, so the two
  frameworks' scale curves would not line up; (2) it hides scale, unscale, check and update in
  one ``value_and_grad`` call, the four steps this lab shows; (3) it has no static mode and
  leaves skipping to the caller anyway. The tests check our rule against both GradScaler and
  DynamicScale (ours with interval N == DynamicScale with interval N - 1).

:func:`grad_underflow` measures the problem all this solves on the course GPT.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from labkit.gpt.data import check_count, check_real

if TYPE_CHECKING:
    from labkit.gpt.config import GPTConfig

TORCH_DEFAULTS = {"init_scale": 2.0 ** 16, "growth_factor": 2.0, "backoff_factor": 0.5,
                  "growth_interval": 2000}  # torch.amp.GradScaler's documented defaults
F32_MAX = float(np.finfo(np.float32).max)  # the JAX state holds the scale in float32


@dataclass(frozen=True)
class LossScaleConfig:
    """(Lab 04) How the loss scale starts and moves; ``dynamic=False`` keeps it fixed."""

    init_scale: float = TORCH_DEFAULTS["init_scale"]
    growth_factor: float = TORCH_DEFAULTS["growth_factor"]
    backoff_factor: float = TORCH_DEFAULTS["backoff_factor"]
    growth_interval: int = TORCH_DEFAULTS["growth_interval"]  # finite steps before growing
    dynamic: bool = True

    def __post_init__(self) -> None:
        # numpy scalars (np.float32(1024), np.int64(5) from a sweep) are fine; stored as plain Python numbers
        s = check_real(self.init_scale, "init_scale (the loss scale)", 0.0, F32_MAX, closed="high",
                       hint=" (it multiplies the loss: 1.0 = no scaling, 2**16 = torch's default; float32 holds it)")
        checked = {"init_scale": s,
                   "growth_factor": check_real(self.growth_factor, "growth_factor", 1.0, hint="; e.g. 2.0"),
                   "backoff_factor": check_real(self.backoff_factor, "backoff_factor", 0.0, 1.0, hint="; e.g. 0.5"),
                   "growth_interval": check_count(self.growth_interval, "growth_interval", example=2000)}
        if not isinstance(self.dynamic, (bool, np.bool_)):  # "no" would be truthy: dynamic by accident
            raise TypeError(f"dynamic must be True or False, got {self.dynamic!r}; for a fixed scale use static(scale)")
        checked["dynamic"] = bool(self.dynamic)
        for k, v in checked.items():
            object.__setattr__(self, k, v)  # frozen: set through object


def static(scale: float) -> LossScaleConfig:
    """(Lab 04) A fixed loss scale (non-finite steps are still skipped)."""
    return LossScaleConfig(init_scale=scale, dynamic=False)


def next_scale(scale: float, good_steps: int, finite: bool,
               cfg: LossScaleConfig) -> tuple[float, int]:
    """(Lab 04) GradScaler's update rule in plain Python: (scale, good_steps) after one step."""
    if not isinstance(cfg, LossScaleConfig):
        raise TypeError(f"cfg must be a LossScaleConfig, got {cfg!r}; e.g. next_scale(scale, good_steps, finite, "
                        f"LossScaleConfig()) or static(1024.0) for a fixed scale")
    check_real(scale, "scale", 0.0, hint="; the loss scale is a positive number, e.g. cfg.init_scale")
    good_steps = check_count(good_steps, "good_steps", 0)
    if not cfg.dynamic:
        return scale, good_steps
    if not finite:
        return scale * cfg.backoff_factor, 0  # overflow: shrink, start counting again
    good_steps += 1
    if good_steps == cfg.growth_interval:
        return scale * cfg.growth_factor, 0
    return scale, good_steps


# ----------------------------------------------------------------------------- JAX


def _check_cfg(cfg: Any, call: str) -> None:
    if not isinstance(cfg, LossScaleConfig):  # a bare scale (2.0**16) or None was an AttributeError
        raise TypeError(f"cfg must be a LossScaleConfig, got {type(cfg).__name__} {cfg!r:.60}; e.g. {call} with "
                        "cfg = LossScaleConfig(init_scale=2.0**16) (dynamic) or static(1024.0) (a fixed scale)")


class LossScaleState(NamedTuple):
    """(Lab 04) JAX loss-scale state: a pytree, so it goes through jit."""

    scale: Any       # () float32
    good_steps: Any  # () int32: finite steps since the last growth or backoff


def init(cfg: LossScaleConfig) -> LossScaleState:
    """(Lab 04) The initial JAX state for ``cfg``."""
    import jax.numpy as jnp

    _check_cfg(cfg, "init(cfg)")
    return LossScaleState(jnp.asarray(cfg.init_scale, jnp.float32), jnp.asarray(0, jnp.int32))


def scale_loss(loss: Any, state: LossScaleState) -> Any:
    """(Lab 04) loss * scale, in fp32 (the backward pass then carries scaled gradients)."""
    import jax.numpy as jnp

    return loss.astype(jnp.float32) * state.scale


def unscale(grads: Any, state: LossScaleState) -> Any:
    """(Lab 04) Gradients as fp32, divided by the scale (what the optimizer must see)."""
    import jax
    import jax.numpy as jnp

    return jax.tree_util.tree_map(lambda g: g.astype(jnp.float32) / state.scale, grads)


def all_finite(tree: Any) -> Any:
    """(Lab 04) () bool array: True iff every element of every leaf is finite (no inf/NaN)."""
    import jax
    import jax.numpy as jnp

    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(tree)]
    return jnp.stack(leaves).all() if leaves else jnp.asarray(True)


def update(state: LossScaleState, finite: Any, cfg: LossScaleConfig) -> LossScaleState:
    """(Lab 04) :func:`next_scale` as jit-able array code (branch-free: jnp.where)."""
    import jax.numpy as jnp

    _check_cfg(cfg, "update(state, finite, cfg)")
    if not isinstance(state, LossScaleState):
        raise TypeError(f"state must be a LossScaleState (from init(cfg) or a previous update), got "
                        f"{type(state).__name__} {state!r:.60}")
    # A bool, or a () bool array / tracer (all_finite(grads)); 'yes' or None was a raw jax error deep in jnp.where.
    if not (isinstance(finite, (bool, np.bool_)) or (getattr(finite, "shape", None) == ()
                                                     and getattr(finite, "dtype", None) == np.bool_)):
        raise TypeError(f"finite must be a bool or a () bool array, e.g. all_finite(grads), got "
                        f"{type(finite).__name__} {finite!r:.60}")
    if not cfg.dynamic:
        return state
    good = jnp.where(finite, state.good_steps + 1, 0)
    grow = good >= cfg.growth_interval
    scale = jnp.where(finite, jnp.where(grow, state.scale * cfg.growth_factor, state.scale),
                      state.scale * cfg.backoff_factor)
    return LossScaleState(scale.astype(jnp.float32), jnp.where(grow, 0, good).astype(jnp.int32))


def select(finite: Any, new: Any, old: Any) -> Any:
    """(Lab 04) ``new`` where the step was finite, else ``old`` (skip the step), leaf by leaf."""
    import jax
    import jax.numpy as jnp

    return jax.tree_util.tree_map(lambda n, o: jnp.where(finite, n, o), new, old)


# --------------------------------------------------------------------------- PyTorch


def torch_grad_scaler(cfg: LossScaleConfig, device: Any = "cpu") -> Any:
    """(Lab 04) A ``torch.amp.GradScaler`` configured like ``cfg`` (dynamic only)."""
    import torch

    if not cfg.dynamic:
        raise ValueError("GradScaler is always dynamic; for a static scale multiply the loss by "
                         "cfg.init_scale and use torch_unscale_ / torch_grads_finite")
    dev = torch.device(device).type
    return torch.amp.GradScaler(dev, init_scale=cfg.init_scale, growth_factor=cfg.growth_factor,
                                backoff_factor=cfg.backoff_factor,
                                growth_interval=cfg.growth_interval)


def torch_grads_finite(params: Any) -> bool:
    """(Lab 04) True iff every ``.grad`` of ``params`` is finite (missing grads count as finite)."""
    import torch

    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return True
    return bool(torch.stack([torch.isfinite(g).all() for g in grads]).all())


def torch_unscale_(params: Any, scale: float) -> None:
    """(Lab 04) Divide every ``.grad`` of ``params`` by ``scale`` in place."""
    check_real(scale, "scale", 0.0, hint="; pass the loss scale the loss was multiplied by")
    for p in params:
        if p.grad is not None:
            p.grad.div_(scale)


# -------------------------------------------------------- why: gradient underflow


def grad_underflow(cfg: GPTConfig, scales: list[float], x: np.ndarray, y: np.ndarray,
                   flat: dict[str, np.ndarray], tokens_per_batch: int | None = None,
                   device: Any = "cpu") -> list[dict[str, Any]]:
    """(Lab 04) fp16-autocast gradients at each loss scale vs fp32 gradients (PyTorch, no compile).

    ``tokens_per_batch``: average the loss as if the batch held that many tokens, as gradient
    accumulation over micro-batches of ``x``'s size does (each micro-batch loss is divided by
    the number of micro-batches); None = x.size. Real runs average over ~0.5M tokens, which is
    what makes their per-token gradients small enough to underflow.
    Per scale: relative error of the unscaled gradients (global norm), the fraction of entries
    that are 0 in fp16 but not in fp32 (underflow), and whether all are finite (overflow).
    """
    import torch

    from labkit.gpt.data import to_torch
    from labkit.gpt.convert import load_flat_params
    from labkit.gpt.torch_model import TorchGPT, torch_loss

    from labkit.precision.formats import check_list

    scales = [check_real(s, f"scales[{i}]", 0.0) for i, s in enumerate(check_list(scales, "scales"))]
    micro = float(x.size) / float(tokens_per_batch or x.size)  # 1 / number of micro-batches
    dev = torch.device(device)
    model = load_flat_params(TorchGPT(cfg), flat).to(dev)
    xt, yt = to_torch(x, dev), to_torch(y, dev)

    def grads(dtype: Any, scale: float) -> np.ndarray:
        model.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = torch_loss(model, xt, yt)  # fp32 loss of fp16 logits
        (loss * micro * scale).backward()
        return np.concatenate([p.grad.double().cpu().numpy().ravel() / scale
                               for p in model.parameters()])

    ref = grads(torch.float32, 1.0)
    rows = []
    for s in scales:
        got = grads(torch.float16, float(s))
        finite = bool(np.isfinite(got).all())
        err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref)) if finite else float("inf")
        lost = float(np.mean((got == 0) & (ref != 0)))
        rows.append({"loss scale": float(s), "rel error vs fp32": err,
                     "zeroed (underflow) fraction": lost, "finite": finite})
    return rows


BEST_TOL = 0.05  # relative: a scale whose error is within 5% of the lowest is as good (the flat bottom)


def best_scales(sweep: list[dict[str, Any]], tol: float = BEST_TOL) -> list[float]:
    """(Lab 04) The finite loss scales whose gradient error is within ``tol`` (relative) of the lowest."""
    keys = ("loss scale", "rel error vs fp32", "finite")
    for i, r in enumerate(sweep):
        missing = [k for k in keys if not isinstance(r, dict) or k not in r]
        if missing:
            raise ValueError(f"best_scales needs the rows of grad_underflow, with keys {list(keys)}; row {i} "
                             f"lacks {missing} (it has {list(r) if isinstance(r, dict) else type(r).__name__})")
    ok = [r for r in sweep if r["finite"]]
    if not ok:
        return []
    lowest = min(r["rel error vs fp32"] for r in ok)
    # A wide flat bottom is the lesson (any scale in it works): name the range, not one scale
    # that beats its neighbours by noise in the fourth digit.
    return [r["loss scale"] for r in ok if r["rel error vs fp32"] <= (1 + tol) * lowest]
