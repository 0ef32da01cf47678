"""labkit.precision.train: bf16 / fp16+loss-scaling training of the tiny GPT tracks fp32.

Tolerance: on the same seed (same init, same batches), the mean loss of the last 5 of 25 AdamW
steps in bf16 or fp16 with dynamic loss scaling is within LOSS_TOL = 0.05 nats/token of fp32's, in
JAX and in PyTorch. (Measured gaps are ~1e-3; the loss itself falls by ~2 nats in these steps.)
The lab judges the whole curve against a measured noise floor instead (labkit.precision.noise);
this fixed bound is only the unit test's guard on the tiny model.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from labkit.precision import loss_scale as ls
from labkit.precision import train as pt
from labkit.gpt.data import ByteTokenizer, load_corpus
from labkit.gpt.config import get_config, n_params

LOSS_TOL = 0.05  # nats/token
CFG = get_config("test")
TC = pt.TrainConfig(steps=25, batch=8, seq=CFG.seq_len, lr=3e-3, seed=0)


@pytest.fixture(scope="module")
def tokens() -> np.ndarray:
    return ByteTokenizer().encode(load_corpus())


@pytest.fixture(scope="module")
def flat() -> dict[str, np.ndarray]:
    return pt.init_flat(CFG, seed=0)


@pytest.fixture(scope="module")
def runs(tokens: np.ndarray, flat: dict[str, np.ndarray]) -> dict[tuple[str, str], pt.TrainResult]:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: thread sync costs more than it saves
    try:
        out = {}
        for prec in ("fp32", "bf16", "fp16_scaled"):
            out[("jax", prec)] = pt.train_jax(CFG, prec, tokens, TC, flat)
            out[("torch", prec)] = pt.train_torch(CFG, prec, tokens, TC, flat)
        return out
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("fw", ["jax", "torch"])
@pytest.mark.parametrize("prec", ["bf16", "fp16_scaled"])
def test_low_precision_reaches_fp32_loss(runs: dict, fw: str, prec: str) -> None:
    ref, low = runs[(fw, "fp32")], runs[(fw, prec)]
    assert ref.losses[0] - ref.final_loss() > 1.0  # it did learn
    assert abs(low.final_loss() - ref.final_loss()) < LOSS_TOL
    assert all(math.isfinite(v) for v in low.losses) and low.skipped == 0


def test_same_start_in_both_frameworks(runs: dict) -> None:
    j, t = runs[("jax", "fp32")], runs[("torch", "fp32")]
    assert abs(j.losses[0] - t.losses[0]) < 1e-4  # same weights, same first batch
    assert abs(j.final_loss() - t.final_loss()) < 0.01


def test_results_record_scales_times_and_memory(runs: dict) -> None:
    for (fw, prec), r in runs.items():
        assert len(r.losses) == len(r.scales) == TC.steps and len(r.step_times_s) == TC.steps - TC.timed_from
        assert r.step_time_s > 0
        assert r.scales[0] == (2.0**16 if prec == "fp16_scaled" else 1.0)
        assert r.memory["params_fp32"] == 4 * n_params(CFG) and r.memory["adam_state_fp32"] == 8 * n_params(CFG)
    for fw in ("jax", "torch"):  # 2-byte activations: less kept for the backward pass
        assert runs[(fw, "bf16")].memory["saved_for_backward"] < runs[(fw, "fp32")].memory["saved_for_backward"]
    assert runs[("jax", "fp32")].memory["xla_temp"] > 0


@pytest.mark.parametrize("fw", ["jax", "torch"])
def test_saved_breakdown_adds_up_to_the_runs_count_and_names_what_stays_fp32(runs: dict, tokens: np.ndarray,
                                                                           flat: dict, fw: str) -> None:
    """Lab 04 printed a fixed reason for bf16 keeping 0.66x; the breakdown by dtype and shape is measured."""
    x = tokens[:TC.batch * TC.seq].reshape(TC.batch, TC.seq)
    for prec in ("fp32", "bf16"):
        rows = pt.saved_breakdown(fw, CFG, prec, x, flat)
        total = sum(r["MB"] for r in rows) * 1e6
        assert total == pytest.approx(runs[(fw, prec)].memory["saved_for_backward"], abs=1e-3)
        assert [r["MB"] for r in rows] == sorted((r["MB"] for r in rows), reverse=True)
        dtypes = {r["dtype"] for r in rows}
        assert ("bfloat16" in dtypes) == (prec == "bf16") and "float32" in dtypes
    act = (TC.batch, TC.seq, CFG.d_model)  # full-width activations some bf16 ops still keep in fp32
    assert any(r["dtype"] == "float32" and r["shape"][-3:] == act for r in pt.saved_breakdown(fw, CFG, "bf16", x, flat))
    with pytest.raises(ValueError, match="framework must be 'jax' or 'torch', got 'mxnet'"):
        pt.saved_breakdown("mxnet", CFG, "bf16", x, flat)


def test_overflowing_scale_skips_steps_and_backs_off_in_torch(tokens: np.ndarray, flat: dict) -> None:
    tc = pt.TrainConfig(steps=8, batch=4, seq=CFG.seq_len, loss_scale=ls.LossScaleConfig(2.0**40, growth_interval=100))
    r = pt.train_torch(CFG, "fp16_scaled", tokens, tc, flat)
    assert r.skipped >= 1 and r.scales[-1] < 2.0**40 and all(math.isfinite(v) for v in r.losses)


def test_overflowing_scale_skips_steps_and_backs_off_in_jax(tokens: np.ndarray, flat: dict) -> None:
    # same shapes and rule as TC's fp16 run, only the initial scale differs: the compiled step is reused
    tc = pt.TrainConfig(steps=4, batch=TC.batch, seq=CFG.seq_len,
                        loss_scale=ls.LossScaleConfig(2.0**60, growth_interval=TC.loss_scale.growth_interval))
    r = pt.train_jax(CFG, "fp16_scaled", tokens, tc, flat)
    assert r.skipped == 4 and r.scales == [2.0**60, 2.0**59, 2.0**58, 2.0**57]
    # every step was skipped, so the weights never moved: the loss is the initial model's on each batch
    assert all(math.isfinite(v) for v in r.losses)


def test_plan_falls_back_to_fp16_on_a_gpu_without_bf16() -> None:
    precisions, why = pt.plan("gpu", False, "Tesla T4")
    assert precisions == ["fp32", "fp16_scaled"] and "Tesla T4" in why and "bf16" in why
    assert pt.plan("gpu", True, "NVIDIA H100")[0] == ["fp32", "bf16", "fp16_scaled"]
    assert pt.plan("cpu", False)[0] == ["fp32", "bf16", "fp16_scaled"]  # bf16 is emulated, still works
    assert "no bf16 instructions" in pt.plan("cpu", False)[1] and "AMX" in pt.plan("cpu", True)[1]  # this CPU's own
    assert "fp16" in pt.plan("tpu", True)[1]


def test_warmup_is_linear_then_flat_and_counts_applied_updates() -> None:
    tc = pt.TrainConfig(lr=1e-3, warmup=4)
    assert [pt.lr_at(tc, a) for a in range(6)] == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3])
    assert pt.lr_at(pt.TrainConfig(lr=1e-3, warmup=0), 0) == 1e-3


def test_clipping_is_the_same_recipe_in_both_frameworks(tokens: np.ndarray, flat: dict) -> None:
    # A clip far below the gradient norm makes every update clip-sized: if the frameworks clipped
    # differently (or one not at all) the losses would part within a few steps.
    tc = pt.TrainConfig(steps=6, batch=TC.batch, seq=CFG.seq_len, lr=3e-3, warmup=2, clip_norm=1e-2)
    j, t = pt.train_jax(CFG, "fp32", tokens, tc, flat), pt.train_torch(CFG, "fp32", tokens, tc, flat)
    np.testing.assert_allclose(j.losses, t.losses, atol=2e-4)
    free = pt.train_torch(CFG, "fp32", tokens, replace(tc, clip_norm=None), flat)
    assert abs(free.losses[-1] - t.losses[-1]) > 10 * 2e-4  # the clip did change the run



def test_fp16_loss_scaling_clips_the_unscaled_gradients_in_torch(tokens: np.ndarray, flat: dict,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """GradScaler.unscale_ comes before clip_grad_norm_: the clip sees the true gradient norm, not scale x it.

    With unscale_ after the clip, the norm seen would be 2^16 x the true one, every update would be
    clipped to ~1/65536 of its size, and this test's comparison with the fp32 norm would be off by that factor.
    """
    import torch

    from labkit.gpt.data import Batcher, to_torch
    from labkit.gpt.convert import load_flat_params
    from labkit.gpt.torch_model import TorchGPT, torch_loss

    real, seen = torch.nn.utils.clip_grad_norm_, []

    def spy(params, max_norm, *args, **kwargs):  # the loop's clip, recording the total norm it was handed
        total = real(params, max_norm, *args, **kwargs)  # norm before clipping
        seen.append(float(total))
        return total

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", spy)
    tc = pt.TrainConfig(steps=2, batch=4, seq=CFG.seq_len, clip_norm=1.0, timed_from=0)
    r = pt.train_torch(CFG, "fp16_scaled", tokens, tc, flat)
    assert len(seen) == tc.steps and r.skipped == 0 and r.scales[0] == 2.0**16

    # the true norm of step 0: fp32 gradients of the same initial weights on the run's first batch
    x, y = (to_torch(a) for a in next(Batcher(tokens, tc.batch, tc.seq, seed=tc.seed)))
    model = load_flat_params(TorchGPT(CFG), flat)
    torch_loss(model, x, y).backward()
    true = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in model.parameters()])))
    assert 0 < true < 1e3  # a fresh model's gradient norm: far below the 2^16 scale
    assert seen[0] == pytest.approx(true, rel=0.05)  # fp16 rounding only; a scaled norm would be 65536x
    assert all(0 < s < 1e3 for s in seen)  # later steps too: never scale-sized

def test_bad_input() -> None:
    with pytest.raises(ValueError, match="valid: fp32, bf16, fp16_scaled, fp16"):
        pt.check_precision("fp8")
    with pytest.raises(ValueError, match="steps must be >= 1"):
        pt.TrainConfig(steps=0)
    with pytest.raises(ValueError, match="warmup must be >= 0"):
        pt.TrainConfig(warmup=-1)
    with pytest.raises(ValueError, match="clip_norm must be a finite number > 0"):
        pt.TrainConfig(clip_norm=0.0)
    with pytest.raises(ValueError, match=r"init_scale \(the loss scale\) must be a finite number in \(0, "):
        pt.TrainConfig(loss_scale=ls.LossScaleConfig(init_scale=-8.0))
    with pytest.raises(ValueError, match="trace_steps must be >= 0"):
        pt.TrainConfig(trace_steps=-1)
    # Issue-style bad input: a count given as a float or str, a NaN lr, nothing left to time, no loss-scale config.
    with pytest.raises(TypeError, match=r"TrainConfig.steps must be a whole number >= 1, got 2.5 \(float\)"):
        pt.TrainConfig(steps=2.5)
    with pytest.raises(TypeError, match=r"TrainConfig.batch must be a whole number >= 1, got True"):
        pt.TrainConfig(batch=True)
    with pytest.raises(ValueError, match=r"TrainConfig.lr must be a finite number > 0, got nan; e.g. lr=3e-3"):
        pt.TrainConfig(lr=float("nan"))
    with pytest.raises(TypeError, match=r"TrainConfig.clip_norm must be a finite number > 0, got 'a'"):
        pt.TrainConfig(clip_norm="a")
    with pytest.raises(ValueError, match=r"TrainConfig.timed_from must be >= 0, got -1"):
        pt.TrainConfig(timed_from=-1)
    with pytest.raises(TypeError, match=r"loss_scale must be a LossScaleConfig, got None"):
        pt.TrainConfig(loss_scale=None)
    with pytest.raises(TypeError, match=r"TrainConfig.keep_params must be True or False, got 'yes'"):
        pt.TrainConfig(keep_params="yes")
    ok = pt.TrainConfig(steps=np.int64(3), timed_from=0, lr=np.float32(1e-3))
    assert (type(ok.steps), type(ok.lr), ok.steps) == (int, float, 3)  # numpy scalars become Python numbers
    assert [pt.compute_dtype(p) for p in ("fp32", "bf16", "fp16_scaled")] == ["float32", "bfloat16", "float16"]
    with pytest.raises(ValueError, match="valid: fp32"):
        pt.compute_dtype("int8")


def test_the_attention_kernel_is_part_of_the_compiled_step_key(tokens, flat, monkeypatch) -> None:
    """A bf16 run under attention.xla_attention() on a GPU must not reuse the cuDNN-attention program
    compiled for an earlier run (the diagnosis of issue 17 compares the two)."""
    from labkit.precision import train_jax
    from labkit.runtime import attention

    tc = replace(TC, steps=2)
    pt.train_jax(CFG, "bf16", tokens, tc, flat)
    before = len(train_jax._COMPILED)
    pt.train_jax(CFG, "bf16", tokens, tc, flat)
    assert len(train_jax._COMPILED) == before  # same program: reused
    monkeypatch.setattr(attention, "jax_attention_implementation", lambda dtype: "xla")  # another kernel choice
    pt.train_jax(CFG, "bf16", tokens, tc, flat)
    assert len(train_jax._COMPILED) == before + 1


def test_trace_steps_charge_extra_jax_steps_by_hlo_op_without_touching_the_run(tokens, flat) -> None:
    """bench_precision's diagnosis (issue 17): the same compiled step, traced after the timed run."""
    from labkit.measure import xla_breakdown as xb

    tc = replace(TC, steps=3, trace_steps=2)
    traced, plain = pt.train_jax(CFG, "bf16", tokens, tc, flat), pt.train_jax(CFG, "bf16", tokens, replace(tc, trace_steps=0), flat)
    assert traced.losses == plain.losses and plain.device_time is None  # the trace runs after the recorded steps
    b = traced.device_time
    assert b.steps == 2 and b.unknown_ns == 0.0 and b.by_category_ns[xb.MATMUL] > 0
    assert b.by_phase_ns[xb.BACKWARD] > 0 and b.by_phase_ns[xb.OPTIMIZER] > 0  # AdamW and the loss scale's update


