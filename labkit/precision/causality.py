"""Does the model still see only the past in this precision? A leak probe for a suspiciously good run (Lab 04).

A language model's training loss can fall below fp32's for a bad reason: if a position's logits
depend on *later* tokens, the model can read the answer. Fused attention kernels take the causal
mask as a flag (``is_causal=True``), and a kernel or a dispatch path that drops it in one dtype
would show up exactly as a low-precision run that "beats" fp32.

The probe runs the model twice on the same batch, the second time with every token from position
``cut`` on replaced, in the compute dtype and on the device the training used (so the same
attention kernel). A causal model's logits before ``cut`` are unchanged; the logits from ``cut`` on
change. The verdict is the ratio of the two changes, which needs no scale:

    leak = max |Δ logits[:, :cut]| / max |Δ logits[:, cut:]|   (0 for a causal model)

On every runtime where the mask holds, the positions before ``cut`` compute the same rows from the
same inputs, so the ratio is 0 or rounding-small; a dropped mask gives a ratio near 1.

The weights are the run's start weights with the attention *value* path amplified (``GAIN`` on the
value projection and on the output projection): at GPT-2's init (std 0.02) a token's own embedding,
through the tied head, moves its logits far more than attention moves anyone's, so a leak would
hide under a ratio of 1e-2. A kernel reads its mask flag whatever the weights are, so the probe may
choose weights that make attention visible.
"""

from __future__ import annotations

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


def _jax_logits(cfg: GPTConfig, precision: str, flat: dict[str, np.ndarray], tokens: np.ndarray) -> np.ndarray:
    import jax
    from flax import nnx

    from labkit.precision.train_jax import _jax_parts

    graphdef, params, rest = _jax_parts(cfg, precision, flat)  # the compute dtype the training used
    fwd = jax.jit(lambda p, x: nnx.merge(graphdef, p, rest)(x))
    return np.asarray(fwd(params, jax.numpy.asarray(tokens)), dtype=np.float32)  # (batch, seq, vocab)


def _torch_logits(cfg: GPTConfig, precision: str, flat: dict[str, np.ndarray], tokens: np.ndarray,
                  device: Any) -> np.ndarray:
    import torch

    from labkit.gpt.convert import load_flat_params
    from labkit.gpt.torch_model import TorchGPT
    from labkit.precision.train import _torch_dtype

    dev = torch.device(device)
    model = load_flat_params(TorchGPT(cfg), flat).to(dev).eval()
    dt = _torch_dtype(precision)
    with torch.no_grad(), torch.autocast(dev.type, dtype=dt, enabled=dt != torch.float32):
        out = model(torch.as_tensor(tokens, dtype=torch.long, device=dev))
    return out.float().cpu().numpy()


def leak_ratio(framework: str, cfg: GPTConfig, precision: str, flat: dict[str, np.ndarray], tokens: np.ndarray,
               cut: int | None = None, device: Any = "cpu", seed: int = 0) -> float:
    """(Lab 04) max |Δlogit| before `cut` over max |Δlogit| from `cut` on, when tokens from `cut` change.

    `flat`: the run's canonical start weights (attention is amplified here, see the module docstring);
    `tokens` (batch, seq): a batch of the training data, at the training shape where possible (kernels
    are chosen per shape).
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or tokens.shape[1] < 2:
        raise ValueError(f"tokens must be (batch, seq) with seq >= 2, got shape {tokens.shape}")
    seq = tokens.shape[1]
    cut = seq // 2 if cut is None else cut
    if not 1 <= cut < seq:
        raise ValueError(f"cut must be in [1, {seq - 1}] for sequences of {seq} tokens, got {cut}")
    if framework not in ("jax", "torch"):
        raise ValueError(f"framework must be 'jax' or 'torch', got {framework!r}")
    heavy = attention_heavy(flat, cfg.d_model)

    def run(x: np.ndarray) -> np.ndarray:  # logits (batch, seq, vocab), fp32
        if framework == "jax":
            return _jax_logits(cfg, precision, heavy, x)
        return _torch_logits(cfg, precision, heavy, x, device)

    a, b = run(tokens), run(_perturbed(tokens, cut, cfg.vocab_size, seed))
    before = float(np.max(np.abs(a[:, :cut] - b[:, :cut])))
    after = float(np.max(np.abs(a[:, cut:] - b[:, cut:])))
    if not after > 0:
        raise RuntimeError(f"{framework} {precision}: changing tokens {cut}.. left their own logits unchanged; "
                           "the probe cannot judge a model that ignores its input")
    return before / after
