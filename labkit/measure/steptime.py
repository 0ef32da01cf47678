"""One way to time a training step, for every step time Lab 02 reports (Lab 02).

The timing cell, the batch and sequence sweeps and the precision and compilation comparisons all
call :func:`time_step` on batches from :func:`step_batches`, so the same trainer at the same shape
gives the same step: the same prepared batches (made before the clock starts, already on the
device), the same warm-up (``STEP_WARMUP`` untimed steps: tracing and compiling a new shape,
autotuning, the allocator growing) and the figure ``labkit.measure.bench.TIMING_RULE`` names -- the
median timed repeat, the fastest and slowest only as its spread.

:func:`same_step` says whether two measurements of one step agree within what their own spread
allows; Lab 02 uses its tolerance to check that timing the timing cell's shape again reproduces the
cell's step. (The sweeps do not time that shape again: at it they reuse the cell's measurement, so
one shape gives one number in every table and plot.)

Two readings say *where* a slow step's time goes without a profiler (bench_mfu and
benchmarks/diag_jax_slowdown.py take them beside the step time): :func:`host_share`, the host's time to
queue one step against the time until it finished (a step the host queues no faster than the device runs
it is host-bound: the device waits between kernels), and :func:`time_without_command_buffers`, the same
step compiled without XLA:GPU's command buffers (CUDA graphs, which XLA updates when the buffers a
program runs on move), so the two GPU-side suspects of a step slower than its kernels can be told apart.
"""

from __future__ import annotations

import contextlib
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from labkit.measure.bench import Timing, queue_and_run_s, time_jax, time_torch

STEP_WARMUP = 2  # untimed steps before the clock: the first compiles a new shape, the second is the first warm one
STEP_BATCHES = 4  # distinct prepared batches the repeats cycle through (fresh inputs, none made in the timed region)
# Two medians of the same step agree if they differ by at most the larger of AGREE_FLOOR and AGREE_IQRS x the
# noisier measurement's IQR/median, capped at AGREE_CAP. An accelerator repeats a step to about 1-2%
# (IQR/median), so the floor (5%) decides there and flags the 22% gap issue 15 found; on a shared CPU
# (IQR/median 10-50%) the bound follows the noise -- the median of ~10 repeats moves by about half an IQR
# between runs, so two IQRs is several standard deviations of the difference of two medians -- up to the
# cap: noisier than that, the caller measures again (bench.confirm) instead of widening the bound.
AGREE_FLOOR = 0.05
AGREE_IQRS = 2.0
AGREE_CAP = 0.25


def _is_jax(trainer: Any) -> bool:
    from labkit.gpt.train import JaxTrainer, TorchTrainer

    if isinstance(trainer, JaxTrainer):
        return True
    if isinstance(trainer, TorchTrainer):
        return False
    raise TypeError(f"time_step takes a labkit.gpt.train JaxTrainer or TorchTrainer, got {type(trainer).__name__}")


def step_batches(trainer: Any, tokens: np.ndarray, batch: int, seq: int, n: int = STEP_BATCHES,
                 seed: int = 0) -> list[tuple[Any, Any]]:
    """``n`` (x, y) token batches of shape (batch, seq) on the trainer's device, drawn from ``tokens`` (Lab 02)."""
    from labkit.gpt import data

    if n < 1:
        raise ValueError(f"need n >= 1 batches, got {n}")
    stream = data.Batcher(tokens, batch, seq, seed=seed)  # same seed, same shape: the same batches every time
    if _is_jax(trainer):
        return [tuple(data.to_jax(a) for a in next(stream)) for _ in range(n)]  # type: ignore[misc]
    return [tuple(data.to_torch(a, trainer.device) for a in next(stream)) for _ in range(n)]  # type: ignore[misc]


def time_step(trainer: Any, batches: Sequence[tuple[Any, Any]], repeats: int, warmup: int = STEP_WARMUP,
              label: str = "") -> Timing:
    """Seconds per ``trainer.step(x, y)``, cycling ``batches``: warm-up, device sync, median of ``repeats`` (Lab 02)."""
    if not batches:
        raise ValueError("need at least one prepared (x, y) batch")
    make = lambda i: batches[i % len(batches)]  # noqa: E731  prepared before the clock starts
    if _is_jax(trainer):
        return time_jax(trainer.step, make, warmup=warmup, repeats=repeats, label=label or "jax step")
    return time_torch(trainer.step, make, device=trainer.device, warmup=warmup, repeats=repeats,
                      label=label or "torch step")


