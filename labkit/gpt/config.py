"""One GPT, two frameworks: the config and the canonical weight names (Lab 02).

The model is defined once here, by :class:`GPTConfig` and by :func:`param_shapes` — the
canonical flat weight dict (names and shapes) that both implementations read and write:

- ``labkit.gpt.flax_model.FlaxGPT`` (Flax NNX) and ``labkit.gpt.torch_model.TorchGPT`` (PyTorch)
  are the two implementations; this module imports neither JAX nor torch, and
  :mod:`labkit.gpt.convert` moves weights between them.
- The canonical layout is PyTorch's ``state_dict`` (a Linear weight is ``(out, in)``): it is
  what safetensors files and GPU serving stacks expect, so the export lab (Lab 05) writes
  ``flat_params_numpy(model)`` as is. Flax's ``nnx.Linear`` kernel is ``(in, out)``; the Flax
  side transposes on the way in and out. Transposes and fp32 copies are exact, so conversion
  is bit-exact in both directions.

Architecture (GPT-2 / nanoGPT): token + learned position embeddings, ``n_layer`` pre-norm
blocks ``x + attn(ln1(x))``, ``x + mlp(ln2(x))`` with causal multi-head attention and a
GELU MLP, a final LayerNorm, and a head *tied* to the token embedding
(``logits = h @ wte.T``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class GPTConfig:
    """Shape of a decoder-only GPT, shared by the Flax and PyTorch models (Lab 02).

    Fixed choices, identical in both frameworks:

    - head **tied** to the token embedding: ``logits = ln_f(h) @ wte.T`` (no separate head);
    - Linear layers have **no bias** (nanoGPT ``bias=False``); LayerNorms keep scale and bias,
      ``eps = 1e-5``;
    - GELU is the **tanh approximation** (torch ``approximate="tanh"``,
      ``jax.nn.gelu(approximate=True)``) — the exact erf form differs slightly between
      libraries' kernels;
    - **no dropout** (``dropout`` must stay 0.0): both frameworks are then deterministic
      functions of the weights, which the cross-framework tests rely on.
    """

    vocab_size: int = 256  # tokens; 256 = the byte tokenizer of labkit.gpt.data
    seq_len: int = 256  # maximum positions (rows of the position embedding)
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 128
    d_ff: int = 0  # MLP hidden width; 0 means 4 * d_model
    dropout: float = 0.0  # fixed at 0.0, see the class docstring
    ln_eps: float = 1e-5  # LayerNorm epsilon, both frameworks

    def __post_init__(self) -> None:
        for f in _INT_FIELDS:  # numpy ints (from np.arange sweeps) become plain ints
            v = getattr(self, f)
            if isinstance(v, numbers.Integral) and not isinstance(v, bool):
                object.__setattr__(self, f, int(v))
        if self.d_ff == 0 and type(self.d_ff) is int and type(self.d_model) is int:  # frozen: set through object
            object.__setattr__(self, "d_ff", 4 * self.d_model)
        for f in _INT_FIELDS:
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                hint = "0 (= 4 * d_model) or " if f == "d_ff" else ""
                raise ValueError(f"GPTConfig.{f} must be a positive integer, got {v!r}; use "
                                 f"{hint}a whole number such as {f}={_DEFAULTS[f]}")
        eps = self.ln_eps
        if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not math.isfinite(eps) or eps <= 0:
            # eps keeps LayerNorm's 1/sqrt(var + eps) finite: <= 0 divides by zero on a constant row
            raise ValueError(f"GPTConfig.ln_eps (LayerNorm epsilon) must be a finite number > 0, got "
                             f"{eps!r}; use the default ln_eps=1e-5")
        if self.d_model % self.n_head:
            divisors = [h for h in range(1, self.d_model + 1) if self.d_model % h == 0]
            best = min(divisors, key=lambda h: abs(h - self.n_head))  # nearest head count
            up = -(-self.d_model // self.n_head) * self.n_head  # next multiple of n_head
            raise ValueError(
                f"n_head={self.n_head} does not divide d_model={self.d_model} (each head gets "
                f"d_model / n_head features). Use a divisor of {self.d_model}, e.g. "
                f"n_head={best}, or make d_model a multiple of {self.n_head}, e.g. d_model={up}."
            )
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, numbers.Real) or self.dropout != 0.0:
            raise ValueError(f"dropout must be 0.0 (got {self.dropout}): the course models "
                             "have no dropout so Flax and PyTorch agree exactly")

    @property
    def head_dim(self) -> int:
        """Features per attention head, d_model // n_head (Lab 02)."""
        return self.d_model // self.n_head


_INT_FIELDS = ("vocab_size", "seq_len", "n_layer", "n_head", "d_model", "d_ff")
_DEFAULTS = {f.name: f.default for f in fields(GPTConfig)} | {"d_ff": 512}  # examples for the messages

