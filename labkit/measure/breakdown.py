"""Where a training step's time goes: time per op category, each GPU kernel charged to the op that launched it (Lab 02).

Matmuls (and attention, which is two matmuls) do essentially all of a GPT step's FLOPs; every
other op is time MFU does not count. To see how much, the torch profiler's record is bucketed:

- **GPU**: the profiler records kernels (device time) and CPU ops (``aten::mm``, ...) and links
  each kernel to the op that was open when it was launched (the launch's correlation id). Kernel
  names say little -- recent cuBLAS names its Hopper GEMMs ``nvjet_*`` (no "gemm" in the name),
  cuDNN its attention ``cudnn_generated_fort_native_sdpa_*``, Inductor its fusions ``triton_*`` --
  so each kernel's device time is charged by its *launcher's* name (:func:`op_category`). Only a
  kernel with no linked launcher is bucketed by its own name (:func:`kernel_category`), and the
  result says how much time that was (:attr:`OpBreakdown.by_kernel_name`).
- **CPU**: there are no kernels; each op's self CPU time (excluding its children) is charged to it.

The pure part, :func:`attribute`, takes plain (kernel, device µs, launcher) records, so it is
tested on kernel names recorded on an H100 (tests/measure/fixtures).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

MATMUL, ATTENTION = "matmul", "attention (SDPA)"
MATMUL_CATEGORIES = (MATMUL, ATTENTION)  # where a GPT step's FLOPs are: MFU counts these and nothing else
FUSED = "fused kernels (torch.compile)"
OTHER = "other (autograd, views, allocation)"
BY_LAUNCHER = "GPU kernels' device time, each charged to the op that launched it"  # OpBreakdown.source
BY_CPU_SELF_TIME = "CPU ops' self time (a CPU runs no kernels)"

# (category, substrings of an op or kernel name), first match wins: the coarse name buckets for
# everything that is not a matmul or attention op, and the last resort for unlinked kernels.
OP_CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (MATMUL, ("aten::mm", "aten::bmm", "addmm", "baddbmm", "_mm", "gemm", "cutlass", "xmma", "matmul")),
    (ATTENTION, ("scaled_dot_product", "flash", "fmha", "attention")),
    ("loss + embedding", ("log_softmax", "nll_loss", "cross_entropy", "embedding")),
    ("LayerNorm / GELU / softmax", ("layer_norm", "layernorm", "gelu", "softmax", "tanh")),  # autograd: NativeLayerNormBackward0
    ("optimizer + grad clip", ("optimizer", "adam", "foreach")),  # before "fused": FusedAdam is the optimizer
    (FUSED, ("triton", "fused", "compiledfunction")),
    ("optimizer + grad clip", ("sqrt", "addcdiv", "addcmul", "lerp", "mul_", "add_", "div", "norm", "clamp",
                               "fill_", "zero_")),
    ("copies / dtype casts", ("copy_", "to_copy")),
)

# Launcher ops (as the profiler names them) whose kernels are matmuls or attention: exact names,
# so an elementwise op whose name happens to contain "mm" or "attention" is not mistaken for one.
MATMUL_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::matmul",
                        "aten::linear", "aten::_scaled_mm", "aten::_int_mm", "aten::mv", "aten::addmv", "aten::dot"})
ATTENTION_OP_PREFIXES = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_",
                         "aten::_flash_attention_", "aten::_efficient_attention_", "aten::_cudnn_attention_")
# Kernel-name families of the GEMM and attention libraries, for kernels the profiler linked to no
# op. Attention first: flash and memory-efficient kernels carry "cutlass" in their template names.
ATTENTION_KERNELS = ("flash", "fmha", "sdpa", "attention")
GEMM_KERNELS = ("nvjet", "gemm", "xmma", "cutlass", "cublas", "s16816", "s1688")
# Lines libkineto (the torch profiler's C++ core) writes straight to file descriptor 2 at every profile
# ("USDT:... SyncActivityProfilerHandler.cpp:52] profiler_start"): noise, not a warning. KINETO_LOG_LEVEL
# cannot drop them alone -- their level sits above ERROR, so the setting that hides them hides errors too.
KINETO_NOISE = ("USDT:", "STAGE:")


def categorize_op(name: str) -> str:
    """The OP_CATEGORIES name bucket of a profiler event name, "other" if none matches (Lab 02)."""
    low = name.lower()
    for cat, keys in OP_CATEGORIES:
        if any(k in low for k in keys):
            return cat
    return OTHER


def op_category(op: str) -> str:
    """Category of an op by its name: exact matmul/attention ops, Inductor kernels, then name buckets (Lab 02)."""
    if op in MATMUL_OPS:
        return MATMUL
    if op.startswith(ATTENTION_OP_PREFIXES):
        return ATTENTION
    if op.startswith("triton_"):  # Inductor records each of its kernels as an op of the same name
        if op.startswith("triton_tem_"):  # a template kernel: Inductor's own GEMM or flex attention
            return ATTENTION if "attention" in op else MATMUL
        return FUSED  # a fusion, named after what it fuses ("..._scaled_dot_product_..._pow_rsqrt" included)
    return categorize_op(op)


def kernel_category(kernel: str) -> str:
    """Category of a kernel no op launched, from its own name: GEMM/attention library families first (Lab 02)."""
    low = kernel.lower()
    if low.startswith("triton_"):
        return op_category(low)
    if any(k in low for k in ATTENTION_KERNELS):
        return ATTENTION
    if any(k in low for k in GEMM_KERNELS):
        return MATMUL
    return categorize_op(kernel)


@dataclass(frozen=True)
class KernelRecord:
    """One GPU kernel's device time and the op that launched it, as the profiler links them (Lab 02)."""

    kernel: str  # e.g. "nvjet_sm90_tst_96x128_64x6_2x1_v_bz_NNN"
    device_us: float  # device time, microseconds (all calls in the profiled steps)
    launcher: str | None  # innermost op open at launch, e.g. "aten::mm"; None when none was linked


