"""Tests for labkit.matmul.sweep_rounds (Lab 01): interleaved rounds, per-round ratios and their spread."""
from __future__ import annotations

import numpy as np
import pytest

from labkit.matmul import sweep_rounds as sr

SHAPES = [(256, 256, 256), (256, 257, 256), (256, 264, 256)]


def test_rounds_alternate_direction_and_keep_each_shape_in_its_column():
    calls = []

    def time_one(m, n, k):
        calls.append(n)
        return 1e9 * n  # FLOP/s: a made-up rate that names the shape

    got = sr.measure_rounds(SHAPES, time_one, rounds=3)
    assert calls == [256, 257, 264, 264, 257, 256, 256, 257, 264]  # forward, backward, forward
    assert got.flops_per_s.shape == (3, 3) and np.all(got.flops_per_s == [[2.56e11, 2.57e11, 2.64e11]] * 3)
    np.testing.assert_allclose(got.median, [2.56e11, 2.57e11, 2.64e11])


def test_a_drift_that_slows_one_sweep_order_cancels_in_the_per_round_ratio():
    # The machine gets slower call by call (another program takes the cores): timed shape after shape,
    # the last shape looks 2x slower than the first although both do the same work.
    tick = iter(range(100))
    got = sr.measure_rounds([(8, 8, 8), (8, 8, 8)], lambda m, n, k: 1.0 / (1 + next(tick)), rounds=4)
    r = got.ratio(1, over=0)
    assert r.per_round[0] == pytest.approx(0.5) and r.per_round[1] == pytest.approx(4 / 3)
    assert r.spread > abs(1 - r.median)  # the spread is bigger than the "effect": not a result
    assert not r.clears(r.spread)


def test_ratio_median_spread_and_clears():
    r = sr.Ratio((0.2, 0.25, 0.22))
    assert r.median == pytest.approx(0.22) and r.spread == pytest.approx(0.05)
    assert r.clears(0.1) and not sr.Ratio((0.95, 1.3, 0.7)).clears(0.6)


@pytest.mark.parametrize("call,message", [
    (lambda: sr.measure_rounds(SHAPES, lambda *s: 1.0, rounds=1), "rounds must be a whole number >= 2"),
    (lambda: sr.measure_rounds(SHAPES, lambda *s: 1.0, rounds=2.5), "rounds must be a whole number >= 2"),
    (lambda: sr.measure_rounds([], lambda *s: 1.0, rounds=2), "shapes must be a non-empty list"),
    (lambda: sr.measure_rounds([(0, 8, 8)], lambda *s: 1.0, rounds=2), "positive sizes"),
    (lambda: sr.measure_rounds(SHAPES, lambda *s: float("nan"), rounds=2), r"time_one\(256, 256, 256\) returned nan"),
    (lambda: sr.measure_rounds(SHAPES, lambda *s: 1.0, rounds=2).ratio(3, over=0), "i must be an index into the 3"),
])
def test_bad_input_names_the_value(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_edge_verdict_needs_an_effect_bigger_than_the_noise() -> None:
    r = lambda *xs: sr.Ratio(tuple(xs))  # noqa: E731  per-round ratios over the edge's speed
    assert sr.edge_verdict(r(0.2, 0.2), r(1.0, 1.0), 0.05) == "alignment: the aligned size recovers"
    assert sr.edge_verdict(r(0.5, 0.5), r(0.5, 0.5), 0.05).startswith("a step")
    assert sr.edge_verdict(r(0.98, 0.99), r(1.0, 1.0), 0.02) == "no cliff: one past the edge is not 10% slower"
    assert "hides a 10% step" in sr.edge_verdict(r(0.98, 0.99), r(1.0, 1.0), 0.3)
    assert "exceeds the effect" in sr.edge_verdict(r(0.8, 0.8), r(1.0, 1.0), 0.5)
