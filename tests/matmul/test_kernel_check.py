"""Tests for labkit.matmul.kernel_check (Lab 01): operands, the error measure and the speed ratio."""
from __future__ import annotations

import numpy as np
import pytest

from labkit.matmul import kernel_check as kc
from labkit.measure.bench import Timing


def test_rel_err_is_zero_for_the_exact_product_and_the_max_error_over_the_max_entry():
    a, b = np.array([[1.0, 2.0], [3.0, 4.0]]), np.eye(2)
    assert kc.rel_err(a @ b, a, b) == 0.0
    c = a.copy()
    c[0, 0] += 0.4  # worst error 0.4, largest |A@B| entry 4
    assert kc.rel_err(c, a, b) == pytest.approx(0.1)


def test_jax_operands_and_error_match_the_lab_formula_in_bf16():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    a, b = kc.jax_operands(16, 8, 12, "bf16")
    ka, kb = jax.random.split(jax.random.key(0))  # what the lab drew before kernel_check existed
    assert a.dtype == jnp.bfloat16 and a.shape == (16, 8) and b.shape == (8, 12)
    assert np.array_equal(np.asarray(a, np.float32), np.asarray(jax.random.normal(ka, (16, 8), jnp.bfloat16), np.float32))
    assert np.array_equal(np.asarray(b, np.float32), np.asarray(jax.random.normal(kb, (8, 12), jnp.bfloat16), np.float32))
    c = (a @ b).astype(jnp.bfloat16)
    f32 = [np.asarray(x.astype(jnp.float32), np.float64) for x in (c, a, b)]
    ref = f32[1] @ f32[2]
    assert kc.rel_err(c, a, b) == np.abs(f32[0] - ref).max() / np.abs(ref).max()
    assert 0 < kc.rel_err(c, a, b) <= kc.error_bound(kc.rel_err(c, a, b), "bf16")


