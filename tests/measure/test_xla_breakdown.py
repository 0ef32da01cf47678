"""labkit.measure.xla_breakdown: HLO classification, trace layouts of each runtime, attribution."""

from __future__ import annotations

from dataclasses import replace

from collections import Counter

import numpy as np
import pytest

from labkit.measure import xla_breakdown as xb

# The shapes XLA:GPU's compiled text takes on an H100 (jax 0.11): a cuBLAS-Lt library call, cuDNN's
# fused attention forward and backward, a Triton GEMM fusion (kind=kCustom around a dot), a LayerNorm
# reduction (kInput), an AdamW update (kLoop), a transpose-only fusion, an async all-reduce.
GPU_HLO = """HloModule jit_step, is_scheduled=true, entry_computation_layout={(bf16[8,8]{1,0})->bf16[8,8]{1,0}}

%gemm_fusion_dot.1_computation (parameter_0: bf16[8,8], parameter_1: bf16[8,8]) -> bf16[8,8] {
  %parameter_0 = bf16[8,8]{1,0} parameter(0)
  %parameter_1 = bf16[8,8]{1,0} parameter(1)
  ROOT %dot.3 = bf16[8,8]{1,0} dot(%parameter_0, %parameter_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%region_0.1 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add.1 = f32[] add(%a, %b)
}

%fused_reduce (param_0: f32[8,8]) -> f32[8] {
  %param_0 = f32[8,8]{1,0} parameter(0)
  %constant.1 = f32[] constant(0)
  ROOT %reduce.1 = f32[8]{0} reduce(%param_0, %constant.1), dimensions={1}, to_apply=%region_0.1
}

%fused_adam (param_0.1: f32[8,8], param_1.1: f32[8,8]) -> f32[8,8] {
  %param_0.1 = f32[8,8]{1,0} parameter(0)
  %param_1.1 = f32[8,8]{1,0} parameter(1)
  %multiply.1 = f32[8,8]{1,0} multiply(%param_0.1, %param_1.1)
  ROOT %sqrt.1 = f32[8,8]{1,0} sqrt(%multiply.1)
}

%fused_multi (param_0.3: f32[8]) -> (f32[8], f32[8], f32[8], f32[8], f32[8], /*index=5*/f32[8]) {
  %param_0.3 = f32[8]{0} parameter(0)
  %exponential.1 = f32[8]{0} exponential(%param_0.3)
  ROOT %tuple.2 = (f32[8]{0}, f32[8]{0}, f32[8]{0}, f32[8]{0}, f32[8]{0}, /*index=5*/f32[8]{0}) tuple(%exponential.1, %exponential.1, %exponential.1, %exponential.1, %exponential.1, /*index=5*/%exponential.1)
}

%fused_scatter (param_0.4: f32[8,8], param_1.4: s32[4,1], param_2.4: f32[4,8]) -> f32[8,8] {
  %param_0.4 = f32[8,8]{1,0} parameter(0)
  %param_1.4 = s32[4,1]{1,0} parameter(1)
  %param_2.4 = f32[4,8]{1,0} parameter(2)
  ROOT %scatter.1 = f32[8,8]{1,0} scatter(%param_0.4, %param_1.4, %param_2.4), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%region_0.1
}

%fused_transpose (param_0.2: bf16[8,8]) -> bf16[8,8] {
  %param_0.2 = bf16[8,8]{1,0} parameter(0)
  ROOT %transpose.1 = bf16[8,8]{0,1} transpose(%param_0.2), dimensions={1,0}
}

ENTRY %main.99 (p0: bf16[8,8], p1: f32[8,8], p2: f32[8], p3: f32[8], p4: f32[8], /*index=5*/p5: f32[8]) -> bf16[8,8] {
  %p0 = bf16[8,8]{1,0} parameter(0)
  %p1 = f32[8,8]{1,0} parameter(1)
  %cublas-lt-matmul.2 = (bf16[8,8]{1,0}, s8[1024]{0}) custom-call(%p0, %p0), custom_call_target="__cublas$lt$matmul", metadata={op_name="jit(step)/jvp()/dot_general"}, backend_config={"gemm_backend_config":{"alpha_real":1}}
  %custom-call.7 = (bf16[1,8,1,8]{3,2,1,0}, f32[1,1,8]{2,1,0}, u8[0]{0}) custom-call(%p0, %p0, %p0), custom_call_target="__cudnn$fmhaSoftmax", metadata={op_name="jit(step)/jvp()/dot_product_attention"}
  %custom-call.8 = (bf16[1,8,1,8]{3,2,1,0}, u8[0]{0}) custom-call(%p0, %p0), custom_call_target="__cudnn$fmhaSoftmaxBackward", metadata={op_name="jit(step)/transpose(jvp())/dot_product_attention"}
  %gemm_fusion_dot.1 = bf16[8,8]{1,0} fusion(%p0, %p0), kind=kCustom, calls=%gemm_fusion_dot.1_computation, metadata={op_name="jit(step)/transpose(jvp())/dot_general"}, backend_config={"fusion_backend_config":{"kind":"__triton_gemm"}}
  %input_reduce_fusion = f32[8]{0} fusion(%p1), kind=kInput, calls=%fused_reduce, metadata={op_name="jit(step)/jvp()/reduce_sum"}
  %loop_sqrt_fusion = f32[8,8]{1,0} fusion(%p1, %p1), kind=kLoop, calls=%fused_adam, metadata={op_name="jit(step)/sqrt"}
  %loop_transpose_fusion = bf16[8,8]{0,1} fusion(%p0), kind=kLoop, calls=%fused_transpose, metadata={op_name="jit(step)/transpose(jvp())/transpose"}
  %all-reduce-start = f32[8,8]{1,0} all-reduce-start(%p1), replica_groups={}, to_apply=%region_0.1
  %copy.4 = bf16[8,8]{1,0} copy(%p0)
  %idx = s32[4,1]{1,0} parameter(6)
  %upd = f32[4,8]{1,0} parameter(7)
  %input_scatter_fusion = f32[8,8]{1,0} fusion(%p1, %idx, %upd), kind=kInput, calls=%fused_scatter, metadata={op_name="jit(step)/transpose(jvp())/scatter-add"}
  %p2 = f32[8]{0} parameter(2)
  %loop_exponential_fusion = (f32[8]{0}, f32[8]{0}, f32[8]{0}, f32[8]{0}, f32[8]{0}, /*index=5*/f32[8]{0}) fusion(%p2), kind=kLoop, calls=%fused_multi
  %orphan_fusion = f32[8]{0} fusion(%p2), kind=kLoop, calls=%not_in_this_text
  ROOT %tuple = (bf16[8,8]{1,0}) tuple(%copy.4)
}
"""


