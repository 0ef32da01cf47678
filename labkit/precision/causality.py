"""Does the model still see only the past in this precision? A leak probe for a run that ends below fp32 (Lab 04).

A language model's training loss can fall below fp32's for a bad reason: if a position's logits
depend on *later* tokens, the model can read the answer. Fused attention kernels take the causal
mask as a flag (``is_causal=True``), and a kernel or a dispatch path that drops it in one dtype
would show up exactly as a low-precision run that "beats" fp32. (A run that leaves a loss plateau
earlier shows up the same way without any leak: :mod:`labkit.precision.plateau`.)

The probe runs what training runs: one step of the training transform -- ``jax.value_and_grad``
under ``jax.jit`` (JAX), autograd with the model in train mode under ``torch.autocast`` (PyTorch) --
in the run's compute dtype, fp32-matmul setting, device and batch shape. That matters: JAX's cuDNN
attention is a different kernel graph under differentiation (its forward rule binds
``is_training=True``; a plain jitted forward binds ``False``), and the backward kernels compute the
gradients training applies. The loss of the probe step is the cross-entropy of the positions
*before* ``cut`` only. Two verdicts, each a ratio that needs no scale:

- **forward**: the step runs twice, the second time with every token from ``cut`` on replaced;
  ``max |Δ logits[:, :cut]| / max |Δ logits[:, cut:]|`` (the logits the differentiated forward
  produced). A causal model's earlier rows are computed from the same inputs: 0 or rounding-small.
- **backward**: the gradient of that loss with respect to the position embeddings ``wpe``. Row
  ``j`` enters only position ``j``'s residual stream, so a loss on positions ``< cut`` reaches rows
  ``>= cut`` only through attention to later keys -- exactly what the mask forbids:
  ``max |∂L/∂wpe[cut:]| / max |∂L/∂wpe[:cut]|`` is 0 for causal forward *and* backward kernels.

The weights are the run's start weights with the attention *value* path amplified (``GAIN`` on the
value projection and on the output projection): at GPT-2's init (std 0.02) a token's own embedding,
through the tied head, moves its logits far more than attention moves anyone's, so a leak would
hide under a ratio of 1e-2. A kernel reads its mask flag whatever the weights are, so the probe may
choose weights that make attention visible. What it cannot see: a kernel that misbehaves only at
another shape or on later steps (it probes the first batch's shape, once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from labkit.gpt.config import GPTConfig

LEAK_LIMIT = 1e-2  # above this the earlier positions saw the change: a leak, not rounding
GAIN = 10.0  # on the value rows of attn.qkv and on attn.proj: attention's share of the logits x 100


def attention_heavy(flat: dict[str, np.ndarray], d_model: int, gain: float = GAIN) -> dict[str, np.ndarray]:
    """(Lab 04) A copy of canonical weights with every layer's value projection and attn.proj times `gain`."""
    out = dict(flat)
    for name, w in flat.items():
        if name.endswith("attn.qkv.weight"):  # (3 d_model, d_model): rows q, k, v
            w = w.copy()
            w[2 * d_model:] *= gain
            out[name] = w
        elif name.endswith("attn.proj.weight"):
            out[name] = w * gain
    return out


def _perturbed(tokens: np.ndarray, cut: int, vocab: int, seed: int) -> np.ndarray:
    """tokens (batch, seq) with every token from `cut` on replaced by a different one."""
    rng = np.random.default_rng(seed)
    out = tokens.copy()
    shift = rng.integers(1, vocab, size=out[:, cut:].shape)  # never 0: each token really changes
    out[:, cut:] = (out[:, cut:] + shift) % vocab
    return out


@dataclass(frozen=True)
class Leak:
    """(Lab 04) The probe's two ratios (0 for a causal model): what the differentiated forward and backward read."""

    forward: float   # max |Δ logits before cut| / max |Δ logits from cut on|, when tokens from cut change
    backward: float  # max |∂L/∂wpe[cut:]| / max |∂L/∂wpe[:cut]|, L = loss of the positions before cut

    @property
    def worst(self) -> float:
        """(Lab 04) The larger of the two ratios: the verdict."""
        return max(self.forward, self.backward)


