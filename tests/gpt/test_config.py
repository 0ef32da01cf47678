"""labkit.gpt.config: every numeric field of GPTConfig is checked, with the value and the fix named."""

from __future__ import annotations

import math

import pytest

from labkit.gpt.config import GPTConfig, get_config, n_params, param_shapes

INTS = ("vocab_size", "seq_len", "n_layer", "n_head", "d_model", "d_ff")


@pytest.mark.parametrize("field", INTS)
@pytest.mark.parametrize("bad", [-1, -2, math.nan, math.inf, 2.5, "4", None, True])
def test_integer_fields(field: str, bad: object) -> None:
    if field == "d_ff" and bad == 0:
        return
    with pytest.raises(ValueError, match=rf"GPTConfig.{field} must be a positive integer, got {bad!r}.*such as {field}="):
        GPTConfig(**{field: bad})


@pytest.mark.parametrize("bad", [-1, 0, -1e-5, math.nan, math.inf, -math.inf, "1e-5", None, True])
def test_ln_eps(bad: object) -> None:
    with pytest.raises(ValueError, match=rf"ln_eps \(LayerNorm epsilon\) must be a finite number > 0, got {bad!r}; use the default ln_eps=1e-5"):
        GPTConfig(ln_eps=bad)


@pytest.mark.parametrize("bad", [0.1, math.nan, -0.5, "0", False])
def test_dropout_stays_zero(bad: object) -> None:
    with pytest.raises(ValueError, match=r"dropout must be 0.0"):
        GPTConfig(dropout=bad)


def test_valid_configs_unchanged() -> None:
    cfg = GPTConfig(ln_eps=1e-6, dropout=0)
    assert cfg.d_ff == 4 * cfg.d_model and cfg.ln_eps == 1e-6
    assert get_config("test", d_model=64).d_ff == 256
    assert GPTConfig(d_ff=96).d_ff == 96


def test_numpy_ints_are_counts_and_stored_as_int() -> None:
    """Issue #13: np.int64 from np.arange sweeps was refused as 'not a positive integer'."""
    import numpy as np

    cfg = GPTConfig(d_model=np.int64(64), n_head=np.int64(4), d_ff=np.int64(0))
    assert (cfg.d_model, cfg.d_ff) == (64, 256) and type(cfg.d_model) is int and type(cfg.d_ff) is int


@pytest.mark.parametrize("fn", [n_params, param_shapes])
def test_a_name_instead_of_a_config_says_get_config(fn) -> None:
    with pytest.raises(TypeError, match=r"cfg must be a GPTConfig, got str 'test'; use get_config\('test'\)"):
        fn("test")
    with pytest.raises(TypeError, match="cfg must be a GPTConfig, got NoneType"):
        fn(None)
