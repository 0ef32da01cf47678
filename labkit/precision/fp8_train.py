"""A short fp8 training run per recipe: a two-layer MLP in numpy, every matmul through fp8 (Lab 04).

Small enough to train in seconds on a CPU and explicit enough to read: the forward matmuls cast
both operands to e4m3, the backward ones cast the gradient to e5m2 (Transformer Engine's HYBRID
format), each by the chosen recipe of :mod:`labkit.precision.recipes`; delayed scaling keeps one
amax history per tensor role ("x", "w1", "h", "w2", "g_out", "g_h", ...). Weights, gradients
and the Adam state stay fp32 (float64 here): only the matmul inputs are fp8, as in fp8 training
with fp32 master weights. The task is regression onto a fixed random teacher network, so the
loss has a known floor of 0 and every recipe sees the same batches.

Two knobs make the judge's checks possible: ``init_seed`` draws another init while keeping the
batches of ``seed`` (the noise floor, paired as in Lab 04's section 6), and ``MLPConfig.loss_divisor``
divides the loss before the backward -- as gradient accumulation over that many micro-batches does --
and multiplies the fp32 gradients back after it, so only the fp8 casts see gradients that small. A
recipe's scale follows the tensor, so a power-of-two divisor changes nothing for current, rowwise
and block scaling; the ``unscaled`` control (scale 1) flushes those gradients to 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labkit.gpt.data import check_count, check_real
from labkit.precision.recipes import E4M3, E5M2, DelayedScaling, qmatmul


@dataclass(frozen=True)
class MLPConfig:
    """(Lab 04) Sizes and optimizer of the fp8 training demo."""

    d_in: int = 32
    d_hidden: int = 128
    d_out: int = 8
    batch: int = 32
    steps: int = 150
    lr: float = 3e-3        # Adam, betas (0.9, 0.999)
    history_len: int = 16   # delayed scaling's amax window (TE's default is 1024 for long runs)
    loss_divisor: float = 1.0  # micro-batches the loss is divided over (fp32 gradients multiplied back)


def _teacher(cfg: MLPConfig) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1234)  # the task is fixed; seeds vary the student and the batches
    return (rng.standard_normal((cfg.d_in, cfg.d_hidden)) / np.sqrt(cfg.d_in),
            rng.standard_normal((cfg.d_hidden, cfg.d_out)) / np.sqrt(cfg.d_hidden))


def _init(cfg: MLPConfig, rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.standard_normal((cfg.d_in, cfg.d_hidden)) * np.sqrt(2 / cfg.d_in),
            rng.standard_normal((cfg.d_hidden, cfg.d_out)) * np.sqrt(1 / cfg.d_hidden)]


def train_mlp(recipe: str | None, cfg: MLPConfig = MLPConfig(), seed: int = 0,
              init_seed: int | None = None) -> list[float]:
    """(Lab 04) Losses per step of the MLP with its matmuls through fp8 by ``recipe`` (None: fp32).

    ``seed`` draws the init and the batches; ``init_seed`` (if given) redraws only the init.
    """
    div = check_real(cfg.loss_divisor, "loss_divisor", 0.0, hint="; e.g. 1.0, or 2**14 micro-batches")
    t1, t2 = _teacher(cfg)
    rng = np.random.default_rng(check_count(seed, "seed", 0, example=0))
    w = _init(cfg, rng)  # drawn from rng either way, so the batches after it do not depend on init_seed
    if init_seed is not None:
        w = _init(cfg, np.random.default_rng(check_count(init_seed, "init_seed", 0, example=1)))
    m, v = [np.zeros_like(p) for p in w], [np.zeros_like(p) for p in w]
    d = DelayedScaling(cfg.history_len) if recipe == "delayed" else None
    fwd, bwd_g, bwd_x = (E4M3, E4M3), (E5M2, E4M3), (E4M3, E5M2)  # gradients in e5m2
    mm = lambda a, b, f, names: qmatmul(a, b, recipe, f, d, names)  # noqa: E731
    losses = []
    for step in range(cfg.steps):
        x = rng.standard_normal((cfg.batch, cfg.d_in))  # (batch, d_in)
        y = np.tanh(x @ t1) @ t2  # the teacher's output, float64
        pre = mm(x, w[0], fwd, ("x", "w1"))  # (batch, d_hidden)
        h = np.maximum(pre, 0.0)
        out = mm(h, w[1], fwd, ("h", "w2"))  # (batch, d_out)
        losses.append(float(0.5 * np.mean(np.sum((out - y) ** 2, axis=1))))
        g_out = (out - y) / cfg.batch / div  # dL/dout of the loss divided over `div` micro-batches
        grads = [None, mm(h.T, g_out, bwd_x, ("h^T", "g_out"))]  # dW2 = h^T @ g_out
        g_h = mm(g_out, w[1].T, bwd_g, ("g_out", "w2^T")) * (pre > 0)  # dL/dh through the ReLU
        grads[0] = mm(x.T, g_h, bwd_x, ("x^T", "g_h"))  # dW1 = x^T @ g_h
        grads = [g * div for g in grads]  # fp32 again: what summing the micro-batches restores
        for i, g in enumerate(grads):  # Adam on the fp32 master weights
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            mh, vh = m[i] / (1 - 0.9 ** (step + 1)), v[i] / (1 - 0.999 ** (step + 1))
            w[i] = w[i] - cfg.lr * mh / (np.sqrt(vh) + 1e-8)
    return losses
