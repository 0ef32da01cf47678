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

    from labkit.precision.train_jax import _jax_parts

    x = jnp.asarray(batch)
    plain = nnx.merge(*_jax_parts(CFG, "bf16", flat))
    kept = nnx.merge(*_jax_parts(CFG, "bf16", flat, residual="fp32"))
    ref = flat["wte.weight"][batch] + flat["wpe.weight"][: batch.shape[1]][None]  # numpy fp32: the closed form
    np.testing.assert_array_equal(np.asarray(kept.embed(x)), ref.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(plain.embed(x), np.float32),  # bf16 lookups, added in bf16
                                  (flat["wte.weight"][batch].astype(ml_dtypes.bfloat16)
                                   + flat["wpe.weight"][: batch.shape[1]][None].astype(ml_dtypes.bfloat16)).astype(np.float32))
    # fp32 compute: residual="fp32" is the same program, so the same logits to the bit
    a = nnx.merge(*_jax_parts(CFG, "fp32", flat))(x)
    b = nnx.merge(*_jax_parts(CFG, "fp32", flat, residual="fp32"))(x)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert plain(x).dtype == kept(x).dtype == jnp.bfloat16  # the head still runs in bf16, as autocast's does


def test_swamped_known_answers() -> None:
    x, dx = np.array([256.0, 256.0, 1.0, 5.0]), np.array([1.0, 2.0, 1.0, 0.0])
    # bf16 at 256: a step of 2, so +1 is a tie that rounds to even (256) and is lost; +2 lands on 258.
    assert residual.swamped(x, dx, jnp.bfloat16) == pytest.approx(1 / 3)  # the 0 update is not counted
    assert residual.swamped(x, dx, jnp.float16) == 0.0  # fp16's step at 256 is 0.25
    assert residual.swamped([2048.0], [1.0], jnp.float16) == 1.0  # section 2's 2048 + 1 = 2048
    assert residual.swamped(x, np.zeros(4), jnp.bfloat16) == 0.0  # nothing moved, nothing lost
    with pytest.raises(ValueError, match=r"one shape, got \(4,\) and \(3,\)"):
        residual.swamped(x, dx[:3], jnp.bfloat16)


def test_lost_updates_bf16_loses_more_than_fp16_and_fp32_keeps_them(flat: dict, batch: np.ndarray) -> None:
    bf, hf = residual.lost_updates(CFG, flat, batch, "bf16"), residual.lost_updates(CFG, flat, batch, "fp16_scaled")
    assert set(bf) == {"bfloat16", "float32"} and set(hf) == {"float16", "float32"}
    assert bf["float32"] == hf["float32"] == 0.0  # same updates, same fp32 stream: 24 bits keep them all
    assert bf["bfloat16"] > 2 * hf["float16"] > 0  # 8 significant bits lose more than 11


def test_lost_updates_bad_input(flat: dict, batch: np.ndarray) -> None:
    with pytest.raises(ValueError, match="precision='fp32' computes in fp32: pass a low one"):
        residual.lost_updates(CFG, flat, batch, "fp32")
    with pytest.raises(ValueError, match=r"tokens must be integer ids of shape \(batch, seq <= 32\), got int32 \(128,\)"):
        residual.lost_updates(CFG, flat, batch.ravel(), "bf16")
    with pytest.raises(ValueError, match="got float64"):
        residual.lost_updates(CFG, flat, batch.astype(float), "bf16")
    with pytest.raises(ValueError, match="valid: fp32"):
        residual.lost_updates(CFG, flat, batch, "int8")


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