def test_cuda_baseline_collects_what_an_earlier_run_left_in_a_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA, a run's peak counts from what is allocated once the garbage collector has run.

    Reproduces the H100 failure: an earlier run's model and optimizer, held in a reference cycle,
    still counted as allocated, so three runs of one model read 10.7, 16.2 and 19.9 GB. Here a fake
    allocator reports 5 GB while such a cycle lives; the baseline must be taken after collecting it.
    """
    import gc
    import weakref

    import torch

    class Leftover:  # an earlier run's state, alive only through its own cycle
        def __init__(self) -> None:
            self.me = self

    gc.disable()  # keep the cycle until _cuda_baseline collects it
    try:
        ref = weakref.ref(Leftover())
        assert ref() is not None
        calls: list[str] = []
        monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda dev=None: calls.append("reset"))
        monkeypatch.setattr(torch.cuda, "memory_allocated", lambda dev=None: 5_000_000_000 if ref() else 123)
        assert pt._cuda_baseline(torch.device("cpu")) == 0 and ref() is not None  # no CUDA: nothing touched
        assert pt._cuda_baseline(torch.device("cuda", 0)) == 123  # the cycle collected first
        assert ref() is None and calls == ["empty_cache", "reset"]
    finally:
        gc.enable()


def _torch_heldout(flat: dict, tokens: np.ndarray, batches: int, batch: int, seed: int) -> float:
    """The reference: TorchGPT in fp32 on the same seeded windows (the other framework)."""
    import torch

    from labkit.gpt.convert import load_flat_params
    from labkit.gpt.data import get_batch
    from labkit.gpt.torch_model import TorchGPT, torch_loss

    model, rng, total = load_flat_params(TorchGPT(CFG), flat), np.random.default_rng(seed), 0.0
    with torch.no_grad():
        for _ in range(batches):
            x, y = (torch.from_numpy(a).long() for a in get_batch(tokens, batch, CFG.seq_len, rng))
            total += float(torch_loss(model, x, y))
    return total / batches


def test_heldout_loss_is_torchs_fp32_loss_on_the_same_windows(tokens: np.ndarray, flat: dict) -> None:
    """diag_bf16_loss judges every run's weights by this forward: it must be the model's loss, not JAX's alone."""
    from labkit.precision.train_jax import heldout_loss_jax

    got = heldout_loss_jax(CFG, flat, tokens, batches=3, batch=4, seed=5)
    assert got == pytest.approx(_torch_heldout(flat, tokens, 3, 4, 5), abs=1e-4)
    assert got == pytest.approx(math.log(CFG.vocab_size), abs=0.1)  # a fresh GPT-2 init: near-uniform logits
    low = heldout_loss_jax(CFG, flat, tokens, "bf16", batches=3, batch=4, seed=5)
    assert 0 < abs(low - got) < 0.05  # the same weights through a bf16 forward: close, not the same numbers
    assert heldout_loss_jax(CFG, flat, tokens, batches=3, batch=4, seed=6) != got  # the seed picks the windows