@dataclass(frozen=True)
class StepTime:
    """A timed step with its shape: the median time and the rates derived from it (Lab 02)."""

    timing: Timing
    batch: int  # sequences per step
    seq: int  # tokens per sequence

    @property
    def step_s(self) -> float:
        """Seconds per step: the median repeat (Lab 02)."""
        return self.timing.median_s

    @property
    def tokens(self) -> int:
        """Tokens per step, batch × seq (Lab 02)."""
        return self.batch * self.seq

    @property
    def tokens_per_s(self) -> float:
        """Training throughput at the median step time, tokens/s (Lab 02)."""
        return self.timing.rate(self.tokens)

    def __str__(self) -> str:
        return (f"{self.batch}x{self.seq}: {self.step_s * 1e3:.3g} ms/step (IQR/median {self.timing.spread:.0%}), "
                f"{self.tokens_per_s:,.0f} tokens/s")


def measure_step(trainer: Any, tokens: np.ndarray, batch: int, seq: int, repeats: int, label: str = "") -> StepTime:
    """Time ``trainer`` on (batch, seq) batches of ``tokens``: step_batches + time_step (Lab 02)."""
    return StepTime(time_step(trainer, step_batches(trainer, tokens, batch, seq), repeats, label=label), batch, seq)


def agreement_tolerance(a: Timing, b: Timing) -> float:
    """Largest relative difference of two medians of one step that noise explains (see AGREE_FLOOR) (Lab 02)."""
    return spread_tolerance(a.spread, b.spread)


def spread_tolerance(spread_a: float, spread_b: float) -> float:
    """:func:`agreement_tolerance` from two medians' IQR/median spreads (Lab 02)."""
    return min(AGREE_CAP, max(AGREE_FLOOR, AGREE_IQRS * max(spread_a, spread_b)))


def no_winner(a: Any, b: Any) -> bool:
    """Whether two steps' FLOP rates (``mfu.Utilization`` s) differ by no more than their spreads allow (Lab 02).

    The rule of :func:`same_step`, for two different steps: on rates, so steps of unequal FLOPs compare too
    (equal FLOPs: the same as comparing times, whatever peak each MFU is against). A Utilization without a
    ``spread`` counts as steady (the 5% floor), so two bare figures fall back to :func:`a_tie`.
    """
    tol = spread_tolerance(a.spread or 0.0, b.spread or 0.0)
    return relative_gap(a.achieved_flops, b.achieved_flops) <= tol


def relative_gap(a: float, b: float) -> float:
    """|b / a - 1|: how far b is from a, as a fraction of a (Lab 02)."""
    if any(isinstance(v, (bool, str, bytes)) or not isinstance(v, numbers.Real) for v in (a, b)) \
            or not a > 0 or not b > 0:  # '1' or NaN: no order to compare
        raise ValueError(f"need two positive times in seconds, got {a!r} and {b!r}")
    return abs(b / a - 1)


def same_step(a: Timing, b: Timing) -> bool:
    """Whether two measurements of one step agree: median gap <= agreement_tolerance(a, b) (Lab 02)."""
    return relative_gap(a.median_s, b.median_s) <= agreement_tolerance(a, b)


def a_tie(a: float, b: float) -> bool:
    """Whether two positive figures (times, MFUs) are within AGREE_FLOOR, larger over smaller: no winner (Lab 02)."""
    relative_gap(a, b)  # the same refusal of non-numbers, zeros and NaN
    return max(a, b) / min(a, b) - 1 <= AGREE_FLOOR


def host_share(trainer: Any, batch: tuple[Any, Any], repeats: int = 3) -> tuple[float, float]:
    """Seconds until ``trainer.step(*batch)`` returns (queued) and until it finished, best of ``repeats`` (Lab 02).

    On an accelerator both frameworks queue a step's kernels and return (asynchronous dispatch): queued
    well under done means the device sets the pace; queued close to done means the host does, and the
    device idles between kernels. (torch on a CPU runs synchronously: there queued is done, and says
    nothing.) The trainer must be warm (one untimed step runs first anyway).
    """
    if _is_jax(trainer):
        import jax

        sync: Callable[[Any], Any] = jax.block_until_ready
    else:
        from labkit.runtime.device import torch_sync

        wait = torch_sync(trainer.device)
        sync = lambda _: wait()  # noqa: E731  the whole device: the optimizer's kernels too
    return queue_and_run_s(lambda: trainer.step(*batch), sync, warmup=1, repeats=repeats)


@contextlib.contextmanager
def threaded(trainer: Any, compiled: Any) -> Iterator[Callable[[Any, Any], Any]]:
    """``step(x, y) -> loss`` running ``compiled``, a copy of a JaxTrainer's step, on the trainer's state (Lab 02).

    The copy donates the weights and AdamW state it is given, like the trainer's own step: each call
    keeps the new ones, and the trainer gets them back on exit (its own buffers were donated away).
    """
    state = [trainer.params, trainer.opt_state]

    def step(x: Any, y: Any) -> Any:
        state[0], state[1], loss = compiled(state[0], state[1], x, y)
        return loss

    try:
        yield step
    finally:
        trainer.params, trainer.opt_state = state


