"""Which attention kernel JAX models trace: cuDNN's fused one on a recent NVIDIA GPU, else XLA's (Labs 02 and 04).

The flag lives here, in the runtime package, because it depends on the backend and the GPU generation,
and because FLOP counting (Lab 02) and the causality check (Lab 04) must be able to force XLA's kernel
for a trace.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

_XLA_ATTENTION_ONLY = False  # set by xla_attention(): models traced meanwhile use XLA's attention


@contextlib.contextmanager
def xla_attention() -> Iterator[None]:
    """Trace with XLA's attention everywhere, so every matmul is an HLO dot FLOP counting sees (Lab 02).

    cuDNN's fused attention is one custom call: XLA's HLO and ``cost_analysis`` do not see the
    matmuls inside it (torch's FlopCounterMode has the same blind spot for fused SDPA kernels).
    The embedding's gradient is traced as XLA's scatter too (``labkit.runtime.embedding``), so the
    count holds no matmul that is not the model's. Only tracing inside the block is affected: use it
    around ``jax.jit(...).lower(...)``.
    """
    global _XLA_ATTENTION_ONLY
    before, _XLA_ATTENTION_ONLY = _XLA_ATTENTION_ONLY, True
    try:
        yield
    finally:
        _XLA_ATTENTION_ONLY = before


def xla_kernels_only() -> bool:
    """True inside ``xla_attention()``: trace XLA's own kernels, no GPU-only substitute (Lab 02)."""
    return _XLA_ATTENTION_ONLY


def jax_attention_implementation(dtype: Any) -> str | None:
    """``implementation=`` for ``jax.nn.dot_product_attention``: cuDNN's fused kernel where it exists (Lab 02).

    XLA's own attention writes the (batch, heads, seq, seq) scores to memory and reads them back
    (several times in the backward pass); cuDNN's flash-attention kernel keeps them on chip. It
    needs an NVIDIA GPU of compute capability >= 8.0 (A100, L4, H100: not a T4) and fp16/bf16.
    ``None`` lets JAX choose, which is XLA's kernel: the one TPUs and CPUs use.
    """
    import jax
    import jax.numpy as jnp

    if xla_kernels_only() or jax.default_backend() != "gpu":
        return None
    if jnp.dtype(dtype) not in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16)):
        return None
    cc = getattr(jax.devices()[0], "compute_capability", "0")
    try:
        major = int(str(cc).split(".")[0])
    except ValueError:
        return None
    return "cudnn" if major >= 8 else None
