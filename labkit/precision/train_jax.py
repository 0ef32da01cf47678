"""The JAX half of Lab 04's training: FlaxGPT in fp32 / bf16 / fp16 + loss scaling (Lab 04).

fp32 master weights (an ``nnx.split`` state of fp32 Params), compute in the dtype
``FlaxGPT(cfg, dtype=...)`` casts to, optax AdamW, and :mod:`labkit.precision.loss_scale` for fp16: scale
the loss, unscale the gradients, check them, skip the step (weights *and* Adam moments) when
they are not finite, update the scale. Shared config and results: :mod:`labkit.precision.train`.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from labkit.precision import loss_scale as ls
from labkit.precision import master
from labkit.runtime import attention
from labkit.gpt.data import Batcher
from labkit.gpt.config import GPTConfig
from labkit.precision.train import (TrainConfig, TrainResult, check_residual, compute_dtype, fp32_matmul_context,
                                    init_flat, memory_model)


def _jax_dtype(precision: str) -> Any:
    import jax.numpy as jnp

    return getattr(jnp, compute_dtype(precision))


def jax_parts(cfg: GPTConfig, precision: str, flat: dict[str, np.ndarray],
              residual: str = "compute") -> tuple[Any, ...]:
    """(Lab 04) FlaxGPT computing in ``precision`` from fp32 ``flat`` weights: nnx.split's (graphdef, params, rest)."""
    import jax.numpy as jnp
    from flax import nnx

    from labkit.gpt.convert import load_flat_params
    from labkit.gpt.flax_model import abstract_flax_gpt

    dt = _jax_dtype(precision)
    res = jnp.float32 if check_residual(residual) == "fp32" and dt != jnp.float32 else None  # see TrainConfig.jax_residual
    model = abstract_flax_gpt(cfg, dtype=dt, residual_dtype=res)  # shapes only; load_flat_params fills in fp32
    model = load_flat_params(model, flat)
    return nnx.split(model, nnx.Param, ...)  # graphdef (holds the compute dtype), params, rest


def saved_tensors_jax(cfg: GPTConfig, precision: str, x: np.ndarray, flat: dict[str, np.ndarray],
                      residual: str = "compute") -> list[tuple[str, tuple[int, ...], int]]:
    """(Lab 04) (dtype, shape, bytes) per residual JAX autodiff keeps for the backward pass (shapes only, no run)."""
    import jax
    from flax import nnx

    from labkit.gpt.flax_model import flax_loss

    graphdef, params, rest = jax_parts(cfg, precision, flat, residual)
    xj = jax.numpy.asarray(x)
    f = lambda p: flax_loss(nnx.merge(graphdef, p, rest), xj, xj)  # noqa: E731
    res = jax.eval_shape(lambda p: jax.vjp(f, p)[1], params)  # the vjp closure's residuals
    return [(str(r.dtype), tuple(r.shape), int(r.size * r.dtype.itemsize)) for r in jax.tree_util.tree_leaves(res)]


def saved_bytes_jax(cfg: GPTConfig, precision: str, x: np.ndarray, flat: dict[str, np.ndarray],
                    residual: str = "compute") -> int:
    """(Lab 04) Bytes JAX autodiff keeps for the backward pass (residuals; shapes only, no run)."""
    return int(sum(b for _, _, b in saved_tensors_jax(cfg, precision, x, flat, residual)))


_COMPILED: dict[tuple, Any] = {}  # see train_jax


