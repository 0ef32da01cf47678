"""A short fp8 training run per recipe: a two-layer MLP in numpy, every matmul through fp8 (Lab 04).

Small enough to train in seconds on a CPU and explicit enough to read: the forward matmuls cast
both operands to e4m3, the backward ones cast the gradient to e5m2 (Transformer Engine's HYBRID
format), each by the chosen recipe of :mod:`labkit.precision.recipes`; delayed scaling keeps one
amax history per tensor role ("x", "w1", "h", "w2", "g_out", "g_h", ...). Weights, gradients
and the Adam state stay fp32 (float64 here): only the matmul inputs are fp8, as in fp8 training
with fp32 master weights. The task is regression onto a fixed random teacher network, so the
loss has a known floor of 0 and every recipe sees the same batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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


def _teacher(cfg: MLPConfig) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1234)  # the task is fixed; seeds vary the student and the batches
    return (rng.standard_normal((cfg.d_in, cfg.d_hidden)) / np.sqrt(cfg.d_in),
            rng.standard_normal((cfg.d_hidden, cfg.d_out)) / np.sqrt(cfg.d_hidden))


def train_mlp(recipe: str | None, cfg: MLPConfig = MLPConfig(), seed: int = 0) -> list[float]:
    """(Lab 04) Losses per step of the MLP with its matmuls through fp8 by ``recipe`` (None: fp32)."""
    t1, t2 = _teacher(cfg)
    rng = np.random.default_rng(seed)
    w = [rng.standard_normal((cfg.d_in, cfg.d_hidden)) * np.sqrt(2 / cfg.d_in),
         rng.standard_normal((cfg.d_hidden, cfg.d_out)) * np.sqrt(1 / cfg.d_hidden)]
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
        g_out = (out - y) / cfg.batch  # dL/dout
        grads = [None, mm(h.T, g_out, bwd_x, ("h^T", "g_out"))]  # dW2 = h^T @ g_out
        g_h = mm(g_out, w[1].T, bwd_g, ("g_out", "w2^T")) * (pre > 0)  # dL/dh through the ReLU
        grads[0] = mm(x.T, g_h, bwd_x, ("x^T", "g_h"))  # dW1 = x^T @ g_h
        for i, g in enumerate(grads):  # Adam on the fp32 master weights
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            mh, vh = m[i] / (1 - 0.9 ** (step + 1)), v[i] / (1 - 0.999 ** (step + 1))
            w[i] = w[i] - cfg.lr * mh / (np.sqrt(vh) + 1e-8)
    return losses