def _jax_step(cfg: GPTConfig, precision: str, flat: dict[str, np.ndarray], cut: int,
              fp32_matmul: str) -> Any:
    """tokens -> (logits, ∂L/∂wpe): one differentiated step, as train_jax's (value_and_grad under jit)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from labkit.gpt.flax_model import cross_entropy_jax
    from labkit.precision.train import fp32_matmul_context
    from labkit.precision.train_jax import jax_parts

    graphdef, params, rest = jax_parts(cfg, precision, flat)  # the compute dtype the training used

    def loss_before_cut(p: Any, x: Any) -> Any:
        logits = nnx.merge(graphdef, p, rest)(x)  # (batch, seq, vocab)
        return cross_entropy_jax(logits[:, :cut], x[:, :cut]), logits  # targets: any tokens will do

    step = jax.jit(jax.value_and_grad(loss_before_cut, has_aux=True))

    def run(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with fp32_matmul_context("jax", fp32_matmul):  # traced inside, as train_jax's step
            (_, logits), grads = step(params, jnp.asarray(tokens))
        return np.asarray(logits, np.float32), np.asarray(grads["wpe"]["embedding"], np.float32)

    return run


def _torch_step(cfg: GPTConfig, precision: str, flat: dict[str, np.ndarray], cut: int, device: Any,
                fp32_matmul: str) -> Any:
    """tokens -> (logits, ∂L/∂wpe): one autograd step in train mode under autocast, as train_torch's."""
    import torch

    from labkit.gpt.convert import load_flat_params
    from labkit.gpt.torch_model import TorchGPT, cross_entropy_torch
    from labkit.precision.train import _torch_dtype, fp32_matmul_context

    dev = torch.device(device)
    model = load_flat_params(TorchGPT(cfg), flat).to(dev).train()
    dt = _torch_dtype(precision)

    def run(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        model.zero_grad(set_to_none=True)
        x = torch.as_tensor(tokens, dtype=torch.long, device=dev)
        with fp32_matmul_context("torch", fp32_matmul, dev):
            with torch.autocast(dev.type, dtype=dt, enabled=dt != torch.float32):
                logits = model(x)  # (batch, seq, vocab)
                loss = cross_entropy_torch(logits[:, :cut], x[:, :cut])
            loss.backward()  # outside autocast, as in training
        return logits.detach().float().cpu().numpy(), model.wpe.weight.grad.float().cpu().numpy()

    return run


def probe(framework: str, cfg: GPTConfig, precision: str, flat: dict[str, np.ndarray], tokens: np.ndarray,
          cut: int | None = None, device: Any = "cpu", seed: int = 0, fp32_matmul: str = "default") -> Leak:
    """(Lab 04) Forward and backward leak ratios of one training step (value_and_grad / autograd), see the module.

    `flat`: the run's canonical start weights (attention is amplified here, see the module docstring);
    `tokens` (batch, seq): a batch of the training data, at the training shape (kernels are chosen per
    shape); `fp32_matmul`: the run's TrainConfig.fp32_matmul.
    """
    from labkit.precision.train import check_fp32_matmul

    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or tokens.shape[1] < 2:
        raise ValueError(f"tokens must be (batch, seq) with seq >= 2, got shape {tokens.shape}")
    seq = tokens.shape[1]
    cut = seq // 2 if cut is None else cut
    if not 1 <= cut < seq:
        raise ValueError(f"cut must be in [1, {seq - 1}] for sequences of {seq} tokens, got {cut}")
    if framework not in ("jax", "torch"):
        raise ValueError(f"framework must be 'jax' or 'torch', got {framework!r}")
    check_fp32_matmul(fp32_matmul, " (the run's TrainConfig.fp32_matmul)")
    heavy = attention_heavy(flat, cfg.d_model)
    run = (_jax_step(cfg, precision, heavy, cut, fp32_matmul) if framework == "jax"
           else _torch_step(cfg, precision, heavy, cut, device, fp32_matmul))
    (a, grad), (b, _) = run(tokens), run(_perturbed(tokens, cut, cfg.vocab_size, seed))
    after = float(np.max(np.abs(a[:, cut:] - b[:, cut:])))
    own = float(np.max(np.abs(grad[:cut])))  # rows the loss reads directly
    if not (after > 0 and own > 0):
        raise RuntimeError(f"{framework} {precision}: changing tokens {cut}.. left their own logits unchanged, or the "
                           "loss has no gradient for its own positions; the probe cannot judge such a model")
    return Leak(forward=float(np.max(np.abs(a[:, :cut] - b[:, :cut]))) / after,
                backward=float(np.max(np.abs(grad[cut:seq]))) / own)


def leak_ratio(framework: str, cfg: GPTConfig, precision: str, flat: dict[str, np.ndarray], tokens: np.ndarray,
               cut: int | None = None, device: Any = "cpu", seed: int = 0, fp32_matmul: str = "default") -> float:
    """(Lab 04) The worse of :func:`probe`'s forward and backward ratios (0 for a causal model)."""
    return probe(framework, cfg, precision, flat, tokens, cut, device, seed, fp32_matmul).worst
