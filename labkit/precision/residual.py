"""Two meanings of "train in bf16": where each framework rounds the residual stream (Lab 04).

A transformer's residual stream is the running sum ``x = x + block(x)`` that carries every layer's
output to the next. ``torch.autocast`` leaves it fp32: additions and embedding lookups are not on
its low-precision list, so only what a matmul produces is rounded. Flax's ``dtype=`` argument casts
the whole forward, the embeddings and the residual adds included. (``FlaxGPT(residual_dtype=...)``
keeps the stream in fp32 as autocast does.) So a "bf16" run in the two frameworks computes two
different things.

Why it matters: a bf16 number has 8 significant bits, so adding an update smaller than half a step
of the number leaves it unchanged (section 2's 256 + 1 = 256). Each block's update is small next to
the stream it is added to, and in a bf16 stream part of it is lost in the addition.
:func:`lost_updates` counts that share; in an fp32 stream the same updates survive.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from labkit.gpt.config import GPTConfig

RECIPES = ("torch.autocast", "flax dtype=", "flax dtype= + residual_dtype=fp32")  # stream_dtypes' rows


def _torch_dtypes(cfg: GPTConfig, dtype: Any, tokens: np.ndarray) -> dict[str, str]:
    import torch

    from labkit.gpt.torch_model import TorchGPT

    model, seen = TorchGPT(cfg), {}
    hooks = [model.blocks[0].register_forward_pre_hook(lambda m, a: seen.__setitem__("embeddings", a[0].dtype)),
             model.blocks[-1].register_forward_hook(lambda m, a, o: seen.__setitem__("residual stream", o.dtype))]
    try:
        # On the CPU: CUDA's autocast lists, like the CPU's, leave additions and embedding lookups out (fp32 stays fp32).
        with torch.no_grad(), torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            seen["logits"] = model(torch.from_numpy(tokens).long()).dtype
    finally:
        for h in hooks:
            h.remove()
    return {k: str(v).removeprefix("torch.") for k, v in seen.items()}


def _flax_dtypes(cfg: GPTConfig, dtype: Any, residual_dtype: Any, tokens: np.ndarray) -> dict[str, str]:
    import jax
    from flax import nnx

    from labkit.gpt.flax_model import abstract_flax_gpt

    graphdef, state = nnx.split(abstract_flax_gpt(cfg, dtype=dtype, residual_dtype=residual_dtype))

    def stages(s: Any) -> dict[str, Any]:
        m = nnx.merge(graphdef, s)
        x = m.embed(tokens)
        out = {"embeddings": x}
        for block in m.blocks:
            x = block(x)
        return {**out, "residual stream": x, "logits": m.wte.attend(m.ln_f(x))}

    shapes = jax.eval_shape(stages, state)  # dtypes and shapes only: no weights, no FLOPs
    return {k: str(v.dtype) for k, v in shapes.items()}


def stream_dtypes(cfg: GPTConfig, precision: str = "bf16") -> list[dict[str, str]]:
    """(Lab 04) dtype of the embeddings, the residual stream (last block's output) and the logits per recipe."""
    import jax.numpy as jnp
    import torch

    from labkit.precision.train import compute_dtype

    low = compute_dtype(precision)  # "bfloat16" | "float16" | "float32"
    tokens = np.zeros((1, min(8, cfg.seq_len)), np.int32)  # (batch, seq): dtypes do not depend on the values
    rows = [_torch_dtypes(cfg, getattr(torch, low), tokens), _flax_dtypes(cfg, jnp.dtype(low), None, tokens),
            _flax_dtypes(cfg, jnp.dtype(low), jnp.float32, tokens)]
    return [{"recipe": name, **r} for name, r in zip(RECIPES, rows)]


def swamped(x: Any, dx: Any, dtype: Any) -> float:
    """(Lab 04) Share of the nonzero updates ``dx`` that ``x + dx``, computed in ``dtype``, loses entirely."""
    import jax.numpy as jnp

    xs, ds = jnp.asarray(x, dtype), jnp.asarray(dx, dtype)
    if xs.shape != ds.shape:
        raise ValueError(f"x and dx must have one shape, got {xs.shape} and {ds.shape}: pass a stream and its update")
    moved = ds != 0
    lost = moved & ((xs + ds) == xs)  # the sum rounded back to x: the update vanished
    n = int(moved.sum())
    return float(lost.sum()) / n if n else 0.0


def lost_updates(cfg: GPTConfig, flat: dict[str, np.ndarray], tokens: np.ndarray,
                 precision: str = "bf16") -> dict[str, float]:
    """(Lab 04) Share of the blocks' update elements lost in the residual adds: stream in ``precision`` vs fp32.

    Runs ``FlaxGPT`` with the stream in fp32 (autocast's recipe) on ``tokens`` (batch, seq) and, at each
    of the ``2 * n_layer`` adds (attention, then MLP), asks how many of the update's nonzero elements
    would vanish if the stream and the update were held in the compute dtype, and in fp32.
    """
    import jax.numpy as jnp
    from flax import nnx

    from labkit.precision.train import compute_dtype
    from labkit.precision.train_jax import _jax_parts

    low = jnp.dtype(compute_dtype(precision))
    if low == jnp.float32:
        raise ValueError(f"precision={precision!r} computes in fp32: pass a low one, e.g. 'bf16' or 'fp16_scaled'")
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or tokens.shape[1] > cfg.seq_len or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be integer ids of shape (batch, seq <= {cfg.seq_len}), got {tokens.dtype} "
                         f"{tokens.shape}; "
                         f"e.g. tokens[:4 * {cfg.seq_len}].reshape(4, {cfg.seq_len})")
    model = nnx.merge(*_jax_parts(cfg, precision, flat, residual="fp32"))
    x, lost = model.embed(jnp.asarray(tokens, jnp.int32)), {"low": [], "fp32": []}
    for block in model.blocks:
        for update in (lambda h: block.attn(block.ln1(h)), lambda h: block.mlp(block.ln2(h))):
            dx = update(x).astype(jnp.float32)  # the block's output, computed in the compute dtype
            lost["low"].append(swamped(x, dx, low))
            lost["fp32"].append(swamped(x, dx, jnp.float32))
            x = x + dx  # the fp32 stream carries on
    return {str(low): float(np.mean(lost["low"])), "float32": float(np.mean(lost["fp32"]))}
