"""labkit.measure.timed_check (Lab 00): the functions the sweep times agree with float64, and a wrong kernel is caught."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from labkit.measure import timed_check


@pytest.mark.parametrize("framework", ["jax", "torch"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_the_timed_matmuls_pass_their_tolerance(framework: str, dtype: str) -> None:
    err = timed_check.matmul_error(framework, dtype)
    assert 0 < err <= timed_check.TOLERANCE[dtype]
    if dtype != "fp32":  # the output is rounded to the format: at least a tenth of a unit roundoff shows
        assert err > timed_check.TOLERANCE[dtype] / 40


def test_inputs_are_exact_in_the_dtype() -> None:
    a, b = timed_check._inputs(8, 4, 16, "bf16", seed=1)
    np.testing.assert_array_equal(a.astype(ml_dtypes.bfloat16).astype(np.float64), a)
    assert a.shape == (8, 16) and b.shape == (16, 4) and a.dtype == np.float64


@pytest.mark.parametrize("wrong, dtype", [
    # fp32 asked, one bf16 pass done (a TPU's DEFAULT): ~1e-3 off, far above the true-fp32 bar
    (lambda a, b: jnp.matmul(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)).astype(jnp.float32), "fp32"),
    # half the reduction skipped: a "fast" kernel that did half the work
    (lambda a, b: jnp.matmul(a[:, : a.shape[1] // 2], b[: b.shape[0] // 2]), "bf16"),
])
def test_a_wrong_kernel_fails_the_check(monkeypatch: pytest.MonkeyPatch, wrong, dtype: str) -> None:
    monkeypatch.setattr(timed_check, "matmul_fn_jax", lambda dt: jax.jit(wrong))
    assert timed_check.matmul_error("jax", dtype) > timed_check.TOLERANCE[dtype]


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="framework must be 'jax' or 'torch', got 'mxnet'"):
        timed_check.matmul_error("mxnet", "fp32")
    with pytest.raises(ValueError, match="dtype 'tf32' is not one Lab 00 times; use one of fp32, bf16, fp16"):
        timed_check.matmul_error("jax", "tf32")


@pytest.mark.parametrize("bad", [0, -4, 2.5, True])
def test_matmul_error_refuses_a_size_that_is_not_one(bad) -> None:
    with pytest.raises(ValueError, match=f"m must be a whole number >= 1 \\(a matrix size\\), got {bad!r}"):
        timed_check.matmul_error("jax", "fp32", m=bad)


def test_the_fp32_bar_catches_tf32_and_one_bf16_pass_by_the_margins_lab00_states() -> None:
    """On the check's own inputs, emulated TF32 errs ~3e-4 and one bf16 pass ~2e-3: both fail the 1e-5 fp32 bar."""
    from labkit.precision.formats import round_mantissa

    a, b = timed_check._inputs(128, 96, 512, "fp32", 0)  # matmul_error's defaults
    ref = a @ b
    err = lambda out: float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())  # noqa: E731
    tf = lambda x: round_mantissa(x.astype(np.float32), 10, "nearest")  # noqa: E731  fp32 accumulation below
    bf = lambda x: x.astype(ml_dtypes.bfloat16).astype(np.float32)  # noqa: E731
    tf32, bf16 = err(tf(a) @ tf(b)), err(bf(a) @ bf(b))
    assert 2e-4 < tf32 < 5e-4 and 1.5e-3 < bf16 < 4e-3, (tf32, bf16)  # the "~3e-4" and "~2e-3" of the docs
    assert min(tf32, bf16) > 10 * timed_check.TOLERANCE["fp32"]
