"""labkit.runtime.emulate: LABKIT_EMULATE=t4 caps memory, drops bf16 and renames the chip, on an injected GPU."""

from __future__ import annotations

import sys

import pytest

from labkit.runtime import emulate, hardware
from labkit.runtime.device import Runtime

H100 = Runtime(platform="gpu", chip="NVIDIA H100 80GB HBM3", device_count=1, memory_bytes=85_045_395_456, bf16=True,
               simulated=False, host="local", torch_device="cuda", cpu_devices=8)
T4 = {emulate.EMULATE_ENV: "t4"}


def test_targets_are_rows_of_the_chip_table() -> None:
    for key, name in emulate.TARGETS.items():
        spec = hardware.lookup(name)
        assert spec is not None and spec.name == name, key


def test_requested_reads_the_table() -> None:
    assert emulate.requested({}) is None and emulate.requested({emulate.EMULATE_ENV: " "}) is None
    t4 = emulate.requested(T4)
    assert t4 == emulate.Emulation("t4", "NVIDIA T4", 16_000_000_000, False)  # T4 datasheet: 16 GB, no bf16
    assert emulate.requested({emulate.EMULATE_ENV: "L4"}).bf16 is True
    with pytest.raises(ValueError, match=r"LABKIT_EMULATE='v100' .* use one of t4, l4, a100-40gb"):
        emulate.requested({emulate.EMULATE_ENV: "v100"})


def test_memory_fraction_and_its_limits() -> None:
    t4 = emulate.requested(T4)
    assert emulate.memory_fraction(t4, H100.memory_bytes) == pytest.approx(16e9 / 85_045_395_456)
    with pytest.raises(ValueError, match="more than this GPU's 15 GB"):
        emulate.memory_fraction(emulate.requested({emulate.EMULATE_ENV: "l4"}), 15_000_000_000)
    with pytest.raises(ValueError, match="positive"):
        emulate.memory_fraction(t4, 0)


def test_cap_jax_memory_sets_the_fraction_before_jax_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    env = dict(T4)
    frac = emulate.cap_jax_memory(env, physical_bytes=80_000_000_000)
    assert frac == pytest.approx(0.2) and env[emulate.JAX_FRACTION_ENV] == "0.2000"
    untouched: dict[str, str] = {}
    assert emulate.cap_jax_memory(untouched, physical_bytes=80_000_000_000) is None and untouched == {}
    monkeypatch.setattr(emulate, "gpu_memory_bytes", lambda: None)  # a machine without a GPU
    with pytest.raises(ValueError, match="this machine has none"):
        emulate.cap_jax_memory(dict(T4))


def test_cap_torch_memory_calls_the_allocator_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    class Cuda:
        @staticmethod
        def set_per_process_memory_fraction(frac: float, device: int) -> None:
            calls.append((frac, device))

    class FakeTorch:
        cuda = Cuda

    assert emulate.cap_torch_memory(80_000_000_000, FakeTorch) is None  # not emulating: allocator untouched
    monkeypatch.setenv(emulate.EMULATE_ENV, "t4")
    assert emulate.cap_torch_memory(80_000_000_000, FakeTorch) == pytest.approx(0.2)
    assert calls == [(pytest.approx(0.2), 0)]


def test_apply_makes_the_h100_look_like_a_t4() -> None:
    rt = emulate.apply(H100, T4)
    assert (rt.chip, rt.memory_bytes, rt.bf16, rt.emulated_on) == ("NVIDIA T4", 16_000_000_000, False, H100.chip)
    assert hardware.lookup(rt.chip).peak("fp16") == 65e12  # peaks now come from the T4's row
    assert emulate.apply(H100, {}) is H100
    cpu = Runtime(platform="cpu", chip="AMD EPYC", device_count=8, memory_bytes=None, bf16=False, simulated=True,
                  host="local", torch_device="cpu", cpu_devices=8)
    with pytest.raises(ValueError, match="this runtime is CPU"):
        emulate.apply(cpu, T4)


# --------------------------------------------------------------------------------------
# gpu_memory_bytes: torch first, else nvidia-smi (before JAX starts, to cap its memory)
# --------------------------------------------------------------------------------------


def _torch_without_cuda() -> object:
    from types import SimpleNamespace

    return SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: False))  # a CPU torch wheel on a GPU box


def _nvidia_smi(monkeypatch: pytest.MonkeyPatch, stdout: str = "", rc: int = 0, raises: BaseException | None = None):
    import subprocess

    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        if raises is not None:
            raise raises
        return subprocess.CompletedProcess(cmd, rc, stdout=stdout, stderr="")

    monkeypatch.setattr(subprocess, "run", run)
    return calls


def test_gpu_memory_bytes_from_nvidia_smi_in_mib(monkeypatch: pytest.MonkeyPatch) -> None:
    # `nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits` prints MiB, one line per GPU:
    # 81559 on an H100 80GB HBM3. GPU 0's line, in bytes.
    monkeypatch.setitem(sys.modules, "torch", _torch_without_cuda())
    calls = _nvidia_smi(monkeypatch, "81559\n81559\n")
    assert emulate.gpu_memory_bytes() == 81559 * 2**20
    assert calls and calls[0][0] == "nvidia-smi" and "--query-gpu=memory.total" in calls[0]
    assert "--format=csv,noheader,nounits" in calls[0]


@pytest.mark.parametrize("kw", [
    {"stdout": "", "rc": 9},  # driver not loaded: "NVIDIA-SMI has failed ...", exit status 9
    {"raises": FileNotFoundError(2, "No such file or directory: 'nvidia-smi'")},  # no NVIDIA driver installed
    {"raises": OSError("exec format error")},
])
def test_gpu_memory_bytes_without_a_working_nvidia_smi_is_none(monkeypatch: pytest.MonkeyPatch, kw) -> None:
    monkeypatch.setitem(sys.modules, "torch", _torch_without_cuda())
    _nvidia_smi(monkeypatch, **kw)
    assert emulate.gpu_memory_bytes() is None


def test_gpu_memory_bytes_nvidia_smi_timeout_and_no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    # A wedged driver makes nvidia-smi hang: run(timeout=20) raises TimeoutExpired. torch not installed at all.
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    _nvidia_smi(monkeypatch, raises=subprocess.TimeoutExpired(["nvidia-smi"], 20))
    assert emulate.gpu_memory_bytes() is None


def test_gpu_memory_bytes_prefers_torch_when_it_sees_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    # CUDA torch: get_device_properties(0).total_memory, without running nvidia-smi.
    from types import SimpleNamespace

    cuda = SimpleNamespace(is_available=lambda: True,
                           get_device_properties=lambda i: SimpleNamespace(total_memory=H100.memory_bytes))
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda))
    calls = _nvidia_smi(monkeypatch, "1\n")
    assert emulate.gpu_memory_bytes() == H100.memory_bytes and calls == []
