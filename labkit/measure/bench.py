"""Timing asynchronous accelerator work correctly (Lab 00).

GPUs and TPUs run work asynchronously: ``jnp.dot`` or ``torch.mm`` returns as soon as the work
is *queued*. A correct timer therefore (1) warms up so compilation and autotuning are not
timed, (2) waits for the device before stopping the clock, (3) repeats and reports the
median and spread, and (4) can feed fresh inputs each repeat so caches and result reuse do
not flatter the number. All three frameworks (JAX, torch CUDA, torch-xla) go through
:func:`time_fn`; they differ only in the ``sync`` function, which comes from
:mod:`labkit.runtime.device`.

The timing rule, the one every lab and benchmark reports by (:data:`TIMING_RULE`): a figure --
a time, a TFLOP/s, an MFU, a tokens/s, a measured peak -- comes from the *median* timed repeat.
The fastest and slowest repeats and the spread (interquartile range / median) appear beside it,
never as the figure, so the same op timed in two labs gives the same number.
"""

from __future__ import annotations

import math
import numbers
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")

MIN_WINDOW_S = 0.02  # calls=None: a timed repeat lasts at least this long (s), so a sync's ~10-100 us is noise
MAX_CALLS = 100  # ... with at most this many back-to-back calls per repeat
TIMING_RULE = ("median of the timed repeats, after warm-up, with a device sync and fresh inputs; "
               "the fastest and slowest repeats and the spread (IQR/median) are shown beside it, never as the figure")
NOISY_SPREAD = 0.5  # IQR/median above this: the repeats disagree, rerun before quoting the median


