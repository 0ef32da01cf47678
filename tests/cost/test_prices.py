"""Tests for labkit.cost.prices (Lab 06): provenance on every price, staleness by date, overrides."""
from __future__ import annotations

import datetime as dt

import pytest

from labkit.cost import prices as cost
from labkit.cost.prices import Price
from labkit.runtime import hardware


def test_every_price_has_url_dates_and_terms() -> None:
    assert cost.PRICES and cost.PRICE_WARNING
    for p in cost.PRICES:
        assert p.source.startswith("http") and p.read_date in cost.READ_DATES, p
        assert p.page_date == "undated" or p.page_date[:2] == "20", p
        assert p.region and p.term and p.publisher, p
        assert hardware.lookup(p.chip).name == p.chip, p.chip


def test_staleness_warning_by_date() -> None:
    p = Price("TPU v5e", "GCP", "on_demand", 1.0, "https://x.example", "2025-01-15", "2026-01-01")
    assert cost.age_days(p, "2026-01-14") == 364 and not cost.warnings([p], "2026-01-14")
    assert cost.warnings([p], dt.date(2026, 1, 16))[0].count("STALE") == 1   # 366 days
    u = Price("TPU v5e", "GCP", "on_demand", 1.0, "https://x.example", "undated")
    assert cost.age_days(u) is None and "undated" in cost.warnings([u])[0]
    with pytest.raises(ValueError):
        Price("TPU v5e", "GCP", "on_demand", 1.0, "https://x.example", "last year")


def test_my_price_and_override() -> None:
    mine = cost.my_price("TPU v5e", 0.99, cloud="GCP")
    assert mine.publisher == "yours" and mine.page_date == dt.date.today().isoformat()
    table = cost.with_override(mine)
    assert cost.price("TPU v5e", "GCP", table=table).usd_per_chip_hour <= 0.99
    assert cost.price("NVIDIA H100 SXM", "AWS").usd_per_chip_hour == pytest.approx(80.62 / 8)


def test_site_is_the_host_or_the_source() -> None:
    p = Price("TPU v5e", "GCP", "on_demand", 1.0, "https://deploybase.ai/articles/x", "undated")
    assert p.site == "deploybase.ai"
    assert cost.my_price("TPU v5e", 2.0).site == "your own quote"


def test_tpu_per_core_prices_are_converted_to_per_chip() -> None:
    # deploybase quotes $/core-hour: v5e has 1 TensorCore per chip, v5p 2. Its slice prices agree:
    # v5e-8 (8 chips) $2.56/h, v5p-8 (8 cores = 4 chips) $3.84/h.
    db = {p.chip: p for p in cost.PRICES if p.site == "deploybase.ai" and p.pricing == "on_demand"}
    assert db["TPU v5e"].usd_per_chip_hour == pytest.approx(0.32) == pytest.approx(2.56 / 8)
    assert db["TPU v5p"].usd_per_chip_hour == pytest.approx(2 * 0.48) == pytest.approx(3.84 / 4)
    assert all("core" in p.note for p in db.values())


def test_per_core_rows_about_4x_below_a_dated_per_chip_page_enter_no_verdict() -> None:
    # Even converted per chip, deploybase's undated figures sit about 4x below the per-chip figures of a page
    # dated 2026-01-27: every deploybase row (its commitments are discounts on the same v5e-8 price) is superseded.
    dated = {p.chip: p for p in cost.PRICES if p.site == "artificial-intelligence-wiki.com"}
    db = [p for p in cost.PRICES if p.site == "deploybase.ai"]
    assert {c: p.usd_per_chip_hour for c, p in dated.items()} == {"TPU v5e": 1.20, "TPU v5p": 4.20}
    assert all(p.page_date == "2026-01-27" and p.read_date == cost.TPU_RECHECK for p in dated.values())
    for p in db:
        assert not cost.current(p) and cost.left_out(p).startswith("superseded:") and "about 4x below" in p.superseded
        if p.pricing == "on_demand":
            assert 3.5 < dated[p.chip].usd_per_chip_hour / p.usd_per_chip_hour < 4.5, p
    assert len(db) == 4 and all(cost.current(p) for p in dated.values())