def test_kept_params_are_the_trained_weights(tokens: np.ndarray, flat: dict, runs: dict) -> None:
    """TrainResult.params is the run's final master weights (trained, not the init), the same in both frameworks."""
    from labkit.precision.train_jax import heldout_loss_jax

    assert all(r.params is None for r in runs.values())  # off by default: no copy per run
    tc = replace(TC, steps=12, keep_params=True)
    kept = {fw: pt.train(fw, CFG, "fp32", tokens, tc, flat).params for fw in ("jax", "torch")}
    for fw, p in kept.items():
        assert set(p) == set(flat) and all(p[k].dtype == np.float32 for k in p)
        assert max(float(np.abs(p[k] - flat[k]).max()) for k in p) > 1e-3  # twelve AdamW steps moved them
    before = heldout_loss_jax(CFG, flat, tokens, batches=2, batch=8, seed=3)
    after = {fw: heldout_loss_jax(CFG, p, tokens, batches=2, batch=8, seed=3) for fw, p in kept.items()}
    assert after["jax"] < before - 0.3  # trained weights, not the init
    assert after["jax"] == pytest.approx(_torch_heldout(kept["jax"], tokens, 2, 8, 3), abs=1e-4)
    assert after["jax"] == pytest.approx(after["torch"], abs=0.01)  # same recipe, same batches, two frameworks


