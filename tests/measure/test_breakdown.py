"""labkit.measure.breakdown (Lab 02): kernels charged to the op that launched them, on real GPU kernel names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from labkit.gpt.config import get_config
from labkit.measure import breakdown as bd
from labkit.measure import flops

FIXTURES = Path(__file__).parent / "fixtures"
H100_KERNELS = FIXTURES / "torch_kernels_h100.json"  # benchmarks/record_torch_kernels.py on an H100
PUBLIC_KERNELS = FIXTURES / "kernel_names_public.json"  # sm90_xmma, cutlass, flash, fmha, triton names
H100_BF16_PEAK = 989e12  # FLOP/s, dense bf16, NVIDIA H100 SXM datasheet (labkit.runtime.hardware)


def _h100_runs() -> list[dict]:
    return json.loads(H100_KERNELS.read_text())["runs"]


def _records(run: dict) -> list[bd.KernelRecord]:
    return [bd.KernelRecord(k["kernel"], k["us_per_step"], (k["launched_by"] or [None])[0]) for k in run["kernels"]]


@pytest.mark.parametrize("run", _h100_runs(), ids=lambda r: "compile" if r["compile"] else "eager")
def test_h100_gemms_and_attention_are_charged_by_their_launcher(run: dict) -> None:
    """Hopper's cuBLAS GEMMs are nvjet_*: the name buckets miss them, the launching aten::mm does not."""
    recs = _records(run)
    gemms = [r for r in recs if r.kernel.startswith("nvjet_sm90")]
    cudnn = [r for r in recs if r.launcher and r.launcher.startswith("aten::_cudnn_attention")]
    assert gemms and cudnn, "the fixture should hold Hopper GEMM and cuDNN attention kernels"
    assert {bd.categorize_op(r.kernel) for r in gemms} == {bd.OTHER}  # the old blind spot: no "gemm" in nvjet
    assert {bd.op_category(r.launcher) for r in gemms} == {bd.MATMUL}
    assert {bd.op_category(r.launcher) for r in cudnn} == {bd.ATTENTION}  # incl. cudnn::fusion::* helpers
    if run["compile"]:  # Inductor's fusions are launched under their own triton_* name
        tri = [r for r in recs if r.kernel.startswith("triton_")]
        assert tri and {bd.op_category(r.launcher) for r in tri} == {bd.FUSED}

    # Reference share, by hand from the fixture: kernels launched by aten::mm or a cuDNN attention op.
    total = sum(r.device_us for r in recs)
    expected = sum(r.device_us for r in recs if r.launcher == "aten::mm" or r in cudnn) / total
    out = bd.attribute(recs)
    assert out.matmul_share == pytest.approx(expected, rel=1e-12)
    assert out.by_kernel_name == 0.0 and out.source == bd.BY_LAUNCHER
    assert sum(r["share"] for r in out.rows) == pytest.approx(1.0)
    assert out.ms_per_step == pytest.approx(run["kernel_us_per_step"] / 1e3)


@pytest.mark.parametrize("run", _h100_runs(), ids=lambda r: "compile" if r["compile"] else "eager")
def test_name_buckets_imply_matmuls_faster_than_the_chip(run: dict) -> None:
    """The check Lab 02 makes: FLOPs / matmul time <= peak. Name buckets break it, launchers do not."""
    cfg = get_config(run["config"], vocab_size=256)
    step_flops = flops.flops_per_step(cfg, run["batch"], run["seq_len"], "matmul")  # every matmul of the step
    recs = _records(run)
    assert bd.matmul_rate(step_flops, bd.attribute(recs)) < H100_BF16_PEAK
    by_name = sum(r.device_us for r in recs if bd.categorize_op(r.kernel) in bd.MATMUL_CATEGORIES) / 1e6  # s
    assert step_flops / by_name > H100_BF16_PEAK  # the old bucketing's matmuls would beat the datasheet


def test_public_kernel_names_land_where_their_launcher_says() -> None:
    """sm90_xmma / cutlass / flash / fmha GEMM and attention kernels, and a triton_ fusion named after attention."""
    for k in json.loads(PUBLIC_KERNELS.read_text())["kernels"]:
        assert bd.op_category(k["launched_by"]) == k["expected"], k["kernel"]
        assert bd.kernel_category(k["kernel"]) == k["expected"], k["kernel"]  # the fallback agrees
    fusion = "triton_red_fused__scaled_dot_product_cudnn_attention__to_copy_mean_mul_permute_pow_rsqrt"
    assert bd.categorize_op(fusion) == bd.ATTENTION  # what a bare name bucket would say: wrong
    assert bd.op_category("triton_tem_fused_addmm_0") == bd.MATMUL  # an Inductor GEMM template


