"""Tests for labkit.course.exercises.lab03: right answers pass, plausible wrong ones get their hint.

The checks compile on an 8-device mesh, so answers are judged in one separate process
(report mode: every verdict is collected); "not done" and stop mode run here, before any
compilation is needed.
"""

from __future__ import annotations

import pytest

from labkit.course.check import MODE_ENV, CheckFailed, NotDoneYet, your_turn
from labkit.course.exercises import lab03
from tests.conftest import run_result

SCRIPT = r"""
import json, os
os.environ["LABKIT_CHECK_MODE"] = "report"
import labkit
labkit.setup(cpu_devices=8, quiet=True)
from labkit.course.exercises import lab03
from labkit.course.check import CheckFailed
from jax.sharding import PartitionSpec as P

def right(x, w, y, shape):  # the lab's solution
    kinds = set()
    if x[1] is not None and x[1] == w[0]:
        kinds.add("reduce-scatter" if x[1] in y else "all-reduce")
    elif x[1] is not None:  # only x's contraction split: with x's rows split too, all-reduce the smaller y
        kinds.add("all-reduce" if x[0] is not None and shape[1] < shape[0] else "all-gather")
    elif w[0] is not None:
        kinds.add("all-gather")
    if any(h is not None and want != h for h, want in zip((x[0], w[1]), y)):
        kinds.add("all-gather")
    return kinds

def right_alt(x, w, y, shape):  # correct, written as a table of cases, returning a list; one side by tile sizes
    out = []
    split_contraction = x[1] is not None and x[1] == w[0]
    if split_contraction:
        out.append("reduce-scatter" if y[0] == x[1] or y[1] == x[1] else "all-reduce")
    elif x[1] is not None and w[0] is None:
        rows = 16 // 2  # each row block of x
        x_block, y_tile = rows * shape[0], rows * shape[1]  # what a gather of x moves vs the y to sum
        out.append("all-reduce" if x[0] is not None and y_tile < x_block else "all-gather")
    if (w[0] is not None and x[1] is None) or (x[0] and y[0] != x[0]) or (w[1] and y[1] != w[1]):
        out.append("all-gather")
    return out

def never_rs(x, w, y, shape):  # forgets that a split output turns the all-reduce into a reduce-scatter
    k = right(x, w, y, shape)
    return {"all-reduce" if c == "reduce-scatter" else c for c in k}

def no_partial_sums(x, w, y, shape):  # forgets the contraction entirely
    return {"all-gather"} if any(h is not None and want != h for h, want in zip((x[0], w[1]), y)) else set()

def never_gather(x, w, y, shape):  # forgets that a replicated output needs the tiles others computed
    return right(x, w, y, shape) - {"all-gather"}

def sums_one_side(x, w, y, shape):  # partial sums whenever only x's contraction is split, even for a wide w
    k = right(x, w, y, shape)
    if x[1] is not None and w[0] is None:
        k = (k - {"all-gather"}) | {"all-reduce"}
    return k

def gathers_one_side(x, w, y, shape):  # "one side split: always gather it", whatever w's shape
    k = right(x, w, y, shape)
    if x[1] is not None and w[0] is None:
        k = (k - {"all-reduce"}) | {"all-gather"}
    return k

def ring_bytes(x, w, y, shape):  # one side by ring bytes: an all-reduce moves 2(n-1)/n |y|, a gather (n-1)/n |x|
    k = right(x, w, y, shape)
    if x[1] is not None and w[0] is None and x[0] is not None:  # where the size rule applies at all
        k = (k - {"all-reduce", "all-gather"}) | {"all-reduce" if 2 * shape[1] < shape[0] else "all-gather"}
    return k

def rs_rows_only(x, w, y, shape):  # reduce-scatter only when y's *rows* are split over the summed axis
    k = right(x, w, y, shape)
    if "reduce-scatter" in k and y[0] != x[1]:
        k = (k - {"reduce-scatter"}) | {"all-reduce"}
    return k

def equal_reduces(x, w, y, shape):  # a w exactly as wide as x's columns also all-reduces
    k = right(x, w, y, shape)
    if x[1] is not None and w[0] is None and x[0] is not None and shape[1] == shape[0]:
        k = (k - {"all-gather"}) | {"all-reduce"}
    return k

def size_rule_everywhere(x, w, y, shape):  # the tile-size rule even where x's rows are whole
    k = right(x, w, y, shape)
    if x[1] is not None and w[0] is None and x[0] is None and shape[1] < shape[0]:
        k = (k - {"all-gather"}) | {"all-reduce"}
    return k

def always_gather(x, w, y, shape):  # "sharding always costs a gather"
    return right(x, w, y, shape) | {"all-gather"}

def three_args(x, w, y):  # written for the exercise before w's shape was an argument
    return set()

out = {}
for name, fn in [("right", right), ("right_alt", right_alt), ("never_rs", never_rs),
                 ("no_partial_sums", no_partial_sums), ("never_gather", never_gather),
                 ("sums_one_side", sums_one_side), ("gathers_one_side", gathers_one_side),
                 ("always_gather", always_gather), ("ring_bytes", ring_bytes), ("three_args", three_args),
                 ("rs_rows_only", rs_rows_only), ("equal_reduces", equal_reduces),
                 ("size_rule_everywhere", size_rule_everywhere),
                 ("empty_dict", lambda x, w, y, shape: right(x, w, y, shape) or {})]:
    r = lab03.check_predict_collectives(fn)
    out["predict_" + name] = [r.status, r.message]
# The compiler's own answers for the two one-sided cases: the same layouts, a wide and a narrow w.
out["one_sided"] = [sorted(lab03.compiled_kinds(*c)) for c in lab03.MATMUL_CASES if c[:3] == (("data", "model"), (None, None), ("data", None))]
for name, layout in [("right", {"w1": (None, "model"), "w2": ("model", None)}),
                     ("broken", lab03.BROKEN_LAYOUT),
                     ("w2_whole", {"w1": (None, "model"), "w2": (None, None)}),
                     ("w1_rows", {"w1": ("model", None), "w2": ("model", None)}),
                     ("w1_rows_w2_cols", {"w1": ("model", None), "w2": (None, "model")}),
                     ("not_dict", [("model", None)]),
                     ("bad_axis", {"w1": (None, "expert"), "w2": ("model", None)}),
                     ("both_whole", {"w1": (None, None), "w2": (None, None)}),
                     ("bare_string", {"w1": (None, "model"), "w2": "model"}),
                     ("not_a_tuple", {"w1": (None, "model"), "w2": 5}),
                     ("too_long", {"w1": (None, "model", None), "w2": ("model", None)}),
                     ("short_right", {"w1": (None, "model"), "w2": ("model",)}),
                     ("partition_spec", {"w1": P(None, "model"), "w2": P("model", None)}),
                     ("partition_spec_broken", {"w1": P(None, "model"), "w2": P(None, "model")}),
                     ("same_axis_twice", {"w1": ("model", "model"), "w2": ("model", None)}),
                     ("returned_none", None)]:
    r = lab03.check_fixed_layout(lambda layout=layout: layout)
    out["fix_" + name] = [r.status, r.message]

# What the two w1-by-rows hints say the compiler does: (kind, operand shape) of every collective.
for name, layout in [("w1_rows", {"w1": ("model", None), "w2": ("model", None)}),
                     ("w1_rows_w2_cols", {"w1": ("model", None), "w2": (None, "model")})]:
    out["compiled_" + name] = sorted([c.kind, list(c.shape)] for c in lab03.compile_mlp(layout)[0])

def raises():  # the learner's own bug: reported as a failed check, not a traceback
    cfg = {"w1": (None, "model")}
    return {"w1": cfg["w1"], "w2": cfg["w2"]}

r = lab03.check_fixed_layout(raises)
out["fix_raises"] = [r.status, r.message]
r = lab03.check_predict_collectives(lambda x, w, y, shape: {"all-reduce"} if x[1] else set() + 1)
out["predict_raises"] = [r.status, r.message]
os.environ["LABKIT_CHECK_MODE"] = "stop"
try:
    lab03.check_fixed_layout(lambda: lab03.BROKEN_LAYOUT)
    out["stop_raises"] = False
except CheckFailed as e:
    out["stop_raises"] = "all-gather" in str(e)
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def verdicts() -> dict:
    return run_result(SCRIPT, timeout=240)


@pytest.mark.parametrize("name", ["right", "right_alt"])
def test_predict_accepts_correct_answers(verdicts: dict, name: str) -> None:
    assert verdicts["predict_" + name][0] == "passed", verdicts["predict_" + name]


@pytest.mark.parametrize("name, hint", [
    ("never_rs", "reduce-scatter (half an all-reduce's traffic"),
    ("no_partial_sums", "partial sums must be added across devices"),
    ("never_gather", "tiles that other devices computed"),
    ("sums_one_side", "only x's contracted dimension is split (w is whole), and w is wide"),
    ("gathers_one_side", "only x's contracted dimension is split (w is whole), and w is narrow"),
    ("always_gather", "no collective here"),
    # w (32, 24): XLA all-reduces y (its tile is smaller than x's) though the ring would move more bytes
    ("ring_bytes", "only x's contracted dimension is split (w is whole), and w is narrow"),
    # the three a wrong-answer probe passed through the old 10 cases (2026-11-29):
    ("rs_rows_only", "reduce-scatter (half an all-reduce's traffic"),  # y (None, 'model') over the summed axis
    ("equal_reduces", "and w is wide: y's tile"),  # w (32, 32): no smaller than x's block
    ("size_rule_everywhere", "x's rows are whole on every device"),  # x (None, 'model'), w (32, 8)
    ("empty_dict", "or set() when nothing moves ({} is an empty dict"),  # it read "expected set(), got {}"
])
def test_predict_wrong_answers_get_their_hint(verdicts: dict, name: str, hint: str) -> None:
    status, message = verdicts["predict_" + name]
    assert status == "wrong" and hint in message, message


@pytest.mark.parametrize("name", ["right", "short_right", "partition_spec"])
def test_fixed_layout_accepts_megatron(verdicts: dict, name: str) -> None:
    status, message = verdicts["fix_" + name]  # ("model",) is ("model", None): one entry per leading dim
    assert status == "passed" and "{'all-reduce': 1}" in message


def test_a_bare_string_spec_is_refused_with_the_fix(verdicts: dict) -> None:
    # "model" is not a layout of w2: as a PartitionSpec it would be P('m', 'o', 'd', 'e', 'l').
    status, message = verdicts["fix_bare_string"]
    assert status == "wrong" and """layout["w2"] = 'model' is a string""" in message, message
    assert "('m', 'o', 'd', 'e', 'l')" in message and "(None, 'model')" in message and "('model', None)" in message


def test_predict_hint_names_the_layout_that_failed(verdicts: dict) -> None:
    status, message = verdicts["predict_never_rs"]
    # never_rs answers all-reduce where the output is split over the summed axis: the third case of MATMUL_CASES
    assert status == "wrong" and "Wrong for x (None, 'model'), w ('model', None) of shape (32, 64), y ('model', None): " \
        "your answer was {'all-reduce'}." in message, message


def test_the_same_layout_compiles_both_ways_by_the_shape_of_w(verdicts: dict) -> None:
    # x ("data", "model"), w whole, y ("data", None): a wide w -> gather x; a narrow w -> all-reduce y.
    assert verdicts["one_sided"] == [["all-gather"], ["all-reduce"], ["all-reduce"], ["all-gather"]], \
        verdicts["one_sided"]  # w 64, 4, 24 and 32 columns wide


def test_an_answer_without_the_shape_argument_is_told_the_signature(verdicts: dict) -> None:
    status, message = verdicts["predict_three_args"]
    assert status == "wrong" and "takes four arguments: (x_spec, w_spec, y_spec, w_shape)" in message, message


@pytest.mark.parametrize("name, hint", [
    ("broken", "split the same way — by its rows"),
    ("w2_whole", "w2 is replicated: every device holds all of it"),
    ("both_whole", "w1 and w2 are replicated: every device holds all of them and tensor parallelism saves no "
                   "memory. Split their d_ff dimension."),
    ("not_a_tuple", 'layout["w2"] = 5 is not a tuple'),
    ("too_long", "w1 has 2 dimensions (32, 128)"),
    ("w1_rows", "the partitioner re-splits w1 itself by its columns (d_ff) every step (all-to-all of w1's shards)"),
    # a cold read got "re-split along d_ff for w2 (all-gather)" here: the compiler all-reduces h and gathers y
    ("w1_rows_w2_cols", "partial sums of the whole hidden layer h, which must be all-reduced; w2 split by its "
                        "columns then leaves each device a slice of y's columns, which the replicated output must "
                        "gather (all-gather)"),
    ("not_dict", 'return a dict {"w1"'),
    ("bad_axis", "does not compile"),
    ("partition_spec_broken", "split the same way — by its rows"),
    ("same_axis_twice", "splits two dimensions of w1 over the same mesh axis"),  # was jax's DuplicateSpecError
    ("returned_none", "did you forget `return`?"),
])
def test_fixed_layout_wrong_answers_get_their_hint(verdicts: dict, name: str, hint: str) -> None:
    status, message = verdicts["fix_" + name]
    assert status == "wrong" and hint in message, message


def test_the_w1_rows_hints_say_what_the_compiler_does(verdicts: dict) -> None:
    # w1 rows + w2 rows: w1's (4, 128) shard goes out in 8 pieces of (4, 16) (an all-to-all that hands each device
    # w1's d_ff columns: w1 re-split, not h), then y's partial sums are added.
    assert verdicts["compiled_w1_rows"] == [["all-reduce", [16, 32]], ["all-to-all", [8, 4, 1, 16]]], verdicts
    # w1 rows + w2 columns: h's partial sums (16, 128) all-reduced, then y's column shards (16, 4) gathered.
    assert verdicts["compiled_w1_rows_w2_cols"] == [["all-gather", [16, 4]], ["all-reduce", [16, 128]]], verdicts


def test_stop_mode_raises_on_a_wrong_answer(verdicts: dict) -> None:
    assert verdicts["stop_raises"]


def test_not_done(monkeypatch: pytest.MonkeyPatch) -> None:
    # A stub answer is judged before anything is compiled: no devices needed.
    monkeypatch.setenv(MODE_ENV, "report")
    assert lab03.check_predict_collectives(lambda x, w, y, shape: your_turn("7.1")).status == "not done"
    assert lab03.check_fixed_layout(lambda: your_turn("7.2")).status == "not done"
    monkeypatch.setenv(MODE_ENV, "stop")
    with pytest.raises(NotDoneYet):
        lab03.check_fixed_layout(lambda: your_turn("7.2"))
    with pytest.raises(NotDoneYet):
        lab03.check_predict_collectives(lambda x, w, y, shape: your_turn("7.1"))


def test_cases_cover_every_rule() -> None:
    specs = lab03.MATMUL_CASES
    assert len(specs) == len(set(specs)) >= 6
    # One layout twice, with a wide and a narrow w: the partitioner's choice depends on the shapes.
    one_sided = [c[3] for c in specs if c[0][1] is not None and c[1] == (None, None)]
    assert sorted(w[1] < w[0] for w in one_sided) == [False, False, True, True, True], one_sided
    assert (32, 32) in one_sided, "a w exactly as wide as x: the size rule's edge"
    assert any(c[0][0] is None and c[0][1] is not None and c[1] == (None, None) for c in specs), "x's rows whole"
    assert any(c[0][1] is not None and c[0][1] == c[1][0] and c[2][1] == c[0][1] for c in specs), "y's columns summed"
    assert any(w[1] < w[0] < 2 * w[1] for w in one_sided), "a case where tile sizes and ring bytes disagree"
    assert CheckFailed is not None  # stop mode's exception, imported for the suite's readers


def test_mlp64_is_the_float64_mlp() -> None:
    """The check's reference is numpy float64, never a device matmul (TF32 on a GPU by default)."""
    import jax
    import numpy as np

    rng = np.random.default_rng(1)
    x, w1, w2 = (rng.standard_normal(lab03.MLP_SHAPES[k]) * (0.2 if k != "x" else 1.0) for k in ("x", "w1", "w2"))
    ref = lab03.mlp64(x, w1, w2)
    assert ref.dtype == np.float64 and ref.shape == (16, 32)
    with jax.default_matmul_precision("highest"):
        got = np.asarray(lab03.mlp(*(a.astype(np.float32) for a in (x, w1, w2))))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    # And gelu really is the tanh approximation: at h = 1 it is 0.841192 (erf GELU: 0.841345).
    assert abs(lab03.mlp64(np.ones((1, 1)), np.ones((1, 1)), np.ones((1, 1)))[0, 0] - 0.841192) < 1e-6


def test_an_exception_in_the_answer_is_a_failed_check(verdicts: dict) -> None:
    status, message = verdicts["fix_raises"]
    assert status == "wrong" and "your function raised KeyError" in message and "'w2'" in message, message
    status, message = verdicts["predict_raises"]
    assert status == "wrong" and "your function raised TypeError on inputs x (" in message, message


def test_layout_error_reads_a_partition_spec() -> None:
    from jax.sharding import PartitionSpec

    assert not isinstance(PartitionSpec(None, "model"), tuple)  # why it needs reading (jax >= 0.10)
    assert lab03.layout_error({"w1": PartitionSpec(None, "model"), "w2": PartitionSpec("model")}) == ""
    bad = lab03.layout_error({"w1": PartitionSpec(None, "model", None), "w2": PartitionSpec("model")})
    assert "w1 has 2 dimensions (32, 128)" in bad, bad
