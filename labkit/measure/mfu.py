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

from labkit.measure.bench import check_number
from labkit.measure.flops import get_variant
from labkit.runtime import hardware

PEAK_KINDS = ("spec", "measured", "explicit")
# MFU > 1 claims more FLOP/s than the peak. mfu() / hfu() still return it (Lab 02 shows what the no-sync timing
# mistake claims: 160-430% in its runs) and say so when printed; mfu_both(), which reports a measurement, refuses it.
_IMPOSSIBLE = ("check units (step_time_s is seconds per step, not ms; the FLOPs are per step, not per run) and that "
               "the timer waited for the device (block_until_ready / torch_sync)")


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
        object.__setattr__(self, "flops", check_number("peak flops", self.flops, "a peak is in FLOP/s (not TFLOP/s), "
                                                       "e.g. hardware.peak_flops(chip, 'bf16')"))

    def label(self) -> str:
        """E.g. "measured bf16 matmul peak 0.09 TFLOP/s (jax ...)" (Lab 02)."""
        what = {"spec": "spec", "measured": "measured", "explicit": "given"}[self.kind]
        how = f" ({self.how})" if self.how else ""
        return f"{what} {self.dtype} matmul peak {self.flops / 1e12:.3g} TFLOP/s on {self.chip}{how}"


def spec_peak(chip: str, dtype: str) -> Peak:
    """The vendor's dense peak for dtype on chip; UnknownChipError naming peak_tflops= if unknown (Lab 02)."""
    spec = hardware.lookup(chip)
    if spec is None:  # has no spec peak: suggest the table's close names, then the other two kinds of peak
        raise hardware.unknown_chip(chip, f"pass the peak yourself, e.g. mfu(..., peak_tflops=...) in TFLOP/s for "
                                          f"{dtype}, or a measured one (mfu_both(..., measured=measure_peak(...)): "
                                          "the best large matmul on this device)")
    return Peak(hardware.peak_flops(chip, dtype), "spec", dtype, chip, f"datasheet, {spec.name}")


def explicit_peak(peak_tflops: float, dtype: str, chip: str = "unknown chip") -> Peak:
    """A peak you supply in TFLOP/s (Lab 02)."""
    return Peak(hardware.peak_flops(chip, dtype, peak_tflops=peak_tflops), "explicit", dtype, chip)


def measured_peak(flops_per_s: float, dtype: str, chip: str, how: str = "") -> Peak:
    """A peak you measured (best large matmul, Lab 00's method) in FLOP/s (Lab 02)."""
    return Peak(flops_per_s, "measured", dtype, chip, how)


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
    spread: float | None = None  # IQR/median of the timed repeats behind step_time_s; None: not given

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

    def _numerator(self) -> str:
        # HFU's numerator is what the chip did (recomputation included), only counted in the variant's convention
        return f"{self.variant} FLOPs" if self.kind == "MFU" else f"hardware FLOPs, {self.variant} convention"

    def __str__(self) -> str:
        rate = f", {self.tokens_per_s:,.0f} tokens/s" if self.tokens else ""
        return (f"{self.kind} {self.value:.1%} ({self.step_time_s * 1e3:.3g} ms/step{rate}) = "
                f"{self.achieved_flops / 1e12:.3g} TFLOP/s ({self._numerator()}) / {self.peak.label()}"
                + (f" -- impossible: {_IMPOSSIBLE}" if self.value > 1 else ""))


def _util(kind: str, flops: float, step_time_s: float, peak: Peak | None, chip: str | None,
          dtype: str | None, peak_tflops: float | None, measured_flops: float | None,
          variant: str, tokens: int = 0) -> Utilization:
    flops = check_number("FLOPs per step", flops, "count them with labkit.measure.flops.flops_per_step")
    step_time_s = check_number("step_time_s", step_time_s, "seconds per step (not ms), e.g. StepTime.step_s")
    tokens = check_number("tokens", tokens, "tokens per step, batch x seq; 0: not given", count=True, zero_ok=True)
    variant = get_variant(variant).name  # an unknown variant lists the known ones
    if isinstance(peak, str):  # mfu(flops, t, "NVIDIA H100 SXM"): the chip landed in the peak's place
        raise TypeError(f"peak must be a Peak, got the str {peak!r}; to name a chip use chip={peak!r}, dtype=... "
                        "(keywords), e.g. mfu(flops, step_s, chip=rt.chip, dtype='bf16')")
    given = {k: v for k, v in (("chip", chip), ("dtype", dtype), ("peak_tflops", peak_tflops),
                                ("measured_flops", measured_flops)) if v is not None}
    if peak is not None and given:  # they would be ignored: the Peak already names its chip, dtype and figure
        raise ValueError(f"pass either peak= ({getattr(peak, 'dtype', '?')} on {getattr(peak, 'chip', '?')}) or "
                         f"{', '.join(f'{k}=' for k in given)}, not both: {given}")
    if peak is None:
        if chip is None or dtype is None:
            raise ValueError("pass peak=Peak(...) or chip= and dtype= (and optionally peak_tflops=)")
        peak = resolve_peak(chip, dtype, peak_tflops, measured_flops)
    if not isinstance(peak, Peak):
        raise TypeError(f"peak must be a Peak (spec_peak, measured_peak or explicit_peak), got {peak!r}; a bare "
                        "figure goes in peak_tflops= (TFLOP/s) or measured_flops= (FLOP/s)")
    return Utilization(flops / (step_time_s * peak.flops), flops, step_time_s, peak, kind, variant, tokens)


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
    """MFU against the spec peak (when the chip is known) and the measured peak (when given); > 1 refused (Lab 02)."""
    spec = hardware.lookup(chip)
    peaks = [spec_peak(chip, dtype)] if spec is not None and spec.peak(dtype) else []
    peaks += [] if measured is None else [measured]
    if not peaks:
        spec_peak(chip, dtype)  # raises: the close names of an unknown chip, or the dtypes a known chip has
    out = [mfu(model_flops_per_step, step_time_s, p, variant=variant, tokens=tokens) for p in peaks]
    for u in out:  # a reported measurement: more FLOP/s than a peak is a mistake, never a result
        if u.value > 1:
            raise ValueError(f"MFU {u.value:.3g} > 1: {u.achieved_flops:.3g} FLOP/s achieved, more than the "
                             f"{u.peak.label()} ({u.peak.flops:.3g} FLOP/s): {_IMPOSSIBLE}")
    return out
