"""Tests for labkit.cost.claims (Lab 06): the spot discount holds and fails where the arithmetic says."""
from __future__ import annotations

import pytest

from labkit.cost import claims


def test_claim_spot_and_preemption() -> None:
    assert claims.check_spot_discount(10.0, 3.0).holds  # exactly 70%
    lossy = claims.check_spot_discount(10.0, 3.0, lost_fraction=0.3)  # 3 / 0.7 = 4.29 -> 57%
    assert not lossy.holds and lossy.value == pytest.approx(1 - 3 / 0.7 / 10)
    table = claims.spot_discounts()  # pairs from the same page only: the v5p spot example
    assert table and all(r.claim == "Spot is 70% cheaper" for r in table)
    assert any(r.under.startswith("TPU v5p on GCP") for r in table)
    # The tolerance is in percentage points and one-sided: 65% passes a 70% claim, and so does 95%.
    edge = claims.check_spot_discount(10.0, 3.5)
    assert edge.holds and "tolerance 5 percentage points, one-sided (holds at a discount of 65% or more)" in edge.under
    assert claims.check_spot_discount(10.0, 0.5).holds and not claims.check_spot_discount(10.0, 3.51).holds

