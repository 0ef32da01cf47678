"""labkit.precision.master: a run's master weights and optimizer state, measured by dtype (Lab 04)."""
from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch

from labkit.gpt.config import get_config, n_params
from labkit.gpt.data import ByteTokenizer, load_corpus
from labkit.precision import master
from labkit.precision import train as pt

CFG = get_config("test")


def test_bytes_by_dtype_reads_numpy_jax_and_torch_arrays() -> None:
    arrays = [np.zeros(3, np.float32), jnp.zeros((2, 2), jnp.bfloat16), torch.zeros(5, dtype=torch.float16),
              np.zeros(2, ml_dtypes.float8_e4m3fn), jnp.zeros((), jnp.int32)]
    assert master.bytes_by_dtype(arrays) == {"float32": 12, "bfloat16": 8, "float16": 10, "float8_e4m3fn": 2,
                                             "int32": 4}


def test_not_fp32_flags_a_low_precision_master_copy_and_ignores_integers() -> None:
    good = {"params": {"float32": 400}, "optimizer": {"float32": 800, "int32": 4}}
    assert master.not_fp32(good) == []
    bad = {"params": {"bfloat16": 200}, "optimizer": {"float32": 800, "float8_e4m3fn": 100}}
    assert master.not_fp32(bad) == ["params: bfloat16", "optimizer: float8_e4m3fn"]
    assert master.per_param(good, 100) == {"params": 4.0, "optimizer": 8.0}  # integers are not per-parameter bytes


@pytest.mark.parametrize("fw", ["jax", "torch"])
@pytest.mark.parametrize("prec", ["bf16", "fp16_scaled"])
def test_real_runs_keep_fp32_master_weights_and_adam_moments(fw: str, prec: str) -> None:
    tokens = ByteTokenizer().encode(load_corpus())
    r = pt.train(fw, CFG, prec, tokens, pt.TrainConfig(steps=2, batch=2, seq=16, warmup=1))
    assert master.not_fp32(r.state) == []
    pp = master.per_param(r.state, n_params(CFG))
    assert pp["params"] == 4.0 and 8.0 <= pp["optimizer"] < 8.01, pp  # torch adds a 4-byte step count per tensor
    assert set(r.state) == ({"params", "optimizer"} if fw == "jax" else {"params", "grads", "optimizer"})


def test_a_bf16_torch_model_is_caught() -> None:
    model = torch.nn.Linear(4, 4).to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 4, dtype=torch.bfloat16)).sum().backward()
    opt.step()
    state = master.torch_state(model, opt)
    assert "params: bfloat16" in master.not_fp32(state) and "optimizer: bfloat16" in master.not_fp32(state)


def test_bad_input() -> None:
    with pytest.raises(TypeError, match="expected a numpy, JAX or torch array, got list"):
        master.dtype_and_bytes([1.0])
    with pytest.raises(ValueError, match="n_params must be a positive int"):
        master.per_param({"params": {"float32": 4}}, 0)