def check_number(name: str, value: Any, fix: str = "", *, count: bool = False, zero_ok: bool = False) -> Any:
    """(Lab 00) ``value`` as a finite number > 0 (>= 0 if zero_ok; whole if count), else an error naming it and the fix."""
    what = f"need {name} {'>= 0' if zero_ok else '>= 1' if count else '> 0'}"
    noun = "a whole number" if count else "a finite number" if zero_ok else "a positive finite number"
    got, fix = f" ({noun}), got {value!r}", f"; {fix}" if fix else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral if count else numbers.Real):
        raise TypeError(f"{what}{got} ({type(value).__name__}){fix}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        raise ValueError(what + got + fix)
    return int(value) if count else float(value)


@dataclass(frozen=True)
class Timing:
    """Wall-clock times of repeated runs of one function, in seconds (Lab 00)."""

    times_s: tuple[float, ...]  # one entry per timed repeat, seconds
    warmup: int  # untimed runs before the first timed one
    label: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.times_s:
            raise ValueError("no timed repeats: a Timing needs at least one time (s), e.g. from time_fn(..., repeats=5)")
        for i, t in enumerate(self.times_s):  # a clock never runs backwards: a negative time is a bug upstream
            check_number(f"times_s[{i}]", t, "times are wall-clock seconds", zero_ok=True)

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

    @property
    def noisy(self) -> bool:
        """Whether the repeats disagree (spread above NOISY_SPREAD): the median is only a rough figure (Lab 00)."""
        return self.spread > NOISY_SPREAD

    def rate(self, work: float) -> float:
        """``work`` per second at the median time, e.g. FLOP/s from FLOPs per call (Lab 00)."""
        return work / check_number("the median time (s)", self.median_s, "a rate needs a time above the clock's resolution")

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
    calls: int | None = 1,
) -> Timing:
    """Time ``fn(*make_inputs(i))`` with warm-up, device sync and fresh inputs (Lab 00).

    ``make_inputs(i)`` builds the arguments for call ``i`` *outside* the timed region;
    ``sync(x)`` must block until ``x`` (inputs or outputs) is really computed.

    ``calls`` > 1 times that many back-to-back calls per repeat (alternating two fresh input
    sets) and records their mean: the device never idles between calls, so a repeat measures
    sustained throughput, not one call plus a sync round trip (~10-100 us on a GPU, as long as
    a whole 2048^3 matmul) started from a GPU that idled while the host made inputs.
    ``None`` picks enough calls for a repeat to last ``MIN_WINDOW_S`` (at most ``MAX_CALLS``).
    """
    repeats, warmup = check_number("repeats", repeats, count=True), check_number("warmup", warmup, count=True, zero_ok=True)
    calls = None if calls is None else check_number("calls", calls, "or None: enough calls for MIN_WINDOW_S", count=True)
    if not callable(fn) or (make_inputs is not None and not callable(make_inputs)):
        bad, what = ("fn", fn) if not callable(fn) else ("make_inputs", make_inputs)
        raise TypeError(f"{bad} must be a function, got {type(what).__name__} {what!r:.60}; "
                        "e.g. time_jax(f, lambda i: (a, b)): f is timed on the arguments make_inputs(i) returns")
    if not callable(sync):
        raise TypeError(f"sync must be a function that blocks until its argument is computed, got "
                        f"{type(sync).__name__} {sync!r:.60}; e.g. jax.block_until_ready, or time_jax / time_torch")

    def make(i: int) -> Sequence[Any]:
        args = make_inputs(i) if make_inputs is not None else ()
        if not isinstance(args, (tuple, list)):  # an array would be unpacked along its first axis
            raise TypeError(f"make_inputs({i}) returned a {type(args).__name__}, not a tuple of arguments: "
                            "for one argument write lambda i: (a,) (the comma makes the tuple)")
        return args

    for i in range(warmup):  # compile, autotune, allocate: none of it is the steady state
        sync(fn(*make(i)))
    if calls is None:  # one warm call, timed, sets the count
        args = make(warmup)
        sync(args)
        t0 = time.perf_counter()
        sync(fn(*args))
        one = max(time.perf_counter() - t0, 1e-9)
        calls = max(1, min(MAX_CALLS, math.ceil(MIN_WINDOW_S / one)))
    times: list[float] = []
    for i in range(repeats):
        sets = [make(warmup + i * min(calls, 2) + j) for j in range(min(calls, 2))]
        sync(sets)  # input generation must not leak into the timed region
        t0 = time.perf_counter()
        for j in range(calls):
            out = fn(*sets[j % len(sets)])
        sync(out)  # wait for the device, not just for the queue
        times.append((time.perf_counter() - t0) / calls)
    return Timing(tuple(times), warmup, label, {"calls": calls})


def time_jax(
    fn: Callable[..., Any],
    make_inputs: Callable[[int], Sequence[Any]] | None = None,
    *,
    warmup: int = 2,
    repeats: int = 10,
    label: str = "",
    calls: int | None = 1,
) -> Timing:
    """Time a JAX function, blocking on its outputs with ``jax.block_until_ready`` (Lab 00)."""
    import jax

    return time_fn(fn, make_inputs, sync=jax.block_until_ready, warmup=warmup, repeats=repeats, label=label,
                   calls=calls)


def time_torch(
    fn: Callable[..., Any],
    make_inputs: Callable[[int], Sequence[Any]] | None = None,
    *,
    device: Any = "cpu",
    warmup: int = 2,
    repeats: int = 10,
    label: str = "",
    calls: int | None = 1,
) -> Timing:
    """Time a torch function on CPU, CUDA or XLA, synchronising that device (Lab 00)."""
    from labkit.runtime.device import torch_sync

    wait = torch_sync(device)
    return time_fn(fn, make_inputs, sync=lambda _: wait(), warmup=warmup, repeats=repeats, label=label, calls=calls)


