"""Tests for labkit.runtime.hardware: name lookup, units, datasheet relations, sources."""
from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest
from hypothesis import given, strategies as st

from labkit.runtime import hardware as hw
from labkit.runtime.hardware import CHIPS, DTYPES

# What torch.cuda.get_device_name / nvidia-smi / jax Device.device_kind actually report.
REPORTED = {
    "Tesla T4": "NVIDIA T4",
    "Tesla P100-PCIE-16GB": "NVIDIA P100 PCIe 16GB",
    "Tesla V100-SXM2-16GB": "NVIDIA V100 SXM2 16GB",
    "Tesla V100-SXM2-32GB": "NVIDIA V100 SXM2 32GB",
    "NVIDIA L4": "NVIDIA L4",
    "NVIDIA A100-SXM4-40GB": "NVIDIA A100 SXM 40GB",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100 SXM 80GB",
    "NVIDIA A100 80GB PCIe": "NVIDIA A100 PCIe 80GB",
    "NVIDIA A100-PCIE-40GB": "NVIDIA A100 PCIe 40GB",
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 SXM",
    "NVIDIA H100 PCIe": "NVIDIA H100 PCIe",
    "NVIDIA H100 NVL": "NVIDIA H100 NVL",
    "NVIDIA H200": "NVIDIA H200 SXM",
    "NVIDIA H200 NVL": "NVIDIA H200 NVL",
    "TPU v2": "TPU v2",
    "TPU v3": "TPU v3",
    "TPU v4": "TPU v4",
    "TPU v5 lite": "TPU v5e",
    "TPU v5e": "TPU v5e",
    "TPU v5": "TPU v5p",
    "TPU v5p": "TPU v5p",
    "TPU v6 lite": "TPU v6e",
    "TPU v6e": "TPU v6e",
}

NOT_IN_TABLE = [
    "", "   ", "cpu", "CPU", "NVIDIA A10", "NVIDIA A10G", "NVIDIA A100X", "NVIDIA A100",
    "NVIDIA A1000", "NVIDIA L40", "NVIDIA L40S", "NVIDIA GeForce RTX 4090", "Tesla T40",
    "NVIDIA GH200 480GB", "NVIDIA H100", "NVIDIA H1000", "Tesla P100-SXM2-16GB",
    "Tesla P100-PCIE-12GB", "Tesla V100-PCIE-16GB", "TPU v4 lite", "TPU v7x", "TPU7x",
    "TPU v5 lite pod", "TPU v6", "TPU", "interpret",
]


@pytest.mark.parametrize("reported, canonical", sorted(REPORTED.items()))
def test_reported_names_map_to_the_right_chip(reported: str, canonical: str) -> None:
    assert hw.lookup(reported) is CHIPS[canonical]
    assert hw.describe(reported) == canonical


@pytest.mark.parametrize("reported", sorted(REPORTED))
def test_matching_is_case_and_whitespace_tolerant(reported: str) -> None:
    want = hw.lookup(reported)
    assert hw.lookup(reported.upper()) is want
    assert hw.lookup(reported.lower()) is want
    assert hw.lookup("  " + reported.replace(" ", "   ") + "\n") is want


@pytest.mark.parametrize("name", sorted(CHIPS))
def test_canonical_names_look_themselves_up(name: str) -> None:
    assert hw.lookup(name) is CHIPS[name]
    assert CHIPS[name].name == name


@pytest.mark.parametrize("reported", NOT_IN_TABLE)
def test_other_names_are_unknown_not_a_near_miss(reported: str) -> None:
    assert hw.lookup(reported) is None
    assert hw.describe(reported) == hw.UNKNOWN == "unknown"


def test_v5_lite_is_never_v5p() -> None:
    assert hw.describe("TPU v5 lite") == "TPU v5e"
    assert hw.describe("TPU v5") == "TPU v5p"
    assert CHIPS["TPU v5e"] != CHIPS["TPU v5p"]


@pytest.mark.parametrize("name", sorted(CHIPS))
def test_peak_is_in_flops_not_tflops(name: str) -> None:
    spec = CHIPS[name]
    for dtype in DTYPES:
        tflops = spec.peak_tflops[dtype]
        if tflops is None:
            assert spec.peak(dtype) is None
            assert spec.ridge_point(dtype) is None
        else:
            assert spec.peak(dtype) == pytest.approx(tflops * 1e12, rel=1e-12)
            # ridge point computed independently: FLOP/s over bytes/s
            bytes_per_s = spec.bandwidth_gbs * 10**9
            assert spec.ridge_point(dtype) == pytest.approx(tflops * 10**12 / bytes_per_s)


