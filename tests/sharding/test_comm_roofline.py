"""labkit.sharding.comm_roofline against hand-computed small cases (bytes, bandwidths, FLOPs chosen
so the answer is known)."""

from __future__ import annotations

import pytest

from labkit.sharding import comm_roofline as R
from labkit.sharding.collectives import Collective


def _ar(nbytes: int, n: int = 8, dtype: str = "f32") -> Collective:
    return Collective("all-reduce", "all-reduce", "ar", (nbytes // 4,), dtype, nbytes, n, (tuple(range(n)),))


def test_roofline_by_hand_on_h100x8() -> None:
    # 8 MB of fp32 gradients all-reduced over 8 H100s, priced as bf16: D = 4 MB, sent 2·7/8·4 MB = 7 MB
    # at 450 GB/s -> 15.56 µs. 9.89 GFLOP per device at 989 TFLOP/s -> 10 µs; at 744 measured -> 13.29 µs.
    r = R.roofline("dp", [_ar(8_000_000)], 9.89e9, "8x H100 SXM")
    assert r.comm_s == pytest.approx(7e6 / 450e9)
    assert r.compute_s == pytest.approx(10e-6) and r.compute_measured_s == pytest.approx(9.89e9 / 744e12)
    assert r.ratio == pytest.approx(7e6 / 450e9 / 10e-6)
    row = r.row()
    # The measured peak is a reference figure (Lab 00's committed H100 run), not this run's: the column says so.
    assert row["compute µs (reference peak, Lab 00 on an H100)"] == pytest.approx(9.89e9 / 744e12 * 1e6)
    assert "compute µs (measured peak)" not in row
    assert row["overlapped µs"] == pytest.approx(7e6 / 450e9 * 1e6) and row["serial µs"] == pytest.approx(
        (7e6 / 450e9 + 10e-6) * 1e6)


def test_roofline_by_hand_on_v5e8_and_no_measured_peak() -> None:
    # Same gradients on a v5e-8: the 8-chip ring snakes through the 2x4 grid at 2 x 50 GB/s = 100 GB/s.
    r = R.roofline("dp", [_ar(8_000_000)], 1.97e9, "TPU v5e-8")
    assert r.comm_s == pytest.approx(7e6 / 100e9) and r.compute_s == pytest.approx(1.97e9 / 197e12)
    assert r.compute_measured_s is None
    assert r.ratio == pytest.approx(7)
    # fp32 priced as fp32 (itemsize 4): twice the bytes
    assert R.roofline("dp", [_ar(8_000_000)], 1.97e9, "TPU v5e-8", itemsize=4).comm_s == pytest.approx(2 * r.comm_s)


def test_dp_critical_batch_is_the_scaling_books_rule() -> None:
    # The scaling book: TPU v5p, C = 4.6e14, W = 2 x 9e10 (1-D ring over ICI): 2,555 tokens per chip
    assert R.dp_critical_batch(4.6e14, 1.8e11, n=10**9) == pytest.approx(4.6e14 / 1.8e11, rel=1e-6)
    assert R.dp_critical_batch(100.0, 1.0, n=2) == pytest.approx(2 * 1 / 2 * 2 / 4 * 100)  # 50
    assert R.dp_critical_batch(100.0, 1.0, n=8, flops_per_param_token=6) == pytest.approx(2 * 7 / 8 * 2 / 6 * 100)
    assert R.dp_critical_batch(100.0, 1.0, n=1) == 0.0
    v5e = R.system_intensity("TPU v5e-8")
    assert v5e["W bytes/s"] == 100e9 and v5e["C / W FLOP/byte"] == pytest.approx(1970)
    assert R.system_intensity("8x H100 SXM")["C / W FLOP/byte"] == pytest.approx(989e12 / 450e9)


def test_train_flops_per_token_by_hand() -> None:
    # 6N for the weights; attention per layer: QK^T and A·V, 2·s·d FLOPs each per token forward, x3 with backward.
    assert R.train_flops_per_token(1000, n_layer=2, seq_len=32, d_model=128) == 6 * 1000 + 12 * 2 * 32 * 128
    assert R.train_flops_per_token(10**9, 1, 1, 1) == pytest.approx(6e9 + 12)
    # Lab 03's smoke GPT (431,360 parameters): attention adds 12·2·32·128 = 98,304 FLOPs per token
    k = R.train_flops_per_token(431_360, 2, 32, 128) / 431_360
    assert k == pytest.approx(6 + 98_304 / 431_360)
    # a larger k (the whole step) lowers the data-parallel break-even against the backward-only 4
    assert R.dp_critical_batch(100.0, 1.0, 8, flops_per_param_token=k) < R.dp_critical_batch(100.0, 1.0, 8)


def test_mixed_float_widths_refused_and_unknown_dtype() -> None:
    with pytest.raises(ValueError, match="several float widths"):
        R.array_scale([_ar(800), _ar(800, dtype="bf16")], 2)
    with pytest.raises(ValueError, match="no fp32 peak"):
        R.roofline("dp", [_ar(800)], 1e9, "TPU v5e-8", dtype="fp32")


def test_the_reference_peak_is_the_committed_h100_measurement() -> None:
    """MEASURED_PEAK is not a remembered figure: it is Lab 00's committed H100 run, to the TFLOP/s."""
    import json
    from pathlib import Path

    report = json.loads((Path(__file__).parents[2] / "benchmarks/nvidia-h100-80gb-hbm3/report.json").read_text())
    lab00 = next(lab for lab in report["labs"] if lab["name"].startswith("00"))
    assert R.MEASURED_PEAK["NVIDIA H100 SXM"] == round(lab00["metrics"]["matmul_tflops_measured"]) * 1e12


# ------------------------------------------------------------------ bad numbers are refused, not divided

NAN = float("nan")


@pytest.mark.parametrize(("call", "err", "match"), [
    (lambda: R.dp_critical_batch(1e15, -1e11, 8), ValueError, r"egress_bytes_s must be a finite number > 0, got -1"),
    (lambda: R.dp_critical_batch(1e15, 0, 8), ValueError, r"egress_bytes_s must be a finite number > 0, got 0 bytes/s"),
    (lambda: R.dp_critical_batch(NAN, 1e11, 8), ValueError, r"peak_flops .*got nan"),
    (lambda: R.dp_critical_batch(1e15, 1e11, 0), ValueError, r"n must be >= 1, got 0; e.g. n=8"),
    (lambda: R.dp_critical_batch(1e15, 1e11, 2.5), TypeError, r"n must be a whole number >= 1, got 2.5"),
    (lambda: R.dp_critical_batch(1e15, 1e11, 8, bytes_per_param=-2), ValueError, r"bytes_per_param .*got -2"),
    (lambda: R.dp_critical_batch(1e15, 1e11, 8, flops_per_param_token=0), ValueError, r"flops_per_param_token .*got 0"),
    (lambda: R.dp_critical_batch("1e15", 1e11, 8), TypeError, r"peak_flops .*got '1e15' \(str\)"),
    (lambda: R.train_flops_per_token(-1, 2, 32, 64), ValueError, r"n_params must be >= 1, got -1"),
    (lambda: R.train_flops_per_token(1000, 0, 32, 64), ValueError, r"n_layer must be >= 1, got 0"),
    (lambda: R.train_flops_per_token(1000, 2, -32, 64), ValueError, r"seq_len must be >= 1, got -32"),
    (lambda: R.train_flops_per_token(1000, 2, 32, 64.5), TypeError, r"d_model must be a whole number >= 1, got 64.5"),
    (lambda: R.roofline("dp", [_ar(800)], 0, "TPU v5e-8"), ValueError, r"flops \(per device per step\) .*got 0"),
    (lambda: R.roofline("dp", [_ar(800)], 1e9, "TPU v5e-8", itemsize=0), ValueError, r"itemsize .*got 0"),
    (lambda: R.array_scale(None, 2), TypeError, r"list of Collective.*got None"),
    (lambda: R.flops_per_device(None), TypeError, r"flops_per_device: pass f.lower\(args\).compile\(\).*got None"),
])
def test_bad_input_names_the_value(call, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        call()


def test_a_lowered_program_is_not_counted() -> None:
    """A Lowered's cost_analysis() counts the program before the partitioner splits it: refused, with the fix."""
    from tests.conftest import run_result

    res = run_result(r"""
import json
import jax, numpy as np
from labkit.sharding import comm_roofline as R
lowered = jax.jit(lambda a: a @ a).lower(np.ones((8, 8), np.float32))
try:
    R.flops_per_device(lowered)
    out = "no error"
except TypeError as e:
    out = str(e)
print("RESULT" + json.dumps({"error": out, "compiled": R.flops_per_device(lowered.compile())}))
""", timeout=120)
    assert "(Lowered): call .compile() first" in res["error"]
    assert res["compiled"] > 0


def test_compute_only_step_on_real_chips_and_on_simulated_devices() -> None:
    """A cold read: 'sharded step - unsharded step' is communication only on a shared host. On 8 real chips
    each device computes 1/8 of the FLOPs, so that difference is comm - 7/8 compute: negative, meaningless."""
    single, flops = 80e-3, 8e9  # the unsharded step: 80 ms for 8 GFLOP on one device
    # dp on 8 real chips: each runs 1 GFLOP, in parallel -> 10 ms of compute; a 15 ms step spent 5 ms elsewhere
    real = R.compute_only_step_s(single, flops, 1e9, 8, shared_cores=False)
    assert real == pytest.approx(10e-3) and 15e-3 - real == pytest.approx(5e-3)
    assert 15e-3 - single < 0  # what the old column showed on real chips
    # tp repeats some work (replicated LayerNorms): 1.2 GFLOP per device -> 12 ms ideal, not 10
    assert R.compute_only_step_s(single, flops, 1.2e9, 8, shared_cores=False) == pytest.approx(12e-3)
    # 8 simulated devices on the host's cores: all 8 GFLOP queue on the cores the unsharded step had -> 80 ms
    assert R.compute_only_step_s(single, flops, 1e9, 8, shared_cores=True) == pytest.approx(single)
    assert R.compute_only_step_s(single, flops, 1.2e9, 8, shared_cores=True) == pytest.approx(96e-3)


@pytest.mark.parametrize("args, err, match", [
    ((0.0, 8e9, 1e9, 8, False), ValueError, "single_s"),
    ((1.0, 8e9, 1e9, 0, False), ValueError, "n_devices"),
    ((1.0, 8e9, 1e9, 8, "yes"), TypeError, "shared_cores must be True"),
])
def test_compute_only_step_refuses_bad_input(args: tuple, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        R.compute_only_step_s(*args)
