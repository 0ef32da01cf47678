"""labkit.measure.sweep_level (Lab 00): has the matmul sweep levelled off, judged against its own noise."""

from __future__ import annotations

import pytest

from labkit.measure import roofline, sweep_level
from labkit.measure.bench import Timing


def t(s: float, spread: float = 0.0) -> Timing:
    """Three repeats around s seconds whose IQR/median is about `spread`."""
    return Timing((s * (1 - spread / 2), s, s * (1 + spread / 2)), 1)


def test_levelled_off_counts_each_size_at_its_fastest_library() -> None:
    # sizes 512 and 1024: 8x the FLOPs in 6x the time -> 4/3 of the rate: still rising
    sweep = [roofline.OpPoint("matmul", "jax", "bf16", 2 * n**3, 3 * n * n * 2, t(s))
             for n, s in ((1024, 6e-3), (256, 1e-4), (512, 1e-3))]
    assert sweep_level.levelled_off(sweep) == pytest.approx(8 / 6)
    assert sweep_level.level_verdict(8 / 6) == "still rising"
    with pytest.raises(ValueError, match="two sizes"):
        sweep_level.levelled_off(sweep[:1])
    # A second framework's points: each size counts at its fastest. torch's 1024 took 1.1e-2 s (slower than
    # jax's) and its 512 1e-3 s (a tie): the ratio stays jax 1024 / jax 512 = 8/6. Alone, torch's sweep falls.
    torch_pts = [roofline.OpPoint("matmul", "torch", "bf16", 2 * n**3, 3 * n * n * 2, t(s))
                 for n, s in ((1024, 1.1e-2), (512, 1e-3))]
    assert sweep_level.levelled_off(sweep + torch_pts) == pytest.approx(8 / 6)
    assert sweep_level.levelled_off(torch_pts) == pytest.approx(8e-3 / 1.1e-2)  # 0.727: the cold read's 0.73x
    assert sweep_level.level_verdict(sweep_level.levelled_off(torch_pts)) == "falling"
    with pytest.raises(ValueError, match="two sizes to see a sweep level off, got 1"):  # two frameworks at one size are one size
        sweep_level.levelled_off([sweep[0], torch_pts[0]])


@pytest.mark.parametrize("ratio, verdict", [(1.06, "still rising"), (1.05, "levelled off"), (0.96, "levelled off"),
                                            (0.95, "levelled off"), (0.94, "falling")])
def test_level_verdict_band(ratio: float, verdict: str) -> None:
    assert sweep_level.level_verdict(ratio) == verdict


def test_a_step_within_the_points_spread_is_inconclusive() -> None:
    # The committed H100 run of Lab 00: 776.4 TFLOP/s at 8192³ over 737.6 at 4096³ (1.053x) with an IQR/median of
    # 0.156 at the top size: a 5% step inside a 16% spread says neither "rising" nor "flat".
    assert sweep_level.level_verdict(776.4 / 737.6) == "still rising"
    assert sweep_level.level_verdict(776.4 / 737.6, spread=0.156) == "inconclusive"
    assert sweep_level.level_verdict(1.03, spread=0.6) == "levelled off"  # within 5%: flat, however noisy
    assert sweep_level.level_verdict(1.55, spread=0.156) == "still rising"  # a 2-core CPU's 1.55x stays a rise
    assert sweep_level.level_verdict(0.80, spread=0.156) == "falling"
    assert sweep_level.level_verdict(0.90, spread=0.156) == "inconclusive"
    for bad in (-0.1, float("nan"), None, "0.1"):
        with pytest.raises(ValueError, match="spread must be an IQR/median >= 0"):
            sweep_level.level_verdict(1.0, spread=bad)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_level_verdict_refuses_a_non_ratio(bad: float) -> None:
    with pytest.raises(ValueError, match="pass levelled_off"):
        sweep_level.level_verdict(bad)


def test_level_judges_the_two_points_it_compares() -> None:
    # Lab 00's committed H100 sweep (2026-11-25): JAX 737.6 TFLOP/s at 4096³ (IQR/median 0.022), 776.4 at 8192³
    # (0.156); torch 724.0 (0.009) and 681.9 (0.065). Each size's fastest point is JAX's: their spread decides.
    pts = [roofline.OpPoint("matmul", fw, "bf16", 2 * n**3, 3 * n * n * 2, t(2 * n**3 / (tf * 1e12), sp))
           for fw, n, tf, sp in (("jax", 4096, 737.6, 0.022), ("jax", 8192, 776.4, 0.156),
                                 ("torch", 4096, 724.0, 0.009), ("torch", 8192, 681.9, 0.065),
                                 ("jax", 2048, 225.9, 1.014))]  # the noisy small size is not compared
    lv = sweep_level.level(pts)
    assert lv.ratio == pytest.approx(776.4 / 737.6, rel=1e-9) and lv.spread == pytest.approx(0.156, rel=0.01)
    assert lv.verdict == "inconclusive" and "rerun" in lv.meaning
    assert sweep_level.level(pts[:2] + pts[2:4]).verdict == "inconclusive"
    quiet = [roofline.OpPoint("matmul", "jax", "bf16", 2 * n**3, 1, t(2 * n**3 / (tf * 1e12), 0.01))
             for n, tf in ((4096, 737.6), (8192, 776.4))]
    assert sweep_level.level(quiet).verdict == "still rising" and "lower bound" in sweep_level.level(quiet).meaning
