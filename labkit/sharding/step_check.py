"""Is a sharded step the unsharded step? Gradients before Adam, weights after it (Lab 03).

Comparing the updated weights alone is a weak test: Adam's first step moves a weight by
lr · g / (|g| + eps), about lr · sign(g), so a gradient that cancels to near zero (|g| ~ eps =
1e-8) turns fp32 rounding noise in the order of additions into a visible weight change, up to a
full 2 lr when its sign flips. So the gradients are compared first, each parameter's against its
own scale (max |Δg| / max |g_ref|), and the weights are then checked against the bound Adam's
update rule puts on them given those gradient differences: per element, the slope of
f(g) = g / (|g| + eps) over the interval between the two gradients, times their difference, and
fp32 rounding of the update and of w + update.

The gradients come out of Adam's own state: after one step from zero moments mu = (1 - b1) · g,
so no second program has to be compiled to see them.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

B1 = 0.9  # Adam's first-moment decay: optax.adam's default, which train_step.make_optimizer uses
EPS = 1e-8  # Adam's eps (optax.adam's default): below |g| ~ eps the update is no longer ~ lr·sign(g)
E32 = float(np.finfo(np.float32).eps)  # 2^-23: one fp32 ulp of 1.0


def adam_grads(opt_state: Any) -> dict[str, np.ndarray]:
    """(Lab 03) {name: gradient} recovered from optax Adam's state after its first step: mu / (1 - b1)."""
    adam = opt_state[0]  # (ScaleByAdamState(count, mu, nu), EmptyState())
    count = int(np.asarray(adam.count))
    if count != 1:
        raise ValueError(f"mu = (1 - b1)·g only after the first step; this Adam state has taken {count}")
    return {k: np.asarray(v, np.float64) / (1 - B1) for k, v in _numpy(adam.mu).items()}


def grad_rel_diff(grads: Mapping[str, Any], ref: Mapping[str, Any]) -> dict[str, float]:
    """(Lab 03) {name: max |g - g_ref| / max |g_ref|}: each parameter's gradient error on its own scale."""
    if grads.keys() != ref.keys():
        raise ValueError(f"different parameter names: {sorted(grads.keys() ^ ref.keys())[:5]}")
    out = {}
    for k in ref:
        g, r = np.asarray(grads[k], np.float64), np.asarray(ref[k], np.float64)
        scale = float(np.max(np.abs(r)))
        out[k] = float(np.max(np.abs(g - r))) / scale if scale > 0 else float(np.max(np.abs(g)))
    return out


def adam_step_bound(g: Any, g_ref: Any, w: Any, lr: float, eps: float = EPS) -> np.ndarray:
    """(Lab 03) Per element, the most two first Adam steps from weights w with gradients g, g_ref can differ.

    f(g) = g / (|g| + eps) has slope eps / (|g| + eps)², largest nearest zero: over the interval
    between g and g_ref it is at most eps / (m + eps)² with m = min(|g|, |g_ref|) when they share a
    sign, 1 / eps when the sign flips; f stays in (-1, 1), so never more than 2 lr. Plus rounding:
    ~8 ulps of lr in m̂ / (√v̂ + eps), and one ulp of (|w| + lr) for each side's w + update (the
    results are rounded to fp32 at different magnitudes).
    """
    g, g_ref, w = (np.asarray(a, np.float64) for a in (g, g_ref, w))
    same = np.sign(g) == np.sign(g_ref)
    m = np.where(same, np.minimum(np.abs(g), np.abs(g_ref)), 0.0)
    slope = np.minimum(2.0, np.abs(g - g_ref) * eps / (m + eps) ** 2)
    return lr * slope + 8 * E32 * lr + 2 * E32 * (np.abs(w) + lr)


def weight_excess(new: Mapping[str, Any], ref_new: Mapping[str, Any], grads: Mapping[str, Any],
                  ref_grads: Mapping[str, Any], w0: Mapping[str, Any], lr: float) -> float:
    """(Lab 03) Largest |w_new - w_ref_new| / adam_step_bound over every weight: <= 1 when Adam explains it."""
    worst = 0.0
    for k in ref_new:
        diff = np.abs(np.asarray(new[k], np.float64) - np.asarray(ref_new[k], np.float64))
        worst = max(worst, float(np.max(diff / adam_step_bound(grads[k], ref_grads[k], w0[k], lr))))
    return worst


def _numpy(tree: Mapping[str, Any]) -> dict[str, np.ndarray]:
    from labkit.sharding.layouts import to_numpy  # gathers other processes' shards when there are some

    return to_numpy(dict(tree))
