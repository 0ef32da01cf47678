"""(Lab 01) The same blocked matmul written as a Triton kernel, GPU style: tensor-core tiles.

One Triton *program* (a thread block on the GPU, scheduled onto one SM) owns a
(BLOCK_M, BLOCK_N) tile of C. It walks K in steps of BLOCK_K: load a (BLOCK_M, BLOCK_K) tile
of A and a (BLOCK_K, BLOCK_N) tile of B, and `tl.dot` them into an fp32 accumulator held in
registers; `tl.dot` is what Triton turns into tensor-core MMA instructions (16 x 8 x 16 on
Ampere, warpgroup MMAs on Hopper; Triton 3.9 gives a T4, sm_75, plain FMAs on the CUDA cores
instead). Tiles must be powers of two, at least 16 on each side.

Policy for shapes the tiles do not divide: edge tiles are *masked* -- out-of-range loads read
0 and out-of-range stores are dropped. That is how GPU kernels usually handle edges, and the
masked-off lanes still occupy the tensor cores: the padding waste labkit.matmul.simt models.

The tile shape is the kernel's main tuning knob, with two launch options that do not change its
body: ``num_warps`` (warps per program: 4 or 8 for a warpgroup MMA on Hopper) and ``num_stages``
(how many K tiles are in flight from memory while the current one multiplies; Ampere and Hopper
copy them asynchronously, a T4 (sm_75) cannot, so there it changes nothing). `tune` times a
list of configurations -- by default the ones Triton's own matmul tutorial autotunes over for CUDA
and 16-bit inputs -- and skips any whose tiles do not fit this GPU's shared memory (OutOfResources).

On a CUDA GPU the kernel is compiled. Without one it runs in Triton's interpreter (numpy on
the CPU, slow: keep to a few hundred per dimension), which labkit.runtime.device switches on before
Triton reads its environment. Without Triton installed, `available()` is False and `matmul`
raises a RuntimeError that says how to install it.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from labkit.runtime import device

INTERPRET = device.triton_interpret_if_no_gpu()  # must happen before @triton.jit below runs
_HAVE_TRITON = importlib.util.find_spec("triton") is not None
SKIP_MESSAGE = ("Triton is not installed, so the Triton kernel is skipped: `pip install triton` "
                "(Linux x86_64; on a CUDA runtime it usually ships with torch).")

if _HAVE_TRITON:
    import triton
    import triton.language as tl

    # Maintenance notes, kept out of the kernel body (Lab 01 prints the body for learners):
    # - K is a tl.constexpr (one compile per K, cached): Triton 3.5's interpreter passes a runtime K
    #   as a 1-element array that range() rejects under numpy 2.4 ("TypeError: only 0-dimensional
    #   arrays ..."), the numpy the xla extra pairs it with.
    # - UPCAST is set only in the interpreter, whose tl.dot mis-multiplies bf16 (triton#11584);
    #   bf16 products are exact in fp32, so the upcast changes no result (and `matmul` rounds C itself).
    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K: tl.constexpr,  # C (M, N) = A (M, K) @ B (K, N)
                       stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       UPCAST: tl.constexpr):
        """(Lab 01) One program: C[tile m, tile n] = sum over K tiles of A tile @ B tile."""
        pid_m, pid_n = tl.program_id(0), tl.program_id(1)  # which C tile this program owns
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)      # (BLOCK_M,) row indices of C
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)      # (BLOCK_N,) column indices of C
        rk = tl.arange(0, BLOCK_K)                        # (BLOCK_K,) offsets along K
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # fp32 accumulator, registers
        for k0 in range(0, K, BLOCK_K):  # the K walk, one BLOCK_K-wide tile per step
            kk = k0 + rk
            a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                        mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)  # (BM, BK)
            b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                        mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)  # (BK, BN)
            if UPCAST:  # interpreter only (CPU): multiply in fp32, exact for bf16 inputs
                a, b = a.to(tl.float32), b.to(tl.float32)
            acc = tl.dot(a, b, acc)                       # tensor-core MMAs, fp32 accumulate
        c = acc.to(c_ptr.dtype.element_ty)                # round once, at the end
        tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, c,
                 mask=(rm[:, None] < M) & (rn[None, :] < N))


def available() -> bool:
    """(Lab 01) True when Triton is installed, so `matmul` can run (compiled or interpreted)."""
    return _HAVE_TRITON


def mode() -> str:
    """(Lab 01) "compiled" on a CUDA GPU, "interpret" on CPU, "unavailable" without Triton."""
    if not _HAVE_TRITON:
        return "unavailable"
    return "interpret" if INTERPRET else "compiled"


def _check_tile(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 16 or value & (value - 1):
        raise ValueError(f"{name} must be a power of two >= 16 (tl.dot's smallest tensor-core "
                         f"tile), got {value!r}")


@dataclass(frozen=True)
class TileConfig:
    """(Lab 01) One launch configuration: C tile (block_m x block_n), K step, warps, pipeline stages."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4  # Triton's default
    num_stages: int = 3  # Triton's default on CUDA

    @property
    def label(self) -> str:
        """(Lab 01) "128x256x64 w8 s3": tile M x N x K, warps, stages."""
        return f"{self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} s{self.num_stages}"


