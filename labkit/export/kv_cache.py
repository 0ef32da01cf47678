"""A KV cache for the course GPT, in PyTorch and in JAX: one decode step, two frameworks (Lab 05).

Generating token n+1 with a plain forward pass recomputes keys and values for all n earlier
tokens. A **KV cache** keeps every layer's keys and values, so a step only computes the new
tokens' q/k/v and attends to the cache: work per token drops from O(n) forward passes to one.

Both step functions have the same contract (only the array layouts differ, each framework's
natural one):

    step(tokens (batch, t), k_cache, v_cache, start, pad) -> logits (batch, vocab) of the last token

- ``tokens`` are written at absolute *slots* ``start .. start + t - 1`` of a **static** cache
  of ``max_len`` slots; the prompt is the first call (prefill, ``start = 0``), then one token
  per call (decode). Static shapes mean one compiled program per batch size, the form that
  ``torch.export``, ``torch.compile`` and ``jax.export`` want.
- **Mixed-length batches are left-padded**: row r's real tokens start at slot ``pad[r]``.
  Its position ids are ``slot - pad[r]`` (so a padded prompt sees the same positions as alone)
  and its keys before ``pad[r]`` are masked out. A pad query may attend to itself only: a
  fully masked softmax row would be NaN, and NaN * 0 still poisons the value sum.
- The steps reuse the models' own layers (embeddings, LayerNorms, Linear, MLP, tied head);
  only attention is re-written to read the cache, so the cached decoder equals full
  recomputation to float rounding (tested).

Layouts: torch caches are (n_layer, batch, n_head, max_len, head_dim) (SDPA's heads-first);
JAX caches are (n_layer, batch, max_len, n_head, head_dim) (``jax.nn.dot_product_attention``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from labkit.gpt.config import GPTConfig, check_config
from labkit.gpt.data import check_count


def kv_cache_bytes(cfg: GPTConfig, batch: int, seq: int, bytes_per_element: int = 4) -> int:
    """Bytes of a KV cache holding `seq` tokens for `batch` sequences (Lab 05)."""
    cfg = check_config(cfg)
    batch, seq = check_count(batch, "batch", example=8), check_count(seq, "seq", example=cfg.seq_len)
    nbytes = check_count(bytes_per_element, "bytes_per_element", message=(
        f"bytes_per_element is bytes per number (2 for bf16, 4 for fp32, 1 for fp8), a whole number >= 1, "
        f"got {bytes_per_element!r}"))
    # K and V (2) for every layer, sequence and position: n_head * head_dim = d_model numbers.
    return 2 * cfg.n_layer * batch * seq * cfg.d_model * nbytes


def attention_allowed(slots: np.ndarray | Any, pad: Any, max_len: int, xp: Any = np) -> Any:
    """(batch, t, max_len) bool: may the query at slot s see the key at slot k? (Lab 05)"""
    key = xp.arange(max_len)[None, None, :]  # (1, 1, max_len)
    q = slots[None, :, None]  # (1, t, 1) absolute slot of each query
    real = key >= pad[:, None, None]  # (batch, 1, max_len): not left padding
    return (key <= q) & (real | (key == q))  # causal, and pad queries see only themselves


# --------------------------------------------------------------------------------------
# PyTorch
# --------------------------------------------------------------------------------------


def torch_new_cache(cfg: GPTConfig, batch: int, max_len: int, device: Any = "cpu",
                    dtype: Any = None) -> tuple[Any, Any]:
    """Zeroed (k, v) caches, each (n_layer, batch, n_head, max_len, head_dim) (Lab 05)."""
    import torch

    shape = (cfg.n_layer, batch, cfg.n_head, max_len, cfg.head_dim)
    dtype = dtype or torch.float32
    return torch.zeros(shape, device=device, dtype=dtype), torch.zeros(shape, device=device, dtype=dtype)


def torch_step(model: Any, tokens: Any, k_cache: Any, v_cache: Any, start: Any, pad: Any) -> Any:
    """One cached TorchGPT step; writes k/v in place, returns last-token logits (batch, vocab) (Lab 05)."""
    import torch
    import torch.nn.functional as F

    b, t = tokens.shape  # (batch, t) int64
    d, h, max_len = model.cfg.d_model, model.cfg.n_head, k_cache.shape[3]
    slots = start + torch.arange(t, device=tokens.device)  # (t,) absolute cache slots
    pos = (slots[None, :] - pad[:, None]).clamp(min=0)  # (batch, t) position ids
    x = model.wte(tokens) + model.wpe(pos)  # (batch, t, d_model)
    allowed = attention_allowed(slots, pad, max_len, xp=_TorchXP(tokens.device))
    mask = allowed[:, None]  # (batch, 1, t, max_len): broadcast over heads
    for i, blk in enumerate(model.blocks):
        q, k, v = blk.attn.qkv(blk.ln1(x)).split(d, dim=2)  # each (batch, t, d_model)
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))  # (batch, heads, t, hd)
        # In place: the caller owns the cache; torch.export records it as an input mutation.
        k_cache[i].index_copy_(2, slots, k)
        v_cache[i].index_copy_(2, slots, v)
        y = F.scaled_dot_product_attention(q, k_cache[i], v_cache[i], attn_mask=mask)
        x = x + blk.attn.proj(y.transpose(1, 2).reshape(b, t, d))
        x = x + blk.mlp(blk.ln2(x))
    return F.linear(model.ln_f(x[:, -1]), model.wte.weight)  # tied head -> (batch, vocab)


class _TorchXP:
    """Just enough of a numpy-like namespace for attention_allowed on torch tensors."""

    def __init__(self, device: Any) -> None:
        self.device = device

    def arange(self, n: int) -> Any:
        import torch

        return torch.arange(n, device=self.device)


def torch_step_module(model: Any) -> Any:
    """An nn.Module whose forward is torch_step: what torch.export / torch.compile take (Lab 05)."""
    import torch

    class TorchDecodeStep(torch.nn.Module):
        """forward(tokens, k_cache, v_cache, start, pad) -> logits (batch, vocab) (Lab 05)."""

        def __init__(self, gpt: Any) -> None:
            super().__init__()
            self.gpt = gpt

        def forward(self, tokens: Any, k_cache: Any, v_cache: Any, start: Any, pad: Any) -> Any:
            """torch_step of the wrapped TorchGPT (Lab 05)."""
            return torch_step(self.gpt, tokens, k_cache, v_cache, start, pad)

    return TorchDecodeStep(model).eval()


# --------------------------------------------------------------------------------------
# JAX (Flax NNX)
# --------------------------------------------------------------------------------------


def flax_from_flat_fn(cfg: GPTConfig) -> Callable[[dict[str, Any]], Any]:
    """fn(flat) -> a FlaxGPT holding `flat` (jax arrays or tracers), usable inside jit/export (Lab 05)."""
    from flax import nnx

    from labkit.gpt.flax_model import canonical_vars, abstract_flax_gpt

    graphdef, abstract_state = nnx.split(abstract_flax_gpt(cfg))

    def build(flat: dict[str, Any]) -> Any:
        # copy=True: fresh Variables owned by the current trace (NNX refuses to mutate
        # Variables created outside it); then fill them from the canonical (PyTorch) layout.
        model = nnx.merge(graphdef, abstract_state, copy=True)
        for name, var, transpose in canonical_vars(model):
            var.set_value(flat[name].T if transpose else flat[name])
        return model

    return build


def jax_new_cache(cfg: GPTConfig, batch: int, max_len: int, dtype: Any = None) -> tuple[Any, Any]:
    """Zeroed (k, v) caches, each (n_layer, batch, max_len, n_head, head_dim) (Lab 05)."""
    import jax.numpy as jnp

    shape = (cfg.n_layer, batch, max_len, cfg.n_head, cfg.head_dim)
    return jnp.zeros(shape, dtype or jnp.float32), jnp.zeros(shape, dtype or jnp.float32)


def jax_step_fn(cfg: GPTConfig) -> Callable[..., tuple[Any, Any, Any]]:
    """Pure fn(flat, tokens, k, v, start, pad) -> (logits (batch, vocab), k, v) for jit/export (Lab 05)."""
    import jax
    import jax.numpy as jnp

    build = flax_from_flat_fn(cfg)

    def step(flat: dict[str, Any], tokens: Any, k_cache: Any, v_cache: Any, start: Any,
             pad: Any) -> tuple[Any, Any, Any]:
        m = build(flat)
        b, t = tokens.shape  # (batch, t) int32
        d, h, max_len = cfg.d_model, cfg.n_head, k_cache.shape[2]
        slots = start + jnp.arange(t, dtype=jnp.int32)  # (t,)
        pos = jnp.maximum(slots[None, :] - pad[:, None], 0)  # (batch, t)
        x = m.wte(tokens) + m.wpe(pos)  # (batch, t, d_model)
        mask = attention_allowed(slots, pad, max_len, xp=jnp)[:, None]  # (batch, 1, t, max_len)
        ks, vs = [], []
        for i, blk in enumerate(m.blocks):
            q, k, v = jnp.split(blk.attn.qkv(blk.ln1(x)), 3, axis=-1)  # each (batch, t, d_model)
            q, k, v = (z.reshape(b, t, h, d // h) for z in (q, k, v))  # (batch, t, heads, hd)
            zero = jnp.zeros((), jnp.int32)
            kc = jax.lax.dynamic_update_slice(k_cache[i], k, (zero, start, zero, zero))
            vc = jax.lax.dynamic_update_slice(v_cache[i], v, (zero, start, zero, zero))
            y = jax.nn.dot_product_attention(q, kc, vc, mask=mask)  # (batch, t, heads, hd)
            x = x + blk.attn.proj(y.reshape(b, t, d))
            x = x + blk.mlp(blk.ln2(x))
            ks.append(kc)
            vs.append(vc)
        logits = m.wte.attend(m.ln_f(x[:, -1]))  # tied head -> (batch, vocab)
        return logits, jnp.stack(ks), jnp.stack(vs)

    return step
