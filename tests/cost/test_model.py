"""Tests for labkit.cost.model (Lab 06): formulas vs hand arithmetic, break-even, bad input."""
from __future__ import annotations

import math
import re

import pytest

from labkit.cost import model as cost
from labkit.cost.prices import Price, my_price

# ---------------------------------------------------------------- cost formulas


def test_serve_cost_hand_computed() -> None:
    # $2/chip-h at 1000 tok/s -> 3.6 Mtok/h -> 2 / 3.6 $/Mtok
    r = cost.serve_cost_per_mtok(1000, 2.0)
    assert r.usd_per_hour == pytest.approx(2.0)
    assert r.usd_per_mtok == pytest.approx(2 / 3.6)
    assert "3.6 Mtok/h" in r.why and "$0.5556/Mtok" in r.why


def test_train_cost_measured_tokens_many_chips() -> None:
    # 8 chips x $1.20 = $9.60/h; 20,000 tok/s x 3600 = 72 Mtok/h -> 9.6 / 72 $/Mtok
    r = cost.train_cost_per_mtok(20_000, n_chips=8, usd_per_chip_hour=1.20)
    assert r.phase == "train" and r.mfu is None
    assert r.usd_per_hour == pytest.approx(9.6)
    assert r.usd_per_mtok == pytest.approx(9.6 / 72)


def test_train_cost_from_mfu_with_explicit_peak() -> None:
    # tokens/s = 0.5 MFU x 4 chips x 100e12 FLOP/s / 6e9 FLOP/token = 33,333.3 tok/s
    r = cost.train_cost_per_mtok(flops_per_token=6e9, mfu=0.5, n_chips=4, peak_tflops=100,
                                 usd_per_chip_hour=3.0)
    tps = 0.5 * 4 * 100e12 / 6e9
    assert r.tokens_per_s == pytest.approx(tps)
    assert r.usd_per_mtok == pytest.approx(4 * 3.0 / (tps * 3600) * 1e6)
    assert r.why.startswith("tokens/s = MFU 0.5")


def test_train_cost_from_mfu_uses_hardware_peak() -> None:
    hardware = pytest.importorskip("labkit.runtime.hardware")
    peak = hardware.lookup("TPU v5e").peak("bf16")  # 197e12 FLOP/s
    r = cost.train_cost_per_mtok(flops_per_token=4.2e10, chip="TPU v5e", mfu=0.5, n_chips=8,
                                 usd_per_chip_hour=cost.price("TPU v5e", "GCP").usd_per_chip_hour)
    assert peak == pytest.approx(197e12)
    assert r.tokens_per_s == pytest.approx(0.5 * 8 * peak / 4.2e10)
    # a reported runtime name resolves too, and a Price carries its chip in
    r2 = cost.train_cost_per_mtok(flops_per_token=4.2e10, mfu=0.5, n_chips=8,
                                  usd_per_chip_hour=cost.price("TPU v5 lite", "GCP"))
    assert r2.chip == "TPU v5e" and r2.usd_per_mtok == pytest.approx(r.usd_per_mtok)


def test_implied_mfu_from_measured_tokens() -> None:
    # 1000 tok/s x 6e9 FLOP/token = 6e12 FLOP/s of 100e12 peak -> 6% MFU
    r = cost.train_cost_per_mtok(1000, flops_per_token=6e9, peak_tflops=100, chip="mine",
                                 usd_per_chip_hour=1.0)
    assert r.mfu == pytest.approx(0.06)


@pytest.mark.parametrize("u", [1.0, 0.5, 0.25, 0.1])
def test_utilization_scales_cost_inversely(u: float) -> None:
    full = cost.serve_cost_per_mtok(500, 4.0).usd_per_mtok
    assert cost.serve_cost_per_mtok(500, 4.0, utilization=u).usd_per_mtok == pytest.approx(full / u)
    tr = cost.train_cost_per_mtok(500, usd_per_chip_hour=4.0, utilization=u)
    assert tr.usd_per_mtok == pytest.approx(full / u)


