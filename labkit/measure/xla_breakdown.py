"""Where a jitted JAX step's device time goes: each traced op charged by what the compiled HLO says it is (bench_mfu, Lab 02).

The JAX profiler (``jax.profiler.trace``) records every kernel XLA launches with two stats,
``hlo_module`` and ``hlo_op``: the compiled program and the HLO instruction the kernel runs
(on a GPU the kernels sit on the ``/device:GPU:N`` plane's stream lines; on a CPU each thunk is an
event on the host plane, and several threads can run thunks at once). The instruction is then
looked up in the compiled program's own HLO text (``compiled.as_text()``), which says what it is
whatever the kernel is called:

- **matmul**: a ``dot``/``convolution``, a fusion around one (XLA:CPU's, or a Triton GEMM fusion
  on a GPU), or a library call to cuBLAS (``__cublas$gemm``, ``__cublas$lt$matmul``);
- **attention**: a call to cuDNN's fused attention (``__cudnn$fmha*``);
- **collectives**, **copies and transposes**, **reductions** (LayerNorm, softmax, the loss, gradient
  sums), **scatters** (an embedding lookup's gradient), **elementwise** fusions, and **other**.

While a trace is active XLA:GPU runs its command buffers (CUDA graphs) thunk by thunk, so each
kernel keeps its annotation: kernel times are right, but the gaps between kernels are the traced
run's, which is why the step time these are compared with is the untraced timer's.

Each instruction also gets a *phase* from the name stack JAX writes into its ``op_name``:
``transpose(jvp(...))`` is the backward pass, ``jvp(...)`` the forward pass; the rest is what runs
outside ``value_and_grad`` (gradient clipping, optax's AdamW, a loss scale's update) plus the few ops
XLA created without a name stack. The pure parts, :func:`classify_hlo`, :func:`select_events`
and :func:`attribute`, take text and plain records, so the GPU's trace layout is tested on the CPU.
"""

from __future__ import annotations

import glob
import re
import statistics
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

MATMUL, ATTENTION = "matmul", "attention (cuDNN)"
COLLECTIVE, LAYOUT = "collectives", "copies and transposes"
REDUCTION = "reductions (norms, softmax, loss, gradient sums)"
SCATTER = "scatters (the embedding's gradient)"  # a lookup's gradient: atomic adds on a GPU (Lab 02, section 6)
ELEMENTWISE, OTHER = "elementwise fusions", "other"
CATEGORIES = (MATMUL, ATTENTION, REDUCTION, SCATTER, ELEMENTWISE, LAYOUT, COLLECTIVE, OTHER)
# OPTIMIZER: ops outside value_and_grad (gradient clipping, AdamW, a loss scale's update) and the few
# XLA made without a name stack (op_name="" : a layout change it inserted, some reduce-windows).
FORWARD, BACKWARD, OPTIMIZER = "forward", "backward", "rest (clipping, AdamW, ops with no name stack)"
PHASES = (FORWARD, BACKWARD, OPTIMIZER)

_COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_LAYOUT_OPS = {"copy", "transpose", "copy-start", "copy-done", "bitcast", "reshape"}
_PLUMBING = {"parameter", "bitcast", "reshape", "constant", "tuple", "get-tuple-element", "broadcast"}
# `%name = type opcode(` -- the type may be a tuple "(f32[2], u8[0])" or carry a layout "{1,0}".
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(\(.*?\)|\S+)\s+([a-z][\w\-]*)\(")
_COMP = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*[\s(].*\{\s*$")
_CALLS = re.compile(r"(?:calls|to_apply)=%?([\w.\-]+)")
_TARGET = re.compile(r'custom_call_target="([^"]+)"')
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_COMMENT = re.compile(r"/\*.*?\*/")  # XLA prints /*index=5*/ inside tuple types of 6+ elements


class NoDeviceEvents(RuntimeError):
    """An accelerator trace with no kernel events: the profiler saw launches, not device time (bench_mfu, Lab 02)."""


@dataclass(frozen=True)
class HloOp:
    """One top-level instruction of a compiled program: what it is and which pass it belongs to (bench_mfu, Lab 02)."""

    name: str
    opcode: str
    category: str
    phase: str
    target: str = ""  # custom-call target, e.g. "__cublas$lt$matmul"; "" for other ops


def _parse(hlo_text: str) -> tuple[dict[str, list[tuple[str, str, str, str, str]]], str]:
    """Computations -> [(name, opcode, target, called computation, op_name)], and the module's name."""
    comps: dict[str, list[tuple[str, str, str, str, str]]] = {}
    module, current = "", None
    for line in hlo_text.splitlines():
        line = _COMMENT.sub("", line)  # else a header's "/*index=5*/" reads as an instruction's "="
        if line.startswith("HloModule "):
            module = line.split()[1].rstrip(",")
            continue
        m = _INSTR.match(line)
        if m and current is not None:
            calls, target, op_name = _CALLS.search(line), _TARGET.search(line), _OP_NAME.search(line)
            comps[current].append((m.group(1), m.group(3), target.group(1) if target else "",
                                   calls.group(1) if calls else "", op_name.group(1) if op_name else ""))
            continue
        c = _COMP.match(line)
        if c and "=" not in line.split("{")[0]:
            current = c.group(1)
            comps[current] = []
    return comps, module


def _category(opcode: str, target: str, inner: set[str]) -> str:
    t = target.lower()
    if opcode == "custom-call":
        if "fmha" in t or "attention" in t:
            return ATTENTION
        if "gemm" in t or "matmul" in t or "cublas" in t:
            return MATMUL
        return OTHER
    ops = inner | {opcode}
    if ops & {"dot", "convolution"}:
        return MATMUL
    if any(o.startswith(c) for o in ops for c in _COLLECTIVES):
        return COLLECTIVE
    if opcode == "fusion" and not inner:  # its computation was not found in the text: say so, do not guess
        return OTHER
    if opcode in _LAYOUT_OPS or (opcode == "fusion" and inner - _PLUMBING <= _LAYOUT_OPS):
        return LAYOUT
    if "scatter" in ops:  # before reductions: a fusion around a scatter often reduces too
        return SCATTER
    if ops & {"reduce", "reduce-window", "sort"}:
        return REDUCTION
    if opcode == "fusion" or inner:
        return ELEMENTWISE
    return OTHER


def name_stack_phase(op_name: str) -> str:
    """(bench_mfu, Lab 03) FORWARD (a ``jvp(``), BACKWARD (a ``transpose(``) or "" from JAX's name stack in an op_name."""
    if "transpose(" in op_name:  # JAX's name stack: the VJP of the forward pass
        return BACKWARD
    return FORWARD if "jvp(" in op_name else ""


def _phase(op_name: str) -> str:
    return name_stack_phase(op_name) or OPTIMIZER


def classify_hlo(hlo_text: str) -> dict[str, HloOp]:
    """Every instruction of a compiled program's HLO text, by name: category and phase (bench_mfu, Lab 02)."""
    comps, _ = _parse(hlo_text)
    if not comps:
        raise ValueError("no HLO computations found: pass the compiled program's text, "
                         "jax.jit(f).lower(...).compile().as_text()")

    def inner_ops(comp: str, seen: frozenset[str] = frozenset()) -> set[str]:
        out: set[str] = set()
        for _, opcode, _, calls, _ in comps.get(comp, []):
            out.add(opcode)
            if calls and calls not in seen:  # a fusion inside a fusion, a reduce's region
                out |= inner_ops(calls, seen | {comp})
        return out

    ops = {}
    for instrs in comps.values():
        for name, opcode, target, calls, op_name in instrs:
            inner = inner_ops(calls) if calls and opcode in ("fusion", "custom-call") else set()
            ops[name] = HloOp(name, opcode, _category(opcode, target, inner), _phase(op_name), target)
    return ops


def module_name(hlo_text: str) -> str:
    """The ``HloModule`` name of a compiled program, the ``hlo_module`` its trace events carry (bench_mfu, Lab 02)."""
    return _parse(hlo_text)[1]


@dataclass(frozen=True)
class Record:
    """One trace event, flattened from the profiler's XSpace (bench_mfu, Lab 02)."""

    plane: str  # "/device:GPU:0", "/host:CPU"
    line: str  # "Stream #14(Compute)", "tf_XLAPjRtCpuClient/...", "XLA Ops"
    name: str  # kernel or thunk name
    duration_ns: float
    stats: dict[str, Any] = field(default_factory=dict)


def select_events(records: Iterable[Record], module: str,
                  require_device: bool = False) -> tuple[list[tuple[str, float]], str]:
    """The (hlo op, ns) events of ``module``: device planes where the trace has them, else the host's (bench_mfu, Lab 02).

    GPU: kernels on ``/device:GPU:N`` stream lines carry ``hlo_op`` (an annotation path ``a::b``:
    the last part is the instruction) and ``hlo_module``. A device plane's ``XLA Ops`` line (TPU
    traces, derived timelines) names the op in the event itself and is used instead of the plane's
    other lines, so no time is counted twice. CPU: thunks on the host plane, ``hlo_op`` stats.
    ``require_device``: on an accelerator, host events would be launch times, not kernel times, so a
    trace without device events is an error (the GPU tracer needs CUPTI, and one CUPTI client at a time).
    """
    records = list(records)
    device = [r for r in records if r.plane.startswith("/device:")
              and ("hlo_op" in r.stats or r.line == "XLA Ops")]
    if require_device and not device:
        planes = sorted({r.plane for r in records})
        raise NoDeviceEvents(f"the trace has no device kernel events (planes: {planes}); on a GPU the JAX profiler "
                           "needs CUPTI (it ships with jax[cuda]) and no other profiler (torch's) holding it")
    source = device or [r for r in records if "hlo_op" in r.stats]
    where = "device planes" if device else "host threads (a CPU runs XLA's thunks there)"
    xla_ops_planes = {r.plane for r in source if r.line == "XLA Ops"}
    out = []
    for r in source:
        if r.plane in xla_ops_planes and r.line != "XLA Ops":
            continue
        if str(r.stats.get("hlo_module", module)) != module:
            continue  # another program's kernels (a warm-up's, the profiler's own)
        op = str(r.stats.get("hlo_op", r.name)).split("::")[-1]
        out.append((op, float(r.duration_ns)))
    return out, where


@dataclass(frozen=True)
class XlaBreakdown:
    """Device time of ``steps`` runs of one compiled program, per category, phase and op (bench_mfu, Lab 02)."""

    by_category_ns: dict[str, float]
    by_phase_ns: dict[str, float]
    by_op_ns: dict[str, float]
    unknown_ns: float  # events naming an op the HLO text does not have
    steps: int
    source: str  # where the events came from: device planes or host threads
    ops: dict[str, HloOp] = field(default_factory=dict)  # what each traced op is (those found in the HLO)

    @property
    def busy_ns(self) -> float:
        """Summed event time: kernels that overlap (streams, CPU threads) each count (bench_mfu, Lab 02)."""
        return sum(self.by_category_ns.values()) + self.unknown_ns

    # The same reading as torch's OpBreakdown (labkit.measure.breakdown), so breakdown.matmul_rate and
    # Lab 02's table take either.
    @property
    def ms_per_step(self) -> float:
        """Summed op time per step, ms (Lab 02)."""
        return self.busy_ns / 1e6 / self.steps

    @property
    def matmul_share(self) -> float:
        """Fraction of the summed op time in matmul + attention (Lab 02)."""
        mm = self.by_category_ns[MATMUL] + self.by_category_ns[ATTENTION]
        return mm / self.busy_ns if self.busy_ns else 0.0

    @property
    def rows(self) -> tuple[dict[str, Any], ...]:
        """{"category", "ms per step", "share" (of the summed op time)}, largest first (Lab 02)."""
        return tuple({"category": k, "ms per step": v, "share": v / self.ms_per_step}
                     for k, v in self.per_step_ms().items())

    def per_step_ms(self) -> dict[str, float]:
        """Category -> ms per step, largest first (bench_mfu, Lab 02)."""
        rows = sorted(self.by_category_ns.items(), key=lambda kv: -kv[1])
        return {k: v / 1e6 / self.steps for k, v in rows if v > 0}

    def top_ops(self, n: int = 10) -> list[dict[str, Any]]:
        """The ``n`` ops with the most device time: name, category, phase, ms per step (bench_mfu, Lab 02)."""
        rows = sorted(self.by_op_ns.items(), key=lambda kv: -kv[1])[:n]
        unknown = HloOp("", "", "unknown", "unknown")
        return [{"op": k, "category": self.ops.get(k, unknown).category, "phase": self.ops.get(k, unknown).phase,
                 "target": self.ops.get(k, unknown).target, "ms_per_step": v / 1e6 / self.steps} for k, v in rows]


def attribute(events: Iterable[tuple[str, float]], ops: dict[str, HloOp], steps: int,
              source: str = "") -> XlaBreakdown:
    """Sum each op's time into its HLO category and phase, each op at its median event (bench_mfu, Lab 02).

    An op's time is its median event times its event count, the timing rule of
    ``labkit.measure.bench.TIMING_RULE`` applied to each op: one event stretched by a preempted
    CPU thread or a stall (other work on a shared machine) does not move its category or pass.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1 (the number of traced runs), got {steps!r}")
    cat: dict[str, float] = dict.fromkeys(CATEGORIES, 0.0)
    phase: dict[str, float] = dict.fromkeys(PHASES, 0.0)
    durations: defaultdict[str, list[float]] = defaultdict(list)
    for op, ns in events:
        durations[op].append(ns)
    by_op = {op: statistics.median(ds) * len(ds) for op, ds in durations.items()}  # ns over all traced steps
    unknown = 0.0
    for op, ns in by_op.items():
        if op in ops:
            cat[ops[op].category] += ns
            phase[ops[op].phase] += ns
        else:
            unknown += ns
    return XlaBreakdown(cat, phase, by_op, unknown, steps, source, {k: ops[k] for k in by_op if k in ops})


def records(profile: Any) -> list[Record]:
    """Flatten a ``jax.profiler.ProfileData`` into :class:`Record` s (bench_mfu, Lab 02)."""
    out = []
    for plane in profile.planes:
        for line in plane.lines:
            for e in line.events:
                out.append(Record(plane.name, line.name, e.name, float(e.duration_ns), dict(e.stats)))
    return out


def trace_step(run: Callable[[], Any], compiled_text: str, steps: int = 3) -> XlaBreakdown:
    """Trace ``steps`` calls of ``run`` (one compiled program, already warm) and attribute its time (bench_mfu, Lab 02)."""
    import jax

    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps!r}")
    ops, module = classify_hlo(compiled_text), module_name(compiled_text)
    with tempfile.TemporaryDirectory() as d:
        with jax.profiler.trace(d):
            for _ in range(steps):
                jax.block_until_ready(run())
        files = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)
        if not files:
            raise RuntimeError(f"jax.profiler.trace wrote no .xplane.pb under {d}; is another trace running?")
        profile = jax.profiler.ProfileData.from_file(files[0])
        events, source = select_events(records(profile), module, require_device=jax.default_backend() != "cpu")
    if not events:
        raise RuntimeError(f"the trace has no events of module {module!r}: was `run` calling that compiled program?")
    return attribute(events, ops, steps, source)


def for_trace(lowered: Any, compiled: Any, platform: str | None = None) -> tuple[Any, str]:
    """The program to trace and a note: ``compiled``, or on a GPU ``lowered`` again without command buffers (bench_mfu, Lab 02).

    XLA:GPU launches runs of kernels as command buffers (CUDA graphs), and the trace then names one
    ``command_buffer_N`` event, not each kernel's HLO op (``labkit.runtime.compile_options``). The copy
    compiled without them runs the same kernels one launch each: their times are the step's, the gaps
    between them are not.
    """
    import jax

    from labkit.runtime import compile_options

    platform = platform or jax.default_backend()
    if not compile_options.traceable(platform):
        return compiled, ""
    traced, taken = compile_options.compile_traceable(lowered, platform)
    return traced, (" (a copy compiled without XLA command buffers, so each kernel names its HLO op)" if taken else
                    " (this XLA refused to turn command buffers off: kernels inside them are not named)")


def trace_trainer(trainer: Any, x: Any, y: Any, steps: int = 3) -> XlaBreakdown:
    """`trace_step` on a ``labkit.gpt.train.JaxTrainer``'s own step at this batch (Lab 02, bench_mfu)."""
    lowered = trainer.lower(x, y)
    compiled = lowered.compile()  # the program trainer.step runs (jit's cache: no new compile)
    traced, note = for_trace(lowered, compiled)
    if traced is compiled:
        return trace_step(lambda: trainer.step(x, y), compiled.as_text(), steps)
    from labkit.measure.steptime import threaded

    with threaded(trainer, traced) as step:  # the copy donates the trainer's state; it gets the new one back
        b = trace_step(lambda: step(x, y), traced.as_text(), steps)
    return replace(b, source=b.source + note)


def summary(b: XlaBreakdown, step_s: float) -> dict[str, Any]:
    """JSON-ready figures: ms per step by category and phase, and how busy the device was (bench_mfu, Lab 02)."""
    by_phase = {k: v / 1e6 / b.steps for k, v in b.by_phase_ns.items()}
    return {"source": b.source, "step_ms": step_s * 1e3, "busy_ms_per_step": b.ms_per_step,
            "busy_over_step": b.ms_per_step / (step_s * 1e3), "by_category_ms": b.per_step_ms(),
            "by_phase_ms": by_phase, "unknown_ms": b.unknown_ns / 1e6 / b.steps}


def report(b: XlaBreakdown, step_s: float, matmul_flops: float, peak_flops: float | None,
           peak_name: str = "", skipped_flops: float = 0.0) -> dict[str, Any]:
    """A benchmark's JSON entry: :func:`summary`, the top ops and :func:`limited_by`'s sentence (bench_mfu, Lab 02)."""
    return {**summary(b, step_s), "top_ops": b.top_ops(),
            "limited_by": limited_by(b, step_s, matmul_flops, peak_flops, peak_name, skipped_flops)}


def limited_by(b: XlaBreakdown, step_s: float, matmul_flops: float, peak_flops: float | None,
               peak_name: str = "", skipped_flops: float = 0.0) -> str:
    """One sentence: where the step's time went and how fast its matmuls ran against the named peak (bench_mfu, Lab 02).

    ``skipped_flops``: the part of ``matmul_flops`` a fused causal attention kernel does not do (the masked
    half of 12·L·H·Q·T, ``flops.attention_flops_per_token(causal=True)`` x tokens); where cuDNN's kernel ran,
    the rate without it is printed too: counted FLOPs in the kernels' time can beat a measured peak.
    """
    per = b.per_step_ms()
    busy_ms, step_ms = b.ms_per_step, step_s * 1e3
    mm_ms = b.matmul_share * busy_ms
    rate = matmul_flops / (mm_ms / 1e3) if mm_ms > 0 else float("nan")
    rest = sorted(((k, v) for k, v in per.items() if k not in (MATMUL, ATTENTION)), key=lambda kv: -kv[1])
    top = ", ".join(f"{k} {v:.1f} ms" for k, v in rest[:3])
    vs_peak = ""
    if peak_flops:  # a Peak.label() names its own figure; without a name, say the figure
        vs_peak = f" ({rate / peak_flops:.0%} of {peak_name or f'the {peak_flops / 1e12:.3g} TFLOP/s peak'})"
    if skipped_flops and per.get(ATTENTION, 0) > 0 and mm_ms > 0:  # a flash kernel skips the masked tiles
        vs_peak += (f", {(matmul_flops - skipped_flops) / (mm_ms / 1e3) / 1e12:.3g} TFLOP/s without causal "
                    "attention's masked half, which the fused kernel skips")
    unknown = f"; {b.unknown_ns / 1e6 / b.steps:.1f} ms in ops the HLO text does not name" if b.unknown_ns else ""
    if any(op.startswith("command_buffer") and op not in b.ops for op in b.by_op_ns):  # CUDA graphs: see for_trace
        unknown += " (XLA command buffers: their kernels carry no HLO op; trace a copy compiled without them)"
    # Above the step by more than timing noise: ops overlapped, or the traced steps ran slower than the timed one.
    at_once = "XLA's CPU threads" if b.source.startswith("host") else "several streams"
    overlap = (f" (ops ran at once on {at_once}, or the traced steps ran slower than the timed one)"
               if busy_ms > 1.05 * step_ms else "")
    return (f"{step_ms:.1f} ms/step: matmul + attention ops {mm_ms:.1f} ms at {rate / 1e12:.3g} TFLOP/s"
            f"{vs_peak}; other ops {busy_ms - mm_ms:.1f} ms ({top}){unknown}; summed op time {busy_ms:.1f} ms "
            f"= {busy_ms / step_ms:.0%} of the step{overlap}")