@pytest.mark.parametrize("name", sorted(CHIPS))
def test_every_figure_has_a_source(name: str) -> None:
    spec = CHIPS[name]
    assert set(spec.peak_tflops) == set(DTYPES)
    needed = {"peak_tflops", "memory", "bandwidth"}
    needed |= {"link"} if spec.link_gbs is not None else set()
    needed |= {"sm_count"} if spec.sm_count is not None else set()
    needed |= {"mxu"} if spec.mxu_shape is not None or spec.mxu_count is not None else set()
    needed |= {"mma_shape"} if spec.mma_shape is not None else set()
    for key in needed:
        assert spec.sources.get(key, "").strip(), f"{name}: no source for {key}"
    assert any(c.isdigit() for c in spec.sources["peak_tflops"])


@pytest.mark.parametrize("name", sorted(CHIPS))
def test_fields_are_consistent_with_kind(name: str) -> None:
    spec = CHIPS[name]
    assert spec.kind in ("gpu", "tpu")
    assert spec.memory_gb > 0 and spec.bandwidth_gbs > 0
    if spec.kind == "gpu":
        assert spec.sm_count and spec.mxu_shape is None and spec.mxu_count is None
    else:
        assert spec.mxu_shape and spec.mxu_count and spec.sm_count is None
        assert spec.mma_shape is None
        # TPUs: no native fp32/fp16 MXU peak; the source says why
        assert spec.peak("fp32") is None and spec.peak("fp16") is None
        assert "n/a" in spec.sources["peak_tflops"]
        assert f"{spec.mxu_shape[0]}x{spec.mxu_shape[1]}" in spec.matrix_unit


@pytest.mark.parametrize("name", sorted(CHIPS))
def test_memory_unit_is_the_one_its_source_states(name: str) -> None:
    # Google's TPU docs say "32 GiB" (v4) and "95GB" (v5p): the unit is a field, and its source must say it.
    spec = CHIPS[name]
    said = re.search(rf"(?<![\d.]){spec.memory_gb:g}\s*(GiB|GB)\b", spec.sources["memory"])
    assert said and said.group(1) == spec.memory_unit, (name, spec.sources["memory"])
    assert spec.memory_bytes == spec.memory_gb * (2 ** 30 if spec.memory_unit == "GiB" else 10 ** 9)


def test_memory_bytes_by_hand_and_a_bad_unit_is_refused() -> None:
    assert CHIPS["TPU v4"].memory_bytes == 32 * 2 ** 30 and CHIPS["NVIDIA H100 SXM"].memory_bytes == 80e9
    # v5p: Google's v5p docs state "95GB" (the table once read it as 95 GiB = 102.0 GB)
    assert CHIPS["TPU v5p"].memory_unit == "GB" and CHIPS["TPU v5p"].memory_bytes == 95e9
    assert [r["memory GB"] for r in hw.table(["TPU v4", "TPU v5p"])] == [34.4, 95.0]  # 32 GiB = 34.4 GB
    with pytest.raises(ValueError, match=r"TPU v5e: memory_unit must be 'GB'.*got 'gb'"):
        replace(CHIPS["TPU v5e"], memory_unit="gb")


def test_t4_has_no_bf16_and_says_what_it_has() -> None:
    t4 = hw.lookup("Tesla T4")
    assert t4.peak("bf16") is None
    with pytest.raises(ValueError) as err:
        hw.peak_flops("Tesla T4", "bf16")
    assert isinstance(err.value, hw.UnsupportedDtypeError)
    assert "fp16" in str(err.value) and "fp32" in str(err.value)
    assert hw.peak_flops("Tesla T4", "fp16") == 65e12


def test_unknown_chip_needs_explicit_peak() -> None:
    with pytest.raises(hw.UnknownChipError, match=r"peak_tflops="):
        hw.peak_flops("NVIDIA A10", "bf16")
    assert issubclass(hw.UnknownChipError, LookupError)


def test_explicit_override_wins() -> None:
    assert hw.peak_flops("NVIDIA A10", "bf16", peak_tflops=125.0) == 125e12
    assert hw.peak_flops("cpu", "fp32", peak_tflops=1.5) == 1.5e12
    assert hw.peak_flops("NVIDIA H100 80GB HBM3", "bf16", peak_tflops=800) == 800e12
    with pytest.raises(ValueError):
        hw.peak_flops("cpu", "fp32", peak_tflops=0.0)


