"""labkit.runtime.doctor: known incompatibilities found from version maps; the real machine diagnosed."""

from __future__ import annotations

import pytest

from labkit.runtime import doctor, versions

GOOD = {"python": "3.11.7", "jax": "0.10.2", "jaxlib": "0.10.2", "flax": "0.12.8", "optax": "0.2.8",
        "torch": "2.13.0+cpu", "torch_xla": None, "numpy": "2.4.6", "matplotlib": "3.11.2",
        "papermill": "2.7.0", "nbval": "0.11.0"}


def _errors(found: dict) -> list[str]:
    return [f.message for f in doctor.check_versions(found, "linux x86_64") if f.level == "error"]


def test_good_stack_has_no_errors() -> None:
    assert _errors(GOOD) == []


def test_torch_xla_mismatch() -> None:
    msgs = _errors({**GOOD, "torch_xla": "2.9.0"})
    assert any("torch-xla 2.9.0 needs torch 2.9" in m for m in msgs)
    assert _errors({**GOOD, "torch": "2.9.1", "torch_xla": "2.9.0"}) == []


def test_jax_011_on_python_311() -> None:
    assert any("needs Python >= 3.12" in m for m in _errors({**GOOD, "jax": "0.11.0", "jaxlib": "0.11.0"}))
    assert _errors({**GOOD, "python": "3.12.4", "jax": "0.11.0", "jaxlib": "0.11.0"}) == []


def test_jax_jaxlib_and_ranges() -> None:
    assert any("jaxlib 0.9.0 differ" in m for m in _errors({**GOOD, "jaxlib": "0.9.0"}))
    assert any("jax 0.4.30 is outside" in m for m in _errors({**GOOD, "jax": "0.4.30", "jaxlib": "0.4.30"}))


def test_a_floor_can_name_a_patch_release() -> None:
    """flax 0.12.1 cannot run on jax 0.10 (its nnx.jit passes jax.jit a removed argument); 0.12.2 can."""
    assert any("flax 0.12.1 is outside the supported range >= 0.12.2" in m for m in _errors({**GOOD, "flax": "0.12.1"}))
    assert any("flax 0.11.2 is outside" in m for m in _errors({**GOOD, "flax": "0.11.2"}))
    assert _errors({**GOOD, "flax": "0.12.2"}) == [] and _errors({**GOOD, "flax": "0.13.0"}) == []
    assert doctor.position("flax", "0.12.1") == "flax 0.12.1 OUTSIDE [0.12.2, -)"
    assert doctor.position("torch_xla", "2.9.1") == "torch_xla 2.9.1 in [2.9, 2.10)"


def test_missing_package_says_how_to_install() -> None:
    found = doctor.check_versions({**GOOD, "papermill": None}, "linux x86_64")
    miss = [f for f in found if "papermill is not installed" in f.message]
    assert miss and "pip install" in miss[0].fix


def test_major_minor() -> None:
    assert versions.major_minor("2.9.0+cu126") == (2, 9)
    assert versions.major_minor("0.10") == (0, 10)
    assert versions.major_minor(None) is None and versions.major_minor("dev") is None


def test_doctor_on_this_machine() -> None:
    from tests.conftest import run_python

    out = run_python("from labkit.course.cli import main; raise SystemExit(main(['doctor']))")
    assert "runtime" in out.stdout and "versions" in out.stdout and "jax 0." in out.stdout, out.stderr
    assert out.returncode == 0, out.stdout


def test_position_against_supported_ranges() -> None:
    assert doctor.position("jax", "0.10.2") == "jax 0.10.2 in [0.10, -)"
    assert doctor.position("torch_xla", "2.10.0") == "torch_xla 2.10.0 OUTSIDE [2.9, 2.10)"
    assert doctor.position("torch_xla", None).startswith("torch_xla - ")


