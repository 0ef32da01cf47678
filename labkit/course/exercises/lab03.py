"""Lab 03 exercises: predict the collectives of a layout (and w's shape); fix a layout that all-gathers.

Both checks compile on an 8-device mesh (simulated CPU devices are fine) and compare with the
collectives the compiler really inserted (``labkit.sharding.collectives``), so an answer is judged by
the partitioner, not by a stored key.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, Callable

import numpy as np

from labkit.sharding import collectives as C
from labkit.sharding import layouts as S
from labkit.course.check import CheckResult, Hint, check_function, finish, raised

MESH_SHAPE, MESH_AXES = (2, 4), ("data", "model")
X_SHAPE, W_SHAPE = (16, 32), (32, 64)  # y = x @ w: (batch, d_in) @ (d_in, d_out)
NARROW_W = (32, 4)  # a w with fewer output columns than x has contracted ones: y's tiles are smaller than x's

# (x layout, w layout, y layout, w shape): every rule of the exercise shows up at least once.
MATMUL_CASES: list[tuple[tuple, tuple, tuple, tuple]] = [
    (("data", None), (None, None), ("data", None), W_SHAPE),  # batch split: nothing to exchange
    ((None, "model"), ("model", None), (None, None), W_SHAPE),  # split contraction -> partial sums
    ((None, "model"), ("model", None), ("model", None), W_SHAPE),  # ... and the output split too
    (("data", "model"), ("model", None), ("data", None), W_SHAPE),  # both at once
    (("data", None), (None, "model"), (None, None), W_SHAPE),  # replicated output from split pieces
    ((None, None), (None, "model"), (None, "model"), W_SHAPE),  # column split, output stays split
    (("data", None), (None, "model"), ("data", "model"), W_SHAPE),  # 2-D output, nothing to exchange
    (("data", "model"), (None, None), ("data", None), W_SHAPE),  # only x's contraction is split, w wide
    (("data", "model"), (None, None), ("data", None), NARROW_W),  # ... and w narrow: the other choice
    # w a little narrower than x: XLA compares y's tile with x's (all-reduce), though the all-reduce's ring moves
    # 2 x |y| > |x| (the gather's): a "fewer ring bytes" rule predicts the all-gather here and fails this case
    (("data", "model"), (None, None), ("data", None), (32, 24)),
    (("data", "model"), (None, None), ("data", None), (32, 32)),  # as wide as x: no smaller, so gather x
    # x's rows whole (not split over "data"): the partitioner gathered x at every width tried (4 to 64 columns)
    ((None, "model"), (None, None), (None, None), (32, 8)),
    ((None, "model"), ("model", None), (None, "model"), W_SHAPE),  # y split by columns over the summed axis
]


def _mesh() -> Any:
    return S.make_mesh(MESH_SHAPE, MESH_AXES, "auto", S.mesh_devices(8))


def compiled_kinds(x_spec: tuple, w_spec: tuple, y_spec: tuple, w_shape: tuple = W_SHAPE,
                   mesh: Any = None) -> set[str]:
    """(Lab 03) The collective kinds the compiler inserts for y = x @ w with these layouts and w's shape."""
    import jax

    mesh = mesh if mesh is not None else _mesh()
    sh = [S.named(mesh, S.spec_of(*s)) for s in (x_spec, w_spec, y_spec)]
    f = jax.jit(lambda x, w: x @ w, in_shardings=(sh[0], sh[1]), out_shardings=sh[2])
    x, w = np.ones(X_SHAPE, np.float32), np.ones(tuple(w_shape), np.float32)
    return set(C.kinds(C.collectives(f.lower(x, w).compile())))


def _is(got: Any, kinds: set[str]) -> bool:
    return isinstance(got, (set, frozenset, list, tuple)) and set(got) == kinds


def _one_sided(a: tuple) -> bool:
    """Only x's contracted dimension is split; w is whole (replicated)."""
    return a[0][1] is not None and all(e is None for e in a[1])