def train_jax(cfg: GPTConfig, precision: str, tokens: np.ndarray, tc: TrainConfig,
              flat: dict[str, np.ndarray] | None = None) -> TrainResult:
    """(Lab 04) Train FlaxGPT with fp32 master weights and ``precision`` compute; JAX + optax."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from labkit.gpt.flax_model import flax_flat_params, flax_loss

    flat = init_flat(cfg, tc.seed) if flat is None else flat
    graphdef, params, rest = jax_parts(cfg, precision, flat, tc.jax_residual)
    # Same recipe as train_torch: clip the (unscaled, fp32) global norm, AdamW with linear warm-up.
    # optax counts applied updates; a skipped fp16 step restores the state, count included.
    sched = lambda count: tc.lr * jnp.minimum(1.0, (count + 1) / tc.warmup) if tc.warmup else tc.lr  # noqa: E731
    tx = optax.adamw(sched, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.0)
    if tc.clip_norm is not None:
        tx = optax.chain(optax.clip_by_global_norm(tc.clip_norm), tx)
    scaled = precision == "fp16_scaled"
    lcfg = tc.loss_scale if scaled else ls.static(1.0)
    opt_state, ls_state = tx.init(params), ls.init(lcfg)

    def step(params: Any, opt_state: Any, ls_state: ls.LossScaleState, x: Any, y: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            loss = flax_loss(nnx.merge(graphdef, p, rest), x, y)  # fp32 nats/token
            return ls.scale_loss(loss, ls_state), loss

        (_, loss), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        grads = ls.unscale(grads, ls_state)  # fp32, divided by the scale
        finite = ls.all_finite(grads)
        updates, new_opt = tx.update(grads, opt_state, params)
        new_params = optax.apply_updates(params, updates)
        if scaled:  # skip the step (weights and Adam moments) when a gradient overflowed
            new_params, new_opt = ls.select(finite, (new_params, new_opt), (params, opt_state))
        return new_params, new_opt, ls.update(ls_state, finite, lcfg), loss, finite

    batches = Batcher(tokens, tc.batch, tc.seq, seed=tc.seed)
    x0, y0 = next(Batcher(tokens, tc.batch, tc.seq, seed=tc.seed))
    # One compile per (model, precision, optimizer, loss-scale rule, batch shape): re-running a
    # cell, or a run that differs only in init_scale / seed / steps, reuses it.
    # The attention kernel is chosen when the step is traced (cuDNN's on Ampere+ in bf16/fp16, XLA's inside
    # attention.xla_attention()): part of the key, or a run asking for XLA's would reuse cuDNN's program.
    kernel = attention.jax_attention_implementation(_jax_dtype(precision))
    key = (cfg, precision, tc.lr, tc.warmup, tc.clip_norm, replace(lcfg, init_scale=1.0), x0.shape, tc.fp32_matmul,
           jax.default_backend(), kernel, tc.jax_residual)
    if key not in _COMPILED:
        with fp32_matmul_context("jax", tc.fp32_matmul):  # traced and compiled under it
            lowered = jax.jit(step, donate_argnums=(0, 1)).lower(params, opt_state, ls_state, x0, y0)
            _COMPILED[key] = (lowered, lowered.compile())
    lowered, compiled = _COMPILED[key]
    mem = compiled.memory_analysis()
    losses, times, scales, skipped = [], [], [], 0
    for i in range(tc.steps):
        x, y = next(batches)
        scales.append(float(ls_state.scale))
        t0 = time.perf_counter()
        params, opt_state, ls_state, loss, finite = compiled(params, opt_state, ls_state, x, y)
        loss_v = float(loss)  # waits for the device: the step is done
        if i >= tc.timed_from:
            times.append(time.perf_counter() - t0)
        losses.append(loss_v)
        skipped += not bool(finite)
    state = master.jax_state(params, opt_state)  # the trained trees' real dtypes, before a trace donates them
    memory = {**memory_model(cfg), "saved_for_backward": saved_bytes_jax(cfg, precision, x0, flat, tc.jax_residual),
              "xla_temp": int(getattr(mem, "temp_size_in_bytes", 0) or 0)}
    # Copied before any traced step below donates (invalidates) the trained weights.
    kept = flax_flat_params(nnx.merge(graphdef, params, rest)) if tc.keep_params else None
    device_time = None
    if tc.trace_steps:  # a few more steps on the last batch, traced: where the step's device time goes
        from labkit.measure import xla_breakdown

        traced, note = xla_breakdown.for_trace(lowered, compiled)  # on a GPU: without command buffers
        state = [params, opt_state, ls_state]

        def run() -> Any:  # each call donates the state it is given and keeps the new one
            state[0], state[1], state[2], loss, _ = traced(*state, x, y)
            return loss

        device_time = xla_breakdown.trace_step(run, traced.as_text(), steps=tc.trace_steps)
        device_time = replace(device_time, source=device_time.source + note)
    return TrainResult("jax", precision, losses, times, scales, skipped, memory, device_time, params=kept, state=state)


def heldout_loss_jax(cfg: GPTConfig, flat: dict[str, np.ndarray], tokens: np.ndarray, precision: str = "fp32",
                     batches: int = 8, batch: int = 8, seq: int | None = None, seed: int = 0,
                     fp32_matmul: str = "highest", residual: str = "compute") -> float:
    """(Lab 04) Mean cross-entropy (nats/token) of weights ``flat`` on seeded windows of ``tokens``, in ``precision``.

    Evaluates a trained model apart from its training losses: on held-out text (``labkit.gpt.data.split``).
    With ``precision="fp32"`` (and ``fp32_matmul="highest"``, the default) every run's weights, whatever
    precision trained them, are judged by one true-fp32 forward; with the run's own precision, by its own.
    ``batches`` windows of (``batch``, ``seq``) tokens from ``numpy.random.default_rng(seed)``; ``residual`` as
    ``TrainConfig.jax_residual``.
    """
    import jax
    from flax import nnx

    from labkit.gpt.data import check_count, get_batch
    from labkit.gpt.flax_model import flax_loss

    batches, batch = check_count(batches, "batches", example=8), check_count(batch, "batch", example=8)
    seq = cfg.seq_len if seq is None else check_count(seq, "seq", example=cfg.seq_len)
    if seq > cfg.seq_len:
        raise ValueError(f"seq={seq} is longer than the model's seq_len={cfg.seq_len}; use seq <= {cfg.seq_len}")
    graphdef, params, rest = jax_parts(cfg, precision, flat, residual)
    loss = jax.jit(lambda p, x, y: flax_loss(nnx.merge(graphdef, p, rest), x, y))
    rng, total = np.random.default_rng(seed), 0.0
    with fp32_matmul_context("jax", fp32_matmul):
        for _ in range(batches):  # equal-sized batches: the mean of means is the mean per token
            x, y = get_batch(tokens, batch, seq, rng)
            total += float(loss(params, x, y))
    return total / batches