def test_price_range_current_and_primary() -> None:
    lo, hi = cost.price_range("TPU v5e")
    assert (lo.usd_per_chip_hour, hi.usd_per_chip_hour) == (1.20, 1.60)
    assert {lo.site, hi.site} == {"artificial-intelligence-wiki.com", "blog.easecloud.io"}
    assert cost.price_range("TPU v6e") is None
    out = {p.usd_per_chip_hour: cost.left_out(p) for p in cost.PRICES if not cost.current(p)}
    assert out[4.916].startswith("stale: the page was dated 2024-12")   # the AWS Capacity Blocks mirror
    assert out[98.32 / 8].startswith("superseded:") and out[0.32].startswith("superseded:")
    assert len(out) == 6  # the AWS mirror, AWS's pre-cut p5 price, deploybase's four TPU rows
    assert not any(cost.primary(p) for p in cost.PRICES if p.publisher == "third-party")
    assert cost.primary(cost.my_price("TPU v5e", 1.0))


def test_a_superseded_price_is_shown_but_enters_no_range_or_pick() -> None:
    # AWS p5 at $98.32/h ($12.29/GPU) is the price before the cut the next row ($80.62/h) records.
    old = next(p for p in cost.PRICES if p.usd_per_chip_hour == pytest.approx(98.32 / 8))
    assert "$80.62/h" in old.superseded and not cost.current(old) and old in cost.prices("NVIDIA H100 SXM")
    lo, hi = cost.price_range("NVIDIA H100 SXM")
    assert hi.usd_per_chip_hour == pytest.approx(80.62 / 8)     # was the superseded $12.29
    mine = Price("TPU v5e", "GCP", "on_demand", 0.5, "https://x.example", "undated", superseded="replaced")
    assert cost.left_out(mine) == "superseded: replaced"
    table = (mine, cost.my_price("TPU v5e", 0.9, cloud="GCP"))
    assert cost.price("TPU v5e", "GCP", table=table).usd_per_chip_hour == 0.9


def test_range_ends_are_marked_and_checked() -> None:
    ends = [p for p in cost.PRICES if p.range_end]
    assert sorted(p.range_end for p in ends) == ["high", "low"] and len({p.source for p in ends}) == 1
    with pytest.raises(ValueError, match="range_end must be.*got 'top'"):
        Price("TPU v5e", "GCP", "on_demand", 1.0, "https://x.example", "undated", range_end="top")


def test_current_only_is_the_current_filter_after_the_sort() -> None:
    every = cost.prices("NVIDIA H100 SXM")
    assert any(not cost.current(p) for p in every)  # the table holds a superseded H100 row
    assert cost.prices("NVIDIA H100 SXM", current_only=True) == [p for p in every if cost.current(p)]
    assert cost.prices(current_only=True) == [p for p in cost.prices() if cost.current(p)]


def test_an_override_replaces_rows_and_says_which() -> None:
    # my_price("TPU v5e", 1.20, cloud="GCP") replaces EVERY published GCP v5e on-demand row (three pages).
    mine = cost.my_price("TPU v5e", 1.20, cloud="GCP")
    gone = cost.replaced(mine)
    assert sorted(p.site for p in gone) == ["artificial-intelligence-wiki.com", "blog.easecloud.io", "deploybase.ai"]
    assert all(p.pricing == "on_demand" and p.chip == "TPU v5e" for p in gone)
    table = cost.with_override(mine)
    assert not any(p in table for p in gone) and mine in table and len(table) == len(cost.PRICES) - 3 + 1
    assert cost.replaced(cost.my_price("TPU v6e", 2.0)) == []


# ---------------------------------------------------------------- bad input: a clear error, never a silent miss
def test_an_unknown_chip_or_cloud_is_refused_with_a_did_you_mean() -> None:
    # prices("H100") was [], price_range("H100") None: as if the chip had no price
    with pytest.raises(ValueError, match=r"chip 'H100' is ambiguous: did you mean 'NVIDIA H100 SXM'.*priced in this "
                                         r"table: NVIDIA H100 PCIe, NVIDIA H100 SXM, TPU v5e, TPU v5p"):
        cost.prices("H100")
    with pytest.raises(hardware.UnknownChipError, match=r"chip 'H100' is ambiguous"):  # hardware's error too
        cost.price_range("H100")
    with pytest.raises(ValueError, match=r"chip 'v5e' is not in .*did you mean 'TPU v5e'"):
        cost.price("v5e")
    # a chip hardware knows but the table does not price: [] / None, as Lab 06 expects (a T4 runtime)
    assert cost.prices("NVIDIA T4") == [] and cost.price_range("NVIDIA T4") is None
    assert cost.prices("TPU v5 lite") == cost.prices("TPU v5e")       # reported names resolve
    with pytest.raises(ValueError, match=r"unknown cloud 'Azure '; clouds in this table: AWS, CoreWeave, GCP"):
        cost.prices(cloud="Azure ")
    assert cost.prices(cloud=" gcp ") == cost.prices(cloud="GCP")      # case and spaces are ignored
    with pytest.raises(TypeError, match=r"cloud must be a cloud's name \(str\).*got 3"):
        cost.prices(cloud=3)
    with pytest.raises(TypeError, match=r"chip must be a chip name \(str\).*got 5"):
        cost.prices(5)


