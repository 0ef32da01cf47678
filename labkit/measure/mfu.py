"""Model FLOPs utilization: useful FLOPs per second over a *named* peak (Lab 02).

    MFU = model FLOPs per step / (step time × peak FLOP/s)

The numerator is the model's FLOPs (labkit.measure.flops, a named variant), not what the chip did:
recomputed forward passes (rematerialization) count in HFU, "hardware FLOPs utilization",
never in MFU. The denominator must say which peak it is:

- ``spec``: the vendor's dense peak for the dtype the matmuls run in (labkit.runtime.hardware);
- ``measured``: the best large matmul this device reaches, timed as Lab 00 does
  (labkit.measure.roofline) — the only peak a CPU has, and the fairer bar on any chip;
- ``explicit``: a figure you pass as ``peak_tflops=...`` (a chip the table doesn't know).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from labkit.runtime import hardware

PEAK_KINDS = ("spec", "measured", "explicit")


@dataclass(frozen=True)
class Peak:
    """A peak FLOP/s figure and where it came from (Lab 02)."""

    flops: float  # FLOP/s
    kind: str  # "spec" | "measured" | "explicit"
    dtype: str  # the matmul dtype the peak is for, e.g. "bf16"
    chip: str  # as the runtime reports it
    how: str = ""  # e.g. "jax matmul 1024x1024x1024" for a measured peak

    def __post_init__(self) -> None:
        if self.kind not in PEAK_KINDS:
            raise ValueError(f"peak kind must be one of {PEAK_KINDS}, got {self.kind!r}")
        if not self.flops > 0:
            raise ValueError(f"a peak must be a positive FLOP/s figure, got {self.flops!r}")

    def label(self) -> str:
        """E.g. "measured bf16 matmul peak 0.09 TFLOP/s (jax ...)" (Lab 02)."""
        what = {"spec": "spec", "measured": "measured", "explicit": "given"}[self.kind]
        how = f" ({self.how})" if self.how else ""
        return f"{what} {self.dtype} matmul peak {self.flops / 1e12:.3g} TFLOP/s on {self.chip}{how}"


def spec_peak(chip: str, dtype: str) -> Peak:
    """The vendor's dense peak for dtype on chip; UnknownChipError naming peak_tflops= if unknown (Lab 02)."""
    try:
        flops = hardware.peak_flops(chip, dtype)
    except hardware.UnknownChipError:
        raise hardware.UnknownChipError(
            f"no spec peak for chip {chip!r}: it is not in labkit.runtime.hardware. Pass the peak yourself, "
            f"e.g. mfu(..., peak_tflops=...) in TFLOP/s for {dtype}, or use a measured peak "
            f"(labkit.measure.mfu.measure_peak, the best large matmul on this device).") from None
    spec = hardware.lookup(chip)
    return Peak(flops, "spec", dtype, chip, f"datasheet, {spec.name}" if spec else "")


def explicit_peak(peak_tflops: float, dtype: str, chip: str = "unknown chip") -> Peak:
    """A peak you supply in TFLOP/s (Lab 02)."""
    return Peak(hardware.peak_flops(chip, dtype, peak_tflops=peak_tflops), "explicit", dtype, chip)


def measured_peak(flops_per_s: float, dtype: str, chip: str, how: str = "") -> Peak:
    """A peak you measured (best large matmul, Lab 00's method) in FLOP/s (Lab 02)."""
    return Peak(float(flops_per_s), "measured", dtype, chip, how)


def measure_peak(framework: str, dtype: str, chip: str, sizes: Sequence[int] = (1024, 2048, 4096),
                 repeats: int = 5, device: Any = "cpu") -> Peak:
    """Time square matmuls of each size and keep the best FLOP/s: the achievable peak (Lab 02)."""
    from labkit.measure import roofline

    best = roofline.best(roofline.matmul_sweep(framework, sizes, dtype, repeats, device))
    return measured_peak(best.flops_per_s, dtype, chip, f"{framework} {best.name}")


def resolve_peak(chip: str, dtype: str, peak_tflops: float | None = None,
                 measured_flops: float | None = None) -> Peak:
    """explicit if peak_tflops, measured if measured_flops, else the spec peak (Lab 02)."""
    if peak_tflops is not None and measured_flops is not None:
        raise ValueError("give peak_tflops (explicit) or measured_flops (measured), not both")
    if peak_tflops is not None:
        return explicit_peak(peak_tflops, dtype, chip)
    if measured_flops is not None:
        return measured_peak(measured_flops, dtype, chip)
    return spec_peak(chip, dtype)


@dataclass(frozen=True)
class Utilization:
    """An MFU (or HFU) value with the peak, dtype and chip it is relative to (Lab 02)."""

    value: float  # fraction of the peak, 0..1 for a sane measurement
    flops_per_step: float  # numerator FLOPs (model FLOPs for MFU, hardware FLOPs for HFU)
    step_time_s: float  # seconds per step
    peak: Peak
    kind: str = "MFU"  # "MFU" | "HFU"
    variant: str = "palm"  # labkit.measure.flops variant of the numerator

    @property
    def peak_flops(self) -> float:
        """The denominator, FLOP/s (Lab 02)."""
        return self.peak.flops

    @property
    def peak_kind(self) -> str:
        """"spec", "measured" or "explicit" (Lab 02)."""
        return self.peak.kind

    @property
    def dtype(self) -> str:
        """The dtype of the peak (Lab 02)."""
        return self.peak.dtype

    @property
    def chip(self) -> str:
        """The chip the peak belongs to (Lab 02)."""
        return self.peak.chip

    @property
    def achieved_flops(self) -> float:
        """FLOP/s the step achieved: flops_per_step / step_time_s (Lab 02)."""
        return self.flops_per_step / self.step_time_s

    def __str__(self) -> str:
        return (f"{self.kind} {self.value:.1%} = {self.achieved_flops / 1e12:.3g} TFLOP/s "
                f"({self.variant} FLOPs) / {self.peak.label()}")