def check_predict_collectives(fn: Callable[[tuple, tuple, tuple, tuple], set[str]]) -> CheckResult:
    """(Lab 03) ``fn(x_spec, w_spec, y_spec, w_shape)`` -> the set of collective kinds for y = x @ w."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    name = "predict the collectives"
    try:  # an answer written for three arguments would stop the check with a TypeError: say what changed
        inspect.signature(fn).bind(*MATMUL_CASES[0])
    except TypeError:
        return finish(CheckResult(name, "wrong", "predict_collectives takes four arguments: (x_spec, w_spec, "
                                  f"y_spec, w_shape), w_shape like {W_SHAPE} (x is always {X_SHAPE})."))
    except ValueError:  # a builtin without a readable signature: let the cases judge it
        pass
    cache: dict[Any, Any] = {}

    def reference(x_spec: tuple, w_spec: tuple, y_spec: tuple, w_shape: tuple) -> set[str]:
        key = (x_spec, w_spec, y_spec, w_shape)
        if key not in cache:  # build the mesh on first use: a stub answer never touches JAX
            mesh = cache.setdefault("mesh", _mesh())
            cache[key] = compiled_kinds(*key, mesh=mesh)
        return cache[key]

    def normalised(*args: Any) -> Any:
        got = fn(*args)
        return set(got) if isinstance(got, (set, frozenset, list, tuple)) else got

    contraction_split = lambda a: a[0][1] is not None and a[0][1] == a[1][0]  # noqa: E731
    hints = [
        Hint(lambda g, e, a: not isinstance(g, (set, frozenset)),  # lists and tuples were made sets already
             "return a set of collective names, e.g. {\"all-reduce\"}, or set() when nothing moves ({} is an "
             "empty dict, \"\" a string)."),
        Hint(lambda g, e, a: e == {"reduce-scatter"} and _is(g, {"all-reduce"}),
             "the output is split over the same mesh axis you summed over, so each device needs "
             "only its slice of the sum: that is a reduce-scatter (half an all-reduce's traffic; "
             "on CPU it compiles to all-reduce + dynamic-slice)."),
        Hint(lambda g, e, a: contraction_split(a) and e and _is(g, set()),
             "x's columns and w's rows (the contracted dimension) are split over the same axis: "
             "each device sums only its part of the dot products, and those partial sums must be "
             "added across devices — an all-reduce (or a reduce-scatter if the output is split "
             "over that axis)."),
        Hint(lambda g, e, a: e == {"all-gather"} and _is(g, set()),
             "the output layout asks every device for tiles that other devices computed (e.g. a "
             "replicated y from a split x or w): those tiles must be gathered — all-gather."),
        Hint(lambda g, e, a: _one_sided(a) and a[0][0] is None and e == {"all-gather"} and _is(g, {"all-reduce"}),
             "only x's contracted dimension is split (w is whole), and x's rows are whole on every device (not "
             "split over the other axis): in this lab's cases the partitioner then gathers x's missing columns "
             "whatever w's width — the size rule held only where x's rows were split too."),
        Hint(lambda g, e, a: _one_sided(a) and e == {"all-gather"} and _is(g, {"all-reduce"}),
             "only x's contracted dimension is split (w is whole), and w is wide: y's tile (rows x "
             "d_out) is no smaller than x's (rows x d_in). The partitioner can gather x's missing "
             "columns or slice w to match and add partial products; it weighs the two by size, and "
             "here gathering x is the smaller — all-gather, no reduction."),
        Hint(lambda g, e, a: _one_sided(a) and e == {"all-reduce"} and _is(g, {"all-gather"}),
             "only x's contracted dimension is split (w is whole), and w is narrow: y's tile (rows x "
             "d_out) is smaller than x's (rows x d_in). Rather than gather x, the partitioner slices "
             "the replicated w to match x's columns (free: every device holds all of w) and adds "
             "the partial products — an all-reduce of the small y."),
        Hint(lambda g, e, a: e == set() and bool(g),
             "no collective here: each device already holds every x row and w column its output "
             "tile needs. Splitting the output more finely than the inputs costs nothing — the "
             "device just keeps its slice."),
    ]
    return check_function(name, normalised, reference, MATMUL_CASES, case_hints=True,  # one rule per case
                          hints=hints, explain="You can read a layout's communication off its "
                          "PartitionSpecs and shapes before compiling anything.", describe=describe_case)


def describe_case(args: tuple) -> str:
    """(Lab 03) "x ('data', None), w (None, 'model') of shape (32, 64), y (None, None)": one case, named."""
    x, w, y, w_shape = args
    return f"x {x}, w {w} of shape {tuple(w_shape)}, y {y}"


# ----------------------------------------------------------------------------------------
# 2. Fix a layout that triggers an unexpected all-gather
# ----------------------------------------------------------------------------------------

MLP_SHAPES = {"x": (16, 32), "w1": (32, 128), "w2": (128, 32)}  # (batch, d), (d, d_ff), (d_ff, d)
BROKEN_LAYOUT = {"w1": (None, "model"), "w2": (None, "model")}  # w2 split by *columns*


def mlp(x: Any, w1: Any, w2: Any) -> Any:
    """(Lab 03) The tensor-parallel MLP of exercise 2: gelu(x @ w1) @ w2, (batch, d)."""
    import jax

    return jax.nn.gelu(x @ w1, approximate=True) @ w2


def mlp64(x: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    """(Lab 03) The same MLP in float64 numpy: the reference no device's matmul precision touches."""
    x, w1, w2 = (np.asarray(a, np.float64) for a in (x, w1, w2))
    h = x @ w1  # (batch, d_ff)
    h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))  # tanh GELU, as jax's
    return h @ w2  # (batch, d)


