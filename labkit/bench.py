"""Timing asynchronous accelerator work correctly (Lab 00).

GPUs and TPUs run work asynchronously: ``jnp.dot`` or ``torch.mm`` returns as soon as the work
is *queued*. A correct timer therefore (1) warms up so compilation and autotuning are not
timed, (2) waits for the device before stopping the clock, (3) repeats and reports the
median and spread, and (4) can feed fresh inputs each repeat so caches and result reuse do
not flatter the number. All three frameworks (JAX, torch CUDA, torch-xla) go through
:func:`time_fn`; they differ only in the ``sync`` function, which comes from
:mod:`labkit.device`.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Timing:
    """Wall-clock times of repeated runs of one function, in seconds (Lab 00)."""

    times_s: tuple[float, ...]  # one entry per timed repeat, seconds
    warmup: int  # untimed runs before the first timed one
    label: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def median_s(self) -> float:
        """Median seconds per call: robust to the odd slow repeat (Lab 00)."""
        return statistics.median(self.times_s)

    @property
    def min_s(self) -> float:
        """Fastest repeat, seconds (Lab 00)."""
        return min(self.times_s)

    @property
    def max_s(self) -> float:
        """Slowest repeat, seconds (Lab 00)."""
        return max(self.times_s)

    @property
    def spread(self) -> float:
        """Interquartile range over median: 0.05 means repeats agree to about 5% (Lab 00)."""
        if len(self.times_s) < 4:
            return (self.max_s - self.min_s) / self.median_s if self.median_s else 0.0
        q1, _, q3 = statistics.quantiles(self.times_s, n=4)
        return (q3 - q1) / self.median_s if self.median_s else 0.0

    def rate(self, work: float) -> float:
        """``work`` per second at the median time, e.g. FLOP/s from FLOPs per call (Lab 00)."""
        return work / self.median_s

    def __str__(self) -> str:
        return (
            f"{self.label or 'timing'}: median {self.median_s * 1e3:.3f} ms "
            f"(min {self.min_s * 1e3:.3f}, max {self.max_s * 1e3:.3f}, "
            f"IQR/median {self.spread:.1%}, n={len(self.times_s)})"
        )


def time_fn(
    fn: Callable[..., Any],
    make_inputs: Callable[[int], Sequence[Any]] | None = None,
    *,
    sync: Callable[[Any], Any],
    warmup: int = 2,
    repeats: int = 10,
    label: str = "",
) -> Timing:
    """Time ``fn(*make_inputs(i))`` with warm-up, device sync and fresh inputs (Lab 00).

    ``make_inputs(i)`` builds the arguments for call ``i`` *outside* the timed region;
    ``sync(x)`` must block until ``x`` (inputs or outputs) is really computed.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    make = make_inputs or (lambda i: ())
    for i in range(warmup):  # compile, autotune, allocate: none of it is the steady state
        sync(fn(*make(i)))
    times: list[float] = []
    for i in range(repeats):
        args = make(warmup + i)
        sync(args)  # input generation must not leak into the timed region
        t0 = time.perf_counter()
        out = fn(*args)
        sync(out)  # wait for the device, not just for the queue
        times.append(time.perf_counter() - t0)
    return Timing(tuple(times), warmup, label)


def time_jax(
    fn: Callable[..., Any],
    make_inputs: Callable[[int], Sequence[Any]] | None = None,
    *,
    warmup: int = 2,
    repeats: int = 10,
    label: str = "",
) -> Timing:
    """Time a JAX function, blocking on its outputs with ``jax.block_until_ready`` (Lab 00)."""
    import jax

    return time_fn(fn, make_inputs, sync=jax.block_until_ready, warmup=warmup, repeats=repeats, label=label)


def time_torch(
    fn: Callable[..., Any],
    make_inputs: Callable[[int], Sequence[Any]] | None = None,
    *,
    device: Any = "cpu",
    warmup: int = 2,
    repeats: int = 10,
    label: str = "",
) -> Timing:
    """Time a torch function on CPU, CUDA or XLA, synchronising that device (Lab 00)."""
    from labkit.device import torch_sync

    wait = torch_sync(device)
    return time_fn(fn, make_inputs, sync=lambda _: wait(), warmup=warmup, repeats=repeats, label=label)


def progress(items: Iterable[T], desc: str = "", total: int | None = None) -> Iterable[T]:
    """Wrap a long sweep in a progress bar that renders in notebooks and terminals (Lab 00)."""
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, total=total, leave=False)
