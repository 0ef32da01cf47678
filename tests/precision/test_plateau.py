"""labkit.precision.plateau (Lab 04): corpus entropies against hand counts, and when a curve reaches and leaves a level."""
from __future__ import annotations

import math

import numpy as np
import pytest

from labkit.gpt.data import ByteTokenizer
from labkit.precision import plateau


def test_entropies_match_a_hand_count() -> None:
    t = ByteTokenizer().encode("aaab")  # pairs aa, aa, ab: after 'a' comes a (2/3) or b (1/3)
    assert plateau.conditional_entropy(t, 0) == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    assert plateau.conditional_entropy(t, 1) == pytest.approx(-(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3)))
    # "abab": each byte decides the next one exactly, though both are equally common
    abab = ByteTokenizer().encode("abab")
    assert plateau.conditional_entropy(abab, 1) == 0.0 and plateau.conditional_entropy(abab, 0) == pytest.approx(math.log(2))
    # "abcb": windows ab, bc, cb -- each context seen once, so H(next | current) = 0 though H(X) > 0
    assert plateau.conditional_entropy(ByteTokenizer().encode("abcb"), 1) == 0.0
    lv = plateau.levels(ByteTokenizer().encode("the cat sat on the mat; the dog sat on the log"))
    assert list(lv) == ["unigram", "bigram"] and 0 < lv["bigram"] < lv["unigram"] < math.log(256)


def test_a_two_byte_context_and_bad_input() -> None:
    t = np.array([0, 1, 2, 0, 1, 3], np.int32)  # windows 012, 120, 201, 013: after (0, 1) comes 2 or 3
    assert plateau.conditional_entropy(t, 2) == pytest.approx(0.5 * math.log(2))  # context (0,1) has 2 of 4 windows
    big = t * 50_000  # a vocabulary of 150001: too many keys to count densely, the same entropies by sorting
    assert plateau.conditional_entropy(big, 2) == pytest.approx(0.5 * math.log(2))
    assert plateau.conditional_entropy(big, 1) == pytest.approx(plateau.conditional_entropy(t, 1))
    with pytest.raises(ValueError, match="need more than 1 tokens"):
        plateau.conditional_entropy(np.array([5]), 1)
    with pytest.raises(TypeError, match="1-D integer array"):
        plateau.conditional_entropy("abc")


def test_crossings_and_table_on_a_curve_that_leaves_a_plateau() -> None:
    # 2.5 nats for 100 steps (a plateau), then a linear fall to 2.3 over 50 steps
    losses = [3.5] * 10 + [2.5] * 90 + list(np.linspace(2.5, 2.3, 50))
    reached, left = plateau.crossings(losses, 2.48, margin=0.05, window=1)
    assert reached == 10 and 100 < left < 120  # on it at step 10, 0.05 below 2.48 (2.43) about 18 steps into the fall
    assert losses[left] <= 2.43 < losses[left - 1]
    assert plateau.crossings(losses, 2.0, margin=0.05, window=1) == (None, None)
    rows = plateau.table({("jax", "fp32"): losses, ("jax", "bf16"): [3.5] * 150}, {"bigram": 2.48},
                         {("jax", "fp32"): 0.05, ("jax", "bf16"): 0.05}, window=1)
    assert rows[0] == {"run": "jax fp32", "final (smoothed)": pytest.approx(2.3), "bigram reached": 10,
                       "bigram left": left}
    assert rows[1]["bigram reached"] is None and rows[1]["bigram left"] is None
    with pytest.raises(ValueError, match="margin must be"):
        plateau.crossings(losses, 2.48, margin=-0.1, window=1)


def test_the_shipped_corpus_bigram_level() -> None:
    """The level the H100's fp32 runs ended on (2.504-2.516 nats): 2.476 nats for the shipped corpus."""
    from labkit.gpt.data import load_corpus

    lv = plateau.levels(ByteTokenizer().encode(load_corpus()))
    assert lv["bigram"] == pytest.approx(2.4764, abs=1e-4) and lv["unigram"] == pytest.approx(3.3391, abs=1e-4)


def _rows(**left: tuple[int | None, int | None]) -> list[dict]:
    """Plateau-table rows for runs 'a' and 'b' with the given (unigram left, bigram left) steps."""
    return [{"run": r, "final (smoothed)": 2.5 - 0.1 * i, "unigram left": u, "bigram left": b}
            for i, (r, (u, b)) in enumerate(left.items())]


def test_exit_timing_tells_plateau_timing_from_a_gap_it_does_not_explain() -> None:
    lv = {"unigram": 3.34, "bigram": 2.48}  # high to low, as levels() gives them
    ex = plateau.exit_timing(_rows(a=(10, 150), b=(12, None)), lv, "a", "b", window=20)
    assert ex.steps == {"bigram": (150, None), "unigram": (10, 12)}  # lowest level first
    assert ex.last == "bigram" and ex.first == ["bigram", "unigram"] and ex.apart
    assert "left the bigram level at step 150, b at None" in ex.sentence()
    near = plateau.exit_timing(_rows(a=(10, 150), b=(12, 160)), lv, "a", "b", window=20)
    assert not near.apart and "within 20 steps of b: the gap is not plateau timing" in near.sentence()
    far = plateau.exit_timing(_rows(a=(10, 150), b=(12, 170)), lv, "a", "b", window=20)
    assert far.apart  # 20 steps apart: a whole window, more than smoothing
    late = plateau.exit_timing(_rows(a=(10, 190), b=(12, 150)), lv, "a", "b", window=20)
    assert late.first == ["unigram"] and late.apart  # it left the bigram level later than b: not first there
    none = plateau.exit_timing(_rows(a=(None, None), b=(None, None)), lv, "a", "b", window=20)
    assert none.last is None and not none.apart and none.first == []
    assert "neither it nor b went a floor below any level (smoothed, they end at 2.500 and 2.400)" in none.sentence()
    with pytest.raises(ValueError, match="run 'c' is not in the plateau table: pick one of a, b"):
        plateau.exit_timing(_rows(a=(1, 2), b=(1, 2)), lv, "c", "b", window=20)