@pytest.mark.parametrize("bad", ["float32", "bfloat16", "BF16", "fp64", ""])
def test_bad_dtype_names_the_valid_ones(bad: str) -> None:
    for call in (lambda: CHIPS["TPU v5e"].peak(bad), lambda: hw.peak_flops("TPU v5e", bad),
                 lambda: hw.peak_flops("cpu", bad, peak_tflops=1.0)):
        with pytest.raises(ValueError) as err:
            call()
        assert all(d in str(err.value) for d in DTYPES)


def test_hopper_cross_checks() -> None:
    h100 = hw.lookup("NVIDIA H100 80GB HBM3")
    h200 = hw.lookup("NVIDIA H200")
    assert h100.peak_tflops["bf16"] == 989.0
    assert h100.peak("bf16") == 989e12
    assert h200.peak_tflops == h100.peak_tflops
    assert (h200.memory_gb, h200.bandwidth_gbs) == (141, 4800)
    assert (h100.memory_gb, h100.bandwidth_gbs) == (80, 3350)
    assert h100.sm_count == h200.sm_count == 132
    assert hw.lookup("NVIDIA H100 PCIe").sm_count == 114


# Closed-form datasheet relations. Datasheets round to ~3 significant digits (L4: tf32 60 vs
# bf16 121), hence rel=1e-2 -- a wrong factor of 2 is still caught.
def _arch(spec: hw.ChipSpec) -> str:
    return spec.matrix_unit.split("(")[-1].rstrip(")")


def test_fp8_is_twice_bf16_on_hopper_and_ada() -> None:
    chips = [c for c in CHIPS.values() if _arch(c) in ("Hopper", "Ada")]
    assert len(chips) >= 6
    for c in chips:
        assert c.peak_tflops["fp8"] == pytest.approx(2 * c.peak_tflops["bf16"], rel=1e-2), c.name


def test_tf32_is_half_bf16_on_ampere_ada_hopper() -> None:
    chips = [c for c in CHIPS.values() if _arch(c) in ("Ampere", "Ada", "Hopper")]
    assert len(chips) >= 10
    for c in chips:
        assert c.peak_tflops["tf32"] == pytest.approx(c.peak_tflops["bf16"] / 2, rel=1e-2), c.name
        assert c.peak_tflops["fp16"] == c.peak_tflops["bf16"], c.name


def test_pre_ampere_and_tpus_lack_tf32_bf16_fp8_as_documented() -> None:
    for c in CHIPS.values():
        if _arch(c) in ("Turing", "Pascal", "Volta"):
            assert c.peak("bf16") is None and c.peak("tf32") is None and c.peak("fp8") is None
        if _arch(c) == "Ampere":
            assert c.peak("fp8") is None
        if c.kind == "tpu":
            assert c.peak("bf16") is not None and c.peak("fp8") is None


def test_int8_is_twice_bf16_on_v5e_v5p_v6e() -> None:
    for name in ("TPU v5e", "TPU v5p", "TPU v6e"):
        c = CHIPS[name]
        assert c.peak_tflops["int8"] == pytest.approx(2 * c.peak_tflops["bf16"], rel=3e-3)


def test_tpu_peak_equals_mxu_count_times_array_size() -> None:
    # MXU peak = 2 FLOP * R * C * MXUs * clock; the implied clock must be a plausible GHz.
    for c in (c for c in CHIPS.values() if c.kind == "tpu"):
        r, cols = c.mxu_shape
        clock_ghz = c.peak("bf16") / (2 * r * cols * c.mxu_count) / 1e9
        if c.name == "TPU v6e":  # documented mismatch: 2 MXU 256x256 would need 3.5 GHz
            assert clock_ghz > 2.0 and "(check)" in c.sources["mxu"]
            continue
        assert 0.6 < clock_ghz < 2.0, (c.name, clock_ghz)


def test_a100_variants_share_compute_differ_in_memory() -> None:
    sxm40, sxm80, pcie80 = (hw.lookup(n) for n in (
        "NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"))
    assert sxm40.peak_tflops == sxm80.peak_tflops == pcie80.peak_tflops
    assert (sxm40.bandwidth_gbs, sxm80.bandwidth_gbs, pcie80.bandwidth_gbs) == (1555, 2039, 1935)
    assert sxm80.ridge_point("bf16") < sxm40.ridge_point("bf16")