def test_exact_launcher_names() -> None:
    for op in ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "aten::_scaled_mm"):
        assert bd.op_category(op) == bd.MATMUL, op
    for op in ("aten::_scaled_dot_product_flash_attention", "aten::_flash_attention_backward",
               "aten::_efficient_attention_forward", "aten::_cudnn_attention_forward"):
        assert bd.op_category(op) == bd.ATTENTION, op
    assert bd.op_category("aten::_fused_adamw_") == "optimizer + grad clip"
    assert bd.op_category("aten::copy_") == "copies / dtype casts"
    assert bd.op_category("aten::view") == bd.OTHER
    # Autograd names its nodes without underscores: LayerNorm's backward is not the optimizer's "norm".
    for op in ("NativeLayerNormBackward0", "aten::native_layer_norm_backward", "GeluBackward0"):
        assert bd.op_category(op) == "LayerNorm / GELU / softmax", op


def test_unlinked_kernels_fall_back_to_their_name_and_say_so() -> None:
    recs = [("nvjet_sm90_tst_64x64_NNN", 600.0, None),  # µs; no launcher linked
            ("void at::native::vectorized_layer_norm_kernel<float>", 300.0, "aten::native_layer_norm"),
            ("void at::native::unrolled_elementwise_kernel<add>", 100.0, "aten::add")]
    out = bd.attribute(recs, steps=2)
    assert out.by_kernel_name == pytest.approx(0.6)
    assert out.matmul_share == pytest.approx(0.6) and out.ms_per_step == pytest.approx(0.5)  # 1000 µs / 2 steps
    assert [r["category"] for r in out.rows] == [bd.MATMUL, "LayerNorm / GELU / softmax", bd.OTHER]
    with pytest.raises(ValueError, match="no time"):
        bd.attribute([])
    with pytest.raises(ValueError, match="negative"):
        bd.attribute([("k", -1.0, "aten::mm")])


def test_kernel_records_follow_the_profilers_correlation() -> None:
    """Events built the way torch's profiler parser builds them on CUDA (torch.autograd.profiler)."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    def ev(id_: int, name: str, t0: float, t1: float, dev: DeviceType = DeviceType.CPU, link: int = 0,
           is_async: bool = False) -> FunctionEvent:
        return FunctionEvent(id=id_, name=name, thread=1, start_us=t0, end_us=t1, device_type=dev,
                             linked_correlation_id=link, is_async=is_async)

    mm = ev(8, "aten::mm", 1, 19)  # CPU ops: ids their launches carry
    mm.append_kernel("nvjet_sm90_tst_96x128_64x6_2x1_v_bz_NNN", 0, 12.5)  # as the parser does with the link below
    events = [
        ev(7, "aten::linear", 0, 20), mm,
        ev(50, "cuLaunchKernelEx", 2, 3, link=8),  # the driver call: host time, linked too, not a kernel
        ev(51, "nvjet_sm90_tst_96x128_64x6_2x1_v_bz_NNN", 30, 42.5, DeviceType.CUDA, link=8),
        ev(60, "Memset (Device)", 43, 44, DeviceType.CUDA, link=0),  # no launcher linked
        ev(9, "ProfilerStep", 0, 100, is_async=True),  # async: never a launcher
    ]
    recs = bd.kernel_records(events)
    assert recs == [bd.KernelRecord("nvjet_sm90_tst_96x128_64x6_2x1_v_bz_NNN", 12.5, "aten::mm"),
                    bd.KernelRecord("Memset (Device)", 1.0, None)]
    out = bd.attribute(recs)
    assert out.matmul_share == pytest.approx(12.5 / 13.5) and out.by_kernel_name == pytest.approx(1 / 13.5)


def test_kernel_records_on_a_torch_without_the_link_on_kernel_events() -> None:
    """torch 2.11 (the H100 image): FunctionEvent has no linked_correlation_id; the parser still appends
    each kernel to its launching op's ``kernels``. Reading the attribute with a default of 0 charged
    100% of an H100 profile by kernel name; the ops' lists give the launchers back."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    def ev(id_: int, name: str, t0: float, t1: float, dev: DeviceType = DeviceType.CPU,
           is_async: bool = False) -> FunctionEvent:
        e = FunctionEvent(id=id_, name=name, thread=1, start_us=t0, end_us=t1, device_type=dev, is_async=is_async)
        if hasattr(e, "linked_correlation_id"):
            del e.linked_correlation_id  # as torch 2.11 builds it: the attribute does not exist
        return e

    gemm, flash = "nvjet_sm90_tst_96x128_64x6_2x1_v_bz_NNN", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop"
    mm, sdpa = ev(8, "aten::mm", 1, 19), ev(9, "aten::_scaled_dot_product_cudnn_attention", 20, 30)
    mm.append_kernel(gemm, 0, 12.5)  # what torch's parser does with the kernel its launch links to
    sdpa.append_kernel(flash, 0, 4.0)
    events = [ev(7, "aten::linear", 0, 20), mm, sdpa, ev(50, "cuLaunchKernelEx", 2, 3),
              ev(51, gemm, 30, 42.5, DeviceType.CUDA), ev(52, flash, 43, 47, DeviceType.CUDA),
              ev(60, "Memset (Device)", 48, 49, DeviceType.CUDA),  # claimed by no op
              ev(9, "ProfilerStep", 0, 100, is_async=True)]
    recs = bd.kernel_records(events)
    assert sorted(recs, key=lambda r: r.kernel) == [
        bd.KernelRecord("Memset (Device)", 1.0, None), bd.KernelRecord(flash, 4.0, sdpa.name),
        bd.KernelRecord(gemm, 12.5, "aten::mm")]
    out = bd.attribute(recs)
    assert out.matmul_share == pytest.approx(16.5 / 17.5) and out.by_kernel_name == pytest.approx(1 / 17.5)


