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
