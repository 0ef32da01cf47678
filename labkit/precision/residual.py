"""Two meanings of "train in bf16": where each framework rounds the residual stream (Lab 04).

A transformer's residual stream is the running sum ``x = x + block(x)`` that carries every layer's
output to the next. ``torch.autocast`` leaves it fp32: embedding lookups and additions are on none
of its lists and layer_norm is on its fp32 list, so what gets rounded is what the matmuls (and the
ops after them inside a block) produce. Flax's ``dtype=`` builds every layer to compute in bf16, the
embeddings included; the stream starts bf16, and type promotion (bf16 + bf16 is bf16; fp32 + bf16
is fp32, in JAX as in torch) keeps every add in bf16. ``FlaxGPT(residual_dtype=jnp.float32)`` looks
the embeddings up in fp32 and runs the LayerNorms in fp32: autocast's recipe, up to the kernels
(GELU's rounding, attention's internals). So a "bf16" run in the two frameworks by default computes
two different things.

Why it matters: a bf16 number has 8 significant bits, so adding an update smaller than half a step
of the number leaves it unchanged (section 2's 256 + 0.75 = 256), and a larger one is rounded to the
stream's step. :func:`stream_rounding` measures both at every residual add of the model: the share
of update elements lost outright, and the sum's rounding error as a share of the update's size. In
an fp32 stream the error is about 2^16 times smaller (unit roundoff 2^-24 against 2^-8).
"""

from __future__ import annotations

from dataclasses import dataclass
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
        return {"embeddings": m.embed(tokens), "residual stream": m.stream(tokens), "logits": m(tokens)}

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


@dataclass(frozen=True)
class AddRounding:
    """(Lab 04) What holding ``x + dx`` in one dtype does to the update ``dx``: elements lost, error size."""

    lost: float   # share of the nonzero update elements the add loses entirely (x + dx rounds back to x)
    error: float  # ‖rounded(x + dx) − (x + dx)‖ / ‖dx‖: the rounding error, as a share of the update's size
    adds: int = 1  # how many additions were pooled into these two figures

    @classmethod
    def from_sums(cls, lost: float, err2: float, moved: float, size2: float, adds: int = 1) -> "AddRounding":
        """(Lab 04) From pooled sums: elements lost, squared error, nonzero updates, squared update size."""
        return cls(float(lost / moved) if moved else 0.0, float(np.sqrt(err2 / size2)) if size2 else 0.0, adds)


def add_rounding(x: Any, dx: Any, dtype: Any) -> AddRounding:
    """(Lab 04) Round ``x`` and ``dx`` to ``dtype``, add them there, and measure the sum against float64."""
    xa, da = np.asarray(x, np.float64), np.asarray(dx, np.float64)
    if xa.shape != da.shape:
        raise ValueError(f"x and dx must have one shape, got {xa.shape} and {da.shape}: pass a stream and its update")
    return AddRounding.from_sums(*_add_parts(xa, da, dtype))


def _add_parts(x: np.ndarray, dx: np.ndarray, dtype: Any) -> tuple[int, float, int, float]:
    """(elements lost, squared error, nonzero updates, squared update size) of x + dx held in ``dtype``."""
    import jax.numpy as jnp

    xs, ds = jnp.asarray(x, dtype), jnp.asarray(dx, dtype)  # the stream and the update as that dtype holds them
    total = np.asarray(xs + ds, np.float64)  # the add, rounded to dtype
    exact = np.asarray(xs, np.float64) + np.asarray(ds, np.float64)  # float64: exact for these operands
    moved = dx != 0  # before the cast: an update that underflows to 0 in dtype is lost too
    lost = moved & (total == np.asarray(xs, np.float64))  # the sum rounded back to x: the update vanished
    return int(lost.sum()), float(((total - exact) ** 2).sum()), int(moved.sum()), float((dx**2).sum())


def stream_rounding(cfg: GPTConfig, flat: dict[str, np.ndarray], tokens: np.ndarray,
                    precision: str = "bf16") -> dict[str, AddRounding]:
    """(Lab 04) The blocks' residual adds held in ``precision``'s compute dtype and in fp32: {dtype name: AddRounding}.

    Runs ``FlaxGPT`` with the stream in fp32 (autocast's recipe) on ``tokens`` (batch, seq) and, at each
    of the ``2 * n_layer`` adds (attention, then MLP), measures what holding the stream and the update
    in the compute dtype, and in fp32, would do to the update: the two figures are pooled over all adds.
    """
    import jax.numpy as jnp
    from flax import nnx

    from labkit.precision.train import compute_dtype
    from labkit.precision.train_jax import jax_parts

    low = jnp.dtype(compute_dtype(precision))
    if low == jnp.float32:
        raise ValueError(f"precision={precision!r} computes in fp32: pass a low one, e.g. 'bf16' or 'fp16_scaled'")
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or tokens.shape[1] > cfg.seq_len or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be integer ids of shape (batch, seq <= {cfg.seq_len}), got {tokens.dtype} "
                         f"{tokens.shape}; e.g. tokens[:4 * {cfg.seq_len}].reshape(4, {cfg.seq_len})")
    model = nnx.merge(*jax_parts(cfg, precision, flat, residual="fp32"))
    x = model.embed(jnp.asarray(tokens, jnp.int32))  # (batch, seq, d_model) fp32
    sums = {dt: np.zeros(4) for dt in (low, jnp.dtype(jnp.float32))}  # lost, err², moved, size² per dtype
    for block in model.blocks:
        for update in (lambda h: block.attn(block.ln1(h)), lambda h: block.mlp(block.ln2(h))):
            dx = update(x).astype(jnp.float32)  # the block's output, computed in the compute dtype
            for dt in sums:
                sums[dt] += _add_parts(np.asarray(x, np.float64), np.asarray(dx, np.float64), dt)
            x = x + dx  # the fp32 stream carries on
    return {str(dt): AddRounding.from_sums(*v, adds=2 * cfg.n_layer) for dt, v in sums.items()}
