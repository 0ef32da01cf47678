"""labkit.runtime.attention: XLA's attention off a recent GPU and inside xla_attention()."""

from __future__ import annotations

import pytest

from labkit.runtime import attention


def test_attention_implementation_is_xla_off_gpu_and_inside_xla_attention() -> None:
    import jax.numpy as jnp

    # This suite runs on CPU: JAX picks its own (XLA) attention, in every dtype.
    assert all(attention.jax_attention_implementation(dt) is None for dt in (jnp.float32, jnp.bfloat16, jnp.float16))
    with pytest.raises(RuntimeError):
        with attention.xla_attention():
            assert attention._XLA_ATTENTION_ONLY
            raise RuntimeError("boom")
    assert not attention._XLA_ATTENTION_ONLY  # restored even when the block fails
