"""labkit.precision.fp8_train (Lab 04): each fp8 recipe trains the MLP as well as fp32, up to the seed noise floor."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from labkit.precision import fp8_train, noise, recipes

CFG = fp8_train.MLPConfig(steps=120)


@pytest.fixture(scope="module")
def fp32() -> tuple[list[float], list[float]]:
    return fp8_train.train_mlp(None, CFG), fp8_train.train_mlp(None, CFG, init_seed=1)  # the lab's floor: same batches


def test_fp32_learns_and_is_reproducible(fp32: tuple) -> None:
    ref, other = fp32
    assert ref[-1] < ref[0] / 5 and other[-1] < other[0] / 5
    assert fp8_train.train_mlp(None, CFG) == ref and ref != other
    assert fp8_train.train_mlp(None, CFG, init_seed=0) == ref  # init_seed redraws the init only: seed 0's again


@pytest.mark.parametrize("recipe", recipes.RECIPES)
def test_each_recipe_trains_within_the_noise_floor(fp32: tuple, recipe: str) -> None:
    ref, other = fp32
    losses = fp8_train.train_mlp(recipe, CFG)
    j = noise.judge(losses, ref, other, start=20)
    assert j.within_noise, j.sentence(recipe)
    assert losses != ref  # the casts did change something
    assert np.all(np.isfinite(losses))


@pytest.mark.parametrize("recipe", recipes.RECIPES)
def test_forward_operands_are_e4m3_and_gradients_e5m2(recipe: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every matmul's fp8 formats, recorded by a spy on qmatmul; the gradient operands found by value, not by name.

    dL/dout is recomputed from the forward's output and the teacher, dL/dh from the backward matmul that
    takes dL/dout and the ReLU mask: exactly these three operands per step must be e5m2, all others e4m3.
    """
    real, calls = fp8_train.qmatmul, []

    def spy(a, b, rec, fmts, delayed, names):  # the real fp8 matmul, recording what went in and out
        out = real(a, b, rec, fmts, delayed, names)
        calls.append({"ops": (np.array(a), np.array(b)), "fmts": tuple(fmts), "names": tuple(names), "out": out})
        return out

    monkeypatch.setattr(fp8_train, "qmatmul", spy)
    cfg = fp8_train.MLPConfig(steps=3)
    fp8_train.train_mlp(recipe, cfg)
    assert len(calls) == 5 * cfg.steps  # two forward, three backward matmuls per step
    t1, t2 = fp8_train._teacher(cfg)
    for step in range(cfg.steps):
        fwd1, fwd2, *bwd = calls[5 * step: 5 * step + 5]
        x, pre, out = fwd1["ops"][0], fwd1["out"], fwd2["out"]
        g_out = (out - np.tanh(x @ t1) @ t2) / cfg.batch  # dL/dout of 0.5 * mean squared error
        (g_h_call,) = [c for c in bwd if np.array_equal(c["ops"][0], g_out)]  # g_out @ w2^T
        g_h = g_h_call["out"] * (pre > 0)
        grads, found = (g_out, g_out.T, g_h, g_h.T), []
        for c in (fwd1, fwd2, *bwd):
            for op, fmt, name in zip(c["ops"], c["fmts"], c["names"]):
                is_grad = any(op.shape == g.shape and np.array_equal(op, g) for g in grads)
                found += [name] if is_grad else []
                assert fmt == (recipes.E5M2 if is_grad else recipes.E4M3), f"step {step}: {name} cast to {fmt}"
        assert sorted(found) == ["g_h", "g_out", "g_out"]  # dW2 and dx take g_out, dW1 takes g_h


def _first_operands(monkeypatch: pytest.MonkeyPatch, **kw) -> list[np.ndarray]:
    """The batches x (the first forward matmul's left operand) of a 3-step run."""
    real, xs = fp8_train.qmatmul, []
    monkeypatch.setattr(fp8_train, "qmatmul", lambda a, b, *rest: (xs.append(np.array(a)) if rest[-1][0] == "x" else None)
                        or real(a, b, *rest))
    fp8_train.train_mlp("current", fp8_train.MLPConfig(steps=3), **kw)
    monkeypatch.undo()
    return xs


def test_init_seed_keeps_the_batches_and_seed_changes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lab's floor pairs two inits on the same batches, as section 6 does (review: it changed both)."""
    base = _first_operands(monkeypatch)
    assert all(np.array_equal(a, b) for a, b in zip(base, _first_operands(monkeypatch, init_seed=1)))
    assert not np.array_equal(base[0], _first_operands(monkeypatch, seed=1)[0])


def test_the_unscaled_control_fails_where_every_recipe_is_blind_to_the_divisor(fp32: tuple) -> None:
    """A loss divided over 2^14 micro-batches: fp32 and the scaled recipes give the very same losses (a power of
    two cancels in their scales); the bare cast flushes the small gradients and the judge must flag it."""
    ref, other = fp32
    small = replace(CFG, loss_divisor=2.0**14)
    assert fp8_train.train_mlp(None, small) == ref
    for recipe in ("current", "rowwise", "block"):
        assert fp8_train.train_mlp(recipe, small) == fp8_train.train_mlp(recipe, CFG), recipe
    j = noise.judge(fp8_train.train_mlp(recipes.UNSCALED, small), ref, other, start=20)
    assert not j.within_noise and j.drift > 0 and j.ratio > 10 * noise.K_NOISE
    assert noise.judge(fp8_train.train_mlp(recipes.UNSCALED, CFG), ref, other, start=20).within_noise  # O(1) values fit


@pytest.mark.parametrize(("kw", "err", "match"), [
    ({"cfg": fp8_train.MLPConfig(loss_divisor=0.0)}, ValueError, "loss_divisor must be a finite number > 0"),
    ({"init_seed": -1}, ValueError, "init_seed must be >= 0, got -1"),
    ({"seed": 0.5}, TypeError, "seed must be a whole number"),
])
def test_bad_settings_name_the_value(kw: dict, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        fp8_train.train_mlp(None, **kw)
