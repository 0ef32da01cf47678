"""labkit.runtime.compile_options: keeping optimization barriers until XLA schedules, on the backend
that drops them early (CPU), and the fallback when an XLA refuses the option."""

from __future__ import annotations

import pytest

from labkit.runtime import compile_options as CO


class FakeLowered:
    """A jax Lowered whose compile() records its options and refuses some, as XLA does."""

    def __init__(self, refuse: str | None = None) -> None:
        self.calls: list[dict | None] = []
        self.refuse = refuse

    def compile(self, opts: dict | None = None) -> str:
        self.calls.append(opts)
        if self.refuse and opts and any(k == self.refuse for k in opts):
            # the text jaxlib's XlaRuntimeError carries for an unknown compile option
            raise RuntimeError(f"INVALID_ARGUMENT: No such compile option: '{self.refuse}'")
        return "compiled"


def test_cpu_keeps_barriers_other_backends_need_nothing() -> None:
    assert CO.keep_barriers("cpu") == {"xla_disable_hlo_passes": "cse_barrier_expander"}
    assert CO.keep_barriers("CPU") == CO.keep_barriers("cpu")
    assert CO.keep_barriers("gpu") == {} and CO.keep_barriers("tpu") == {}
    for bad in ("", None, 3):
        with pytest.raises(ValueError, match="platform must be"):
            CO.keep_barriers(bad)  # type: ignore[arg-type]


def test_compile_adds_the_option_to_the_base_options() -> None:
    lo = FakeLowered()
    assert CO.compile_keeping_barriers(lo, "cpu", {"xla_backend_optimization_level": 0}) == ("compiled", True)
    assert lo.calls == [{"xla_backend_optimization_level": 0, "xla_disable_hlo_passes": "cse_barrier_expander"}]
    gpu = FakeLowered()
    assert CO.compile_keeping_barriers(gpu, "gpu") == ("compiled", True)
    assert gpu.calls == [None]  # nothing to add: jax's own default compile


def test_refused_option_falls_back_and_says_so() -> None:
    lo = FakeLowered(refuse="xla_disable_hlo_passes")
    assert CO.compile_keeping_barriers(lo, "cpu", {"xla_backend_optimization_level": 0}) == ("compiled", False)
    assert lo.calls[-1] == {"xla_backend_optimization_level": 0}  # the base options survive the fallback
    bare = FakeLowered(refuse="xla_disable_hlo_passes")
    assert CO.compile_keeping_barriers(bare, "cpu") == ("compiled", False) and bare.calls[-1] is None


def test_other_compile_errors_are_not_swallowed() -> None:
    class Broken(FakeLowered):
        def compile(self, opts: dict | None = None) -> str:
            raise RuntimeError("RESOURCE_EXHAUSTED: out of memory")

    with pytest.raises(RuntimeError, match="RESOURCE_EXHAUSTED"):
        CO.compile_keeping_barriers(Broken(), "cpu")
    refused_on_gpu = FakeLowered(refuse="xla_backend_optimization_level")
    with pytest.raises(RuntimeError, match="No such compile option"):  # not ours to drop: re-raised
        CO.compile_keeping_barriers(refused_on_gpu, "gpu", {"xla_backend_optimization_level": 0})


def test_a_gpu_trace_compiles_without_command_buffers_other_backends_as_they_are() -> None:
    # H100, jax 0.11.2: with XLA's command buffers (CUDA graphs) on, a trace of a training step held one
    # event, "command_buffer_1", for 19% of the step and no kernel with its HLO op.
    assert CO.traceable("gpu") == {"xla_gpu_enable_command_buffer": ""} == CO.traceable("CUDA")
    assert CO.traceable("cpu") == {} and CO.traceable("tpu") == {}
    for bad in ("", None):
        with pytest.raises(ValueError, match="platform must be"):
            CO.traceable(bad)  # type: ignore[arg-type]
    lo = FakeLowered()
    assert CO.compile_traceable(lo, "gpu") == ("compiled", True) and lo.calls == [CO.NO_COMMAND_BUFFERS_GPU]
    old = FakeLowered(refuse="xla_gpu_enable_command_buffer")  # an XLA without the option: compile as is
    assert CO.compile_traceable(old, "gpu") == ("compiled", False) and old.calls == [CO.NO_COMMAND_BUFFERS_GPU, None]


def test_this_xla_takes_the_empty_command_buffer_list() -> None:
    # XLA clears a repeated DebugOptions field and adds nothing for "" (pjrt_executable.cc, ApplyOption):
    # the real option parser, shared by every backend, accepts it here on the CPU.
    import jax
    import jax.numpy as jnp

    lowered = jax.jit(lambda a: a @ a + 1.0).lower(jnp.ones((4, 4)))
    compiled, taken = CO.compile_traceable(lowered, "gpu")
    assert taken and float(compiled(jnp.ones((4, 4)))[0, 0]) == 5.0


def test_pass_dumps_are_this_compiles_options_and_a_refusal_dumps_nothing(tmp_path) -> None:
    """Lab 03's partitioner cells: XLA's dump options for one compile; an XLA that refuses them compiles as is."""
    opts = CO.dump_passes(str(tmp_path), ("shardy-xla", "spmd-partitioning"))
    assert opts == {"xla_dump_to": str(tmp_path), "xla_dump_hlo_pass_re": "shardy-xla|spmd-partitioning"}
    lo = FakeLowered()
    assert CO.compile_dumping(lo, str(tmp_path), ("spmd-partitioning",)) == ("compiled", True)
    old = FakeLowered(refuse="xla_dump_to")
    assert CO.compile_dumping(old, str(tmp_path), ("spmd-partitioning",)) == ("compiled", False)
    assert old.calls[-1] is None
    for bad in ("spmd-partitioning", (), ("",)):  # a bare string would dump every pass whose name has its letters
        with pytest.raises(ValueError, match="passes must be a sequence of XLA pass names"):
            CO.dump_passes(str(tmp_path), bad)
    with pytest.raises(ValueError, match="directory must be a folder path"):
        CO.dump_passes("", ("spmd-partitioning",))