# Named sizes. The byte-level sizes (vocab 256) train on the shipped Shakespeare corpus; the
# GPT-2 sizes keep GPT-2's vocabulary (50257 padded to 50304 = 393 * 128, a matrix-unit
# friendly multiple) so their parameter counts match the literature (124M / 354M). Override
# with get_config("gpt2-small", vocab_size=256) to train one on bytes.
CONFIGS: dict[str, GPTConfig] = {
    "test": GPTConfig(vocab_size=256, seq_len=32, n_layer=2, n_head=2, d_model=32),
    "smoke": GPTConfig(vocab_size=256, seq_len=256, n_layer=5, n_head=4, d_model=128),
    "small": GPTConfig(vocab_size=256, seq_len=256, n_layer=6, n_head=6, d_model=384),
    "gpt2-small": GPTConfig(vocab_size=50304, seq_len=1024, n_layer=12, n_head=12, d_model=768),
    "gpt2-medium": GPTConfig(vocab_size=50304, seq_len=1024, n_layer=24, n_head=16, d_model=1024),
}


def get_config(name: str, **overrides: Any) -> GPTConfig:
    """A named GPTConfig, optionally with fields replaced, e.g. seq_len=512 (Lab 02)."""
    if not isinstance(name, str) or name not in CONFIGS:
        raise ValueError(f"unknown GPT config {name!r}; known: {', '.join(CONFIGS)}")
    known = {f.name for f in fields(GPTConfig)}
    bad = sorted(set(overrides) - known)
    if bad:
        raise ValueError(f"unknown GPTConfig field(s) {bad}; fields: {', '.join(sorted(known))}")
    cfg = CONFIGS[name]
    if "d_model" in overrides and "d_ff" not in overrides:
        overrides["d_ff"] = 0  # re-derive 4 * d_model for the new width
    return replace(cfg, **overrides)


def check_config(cfg: Any) -> GPTConfig:
    """``cfg`` if it is a GPTConfig; TypeError with the fix (a name -> get_config(name)) otherwise (Lab 02)."""
    if isinstance(cfg, GPTConfig):
        return cfg
    fix = f"; use get_config({cfg!r})" if isinstance(cfg, str) else f"; e.g. get_config({next(iter(CONFIGS))!r})"
    raise TypeError(f"cfg must be a GPTConfig, got {type(cfg).__name__} {cfg!r:.60}{fix}")


def n_params(cfg: GPTConfig, embeddings: bool = True) -> int:
    """Closed-form parameter count; embeddings=False drops wte and wpe (Kaplan's N) (Lab 02).

    The tied head has no weights of its own, but it still costs 2 * vocab * d_model FLOPs per
    token: count those separately (labkit.measure.flops) when you use the non-embedding N.
    """
    d, f, L = check_config(cfg).d_model, cfg.d_ff, cfg.n_layer
    per_block = (
        2 * 2 * d  # ln1, ln2: scale + bias
        + 3 * d * d  # fused q, k, v projection
        + d * d  # attention output projection
        + 2 * d * f  # MLP up (d -> f) and down (f -> d)
    )
    total = L * per_block + 2 * d  # + final LayerNorm
    if embeddings:
        total += cfg.vocab_size * d + cfg.seq_len * d  # wte (also the head) + wpe
    return total


def param_shapes(cfg: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Canonical flat weight names -> shapes (PyTorch layout); the single source of truth (Lab 05)."""
    d, f = check_config(cfg).d_model, cfg.d_ff
    shapes: dict[str, tuple[int, ...]] = {
        "wte.weight": (cfg.vocab_size, d),  # token embedding, also the tied head
        "wpe.weight": (cfg.seq_len, d),  # learned position embedding
    }
    for i in range(cfg.n_layer):
        p = f"blocks.{i}."
        shapes.update({
            p + "ln1.weight": (d,), p + "ln1.bias": (d,),
            p + "attn.qkv.weight": (3 * d, d),  # rows: q (d), k (d), v (d); heads contiguous
            p + "attn.proj.weight": (d, d),
            p + "ln2.weight": (d,), p + "ln2.bias": (d,),
            p + "mlp.fc.weight": (f, d),
            p + "mlp.proj.weight": (d, f),
        })
    shapes.update({"ln_f.weight": (d,), "ln_f.bias": (d,)})
    return shapes


def check_flat(flat: dict[str, Any], cfg: GPTConfig) -> None:
    """Raise ValueError unless flat has exactly the canonical names and shapes for cfg (Lab 05)."""
    want = param_shapes(cfg)
    missing, extra = sorted(set(want) - set(flat)), sorted(set(flat) - set(want))
    if missing or extra:
        raise ValueError(f"weights do not match {cfg}: missing {missing[:5]}"
                         f"{'...' if len(missing) > 5 else ''}, unexpected {extra[:5]}"
                         f"{'...' if len(extra) > 5 else ''}")
    for name, shape in want.items():
        got = tuple(flat[name].shape)
        if got != shape:
            raise ValueError(f"{name}: shape {got}, expected {shape} for {cfg}")


def is_torch_module(model: Any) -> bool:
    """True for a TorchGPT (or any torch module), decided without importing torch (Lab 05)."""
    # Decide without importing torch: a Flax-only runtime must not pay for (or need) torch.
    return any(c.__module__.startswith("torch.") for c in type(model).__mro__)