def test_table_rows() -> None:
    rows = hw.table()
    assert [r["name"] for r in rows] == list(CHIPS)
    t4 = hw.table(["Tesla T4"])[0]
    assert t4["bf16 TFLOP/s"] is None and t4["fp16 TFLOP/s"] == 65.0
    assert t4["ridge dtype"] == "fp16"
    assert t4["ridge FLOP/byte"] == pytest.approx(65e12 / 320e9, abs=0.05)
    v5e = hw.table(["TPU v5 lite"])[0]
    assert v5e["name"] == "TPU v5e" and v5e["ridge dtype"] == "bf16"
    assert v5e["ridge FLOP/byte"] == pytest.approx(197e12 / 819e9, abs=0.05)
    for r in rows:
        assert {"memory GB", "bandwidth GB/s", "matrix unit", "int8 TOP/s"} <= set(r)
        assert all(f"{d} TFLOP/s" in r for d in DTYPES if d != "int8")
    with pytest.raises(hw.UnknownChipError):
        hw.table(["NVIDIA A10"])


def test_learner_chips_are_canonical() -> None:
    names = hw.learner_chips()
    assert all(n in CHIPS for n in names)
    assert {hw.describe(r) for r in ("Tesla T4", "Tesla P100-PCIE-16GB", "NVIDIA L4", "NVIDIA A100-SXM4-40GB",
                                     "NVIDIA H100 80GB HBM3", "TPU v5 lite", "TPU v6 lite")} \
        == set(names)


def test_specs_are_frozen() -> None:
    with pytest.raises(Exception):
        CHIPS["TPU v5e"].memory_gb = 1  # type: ignore[misc]


@given(st.text(max_size=30))
def test_lookup_never_raises_and_is_exact(name: str) -> None:
    spec = hw.lookup(name)
    assert spec is None or spec.name in CHIPS
    assert hw.describe(name) == (hw.UNKNOWN if spec is None else spec.name)


@given(st.sampled_from(sorted(CHIPS)), st.sampled_from(DTYPES))
def test_peak_flops_agrees_with_spec(name: str, dtype: str) -> None:
    spec = CHIPS[name]
    if spec.peak(dtype) is None:
        with pytest.raises(hw.UnsupportedDtypeError, match=dtype):
            hw.peak_flops(name, dtype)
    else:
        assert math.isclose(hw.peak_flops(name, dtype), spec.peak(dtype))


def test_a_short_or_mistyped_name_lists_the_close_table_names() -> None:
    # Issue #7: "H100" was refused as "not in the table" although the table holds three H100s.
    with pytest.raises(hw.UnknownChipError) as err:
        hw.peak_flops("H100", "bf16")
    msg = str(err.value)
    assert "ambiguous" in msg and "peak_tflops=" in msg
    assert all(f"'NVIDIA H100 {v}'" in msg for v in ("SXM", "PCIe", "NVL")) and "H200" not in msg
    with pytest.raises(hw.UnknownChipError, match="'NVIDIA A100 SXM 40GB'.*'NVIDIA A100 PCIe 80GB'"):
        hw.peak_flops("A100", "bf16")
    with pytest.raises(hw.UnknownChipError, match="did you mean 'NVIDIA H100 SXM'"):
        hw.peak_flops("NVIDIA H1OO SXM", "bf16")  # letter O for zero
    with pytest.raises(hw.UnknownChipError, match="did you mean 'TPU v5e'"):
        hw.table(["v5e"])
    with pytest.raises(hw.UnknownChipError) as err:  # nothing close: no made-up suggestion, still the fix
        hw.peak_flops("Mystery Accelerator 9000", "bf16")
    assert "did you mean" not in str(err.value) and "peak_tflops=" in str(err.value)
    assert hw.lookup("H100") is None and hw.describe("H100") == hw.UNKNOWN  # look-ups stay exact


def test_table_refuses_a_bare_string() -> None:
    # Issue #12: table("TPU v5e") looked up 'T', 'P', ... one letter at a time.
    with pytest.raises(TypeError, match=r"\['TPU v5e'\]"):
        hw.table("TPU v5e")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, "197", True])
def test_explicit_peak_must_be_a_finite_positive_number(bad: object) -> None:
    with pytest.raises(ValueError, match="peak_tflops must be a finite TFLOP/s figure > 0"):
        hw.peak_flops("cpu", "bf16", peak_tflops=bad)  # type: ignore[arg-type]