@dataclass(frozen=True)
class OpBreakdown:
    """Time per op category of a profiled step, and how it was charged (Lab 02)."""

    rows: tuple[dict[str, Any], ...]  # {"category", "ms per step", "share" (fraction of the total)}, largest first
    source: str  # what time was charged to what: BY_LAUNCHER or BY_CPU_SELF_TIME
    by_kernel_name: float = 0.0  # fraction of the time from kernels with no linked launcher (name buckets)

    @property
    def matmul_share(self) -> float:
        """Fraction of the time in matmul + attention (Lab 02)."""
        return sum(r["share"] for r in self.rows if r["category"] in MATMUL_CATEGORIES)

    @property
    def ms_per_step(self) -> float:
        """Total charged time per step, ms (Lab 02)."""
        return sum(r["ms per step"] for r in self.rows)


def _rows(totals_us: dict[str, float], steps: int) -> tuple[dict[str, Any], ...]:
    total = sum(totals_us.values())
    if not total > 0:
        raise ValueError("the profile holds no time to break down (no ops or kernels with positive duration)")
    rows = [{"category": c, "ms per step": us / 1e3 / steps, "share": us / total} for c, us in totals_us.items()]
    return tuple(sorted(rows, key=lambda r: -r["ms per step"]))


def attribute(records: Iterable[KernelRecord | tuple[str, float, str | None]], steps: int = 1) -> OpBreakdown:
    """Charge each kernel's device time to its launcher's category, by kernel name when it has none (Lab 02)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    totals: dict[str, float] = {}
    unlinked = 0.0  # µs charged from kernel names
    for r in records:
        kernel, us, launcher = (r.kernel, r.device_us, r.launcher) if isinstance(r, KernelRecord) else r
        if us < 0:
            raise ValueError(f"negative device time {us} µs for kernel {kernel!r}")
        cat = op_category(launcher) if launcher else kernel_category(kernel)
        unlinked += 0.0 if launcher else us
        totals[cat] = totals.get(cat, 0.0) + us
    rows = _rows(totals, steps)
    return OpBreakdown(rows, BY_LAUNCHER, unlinked / sum(totals.values()))


def kernel_records(events: Iterable[Any]) -> list[KernelRecord]:
    """Every device kernel of a torch profile (``prof.events()``) with the CPU op that launched it (Lab 02).

    torch's parser links each kernel to the op open at its launch (the launch's correlation id) and
    appends it to that op's ``kernels``, in every torch version. The link on the kernel's own event
    (``linked_correlation_id``) is newer (2026-03, pytorch#177662): torch 2.11's events lack it, and
    reading it with a default of 0 once left every kernel of an H100 profile unlinked. So the ops'
    lists are read; a device event no op claimed (a memset, a copy) is charged by its own name.
    """
    from torch.autograd import DeviceType

    events = list(events)
    out, linked = [], Counter()
    for e in events:
        if e.device_type == DeviceType.CPU and not e.is_async:
            for k in getattr(e, "kernels", ()):  # Kernel(name, device, duration), duration in µs
                out.append(KernelRecord(k.name, k.duration, e.name))
                linked[(k.name, k.duration)] += 1
    for e in events:  # CPU events are ops and runtime calls (cudaLaunchKernel, cuLaunchKernelEx): host time
        if e.device_type == DeviceType.CPU:
            continue
        key = (e.name, e.time_range.end - e.time_range.start)
        if linked[key]:
            linked[key] -= 1
        else:
            out.append(KernelRecord(e.name, key[1], None))
    return out


def cpu_self_time(events: Iterable[Any], steps: int = 1) -> OpBreakdown:
    """Charge each op's self CPU time (its children excluded, so nothing twice) to its category (Lab 02)."""
    totals: dict[str, float] = {}
    for e in events:  # prof.key_averages(): one row per op name, µs summed over calls
        if e.self_cpu_time_total > 0:
            cat = op_category(e.key)
            totals[cat] = totals.get(cat, 0.0) + e.self_cpu_time_total
    return OpBreakdown(_rows(totals, steps), BY_CPU_SELF_TIME)


@contextlib.contextmanager
def drop_stderr_lines(prefixes: tuple[str, ...]) -> Iterator[None]:
    """Hold back what C code writes to fd 2 meanwhile; pass on every line that starts with none of prefixes (Lab 02)."""
    try:
        sys.stderr.flush()  # Python's own buffered stderr goes out first, in order
    except (AttributeError, ValueError):
        pass
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 (a detached process): nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)  # restored even if the body raised
            os.close(saved)
            held.seek(0)
            lines = held.read().splitlines(keepends=True)
            kept = [ln for ln in lines if not ln.decode(errors="replace").startswith(prefixes)]
            if kept:
                os.write(2, b"".join(kept))