def test_torch_operands_and_error_match_the_lab_formula_in_bf16():
    torch = pytest.importorskip("torch")
    a, b = kc.torch_operands(9, 5, 7, "bf16", torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    assert a.dtype == torch.bfloat16 and a.shape == (9, 5) and b.shape == (5, 7)
    assert torch.equal(a, torch.randn(9, 5, generator=g).to("cpu", torch.bfloat16))
    assert torch.equal(b, torch.randn(5, 7, generator=g).to("cpu", torch.bfloat16))
    c = a @ b
    ref = a.double() @ b.double()
    assert kc.rel_err(c, a, b) == pytest.approx(float((c.double() - ref).abs().max() / ref.abs().max()), rel=1e-12)


def test_speed_ratio_and_rates_come_from_the_median_times():
    kernel, library = Timing((2.0, 4.0, 9.0), 1), Timing((1.0, 2.0, 3.0), 1)  # medians 4 s and 2 s
    vs = kc.SpeedVsLibrary(kernel, library, flops=8e12)
    assert vs.speedup == 0.5  # the kernel takes twice as long
    assert vs.kernel_tflops == 2.0 and vs.library_tflops == 4.0


def test_speed_vs_library_times_torch_and_jax_inputs():
    torch = pytest.importorskip("torch")
    a, b = kc.torch_operands(8, 8, 8, "fp32", torch.device("cpu"))
    vs = kc.speed_vs_library(torch.matmul, torch.matmul, (a, b), flops=2 * 8 ** 3, repeats=2)
    assert len(vs.kernel.times_s) == len(vs.library.times_s) == 2 and vs.speedup > 0
    jax = pytest.importorskip("jax")
    ja, jb = kc.jax_operands(8, 8, 8, "fp32")
    vs = kc.speed_vs_library(jax.jit(jax.numpy.matmul), jax.numpy.matmul, (ja, jb), flops=2 * 8 ** 3, repeats=2)
    assert len(vs.kernel.times_s) == 2 and vs.kernel_tflops > 0



def test_kernel_and_library_are_both_timed_back_to_back(monkeypatch):
    """calls=1 (one call and a sync per repeat) timed cuBLAS at 619 TFLOP/s where back to back it ran ~717 (H100)."""
    seen = []

    def fake(fw):
        def timer(fn, make, *, repeats, calls=1, **kw):  # bench's default is calls=1: the helper must override it
            seen.append((fw, fn, calls))
            return Timing((1e-3,) * repeats, 1)
        return timer

    monkeypatch.setattr(kc, "time_torch", fake("torch"))
    monkeypatch.setattr(kc, "time_jax", fake("jax"))
    torch = pytest.importorskip("torch")
    kernel, library = (lambda a, b: a @ b), torch.matmul
    ta = kc.torch_operands(8, 8, 8, "fp32", torch.device("cpu"))
    kc.speed_vs_library(kernel, library, ta, flops=2 * 8 ** 3, repeats=3)
    assert kc.back_to_back_timer(ta, repeats=3)(kernel) == 1e-3  # the tuning helper's timer: median s per call
    kc.speed_vs_library(kernel, library, (np.ones((8, 8)), np.ones((8, 8))), flops=2 * 8 ** 3, repeats=3)
    assert [(fw, fn) for fw, fn, _ in seen] == [("torch", kernel), ("torch", library), ("torch", kernel),
                                                 ("jax", kernel), ("jax", library)]
    assert kc.CALLS is None and all(calls is None for *_, calls in seen), seen

def _blocked_bf16(a, b, bk: int, *, bf16_acc: bool = False, truncate: bool = False) -> np.ndarray:
    """A numpy emulation of the lab's blocked kernel: fp32 products per K block, then one output cast."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    A, B = (np.asarray(x.astype(np.float32) if hasattr(x, "astype") else x, np.float32) for x in (a, b))
    acc = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for s in range(0, A.shape[1], bk):  # walk K one block at a time
        acc = acc + A[:, s:s + bk] @ B[s:s + bk]
        if bf16_acc:  # the bug: the accumulator is kept in bf16 between K steps
            acc = acc.astype(bf16).astype(np.float32)
    if truncate:  # the bug: the output cast drops the low 16 bits instead of rounding
        return (acc.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    return acc.astype(bf16)


@pytest.mark.parametrize("m,k,n,bk", [(256, 256, 256, 128), (512, 1024, 384, 128), (1024, 4096, 1024, 512)])
def test_error_bound_passes_a_correct_kernel_and_fails_a_bf16_accumulator_or_a_truncating_cast(m, k, n, bk):
    # The old bound (a fixed 1e-2 in bf16) let both bugs pass: 3.1e-3 / 6.0e-3 at 256^3, 8.4e-3 / 5.9e-3 at 1024x4096x1024.
    jax = pytest.importorskip("jax")
    a, b = kc.jax_operands(m, k, n, "bf16")
    bound = kc.error_bound(kc.rel_err(jax.numpy.matmul(a, b), a, b), "bf16")  # XLA's own error, same inputs
    assert kc.rel_err(_blocked_bf16(a, b, bk), a, b) <= bound
    assert kc.rel_err(_blocked_bf16(a, b, bk, bf16_acc=True), a, b) > bound
    assert kc.rel_err(_blocked_bf16(a, b, bk, truncate=True), a, b) > bound
    assert bound < 1e-2  # what the old fixed bound allowed


def test_error_bound_in_fp32_is_the_floor_and_bad_input_is_named():
    assert kc.error_bound(1e-7, "fp32") == pytest.approx(kc.SLACK * 1e-7 + 1e-5)
    with pytest.raises(ValueError, match="dtype must be one of fp32, bf16, fp16, got 'int8'"):
        kc.error_bound(1e-3, "int8")
    for bad in (float("nan"), -1e-3, "0.002", None, True):
        with pytest.raises(ValueError, match="library_err must be a finite number >= 0"):
            kc.error_bound(bad, "bf16")


def test_flawed_matmuls_fail_the_bound_a_correct_kernel_passes():
    # Lab 01 shows the bound catching both mistakes on its interpret-mode inputs: 256^3 bf16, two K steps of 128.
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    a, b = kc.jax_operands(256, 256, 256, "bf16")
    lib = kc.rel_err(jnp.matmul(a, b), a, b)
    wrong = kc.flawed_matmuls(a, b, 128)
    assert set(wrong) == {"16-bit accumulator between K steps", "truncating output cast"}
    errs = {k: kc.rel_err(c, a, b) for k, c in wrong.items()}
    assert all(e > kc.error_bound(lib, "bf16") for e in errs.values()), (errs, lib)
    assert errs["16-bit accumulator between K steps"] == pytest.approx(1.3 * lib, rel=0.05)  # the 1.3x of the docs
    # One K step is no accumulator mistake: the 16-bit sum is then the correctly rounded output, within the bound.
    assert kc.rel_err(kc.flawed_matmuls(a, b, 256)["16-bit accumulator between K steps"], a, b) <= kc.error_bound(lib, "bf16")
    # fp32 inputs: the accumulator drops to bf16 (far over fp32's bound); an fp32 output has no cast to truncate.
    a32, b32 = kc.jax_operands(64, 128, 64, "fp32")
    wrong32 = kc.flawed_matmuls(a32, b32, 64)
    assert list(wrong32) == ["16-bit accumulator between K steps"]
    lib32 = kc.rel_err(jnp.matmul(a32, b32), a32, b32)
    assert kc.rel_err(wrong32["16-bit accumulator between K steps"], a32, b32) > 100 * kc.error_bound(lib32, "fp32")
    for bad in (0, 100, 2.0, True):
        with pytest.raises(ValueError, match="block_k must be a positive int that divides K = 256"):
            kc.flawed_matmuls(a, b, bad)