def test_torch_op_breakdown_on_cpu_charges_self_time(capfd: pytest.CaptureFixture[str]) -> None:
    from labkit.gpt import data
    from labkit.gpt.torch_model import TorchGPT
    from labkit.gpt.train import TorchTrainer

    cfg = get_config("test")
    tt = TorchTrainer(TorchGPT(cfg))
    x, y = (data.to_torch(a) for a in data.get_batch(data.synthetic_tokens(1000), 4, cfg.seq_len, np.random.default_rng(0)))
    out = bd.torch_op_breakdown(lambda: tt.step(x, y), steps=2)
    assert out.source == bd.BY_CPU_SELF_TIME and out.by_kernel_name == 0.0
    assert sum(r["share"] for r in out.rows) == pytest.approx(1.0)
    assert set(bd.MATMUL_CATEGORIES) <= {r["category"] for r in out.rows}
    assert 0 < out.matmul_share < 1 and bd.matmul_rate(1e9, out) > 0
    assert "profiler_start" not in capfd.readouterr().err  # libkineto's USDT lines are dropped


def _fake_profiler(monkeypatch: pytest.MonkeyPatch, events: list, rows: list) -> list:
    """torch.profiler.profile replaced by a recorded profile; returns the activities each profile asked for."""
    import torch.profiler

    from labkit.runtime import device

    asked = []

    class FakeProfile:
        def __init__(self, activities: list) -> None:
            asked.append(list(activities))

        def __enter__(self) -> "FakeProfile":
            return self

        def __exit__(self, *exc: object) -> bool:
            return False

        def events(self) -> list:
            return events

        def key_averages(self) -> list:
            return rows

    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    monkeypatch.setattr(device, "torch_sync", lambda dev: lambda: None)  # no CUDA to wait for on this torch
    return asked


def _cpu_op(id_: int, name: str, t0: float, t1: float) -> object:
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    return FunctionEvent(id=id_, name=name, thread=1, start_us=t0, end_us=t1, device_type=DeviceType.CPU)


