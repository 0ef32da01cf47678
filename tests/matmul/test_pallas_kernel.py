"""The Pallas blocked matmul (Lab 01) against A @ B in float64, in interpret mode on CPU.

Tolerance: max |C - A@B| / max |A@B| with A, B the already-rounded inputs, so only the kernel's
own error counts: fp32 1e-5 (fp32 accumulation over K <= 256), fp16 2e-3 and bf16 1e-2 (one
rounding of the output to a 10- / 7-bit mantissa, 2^-11 / 2^-8 relative, plus accumulation).
Interpret mode is slow: shapes stay at a few hundred.
"""
from __future__ import annotations

import numpy as np
import pytest


from labkit.matmul.kernel_check import rel_err  # max |C - A@B| / max |A@B| against float64

TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


jnp = pytest.importorskip("jax.numpy")
from labkit.matmul import pallas_kernel as kp  # noqa: E402


def _jax_pair(m: int, k: int, n: int, dtype: str, seed: int = 0):
    import jax

    ka, kb = jax.random.split(jax.random.key(seed))
    return (jax.random.normal(ka, (m, k), dtype), jax.random.normal(kb, (k, n), dtype))


@pytest.mark.parametrize("m, k, n, blocks, dtype", [
    (256, 256, 128, (128, 128, 128), "float32"),   # MXU-aligned, grid (2, 1, 2): K walked twice
    (64, 96, 32, (32, 32, 32), "float32"),         # interpret mode: any dividing block
    (128, 256, 128, (128, 128, 128), "bfloat16"),  # bf16 in, fp32 accumulator, bf16 out
])
def test_pallas_matches_matmul(m, k, n, blocks, dtype):
    a, b = _jax_pair(m, k, n, dtype)
    bm, bn, bk = blocks
    c = kp.matmul(a, b, bm=bm, bn=bn, bk=bk)  # CPU: interpret=True chosen automatically
    assert c.shape == (m, n) and c.dtype == a.dtype
    f32 = lambda x: np.asarray(x.astype(jnp.float32))  # noqa: E731
    assert rel_err(f32(c), f32(a), f32(b)) < TOL[dtype]


def test_pallas_bad_inputs_say_what_is_wrong():
    a, b = _jax_pair(128, 128, 128, "float32")
    with pytest.raises(ValueError, match="inner dimensions do not match"):
        kp.matmul(a, b[:64])
    with pytest.raises(ValueError, match="bm=128 does not divide M=200.*[Pp]ad M up to 256"):
        kp.matmul(jnp.zeros((200, 128)), b)
    with pytest.raises(ValueError, match="bk=48 does not divide K=128"):
        kp.matmul(a, b, bk=48)
    with pytest.raises(ValueError, match="share a dtype"):
        kp.matmul(a, b.astype(jnp.bfloat16))
    with pytest.raises(ValueError, match="two matrices"):
        kp.matmul(a[0], b)
    with pytest.raises(ValueError, match="positive integer"):
        kp.matmul(a, b, bn=0)


def test_pallas_tpu_rule_is_mxu_alignment():
    with pytest.raises(ValueError, match="not a multiple of 128"):
        kp.check_blocks(256, 256, 256, 64, 128, 128, tpu=True)
    kp.check_blocks(256, 256, 256, 64, 128, 128, tpu=False)   # interpret mode: any divisor
    kp.check_blocks(64, 256, 256, 64, 128, 128, tpu=True)     # a whole dimension is allowed
    kp.check_blocks(512, 512, 512, 256, 256, 512, tpu=True)   # 256: v6e's MXU, still aligned


def test_pallas_lowers_to_mosaic_for_tpu_without_a_tpu():
    """The compiled (TPU) path: the kernel must lower to a Mosaic custom call, checked on CPU."""
    import jax

    f = jax.jit(lambda a, b: kp._blocked(a, b, bm=128, bn=128, bk=256, interpret=False))
    for dtype in (jnp.bfloat16, jnp.float32):
        a, b = jax.ShapeDtypeStruct((256, 512), dtype), jax.ShapeDtypeStruct((512, 384), dtype)
        text = f.trace(a, b).lower(lowering_platforms=("tpu",)).as_text()
        assert "tpu_custom_call" in text


def test_interpret_mode_is_ordinary_xla_ops_on_the_default_device() -> None:
    # Lab 01 on an H100 said interpret mode "runs the kernel step by step on the host": Pallas lowers it to
    # plain XLA ops (a while loop over the grid, dot_general and dynamic slices), no kernel custom call, and
    # runs them on the default device: the GPU on a GPU runtime, the CPU here.
    import inspect
    import re

    import jax

    a, b = _jax_pair(256, 128, 128, "float32")
    assert kp.matmul(a, b).devices() == {jax.devices()[0]}
    hlo = kp._blocked.lower(a, b, bm=128, bn=128, bk=128, interpret=True).as_text()
    ops = set(re.findall(r"stablehlo\.(\w+)", hlo))
    assert {"while", "dot_general", "dynamic_slice"} <= ops and "custom_call" not in hlo
    note = kp.interpret_note("gpu")
    assert "default device (the GPU)" in note and "host" not in note and "step by step" not in note
    assert "default device (the CPU)" in kp.interpret_note("cpu")
    # The reason it gives for not compiling on a GPU is in the kernel's code: Mosaic TPU's scratch and params.
    src = inspect.getsource(kp._blocked)
    assert "pltpu.VMEM(" in src and "pltpu.CompilerParams(" in src
    assert "pltpu.VMEM" in note and "pltpu.CompilerParams" in note
