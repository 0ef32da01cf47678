"""Tests for labkit.cost.prices (Lab 06): every price dated and sourced, filters, overrides."""
from __future__ import annotations

import re

import pytest

from labkit.cost import prices as cost
from labkit.cost.prices import Price
from labkit.runtime import hardware

def test_every_price_has_date_and_source() -> None:
    assert cost.PRICES and cost.PRICE_WARNING
    for p in cost.PRICES:
        assert re.fullmatch(r"20\d\d-(0[1-9]|1[0-2])", p.as_of), p
        assert "https://" in p.source, p
        assert p.pricing in cost.PRICING_KINDS and p.usd_per_chip_hour > 0, p


def test_price_table_chips_are_canonical_hardware_names() -> None:
    hardware = pytest.importorskip("labkit.runtime.hardware")
    for p in cost.PRICES:
        spec = hardware.lookup(p.chip)
        assert spec is not None and spec.name == p.chip, p.chip


def test_price_filters_and_override() -> None:
    tpus = cost.prices(cloud="gcp", pricing="committed_3y")
    assert tpus and all(p.pricing == "committed_3y" and p.cloud == "GCP" for p in tpus)
    assert cost.price("NVIDIA H100 SXM", "AWS").as_of == "2025-06"  # newest entry wins
    mine = Price("TPU v5e", "GCP", "on_demand", 0.99, "2025-11", "my quote", region="US")
    table = cost.with_override(mine)
    assert cost.price("TPU v5e", "GCP", table=table).usd_per_chip_hour == 0.99
    assert cost.price("TPU v5e", "GCP").usd_per_chip_hour == 1.20  # PRICES unchanged
    assert len(table) == len(cost.PRICES)


# ---------------------------------------------------------------- claims