class NoKernelRecords(RuntimeError):
    """A CUDA profile with CPU ops but no kernel records: launches, not device time (Lab 02).

    The torch counterpart of :class:`labkit.measure.xla_breakdown.NoDeviceEvents`.
    """


def torch_op_breakdown(step: Callable[[], Any], steps: int = 3, device: Any = "cpu") -> OpBreakdown:
    """Profile ``steps`` calls of ``step()``; time per op category per step, kernels by launcher on CUDA (Lab 02).

    On CUDA a profile without kernel records raises :class:`NoKernelRecords` (CPU self time there
    would be launch time, not device time).
    """
    from torch.profiler import ProfilerActivity, profile

    import torch

    from labkit.runtime.device import torch_sync

    cuda = torch.device(device).type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    wait = torch_sync(device)
    with drop_stderr_lines(KINETO_NOISE), profile(activities=acts) as prof:
        for _ in range(steps):
            step()
        wait()
    if not cuda:
        return cpu_self_time(prof.key_averages(), steps)
    records = kernel_records(prof.events())
    if not records:  # CPU self time here would be host launch time, not device time: say so, do not guess
        raise NoKernelRecords(
            f"the CUDA profiler recorded no kernels in {steps} steps on {device}: is CUPTI available "
            "(torch.profiler.supported_activities() must list ProfilerActivity.CUDA; CUDA torch wheels ship it "
            "as nvidia-cuda-cupti) and is no other profiler (JAX's, Nsight Systems) holding it? Does step() run "
            "on the GPU (model and inputs moved there)? Without kernels the profile holds only host launch "
            "time, which is not device time.")
    return attribute(records, steps)


def matmul_rate(flops_per_step: float, breakdown: Any) -> float:
    """FLOP/s the matmul + attention ops ran at in their own time: all of a GPT step's FLOPs (Lab 02).

    `breakdown`: torch's OpBreakdown or JAX's xla_breakdown.XlaBreakdown (both say ``matmul_share``
    and ``ms_per_step``).

    It cannot exceed the chip's peak; a breakdown that misses matmul time (bucketing nvjet GEMMs
    as "other") shows up as an impossible rate.
    """
    mm_s = breakdown.matmul_share * breakdown.ms_per_step / 1e3  # seconds per step in matmul + attention
    if not mm_s > 0:
        raise ValueError("the breakdown charged no time to matmul or attention")
    return flops_per_step / mm_s



def against_step(b: OpBreakdown, step_ms: float) -> str:
    """One line: the profile's summed op time against the timed step, and what the difference means (Lab 02)."""
    if not step_ms > 0:
        raise ValueError(f"step_ms must be the timed step in ms (> 0), got {step_ms!r}")
    busy = b.ms_per_step
    if b.source == BY_LAUNCHER:  # device time: what the profile does not hold, the GPU spent idle
        return (f"kernels ran {busy:.3g} ms of the {step_ms:.3g} ms step: the GPU idled "
                f"{max(1 - busy / step_ms, 0):.0%} of it (launches, host work, syncs)")
    said = f"the ops' self times sum to {busy:.3g} ms per step against the timed {step_ms:.3g} ms"
    if busy > 1.05 * step_ms:  # one torch thread cannot run ops for longer than the step
        return (said + ": more than the step, because the profiler records every op and its own cost per op "
                "lands in their times; read the shares, not the ms")
    return said
