"""Tests for labkit.cost.seeds (Lab 06): each seed claim tested as written, full coverage."""
from __future__ import annotations

import pytest

from labkit.cost import seeds
from labkit.cost.prices import H100, V5P, Price
from labkit.cost.register import Input

MFU = Input("H100 MFU", 0.373, "measured", "Lab 02 report")
G, T = Input("g", 1000.0, "modelled", "m"), Input("t", 500.0, "modelled", "m")


def _p(chip: str, usd: float, kind: str = "on_demand", src: str = "https://a.example") -> Price:
    return Price(chip, "X", kind, usd, src, "2026-05-01", "2026-11-24")


# The claims the articles make that the register must carry (ids in SEED_CLAIM_IDS).
ARTICLE_CLAIMS = {"h100_node_12_15_per_h", "v5p8_slice_8_11_per_h", "v5p_spot_70pct",
                  "mfu_h100_52_tpu_58", "tpu_cheaper_at_19pct_mfu", "tpu_serving_2_4x_cheaper",
                  "h100_3800_tok_s", "v5p_3450_tok_s", "v6e_4x_price_perf", "tpu_60_65pct_less_power",
                  "midjourney_65pct", "anthropic_52pct_tco", "tpu_4_10x_cheaper_training",
                  "v5p8_3672_tflops_760gb", "b200_3x_h100", "v5e_2_5x_per_dollar_v4",
                  "tpu_inference_2_5x_cheaper", "trillium_disagg_3_7x"}


def test_register_covers_every_article_claim() -> None:
    reg = seeds.build(h100_mfu=MFU, tpu_mfu=None, gpu_tps=G, tpu_tps=T)
    assert ARTICLE_CLAIMS <= set(reg.ids()) and len(reg.ids()) == len(set(reg.ids()))
    assert all(r["article"] and r["why"] for r in reg.records())
    assert sum(reg.counts().values()) == len(seeds.SEED_CLAIM_IDS)


def test_node_price_range_by_hand() -> None:
    assert seeds.node_price([_p(H100, 2.0)]).verdict == "fails"   # $16/h, and the $20-32 range
    e = seeds.node_price([_p(H100, 1.5), _p(H100, 3.0)])              # $12 inside, $24 outside
    assert e.verdict == "depends" and "$12.00" in e.why


def test_spot_v5p_as_written_and_slice() -> None:
    assert seeds.spot_v5p(_p(V5P, 4.0), _p(V5P, 1.2, "spot")).verdict == "holds"
    assert seeds.spot_v5p(_p(V5P, 4.0), _p(V5P, 1.25, "spot")).verdict == "fails"
    assert seeds.spot_v5p(None, None).verdict == "not testable here"
    assert seeds.slice_price([_p(V5P, 2.5)]).verdict == "holds"       # 4 chips x 2.5 = $10
    assert seeds.slice_price([_p(V5P, 3.0)]).verdict == "fails"       # $12


def test_mfu_gap_whole_points_no_epsilon() -> None:
    tpu = lambda m: Input("TPU MFU", m, "measured", "r")  # noqa: E731
    assert seeds.mfu_gap(Input("g", 0.47, "measured", "r"), tpu(0.63)).verdict == "holds"  # 5 points
    assert seeds.mfu_gap(Input("g", 0.46, "measured", "r"), tpu(0.58)).verdict == "fails"
    # Without a TPU run: a measured H100 outside 52 +- 5 already fails the two-part claim; inside, untestable.
    assert seeds.mfu_gap(MFU, None).verdict == "fails"
    assert seeds.mfu_gap(Input("g", 0.50, "measured", "r"), None).verdict == "not testable here"
    # A modelled H100 MFU cannot fail it (the register turns that into depends).
    assert seeds.mfu_gap(Input("g", 0.373, "modelled", "assumed"), None).verdict == "depends"


def test_low_mfu_flip_point_at_19pct() -> None:
    # TPU v5p at 19% of 459 TFLOP/s, $2/h; H100 at 37.3% of 989: tie at 2 / (0.19 x 459) x 0.373 x 989
    flip = 2.0 / (0.19 * 459) * 0.373 * 989
    e = seeds.low_mfu(MFU, _p(V5P, 2.0), [_p(H100, flip - 0.01), _p(H100, flip + 0.01)])
    assert e.verdict == "depends" and e.value == pytest.approx(flip)
    assert seeds.low_mfu(MFU, _p(V5P, 2.0), [_p(H100, flip + 1)]).verdict == "holds"


def test_serving_ratio_flip_prices() -> None:
    # TPU $1/h at 500 tok/s; GPU 1000 tok/s: ratio = price / 2, so 2x at $4/h and 4x at $8/h
    e = seeds.serving_ratio(G, T, _p("TPU v5e", 1.0), [_p(H100, 6.0)])
    assert e.verdict == "holds" and "$4.00/h" in e.why and "$8.00/h" in e.why
    assert seeds.serving_ratio(G, T, _p("TPU v5e", 1.0), [_p(H100, 3.0)]).verdict == "fails"


def test_serving_ratio_over_every_price_pair() -> None:
    # ratio = GPU $/h / 2 per $ of TPU: TPU $1 with GPU $10 -> 5x (above); TPU $2 with GPU $10 -> 2.5x
    both = seeds.serving_ratio(G, T, [_p("TPU v5e", 1.0), _p("TPU v5e", 2.0)], [_p(H100, 10.0)])
    assert both.verdict == "depends" and "1 inside" in both.why and "1 above" in both.why
    # Every pair above the range: TPU is cheaper than claimed, but the claim's range is wrong.
    above = seeds.serving_ratio(G, T, [_p("TPU v5e", 1.0)], [_p(H100, 10.0), _p(H100, 12.0)])
    assert above.verdict == "fails" and "more than claimed" in above.why
    # One pair below, one above, none inside: the verdict turns on the prices, with flip points.
    straddle = seeds.serving_ratio(G, T, [_p("TPU v5e", 1.0)], [_p(H100, 2.0), _p(H100, 12.0)])
    assert straddle.verdict == "depends" and "$4.00/h" in straddle.why and "$8.00/h" in straddle.why
    assert straddle.value == pytest.approx(6.0)  # median of the sorted ratios [1x, 6x] -> index 1
    assert seeds.serving_ratio(G, T, [], [_p(H100, 2.0)]).verdict == "not testable here"


def test_whitepaper_claim_is_not_borrowed_from_another_test() -> None:
    reg = seeds.build(h100_mfu=MFU, tpu_mfu=None, gpu_tps=G, tpu_tps=T)
    e = next(e for e in reg.entries if e.id == "tpu_better_per_dollar_compatible")
    assert e.verdict == "not testable here" and all(i.kind == "article" for i in e.inputs)


def test_hourly_claim_checks_both_figures_against_the_ranges() -> None:
    e = seeds.hourly_12_vs_10([_p(H100, 2.0), _p(H100, 12.5)], [_p("TPU v5e", 1.0), _p(V5P, 4.0)])
    assert e.verdict == "depends"  # H100 $2.00-12.50 overlaps TPU $1.00-4.00: which is dearer depends
    assert "$12 is inside the H100 range" in e.why and "$10 above the TPU range" in e.why
