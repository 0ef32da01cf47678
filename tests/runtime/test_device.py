"""labkit.runtime.device: host detection, simulated devices (own process), torch device and sync."""

from __future__ import annotations

import importlib.util
import os

import pytest

from labkit.runtime import device
from tests.conftest import run_python


@pytest.mark.parametrize(
    "env, host",
    [
        ({"COLAB_RELEASE_TAG": "release-colab_20251101"}, "colab"),
        ({"COLAB_TPU_ADDR": "10.0.0.2:8470"}, "colab"),
        ({"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}, "kaggle"),
        ({"KAGGLE_URL_BASE": "https://www.kaggle.com"}, "kaggle"),
        ({"HOME": "/root"}, "local"),
    ],
)
def test_detect_host(env: dict[str, str], host: str) -> None:
    assert device.detect_host(env) == host


def test_simulated_devices_and_detect_in_fresh_process() -> None:
    code = (
        "import labkit, jax; rt = labkit.setup(cpu_devices=4, quiet=True); "
        "print(rt.platform, rt.device_count, rt.cpu_devices, rt.simulated, len(jax.devices('cpu')))"
    )
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["cpu", "4", "4", "True", "4"]


def test_simulate_devices_refuses_after_jax_initialised() -> None:
    code = (
        "import jax, jax.numpy as jnp; jnp.ones(3).block_until_ready()\n"
        "from labkit.runtime import device\n"
        "assert device.jax_backend_initialized()\n"
        "try:\n    device.simulate_devices(8)\nexcept RuntimeError as e:\n    print('REFUSED', e)\n"
    )
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert "REFUSED" in out.stdout
    assert "Restart the kernel" in out.stdout and "1 CPU device" in out.stdout


def test_setup_is_idempotent_in_one_process() -> None:
    code = "import labkit; labkit.setup(cpu_devices=2); labkit.setup(cpu_devices=2)"
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert "already set up" in out.stdout


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8"])
def test_simulate_devices_rejects_bad_counts(bad: object) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        device.simulate_devices(bad)  # type: ignore[arg-type]


def test_requested_cpu_devices_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(device.CPU_DEVICES_ENV, "4")
    assert device.requested_cpu_devices() == 4
    monkeypatch.setenv(device.CPU_DEVICES_ENV, "many")
    with pytest.raises(ValueError, match="not an integer"):
        device.requested_cpu_devices()
    monkeypatch.setenv(device.CPU_DEVICES_ENV, "0")
    with pytest.raises(ValueError, match="at least 1"):
        device.requested_cpu_devices()


def test_torch_device_on_this_machine() -> None:
    import torch

    kind = device.torch_device_kind()
    expected = "cuda" if torch.cuda.is_available() else kind
    assert kind == expected
    assert device.torch_device("cpu") == torch.device("cpu")
    device.torch_sync("cpu")()  # CPU torch is synchronous: a no-op that must not fail


def test_cuda_requested_without_gpu_is_a_clear_error() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match="cannot see a CUDA GPU"):
        device.torch_device("cuda")


def test_xla_device_without_torch_xla_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "torch_xla" else real(n, *a))
    assert not device.xla_installed()
    with pytest.raises(RuntimeError, match=r"\.\[xla\]"):
        device.xla_device()


def test_only_device_module_touches_xla_flags_and_torch_xla(root) -> None:
    offenders = []
    for p in (root / "labkit").rglob("*.py"):
        if p.parent.name == "runtime" and p.name in ("device.py", "emulate.py"):  # emulate: the memory cap
            continue
        text = p.read_text()
        if "XLA_FLAGS" in text or "import torch_xla" in text or "XLA_PYTHON_CLIENT" in text:
            offenders.append(p.name)
    assert offenders == [], f"runtime details outside labkit.runtime.device/emulate: {offenders}"


def test_cpu_name_is_nonempty() -> None:
    assert device.cpu_name()
    assert os.environ.get(device.CPU_DEVICES_ENV, "8")


def test_unknown_runtime_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import jax

    class Metal:
        platform, device_kind = "METAL", "Apple M2"

        def memory_stats(self) -> None:
            return None

    monkeypatch.setattr(jax, "devices", lambda *a: [Metal()])
    with pytest.raises(RuntimeError, match="'METAL'.*not support.*JAX_PLATFORMS=cpu"):
        device.detect()


def test_steady_torch_threads_on_cpu() -> None:
    import torch

    before = torch.get_num_threads()
    try:
        assert device.steady_torch_threads("cpu") == 1 == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("call", [lambda: device.torch_device("gpu"), lambda: device.torch_sync("tpu"),
                                  lambda: device.torch_sync(None), lambda: device.steady_torch_threads("gpu"),
                                  lambda: device.torch_device("tpu:0")])
def test_device_names_torch_does_not_use_say_which_it_does(call) -> None:
    # Issue #19: 'gpu' / 'tpu' gave torch's "Expected one of cpu, cuda, ipu, ..."; None its signature dump.
    with pytest.raises(ValueError, match="use 'cuda' for a GPU, 'xla' \\(torch-xla\\) for a TPU"):
        call()


def test_mps_requested_without_an_apple_gpu_is_a_clear_error() -> None:
    import torch

    if torch.backends.mps.is_available():
        pytest.skip("this machine has an Apple GPU")
    with pytest.raises(RuntimeError, match=r"cannot see an Apple GPU \(mps\)"):
        device.torch_device("mps")


def test_simulate_devices_takes_a_numpy_integer() -> None:
    # Issue #13: np.int64(3) (from np.arange) was refused as "not a positive integer".
    code = ("import numpy as np, jax; from labkit.runtime import device; "
            "n = device.simulate_devices(np.int64(3)); print(type(n).__name__, n, len(jax.devices('cpu')))")
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["int", "3", "3"]


@pytest.mark.parametrize("platform, dev, on_chip", [
    ("cpu", "cpu", True), ("gpu", "cuda", True), ("gpu", "cuda:1", True), ("tpu", "xla", True),
    ("tpu", "cpu", False),  # a TPU runtime without torch-xla: torch_device() is the host CPU
    ("gpu", "cpu", False),
])
def test_torch_on_chip(platform: str, dev: str, on_chip: bool) -> None:
    import torch

    assert device.torch_on_chip(platform, torch.device(dev)) is on_chip
    assert device.torch_on_chip(platform, dev) is on_chip  # a string names the same device


def test_torch_on_chip_bad_input() -> None:
    with pytest.raises(ValueError, match=r"platform must be 'cpu', 'gpu' or 'tpu' \(labkit.setup\(\).platform\), got 'cuda'"):
        device.torch_on_chip("cuda", "cuda")
    with pytest.raises(ValueError, match="torch has no device 'tpu'"):
        device.torch_on_chip("tpu", "tpu")