def test_classify_hlo_reads_what_each_gpu_op_is_not_its_kernel_name() -> None:
    ops = xb.classify_hlo(GPU_HLO)
    want = {"cublas-lt-matmul.2": (xb.MATMUL, xb.FORWARD), "custom-call.7": (xb.ATTENTION, xb.FORWARD),
            "custom-call.8": (xb.ATTENTION, xb.BACKWARD), "gemm_fusion_dot.1": (xb.MATMUL, xb.BACKWARD),
            "input_reduce_fusion": (xb.REDUCTION, xb.FORWARD), "loop_sqrt_fusion": (xb.ELEMENTWISE, xb.OPTIMIZER),
            "loop_transpose_fusion": (xb.LAYOUT, xb.BACKWARD), "all-reduce-start": (xb.COLLECTIVE, xb.OPTIMIZER),
            "copy.4": (xb.LAYOUT, xb.OPTIMIZER),
            # the token embedding's gradient (H100: 10.9 ms of the gpt2-medium step): its own category, not a reduction
            "input_scatter_fusion": (xb.SCATTER, xb.BACKWARD),
            # a header with /*index=5*/ (tuples of 6+) is still a computation: ENTRY's ops stay ENTRY's
            "loop_exponential_fusion": (xb.ELEMENTWISE, xb.OPTIMIZER), "orphan_fusion": (xb.OTHER, xb.OPTIMIZER)}
    assert {k: (ops[k].category, ops[k].phase) for k in want} == want
    assert ops["cublas-lt-matmul.2"].target == "__cublas$lt$matmul"
    assert ops["exponential.1"].category == xb.OTHER and ops["dot.3"].category == xb.MATMUL  # inside fusions
    assert xb.module_name(GPU_HLO) == "jit_step"


def test_classify_hlo_rejects_text_that_is_not_hlo() -> None:
    with pytest.raises(ValueError, match="compile\\(\\).as_text"):
        xb.classify_hlo("not a program")