def compile_mlp(layout: dict[str, tuple], mesh: Any = None) -> tuple[list[C.Collective], np.ndarray, np.ndarray]:
    """(Lab 03) Compile the MLP with weights laid out as ``layout`` on an 8-device "model" mesh.

    Returns (collectives, output, reference output computed on one device in float64).
    """
    import jax

    mesh = mesh if mesh is not None else S.make_mesh((8,), ("model",), "auto", S.mesh_devices(8))
    rng = np.random.default_rng(0)
    x, w1, w2 = (rng.standard_normal(MLP_SHAPES[k]).astype(np.float32) * (0.2 if k != "x" else 1.0)
                 for k in ("x", "w1", "w2"))
    sh = {k: S.named(mesh, S.spec_of(*layout.get(k, ()))) for k in ("w1", "w2")}
    for k in ("w1", "w2"):
        S.check_divisible(k, MLP_SHAPES[k], sh[k].spec, mesh)
    rep = S.named(mesh, S.spec_of())
    f = jax.jit(mlp, in_shardings=(rep, sh["w1"], sh["w2"]), out_shardings=rep)
    with jax.default_matmul_precision("highest"):
        compiled = f.lower(x, w1, w2).compile()
    # Not mlp(): with x64 off JAX would compute it in float32 on the default device -- a GPU's
    # DEFAULT precision is TF32, 1e-3 off, which once failed the correct answer on an H100.
    ref = mlp64(x, w1, w2)
    return C.collectives(compiled), np.asarray(compiled(x, w1, w2)), ref


def _as_entries(spec: Any) -> Any:
    """A jax PartitionSpec as the tuple of its entries (it is no tuple subclass in jax >= 0.10); else unchanged."""
    jax_sharding = sys.modules.get("jax.sharding")  # a learner with a PartitionSpec has imported it already
    if jax_sharding is not None and isinstance(spec, jax_sharding.PartitionSpec):
        return tuple(spec)
    return spec


def layout_error(layout: dict[str, Any]) -> str:
    """(Lab 03) What is wrong with the *form* of a layout {"w1": spec, "w2": spec}; "" if nothing."""
    for k, v in layout.items():
        v = _as_entries(v)
        if isinstance(v, str):  # tuple("model") is ('m', 'o', 'd', 'e', 'l'): one "axis" per letter
            return (f'layout["{k}"] = {v!r} is a string, which would be read as one axis per letter '
                    f"{tuple(v)}. Give one entry per dimension of {k}, in a tuple: e.g. (None, {v!r}) "
                    f"to split its columns, ({v!r}, None) to split its rows.")
        if not isinstance(v, (tuple, list)):
            return (f'layout["{k}"] = {v!r} is not a tuple: give one entry per dimension of {k}, '
                    'each None or a mesh axis name, e.g. (None, "model").')
        if len(v) > len(MLP_SHAPES[k]) or not all(e is None or isinstance(e, str) for e in v):
            return (f'layout["{k}"] = {tuple(v)!r}: {k} has {len(MLP_SHAPES[k])} dimensions {MLP_SHAPES[k]}; '
                    'give at most one entry per dimension, each None or a mesh axis name such as "model".')
        if len(named := [e for e in v if e is not None]) != len(set(named)):  # jax: DuplicateSpecError
            return (f'layout["{k}"] = {tuple(v)!r} splits two dimensions of {k} over the same mesh axis: a '
                    'mesh axis can split one dimension only. Split one, e.g. (None, "model") or ("model", None).')
    return ""


def _split(spec: tuple) -> bool:
    return any(e is not None for e in spec)


