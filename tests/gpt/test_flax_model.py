"""labkit.gpt.flax_model.take_rows: the embedding lookup whose gradient is a one-hot matmul (a GPU's path, Lab 02).

On a GPU (labkit.runtime.embedding) FlaxGPT sums its token embedding's gradient as one_hot(tokens)ᵀ @ grad
instead of XLA's scatter-add, whose atomic adds collide on a byte vocabulary. Here, on the CPU, that path is
forced and checked against the scatter and against float64: same forward bit for bit, same gradient, same step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from labkit.gpt import data
from labkit.gpt.config import get_config
from labkit.gpt.convert import flat_params_numpy, torch_to_flax
from labkit.gpt.flax_model import take_rows
from labkit.gpt.torch_model import TorchGPT
from labkit.gpt.train import JaxTrainer, OptConfig
from labkit.runtime import embedding

CFG = get_config("test")


def _skewed_tokens(n: int, vocab: int, seed: int = 0) -> np.ndarray:
    """Token ids where a few rows take most tokens, as spaces and 'e' do in bytes of English (int32, (n,))."""
    p = 1.0 / np.arange(1, vocab + 1) ** 1.2  # Zipf-like: row 0 gets ~1/4 of the tokens
    return np.random.default_rng(seed).choice(vocab, size=n, p=p / p.sum()).astype(np.int32)


def _row_sums_f64(tokens: np.ndarray, g: np.ndarray, vocab: int) -> np.ndarray:
    out = np.zeros((vocab, g.shape[-1]), np.float64)
    np.add.at(out, tokens.reshape(-1), g.reshape(-1, g.shape[-1]).astype(np.float64))
    return out  # (vocab, d): the exact gradient of table[tokens] against cotangent g


def test_take_rows_is_take_forward_and_a_row_sum_backward() -> None:
    tokens = _skewed_tokens(4096, 256).reshape(8, 512)  # (batch, seq)
    rng = np.random.default_rng(1)
    table = jnp.asarray(rng.standard_normal((256, 48)), jnp.float32)
    g = jnp.asarray(rng.standard_normal((8, 512, 48)), jnp.float32)
    rows, vjp = jax.vjp(lambda t: take_rows(t, tokens), table)
    ref_rows, ref_vjp = jax.vjp(lambda t: jnp.take(t, tokens, axis=0), table)
    assert np.array_equal(rows, ref_rows)  # the lookup itself is untouched
    want = _row_sums_f64(tokens, np.asarray(g), 256)
    (got,), (scatter,) = vjp(g), ref_vjp(g)
    assert got.dtype == jnp.float32 and got.shape == (256, 48)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)  # fp32 sums of up to ~1,000 terms
    np.testing.assert_allclose(got, scatter, rtol=1e-5, atol=1e-4)


def test_take_rows_accumulates_bf16_gradients_in_fp32() -> None:
    # bf16 table and cotangent (a bf16 model's lookup): one rounding of the fp32 sum, not one per added token.
    tokens = _skewed_tokens(4096, 256, seed=2).reshape(4, 1024)
    rng = np.random.default_rng(3)
    table = jnp.asarray(rng.standard_normal((256, 32)), jnp.bfloat16)
    g = jnp.asarray(rng.standard_normal((4, 1024, 32)), jnp.bfloat16)
    (got,) = jax.vjp(lambda t: take_rows(t, tokens), table)[1](g)
    assert got.dtype == jnp.bfloat16
    want = _row_sums_f64(tokens, np.asarray(g, np.float32), 256)
    err = np.abs(np.asarray(got, np.float64) - want)
    assert np.all(err <= 2.0 ** -8 * np.abs(want) + 1e-3), err.max()  # half a bf16 ulp, plus fp32's own error


def test_take_rows_gradient_is_a_dot_not_a_scatter() -> None:
    tokens = jnp.zeros((2, 8), jnp.int32)
    table = jnp.ones((256, 16), jnp.float32)
    text = jax.jit(jax.grad(lambda t: take_rows(t, tokens).sum())).lower(table).as_text()
    plain = jax.jit(jax.grad(lambda t: jnp.take(t, tokens, axis=0).sum())).lower(table).as_text()
    assert "dot_general" in text and "scatter" not in text
    assert "scatter" in plain and "dot_general" not in plain


@pytest.mark.parametrize("residual_dtype", [None, jnp.float32])
def test_flax_gpt_train_step_is_the_same_on_the_one_hot_path(monkeypatch: pytest.MonkeyPatch,
                                                               residual_dtype: object) -> None:
    torch.manual_seed(0)
    init = flat_params_numpy(TorchGPT(CFG))
    x, y = next(data.Batcher(data.synthetic_tokens(5_000), 8, CFG.seq_len, seed=0))
    opt = OptConfig(lr=3e-3)

    def two_steps() -> tuple[list[float], dict[str, np.ndarray], int]:
        model = torch_to_flax(init, CFG)
        model.residual_dtype = None if residual_dtype is None else jnp.dtype(residual_dtype)
        jt = JaxTrainer(model, opt)
        scatters = jt.lower(jnp.asarray(x), jnp.asarray(y)).as_text().count("\"stablehlo.scatter\"(")
        losses = [float(jt.step(jnp.asarray(x), jnp.asarray(y))) for _ in range(2)]
        return losses, flat_params_numpy(jt.model()), scatters

    scatter_losses, scatter_params, scatters = two_steps()
    monkeypatch.setattr(embedding, "jax_embedding_gradient", lambda vocab_size: embedding.ONE_HOT)  # a GPU's choice
    losses, params, left = two_steps()
    assert left == scatters - 1, "the one-hot path should remove the token embedding's scatter, and only it"
    assert losses[0] == scatter_losses[0]  # the forward pass is the same program
    np.testing.assert_allclose(losses, scatter_losses, rtol=1e-6)
    for name, p in params.items():  # only the order of the embedding gradient's sums differs
        np.testing.assert_allclose(p, scatter_params[name], rtol=1e-5, atol=1e-6, err_msg=name)