def _gpu_records() -> list[xb.Record]:
    """A GPU trace as the profiler writes it: kernels on device stream lines, launches on the host."""
    kernel = lambda op, ns, module="jit_step": xb.Record(  # noqa: E731
        "/device:GPU:0", "Stream #14(Compute)", "nvjet_hsh_256x128_64x4_2x1_v_bz_coopB_NNT", ns,
        {"kernel_details": "regs:168 grid:132,1,1", "hlo_op": op, "hlo_module": module, "correlation_id": 7})
    return [
        kernel("cublas-lt-matmul.2", 4000.0),
        kernel("custom-call.7", 3000.0),
        kernel("jit_step::loop_sqrt_fusion", 1000.0),  # an annotation path: the op is the last part
        kernel("fusion.1", 500.0, module="jit__lambda"),  # another program: not this step's
        xb.Record("/device:GPU:0", "Stream #14(Compute)", "Memcpy DtoD", 800.0, {"memcpy_details": "kind:DtoD"}),
        xb.Record("/host:CPU", "tf_XLAPjRtGpuClient", "cuLaunchKernelEx", 9000.0,
                  {"hlo_op": "cublas-lt-matmul.2", "hlo_module": "jit_step"}),  # host side of a launch
    ]


def test_select_events_takes_gpu_kernels_not_host_launches_or_other_programs() -> None:
    events, source = xb.select_events(_gpu_records(), "jit_step")
    assert source == "device planes"
    assert events == [("cublas-lt-matmul.2", 4000.0), ("custom-call.7", 3000.0), ("loop_sqrt_fusion", 1000.0)]


def test_an_accelerator_trace_without_device_events_is_an_error_not_launch_times() -> None:
    host_only = [r for r in _gpu_records() if r.plane.startswith("/host")]
    assert xb.select_events(host_only, "jit_step")[0] == [("cublas-lt-matmul.2", 9000.0)]  # a CPU run: fine
    with pytest.raises(xb.NoDeviceEvents, match="no device kernel events .*CUPTI"):
        xb.select_events(host_only, "jit_step", require_device=True)


def test_select_events_uses_a_device_planes_xla_ops_line_alone() -> None:
    records = [xb.Record("/device:TPU:0", "XLA Ops", "fusion.3", 2000.0, {}),
               xb.Record("/device:TPU:0", "XLA Ops", "convolution.1", 6000.0, {"hlo_module": "jit_step"}),
               xb.Record("/device:TPU:0", "XLA Modules", "jit_step(1)", 8000.0, {}),
               xb.Record("/device:TPU:0", "Steps", "0", 8000.0, {"hlo_op": "fusion.3"})]
    events, _ = xb.select_events(records, "jit_step")
    assert events == [("fusion.3", 2000.0), ("convolution.1", 6000.0)]


def test_attribute_sums_each_category_and_phase_and_keeps_unknown_ops_apart() -> None:
    ops = xb.classify_hlo(GPU_HLO)
    events = xb.select_events(_gpu_records(), "jit_step")[0] + [("not-in-hlo.1", 250.0)]
    b = xb.attribute(events * 2, ops, steps=2, source="device planes")
    assert b.by_category_ns[xb.MATMUL] == 8000.0 and b.by_category_ns[xb.ATTENTION] == 6000.0
    assert b.by_phase_ns == {xb.FORWARD: 14000.0, xb.BACKWARD: 0.0, xb.OPTIMIZER: 2000.0}
    assert b.unknown_ns == 500.0 and b.busy_ns == 16500.0
    assert b.per_step_ms() == {xb.MATMUL: 0.004, xb.ATTENTION: 0.003, xb.ELEMENTWISE: 0.001}
    top = b.top_ops(n=2)
    assert [(r["op"], r["category"], r["ms_per_step"]) for r in top] == [
        ("cublas-lt-matmul.2", xb.MATMUL, 0.004), ("custom-call.7", xb.ATTENTION, 0.003)]
    assert b.top_ops()[-1] == {"op": "not-in-hlo.1", "category": "unknown", "phase": "unknown", "target": "",
                               "ms_per_step": 0.00025}
    with pytest.raises(ValueError, match="steps must be >= 1"):
        xb.attribute(events, ops, steps=0)


def test_attribute_takes_each_op_at_its_median_event_so_one_stall_moves_nothing() -> None:
    ops = xb.classify_hlo(GPU_HLO)
    # five steps; the GEMM's third run was stretched 50x (a preempted CPU thread, another process's work)
    events = [("cublas-lt-matmul.2", 1000.0)] * 2 + [("cublas-lt-matmul.2", 50000.0)] + [("cublas-lt-matmul.2", 1000.0)] * 2
    events += [("loop_sqrt_fusion", 400.0), ("loop_sqrt_fusion", 600.0)] * 2 + [("loop_sqrt_fusion", 500.0)]
    b = xb.attribute(events, ops, steps=5)
    assert b.by_op_ns == {"cublas-lt-matmul.2": 5000.0, "loop_sqrt_fusion": 2500.0}  # median x count, not the sum
    assert b.by_category_ns[xb.MATMUL] == 5000.0 and b.by_category_ns[xb.ELEMENTWISE] == 2500.0
    assert b.per_step_ms() == {xb.MATMUL: 0.001, xb.ELEMENTWISE: 0.0005}


