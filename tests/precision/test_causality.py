"""labkit.precision.causality: the leak probe passes a causal model and catches a dropped causal mask, forward or backward."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from labkit.gpt import torch_model
from labkit.gpt.config import get_config
from labkit.precision import causality
from labkit.precision.train import init_flat

CFG = get_config("test", seq_len=32, d_model=32, n_head=4)


@pytest.fixture(scope="module")
def flat() -> dict[str, np.ndarray]:
    return init_flat(CFG, seed=0)


@pytest.fixture(scope="module")
def tokens() -> np.ndarray:
    return np.random.default_rng(0).integers(0, CFG.vocab_size, size=(2, CFG.seq_len))


def test_perturbation_changes_every_token_from_the_cut_and_none_before(tokens: np.ndarray) -> None:
    out = causality._perturbed(tokens, 10, CFG.vocab_size, seed=0)
    assert np.array_equal(out[:, :10], tokens[:, :10])
    assert (out[:, 10:] != tokens[:, 10:]).all() and out.max() < CFG.vocab_size and out.min() >= 0


@pytest.mark.parametrize("framework", ["jax", "torch"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_causal_model_does_not_leak(framework: str, precision: str, flat: dict, tokens: np.ndarray) -> None:
    # Earlier rows are computed from the same inputs both times: unchanged up to rounding (here exactly).
    assert causality.leak_ratio(framework, CFG, precision, flat, tokens) <= causality.LEAK_LIMIT


def test_a_dropped_causal_mask_is_caught_in_jax(monkeypatch, flat: dict, tokens: np.ndarray) -> None:
    real = jax.nn.dot_product_attention

    def no_mask(q, k, v, *args, is_causal=False, **kw):  # an attention kernel that ignores the flag
        return real(q, k, v, *args, is_causal=False, **kw)

    monkeypatch.setattr(jax.nn, "dot_product_attention", no_mask)
    assert causality.leak_ratio("jax", CFG, "bf16", flat, tokens) > 0.1


def test_a_dropped_causal_mask_is_caught_in_torch(monkeypatch, flat: dict, tokens: np.ndarray) -> None:
    real = F.scaled_dot_product_attention
    monkeypatch.setattr(torch_model.F, "scaled_dot_product_attention",
                        lambda q, k, v, is_causal=False, **kw: real(q, k, v, is_causal=False, **kw))
    assert causality.leak_ratio("torch", CFG, "fp32", flat, tokens) > 0.1


def test_a_leak_late_in_the_sequence_is_still_a_leak(monkeypatch, flat: dict, tokens: np.ndarray) -> None:
    # only the last position before the cut sees one token ahead: the ratio is still far above rounding
    real = jax.nn.dot_product_attention

    def off_by_one(q, k, v, *args, is_causal=False, **kw):
        t = q.shape[1]
        allowed = np.tril(np.ones((t, t), dtype=bool), k=1)  # each query also sees the next key
        return real(q, k, v, *args, mask=jax.numpy.asarray(allowed)[None, None], **kw)

    monkeypatch.setattr(jax.nn, "dot_product_attention", off_by_one)
    assert causality.leak_ratio("jax", CFG, "fp32", flat, tokens) > causality.LEAK_LIMIT


def test_a_backward_only_leak_is_caught_in_jax(monkeypatch, flat: dict, tokens: np.ndarray) -> None:
    """A kernel whose forward masks but whose backward does not: invisible to a forward-only probe."""
    real = jax.nn.dot_product_attention

    def leaky_backward(q, k, v, *args, is_causal=False, **kw):
        @jax.custom_vjp
        def attend(q, k, v):
            return real(q, k, v, is_causal=True, **kw)

        def bwd(res, g):  # the gradients of the *unmasked* attention
            return jax.vjp(lambda *a: real(*a, is_causal=False, **kw), *res)[1](g)

        attend.defvjp(lambda q, k, v: (attend(q, k, v), (q, k, v)), bwd)
        return attend(q, k, v)

    monkeypatch.setattr(jax.nn, "dot_product_attention", leaky_backward)
    leak = causality.probe("jax", CFG, "fp32", flat, tokens)
    assert leak.forward == 0.0 and leak.backward > 0.1 and leak.worst == leak.backward
    assert causality.leak_ratio("jax", CFG, "fp32", flat, tokens) > causality.LEAK_LIMIT


def test_a_leak_only_under_autograd_is_caught_in_torch(monkeypatch, flat: dict, tokens: np.ndarray) -> None:
    """A dispatch path that drops the mask only when gradients are recorded (training), not under no_grad."""
    real = F.scaled_dot_product_attention
    monkeypatch.setattr(torch_model.F, "scaled_dot_product_attention",
                        lambda q, k, v, is_causal=False, **kw: real(
                            q, k, v, is_causal=is_causal and not torch.is_grad_enabled(), **kw))
    leak = causality.probe("torch", CFG, "bf16", flat, tokens)
    assert leak.forward > 0.1 and leak.backward > 0.1


def test_a_backward_only_leak_is_caught_in_torch(monkeypatch, flat: dict, tokens: np.ndarray) -> None:
    real = F.scaled_dot_product_attention

    class LeakyBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):  # noqa: ANN001, ANN205
            ctx.save_for_backward(q, k, v)
            return real(q, k, v, is_causal=True)

        @staticmethod
        def backward(ctx, g):  # noqa: ANN001, ANN205
            with torch.enable_grad():
                qkv = [t.detach().requires_grad_() for t in ctx.saved_tensors]
                return torch.autograd.grad(real(*qkv, is_causal=False), qkv, g)

    monkeypatch.setattr(torch_model.F, "scaled_dot_product_attention",
                        lambda q, k, v, is_causal=False, **kw: LeakyBackward.apply(q, k, v))
    leak = causality.probe("torch", CFG, "fp32", flat, tokens)
    assert leak.forward == 0.0 and leak.backward > 0.1


@pytest.mark.parametrize("kwargs, match", [
    (dict(framework="mxnet"), "framework must be 'jax' or 'torch'"),
    (dict(cut=0), r"cut must be in \[1, 31\]"),
    (dict(cut=32), r"cut must be in \[1, 31\]"),
    (dict(tokens=np.zeros(8, dtype=int)), r"tokens must be \(batch, seq\)"),
    (dict(fp32_matmul="fast"), r"fp32_matmul must be one of default, highest, tf32.*got 'fast'"),
])
def test_bad_input_names_the_value(kwargs: dict, match: str, flat: dict, tokens: np.ndarray) -> None:
    args = dict(framework="jax", cfg=CFG, precision="fp32", flat=flat, tokens=tokens) | kwargs
    with pytest.raises(ValueError, match=match):
        causality.leak_ratio(**args)


def test_attention_heavy_scales_only_the_value_path(flat: dict) -> None:
    d = CFG.d_model
    heavy = causality.attention_heavy(flat, d, gain=3.0)
    q = "blocks.0.attn.qkv.weight"
    assert np.array_equal(heavy[q][:2 * d], flat[q][:2 * d]) and np.allclose(heavy[q][2 * d:], 3 * flat[q][2 * d:])
    assert np.allclose(heavy["blocks.1.attn.proj.weight"], 3 * flat["blocks.1.attn.proj.weight"])
    assert all(np.array_equal(heavy[k], flat[k]) for k in flat if "attn" not in k)
    assert not np.shares_memory(heavy[q], flat[q])  # the caller's weights are left as they were
