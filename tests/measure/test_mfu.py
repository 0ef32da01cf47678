"""labkit.measure.mfu: closed-form MFU/HFU, and every result names its peak, dtype and chip (Lab 02)."""

from __future__ import annotations

import pytest

from labkit.runtime import hardware
from labkit.measure import mfu

H100 = "NVIDIA H100 80GB HBM3"  # as jax/torch report an H100 SXM


def test_closed_form_with_an_explicit_peak() -> None:
    u = mfu.mfu(4e14, 2.0, chip="my chip", dtype="bf16", peak_tflops=400)
    assert u.value == pytest.approx(0.5)  # 4e14 FLOPs / (2 s x 4e14 FLOP/s)
    assert (u.peak_kind, u.peak_flops, u.dtype, u.chip, u.kind) == ("explicit", 4e14, "bf16", "my chip", "MFU")
    assert u.achieved_flops == pytest.approx(2e14)
    assert "MFU 50.0% (2e+03 ms/step)" in str(u) and "given bf16 matmul peak 400 TFLOP/s" in str(u)


def test_step_time_and_tokens_per_second_beside_every_mfu() -> None:
    u = mfu.mfu(4e14, 0.5, chip=H100, dtype="bf16", tokens=16 * 1024)
    assert u.tokens_per_s == pytest.approx(32768.0)  # 16 x 1024 tokens / 0.5 s
    assert str(u).startswith("MFU 80.9% (500 ms/step, 32,768 tokens/s) = ")
    assert mfu.mfu(4e14, 0.5, chip=H100, dtype="bf16").tokens_per_s is None
    (spec,) = mfu.mfu_both(4e14, 0.5, H100, "bf16", tokens=8)
    assert spec.tokens == 8
    with pytest.raises(ValueError, match="tokens"):
        mfu.mfu(4e14, 0.5, chip=H100, dtype="bf16", tokens=-1)


def test_spec_peak_comes_from_the_hardware_table() -> None:
    u = mfu.mfu(989e12 * 0.25, 0.5, chip=H100, dtype="bf16")
    assert u.peak_kind == "spec" and u.peak_flops == 989e12 and u.value == pytest.approx(0.5)
    assert "spec bf16 matmul peak 989 TFLOP/s" in str(u) and "NVIDIA H100 SXM" in str(u)
    fp32 = mfu.mfu(67e12, 1.0, chip=H100, dtype="fp32")
    assert fp32.value == pytest.approx(1.0) and fp32.dtype == "fp32"


def test_measured_peak_is_named_as_measured() -> None:
    p = mfu.measured_peak(9e10, "bf16", "Intel Xeon", "jax matmul 512x512x512")
    u = mfu.mfu(9e9, 1.0, p)
    assert u.value == pytest.approx(0.1) and u.peak_kind == "measured"
    assert p.label() == "measured bf16 matmul peak 0.09 TFLOP/s on Intel Xeon (jax matmul 512x512x512)"
    assert mfu.mfu(9e9, 1.0, chip="x", dtype="bf16", measured_flops=9e10).peak_kind == "measured"


def test_unknown_chip_without_a_peak_says_pass_peak_tflops() -> None:
    with pytest.raises(hardware.UnknownChipError, match=r"peak_tflops=\.\.\."):
        mfu.mfu(1e12, 1.0, chip="Mystery Accelerator 9000", dtype="bf16")
    with pytest.raises(hardware.UnknownChipError, match="peak_tflops="):
        mfu.mfu_both(1e12, 1.0, "Mystery Accelerator 9000", "bf16")
    with pytest.raises(hardware.UnsupportedDtypeError, match="peak_tflops"):  # known chip, no bf16 (Turing)
        mfu.mfu(1e12, 1.0, chip="Tesla T4", dtype="bf16")


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="positive"):
        mfu.mfu(1e12, 0.0, chip=H100, dtype="bf16")
    with pytest.raises(ValueError, match="positive"):
        mfu.mfu(-1.0, 1.0, chip=H100, dtype="bf16")
    with pytest.raises(ValueError, match="not both"):
        mfu.resolve_peak(H100, "bf16", peak_tflops=100, measured_flops=1e14)
    with pytest.raises(ValueError, match="chip= and dtype="):
        mfu.mfu(1e12, 1.0)
    with pytest.raises(ValueError, match="peak kind"):
        mfu.Peak(1e12, "guessed", "bf16", "x")
    with pytest.raises(ValueError, match="positive"):
        mfu.Peak(0.0, "spec", "bf16", "x")


def test_hfu_counts_recomputation_mfu_does_not() -> None:
    model, hardware_flops = 6e14, 8e14  # full remat: 8N + 16LHQT vs 6N + 12LHQT
    m = mfu.mfu(model, 2.0, chip=H100, dtype="bf16")
    h = mfu.hfu(hardware_flops, 2.0, chip=H100, dtype="bf16")
    assert h.kind == "HFU" and str(h).startswith("HFU")
    assert "(hardware FLOPs, palm convention)" in str(h) and "(palm FLOPs)" in str(m)  # what each numerator counts
    assert h.value / m.value == pytest.approx(4 / 3)


def test_mfu_both_reports_spec_and_measured() -> None:
    measured = mfu.measured_peak(800e12, "bf16", H100, "jax matmul 8192x8192x8192")
    spec, meas = mfu.mfu_both(400e12, 1.0, H100, "bf16", measured=measured)
    assert (spec.peak_kind, meas.peak_kind) == ("spec", "measured")
    assert spec.value == pytest.approx(400 / 989) and meas.value == pytest.approx(0.5)
    (only,) = mfu.mfu_both(1e9, 1.0, "Intel Xeon", "bf16", measured=mfu.measured_peak(1e10, "bf16", "Intel Xeon"))
    assert only.peak_kind == "measured"  # a CPU has no spec row