def without_command_buffers(trainer: Any, batch: tuple[Any, Any], platform: str | None = None) -> Any | None:
    """A JaxTrainer's step compiled for ``batch``'s shapes without XLA command buffers, or None (Lab 02).

    None where the backend has no command buffers (a CPU, a TPU) or this XLA refused the option.
    Run it with :func:`threaded` (it donates the state it is given, like the trainer's step).
    """
    import jax

    from labkit.runtime import compile_options

    if not _is_jax(trainer):
        raise TypeError(f"command buffers are XLA's: pass a JaxTrainer, got {type(trainer).__name__}")
    platform = platform or jax.default_backend()
    if not compile_options.traceable(platform):
        return None
    copy, taken = compile_options.compile_traceable(trainer.lower(*batch), platform)
    return copy if taken else None


def time_compiled(trainer: Any, compiled: Any, batches: Sequence[tuple[Any, Any]], repeats: int,
                  label: str = "jax step, no command buffers") -> Timing:
    """``compiled``, a copy of a JaxTrainer's step, on the trainer's state, timed like :func:`time_step` (Lab 02)."""
    if not batches:
        raise ValueError("need at least one prepared (x, y) batch")
    with threaded(trainer, compiled) as step:
        return time_jax(step, lambda i: batches[i % len(batches)], warmup=STEP_WARMUP, repeats=repeats, label=label)


def time_without_command_buffers(trainer: Any, batches: Sequence[tuple[Any, Any]], repeats: int,
                                 platform: str | None = None) -> Timing | None:
    """A JaxTrainer's step compiled without XLA command buffers, timed like :func:`time_step`, or None (Lab 02).

    None where :func:`without_command_buffers` is. A copy as fast as the step itself clears the command
    buffers; a faster one points at them.
    """
    if not batches:
        raise ValueError("need at least one prepared (x, y) batch")
    copy = without_command_buffers(trainer, batches[0], platform)
    return None if copy is None else time_compiled(trainer, copy, batches, repeats)


HOST_SHARE = 0.5  # the host's queue time grew by at least this share of the slowdown: the host's


def why_slower(then_s: float, now_s: float, queued_then_s: float, queued_now_s: float) -> str:
    """(Lab 02) Whose time a step lost between two timings: the host's, queuing it, or the device's.

    ``then_s`` / ``now_s``: the step's median seconds; ``queued_*``: the host's seconds to queue one step
    at each (:func:`host_share`, or a no-sync timing). A host whose queue time grew by ``HOST_SHARE`` of
    the slowdown or more kept the device waiting; one that queues it as fast as before did not.
    """
    for v in (then_s, now_s, queued_then_s, queued_now_s):
        relative_gap(v, v)  # positive numbers only, the same refusal
    slower, grew = now_s - then_s, queued_now_s - queued_then_s
    q = f"the host queued one step in {queued_then_s * 1e3:.3g} ms then, {queued_now_s * 1e3:.3g} ms now"
    if slower <= 0:
        return f"not slower ({then_s * 1e3:.4g} -> {now_s * 1e3:.4g} ms); {q}"
    if grew >= HOST_SHARE * slower:
        return (f"{q}: that is {min(grew / slower, 1):.0%} of the {slower * 1e3:.3g} ms the step lost, so the host "
                "kept the device waiting (launches, Python, or XLA updating its CUDA graphs)")
    return (f"{q}: the host explains {max(grew, 0) / slower:.0%} of the {slower * 1e3:.3g} ms the step lost, so the "
            "device spent it (slower kernels, a lower clock, or gaps inside the program)")


def fixed_share(t_small_s: float, t_big_s: float, ratio: float, extra_flops: float, peak_flops: float) -> float | None:
    """(Lab 02) Share of the smaller step that does not grow with its work, or None where noise decides it.

    With step = fixed + work x cost, a step of ``ratio`` x the work takes t_big = fixed + ratio (t_small - fixed),
    so fixed / t_small = (ratio t_small - t_big) / ((ratio - 1) t_small). The bigger step cannot do its
    ``extra_flops`` faster than ``peak_flops`` (FLOP/s): a difference under extra_flops / peak_flops seconds
    is noise, and so is any share it would give. A share <= 0 says the bigger step cost as much or more per
    token (the model does not fit: something other than the fixed part changed with the work).
    """
    for v in (t_small_s, t_big_s, extra_flops, peak_flops):
        relative_gap(v, v)  # positive numbers only
    if not ratio > 1:
        raise ValueError(f"ratio must be > 1 (the bigger step's work over the smaller's), got {ratio!r}")
    if t_big_s - t_small_s < extra_flops / peak_flops:
        return None
    return (ratio * t_small_s - t_big_s) / ((ratio - 1) * t_small_s)