def test_it_reads_like_torchs_breakdown_so_lab_02_checks_both_the_same_way() -> None:
    from labkit.measure import breakdown

    ops = xb.classify_hlo(GPU_HLO)
    # per step: 10 ms GEMM + 5 ms attention + 5 ms elementwise = 20 ms summed, 15 TFLOP of matmuls
    b = xb.attribute([("cublas-lt-matmul.2", 20e6), ("custom-call.7", 10e6), ("loop_sqrt_fusion", 10e6)], ops, 2)
    assert b.ms_per_step == 20.0 and b.matmul_share == 0.75
    assert [(r["category"], r["ms per step"], r["share"]) for r in b.rows] == [
        (xb.MATMUL, 10.0, 0.5), (xb.ATTENTION, 5.0, 0.25), (xb.ELEMENTWISE, 5.0, 0.25)]
    assert breakdown.matmul_rate(15e12, b) == pytest.approx(1e15)  # 15 TFLOP in 15 ms


def test_limited_by_states_the_matmul_rate_from_its_kernel_time() -> None:
    ops = xb.classify_hlo(GPU_HLO)
    # 10 ms of GEMM + 5 ms of attention per step for 15 TFLOP: 1000 TFLOP/s, half a 2000 TFLOP/s peak.
    b = xb.attribute([("cublas-lt-matmul.2", 10e6), ("custom-call.7", 5e6), ("loop_sqrt_fusion", 5e6)], ops, 1)
    line = xb.limited_by(b, step_s=0.025, matmul_flops=15e12, peak_flops=2000e12)
    assert "matmul + attention ops 15.0 ms at 1e+03 TFLOP/s (50% of the 2e+03 TFLOP/s peak)" in line
    named = xb.limited_by(b, step_s=0.025, matmul_flops=15e12, peak_flops=2000e12, peak_name="spec bf16 2000 TFLOP/s")
    assert "(50% of spec bf16 2000 TFLOP/s)" in named
    assert "other ops 5.0 ms (elementwise fusions 5.0 ms" in line and line.endswith("= 80% of the step")
    assert "ops ran at once" in xb.limited_by(b, step_s=0.015, matmul_flops=15e12, peak_flops=2000e12)
    assert "ops ran at once" not in xb.limited_by(b, step_s=0.0195, matmul_flops=15e12, peak_flops=2000e12)  # 103%: noise
    assert "at once on several streams" in xb.limited_by(replace(b, source="device planes"), 0.015, 15e12, 2000e12)
    assert "at once on XLA's CPU threads" in xb.limited_by(replace(b, source="host threads"), 0.015, 15e12, 2000e12)
    b2 = xb.attribute([("cublas-lt-matmul.2", 10e6), ("not-in-hlo.1", 2e6)], ops, 1)
    assert "; 2.0 ms in ops the HLO text does not name;" in xb.limited_by(b2, 0.02, 1e12, None)
    # cuDNN's causal kernel skips the masked half of the attention FLOPs the count includes: 3 of the 15 TFLOP.
    skipped = xb.limited_by(b, 0.025, 15e12, 2000e12, skipped_flops=3e12)
    assert "(50% of the 2e+03 TFLOP/s peak), 800 TFLOP/s without causal attention's masked half" in skipped
    assert "masked half" not in xb.limited_by(b2, 0.02, 1e12, None, skipped_flops=3e11)  # no fused kernel ran
    s = xb.summary(b, 0.025)
    assert s["busy_ms_per_step"] == 20.0 and s["busy_over_step"] == 0.8


@pytest.fixture(scope="module")
def cpu_step() -> tuple[object, np.ndarray, str]:
    from flax import nnx

    from labkit.gpt.config import get_config
    from labkit.gpt.flax_model import FlaxGPT
    from labkit.gpt.train import JaxTrainer, OptConfig

    cfg = get_config("test")
    jt = JaxTrainer(FlaxGPT(cfg, rngs=nnx.Rngs(0)), OptConfig(lr=1e-4))
    x = np.zeros((2, cfg.seq_len), np.int32)
    jt.step(x, x)
    return jt, x, jt.lower(x, x).compile().as_text()