def test_a_range_or_pick_needs_one_chip() -> None:
    # price_range(None) mixed every chip's prices into one "range"; price(None) picked the cheapest of all
    with pytest.raises(TypeError, match=r"price_range needs one chip's name.*got None"):
        cost.price_range(None)
    with pytest.raises(TypeError, match=r"price needs one chip's name.*got None"):
        cost.price(None)


def test_my_price_refuses_a_name_that_would_replace_nothing() -> None:
    with pytest.raises(ValueError, match=r"chip 'v5e' is not in .*did you mean 'TPU v5e'.*my_price\('TPU v5e', 1.2\)"):
        cost.my_price("v5e", 1.2)
    with pytest.raises(ValueError, match=r"chip 'H100' is ambiguous: did you mean 'NVIDIA H100 SXM'"):
        cost.my_price("H100", 1.2, cloud="AWS")
    with pytest.raises(TypeError, match=r"chip must be a chip name \(str\), e\.g\. my_price.*got None"):
        cost.my_price(None, 1.2)
    with pytest.raises(ValueError, match=r"chip must be a chip name.*got the empty name ' '"):
        cost.my_price(" ", 1.2)
    # a reported name is canonicalised, so the override replaces the rows it should
    mine = cost.my_price("TPU v5 lite", 1.2, cloud="GCP")
    assert mine.chip == "TPU v5e" and len(cost.replaced(mine)) == 3
    # Close to a listed name but not one: said aloud, and kept (a real unlisted chip, e.g. NVIDIA B200, is close too)
    with pytest.warns(UserWarning, match=r"chip 'TPU v9' is not in .*did you mean 'TPU v4'.*replaces no published row"):
        assert cost.my_price("TPU v9", 1.2).chip == "TPU v9"
    # Lab 06 prices an unlisted runtime (a CPU) with USD_PER_CHIP_HOUR_OVERRIDE: my_price(rt.chip, ...) keeps working
    cpu = cost.my_price("Intel(R) Xeon(R) Processor", 0.1)
    assert cpu.chip == "Intel(R) Xeon(R) Processor"
    assert cost.prices(cpu.chip, table=cost.with_override(cpu)) == [cpu]   # a name a row carries is found


def test_overrides_and_tables_must_be_prices() -> None:
    # with_override("TPU v5e", 1.2) was AttributeError: 'str' object has no attribute 'chip'
    with pytest.raises(TypeError, match=r"pass Price objects, e\.g\. with_override\(my_price\('TPU v5e', 1\.20\)\); "
                                        r"override 1 is 'TPU v5e'"):
        cost.with_override("TPU v5e", 1.2)
    with pytest.raises(TypeError, match=r"pass Price objects.*override 1 is None"):
        cost.with_override(None)
    with pytest.raises(TypeError, match=r"pass Price objects.*override 2 is 1\.2"):
        cost.replaced(cost.my_price("TPU v5e", 1.0), 1.2)
    with pytest.raises(TypeError, match=r"table must be a list or tuple of Price rows.*got 'abc'"):
        cost.prices(table="abc")
    with pytest.raises(TypeError, match=r"table\[1\] must be a Price.*got 'x'"):
        cost.with_override(table=[cost.PRICES[0], "x"])
    with pytest.raises(TypeError, match=r"table must be a list or tuple of Price rows.*got 7"):
        cost.warnings(7)
    for fn in (cost.current, cost.left_out, cost.primary, cost.age_days):
        with pytest.raises(TypeError, match=r"must be a Price \(a row of PRICES, or my_price.*got 'abc'"):
            fn("abc")


def test_a_copy_on_a_non_vendor_host_is_third_party() -> None:
    # The AWS Capacity Blocks row was labelled "vendor (mirror)" but is hosted off AWS: no verdict may treat it as AWS's.
    for p in cost.PRICES:
        assert p.publisher in ("vendor", "third-party"), p
        assert p.publisher != "vendor" or any(d in p.site for d in ("aws.amazon.com", "cloud.google.com")), p