def test_cuda_profile_without_kernels_is_an_error_not_launch_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Real runtime behaviour: on a GPU whose torch profiler cannot use CUPTI (missing, or held by JAX's
    # profiler or Nsight), the profile holds the CPU ops and their launch calls but no kernel records.
    # Their CPU self time is host launch time; charging it as device time gave Lab 02 a wrong breakdown.
    from types import SimpleNamespace

    from torch.profiler import ProfilerActivity

    events = [_cpu_op(1, "aten::linear", 0, 20), _cpu_op(2, "aten::mm", 1, 19), _cpu_op(3, "cudaLaunchKernel", 2, 3)]
    rows = [SimpleNamespace(key="aten::mm", self_cpu_time_total=18.0),
            SimpleNamespace(key="cudaLaunchKernel", self_cpu_time_total=1.0)]
    asked = _fake_profiler(monkeypatch, events, rows)
    calls = []
    with pytest.raises(bd.NoKernelRecords, match=r"CUDA profiler recorded no kernels.*CUPTI"):
        bd.torch_op_breakdown(lambda: calls.append(1), steps=2, device="cuda")
    assert issubclass(bd.NoKernelRecords, RuntimeError)
    assert calls == [1, 1] and asked == [[ProfilerActivity.CPU, ProfilerActivity.CUDA]]
    # the CPU path is unchanged: self time, only CPU activity asked for
    out = bd.torch_op_breakdown(lambda: None, steps=2, device="cpu")
    assert out.source == bd.BY_CPU_SELF_TIME and asked[-1] == [ProfilerActivity.CPU]


def test_cuda_profile_with_kernels_charges_them_by_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same call with the kernels a working CUPTI gives (tests/measure/fixtures, an H100's eager
    # step), laid out as torch's parser lays them out: each on its launching op's ``kernels`` and as a
    # CUDA event of its own.
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    run = next(r for r in _h100_runs() if not r["compile"])
    steps, events, t = run["steps"], [], 0.0
    for i, k in enumerate(run["kernels"]):
        us = k["us_per_step"] * steps
        op = _cpu_op(2 * i, k["launched_by"][0], t, t + 1)
        op.append_kernel(k["kernel"], 0, us)
        events += [op, FunctionEvent(id=2 * i + 1, name=k["kernel"], thread=1, start_us=0.0, end_us=us,
                                     device_type=DeviceType.CUDA)]
        t += 2
    _fake_profiler(monkeypatch, events, rows=[])
    out = bd.torch_op_breakdown(lambda: None, steps=steps, device="cuda")
    assert out.source == bd.BY_LAUNCHER and out.by_kernel_name == 0.0
    ref = bd.attribute(_records(run))
    assert out.matmul_share == pytest.approx(ref.matmul_share)
    assert out.ms_per_step == pytest.approx(run["kernel_us_per_step"] / 1e3)


def test_drop_stderr_lines_keeps_every_other_line(capfd: pytest.CaptureFixture[str]) -> None:
    import os

    with bd.drop_stderr_lines(bd.KINETO_NOISE):
        os.write(2, b"USDT:2026 SyncActivityProfilerHandler.cpp:52] profiler_start\na real warning\n")
        os.write(2, b"STAGE: Completed Stage: Warm Up\nand an error\n")
    os.write(2, b"USDT: after the block, untouched\n")
    assert capfd.readouterr().err == "a real warning\nand an error\nUSDT: after the block, untouched\n"
    with pytest.raises(RuntimeError), bd.drop_stderr_lines(bd.KINETO_NOISE):  # restored when the body raises
        os.write(2, b"kept though it raised\n")
        raise RuntimeError
    os.write(2, b"fd 2 is back\n")
    assert capfd.readouterr().err == "kept though it raised\nfd 2 is back\n"


def test_against_step_reads_a_gpu_profile_as_idle_time_and_flags_an_inflated_cpu_one() -> None:
    gpu = bd.OpBreakdown(({"category": bd.MATMUL, "ms per step": 18.0, "share": 1.0},),
                                bd.BY_LAUNCHER)
    assert bd.against_step(gpu, 20.0) == ("kernels ran 18 ms of the 20 ms step: the GPU idled 10% of it "
                                                 "(launches, host work, syncs)")
    cpu = bd.OpBreakdown(({"category": bd.MATMUL, "ms per step": 21.9, "share": 1.0},),
                                bd.BY_CPU_SELF_TIME)
    assert "more than the step" in bd.against_step(cpu, 13.2)  # Lab 02's CPU run: 21.9 ms of op time
    assert "more than the step" not in bd.against_step(cpu, 21.0)
    with pytest.raises(ValueError, match="step_ms"):
        bd.against_step(cpu, 0.0)
