"""labkit.precision.residual and FlaxGPT's residual_dtype (Lab 04): where each framework rounds the residual stream."""
from __future__ import annotations

from dataclasses import replace

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from labkit.gpt.config import get_config
from labkit.gpt.data import ByteTokenizer, load_corpus
from labkit.precision import residual
from labkit.precision import train as pt

CFG = get_config("test")


@pytest.fixture(scope="module")
def flat() -> dict[str, np.ndarray]:
    return pt.init_flat(CFG, seed=0)


@pytest.fixture(scope="module")
def batch() -> np.ndarray:
    return ByteTokenizer().encode(load_corpus())[:4 * CFG.seq_len].reshape(4, CFG.seq_len).astype(np.int32)


@pytest.mark.parametrize("precision, low", [("bf16", "bfloat16"), ("fp16_scaled", "float16")])
def test_autocast_keeps_the_stream_fp32_and_flax_dtype_does_not(precision: str, low: str) -> None:
    rows = {r["recipe"]: {k: v for k, v in r.items() if k != "recipe"} for r in residual.stream_dtypes(CFG, precision)}
    assert list(rows) == list(residual.RECIPES)
    assert rows["torch.autocast"] == {"embeddings": "float32", "residual stream": "float32", "logits": low}
    assert rows["flax dtype="] == {"embeddings": low, "residual stream": low, "logits": low}
    assert rows["flax dtype= + residual_dtype=fp32"] == {"embeddings": "float32", "residual stream": "float32",
                                                         "logits": low}


def test_fp32_recipes_are_fp32_throughout() -> None:
    for r in residual.stream_dtypes(CFG, "fp32"):
        assert {r["embeddings"], r["residual stream"], r["logits"]} == {"float32"}, r


def test_residual_dtype_embeds_from_the_fp32_tables_and_changes_nothing_else(flat: dict, batch: np.ndarray) -> None:
    from flax import nnx

    from labkit.precision.train_jax import jax_parts

    x = jnp.asarray(batch)
    plain = nnx.merge(*jax_parts(CFG, "bf16", flat))
    kept = nnx.merge(*jax_parts(CFG, "bf16", flat, residual="fp32"))
    ref = flat["wte.weight"][batch] + flat["wpe.weight"][: batch.shape[1]][None]  # numpy fp32: the closed form
    np.testing.assert_array_equal(np.asarray(kept.embed(x)), ref.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(plain.embed(x), np.float32),  # bf16 lookups, added in bf16
                                  (flat["wte.weight"][batch].astype(ml_dtypes.bfloat16)
                                   + flat["wpe.weight"][: batch.shape[1]][None].astype(ml_dtypes.bfloat16)).astype(np.float32))
    # fp32 compute: residual="fp32" is the same program, so the same logits to the bit
    a = nnx.merge(*jax_parts(CFG, "fp32", flat))(x)
    b = nnx.merge(*jax_parts(CFG, "fp32", flat, residual="fp32"))(x)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert plain(x).dtype == kept(x).dtype == jnp.bfloat16  # the head still runs in bf16, as autocast's does


def test_add_rounding_known_answers() -> None:
    x, dx = np.array([256.0, 256.0, 1.0, 5.0]), np.array([1.0, 2.0, 1.0, 0.0])
    # bf16 at 256: a step of 2, so +1 is a tie that rounds to even (256) and is lost; +2 lands on 258; 1 + 1 = 2.
    r = residual.add_rounding(x, dx, jnp.bfloat16)
    assert r.lost == pytest.approx(1 / 3)  # the 0 update is not counted
    assert r.error == pytest.approx(1 / np.sqrt(6))  # one element off by 1; ‖dx‖ = sqrt(1 + 4 + 1)
    assert residual.add_rounding(x, dx, jnp.float16) == residual.AddRounding(0.0, 0.0)  # fp16's step at 256 is 0.25
    assert residual.add_rounding([2048.0], [1.0], jnp.float16).lost == 1.0  # section 2's 2048 + 1 = 2048
    assert residual.add_rounding([1.0], [1e-8], jnp.float16).lost == 1.0  # underflows to 0 in fp16: lost, counted
    assert residual.add_rounding(x, np.zeros(4), jnp.bfloat16) == residual.AddRounding(0.0, 0.0)  # nothing moved
    with pytest.raises(ValueError, match=r"one shape, got \(4,\) and \(3,\)"):
        residual.add_rounding(x, dx[:3], jnp.bfloat16)


