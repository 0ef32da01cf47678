"""labkit.precision.amp (Lab 04): autocast dtypes measured on CPU bf16, unscale_ before clipping, bf16 range."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from labkit.precision import amp


def test_autocast_keeps_losses_fp32_and_computes_norms_in_fp32_on_cpu() -> None:
    rows = {r["op"]: r for r in amp.autocast_dtypes("cpu", torch.bfloat16)}
    assert set(rows) == set(amp.CUDA_AUTOCAST_LIST)
    for loss in ("cross_entropy", "mse_loss"):
        assert rows[loss]["output dtype"] == "float32" and rows[loss]["CUDA autocast list (docs)"] == "float32"
    for op in ("matmul", "linear", "softmax", "layer_norm"):  # bf16 out, fp32 inside: one rounding at the end
        assert rows[op]["output dtype"] == "bfloat16" and rows[op]["max error (roundings)"] <= 1.0, rows[op]
    assert amp.softmax_in_low_precision() > 5  # the same softmax with a bf16 running sum: many roundings


def test_on_cuda_the_documented_fp32_ops_must_come_out_fp32() -> None:
    """CUDA autocast reproduced on the CPU: the output dtypes an H100 measured (Lab 04, 2026-11-25, torch 2.11)."""
    h100 = {"matmul": "bfloat16", "linear": "bfloat16", "gelu": "bfloat16", "softmax": "float32",
            "log_softmax": "float32", "layer_norm": "float32", "cross_entropy": "float32", "mse_loss": "float32"}
    rows = [{"op": op, "output dtype": dt} for op, dt in h100.items()]
    assert amp.fp32_list_misses(rows, "cuda") == []
    broken = [dict(r, **{"output dtype": "bfloat16"}) if r["op"] in ("softmax", "log_softmax") else r for r in rows]
    assert amp.fp32_list_misses(broken, "cuda") == ["softmax", "log_softmax"]  # a CUDA run that did not upcast: caught
    cpu = amp.autocast_dtypes("cpu", torch.bfloat16)  # this CPU: softmax and layer_norm come out bf16 ...
    assert {r["op"] for r in cpu if r["output dtype"] == "bfloat16"} >= {"softmax", "layer_norm"}
    assert amp.fp32_list_misses(cpu, "cpu") == []  # ... which CPU autocast's own lists allow
    assert len(amp.fp32_list_misses(cpu, "cuda")) >= 2  # and which CUDA's would not


def test_clipping_needs_unscale_first() -> None:
    out = amp.clip_after_scaling(scale=2.0**16, max_norm=1.0)
    assert out["true grad norm"] > 1.0  # so clipping must act
    assert out["unscale_ then clip"] == pytest.approx(1.0, rel=1e-5)
    assert out["clip scaled grads"] == pytest.approx(2.0**-16, rel=1e-2)  # clipped at 1 while 65536x too big
    assert out["norm the clip sees"] == pytest.approx(2.0**16 * out["true grad norm"], rel=1e-6)


def test_with_adamw_the_scale_cancels_but_the_clip_fires_on_every_step() -> None:
    """Lab 04's text claimed 65536x smaller updates for any optimizer; that holds for SGD only."""
    sgd, adam = (amp.clip_after_scaling(scale=2.0**16, max_norm=1.0, optimizer=o) for o in ("sgd", "adamw"))
    assert sgd["clip scaled grads"] / sgd["unscale_ then clip"] == pytest.approx(2.0**-16, rel=1e-2)
    # Adam's first update is lr * m / sqrt(v) ~ lr per weight whatever the gradient's size: 1e-3 * sqrt(1000)
    assert adam["unscale_ then clip"] == pytest.approx(1e-3 * 1000**0.5, rel=1e-3)
    assert 0.8 < adam["clip scaled grads"] / adam["unscale_ then clip"] < 1.0  # only eps (1e-8) notices the scale
    assert adam["norm the clip sees"] > 1e6  # the clip threshold is 1: it fires whatever the true norm
    with pytest.raises(ValueError, match="optimizer must be one of sgd, adamw, got 'adam'"):
        amp.clip_after_scaling(optimizer="adam")


def test_bf16_keeps_tiny_gradients_that_fp16_flushes() -> None:
    g = 10.0 ** np.random.default_rng(0).uniform(-12, -3, 10_000)  # gradient-sized magnitudes
    assert amp.flushed_to_zero(g, torch.bfloat16) == 0.0  # fp32's exponent range: no scaler needed
    assert 0.3 < amp.flushed_to_zero(g, torch.float16) < 0.7  # below 2^-24 ~ 6e-8 becomes 0
    assert amp.flushed_to_zero([0.0, 1e-30], torch.float16) == 1.0  # zeros are not counted
    assert amp.flushed_to_zero([1e-30, 1.0, 1.0], torch.float16) == 1 / 3  # counted in float64: an exact fraction


def test_worst_element_is_the_element_behind_the_tables_roundings() -> None:
    rows = {r["op"]: r for r in amp.autocast_dtypes("cpu", torch.bfloat16)}
    for op in ("log_softmax", "softmax"):
        w = amp.worst_element(op, "cpu", torch.bfloat16)
        assert w["roundings"] == rows[op]["max error (roundings)"]
        assert w["fp32 rounded once"] == float(torch.tensor(w["fp32"]).to(torch.bfloat16))
        u = 2.0**-8  # bf16 unit roundoff (eps / 2): the worst element's error, in roundings, is the table's
        assert abs(w["autocast"] - w["fp32"]) / (abs(w["fp32"]) * u) == pytest.approx(w["roundings"], rel=1e-3)
        assert isinstance(w["same as without autocast"], bool)
