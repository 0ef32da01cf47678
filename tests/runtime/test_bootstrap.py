"""labkit.runtime.bootstrap: the startup line says what the devices really are."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from labkit.runtime import bootstrap, device, emulate
from labkit.runtime.bootstrap import devices_line
from labkit.runtime.device import Runtime


def test_cpu_names_simulated_devices_and_real_cores() -> None:
    rt = SimpleNamespace(platform="cpu", simulated=True, device_count=8, chip="AMD EPYC")
    assert devices_line(rt, cores=2) == "8 simulated JAX devices on 2 cores (AMD EPYC)"
    assert devices_line(rt, cores=1).endswith("on 1 core (AMD EPYC)")


def test_accelerator_and_unsimulated_cpu_keep_the_count() -> None:
    gpu = SimpleNamespace(platform="gpu", simulated=False, device_count=1, chip="NVIDIA H100 80GB HBM3")
    assert devices_line(gpu) == "1 x NVIDIA H100 80GB HBM3"
    one_cpu = SimpleNamespace(platform="cpu", simulated=False, device_count=1, chip="AMD EPYC")
    assert devices_line(one_cpu) == "1 x AMD EPYC"


def test_default_core_count_is_this_process_affinity() -> None:
    rt = SimpleNamespace(platform="cpu", simulated=True, device_count=8, chip="x")
    assert "simulated JAX devices on" in devices_line(rt)


# An H100 as detect() returns it under LABKIT_EMULATE=t4 (emulate.apply): T4 name, 16 GB, no bf16.
H100 = Runtime(platform="gpu", chip="NVIDIA H100 80GB HBM3", device_count=1, memory_bytes=85_045_395_456, bf16=True,
               simulated=False, host="local", torch_device="cuda", cpu_devices=8)
EMULATED_T4 = emulate.apply(H100, {emulate.EMULATE_ENV: "t4"})


@pytest.fixture
def setup_on(monkeypatch: pytest.MonkeyPatch):
    """Run setup() against a detected ``rt`` (no install, no JAX); return the cap_torch_memory calls."""
    calls: list[tuple] = []
    monkeypatch.setattr(bootstrap, "_runtime", None)  # a fresh kernel; restored after the test
    monkeypatch.setattr(device, "detect_host", lambda environ=None: "local")
    monkeypatch.setattr(device, "simulate_devices", lambda n=8: n)
    monkeypatch.setattr(emulate, "cap_torch_memory", lambda *a, **k: calls.append((a, k)) or 0.19)

    def use(rt: Runtime) -> list[tuple]:
        monkeypatch.setattr(device, "detect", lambda: rt)
        assert bootstrap.setup() is rt
        return calls

    return use


def test_setup_caps_torch_once_when_emulating_on_cuda(setup_on, capsys: pytest.CaptureFixture[str]) -> None:
    # LABKIT_EMULATE=t4 on an H100 with CUDA torch: JAX was capped before it started, torch's allocator now
    # (set_per_process_memory_fraction), once; the first cell says what is emulated on what.
    assert EMULATED_T4.emulated_on == "NVIDIA H100 80GB HBM3" and EMULATED_T4.torch_device == "cuda"
    assert len(setup_on(EMULATED_T4)) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("GPU runtime on local: 1 x NVIDIA T4, 15 GiB; bf16 native: no; torch device: cuda")
    assert ("emulating a NVIDIA T4 on this NVIDIA H100 80GB HBM3 ($LABKIT_EMULATE): its memory (16 GB) "
            "and bf16 support, not its speed") in lines
    assert any(l.startswith("one GPU here: Lab 03 (sharding) runs its meshes on the 8 simulated") for l in lines)


@pytest.mark.parametrize("rt", [
    H100,  # not emulating: torch's allocator keeps the whole GPU
    replace(EMULATED_T4, torch_device="cpu"),  # a CPU-only torch wheel on the GPU box: no CUDA allocator to cap
])
def test_setup_leaves_torch_alone_otherwise(setup_on, capsys: pytest.CaptureFixture[str], rt: Runtime) -> None:
    assert setup_on(rt) == []
    assert ("emulating a" in capsys.readouterr().out) is bool(rt.emulated_on)
