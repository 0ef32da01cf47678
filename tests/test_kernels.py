"""Pallas and Triton blocked matmuls (Lab 01) against A @ B in float64, in interpret mode on CPU.

Tolerance: max |C - A@B| / max |A@B| with A, B the already-rounded inputs, so only the kernel's
own error counts: fp32 1e-5 (fp32 accumulation over K <= 256), fp16 2e-3 and bf16 1e-2 (one
rounding of the output to a 10- / 7-bit mantissa, 2^-11 / 2^-8 relative, plus accumulation).
Interpret mode is slow: shapes stay at a few hundred.
"""
from __future__ import annotations

import numpy as np
import pytest

from labkit import device

TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


def rel_err(c, a, b) -> float:
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    return float(np.abs(np.asarray(c, np.float64) - ref).max() / np.abs(ref).max())


# ------------------------------------------------------------------ Pallas
jnp = pytest.importorskip("jax.numpy")
from labkit import kernels_pallas as kp  # noqa: E402


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


# ------------------------------------------------------------------ Triton
torch = pytest.importorskip("torch")
from labkit import kernels_triton as kt  # noqa: E402  (switches the interpreter on without a GPU)

needs_triton = pytest.mark.skipif(not kt.available(), reason=kt.SKIP_MESSAGE)


@needs_triton
@pytest.mark.parametrize("m, k, n, dtype", [
    (64, 64, 64, torch.float32),      # one tile per program, two K steps
    (100, 70, 50, torch.float32),     # ragged in every dimension: masked edge tiles
    (64, 128, 96, torch.bfloat16),    # bf16 (interpreter: upcast before tl.dot)
    (96, 64, 64, torch.float16),
])
def test_triton_matches_matmul(m, k, n, dtype):
    where = "cpu" if kt.INTERPRET else "cuda"
    g = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=g).to(where, dtype)
    b = torch.randn(k, n, generator=g).to(where, dtype)
    c = kt.matmul(a, b)
    assert c.shape == (m, n) and c.dtype == dtype
    # Compiled fp32 uses TF32 tensor cores (10-bit mantissa): looser there.
    tol = 1e-2 if (not kt.INTERPRET and dtype == torch.float32) else TOL[str(dtype).split(".")[1]]
    assert rel_err(c.float().cpu(), a.float().cpu(), b.float().cpu()) < tol


@needs_triton
def test_triton_bad_inputs_say_what_is_wrong():
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    with pytest.raises(ValueError, match="inner dimensions do not match"):
        kt.matmul(a, b[:16])
    with pytest.raises(ValueError, match="power of two >= 16"):
        kt.matmul(a, b, block_m=48)
    with pytest.raises(ValueError, match="power of two >= 16"):
        kt.matmul(a, b, block_k=8)
    with pytest.raises(ValueError, match="share a dtype"):
        kt.matmul(a, b.half())
    with pytest.raises(ValueError, match="two matrices"):
        kt.matmul(a[0], b)


COMPILE_FOR_CUDA = """
import os
os.environ["TRITON_INTERPRET"] = "0"  # compile, as on a GPU, even though there is none here
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from labkit import kernels_triton as kt
ints = ["M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn"]
for cc, dt in ((75, "fp16"), (80, "bf16"), (90, "bf16")):  # T4, A100, H100
    sig = {"a_ptr": "*" + dt, "b_ptr": "*" + dt, "c_ptr": "*" + dt, **{n: "i32" for n in ints},
           **{n: "constexpr" for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "UPCAST")}}
    src = ASTSource(kt.matmul_kernel, sig, constexprs={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32,
                                                       "UPCAST": False})
    ptx = triton.compile(src, target=GPUTarget("cuda", cc, 32)).asm["ptx"]
    print(cc, dt, "mma" in ptx)
"""


@needs_triton
def test_triton_compiles_to_tensor_core_mma_for_cuda_without_a_gpu():
    """The compiled path: PTX for sm_80/90 must use tensor-core mma instructions (sm_75 compiles)."""
    import os
    import sys

    from tests.conftest import ROOT, run_python

    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRITON_DEFAULT_FP_FUSION": "1"}
    out = run_python(COMPILE_FOR_CUDA, env=env, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    # sm_75 (T4) compiles too, but Triton 3.9 lowers its tl.dot to FMAs on CUDA cores, not mma.
    got = {tuple(line.split()[:2]): line.split()[2] for line in out.stdout.splitlines()}
    assert set(got) == {("75", "fp16"), ("80", "bf16"), ("90", "bf16")}, (out.stdout, sys.executable)
    assert got[("80", "bf16")] == got[("90", "bf16")] == "True", out.stdout


def test_triton_missing_is_a_clear_message_not_a_crash(monkeypatch):
    monkeypatch.setattr(kt, "_HAVE_TRITON", False)
    assert not kt.available() and kt.mode() == "unavailable"
    with pytest.raises(RuntimeError, match="pip install triton"):
        kt.matmul(torch.zeros(16, 16), torch.zeros(16, 16))


def test_triton_interpret_switch(monkeypatch):
    monkeypatch.delenv(device.TRITON_INTERPRET_ENV, raising=False)
    got = device.triton_interpret_if_no_gpu()
    assert got == (not torch.cuda.is_available())
    monkeypatch.setenv(device.TRITON_INTERPRET_ENV, "0")  # the user's choice wins
    assert device.triton_interpret_if_no_gpu() is False
