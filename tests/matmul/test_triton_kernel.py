"""The Triton blocked matmul (Lab 01) against A @ B in float64: interpreted on CPU, compiled for CUDA.

Tolerances as in test_pallas_kernel.py (only the kernel's own rounding and accumulation count).
"""
from __future__ import annotations

import numpy as np
import pytest

from labkit.matmul.kernel_check import rel_err  # max |C - A@B| / max |A@B| against float64
from labkit.runtime import device

TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}


torch = pytest.importorskip("torch")
from labkit.matmul import triton_kernel as kt  # noqa: E402  (switches the interpreter on without a GPU)

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
from labkit.matmul import triton_kernel as kt
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


def test_k_is_a_compile_time_constant():
    """Triton 3.5.1's interpreter (torch 2.9.1, the xla extra) hands a runtime K to the kernel as a
    1-element numpy array; under numpy 2.4.6 ``range(0, K, BLOCK_K)`` then raises
    TypeError('only 0-dimensional arrays can be converted to Python scalars') (seen in the version
    matrix). With K a tl.constexpr the interpreter passes a Python int on every Triton version."""
    import inspect

    import triton.language as tl

    params = inspect.signature(getattr(kt.matmul_kernel, "fn", kt.matmul_kernel)).parameters
    assert params["K"].annotation in (tl.constexpr, "tl.constexpr")  # fails if K goes back to a runtime arg
    assert params["M"].annotation is inspect.Parameter.empty  # M, N stay runtime: no recompile per shape


@needs_triton
def test_printed_kernel_body_carries_no_maintenance_notes():
    """Lab 01 prints the kernel's source for learners: version and issue notes belong above it."""
    import inspect

    body = inspect.getsource(kt.matmul_kernel.fn)
    assert "tl.dot" in body and "for k0 in range(0, K, BLOCK_K)" in body
    for note in ("triton#", "numpy 2", "Triton 3."):
        assert note not in body, f"maintenance note {note!r} in the printed kernel"
