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
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_output_is_rounded_once_to_nearest(dtype):
    """Each element within half a unit in the last place of the exact product, as a GPU's cast rounds.

    The interpreter's own fp32 -> bf16 cast truncates (up to a whole ulp off, about half of all
    elements here), which `matmul` routes around; a truncating cast fails this test.
    """
    where = "cpu" if kt.INTERPRET else "cuda"
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 128, generator=g).to(where, dtype)
    b = torch.randn(128, 64, generator=g).to(where, dtype)
    c = kt.matmul(a, b).double().cpu()
    exact = a.double().cpu() @ b.double().cpu()
    u = torch.finfo(dtype).eps / 2  # unit roundoff: one correct rounding errs by <= u relative
    # u of the rounding, plus a margin for the fp32 accumulation order (~1e-6 relative at K = 128)
    assert ((c - exact).abs() <= (u * (1 + 1e-3)) * exact.abs() + 1e-5 * exact.abs().max()).all()


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


COMPILE_CONFIGS = """
import os
os.environ["TRITON_INTERPRET"] = "0"
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from labkit.matmul import triton_kernel as kt
names = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm",
         "stride_cn"]
# As a real launch specialises them: unit strides become constants, 16-divisible ints and pointers say so.
const = {"K": 4096, "stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "UPCAST": False}
for cc, dt in ((75, "fp16"), (80, "bf16"), (90, "bf16")):  # T4, A100, H100
    for i, cfg in enumerate((kt.UNTUNED, kt.CANDIDATES[0], kt.CANDIDATES[-1])):
        cons = {**const, "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k}
        sig = {n: ("*" + dt if n.endswith("ptr") else "i32") for n in names} | dict.fromkeys(cons, "constexpr")
        attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in names if n not in cons}
        k = triton.compile(ASTSource(kt.matmul_kernel, sig, constexprs=cons, attrs=attrs),
                           target=GPUTarget("cuda", cc, 32),
                           options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})
        ptx = k.asm["ptx"]
        print(cc, i, "wgmma.mma_async" in ptx, "cp.async" in ptx, k.metadata.shared)
"""


@needs_triton
def test_stages_and_warps_change_the_compiled_kernel_per_gpu_generation():
    """What the launch options do, read from PTX compiled here for each target (no GPU needed):
    Hopper runs warpgroup MMAs (4+ warps) fed by asynchronous copies, several K tiles in shared
    memory; Ampere pipelines the same copies into mma.sync; a T4 (sm_75) has no cp.async, so
    Triton keeps one K tile in shared memory whatever num_stages says."""
    import os

    from tests.conftest import ROOT, run_python

    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRITON_DEFAULT_FP_FUSION": "1"}
    out = run_python(COMPILE_CONFIGS, env=env, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    got = {}
    for line in out.stdout.split("\n"):
        if line.strip():
            cc, i, wgmma, cp_async, shared = line.split()
            got[(int(cc), int(i))] = (wgmma == "True", cp_async == "True", int(shared))
    cfgs = (kt.UNTUNED, kt.CANDIDATES[0], kt.CANDIDATES[-1])
    tile = [(c.block_m * c.block_k + c.block_k * c.block_n) * 2 for c in cfgs]  # bytes of one A + B tile, 16-bit
    for i, c in enumerate(cfgs):
        assert got[(75, i)] == (False, False, got[(75, i)][2]) and got[(75, i)][2] <= tile[i] + 16384
        assert got[(80, i)][:2] == (False, True) and got[(80, i)][2] >= 2 * tile[i]  # pipelined
        assert got[(90, i)][:2] == (c.num_warps >= 4, True) and got[(90, i)][2] >= 2 * tile[i]
        assert got[(90, i)][2] <= c.num_stages * tile[i]
    assert got[(90, 1)][2] > 2 * got[(90, 0)][2]  # the big tuned tiles need far more shared memory


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


@needs_triton
@pytest.mark.parametrize("cfg", [kt.CANDIDATES[0], kt.CANDIDATES[-1]], ids=lambda c: c.label)
def test_a_tile_config_sets_blocks_warps_and_stages_and_stays_exact(cfg):
    where = "cpu" if kt.INTERPRET else "cuda"
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(100, 70, generator=g).to(where), torch.randn(70, 50, generator=g).to(where)  # ragged
    c = kt.matmul(a, b, config=cfg)
    tol = 1e-2 if not kt.INTERPRET else TOL["float32"]
    assert rel_err(c.cpu(), a.cpu(), b.cpu()) < tol
    assert cfg.label == f"{cfg.block_m}x{cfg.block_n}x{cfg.block_k} w{cfg.num_warps} s{cfg.num_stages}"


@needs_triton
def test_bad_launch_options_say_what_is_wrong():
    a = torch.randn(32, 32)
    with pytest.raises(ValueError, match="num_warps must be a power of two"):
        kt.matmul(a, a, config=kt.TileConfig(64, 64, 32, num_warps=3))
    with pytest.raises(ValueError, match="num_stages must be a positive int"):
        kt.matmul(a, a, config=kt.TileConfig(64, 64, 32, num_stages=0))
    with pytest.raises(ValueError, match="power of two >= 16"):
        kt.matmul(a, a, config=kt.TileConfig(64, 48, 32))
    with pytest.raises(ValueError, match="at least one TileConfig"):
        kt.tune(a, a, lambda fn: 1.0, configs=())


@needs_triton
def test_tune_times_each_config_best_first_and_skips_what_does_not_fit(monkeypatch):
    """A config Triton cannot fit in shared memory is skipped with Triton's message, not a crash."""
    from triton.runtime.errors import OutOfResources

    where = "cpu" if kt.INTERPRET else "cuda"
    a, b = torch.randn(64, 32).to(where), torch.randn(32, 48).to(where)
    big, small, mid = kt.TileConfig(128, 256, 64, 8, 3), kt.TileConfig(32, 32, 16, 2, 2), kt.TileConfig(64, 64, 32)
    real = kt.matmul

    def fake_matmul(x, y, *, config):  # a GPU that gives a block 64 KiB, asked for 128x256x64 in 3 stages
        if config == big:
            raise OutOfResources(147456, 65536, "shared memory")
        return real(x, y, config=config)

    monkeypatch.setattr(kt, "matmul", fake_matmul)
    seconds = iter([3e-3, 1e-3])  # small's time, then mid's: the timer is called in config order

    def timer(fn):  # checks the product the config computes, then "times" it
        assert rel_err(fn(a, b).cpu(), a.cpu(), b.cpu()) < 1e-2
        return next(seconds)

    rows = kt.tune(a, b, timer, configs=(small, mid, big))
    assert [(r.config, r.seconds) for r in rows] == [(mid, 1e-3), (small, 3e-3), (big, None)]
    assert rows[2].skipped.startswith("skipped: out of resource: shared memory")


def test_untuned_tiles_are_not_among_the_candidates():
    """Lab 01 asserts the tuned configuration beats the untuned one: that must be a real comparison."""
    assert kt.UNTUNED not in kt.CANDIDATES and len(set(kt.CANDIDATES)) == len(kt.CANDIDATES)