UNTUNED = TileConfig(64, 64, 32)  # the tiles Lab 01 reads and checks first: small, Triton's default launch
# The CUDA configurations of Triton's matmul tutorial (03-matrix-multiplication, fp16 inputs), which it
# hands to @triton.autotune; UNTUNED is not among them, so "tuned beats untuned" is a real comparison.
CANDIDATES = (TileConfig(128, 256, 64, 8, 3), TileConfig(64, 256, 32, 4, 4), TileConfig(128, 128, 32, 4, 4),
              TileConfig(128, 64, 32, 4, 4), TileConfig(64, 128, 32, 4, 4), TileConfig(128, 32, 32, 4, 4),
              TileConfig(64, 32, 32, 2, 5), TileConfig(32, 64, 32, 2, 5))


@dataclass(frozen=True)
class TuneRow:
    """(Lab 01) One configuration's timing: seconds per call, or None and why it was skipped."""

    config: TileConfig
    seconds: float | None
    skipped: str = ""


def _resource_errors() -> tuple[type[BaseException], ...]:
    from triton.runtime import errors

    return tuple(getattr(errors, n) for n in ("OutOfResources", "PTXASError") if hasattr(errors, n))


def tune(a: Any, b: Any, timer: Callable[[Callable[[Any, Any], Any]], float],
         configs: Sequence[TileConfig] = CANDIDATES) -> list[TuneRow]:
    """(Lab 01) Time `matmul` under each configuration with ``timer(fn) -> s per call``; best first.

    A configuration whose tiles need more shared memory (or registers) than this GPU gives one
    program is skipped with Triton's own message (OutOfResources), not a crash: 128x256x64 in 3
    stages keeps 144 KiB of bf16 tiles in flight on an H100, more than many GPUs allow a block.
    """
    if not configs:
        raise ValueError("tune needs at least one TileConfig; pass e.g. triton_kernel.CANDIDATES")
    rows = []
    for cfg in configs:
        fn = lambda x, y, cfg=cfg: matmul(x, y, config=cfg)  # noqa: E731
        try:
            fn(a, b)  # compiles: an oversized tile fails here, before any timing
        except _resource_errors() as e:
            rows.append(TuneRow(cfg, None, f"skipped: {e}"))
            continue
        rows.append(TuneRow(cfg, float(timer(fn))))
    return sorted(rows, key=lambda r: (r.seconds is None, r.seconds or 0.0))


def matmul(a: Any, b: Any, *, block_m: int = 64, block_n: int = 64, block_k: int = 32,
           config: TileConfig | None = None) -> Any:
    """(Lab 01) C = A @ B with the blocked Triton kernel on torch tensors (CUDA, or CPU interpreted).

    ``config`` (a `TileConfig`) replaces the three block sizes and also sets warps and stages.
    """
    import torch

    if not _HAVE_TRITON:
        raise RuntimeError(SKIP_MESSAGE)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"matmul takes two matrices, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions do not match: A is {tuple(a.shape)}, B is "
                         f"{tuple(b.shape)}; A's columns must equal B's rows")
    if a.dtype != b.dtype or a.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"A and B must share a dtype among float32, float16, bfloat16; got "
                         f"{a.dtype} and {b.dtype}")
    if config is not None:
        block_m, block_n, block_k = config.block_m, config.block_n, config.block_k
        for name, value in (("num_warps", config.num_warps), ("num_stages", config.num_stages)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if config.num_warps & (config.num_warps - 1):
            raise ValueError(f"num_warps must be a power of two (1, 2, 4, 8, ...), got {config.num_warps}")
    for name, value in (("block_m", block_m), ("block_n", block_n), ("block_k", block_k)):
        _check_tile(name, value)
    launch = {} if config is None else {"num_warps": config.num_warps, "num_stages": config.num_stages}
    want = "cpu" if INTERPRET else "cuda"
    if a.device.type != want or b.device.type != want:
        raise ValueError(f"Triton runs {mode()} here, so A and B must be on '{want}'; got "
                         f"{a.device} and {b.device} (use labkit.runtime.device.torch_device())")
    (M, K), N = a.shape, b.shape[1]
    # The interpreter's fp32 -> bf16 cast truncates (rounds toward zero) where a GPU rounds to nearest
    # even, doubling the error: there the kernel writes its fp32 result and torch rounds it once, correctly.
    upcast = INTERPRET and a.dtype == torch.bfloat16
    c = torch.empty((M, N), dtype=torch.float32 if upcast else a.dtype, device=a.device)  # (M, N)
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))  # one program per C tile
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         c.stride(0), c.stride(1), BLOCK_M=block_m, BLOCK_N=block_n,
                         BLOCK_K=block_k, UPCAST=upcast, **launch)
    return c.to(a.dtype)  # a no-op unless upcast