def test_stream_rounding_bf16_rounds_coarser_than_fp16_and_fp32_finest(flat: dict, batch: np.ndarray) -> None:
    bf = residual.stream_rounding(CFG, flat, batch, "bf16")
    hf = residual.stream_rounding(CFG, flat, batch, "fp16_scaled")
    assert set(bf) == {"bfloat16", "float32"} and set(hf) == {"float16", "float32"}
    assert bf["bfloat16"].adds == 2 * CFG.n_layer
    # unit roundoff: bf16 2^-8, fp16 2^-11, fp32 2^-24; the errors scale with it (within a factor of 3 of the ratio)
    assert 8 / 3 < bf["bfloat16"].error / hf["float16"].error < 8 * 3
    assert 2.0**16 / 3 < bf["bfloat16"].error / bf["float32"].error < 2.0**16 * 3
    assert bf["bfloat16"].lost > 2 * hf["float16"].lost > 0  # 8 significant bits lose more updates than 11


def test_flax_with_the_stream_in_fp32_computes_what_autocast_computes(flat: dict, batch: np.ndarray) -> None:
    """The reference is the other framework: TorchGPT under torch.autocast(bfloat16), same weights, same tokens."""
    import torch
    from flax import nnx

    from labkit.gpt.convert import load_flat_params
    from labkit.gpt.torch_model import TorchGPT
    from labkit.precision.train_jax import jax_parts

    tm, x = load_flat_params(TorchGPT(CFG), flat), torch.from_numpy(batch).long()
    with torch.no_grad():
        fp32 = tm(x).numpy().astype(np.float64)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            auto = tm(x).float().numpy().astype(np.float64)
    rms = lambda a, b: float(np.sqrt(np.mean((a - b) ** 2)))  # noqa: E731
    got = {res: np.asarray(nnx.merge(*jax_parts(CFG, "bf16", flat, res))(jnp.asarray(batch)), np.float64)
           for res in ("compute", "fp32")}
    assert rms(got["fp32"], auto) < 0.75 * rms(got["compute"], auto)  # measured 0.58x on this config
    # the same size of error against fp32 as autocast's own (measured within 2%): not bit-equal, kernels differ
    assert rms(got["fp32"], fp32) == pytest.approx(rms(auto, fp32), rel=0.25)
    assert rms(got["compute"], fp32) > 1.25 * rms(auto, fp32)


def test_stream_rounding_bad_input(flat: dict, batch: np.ndarray) -> None:
    with pytest.raises(ValueError, match="precision='fp32' computes in fp32: pass a low one"):
        residual.stream_rounding(CFG, flat, batch, "fp32")
    with pytest.raises(ValueError, match=r"tokens must be integer ids of shape \(batch, seq <= 32\), got int32 \(128,\)"):
        residual.stream_rounding(CFG, flat, batch.ravel(), "bf16")
    with pytest.raises(ValueError, match="got float64"):
        residual.stream_rounding(CFG, flat, batch.astype(float), "bf16")
    with pytest.raises(ValueError, match="valid: fp32"):
        residual.stream_rounding(CFG, flat, batch, "int8")


def test_training_with_the_stream_in_fp32_is_its_own_program(flat: dict) -> None:
    """TrainConfig.jax_residual reaches the compiled step (a key of its own) and still trains like fp32."""
    tokens = ByteTokenizer().encode(load_corpus())
    tc = pt.TrainConfig(steps=12, batch=4, seq=CFG.seq_len, lr=3e-3, seed=0)
    ref = pt.train_jax(CFG, "fp32", tokens, replace(tc, fp32_matmul="highest"), flat)
    plain = pt.train_jax(CFG, "bf16", tokens, tc, flat)
    kept = pt.train_jax(CFG, "bf16", tokens, replace(tc, jax_residual="fp32"), flat)
    assert kept.losses != plain.losses  # a different program ran, not the cached bf16 one
    assert abs(kept.final_loss() - ref.final_loss()) < 0.05
    with pytest.raises(ValueError, match="jax_residual must be one of compute, fp32, got 'bf16'"):
        pt.TrainConfig(jax_residual="bf16")
