"""labkit.gpt (config, flax_model, torch_model, convert): one GPT in Flax and PyTorch, checked against each other and numpy (Lab 02)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from labkit.gpt import config as M, convert as CV, flax_model as FM, torch_model as TM
from labkit.gpt.flax_model import abstract_flax_gpt
from labkit.gpt.data import synthetic_tokens

CFG = M.get_config("test")
TOL = 1e-4  # fp32 logits, max abs difference across frameworks


def _tokens(seed: int = 0, batch: int = 3, seq: int = CFG.seq_len) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, CFG.vocab_size, (batch, seq)).astype(np.int32)


@nnx.jit
def _flax_forward(model: FM.FlaxGPT, x: jax.Array) -> jax.Array:
    return model(x)  # jitted: one compile per model structure, instead of op-by-op dispatch


def _flax_logits(model: FM.FlaxGPT, x: np.ndarray) -> np.ndarray:
    return np.asarray(_flax_forward(model, jnp.asarray(x)))


def _torch_logits(model: TM.TorchGPT, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy()


@pytest.fixture(scope="module")
def flax_model() -> FM.FlaxGPT:
    return FM.FlaxGPT(CFG, rngs=nnx.Rngs(0))


@pytest.fixture(scope="module")
def torch_model() -> TM.TorchGPT:
    torch.manual_seed(0)
    return TM.TorchGPT(CFG).eval()


def _assert_flat_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype == np.float32, k
        assert np.array_equal(a[k], b[k]), k


def test_flax_to_torch_same_logits(flax_model: FM.FlaxGPT) -> None:
    tm = TM.TorchGPT(CFG)
    tm.load_state_dict(CV.flax_to_torch_state(flax_model), strict=True)
    x = _tokens(1)
    diff = np.abs(_flax_logits(flax_model, x) - _torch_logits(tm, x)).max()
    assert diff < TOL, diff


def test_torch_to_flax_same_logits(torch_model: TM.TorchGPT) -> None:
    fm = CV.torch_to_flax(torch_model.state_dict(), CFG)
    x = _tokens(2)
    diff = np.abs(_flax_logits(fm, x) - _torch_logits(torch_model, x)).max()
    assert diff < TOL, diff


def test_round_trips_are_bit_exact(flax_model: FM.FlaxGPT, torch_model: TM.TorchGPT) -> None:
    # flax -> torch -> flax
    start = CV.flat_params_numpy(flax_model)
    back = CV.torch_to_flax(CV.flax_to_torch(flax_model).state_dict(), CFG)
    _assert_flat_equal(start, CV.flat_params_numpy(back))
    # torch -> flax -> torch, loading into existing models in place
    start_t = CV.flat_params_numpy(torch_model)
    fm = CV.torch_to_flax(torch_model.state_dict(), CFG, model=FM.FlaxGPT(CFG, rngs=nnx.Rngs(7)))
    tm = TM.TorchGPT(CFG)
    tm.load_state_dict(CV.flax_to_torch_state(fm))
    _assert_flat_equal(start_t, CV.flat_params_numpy(tm))


def test_canonical_names_and_shapes(flax_model: FM.FlaxGPT, torch_model: TM.TorchGPT) -> None:
    want = M.param_shapes(CFG)
    for model in (flax_model, torch_model):
        flat = CV.flat_params_numpy(model)
        assert {k: v.shape for k, v in flat.items()} == want
        assert all(v.flags.c_contiguous and v.flags.writeable for v in flat.values())
    # The torch state_dict *is* the canonical dict (no tied head duplicate, no buffers).
    assert list(torch_model.state_dict()) == list(want)


@pytest.mark.parametrize("cfg", [CFG, M.GPTConfig(vocab_size=50, seq_len=8, n_layer=3,
                                                   n_head=3, d_model=24, d_ff=40)])
def test_n_params_matches_both_frameworks(cfg: M.GPTConfig) -> None:
    fm = abstract_flax_gpt(cfg)  # shapes only: no init cost
    n_flax = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(nnx.state(fm, nnx.Param)))
    n_torch = sum(p.numel() for p in TM.TorchGPT(cfg).parameters())
    assert M.n_params(cfg) == n_flax == n_torch
    emb = (cfg.vocab_size + cfg.seq_len) * cfg.d_model
    assert M.n_params(cfg, embeddings=False) == n_torch - emb


def test_named_configs_param_counts() -> None:
    for name, cfg in M.CONFIGS.items():
        assert M.n_params(cfg) == sum(int(np.prod(s)) for s in M.param_shapes(cfg).values()), name
    assert M.n_params(M.CONFIGS["test"]) < 100_000
    assert 0.8e6 < M.n_params(M.CONFIGS["smoke"]) < 1.3e6
    assert 10e6 <= M.n_params(M.CONFIGS["small"]) <= 20e6
    assert abs(M.n_params(M.CONFIGS["gpt2-small"]) - 124e6) < 1e6
    assert abs(M.n_params(M.CONFIGS["gpt2-medium"]) - 350e6) < 10e6


def test_causal_in_both_frameworks(flax_model: FM.FlaxGPT, torch_model: TM.TorchGPT) -> None:
    x = _tokens(3, batch=2)
    t = 17
    x2 = x.copy()
    x2[:, t] = (x2[:, t] + 1) % CFG.vocab_size
    for logits in (_flax_logits, _torch_logits):
        model = flax_model if logits is _flax_logits else torch_model
        a, b = logits(model, x), logits(model, x2)
        np.testing.assert_array_equal(a[:, :t], b[:, :t])  # the past cannot see the future
        assert np.abs(a[:, t:] - b[:, t:]).max() > 1e-6  # and the change does propagate


def _numpy_cross_entropy(logits: np.ndarray, targets: np.ndarray) -> float:
    z = logits.astype(np.float64)
    z = z - z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return float(-np.take_along_axis(logp, targets[..., None], -1).mean())


def test_losses_agree_with_numpy(flax_model: FM.FlaxGPT) -> None:
    tm = CV.flax_to_torch(flax_model)
    x, y = _tokens(4), _tokens(5)
    ref = _numpy_cross_entropy(_flax_logits(flax_model, x), y)
    lj = float(nnx.jit(FM.flax_loss)(flax_model, jnp.asarray(x), jnp.asarray(y)))
    with torch.no_grad():
        lt = float(TM.torch_loss(tm, torch.from_numpy(x), torch.from_numpy(y)))
    assert abs(lj - ref) < 1e-5 and abs(lt - ref) < 1e-5, (lj, lt, ref)
    assert abs(ref - np.log(CFG.vocab_size)) < 0.5  # fresh init: near-uniform predictions


def test_bf16_compute_keeps_fp32_params(flax_model: FM.FlaxGPT) -> None:
    fm16 = CV.torch_to_flax(CV.flax_to_torch_state(flax_model), CFG, dtype=jnp.bfloat16)
    assert all(p.dtype == jnp.float32 for p in jax.tree.leaves(nnx.state(fm16, nnx.Param)))
    x = _tokens(6)
    out = _flax_forward(fm16, jnp.asarray(x))
    assert out.dtype == jnp.bfloat16
    assert np.abs(np.asarray(out, np.float32) - _flax_logits(flax_model, x)).max() < 0.1


def test_synthetic_tokens_are_learnable() -> None:
    torch.manual_seed(0)
    model = TM.TorchGPT(CFG)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    toks = torch.from_numpy(synthetic_tokens(4096, CFG.vocab_size, seed=0)).long()
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(20):
        starts = torch.randint(0, len(toks) - CFG.seq_len - 1, (8,), generator=g)
        idx = starts[:, None] + torch.arange(CFG.seq_len)
        loss = TM.torch_loss(model, toks[idx], toks[idx + 1])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses  # ~5.5 -> ~2.5 nats in 20 steps


def test_too_long_sequence_is_refused(flax_model: FM.FlaxGPT, torch_model: TM.TorchGPT) -> None:
    x = _tokens(0, batch=1, seq=CFG.seq_len + 1)
    with pytest.raises(ValueError, match="seq_len=32"):
        flax_model(jnp.asarray(x))
    with pytest.raises(ValueError, match="seq_len=32"):
        torch_model(torch.from_numpy(x))


def test_config_errors() -> None:
    with pytest.raises(ValueError, match=r"n_head=5 does not divide d_model=32.*n_head=4"):
        M.GPTConfig(n_head=5, d_model=32)
    with pytest.raises(ValueError, match=r"n_layer must be a positive integer, got 0"):
        M.GPTConfig(n_layer=0)
    with pytest.raises(ValueError, match=r"vocab_size must be a positive integer, got -1"):
        M.GPTConfig(vocab_size=-1)
    with pytest.raises(ValueError, match="dropout must be 0.0"):
        M.GPTConfig(dropout=0.1)
    with pytest.raises(ValueError, match=r"unknown GPT config 'gpt5'.*test, smoke, small"):
        M.get_config("gpt5")
    with pytest.raises(ValueError, match=r"unknown GPTConfig field.*n_heads"):
        M.get_config("test", n_heads=4)
    with pytest.raises(ValueError, match="n_head=2 does not divide d_model=33"):
        M.get_config("test", d_model=33)


def test_get_config_overrides() -> None:
    cfg = M.get_config("gpt2-small", vocab_size=256)
    assert (cfg.vocab_size, cfg.n_layer, cfg.d_ff) == (256, 12, 3072)
    assert M.get_config("test", d_model=64).d_ff == 256  # d_ff follows a new width
    assert M.get_config("test", d_model=64, d_ff=100).d_ff == 100
    assert CFG.head_dim == 16


def test_load_rejects_wrong_weights(torch_model: TM.TorchGPT) -> None:
    flat = CV.flat_params_numpy(torch_model)
    bad = dict(flat)
    bad["wpe.weight"] = bad["wpe.weight"][:-1]
    with pytest.raises(ValueError, match=r"wpe.weight: shape \(31, 32\), expected \(32, 32\)"):
        CV.load_flat_params(TM.TorchGPT(CFG), bad)
    missing = {k: v for k, v in flat.items() if k != "ln_f.bias"}
    with pytest.raises(ValueError, match=r"missing \['ln_f.bias'\]"):
        CV.torch_to_flax(missing, CFG)