def test_heldout_loss_bad_input(tokens: np.ndarray, flat: dict) -> None:
    from labkit.precision.train_jax import heldout_loss_jax

    with pytest.raises(ValueError, match=rf"seq=999 is longer than the model's seq_len={CFG.seq_len}"):
        heldout_loss_jax(CFG, flat, tokens, seq=999)
    with pytest.raises(ValueError, match="fp32_matmul must be one of default, highest, tf32, got 'fast'"):
        heldout_loss_jax(CFG, flat, tokens, fp32_matmul="fast")
    with pytest.raises(ValueError, match="batches must be >= 1, got 0"):
        heldout_loss_jax(CFG, flat, tokens, batches=0)
    with pytest.raises(ValueError, match="valid: fp32"):
        heldout_loss_jax(CFG, flat, tokens, "int8")


def test_the_noise_judge_flags_fp16_without_loss_scaling_at_a_large_batch(runs: dict, tokens: np.ndarray,
                                                                         flat: dict) -> None:
    """Lab 04's negative control: a judge that cannot fail proves nothing.

    fp16 with no loss scale, the loss divided by the 2**19 / (batch x seq) micro-batches of a
    2**19-token batch (a static scale below 1; unscale multiplies the fp32 gradients back, as summing
    the micro-batches would): logit gradients ~(1/256) / 2**19 ~ 7e-9 sit below fp16's smallest
    subnormal and flush to 0. The same judge that passes bf16 must call this LARGER than the noise.
    """
    from labkit.precision import noise

    other = pt.train_jax(CFG, "fp32", tokens, TC, pt.init_flat(CFG, seed=1))
    micro = 2**19 / (TC.batch * TC.seq)
    ctl = pt.train_jax(CFG, "fp16_scaled", tokens, replace(TC, loss_scale=ls.static(1 / micro)), flat)
    ref = runs[("jax", "fp32")].losses
    j = noise.judge(ctl.losses, ref, other.losses, start=TC.warmup)
    assert not j.within_noise and j.drift > 0 and ctl.skipped == 0, j.sentence("control")
    assert noise.judge(runs[("jax", "bf16")].losses, ref, other.losses, start=TC.warmup).within_noise