def test_price_object_accepted_wherever_a_price_is() -> None:
    p = Price("TPU v5e", "GCP", "spot", 0.5, "my quote", "2025-11")
    assert cost.serve_cost_per_mtok(1000, p).usd_per_mtok == pytest.approx(0.5 / 3.6)
    assert cost.serve_cost_per_mtok(1000, p).chip == "TPU v5e"


def test_onprem_hourly_figure() -> None:
    # $30k over 4 years = 30000 / 35040 h; 700 W x 1.5 PUE x $0.10/kWh = $0.105/h
    usd_h = cost.onprem_usd_per_hour(30_000, 4, 700, 0.10, pue=1.5)
    assert usd_h == pytest.approx(30_000 / (4 * 8760) + 0.7 * 1.5 * 0.10)
    assert cost.onprem_usd_per_hour(30_000, 4, 700, 0.10, opex_usd_per_year=876) == \
        pytest.approx(30_000 / (4 * 8760) + 0.07 + 0.1)
    assert cost.serve_cost_per_mtok(1000, usd_h).usd_per_mtok > 0  # usable as a price


# ---------------------------------------------------------------- sensitivity and break-even


def test_sensitivity_pairs() -> None:
    pts = cost.sensitivity(cost.serve_cost_per_mtok, {"tokens_per_s": 1000,
                                                       "usd_per_chip_hour": 2.0},
                           "utilization", [1.0, 0.5])
    assert pts == [(1.0, pytest.approx(2 / 3.6)), (0.5, pytest.approx(4 / 3.6))]


GPU = (cost.serve_cost_per_mtok, {"tokens_per_s": 3000, "usd_per_chip_hour": 5.0})
TPU = (cost.serve_cost_per_mtok, {"tokens_per_s": 1000, "usd_per_chip_hour": 2.0})


def _plug(opt, param, x, varies=True) -> float:
    fn, kw = opt
    return fn(**({**kw, param: x} if varies else kw)).usd_per_mtok


def test_break_even_price_closed_form() -> None:
    # TPU price x where x / 3.6 = 5 / 3 / 3.6, i.e. x = 5/3 $/chip-h
    be = cost.break_even(TPU, GPU, "usd_per_chip_hour", 0.1, 10, vary="a")
    assert be and be.method.startswith("closed form") and "linear in x" in be.method
    assert be.value == pytest.approx(5 / 3)
    assert _plug(TPU, "usd_per_chip_hour", be.value) == pytest.approx(
        _plug(GPU, "usd_per_chip_hour", be.value, varies=False), rel=1e-9)


def test_break_even_utilization_closed_form_in_inverse() -> None:
    # TPU at util u: 2 / (3.6 u) $/Mtok; GPU at util 0.5: 5 / (3 x 3.6 x 0.5) $/Mtok
    # equal when u = 2 x 3 x 0.5 / 5 = 0.6
    gpu = (GPU[0], {**GPU[1], "utilization": 0.5})
    be = cost.break_even(TPU, gpu, "utilization", 0.05, 1.0, vary="a")
    assert "1/x" in be.method and be.value == pytest.approx(0.6)
    assert _plug(TPU, "utilization", 0.6) == pytest.approx(be.usd_per_mtok)


def test_break_even_bisection_for_nonlinear_costs() -> None:
    def a(x: float) -> float:  # $/Mtok grows like x^2
        return x * x

    def b(x: float) -> float:
        return 2.0 + 0.0 * x

    be = cost.break_even((a, {}), (b, {}), "x", 0.0, 3.0)
    assert be.method.startswith("bisection")
    assert be.value == pytest.approx(math.sqrt(2), abs=1e-8)
    assert a(be.value) == pytest.approx(b(be.value), abs=1e-7)