def test_measure_peak_times_matmuls() -> None:
    p = mfu.measure_peak("jax", "fp32", "cpu", sizes=(64, 128), repeats=2)
    assert p.kind == "measured" and p.flops > 0 and p.how.startswith("jax matmul")


def test_spec_peak_suggests_the_table_names_and_mfu_both_names_the_dtype() -> None:
    # Issue #7: "H100" was "not in labkit.runtime.hardware"; a known chip with no fp16 peak was "not in the table".
    with pytest.raises(hardware.UnknownChipError, match="ambiguous: did you mean 'NVIDIA H100 SXM'.*peak_tflops="):
        mfu.spec_peak("H100", "bf16")
    with pytest.raises(hardware.UnknownChipError, match="'NVIDIA H100 NVL'.*measured="):
        mfu.mfu_both(1e12, 1.0, "H100", "bf16")
    with pytest.raises(hardware.UnsupportedDtypeError, match="TPU v5e has no native fp16 matrix path; it has bf16, int8"):
        mfu.mfu_both(1e12, 0.1, "TPU v5e", "fp16")


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("kwargs, error, match", [
    ({"variant": "bogus"}, ValueError, "unknown FLOPs variant 'bogus'; known variants: palm"),
    ({"flops": INF}, ValueError, "FLOPs per step > 0.*got inf"),
    ({"step": INF}, ValueError, "step_time_s > 0.*got inf"),
    ({"step": "0.1"}, TypeError, "step_time_s > 0.*got '0.1'"),
    ({"tokens": NAN}, TypeError, "tokens >= 0 \\(a whole number\\), got nan"),
    ({"tokens": 2.7}, TypeError, "tokens >= 0 \\(a whole number\\), got 2.7"),
    ({"peak_tflops": INF}, ValueError, "peak_tflops must be a finite TFLOP/s figure > 0.*got inf"),
    ({"measured_flops": INF}, ValueError, "peak flops > 0.*got inf"),
])
def test_mfu_refuses_impossible_inputs(kwargs: dict, error: type, match: str) -> None:
    # Issue #6: each of these returned an MFU (inf%, 0.0%, a 'bogus FLOPs' label) or a raw error.
    flops, step = kwargs.pop("flops", 1e12), kwargs.pop("step", 0.1)
    for f in (mfu.mfu, mfu.hfu):
        with pytest.raises(error, match=match):
            f(flops, step, chip=H100, dtype="bf16", **kwargs)


def test_a_chip_name_in_the_peak_place_says_use_chip_and_dtype() -> None:
    with pytest.raises(TypeError, match="peak must be a Peak, got the str 'NVIDIA H100 SXM'; to name a chip use chip="):
        mfu.mfu(1e12, 0.1, "NVIDIA H100 SXM")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="peak_tflops="):
        mfu.mfu(1e12, 0.1, 989.0)  # type: ignore[arg-type]


def test_more_flops_per_second_than_the_peak_is_flagged_and_refused_by_mfu_both() -> None:
    # Issue #6: 1e18 FLOPs in 1 ms gave "MFU 101112234.6%". mfu() still returns it -- Lab 02 prints what the
    # no-sync timing mistake would claim (160-430%) -- but says it is impossible; mfu_both refuses it.
    u = mfu.mfu(1e18, 1e-3, chip=H100, dtype="bf16")
    assert u.value > 1 and "impossible: check units (step_time_s is seconds per step" in str(u)
    assert "impossible" not in str(mfu.mfu(4e14, 1.0, chip=H100, dtype="bf16"))
    with pytest.raises(ValueError, match=r"MFU 1\.01e\+06 > 1: 1e\+21 FLOP/s achieved, more than the spec bf16.*"
                                         r"9\.89e\+14 FLOP/s.*check units"):
        mfu.mfu_both(1e18, 1e-3, H100, "bf16")
    measured = mfu.measured_peak(1e12, "bf16", "Intel Xeon")  # a step that beats the measured peak
    with pytest.raises(ValueError, match="> 1"):
        mfu.mfu_both(2e12, 1.0, "Intel Xeon", "bf16", measured=measured)


def test_a_peak_and_chip_keywords_together_are_refused_not_ignored() -> None:
    """mfu(..., peak, chip='TPU v5e', dtype='fp32') used to divide by the H100's bf16 peak without a word."""
    h100 = mfu.spec_peak("NVIDIA H100 SXM", "bf16")
    with pytest.raises(ValueError, match=r"pass either peak= \(bf16 on NVIDIA H100 SXM\) or chip=, dtype=, not both"):
        mfu.mfu(1e12, 0.5, h100, chip="TPU v5e", dtype="fp32")
    with pytest.raises(ValueError, match="peak_tflops="):
        mfu.mfu(1e12, 0.5, h100, peak_tflops=197.0)


def test_a_peak_in_flop_per_s_where_tflop_per_s_is_asked_is_refused() -> None:
    with pytest.raises(ValueError, match=r"peak_tflops=9.89e\+14 looks like FLOP/s; it is in TFLOP/s \(e.g. 989 for"):
        mfu.mfu(1e12, 0.5, chip="x", dtype="bf16", peak_tflops=989e12)
    assert mfu.mfu(1e12, 0.5, chip="x", dtype="bf16", peak_tflops=989.0).value == pytest.approx(1e12 / (0.5 * 989e12))
