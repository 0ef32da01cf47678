"""labkit.course.peaks: each lab records its memory peaks, and under emulation whether both frameworks fit."""

from __future__ import annotations

import pytest

from labkit.course import peaks
from labkit.course.report import recorded
from labkit.runtime import emulate

GB = 1_000_000_000


def test_record_peaks_in_gib() -> None:
    peaks.record_peaks(lambda: {"jax": 3 * 2**30, "torch": None, "host": 2**29})
    r = recorded()
    assert r["peak_memory_gib_jax"] == 3.0 and r["peak_memory_gib_torch"] is None and r["peak_memory_gib_host"] == 0.5


@pytest.mark.parametrize(("jax_gb", "torch_gb", "fits"), [(10, 5, True), (10, 7, False)])
def test_under_emulation_the_sum_must_fit(monkeypatch: pytest.MonkeyPatch, jax_gb: int, torch_gb: int,
                                          fits: bool) -> None:
    monkeypatch.setenv(emulate.EMULATE_ENV, "t4")  # 16 GB
    peaks.record_peaks(lambda: {"jax": jax_gb * GB, "torch": torch_gb * GB, "host": 50 * GB})  # host not counted
    assert recorded()["fits_emulated_memory"] is fits and recorded()["emulated_chip"] == "NVIDIA T4"


def test_watch_registers_one_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    hooks = []

    class Events:
        def register(self, name: str, fn: object) -> None:
            hooks.append((name, fn))

    class Shell:
        events = Events()

    monkeypatch.setattr(peaks, "_watching", False)
    assert peaks.watch(Shell()) and peaks.watch(Shell())
    assert [h[0] for h in hooks] == ["post_run_cell"]
    hooks[0][1](None)  # what IPython does after a cell
    assert recorded()["peak_memory_gib_host"] > 0
    assert peaks.watch(None) is False  # plain Python: nothing to hook