def test_break_even_none_when_lines_do_not_cross() -> None:
    be = cost.break_even(TPU, GPU, "usd_per_chip_hour", 0.1, 1.0, vary="a")
    assert not be and be.value is None
    assert "no crossing" in be.reason and "A is cheaper throughout" in be.reason
    same = cost.break_even(TPU, TPU, "utilization", 0.1, 1.0)
    assert same.value is None and "same" in same.reason


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("kwargs, match", [
    ({"tokens_per_s": 1000, "usd_per_chip_hour": -1.0}, r"usd_per_chip_hour.*> 0"),
    ({"tokens_per_s": 1000, "usd_per_chip_hour": 0}, r"usd_per_chip_hour.*> 0"),
    ({"tokens_per_s": 0, "usd_per_chip_hour": 1.0}, r"tokens_per_s.*> 0"),
    ({"tokens_per_s": -5, "usd_per_chip_hour": 1.0}, r"tokens_per_s.*> 0"),
    ({"tokens_per_s": 10, "usd_per_chip_hour": 1.0, "utilization": 0}, r"utilization.*\(0, 1\]"),
    ({"tokens_per_s": 10, "usd_per_chip_hour": 1.0, "utilization": 1.5}, r"utilization"),
    ({"tokens_per_s": 10, "usd_per_chip_hour": 1.0, "n_chips": 0}, r"n_chips"),
])
def test_bad_serve_inputs(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cost.serve_cost_per_mtok(**kwargs)


def test_bad_train_inputs() -> None:
    with pytest.raises(ValueError, match=r"unknown chip 'Foo X1'.*peak_tflops=.*TPU v5e"):
        cost.train_cost_per_mtok(flops_per_token=1e9, chip="Foo X1", mfu=0.4,
                                 usd_per_chip_hour=1.0)
    with pytest.raises(ValueError, match="exactly one of tokens_per_s"):
        cost.train_cost_per_mtok(100, mfu=0.4, usd_per_chip_hour=1.0)
    with pytest.raises(ValueError, match="exactly one of tokens_per_s"):
        cost.train_cost_per_mtok(usd_per_chip_hour=1.0)
    with pytest.raises(ValueError, match="no native bf16 peak"):
        cost.train_cost_per_mtok(flops_per_token=1e9, chip="NVIDIA T4", mfu=0.4,
                                 usd_per_chip_hour=0.35)
    with pytest.raises(ValueError, match="mfu must be in"):
        cost.train_cost_per_mtok(flops_per_token=1e9, peak_tflops=10, mfu=1.2,
                                 usd_per_chip_hour=1.0)


def test_bad_price_entries() -> None:
    with pytest.raises(ValueError, match="unknown pricing kind 'preemptible'.*on_demand"):
        Price("TPU v5e", "GCP", "preemptible", 1.0, "x", "2025-01")
    with pytest.raises(ValueError, match="unknown pricing kind"):
        cost.prices(pricing="preemptible")
    with pytest.raises(ValueError, match="YYYY-MM"):
        Price("TPU v5e", "GCP", "spot", 1.0, "x", "2025")
    with pytest.raises(ValueError, match="source"):
        Price("TPU v5e", "GCP", "spot", 1.0, " ", "2025-01")
    with pytest.raises(ValueError, match="usd_per_chip_hour"):
        Price("TPU v5e", "GCP", "spot", -2.0, "x", "2025-01")
    with pytest.raises(ValueError, match="no current spot price for 'TPU v5e'.*Price"):
        cost.price("TPU v5e", pricing="spot")
    with pytest.raises(ValueError, match="lo < hi"):
        cost.break_even(TPU, GPU, "utilization", 1.0, 0.5)
    with pytest.raises(ValueError, match="pue"):
        cost.onprem_usd_per_hour(1000, 3, 500, 0.1, pue=0.9)


def test_an_implied_mfu_above_one_is_refused() -> None:
    # The reported bug: tokens/s x FLOPs/token far above the chips' peak gave "MFU 5,076,142".
    with pytest.raises(ValueError, match=r"implied MFU above 1 is impossible.*whole job.*TFLOP/s"):
        cost.train_cost_per_mtok(5e6, flops_per_token=1e12, peak_tflops=1, usd_per_chip_hour=1.0)
    r = cost.train_cost_per_mtok(100, flops_per_token=1e10, peak_tflops=1, usd_per_chip_hour=1.0)
    assert r.mfu == pytest.approx(1.0)  # exactly at the peak is still possible


@pytest.mark.parametrize("kwargs, match", [
    ({"power_w": float("nan")}, r"power_w \(W per chip\) must be a finite number >= 0, got nan"),
    ({"usd_per_kwh": float("inf")}, r"usd_per_kwh .* got inf"),
    ({"opex_usd_per_year": -1}, r"opex_usd_per_year .* got -1"),
    ({"pue": float("nan")}, r"pue .* finite number, got nan"),
    ({"pue": float("inf")}, r"pue .* got inf"),
    ({"capex_usd": float("nan")}, r"capex_usd"),
    ({"years": float("inf")}, r"years"),
])
def test_onprem_refuses_nan_and_inf(kwargs: dict, match: str) -> None:
    args = {"capex_usd": 30000, "years": 4, "power_w": 700, "usd_per_kwh": 0.1, **kwargs}
    with pytest.raises(ValueError, match=match):
        cost.onprem_usd_per_hour(**args)


def test_break_even_refuses_non_finite_ranges() -> None:
    for lo, hi, name in ((float("nan"), 1.0, "lo"), (0.1, float("inf"), "hi")):
        with pytest.raises(ValueError, match=rf"{name} \(.* of the utilization range\) must be a finite number"):
            cost.break_even(TPU, GPU, "utilization", lo, hi)
    with pytest.raises(ValueError, match="tol"):
        cost.break_even(TPU, GPU, "utilization", 0.1, 1.0, tol=float("nan"))


def test_a_price_for_another_chip_is_refused() -> None:
    # The v5e's $1.20 priced an H100's hours, silently
    v5e = my_price("TPU v5e", 1.2)
    with pytest.raises(ValueError, match=r"usd_per_chip_hour is a price for 'TPU v5e', but chip='NVIDIA H100 SXM'"):
        cost.train_cost_per_mtok(1000., usd_per_chip_hour=v5e, chip="NVIDIA H100 SXM")
    with pytest.raises(ValueError, match=r"for 'TPU v5e', but chip='NVIDIA H100 SXM'.*price\('NVIDIA H100 SXM'\)"):
        cost.serve_cost_per_mtok(1000., v5e, chip="NVIDIA H100 SXM")
    with pytest.raises(ValueError, match=r"price for 'TPU v5e', but chip='mine'"):
        cost.train_cost_per_mtok(1000., usd_per_chip_hour=v5e, chip="mine", flops_per_token=6e9, peak_tflops=100)
    # the same chip under a reported name is the same chip; a float carries no chip to compare
    assert cost.train_cost_per_mtok(1000., usd_per_chip_hour=v5e, chip="TPU v5 lite").chip == "TPU v5 lite"
    assert cost.serve_cost_per_mtok(1000., v5e, chip="TPU v5e").chip == "TPU v5e"
    assert cost.serve_cost_per_mtok(1000., v5e).chip == "TPU v5e"
    assert cost.serve_cost_per_mtok(1000., 1.2, chip="NVIDIA H100 SXM").chip == "NVIDIA H100 SXM"


def test_lookups_reexported_here_refuse_bad_input_too() -> None:
    with pytest.raises(ValueError, match=r"chip 'H100' is ambiguous: did you mean 'NVIDIA H100 SXM'"):
        cost.prices("H100")
    with pytest.raises(ValueError, match=r"unknown cloud 'Azure '; clouds in this table:"):
        cost.prices(cloud="Azure ")
    with pytest.raises(TypeError, match=r"pass Price objects, e\.g\. with_override\(my_price\('TPU v5e', 1\.20\)\)"):
        cost.with_override("TPU v5e", 1.2)
    with pytest.raises(TypeError, match=r"table must be a list or tuple of Price rows.*got 'abc'"):
        cost.prices(table="abc")
