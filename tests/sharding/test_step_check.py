"""labkit.sharding.step_check: gradients from Adam's state, and the bound Adam puts on weight differences (Lab 03)."""

from __future__ import annotations

import numpy as np
import pytest

from labkit.sharding import step_check as sc


def adam_once(w: np.ndarray, g: np.ndarray, lr: float = 1e-3) -> tuple[np.ndarray, object]:
    import jax.numpy as jnp
    import optax

    opt = optax.adam(lr)  # what train_step.make_optimizer builds
    p, grads = {"w": jnp.asarray(w)}, {"w": jnp.asarray(g)}
    updates, state = opt.update(grads, opt.init(p), p)
    return np.asarray(optax.apply_updates(p, updates)["w"]), state


def test_gradients_come_back_out_of_adams_first_step() -> None:
    g = np.random.default_rng(0).standard_normal(1000).astype(np.float32) * 1e-3
    _, state = adam_once(np.zeros(1000, np.float32), g)
    back = sc.adam_grads(state)["w"]
    assert np.max(np.abs(back - g)) <= 2 * sc.E32 * np.max(np.abs(g))  # mu = (1 - b1) g, in fp32


def test_grad_rel_diff_is_on_each_parameters_own_scale() -> None:
    ref = {"a": np.array([1.0, -2.0]), "b": np.array([1e-6, 0.0])}
    got = {"a": np.array([1.0, -2.002]), "b": np.array([1.1e-6, 0.0])}
    d = sc.grad_rel_diff(got, ref)
    assert d["a"] == pytest.approx(1e-3) and d["b"] == pytest.approx(0.1)  # b's error is large for b, tiny in absolute
    with pytest.raises(ValueError, match="different parameter names"):
        sc.grad_rel_diff({"a": ref["a"]}, ref)


def test_bound_covers_adam_on_reordered_gradients_including_sign_flips() -> None:
    rng = np.random.default_rng(1)
    w = (rng.standard_normal(4000) * 0.02).astype(np.float32)
    g = np.concatenate([rng.standard_normal(2000) * 1e-3, rng.standard_normal(2000) * 2e-8]).astype(np.float32)
    g2 = (g + rng.standard_normal(4000) * 1e-9).astype(np.float32)  # reordering noise: flips the sign of tiny ones
    assert np.any(np.sign(g) != np.sign(g2))
    (w1, s1), (w2, s2) = adam_once(w, g), adam_once(w, g2)
    ga, gb = sc.adam_grads(s1), sc.adam_grads(s2)
    ratio = sc.weight_excess({"w": w1}, {"w": w2}, ga, gb, {"w": w}, 1e-3)
    assert 0.1 < ratio <= 1.05  # explained, and the bound is not loose
    assert np.max(np.abs(w1 - w2)) > 0.1 * 1e-3  # while an absolute tolerance of 10 % of lr would have failed


def test_a_wrong_update_exceeds_the_bound() -> None:
    rng = np.random.default_rng(2)
    w = (rng.standard_normal(100) * 0.02).astype(np.float32)
    g = (rng.standard_normal(100) * 1e-3).astype(np.float32)
    (w1, s1), (w2, s2) = adam_once(w, g), adam_once(w, g / 8)  # a gradient not summed over 8 devices ...
    ga, gb = sc.adam_grads(s1), sc.adam_grads(s2)
    assert max(sc.grad_rel_diff(ga, gb).values()) > 1  # ... is caught by the gradients
    (w3, _) = adam_once(w, -g)  # weights from the opposite gradient, blamed on the same gradients: far outside
    assert sc.weight_excess({"w": w3}, {"w": w1}, ga, ga, {"w": w}, 1e-3) > 100


def test_adam_grads_refuses_a_later_step() -> None:
    import jax.numpy as jnp
    import optax

    opt = optax.adam(1e-3)
    p = {"w": jnp.zeros(3)}
    s = opt.init(p)
    for _ in range(2):
        _, s = opt.update({"w": jnp.ones(3)}, s, p)
    with pytest.raises(ValueError, match="only after the first step"):
        sc.adam_grads(s)