def test_trace_step_on_this_cpu_finds_every_op_in_the_hlo(cpu_step) -> None:
    import jax

    jt, x, text = cpu_step
    b = xb.trace_step(lambda: jt.step(x, x), text, steps=2)
    assert b.source.startswith("host threads") and b.unknown_ns == 0.0
    counts = Counter()
    for op in b.by_op_ns:
        counts[xb.classify_hlo(text)[op].category] += 1
    assert counts[xb.MATMUL] > 0 and counts[xb.REDUCTION] > 0  # dots, LayerNorm / softmax / loss
    ops = xb.classify_hlo(text)
    for name, op in ops.items():  # what XLA:CPU calls its fusions says what is in them
        if any(w in name for w in ("log", "exponential", "tanh", "rsqrt")):
            assert op.category != xb.MATMUL, (name, op)
        if op.opcode == "dot":
            assert op.category == xb.MATMUL, (name, op)
    entry = [line for line in text.splitlines() if line.startswith("ENTRY")]
    assert entry and "/*index=" in entry[0]  # a step's ENTRY header does carry the comments the parser strips
    assert all(v > 0 for v in b.by_phase_ns.values())  # forward, backward and AdamW all ran
    assert b.busy_ns == pytest.approx(sum(b.by_op_ns.values()))
    assert jax.devices()[0].platform == "cpu"


def test_trace_trainer_traces_the_trainers_own_step(cpu_step) -> None:
    jt, x, text = cpu_step
    b = xb.trace_trainer(jt, x, x, steps=2)
    assert b.steps == 2 and b.unknown_ns == 0.0 and set(b.by_op_ns) <= set(xb.classify_hlo(text))


def test_a_gpu_trace_runs_a_copy_without_command_buffers_and_the_trainer_keeps_its_state(cpu_step, monkeypatch) -> None:
    # On a GPU the trainer's own program runs its kernels as CUDA graphs, which a trace cannot name: the
    # trace runs a copy compiled without them (the GPU branch, taken here on the CPU's real compile path),
    # threading the donated weights through and handing them back to the trainer.
    jt, x, text = cpu_step
    real = xb.for_trace
    monkeypatch.setattr(xb, "for_trace", lambda lowered, compiled: real(lowered, compiled, platform="gpu"))
    b = xb.trace_trainer(jt, x, x, steps=2)
    assert "without XLA command buffers" in b.source and b.unknown_ns == 0.0 and b.by_op_ns
    loss = float(jt.step(x, x))  # the trainer's buffers were donated to the copy: it must hold the new ones
    assert np.isfinite(loss)
    same, note = real(None, "compiled", platform="cpu")  # elsewhere: the program itself, no second compile
    assert (same, note) == ("compiled", "")


def test_an_h100_trace_with_command_buffers_says_why_its_ops_are_unnamed() -> None:
    # Recorded: bench_mfu, gpt2-medium, H100 80GB HBM3, jax 0.11.2 (benchmarks/nvidia-h100-80gb-hbm3/
    # mfu_gpt2-medium.json): one event "command_buffer_1", 17.94 ms of a 93.0 ms step, nothing else.
    b = xb.attribute([("command_buffer_1", 17.938432e6)], {}, steps=1, source="device planes")
    assert b.unknown_ns == pytest.approx(17.938432e6) and b.matmul_share == 0
    said = xb.limited_by(b, 0.093, 3.466e13, 783e12)
    assert "17.9 ms in ops the HLO text does not name" in said and "XLA command buffers" in said


def test_trace_step_says_when_the_program_never_ran(cpu_step) -> None:
    jt, x, text = cpu_step
    with pytest.raises(RuntimeError, match="no events of module 'jit_step'"):
        xb.trace_step(lambda: np.zeros(1), text, steps=1)
    with pytest.raises(ValueError, match="steps must be >= 1"):
        xb.trace_step(lambda: jt.step(x, x), text, steps=0)


def test_name_stack_phase_reads_jax_transformations() -> None:
    assert xb.name_stack_phase("jit(step)/transpose(jvp(mlp))/dot_general") == xb.BACKWARD
    assert xb.name_stack_phase("jit(step)/jvp(mlp)/dot_general") == xb.FORWARD
    assert xb.name_stack_phase("jit(step)/adamw/mul") == "" and xb.name_stack_phase("") == ""
