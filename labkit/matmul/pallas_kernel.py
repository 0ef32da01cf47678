"""(Lab 01) A blocked matmul written as a Pallas kernel, TPU style: MXU-aligned blocks.

C (M, N) = A (M, K) @ B (K, N) is cut into (bm, bn) output blocks; the grid is
(M/bm, N/bn, K/bk) and its last axis walks K. Each grid step loads one (bm, bk) block of A
and one (bk, bn) block of B into on-chip memory (VMEM on a TPU), multiplies them on the MXU
and adds the product to an fp32 accumulator that lives in VMEM for the whole K walk. The
output block is written once, on the last K step.

Why blocks of 128: a TPU MXU is a 128 x 128 systolic array (256 x 256 on v6e), and a TPU
vector register holds (8, 128) values, so Mosaic wants the last two dimensions of every block
to be multiples of (8, 128) -- we ask for multiples of 128 throughout, or the whole dimension.
A block that is not a multiple of 128 wastes MXU rows and columns, the padding cliff of Lab 01.

Policy for shapes the blocks do not divide: a clear error (pad the operands yourself, or pick
another block -- Lab 01's exercise does that). On a TPU the kernel is compiled by Mosaic; on
CPU and GPU it runs in Pallas' interpret mode (slow: keep to a few hundred per dimension), because
it is written for Mosaic TPU: a `pltpu.VMEM` scratch accumulator and `pltpu.CompilerParams`, which
Pallas' GPU lowering (Triton or Mosaic GPU, picked by the compiler params' type) does not take.
Interpret mode is no host-side emulator: Pallas turns the kernel into ordinary JAX ops (a loop over
the grid whose step is the kernel's body) that XLA compiles for the default device (`interpret_note`).
"""
from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu  # VMEM scratch and Mosaic compiler params

MXU_ALIGN = 128  # TPU blocks: multiples of the 128 x 128 MXU (and of the (8, 128) vreg tile)


def on_tpu() -> bool:
    """(Lab 01) True when JAX's default backend is a TPU, i.e. the kernel can be compiled."""
    return jax.default_backend() == "tpu"


def interpret_note(backend: str) -> str:
    """(Lab 01) What interpret mode runs on `backend` (jax.default_backend()) and why the kernel is not compiled."""
    device = {"gpu": "the GPU", "cpu": "the CPU"}.get(backend, f"the {backend} device")
    return (f"interpret mode turns the kernel into ordinary JAX ops, a loop over the grid whose step is the "
            f"kernel's body, which XLA compiles and runs on this machine's default device ({device}): a timing "
            "would be that loop's, not the kernel's. It is not compiled here because it is written for Mosaic, "
            "the TPU compiler: its accumulator is TPU VMEM scratch (pltpu.VMEM) and it passes "
            "pltpu.CompilerParams, which Pallas' GPU backends (Triton, Mosaic GPU) do not take. "
            "On a TPU it is compiled and timed")


def check_blocks(M: int, K: int, N: int, bm: int, bn: int, bk: int, *, tpu: bool) -> None:
    """(Lab 01) Raise a ValueError naming the problem if (bm, bn, bk) cannot tile this GEMM."""
    for name, dim, block, blk_name in (("M", M, bm, "bm"), ("N", N, bn, "bn"), ("K", K, bk, "bk")):
        if isinstance(block, bool) or not isinstance(block, int) or block <= 0:
            raise ValueError(f"{blk_name} must be a positive integer, got {block!r}")
        if dim % block:
            raise ValueError(
                f"{blk_name}={block} does not divide {name}={dim}: this kernel needs whole blocks. "
                f"Pad {name} up to {-(-dim // block) * block} with zeros, or pick a block that "
                f"divides {dim} (Lab 01 exercise: largest MXU-aligned divisor)")
        if tpu and block % MXU_ALIGN and block != dim:
            raise ValueError(
                f"{blk_name}={block} is not a multiple of {MXU_ALIGN}: on a TPU a block must fill "
                f"whole 128 x 128 MXU passes (or be the whole dimension, {name}={dim})")


def matmul_kernel(a_ref: Any, b_ref: Any, o_ref: Any, acc_ref: Any) -> None:
    """(Lab 01) One grid step (i, j, k): acc += A[i, k] @ B[k, j]; write C[i, j] at the last k."""
    k = pl.program_id(2)  # position along the K walk (the grid's last, sequential axis)

    @pl.when(k == 0)
    def _start() -> None:  # a new output block: clear the accumulator
        acc_ref[...] = jnp.zeros_like(acc_ref)

    # (bm, bk) @ (bk, bn) on the MXU, products summed in fp32 even for bf16 inputs.
    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def finish() -> None:  # the K walk is done: round once to the output dtype, write once
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("bm", "bn", "bk", "interpret"))
def _blocked(a: Any, b: Any, *, bm: int, bn: int, bk: int, interpret: bool) -> Any:
    (M, K), N = a.shape, b.shape[1]
    return pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((M, N), a.dtype),  # (M, N), same dtype as the inputs
        grid=(M // bm, N // bn, K // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),   # A block (i, k)
                  pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],  # B block (k, j)
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),   # same C block for every k
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],         # the fp32 accumulator
        # i, j blocks are independent (TPU cores may split them); k must run in order.
        compiler_params=None if interpret else pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
        interpret=interpret,
    )(a, b)


def matmul(a: Any, b: Any, *, bm: int = 128, bn: int = 128, bk: int = 128,
           interpret: bool | None = None) -> Any:
    """(Lab 01) C = A @ B with the blocked Pallas kernel; compiled on TPU, interpreted elsewhere."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"matmul takes two matrices, got shapes {a.shape} and {b.shape}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions do not match: A is {a.shape}, B is {b.shape}; "
                         "A's columns must equal B's rows")
    if a.dtype != b.dtype:
        raise ValueError(f"A and B must share a dtype, got {a.dtype} and {b.dtype}; cast one")
    interpret = (not on_tpu()) if interpret is None else bool(interpret)
    (M, K), N = a.shape, b.shape[1]
    check_blocks(M, K, N, bm, bn, bk, tpu=not interpret)
    return _blocked(a, b, bm=bm, bn=bn, bk=bk, interpret=interpret)
