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


class _GpuDevice:
    """A jax GPU Device: XLA reports ``compute_capability`` as "major.minor" (CUDA) or the gfx arch (ROCm)."""

    platform = "gpu"

    def __init__(self, cc: str) -> None:
        self.compute_capability = cc


@pytest.fixture
def on_gpu(monkeypatch: pytest.MonkeyPatch):
    """Make jax_attention_implementation see a GPU backend whose first device has capability ``cc``."""
    import jax

    def use(cc: str) -> None:
        monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
        monkeypatch.setattr(jax, "devices", lambda backend=None: [_GpuDevice(cc)])

    return use


@pytest.mark.parametrize("cc, cudnn", [
    ("9.0", True),  # H100: cuDNN's fused flash attention
    ("8.0", True),  # A100 (Ampere, the first generation cuDNN's fused kernel supports)
    ("7.5", False),  # T4: no fused kernel, XLA's attention
    ("x", False),  # an unparsable value: let JAX choose
    ("gfx942", False),  # ROCm (MI300X) reports its gfx arch: no cuDNN there
])
def test_gpu_uses_cudnn_only_for_half_precision_on_ampere_or_newer(on_gpu, cc: str, cudnn: bool) -> None:
    # jax.nn.dot_product_attention(implementation="cudnn") needs sm_80+ and fp16/bf16; fp32 always gets None.
    import jax.numpy as jnp

    on_gpu(cc)
    for dt in (jnp.bfloat16, jnp.float16, "bfloat16"):
        assert attention.jax_attention_implementation(dt) == ("cudnn" if cudnn else None)
    assert attention.jax_attention_implementation(jnp.float32) is None


def test_xla_attention_block_turns_cudnn_off_on_an_h100(on_gpu) -> None:
    # FLOP counting traces inside xla_attention(): cuDNN's custom call would hide the attention matmuls.
    import jax.numpy as jnp

    on_gpu("9.0")
    assert attention.jax_attention_implementation(jnp.bfloat16) == "cudnn"
    with attention.xla_attention():
        assert attention.jax_attention_implementation(jnp.bfloat16) is None
        with attention.xla_attention():  # nested: still XLA's, and the outer block's state survives
            pass
        assert attention.jax_attention_implementation(jnp.float16) is None
    assert attention.jax_attention_implementation(jnp.bfloat16) == "cudnn"