def queue_and_run_s(fn: Callable[[], Any], sync: Callable[[Any], None], warmup: int = 1,
                    repeats: int = 3) -> tuple[float, float]:
    """(Lab 02) Seconds until ``fn()`` returns (its work queued) and until ``sync`` says it is done.

    On an asynchronous device the first is the host's share only. Of ``repeats`` tries, returns
    the one queued fastest: a busy host only ever adds time.
    """
    repeats, warmup = check_number("repeats", repeats, count=True), check_number("warmup", warmup, count=True, zero_ok=True)
    for _ in range(warmup):  # compilation, autotuning, library handles: not part of either time
        sync(fn())
    best: tuple[float, float] | None = None
    for _ in range(repeats):
        sync(None)  # start with nothing queued
        t0 = time.perf_counter()
        out = fn()
        queued = time.perf_counter() - t0
        sync(out)
        done = time.perf_counter() - t0
        if best is None or queued < best[0]:
            best = (queued, done)
    assert best is not None
    return best


@dataclass(frozen=True)
class Confirmed:
    """A taught timing claim and the measurements it was judged on (Lab 02)."""

    values: tuple[float, ...]  # each point's best over all attempts (fastest time or highest rate)
    attempts: int  # measurements taken; more than 1 means noise hid the effect at first
    holds: bool  # whether the claim holds on ``values``

    def __str__(self) -> str:
        if not self.holds:  # every attempt kept each point's best, and the claim still failed
            return f"claim does NOT hold after {self.attempts} measurement(s), each point at its best: {self._shown()}"
        # A re-measured claim: noise hid a real effect at first -- or, with no effect, made it hold by chance.
        extra = "" if self.attempts == 1 else f" (on measurement {self.attempts}: noise hid it at first, or made it)"
        return f"claim holds{extra}"

    def _shown(self) -> str:
        return ", ".join(f"{v:.4g}" for v in self.values)


def confirm(
    measure: Callable[[], Sequence[float]],
    claim: Callable[[tuple[float, ...]], bool],
    *,
    higher_is_better: bool = True,
    attempts: int = 3,
    first: Sequence[float] | None = None,
) -> Confirmed:
    """Judge a claim about timings (A is faster than B) on enough measurements to beat noise (Lab 02).

    On a shared machine other work only ever *adds* time, so each point keeps its best value over
    all attempts -- the same rule as "the fastest of several repeats", with more repeats. Up to
    ``attempts`` measurements are taken, stopping as soon as the claim holds; ``first`` is an
    already taken measurement that counts as attempt 1. The caller asserts ``.holds``. The rule
    favours the claim: between two points with no real difference, each attempt is another chance
    for noise to order them as claimed (at 5 attempts, most such claims hold). So a claim that
    compares points must ask for a margin above their noise, e.g. ``v[1] > 1.05 * v[0]``.
    """
    attempts = check_number("attempts", attempts, count=True)
    best = max if higher_is_better else min
    values = tuple(float(v) for v in (first if first is not None else measure()))
    if not values:
        raise ValueError("measure() returned no values: it must return one number per point, e.g. (time_a, time_b)")
    n = 1
    while not claim(values) and n < attempts:
        again = tuple(float(v) for v in measure())
        if len(again) != len(values):
            raise ValueError(f"measure() returned {len(again)} values, the first measurement {len(values)}")
        values = tuple(best(a, b) for a, b in zip(values, again))
        n += 1
    return Confirmed(values, n, bool(claim(values)))


HEADLESS_ENV = "LABKIT_METRICS_FILE"  # set by `labkit run` for each lab: nobody watches a bar there


def progress(items: Iterable[T], desc: str = "", total: int | None = None) -> Iterable[T]:
    """Wrap a long sweep in a progress bar that renders in notebooks and terminals (Lab 00)."""
    from tqdm.auto import tqdm

    n = total if total is not None else (len(items) if hasattr(items, "__len__") else None)  # type: ignore[arg-type]
    # No bar for a sweep of one or two points, nor in a headless run: a saved notebook shows a
    # finished bar's text as "0%| 0/3" in viewers that do not load widgets.
    quiet = (n is not None and n <= 2) or bool(os.environ.get(HEADLESS_ENV))
    return tqdm(items, desc=desc, total=total, leave=False, disable=quiet)
