"""The course GPT in PyTorch, and its canonical weight dict (Lab 02).

Same parameterization as ``labkit.gpt.flax_model.FlaxGPT`` — see ``labkit.gpt.config`` for the
config and the shared choices (tied head, no Linear bias, tanh GELU, no dropout). The
module's ``state_dict()`` *is* the canonical flat dict: same names, same (out, in) layout.
Mixed precision in PyTorch is ``torch.autocast`` around the forward pass (Lab 04); the weights
stay fp32.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from labkit.gpt.config import GPTConfig


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with a fused q/k/v projection (Lab 02)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)  # weight (3d, d)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Causal multi-head self-attention: (batch, seq, d_model) -> the same shape (Lab 02)."""
        b, t, d = x.shape  # (batch, seq, d_model)
        q, k, v = self.qkv(x).split(d, dim=2)  # each (batch, seq, d_model)
        # SDPA wants (batch, heads, seq, head_dim).
        q, k, v = (z.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (batch, heads, seq, head_dim)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))  # (batch, seq, d_model)


class MLP(nn.Module):
    """Position-wise MLP d_model -> d_ff -> d_model with tanh-approximate GELU (Lab 02)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)  # weight (d_ff, d_model)
        self.proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The GELU MLP: (batch, seq, d_model) -> the same shape (Lab 02)."""
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))  # (batch, seq, d_model)


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln1(x)), then x + mlp(ln2(x)) (Lab 02)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x + attn(ln1(x)), then + mlp(ln2(x)): (batch, seq, d_model) -> the same shape (Lab 02)."""
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))  # (batch, seq, d_model)


class TorchGPT(nn.Module):
    """Decoder-only GPT in PyTorch: tokens (batch, seq) int -> logits (batch, seq, vocab) (Lab 02)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)  # (vocab, d_model); tied head
        self.wpe = nn.Embedding(cfg.seq_len, cfg.d_model)  # (seq_len, d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps)
        self._init_weights()

    @torch.no_grad()
    def _init_weights(self) -> None:
        # GPT-2 init, as in the Flax model: N(0, 0.02), residual writes scaled by depth.
        resid_std = 0.02 / math.sqrt(2 * self.cfg.n_layer)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                p.normal_(0.0, resid_std if name.endswith("proj.weight") else 0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Token ids (batch, seq) -> logits (batch, seq, vocab) (Lab 02)."""
        b, t = tokens.shape  # (batch, seq)
        if t > self.cfg.seq_len:
            raise ValueError(f"sequence length {t} > cfg.seq_len={self.cfg.seq_len}")
        pos = torch.arange(t, device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)  # (batch, seq, d_model)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied head -> (batch, seq, vocab)


def torch_flat_params(model: TorchGPT) -> dict[str, np.ndarray]:
    """Canonical {name: fp32 numpy array} of a TorchGPT: its state_dict on the CPU (Lab 05)."""
    return {k: v.detach().to("cpu", torch.float32).numpy().copy()
            for k, v in model.state_dict().items()}


def torch_load_flat(model: TorchGPT, flat: dict[str, np.ndarray]) -> TorchGPT:
    """Write a canonical flat dict into a TorchGPT in place (exact copy); returns it (Lab 05)."""
    # load_state_dict copies into the existing tensors, keeping their device and dtype.
    sd = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)) for k, v in flat.items()}
    model.load_state_dict(sd, strict=True)
    return model


def cross_entropy_torch(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy in fp32: logits (batch, seq, vocab), targets (batch, seq) (Lab 02)."""
    v = logits.shape[-1]
    return F.cross_entropy(logits.float().reshape(-1, v), targets.reshape(-1).long())


def torch_loss(model: TorchGPT, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of model(x) against next tokens y (Lab 02)."""
    return cross_entropy_torch(model(x), y)
