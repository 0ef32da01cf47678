"""Rooflines: measured matmul peak, measured memory bandwidth, and where ops land (Lab 00).

A roofline says the best FLOP/s an op can reach is ``min(peak, intensity * bandwidth)``
where intensity is FLOPs per byte moved to and from memory. Ops left of the ridge point
(``peak / bandwidth``) are memory-bound; right of it, compute-bound; an op far below both roofs
is bound by neither but by fixed per-call costs (:func:`bound_by`).

The roof must bound every op, so the bandwidth is the best of several probes (:func:`bandwidth_probes`):
a read-only reduction (HBM reads faster than it mixes reads and writes, and batch-1 matvecs are
read-dominated) and a read+write stream, in JAX and torch. JAX returns a new array from every call;
the in-place stream donates its buffer (:func:`_in_place`) so a call allocates nothing, the way a
training step that donates its state runs, and the allocating stream beside it shows what a fresh
output costs on this runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from labkit.measure.bench import Timing, progress, time_jax, time_torch
from labkit.measure.roofline_model import (  # noqa: F401  the closed forms, re-exported: labs call roofline.bound_by
    OVERHEAD_FACTOR, attainable, bound_by, check_sizes, matmul_bytes, matmul_flops, ridge_point, roofline_time)
from labkit.runtime.device import torch_kind

BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}  # bytes per element in memory


@dataclass(frozen=True)
class OpPoint:
    """One measured op on the roofline: its work, its traffic and its time (Lab 00)."""

    name: str
    framework: str  # "jax" | "torch"
    dtype: str
    flops: float  # FLOPs per call
    bytes: float  # bytes read + written per call (minimum, assuming perfect caching)
    timing: Timing

    @property
    def intensity(self) -> float:
        """FLOP per byte (Lab 00)."""
        return self.flops / self.bytes

    @property
    def flops_per_s(self) -> float:
        """Achieved FLOP/s at the median time (Lab 00)."""
        return self.timing.rate(self.flops)

    @property
    def bytes_per_s(self) -> float:
        """Achieved bytes/s at the median time (Lab 00)."""
        return self.timing.rate(self.bytes)


# --------------------------------------------------------------------------------------
# JAX
# --------------------------------------------------------------------------------------


def _jnp_dtype(dtype: str) -> Any:
    import jax.numpy as jnp

    if dtype not in BYTES or dtype == "tf32":
        raise ValueError(f"dtype {dtype!r} not measurable here; use one of fp32, bf16, fp16")
    return {"fp32": jnp.float32, "bf16": jnp.bfloat16, "fp16": jnp.float16}[dtype]


def matmul_fn_jax(dtype: str) -> Callable[[Any, Any], Any]:
    """(Lab 00) The jitted ``a @ b`` that :func:`matmul_jax` times: fp32 at ``precision="highest"``."""
    import jax

    _jnp_dtype(dtype)  # refuses tf32 and unknown names
    precision = "highest" if dtype == "fp32" else None
    return jax.jit(lambda a, b: jax.numpy.matmul(a, b, precision=precision))  # runs where its inputs live


def matmul_jax(m: int, n: int, k: int, dtype: str = "bf16", repeats: int = 10, device: Any = None) -> OpPoint:
    """Time an (m,k)@(k,n) matmul in JAX, fresh random inputs every repeat (Lab 00).

    fp32 uses ``precision="highest"`` so it is true fp32 everywhere: JAX's DEFAULT would
    quietly use TF32 on Ampere+ GPUs and bf16 passes on TPU (Lab 04 measures those).
    """
    import jax

    m, n, k = check_sizes(m=m, n=n, k=k)  # before XLA sees a (-8, 8) shape
    dt = _jnp_dtype(dtype)
    dev = device or jax.devices()[0]
    mm = matmul_fn_jax(dtype)

    def make(i: int) -> tuple[Any, Any]:
        ka, kb = jax.random.split(jax.random.key(i))
        a = jax.device_put(jax.random.normal(ka, (m, k), dt), dev)
        b = jax.device_put(jax.random.normal(kb, (k, n), dt), dev)
        return a, b

    # On an accelerator, back-to-back calls per repeat (bench.time_fn): sustained throughput, the
    # way a training step keeps the chip busy. On a CPU one call per repeat (it is long anyway).
    calls = None if dev.platform != "cpu" else 1
    t = time_jax(mm, make, repeats=repeats, label=f"jax matmul {m}x{k}x{n} {dtype}", calls=calls)
    return OpPoint(f"matmul {m}x{k}x{n}", "jax", dtype, matmul_flops(m, n, k), matmul_bytes(m, n, k, BYTES[dtype]), t)


def stream_jax(n_elements: int, dtype: str = "fp32", repeats: int = 10, in_place: bool = False) -> OpPoint:
    """Bandwidth probe ``y = x + 1`` in JAX: reads and writes every element once (Lab 00).

    ``x + 1`` rather than a bare copy so XLA cannot alias the output to the input. ``in_place``
    donates the buffer, so each call writes where it read (:func:`_in_place`); otherwise every call
    returns a fresh array, and the probe also times allocating it.
    """
    import jax

    (n_elements,) = check_sizes(n_elements=n_elements)  # 0 elements: 0 bytes, and every rate divides by them
    dt = _jnp_dtype(dtype)
    f = jax.jit(lambda x: x + 1, donate_argnums=0 if in_place else ())
    make = vectors_jax(n_elements, dt)
    fn = _in_place(f, 0) if in_place else f
    t = time_jax(fn, make, repeats=repeats, label=f"jax stream {n_elements} {dtype}", calls=_calls_jax())
    nbytes = 2 * n_elements * BYTES[dtype]  # read x, write y
    name = f"stream {_mib(n_elements, dtype)}" + (" in place" if in_place else ", new output")
    return OpPoint(name, "jax", dtype, n_elements, nbytes, t)


def _in_place(step: Callable[..., Any], arg: int) -> Callable[..., Any]:
    """Wrap a jitted ``step`` that donates argument ``arg``: every call passes it the previous output there.

    XLA then writes each result into the buffer it read, as a training step that donates its state
    does, so no call allocates. The timing harness hands each call one of two fresh input sets; a
    donated input would be deleted after its first use, so only the first call's array is donated and
    later calls feed back the last output instead (its values do not matter to a bandwidth probe).
    So, unlike ``bench.TIMING_RULE``'s fresh inputs, an in-place probe reuses the buffer the last call
    wrote: a buffer 4x the last-level cache is out of cache by the next call anyway, so the rate is memory's.
    """
    last: list[Any] = []

    def call(*args: Any) -> Any:
        args = list(args)
        if last:
            args[arg] = last[0]
        out = step(*args)
        last[:] = [out]
        return out

    return call


def read_jax(n_elements: int, dtype: str = "fp32", repeats: int = 10) -> OpPoint:
    """Bandwidth probe ``sum(x)`` in JAX: reads every element once, writes one number (Lab 00)."""
    import jax

    (n_elements,) = check_sizes(n_elements=n_elements)
    dt = _jnp_dtype(dtype)
    f = jax.jit(lambda x: x.sum(dtype=jax.numpy.float32))  # fp32 accumulator: the sum itself is not the lesson
    make = vectors_jax(n_elements, dt)
    t = time_jax(f, make, repeats=repeats, label=f"jax read {n_elements} {dtype}", calls=_calls_jax())
    return OpPoint(f"read {_mib(n_elements, dtype)}", "jax", dtype, n_elements, n_elements * BYTES[dtype], t)


def vectors_jax(n_elements: int, dt: Any, count: int = 1) -> Callable[[int], tuple[Any, ...]]:
    """make_inputs for a JAX bandwidth probe: ``count`` new (n_elements,) vectors per repeat (Lab 00).

    One normal draw per vector, then ``base + i`` for repeat i: a new buffer holding new values every
    repeat for one memory pass, where a threefry draw of 128 MiB takes ~0.8 s on a 2-core CPU (seven
    probes x seven draws were half of Lab 00's smoke run there).
    """
    import jax

    bases = [jax.random.normal(k, (n_elements,), dt) for k in jax.random.split(jax.random.key(0), count)]
    return lambda i: tuple(b + jax.numpy.asarray(i, dt) for b in bases)


def _calls_jax() -> int | None:
    """Back-to-back calls per repeat: sustained on an accelerator, one call on a CPU (see matmul_jax)."""
    import jax

    return None if jax.devices()[0].platform != "cpu" else 1


def _mib(n_elements: int, dtype: str) -> str:
    return f"{n_elements * BYTES[dtype] / 2**20:.0f} MiB"


def add_jax(n_elements: int, repeats: int = 10, dtype: str = "fp32", name: str = "elementwise add (in place)") -> OpPoint:
    """Elementwise ``y = x + y``, in place: 1 FLOP per 3 elements moved, deep in memory-bound land (Lab 00).

    ``y`` is donated (:func:`_in_place`), as an accumulation in a training step would be, so the
    time is the memory traffic (read x, read y, write y), not the allocation of a new output. It is
    also STREAM's "add" kernel, so :func:`bandwidth_probes` runs it as one of the roof's probes.
    """
    import jax

    (n_elements,) = check_sizes(n_elements=n_elements)
    dt = _jnp_dtype(dtype)
    f = _in_place(jax.jit(lambda x, y: x + y, donate_argnums=1), 1)

    make = vectors_jax(n_elements, dt, count=2)
    t = time_jax(f, make, repeats=repeats, label=f"jax add {n_elements} {dtype}", calls=_calls_jax())
    return OpPoint(name, "jax", dtype, n_elements, 3 * BYTES[dtype] * n_elements, t)


def softmax_jax(rows: int, cols: int, repeats: int = 10) -> OpPoint:
    """Row softmax in fp32; FLOPs counted as 5 per element (max, sub, exp, sum, div) (Lab 00)."""
    import jax

    rows, cols = check_sizes(rows=rows, cols=cols)
    f = jax.jit(lambda x: jax.nn.softmax(x, axis=-1))
    make = lambda i: (jax.random.normal(jax.random.key(i), (rows, cols)),)  # noqa: E731
    t = time_jax(f, make, repeats=repeats, label="jax softmax", calls=_calls_jax())
    return OpPoint("softmax", "jax", "fp32", 5 * rows * cols, 2 * 4 * rows * cols, t)


def call_overhead_jax(repeats: int = 10) -> Timing:
    """Seconds per call of a jitted op with almost no work (x + 1 on 1 float): the fixed cost of a call (Lab 00).

    Timed like every other probe here (same back-to-back rule), so it is what each of their calls pays at
    least -- measured once, at one moment: a busy host can make it read above a later op's whole call.
    """
    import jax

    f = jax.jit(lambda x: x + 1)
    make = lambda i: (jax.numpy.full((1,), float(i)),)  # noqa: E731
    return time_jax(f, make, repeats=repeats, label="jax call overhead", calls=_calls_jax())


# --------------------------------------------------------------------------------------
# torch
# --------------------------------------------------------------------------------------


def _torch_dtype(dtype: str) -> Any:
    import torch

    if dtype not in ("fp32", "bf16", "fp16"):
        raise ValueError(f"dtype {dtype!r} not measurable here; use one of fp32, bf16, fp16")
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]


def matmul_torch(m: int, n: int, k: int, dtype: str = "bf16", device: Any = "cpu", repeats: int = 10) -> OpPoint:
    """Time an (m,k)@(k,n) matmul in torch on ``device``, fresh inputs each repeat (Lab 00).

    fp32 runs at "highest" (true fp32), matching :func:`matmul_jax`: torch's default on CUDA and CPU, but
    not torch-xla's, whose default on a TPU is one bf16 pass (:func:`labkit.runtime.matmul_precision.fp32_matmul_precision`).
    """
    import contextlib

    import torch

    from labkit.runtime.matmul_precision import fp32_matmul_precision

    m, n, k = check_sizes(m=m, n=n, k=k)  # before torch sees a -1 or a '8'
    dt = _torch_dtype(dtype)
    kind = torch_kind(device)  # 'gpu' / 'tpu': a clear error naming 'cuda' / 'xla'
    # On CUDA draw the inputs there: an 8192^2 randn on the host takes ~0.5 s and idles the GPU.
    gen = torch.Generator(device="cuda" if kind == "cuda" else "cpu")
    where = device if kind == "cuda" else "cpu"

    def make(i: int) -> tuple[Any, Any]:
        gen.manual_seed(i)
        a = torch.randn(m, k, generator=gen, dtype=torch.float32, device=where).to(device=device, dtype=dt)
        b = torch.randn(k, n, generator=gen, dtype=torch.float32, device=where).to(device=device, dtype=dt)
        return a, b

    calls = None if kind != "cpu" else 1  # sustained throughput on an accelerator (see matmul_jax)
    with fp32_matmul_precision("highest", device) if dtype == "fp32" else contextlib.nullcontext():
        t = time_torch(torch.matmul, make, device=device, repeats=repeats, label=f"torch matmul {m}x{k}x{n} {dtype}",
                       calls=calls)
    return OpPoint(f"matmul {m}x{k}x{n}", "torch", dtype, matmul_flops(m, n, k), matmul_bytes(m, n, k, BYTES[dtype]), t)


def stream_torch(n_elements: int, dtype: str = "fp32", device: Any = "cpu", repeats: int = 10) -> OpPoint:
    """Bandwidth probe ``y = x + 1`` in torch into a preallocated output (Lab 00)."""
    import torch

    make = _torch_vector(n_elements, dtype, device)  # checks n_elements and device first
    out = torch.empty(n_elements, dtype=_torch_dtype(dtype), device=device)
    t = time_torch(lambda x: torch.add(x, 1, out=out), make, device=device, repeats=repeats, label="torch stream",
                   calls=_calls_torch(device))
    nbytes = 2 * n_elements * BYTES[dtype]
    return OpPoint(f"stream {_mib(n_elements, dtype)}", "torch", dtype, n_elements, nbytes, t)


def copy_torch(n_elements: int, dtype: str = "fp32", device: Any = "cpu", repeats: int = 10) -> OpPoint:
    """Device-to-device copy ``out.copy_(x)`` in torch: the copy rate torch itself reaches (Lab 00)."""
    import torch

    make = _torch_vector(n_elements, dtype, device)  # checks n_elements and device first
    out = torch.empty(n_elements, dtype=_torch_dtype(dtype), device=device)
    t = time_torch(out.copy_, make, device=device, repeats=repeats, label="torch copy", calls=_calls_torch(device))
    return OpPoint(f"copy {_mib(n_elements, dtype)}", "torch", dtype, 0, 2 * n_elements * BYTES[dtype], t)


def read_torch(n_elements: int, dtype: str = "fp32", device: Any = "cpu", repeats: int = 10) -> OpPoint:
    """Bandwidth probe ``x.sum()`` in torch: reads every element once (Lab 00)."""
    import torch

    t = time_torch(lambda x: torch.sum(x, dtype=torch.float32), _torch_vector(n_elements, dtype, device),
                   device=device, repeats=repeats, label="torch read", calls=_calls_torch(device))
    return OpPoint(f"read {_mib(n_elements, dtype)}", "torch", dtype, n_elements, n_elements * BYTES[dtype], t)


def _torch_vector(n_elements: int, dtype: str, device: Any) -> Any:
    """make_inputs for a probe: a fresh random vector on ``device`` each call, drawn there on CUDA."""
    import torch

    (n_elements,) = check_sizes(n_elements=n_elements)
    dt = _torch_dtype(dtype)
    where = device if torch_kind(device) == "cuda" else "cpu"  # a 1 GiB host randn idles the GPU
    return lambda i: (torch.randn(n_elements, dtype=torch.float32, device=where).to(device=device, dtype=dt),)


def _calls_torch(device: Any) -> int | None:
    return None if torch_kind(device) != "cpu" else 1


def bandwidth_probes(n_elements: int, dtype: str = "fp32", torch_device: Any = None,
                     repeats: int = 10) -> list[OpPoint]:
    """Read-only and read+write probes in JAX (and torch on ``torch_device``); the roof is their best (Lab 00).

    Like STREAM (copy, scale, add, triad), several access patterns, because the fastest differs by
    machine; the in-place add is among them, since an op that reads two arrays and writes one can
    outrun a one-read stream, and the roof must bound it too.
    """
    pts = [read_jax(n_elements, dtype, repeats), stream_jax(n_elements, dtype, repeats),
           stream_jax(n_elements, dtype, repeats, in_place=True),
           add_jax(n_elements, repeats, dtype, name=f"add {_mib(n_elements, dtype)} in place")]
    if torch_device is not None:
        pts += [read_torch(n_elements, dtype, torch_device, repeats),
                stream_torch(n_elements, dtype, torch_device, repeats),
                copy_torch(n_elements, dtype, torch_device, repeats)]
    return pts


PROBE_KINDS = ("read", "stream", "copy", "stream in place", "add in place")  # what probe_kind returns


def probe_kind(point: OpPoint) -> str:
    """(Lab 00) A bandwidth probe's kind without its size: one of PROBE_KINDS."""
    kind = point.name.split()[0]
    if kind not in ("read", "stream", "add", "copy"):
        raise ValueError(f"{point.name!r} is not a bandwidth probe (read / stream / add / copy): see bandwidth_probes")
    return kind + (" in place" if point.name.endswith(" in place") else "")


def measured_bandwidth(points: Sequence[OpPoint]) -> float:
    """The best bytes/s over bandwidth probes, each at its median time (Lab 00)."""
    if not points:
        raise ValueError("no bandwidth probes to choose from; run bandwidth_probes first")
    return max(p.bytes_per_s for p in points)


# --------------------------------------------------------------------------------------
# Sweeps and the plot
# --------------------------------------------------------------------------------------


def matmul_sweep(
    framework: str, sizes: Sequence[int], dtype: str, repeats: int = 10, device: Any = "cpu"
) -> list[OpPoint]:
    """Square matmuls of each size; the best of them is the *achievable* peak (Lab 00)."""
    if framework not in ("jax", "torch"):
        raise ValueError(f"framework must be 'jax' or 'torch', got {framework!r}")
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or not sizes:
        raise TypeError(f"sizes must be a non-empty list of matrix sizes, e.g. [1024, 2048], got {sizes!r}")
    pts = []
    for s in progress(sizes, desc=f"{framework} {dtype} matmul"):
        if framework == "jax":
            pts.append(matmul_jax(s, s, s, dtype, repeats))
        else:
            pts.append(matmul_torch(s, s, s, dtype, device, repeats))
    return pts


def best(points: Sequence[OpPoint]) -> OpPoint:
    """The point with the highest achieved FLOP/s (Lab 00)."""
    if not points:
        raise ValueError("no measurements to choose from")
    return max(points, key=lambda p: p.flops_per_s)
