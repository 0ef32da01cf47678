"""Tests for labkit.cost.claims (Lab 06): each claim holds and fails where the arithmetic says."""
from __future__ import annotations

import pytest

from labkit.cost import claims, model as cost


def test_claim_tpu_serving_cheaper_holds_and_fails() -> None:
    gpu = cost.serve_cost_per_mtok(3000, 6.0)
    yes = claims.check_tpu_serving_cheaper(gpu, cost.serve_cost_per_mtok(2000, 1.2))
    assert yes.holds and yes.value == pytest.approx((6 / 3000) / (1.2 / 2000))  # 3.33x
    no = claims.check_tpu_serving_cheaper(gpu, cost.serve_cost_per_mtok(1000, 1.2))
    assert not no.holds and "below 2x" in no.detail  # 1.67x
    assert "1,200 tok/s" in no.detail  # TPU tok/s needed for 2x: 1000 x 2 / 1.667


def test_claim_spot_and_preemption() -> None:
    assert claims.check_spot_discount(10.0, 3.0).holds  # exactly 70%
    lossy = claims.check_spot_discount(10.0, 3.0, lost_fraction=0.3)  # 3 / 0.7 = 4.29 -> 57%
    assert not lossy.holds and lossy.value == pytest.approx(1 - 3 / 0.7 / 10)
    table = claims.spot_discounts()  # pairs from the same page only: the v5p spot example
    assert table and all(r.claim == "Spot is 70% cheaper" for r in table)
    assert any(r.under.startswith("TPU v5p on GCP") for r in table)


def test_claim_mfu_and_low_mfu_cheaper() -> None:
    assert claims.check_mfu_gap(0.52, 0.58).holds
    assert claims.check_mfu_gap(0.47, 0.63).holds and not claims.check_mfu_gap(0.46, 0.63).holds
    assert not claims.check_mfu_gap(0.29, 0.58).holds
    low = cost.train_cost_per_mtok(flops_per_token=6e9, mfu=0.35, peak_tflops=989,
                                   usd_per_chip_hour=2.99, chip="GPU")
    high = cost.train_cost_per_mtok(flops_per_token=6e9, mfu=0.58, peak_tflops=197,
                                    usd_per_chip_hour=1.20, chip="TPU")
    r = claims.check_low_mfu_cheaper(low, high)
    # 2.99 / (0.35 x 989) = 0.00864 < 1.20 / (0.58 x 197) = 0.0105 $ per (TFLOP/s.h)
    assert r.holds and r.value == pytest.approx((2.99 / (0.35 * 989)) / (1.20 / (0.58 * 197)))
    assert {c.text for c in claims.CLAIMS} >= {"Spot is 70% cheaper"}
