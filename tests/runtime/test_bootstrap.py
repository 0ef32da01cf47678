"""labkit.runtime.bootstrap: the startup line says what the devices really are."""
from __future__ import annotations

from types import SimpleNamespace

from labkit.runtime.bootstrap import devices_line


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