def check_fixed_layout(fn: Callable[[], dict[str, tuple]]) -> CheckResult:
    """(Lab 03) ``fn()`` -> {"w1": spec, "w2": spec}: both weights split, no gather or all-to-all."""
    __tracebackhide__ = True  # IPython shows the learner's cell and the message, not this frame
    name = "fix the all-gather"
    error: Exception | None = None
    try:
        layout = fn()
    except Exception as e:  # the learner's error is a failed check (a stub's is "not done"), not a crash
        error = e
    if error is not None:
        return raised(name, error)
    if not isinstance(layout, dict) or set(layout) != {"w1", "w2"}:
        forgot = " (it returned None: did you forget `return`?)" if layout is None else ""
        return finish(CheckResult(name, "wrong", 'return a dict {"w1": (...), "w2": (...)} of '
                                   f"PartitionSpec entries, e.g. (None, \"model\"){forgot}."))
    bad = layout_error(layout)
    if bad:
        return finish(CheckResult(name, "wrong", bad))
    layout = {k: tuple(_as_entries(v)) for k, v in layout.items()}  # lists and PartitionSpecs are fine too
    layout = {k: v + (None,) * (len(MLP_SHAPES[k]) - len(v)) for k, v in layout.items()}  # ("model",) = ("model", None)
    try:
        table, out, ref = compile_mlp(layout)
    except (S.ShardingError, ValueError) as e:
        return finish(CheckResult(name, "wrong", f"that layout does not compile: {e}"))
    if not np.allclose(out, ref, rtol=1e-4, atol=1e-4):
        return finish(CheckResult(name, "wrong", "the result changed — a layout must never "
                                   "change the maths; check the specs name existing dims."))
    # Moving activations between layouts (gather, all-to-all, permute) is what the fix removes;
    # summing partial results (all-reduce) is the one collective tensor parallelism needs.
    gathers = [c for c in table if c.kind in ("all-gather", "all-to-all", "collective-permute")]
    w1, w2 = layout["w1"], layout["w2"]
    if gathers:
        if w1 == (None, "model") and w2[1] == "model":
            msg = ("w2 is still split by its output columns. x @ w1 leaves each device a slice "
                   "of the hidden units (d_ff), so w2 must be split the same way — by its rows "
                   "(d_ff) — to use that slice without gathering it: (\"model\", None).")
        elif w1[0] == "model" and w2[1] == "model":  # compiled (XLA:CPU): all-reduce of h, then all-gather of y
            msg = ("w1 is split along d_model, its rows: each device computes partial sums of the whole hidden "
                   "layer h, which must be all-reduced; w2 split by its columns then leaves each device a slice of "
                   "y's columns, which the replicated output must gather (all-gather). Split w1 by its columns "
                   "(None, \"model\") and w2 by its rows (\"model\", None): h stays split along d_ff and only "
                   "y's partial sums are added.")
        elif w1[0] == "model" and w2[0] == "model":  # w2 split by rows (d_ff); compiled (XLA:CPU): an all-to-all of w1, then y's all-reduce
            msg = ("w1 is split along d_model, its rows, and w2 along d_ff: w1's split would leave partial sums of "
                   "the whole hidden layer, which w2's rows cannot use, so the partitioner re-splits w1 itself by "
                   f"its columns (d_ff) every step ({', '.join(sorted(set(c.kind for c in gathers)))} of w1's "
                   "shards) before the matmul. Split w1 by its columns (d_ff) from the start: (None, \"model\").")
        else:
            shapes = ", ".join(f"{c.kind} {c.shape} from {c.origin}" for c in gathers)
            msg = f"still moving activations: {shapes}. Split w1's and w2's d_ff dims."
        return finish(CheckResult(name, "wrong", f"hint: {msg}"))
    if not (_split(w1) and _split(w2)):
        whole = [k for k in ("w1", "w2") if not _split(layout[k])]
        one = len(whole) == 1
        return finish(CheckResult(name, "wrong", f"hint: no all-gather now, but {' and '.join(whole)} "
                                   f"{'is' if one else 'are'} replicated: every device holds all of "
                                   f"{'it' if one else 'them'} and tensor parallelism saves no memory. "
                                   f"Split {'its' if one else 'their'} d_ff dimension."))
    kinds = C.kinds(table)
    return finish(CheckResult(name, "passed", f"collectives now: {kinds or 'none'} — the "
                               "Megatron pattern: column-parallel w1, row-parallel w2, one "
                               "all-reduce of the (batch, d) output."))
