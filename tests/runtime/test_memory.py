"""labkit.runtime.memory: peaks from each allocator's own report, None where there is none."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from labkit.runtime import memory


def _jax_with(stats: object) -> SimpleNamespace:
    dev = SimpleNamespace(memory_stats=lambda: stats)
    return SimpleNamespace(devices=lambda: [dev])


def test_jax_peak_from_memory_stats() -> None:
    # A GPU's memory_stats() as XLA reports it (keys from a real H100 run), and a CPU's None.
    gpu = {"bytes_in_use": 1_024, "peak_bytes_in_use": 7_516_192_768, "bytes_limit": 63_771_623_424}
    assert memory.jax_peak_bytes(_jax_with(gpu)) == 7_516_192_768
    assert memory.jax_peak_bytes(_jax_with(None)) is None
    assert memory.jax_peak_bytes(_jax_with({"bytes_in_use": 1})) is None


def test_torch_peak_only_when_cuda_is_in_use() -> None:
    def torch_with(available: bool, initialized: bool) -> SimpleNamespace:
        cuda = SimpleNamespace(is_available=lambda: available, is_initialized=lambda: initialized,
                               max_memory_allocated=lambda device: 3_000_000_000)
        return SimpleNamespace(cuda=cuda)

    assert memory.torch_peak_bytes(torch_with(True, True)) == 3_000_000_000
    assert memory.torch_peak_bytes(torch_with(True, False)) is None  # never used: do not start CUDA to ask
    assert memory.torch_peak_bytes(torch_with(False, False)) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status is Linux's")
def test_host_peak_matches_the_kernels_high_water_mark() -> None:
    hwm = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM"))
    assert memory.host_peak_bytes() == pytest.approx(hwm, rel=0.05)


def test_peaks_has_the_three_places() -> None:
    p = memory.peaks()
    assert set(p) == {"jax", "torch", "host"} and p["host"] > 0
