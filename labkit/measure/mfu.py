"""Model FLOPs utilization: useful FLOPs per second over a *named* peak (Lab 02).

    MFU = model FLOPs per step / (step time × peak FLOP/s)

A utilization is printed with the step time and tokens/s it came from (:class:`Utilization`), so
two MFUs against different peaks (fp32's and bf16's) are never read as two speeds.

The numerator is the model's FLOPs (labkit.measure.flops, a named variant), not what the chip did:
recomputed forward passes (rematerialization) count in HFU, "hardware FLOPs utilization",
never in MFU. The denominator must say which peak it is:

- ``spec``: the vendor's dense peak for the dtype the matmuls run in (labkit.runtime.hardware);
- ``measured``: the best large matmul this device reaches, timed as Lab 00 does
  (labkit.measure.roofline: each size at its median repeat, ``labkit.measure.bench.TIMING_RULE``)
  — the only peak a CPU has, and the fairer bar on any chip;
- ``explicit``: a figure you pass as ``peak_tflops=...`` (a chip the table doesn't know).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

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
    """Time square matmuls of each size (median repeat each) and keep the best FLOP/s: the achievable peak (Lab 02)."""
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
    tokens: int = 0  # tokens per step (batch × seq); 0: not given

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

    @property
    def tokens_per_s(self) -> float | None:
        """Tokens per second at this step time; None if the tokens per step were not given (Lab 02)."""
        return self.tokens / self.step_time_s if self.tokens else None

    def __str__(self) -> str:
        rate = f", {self.tokens_per_s:,.0f} tokens/s" if self.tokens else ""
        return (f"{self.kind} {self.value:.1%} ({self.step_time_s * 1e3:.3g} ms/step{rate}) = "
                f"{self.achieved_flops / 1e12:.3g} TFLOP/s ({self.variant} FLOPs) / {self.peak.label()}")


def _util(kind: str, flops: float, step_time_s: float, peak: Peak | None, chip: str | None,
          dtype: str | None, peak_tflops: float | None, measured_flops: float | None,
          variant: str, tokens: int = 0) -> Utilization:
    if not flops > 0 or not step_time_s > 0:
        raise ValueError(f"need positive FLOPs per step and step time (s); got {flops!r}, {step_time_s!r}")
    if peak is None:
        if chip is None or dtype is None:
            raise ValueError("pass peak=Peak(...) or chip= and dtype= (and optionally peak_tflops=)")
        peak = resolve_peak(chip, dtype, peak_tflops, measured_flops)
    if tokens < 0:
        raise ValueError(f"tokens per step must be >= 0 (0: not given), got {tokens!r}")
    return Utilization(flops / (step_time_s * peak.flops), float(flops), float(step_time_s), peak, kind, variant,
                       int(tokens))


def mfu(model_flops_per_step: float, step_time_s: float, peak: Peak | None = None, *,
        chip: str | None = None, dtype: str | None = None, peak_tflops: float | None = None,
        measured_flops: float | None = None, variant: str = "palm", tokens: int = 0) -> Utilization:
    """MFU = model FLOPs per step / (step time × peak); the result names its peak (Lab 02)."""
    return _util("MFU", model_flops_per_step, step_time_s, peak, chip, dtype, peak_tflops,
                 measured_flops, variant, tokens)


def hfu(hardware_flops_per_step: float, step_time_s: float, peak: Peak | None = None, *,
        chip: str | None = None, dtype: str | None = None, peak_tflops: float | None = None,
        measured_flops: float | None = None, variant: str = "palm", tokens: int = 0) -> Utilization:
    """HFU: like MFU but counting recomputed (rematerialized) FLOPs too; HFU >= MFU (Lab 02)."""
    return _util("HFU", hardware_flops_per_step, step_time_s, peak, chip, dtype, peak_tflops,
                 measured_flops, variant, tokens)


def mfu_both(model_flops_per_step: float, step_time_s: float, chip: str, dtype: str,
             measured: Peak | None = None, variant: str = "palm", tokens: int = 0) -> list[Utilization]:
    """MFU against the spec peak (when the chip is known) and the measured peak (when given) (Lab 02)."""
    out = []
    if hardware.lookup(chip) is not None and hardware.lookup(chip).peak(dtype):
        out.append(mfu(model_flops_per_step, step_time_s, spec_peak(chip, dtype), variant=variant, tokens=tokens))
    if measured is not None:
        out.append(mfu(model_flops_per_step, step_time_s, measured, variant=variant, tokens=tokens))
    if not out:
        raise hardware.UnknownChipError(
            f"no peak for {chip!r} ({dtype}): not in labkit.runtime.hardware and no measured peak given; "
            f"pass measured=labkit.measure.mfu.measure_peak(...) or use mfu(..., peak_tflops=...)")
    return out
