"""Tests for labkit.cost.mfu_claims (Lab 06): MFU halves judged alone, training $/token ratios by hand."""
from __future__ import annotations

import pytest

from labkit.cost import mfu_claims as mc
from labkit.cost.prices import H100, V5P, Price
from labkit.cost.register import Input

MFU = Input("H100 MFU, small GPT", 0.38, "measured", "Lab 02 report")


def _p(chip: str, usd: float) -> Price:
    return Price(chip, "X", "on_demand", usd, "https://a.example/p", "2026-05-01", "2026-11-24")


def test_tpu_half_uses_the_published_tpu_anchors() -> None:
    # PaLM v4 46% below about 58 (52.2-63.8); MaxText v5p 71/70% above; MaxText v5e 56% inside, 67% above.
    e = mc.mfu_gap(MFU, None)
    assert "TPU half DEPENDS" in e.why and "46% (PaLM 540B on 6144 TPU v4, sourced) below" in e.why
    assert "56% (MaxText 16B-128B on TPU v5e-256, low end, sourced) inside" in e.why
    assert "H100 half DEPENDS" in e.why and e.verdict == "depends"
    # Each half's verdict is printed alone; the claim needs both: a failing half fails it.
    assert mc.mfu_gap(MFU, None, anchors=()).verdict == "fails"               # H100: 38% alone, below
    assert "H100 half FAILS" in mc.mfu_gap(MFU, None, anchors=()).why
    assert mc.mfu_gap(Input("g", 0.52, "measured", "r"), None, anchors=(),
                      tpu_anchors=(Input("t", 0.58, "sourced", "s"),)).verdict == "holds"
    # No TPU figure at all: untestable unless the H100 half already fails.
    assert mc.mfu_gap(Input("g", 0.52, "measured", "r"), None, anchors=(), tpu_anchors=()).verdict == \
        "not testable here"


def test_a_half_on_modelled_figures_alone_decides_nothing() -> None:
    v, why = mc.mfu_half("H100", 52, [Input("g", 0.30, "modelled", "assumed")])
    assert v == "depends" and "modelled" in why


def test_train_ratio_by_hand() -> None:
    # H100 at 29% of 989 TFLOP/s, v5p at 69% of 459 (MaxText's 128B on v5p-256, its smallest 70B+ run):
    # ratio = (g / (0.29 x 989)) / (t / (0.69 x 459))
    assert mc.V5P_70B_PLUS_MFU.value == 0.69 and "128B" in mc.V5P_70B_PLUS_MFU.name
    k = 0.29 * 989 / (0.69 * 459)                       # H100 $/h per TPU $/h at equal $/token
    for g, t, want in ((5.0, 1.0, "inside"), (2.0, 1.0, "below"), (30.0, 1.0, "above")):
        e = mc.train_ratio([_p(V5P, t)], [_p(H100, g)])
        assert e.value == pytest.approx(g / k / t)
        assert e.verdict == {"inside": "holds", "below": "fails", "above": "fails"}[want], (g, e.why)
    e = mc.train_ratio([_p(V5P, 1.0)], [_p(H100, 2.0), _p(H100, 5.0)])
    assert e.verdict == "depends" and f"4x needs the H100 at ${4 * k:.2f}/h" in e.why and "stand-in" in e.why
    # the ratio goes as 1 / H100 MFU: at Megatron's 47% every ratio is 0.29 / 0.47 = 0.62x the 29% one
    assert "every ratio scales by 0.62x (47%, Megatron-LM on H100 clusters ('up to'))" in e.why
    at47 = mc.train_ratio([_p(V5P, 1.0)], [_p(H100, 5.0)], gpu_mfu=mc.H100_MFU_ANCHORS[0])
    assert at47.value == pytest.approx(5.0 / k * 0.29 / 0.47) and "scales by 1.62x (29%" in at47.why
    assert mc.train_ratio([], [_p(H100, 2.0)]).verdict == "not testable here"


def test_flip_price_ties_the_two_costs() -> None:
    f = mc.flip_price(V5P, 0.19, MFU, _p(V5P, 2.0))
    assert f / (0.38 * 989) == pytest.approx(2.0 / (0.19 * 459))     # equal $ per useful FLOP/s