def test_memory_of_simulated_cpu_devices_is_the_shared_host_ram() -> None:
    gib23 = int(23.5 * 2**30)
    sim = {"platform": "cpu", "device_count": 8, "simulated": True, "memory_bytes": gib23}
    text = doctor.memory_text(sim)
    assert text.startswith("23.5 GiB host RAM shared by all 8 simulated devices") and "2.9 GiB each" in text
    assert "per device" not in text.replace("not per device", "")
    assert doctor.memory_text({**sim, "device_count": 1, "simulated": False}) == "23.5 GiB host RAM"
    assert doctor.memory_text({"platform": "gpu", "device_count": 1, "simulated": False,
                               "memory_bytes": 16 * 2**30}) == "16.0 GiB per device"
    assert doctor.memory_text({**sim, "memory_bytes": None}) == "unknown"
    report = doctor.format_report({"runtime": {**sim, "chip": "x86", "host": "local", "bf16": False,
                                               "torch_device": "cpu"}, "spec": "unknown",
                                   "versions": {}, "findings": []})
    assert "memory    23.5 GiB host RAM shared by all 8 simulated devices" in report


def test_versions_newer_than_the_matrix_are_flagged_untested() -> None:
    warns = lambda found: [f.message for f in doctor.check_versions(found, "linux x86_64") if f.level == "warn"]  # noqa: E731
    assert not any("newer than" in m for m in warns({**GOOD, "python": "3.12.1", "jax": "0.12.0.1",
                                                     "jaxlib": "0.12.0.1", "torch": "2.14.1"}))
    flagged = warns({**GOOD, "python": "3.12.1", "jax": "0.13.0", "jaxlib": "0.13.0"})
    assert "jax 0.13.0 is newer than the course has been tested with (0.12.x)" in flagged


def test_emulation_is_shown() -> None:
    rt = {"platform": "gpu", "device_count": 1, "simulated": False, "memory_bytes": 16_000_000_000,
          "chip": "NVIDIA T4", "emulated_on": "NVIDIA H100 80GB HBM3", "host": "local", "bf16": False,
          "torch_device": "cuda"}
    report = doctor.format_report({"runtime": rt, "spec": "NVIDIA T4", "versions": {}, "findings": []})
    assert "chip      NVIDIA T4 (emulated on NVIDIA H100 80GB HBM3)  ->  spec: NVIDIA T4" in report


def test_diagnose_says_what_the_emulation_changes(monkeypatch) -> None:
    from labkit.runtime import device, emulate
    from labkit.runtime.device import Runtime

    h100 = Runtime(platform="gpu", chip="NVIDIA H100 80GB HBM3", device_count=1, memory_bytes=85_045_395_456,
                   bf16=True, simulated=False, host="local", torch_device="cuda", cpu_devices=8)
    monkeypatch.setattr(device, "simulate_devices", lambda n: n)
    monkeypatch.setattr(device, "detect", lambda: emulate.apply(h100, {emulate.EMULATE_ENV: "t4"}))
    d = doctor.diagnose()
    msg = next(f.message for f in d["findings"] if "emulating" in f.message)
    assert "emulating a NVIDIA T4 on this NVIDIA H100 80GB HBM3" in msg and "16 GB each, bf16 off" in msg
    assert d["spec"] == "NVIDIA T4"


@pytest.mark.parametrize("raw", ["abc", "0", "-2"])
def test_a_bad_cpu_device_count_is_a_finding_not_a_crash(monkeypatch, raw: str) -> None:
    """The doctor is what a learner runs when something is wrong: a bad $LABKIT_CPU_DEVICES is diagnosed."""
    from labkit.runtime import device

    seen = []
    monkeypatch.setenv(device.CPU_DEVICES_ENV, raw)
    monkeypatch.setattr(device, "simulate_devices", lambda n: seen.append(n))
    d = doctor.diagnose()
    bad = [f for f in d["findings"] if device.CPU_DEVICES_ENV in f.message]
    assert [f.level for f in bad] == ["error"] and f"{raw!r}" in bad[0].message
    assert "whole number >= 1 (this diagnosis used 8)" in bad[0].fix and seen == [device.DEFAULT_CPU_DEVICES]
    with pytest.raises(ValueError, match="LABKIT_CPU_DEVICES"):  # the labs themselves still stop on it
        device.requested_cpu_devices()
