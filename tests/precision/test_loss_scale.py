"""labkit.precision.loss_scale: the dynamic rule in JAX matches torch.amp.GradScaler (and flax, shifted by one)."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.precision import loss_scale as ls


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan, 1e39, "2", True])
def test_non_positive_or_non_finite_scale_is_a_clear_error(bad: object) -> None:
    err = TypeError if isinstance(bad, (str, bool)) else ValueError
    with pytest.raises(err, match=r"init_scale \(the loss scale\) must be a finite number in \(0, 3.4"):
        ls.LossScaleConfig(init_scale=bad)  # type: ignore[arg-type]
    with pytest.raises(err, match="finite number"):
        ls.static(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("kw, err, msg", [({"growth_factor": 1.0}, ValueError, "growth_factor must be a finite number > 1"),
                                          ({"growth_factor": math.inf}, ValueError, "growth_factor .* got inf"),
                                          ({"backoff_factor": 1.0}, ValueError, r"backoff_factor must be a finite number in \(0, 1\)"),
                                          ({"backoff_factor": 0.0}, ValueError, "backoff_factor must be a finite number in"),
                                          ({"growth_interval": 0}, ValueError, "growth_interval must be >= 1, got 0"),
                                          ({"growth_interval": 2.5}, TypeError, "growth_interval must be a whole number"),
                                          ({"dynamic": "no"}, TypeError, "dynamic must be True or False, got 'no'"),
                                          ({"dynamic": 1}, TypeError, "dynamic must be True or False")])
def test_bad_settings(kw: dict, err: type, msg: str) -> None:
    with pytest.raises(err, match=msg):
        ls.LossScaleConfig(**kw)


def test_numpy_scalars_are_numbers() -> None:
    """Sweeps give np.float32 / np.int64: accepted, and stored as plain Python numbers (issue #13)."""
    cfg = ls.LossScaleConfig(init_scale=np.float32(1024), growth_factor=np.float64(2.0),
                             backoff_factor=np.float32(0.5), growth_interval=np.int64(5), dynamic=np.bool_(False))
    assert (cfg.init_scale, cfg.growth_interval, cfg.dynamic) == (1024.0, 5, False)
    assert type(cfg.init_scale) is float and type(cfg.growth_interval) is int and type(cfg.dynamic) is bool
    assert ls.static(np.float32(8)).init_scale == 8.0
    assert float(ls.init(ls.LossScaleConfig(init_scale=float(np.finfo(np.float32).max))).scale) < math.inf


@pytest.mark.parametrize("scale", [-1.0, 0.0, math.nan, math.inf, "8"])
def test_the_rule_and_unscale_refuse_a_bad_scale(scale: object) -> None:
    with pytest.raises((ValueError, TypeError), match="scale must be a finite number > 0"):
        ls.next_scale(scale, 0, True, ls.LossScaleConfig())  # type: ignore[arg-type]
    p = torch.nn.Parameter(torch.ones(2))
    p.grad = torch.ones(2)
    with pytest.raises((ValueError, TypeError), match="scale must be a finite number > 0"):
        ls.torch_unscale_([p], scale)  # type: ignore[arg-type]
    assert torch.equal(p.grad, torch.ones(2))  # untouched


DEFAULT = ls.LossScaleConfig()


@pytest.mark.parametrize(("call", "match"), [
    # init(None) / init(2.0**16) read cfg.init_scale: AttributeError
    (lambda: ls.init(None), r"cfg must be a LossScaleConfig, got NoneType None; e.g. init\(cfg\) with cfg = "
                            r"LossScaleConfig\(init_scale=2.0\*\*16\).*static\(1024.0\)"),
    (lambda: ls.init(2.0**16), r"cfg must be a LossScaleConfig, got float 65536.0"),
    # update(state, 'yes' / None, cfg) was a raw jax error from inside jnp.where
    (lambda: ls.update(ls.init(DEFAULT), "yes", DEFAULT),
     r"finite must be a bool or a \(\) bool array, e.g. all_finite\(grads\), got str 'yes'"),
    (lambda: ls.update(ls.init(DEFAULT), None, DEFAULT), "finite must be .*got NoneType None"),
    (lambda: ls.update(ls.init(DEFAULT), 1, DEFAULT), "finite must be .*got int 1"),
    (lambda: ls.update(ls.init(DEFAULT), jnp.ones(3, bool), DEFAULT), "finite must be .*Array"),  # not one step's
    (lambda: ls.update(ls.init(DEFAULT), True, None), "cfg must be a LossScaleConfig, got NoneType None"),
    (lambda: ls.update((1024.0, 0), True, DEFAULT), r"state must be a LossScaleState .*got tuple \(1024.0, 0\)"),
])
def test_init_and_update_name_what_to_pass(call, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        call()
    cfg = ls.LossScaleConfig(init_scale=8.0, growth_interval=1)
    for finite in (True, np.bool_(True), jnp.asarray(True), np.array(True)):  # every bool the labs and steps pass
        assert float(ls.update(ls.init(cfg), finite, cfg).scale) == 16.0
    assert float(jax.jit(ls.update, static_argnums=2)(ls.init(cfg), jnp.asarray(False), cfg).scale) == 4.0  # a tracer


@pytest.mark.parametrize("cfg", [None, {"dynamic": True}])
def test_the_rule_refuses_a_config_that_is_not_one(cfg: object) -> None:
    # It read cfg.dynamic first: None gave "'NoneType' object has no attribute 'dynamic'".
    with pytest.raises(TypeError, match=r"cfg must be a LossScaleConfig, got .*static\(1024.0\)"):
        ls.next_scale(8.0, 0, True, cfg)  # type: ignore[arg-type]


def test_best_scales_names_the_keys_it_needs() -> None:
    with pytest.raises(ValueError, match=r"keys \['loss scale', 'rel error vs fp32', 'finite'\]; row 0 lacks \['rel error vs fp32'\]"):
        ls.best_scales([{"finite": True, "err": 0.1, "loss scale": 1.0}])
    assert ls.best_scales([{"finite": True, "rel error vs fp32": 0.1, "loss scale": 4.0}]) == [4.0]


def test_grows_after_n_good_steps_and_backs_off_on_overflow() -> None:
    cfg = ls.LossScaleConfig(init_scale=16.0, growth_interval=3)
    s, g, seen = 16.0, 0, []
    for finite in [True, True, True, True, True, False, True]:
        s, g = ls.next_scale(s, g, finite, cfg)
        seen.append((s, g))
    assert seen == [(16, 1), (16, 2), (32, 0), (32, 1), (32, 2), (16, 0), (16, 1)]
    assert ls.next_scale(16.0, 2, False, ls.static(16.0)) == (16.0, 2)  # static never moves


@settings(max_examples=40, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=30), st.integers(1, 5),
       st.sampled_from([2.0, 4.0]), st.sampled_from([0.5, 0.25]))
def test_jax_update_equals_the_python_rule(pattern: list[bool], n: int, gf: float, bf: float) -> None:
    cfg = ls.LossScaleConfig(init_scale=2.0**10, growth_factor=gf, backoff_factor=bf, growth_interval=n)
    state, py = ls.init(cfg), (2.0**10, 0)
    for finite in pattern:
        state = _jit_update(state, jnp.asarray(finite), cfg)
        py = ls.next_scale(*py, finite, cfg)
        assert (float(state.scale), int(state.good_steps)) == py


_jit_update = jax.jit(ls.update, static_argnums=2)


def _grad_scaler_run(pattern: list[bool], cfg: ls.LossScaleConfig) -> tuple[list[float], list[bool]]:
    """torch.amp.GradScaler on CPU: scale after each step and whether opt.step() was skipped."""
    p = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.Adam([p], lr=0.1)
    scaler = ls.torch_grad_scaler(cfg, "cpu")
    scales, skipped = [], []
    for i, finite in enumerate(pattern):
        opt.zero_grad()
        bad = [float("inf"), float("nan")][i % 2]  # both kinds of non-finite
        before = (p.detach().clone(), {k: v.clone() for k, v in opt.state[p].items()} if opt.state else {})
        scaler.scale((p * (1.0 if finite else bad)).sum()).backward()
        scaler.step(opt)
        scaler.update()
        unchanged = torch.equal(before[0], p.detach()) and all(
            torch.equal(v, opt.state[p][k]) for k, v in before[1].items())
        scales.append(scaler.get_scale())
        skipped.append(unchanged)
    return scales, skipped


def test_torch_grad_scaler_on_cpu_matches_the_rule_and_skips() -> None:
    cfg = ls.LossScaleConfig(init_scale=2.0**8, growth_interval=2)
    pattern = [True, True, True, False, False, True, True, True, False, True]
    scales, skipped = _grad_scaler_run(pattern, cfg)
    s, g, want = cfg.init_scale, 0, []
    for finite in pattern:
        s, g = ls.next_scale(s, g, finite, cfg)
        want.append(s)
    assert scales == want
    assert skipped == [not f for f in pattern]  # weights and Adam state untouched exactly then


def test_jax_and_torch_agree_step_by_step() -> None:
    cfg = ls.LossScaleConfig(init_scale=2.0**12, growth_interval=3)
    pattern = [True] * 7 + [False] + [True] * 5 + [False, False, True]
    torch_scales, _ = _grad_scaler_run(pattern, cfg)
    state, jax_scales = ls.init(cfg), []
    for finite in pattern:
        state = ls.update(state, jnp.asarray(finite), cfg)
        jax_scales.append(float(state.scale))
    assert jax_scales == torch_scales


def test_flax_dynamic_scale_grows_one_step_later() -> None:
    """Why we did not use flax's DynamicScale: its interval N behaves like our N + 1."""
    from flax.training.dynamic_scale import DynamicScale

    n = 3
    cfg = ls.LossScaleConfig(init_scale=4.0, growth_interval=n)
    pattern = [True] * 9 + [False] + [True] * 5
    ours, state = [], ls.init(cfg)
    ds = DynamicScale(growth_interval=n - 1, scale=4.0)
    theirs = []
    for finite in pattern:
        state = ls.update(state, jnp.asarray(finite), cfg)
        ours.append(float(state.scale))
        ds, fin, _, _ = ds.value_and_grad(lambda w: w * (1.0 if finite else jnp.inf))(jnp.asarray(1.0))
        assert bool(fin) == finite
        theirs.append(float(ds.scale))
    assert ours == theirs
    same_n = DynamicScale(growth_interval=n, scale=4.0)
    for _ in range(n):
        same_n, *_ = same_n.value_and_grad(lambda w: w)(jnp.asarray(1.0))
    assert float(same_n.scale) == 4.0  # GradScaler (and ours) would have grown by now


def test_all_finite_detects_inf_and_nan_in_any_leaf() -> None:
    tree = {"a": jnp.ones(3), "b": [jnp.zeros((2, 2), jnp.float16), jnp.ones(1)]}
    assert bool(ls.all_finite(tree))
    for bad in (jnp.inf, -jnp.inf, jnp.nan):
        broken = {"a": tree["a"], "b": [tree["b"][0].at[1, 1].set(bad), tree["b"][1]]}
        assert not bool(ls.all_finite(broken))
    assert bool(ls.all_finite({}))


def test_jax_step_skips_and_backs_off_on_non_finite_gradients() -> None:
    """A whole scaled step: scale the loss, unscale the grads, skip on overflow, update the scale."""
    cfg = ls.LossScaleConfig(init_scale=2.0**4, growth_interval=2)

    @jax.jit
    def step(w: jax.Array, state: ls.LossScaleState, x: jax.Array) -> tuple:
        loss_fn = lambda w: ls.scale_loss(jnp.sum((w * x).astype(jnp.float16)), state)  # noqa: E731
        grads = ls.unscale(jax.grad(loss_fn)(w), state)
        finite = ls.all_finite(grads)
        new_w = ls.select(finite, w - 0.1 * grads, w)
        return new_w, ls.update(state, finite, cfg), grads

    w, state = jnp.ones(3), ls.init(cfg)
    w1, s1, g1 = step(w, state, jnp.full(3, 2.0))
    np.testing.assert_allclose(np.asarray(g1), 2.0)  # unscaled: the true gradient
    assert g1.dtype == jnp.float32 and float(s1.scale) == 16.0 and int(s1.good_steps) == 1
    w2, s2, _ = step(w1, s1, jnp.array([2.0, jnp.nan, 1.0]))
    np.testing.assert_array_equal(np.asarray(w2), np.asarray(w1))  # skipped
    assert float(s2.scale) == 8.0 and int(s2.good_steps) == 0
    w3, s3, _ = step(w2, s2, jnp.full(3, 1.0))
    _, s4, _ = step(w3, s3, jnp.full(3, 1.0))
    assert float(s4.scale) == 16.0  # two good steps: grown again


def test_torch_helpers() -> None:
    a, b = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
    (a * 4.0).sum().backward()
    assert ls.torch_grads_finite([a, b])  # b has no grad: counts as finite
    ls.torch_unscale_([a, b], 4.0)
    assert torch.equal(a.grad, torch.ones(2))
    b.grad = torch.tensor([1.0, float("nan")])
    assert not ls.torch_grads_finite([a, b])
    with pytest.raises(ValueError, match="GradScaler is always dynamic"):
        ls.torch_grad_scaler(ls.static(8.0))


def test_fp16_gradients_underflow_without_scaling() -> None:
    from labkit.gpt.data import ByteTokenizer, get_batch, load_corpus
    from labkit.gpt.config import get_config
    from labkit.precision.train import init_flat

    cfg = get_config("test")
    flat = init_flat(cfg, seed=0)
    tokens = ByteTokenizer().encode(load_corpus())
    x, y = get_batch(tokens, 4, cfg.seq_len, np.random.default_rng(1))
    rows = ls.grad_underflow(cfg, [1.0, 2.0**16, 2.0**44], x, y, flat, tokens_per_batch=2**19)
    unscaled, scaled, huge = rows
    assert unscaled["zeroed (underflow) fraction"] > 0.1 and unscaled["rel error vs fp32"] > 0.1
    assert scaled["zeroed (underflow) fraction"] < 1e-3 and scaled["rel error vs fp32"] < 1e-2
    assert not huge["finite"] and huge["rel error vs fp32"] == math.inf
    with pytest.raises(ValueError, match=r"scales\[0\] must be a finite number > 0, got 0.0"):
        ls.grad_underflow(cfg, [0.0], x, y, flat)