def _util(kind: str, flops: float, step_time_s: float, peak: Peak | None, chip: str | None,
          dtype: str | None, peak_tflops: float | None, measured_flops: float | None,
          variant: str) -> Utilization:
    if not flops > 0 or not step_time_s > 0:
        raise ValueError(f"need positive FLOPs per step and step time (s); got {flops!r}, {step_time_s!r}")
    if peak is None:
        if chip is None or dtype is None:
            raise ValueError("pass peak=Peak(...) or chip= and dtype= (and optionally peak_tflops=)")
        peak = resolve_peak(chip, dtype, peak_tflops, measured_flops)
    return Utilization(flops / (step_time_s * peak.flops), float(flops), float(step_time_s), peak, kind, variant)


def mfu(model_flops_per_step: float, step_time_s: float, peak: Peak | None = None, *,
        chip: str | None = None, dtype: str | None = None, peak_tflops: float | None = None,
        measured_flops: float | None = None, variant: str = "palm") -> Utilization:
    """MFU = model FLOPs per step / (step time × peak); the result names its peak (Lab 02)."""
    return _util("MFU", model_flops_per_step, step_time_s, peak, chip, dtype, peak_tflops,
                 measured_flops, variant)


def hfu(hardware_flops_per_step: float, step_time_s: float, peak: Peak | None = None, *,
        chip: str | None = None, dtype: str | None = None, peak_tflops: float | None = None,
        measured_flops: float | None = None, variant: str = "palm") -> Utilization:
    """HFU: like MFU but counting recomputed (rematerialized) FLOPs too; HFU >= MFU (Lab 02)."""
    return _util("HFU", hardware_flops_per_step, step_time_s, peak, chip, dtype, peak_tflops,
                 measured_flops, variant)


def mfu_both(model_flops_per_step: float, step_time_s: float, chip: str, dtype: str,
             measured: Peak | None = None, variant: str = "palm") -> list[Utilization]:
    """MFU against the spec peak (when the chip is known) and the measured peak (when given) (Lab 02)."""
    out = []
    if hardware.lookup(chip) is not None and hardware.lookup(chip).peak(dtype):
        out.append(mfu(model_flops_per_step, step_time_s, spec_peak(chip, dtype), variant=variant))
    if measured is not None:
        out.append(mfu(model_flops_per_step, step_time_s, measured, variant=variant))
    if not out:
        raise hardware.UnknownChipError(
            f"no peak for {chip!r} ({dtype}): not in labkit.runtime.hardware and no measured peak given; "
            f"pass measured=labkit.measure.mfu.measure_peak(...) or use mfu(..., peak_tflops=...)")
    return out


# --------------------------------------------------------------------------------------
# Where the time goes: everything that is not a matmul is MFU lost
# --------------------------------------------------------------------------------------

# (category, substrings of profiler event names), first match wins; CPU aten ops and CUDA kernels.
OP_CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("matmul", ("aten::mm", "aten::bmm", "addmm", "baddbmm", "_mm", "gemm", "cutlass", "xmma", "matmul")),
    ("attention (SDPA)", ("scaled_dot_product", "flash", "fmha", "attention")),
    ("loss + embedding", ("log_softmax", "nll_loss", "cross_entropy", "embedding")),
    ("LayerNorm / GELU / softmax", ("layer_norm", "gelu", "softmax", "tanh")),
    ("optimizer + grad clip", ("optimizer", "adam", "foreach")),  # before "fused": FusedAdam is the optimizer
    ("fused kernels (torch.compile)", ("triton", "fused", "compiledfunction")),
    ("optimizer + grad clip", ("sqrt", "addcdiv", "addcmul", "lerp", "mul_", "add_", "div", "norm", "clamp",
                               "fill_", "zero_")),
    ("copies / dtype casts", ("copy_", "to_copy")),
)


def categorize_op(name: str) -> str:
    """The OP_CATEGORIES bucket of a profiler event name, "other" if none matches (Lab 02)."""
    low = name.lower()
    for cat, keys in OP_CATEGORIES:
        if any(k in low for k in keys):
            return cat
    return "other (autograd, views, allocation)"


def torch_op_breakdown(step: Callable[[], Any], steps: int = 3, device: Any = "cpu") -> list[dict[str, Any]]:
    """Profile ``steps`` calls of ``step()``; self time per op category, ms per step (Lab 02).

    Self time (excluding children) so nothing is counted twice: on CUDA the kernels' device
    time, on CPU the ops' CPU time. Bucketing is by op or kernel name, so it is approximate.
    """
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    from labkit.runtime.device import torch_sync

    cuda = torch.device(device).type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    wait = torch_sync(device)
    with profile(activities=acts) as prof:
        for _ in range(steps):
            step()
        wait()
    totals: dict[str, float] = {}
    for e in prof.key_averages():
        if cuda and getattr(e, "device_type", None) != DeviceType.CUDA:
            continue  # on a GPU count the kernels themselves, not the CPU ops that launched them
        us = getattr(e, "self_device_time_total", 0.0) if cuda else e.self_cpu_time_total  # µs
        if us > 0:
            cat = categorize_op(e.key)
            totals[cat] = totals.get(cat, 0.0) + us
    total = sum(totals.values())
    rows = [{"category": c, "ms per step": us / 1e3 / steps, "share": us / total} for c, us in totals.items()]
    return sorted(rows, key=lambda r: -r["ms per step"])
