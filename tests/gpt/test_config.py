"""labkit.gpt.config: every numeric field of GPTConfig is checked, with the value and the fix named."""

from __future__ import annotations

import math

import pytest

from labkit.gpt.config import GPTConfig, get_config

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
