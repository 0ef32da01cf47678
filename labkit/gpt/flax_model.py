"""The course GPT in Flax NNX, and its canonical weight dict (Lab 02).

Same parameterization as ``labkit.gpt.torch_model.TorchGPT`` — see ``labkit.gpt.config`` for the
config, the shared choices (tied head, no Linear bias, tanh GELU, no dropout) and the
canonical weight names. Parameters are always fp32; ``dtype`` (e.g. ``jnp.bfloat16``) is the
*compute* dtype for mixed precision (Lab 04): every layer built with it casts its inputs and
parameters to it (a LayerNorm too: its statistics are computed in fp32, but of the rounded input),
and the loss is computed in fp32. The embeddings come out in ``dtype``, so by ordinary type
promotion every ``x + block(x)`` of the **residual stream** stays in it. ``torch.autocast`` instead
leaves the stream fp32: embedding lookups and additions are on none of its lists, and layer_norm is
on its fp32 list. ``residual_dtype`` (e.g. ``jnp.float32``) follows autocast's recipe: the embeddings
are looked up from the fp32 tables, the stream and the LayerNorms run in ``residual_dtype``, and
only the matmuls (with what follows them inside a block) run in ``dtype``. Kernels still differ
(GELU's rounding, the attention kernel's internals), so the two frameworks agree closely, not bit
for bit.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from labkit.runtime import attention, embedding
from labkit.gpt.config import GPTConfig

def _normal(std: float) -> Any:
    return nnx.initializers.normal(stddev=std)


class CausalSelfAttention(nnx.Module):
    """Multi-head causal self-attention with a fused q/k/v projection (Lab 02)."""

    def __init__(self, cfg: GPTConfig, *, dtype: Any, rngs: nnx.Rngs) -> None:
        d = cfg.d_model
        resid_std = 0.02 / math.sqrt(2 * cfg.n_layer)  # GPT-2: scale residual writes by depth
        self.n_head = cfg.n_head
        self.qkv = nnx.Linear(d, 3 * d, use_bias=False, dtype=dtype,
                              kernel_init=_normal(0.02), rngs=rngs)  # kernel (d, 3d)
        self.proj = nnx.Linear(d, d, use_bias=False, dtype=dtype,
                               kernel_init=_normal(resid_std), rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, t, d = x.shape  # (batch, seq, d_model)
        q, k, v = jnp.split(self.qkv(x), 3, axis=-1)  # each (batch, seq, d_model)
        # JAX's attention layout is (batch, seq, heads, head_dim): no transpose needed.
        q, k, v = (z.reshape(b, t, self.n_head, d // self.n_head) for z in (q, k, v))
        # softmax(q k^T / sqrt(head_dim) + causal mask) v; matches torch SDPA to ~1e-6 in fp32.
        if q.dtype == jnp.float16 and jax.default_backend() != "gpu":
            y = _attention_fp32_accumulate(q, k, v)
        else:  # on Ampere+ GPUs in bf16/fp16: cuDNN's fused (flash) kernel, as torch's SDPA uses
            y = jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                             implementation=attention.jax_attention_implementation(q.dtype))
        return self.proj(y.reshape(b, t, d))  # (batch, seq, d_model)


def _attention_fp32_accumulate(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """Causal attention spelled out, scores accumulated in fp32 (Lab 04).

    ``jax.nn.dot_product_attention`` (jax 0.10) requests the F16_F16_F32 dot algorithm for fp16
    inputs, which XLA:CPU and TPU reject under jit; ``preferred_element_type=float32`` asks for
    the same thing (fp16 inputs, fp32 accumulation) in a form every backend compiles.
    """
    b, t, n, h = q.shape  # (batch, seq, heads, head_dim)
    logits = jnp.einsum("btnh,bsnh->bnts", q, k, preferred_element_type=jnp.float32) / jnp.sqrt(jnp.float32(h))
    causal = jnp.tril(jnp.ones((t, t), dtype=bool))  # (seq, seq): token t sees tokens <= t
    probs = jax.nn.softmax(jnp.where(causal, logits, -jnp.inf), axis=-1).astype(v.dtype)
    return jnp.einsum("bnts,bsnh->btnh", probs, v)  # (batch, seq, heads, head_dim)


class MLP(nnx.Module):
    """Position-wise MLP d_model -> d_ff -> d_model with tanh-approximate GELU (Lab 02)."""

    def __init__(self, cfg: GPTConfig, *, dtype: Any, rngs: nnx.Rngs) -> None:
        resid_std = 0.02 / math.sqrt(2 * cfg.n_layer)
        self.fc = nnx.Linear(cfg.d_model, cfg.d_ff, use_bias=False, dtype=dtype,
                             kernel_init=_normal(0.02), rngs=rngs)  # kernel (d_model, d_ff)
        self.proj = nnx.Linear(cfg.d_ff, cfg.d_model, use_bias=False, dtype=dtype,
                               kernel_init=_normal(resid_std), rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.proj(jax.nn.gelu(self.fc(x), approximate=True))  # (batch, seq, d_model)


class Block(nnx.Module):
    """Pre-norm transformer block: x + attn(ln1(x)), then x + mlp(ln2(x)) (Lab 02)."""

    def __init__(self, cfg: GPTConfig, *, dtype: Any, rngs: nnx.Rngs, norm_dtype: Any = None) -> None:
        norm_dtype = dtype if norm_dtype is None else norm_dtype  # FlaxGPT's residual_dtype, when it has one
        self.ln1 = nnx.LayerNorm(cfg.d_model, epsilon=cfg.ln_eps, dtype=norm_dtype, rngs=rngs)
        self.attn = CausalSelfAttention(cfg, dtype=dtype, rngs=rngs)
        self.ln2 = nnx.LayerNorm(cfg.d_model, epsilon=cfg.ln_eps, dtype=norm_dtype, rngs=rngs)
        self.mlp = MLP(cfg, dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))  # (batch, seq, d_model)


class FlaxGPT(nnx.Module):
    """Decoder-only GPT in Flax NNX: tokens (batch, seq) int -> logits (batch, seq, vocab) (Lab 02)."""

    def __init__(self, cfg: GPTConfig, *, rngs: nnx.Rngs | None = None, dtype: Any = None,
                 residual_dtype: Any = None) -> None:
        rngs = rngs if rngs is not None else nnx.Rngs(0)
        self.cfg = cfg  # frozen dataclass: static metadata, not a parameter
        # None: the residual stream runs in ``dtype`` (Flax's way); e.g. jnp.float32: autocast's way.
        self.residual_dtype = None if residual_dtype is None else jnp.dtype(residual_dtype)
        d = cfg.d_model
        self.wte = nnx.Embed(cfg.vocab_size, d, dtype=dtype, embedding_init=_normal(0.02),
                             rngs=rngs)  # (vocab, d_model); also the tied head
        self.wpe = nnx.Embed(cfg.seq_len, d, dtype=dtype, embedding_init=_normal(0.02),
                             rngs=rngs)  # (seq_len, d_model)
        norm = dtype if residual_dtype is None else residual_dtype  # autocast runs layer_norm in fp32
        self.blocks = nnx.List([Block(cfg, dtype=dtype, rngs=rngs, norm_dtype=norm) for _ in range(cfg.n_layer)])
        self.ln_f = nnx.LayerNorm(d, epsilon=cfg.ln_eps, dtype=norm, rngs=rngs)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        return self.wte.attend(self.ln_f(self.stream(tokens)))  # tied head: x @ wte.T -> (batch, seq, vocab)

    def stream(self, tokens: jax.Array) -> jax.Array:
        """The residual stream after the last block, (batch, seq, d_model) (Lab 04)."""
        b, t = tokens.shape  # (batch, seq)
        if t > self.cfg.seq_len:
            raise ValueError(f"sequence length {t} > cfg.seq_len={self.cfg.seq_len}")
        x = self.embed(tokens)  # (batch, seq, d_model)
        for block in self.blocks:
            x = block(x)  # x + attn(...) promotes to x's dtype: the residual stream keeps it
        return x

    def embed(self, tokens: jax.Array) -> jax.Array:
        """Token + position embeddings: the start of the residual stream, (batch, seq, d_model) (Lab 04)."""
        t = tokens.shape[1]
        one_hot = embedding.jax_embedding_gradient(self.cfg.vocab_size) == embedding.ONE_HOT  # a GPU: no scatter
        if self.residual_dtype is None:  # looked up and added in the compute dtype
            wte = self.wte.embedding.get_value()  # (vocab, d) fp32, cast as nnx.Embed casts it
            rows = take_rows(wte.astype(self.wte.dtype or wte.dtype), tokens) if one_hot else self.wte(tokens)
            return rows + self.wpe(jnp.arange(t))[None]
        # Looked up from the fp32 tables and added in residual_dtype, as torch does under autocast.
        wte, wpe = self.wte.embedding.get_value(), self.wpe.embedding.get_value()  # (vocab, d), (seq_len, d)
        rows = take_rows(wte, tokens) if one_hot else jnp.take(wte, tokens, axis=0)
        return (rows + wpe[:t][None]).astype(self.residual_dtype)


@jax.custom_vjp
def take_rows(table: jax.Array, tokens: jax.Array) -> jax.Array:
    """``table[tokens]`` whose gradient is a one-hot matmul instead of a scatter-add (Lab 02; runtime.embedding)."""
    return jnp.take(table, tokens, axis=0)  # (vocab, d)[(batch, seq)] -> (batch, seq, d)


def _take_rows_fwd(table: jax.Array, tokens: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    # A zero-width stand-in keeps the table's row count and dtype for the backward pass, not its data.
    return take_rows(table, tokens), (tokens, jnp.zeros((table.shape[0], 0), table.dtype))


def _take_rows_bwd(res: tuple[jax.Array, jax.Array], g: jax.Array) -> tuple[jax.Array, None]:
    tokens, like = res  # tokens (batch, seq); g (batch, seq, d): the gradient of each looked-up row
    one_hot = jax.nn.one_hot(tokens, like.shape[0], dtype=g.dtype)  # (batch, seq, vocab): exact 0/1
    # (vocab, tokens) @ (tokens, d), accumulated in fp32: each table row's sum of its tokens' gradients.
    dtable = jnp.einsum("...v,...d->vd", one_hot, g, preferred_element_type=jnp.float32)
    return dtable.astype(like.dtype), None  # no gradient for integer tokens


take_rows.defvjp(_take_rows_fwd, _take_rows_bwd)


def abstract_flax_gpt(cfg: GPTConfig, dtype: Any = None, residual_dtype: Any = None) -> FlaxGPT:
    """A FlaxGPT whose weights are shapes only (no random init); fill it with flax_load_flat (Lab 05)."""
    return nnx.eval_shape(lambda: FlaxGPT(cfg, rngs=nnx.Rngs(0), dtype=dtype, residual_dtype=residual_dtype))


def canonical_vars(model: FlaxGPT) -> Iterator[tuple[str, nnx.Variable, bool]]:
    """(Lab 05) (canonical name, NNX variable, transpose?) for every parameter, in param_shapes order."""
    yield "wte.weight", model.wte.embedding, False
    yield "wpe.weight", model.wpe.embedding, False
    for i, blk in enumerate(model.blocks):
        p = f"blocks.{i}."
        yield p + "ln1.weight", blk.ln1.scale, False
        yield p + "ln1.bias", blk.ln1.bias, False
        # nnx.Linear kernel is (in, out); the canonical (PyTorch) weight is (out, in).
        yield p + "attn.qkv.weight", blk.attn.qkv.kernel, True
        yield p + "attn.proj.weight", blk.attn.proj.kernel, True
        yield p + "ln2.weight", blk.ln2.scale, False
        yield p + "ln2.bias", blk.ln2.bias, False
        yield p + "mlp.fc.weight", blk.mlp.fc.kernel, True
        yield p + "mlp.proj.weight", blk.mlp.proj.kernel, True
    yield "ln_f.weight", model.ln_f.scale, False
    yield "ln_f.bias", model.ln_f.bias, False


def flax_flat_params(model: FlaxGPT) -> dict[str, np.ndarray]:
    """Canonical {name: fp32 numpy array} of a FlaxGPT (PyTorch layout, contiguous) (Lab 05)."""
    out = {}
    for name, var, transpose in canonical_vars(model):
        arr = np.asarray(jax.device_get(var.get_value()), dtype=np.float32)
        # np.array(copy=True): a writable, C-contiguous copy, never a view of device memory.
        out[name] = np.array(arr.T if transpose else arr, dtype=np.float32, order="C", copy=True)
    return out


def flax_load_flat(model: FlaxGPT, flat: dict[str, np.ndarray]) -> FlaxGPT:
    """Write a canonical flat dict into a FlaxGPT in place (exact fp32 copy); returns it (Lab 05)."""
    for name, var, transpose in canonical_vars(model):
        arr = np.asarray(flat[name], dtype=np.float32)
        var.set_value(jnp.asarray(arr.T if transpose else arr))  # flax >= 0.12 deprecates .value
    return model


def cross_entropy_jax(logits: jax.Array, targets: jax.Array) -> jax.Array:
    """Mean next-token cross-entropy in fp32: logits (batch, seq, vocab), targets (batch, seq) (Lab 02)."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)  # (batch, seq, vocab)
    picked = jnp.take_along_axis(logp, targets[..., None].astype(jnp.int32), axis=-1)
    return -picked.mean()  # nats per token


def flax_loss(model: FlaxGPT, x: jax.Array, y: jax.Array) -> jax.Array:
    """Mean cross-entropy of model(x) against next tokens y (Lab 02)."""
    return cross_entropy_jax(model(x), y)
