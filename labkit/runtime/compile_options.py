"""XLA compile options that differ by backend: barriers kept until scheduling (Lab 03), traceable GPU kernels (Lab 02).

Also the one place labkit passes XLA debug options to a compile, such as the pass dumps Lab 03 reads.

``jax.lax.optimization_barrier`` orders work: what goes through it cannot be computed before
everything else that goes through it exists. XLA deletes the barriers in a pass named
``cse_barrier_expander`` (``OptimizationBarrierExpander``), and where in the pipeline that pass
runs decides whether the order survives:

- **CPU**, in the XLA of jax 0.10: beside layout assignment, before scheduling
  (``cpu_compiler.cc``) — the scheduler never sees the barriers and hoists what they guarded
  (Lab 03's tests measure it hoisting ZeRO-3's backward all-gathers into the forward pass). The
  XLA of jax 0.12 schedules them in the backward pass with or without the option (measured too);
- **GPU**: in ``post-scheduling-passes``, after ``ScheduleGpuModule`` (``gpu_compiler.cc`` in the
  XLA source read for this module) — the schedule respects the barriers. Not yet measured here on
  a GPU: Lab 03 reports where the guarded gathers landed on whatever backend runs it.

:func:`keep_barriers` is what makes the CPU schedule like the GPU does: it disables that pass with
the ``xla_disable_hlo_passes`` debug option (a DebugOptions field, not a stable API). Another
backend (TPU's compiler is not public) gets no option; callers measure where the guarded work
landed instead of trusting either. :func:`compile_keeping_barriers` falls back to the default
compile, and says so, when an XLA no longer accepts the option.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

BARRIER_PASS = "cse_barrier_expander"  # OptimizationBarrierExpander::name() in XLA
KEEP_BARRIERS_CPU = {"xla_disable_hlo_passes": BARRIER_PASS}
REFUSED = "No such compile option"  # XLA's INVALID_ARGUMENT text for an unknown compile option
# XLA:GPU runs sequences of kernels as command buffers (CUDA graphs); a profiler trace then shows one
# "command_buffer_N" event per graph with no HLO op per kernel (H100, jax 0.11.2: one event for 19% of a
# training step; openxla/xprof#3070). An empty list (XLA clears a repeated option, then adds nothing) turns
# them off for one compile: the same kernels, each launched alone and named in the trace.
NO_COMMAND_BUFFERS_GPU = {"xla_gpu_enable_command_buffer": ""}


def keep_barriers(platform: str) -> dict[str, Any]:
    """Compile options under which ``platform``'s scheduler sees optimization barriers (Lab 03)."""
    if not isinstance(platform, str) or not platform:
        raise ValueError(f"platform must be a JAX platform name such as 'cpu' or 'gpu', got {platform!r}")
    return dict(KEEP_BARRIERS_CPU) if platform.lower() == "cpu" else {}


def traceable(platform: str) -> dict[str, Any]:
    """Compile options under which a trace names the HLO op of every kernel on ``platform`` (Lab 02, bench_mfu)."""
    if not isinstance(platform, str) or not platform:
        raise ValueError(f"platform must be a JAX platform name such as 'cpu' or 'gpu', got {platform!r}")
    return dict(NO_COMMAND_BUFFERS_GPU) if platform.lower() in ("gpu", "cuda", "rocm") else {}


def compile_traceable(lowered: Any, platform: str) -> tuple[Any, bool]:
    """``lowered.compile`` with :func:`traceable`'s options; (compiled, options taken) (Lab 02, bench_mfu)."""
    return _compile_with(lowered, traceable(platform), None)


def compile_keeping_barriers(lowered: Any, platform: str,
                             base: Mapping[str, Any] | None = None) -> tuple[Any, bool]:
    """``lowered.compile`` with :func:`keep_barriers` added to ``base``; (compiled, options taken) (Lab 03).

    False means this XLA refused the option and compiled without it: on CPU its barriers were then
    dropped before scheduling.
    """
    return _compile_with(lowered, keep_barriers(platform), base)


def dump_passes(directory: str, passes: Sequence[str]) -> dict[str, Any]:
    """Compile options that dump the HLO module around each of ``passes`` into ``directory`` (Lab 03).

    XLA's own debug options, for this one compile (the process-wide flags stay untouched).
    """
    if not isinstance(directory, str) or not directory:
        raise ValueError(f"directory must be a folder path, got {directory!r}")
    if isinstance(passes, str) or not passes or not all(isinstance(q, str) and q for q in passes):
        raise ValueError(f"passes must be a sequence of XLA pass names such as ('spmd-partitioning',), got {passes!r}")
    return {"xla_dump_to": directory, "xla_dump_hlo_pass_re": "|".join(passes)}


def compile_dumping(lowered: Any, directory: str, passes: Sequence[str]) -> tuple[Any, bool]:
    """``lowered.compile`` with :func:`dump_passes`; (compiled, options taken) (Lab 03).

    False means this XLA refused the options and compiled without them: nothing was dumped.
    """
    return _compile_with(lowered, dump_passes(directory, passes), None)


def _compile_with(lowered: Any, extra: dict[str, Any], base: Mapping[str, Any] | None) -> tuple[Any, bool]:
    """``lowered.compile`` with ``base`` and ``extra``; without ``extra`` if this XLA refuses it."""
    try:
        return lowered.compile(dict(base or {}) | extra or None), True  # None: jax's own default compile
    except Exception as e:  # jax raises its XlaRuntimeError (a RuntimeError subclass) here
        if not extra or REFUSED not in str(e):
            raise
    return lowered.compile(dict(base) if base else None), False
