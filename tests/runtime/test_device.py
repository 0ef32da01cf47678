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
    for bad in ("0", "100000"):  # 100000 simulated devices: JAX would start them all (minutes, GBs)
        monkeypatch.setenv(device.CPU_DEVICES_ENV, bad)
        with pytest.raises(ValueError, match=f"'{bad}' must be between 1 and 512"):
            device.requested_cpu_devices()


def test_simulate_devices_refuses_a_count_that_would_not_start() -> None:
    with pytest.raises(ValueError, match=r"simulate_devices\(100000\): too many .* at most 512"):
        device.simulate_devices(100000)  # refused before JAX is touched


def test_setup_refuses_zero_devices_instead_of_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit.runtime import bootstrap

    monkeypatch.setattr(device, "detect_host", lambda: "local")
    with pytest.raises(ValueError, match="positive integer device count, got 0"):
        bootstrap.setup(cpu_devices=0)


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


# --------------------------------------------------------------------------------------
# detect() / _gpu_bf16 on GPU and TPU runtimes, with fakes shaped like JAX's and torch's objects
# --------------------------------------------------------------------------------------

H100_TORCH_BYTES = 85_045_395_456  # torch.cuda.get_device_properties(0).total_memory on an H100 80GB HBM3
H100_JAX_LIMIT = 63_784_046_592  # JAX's bytes_limit there: only its allocator's share (75% by default)
T4_TORCH_BYTES = 15_835_660_288  # a Colab/Kaggle T4
V5E_HBM = 17_179_869_184  # TPU v5 lite (v5e): 16 GiB HBM per chip, reported as bytes_limit


class FakeJaxDevice:
    """A jax Device as JAX's CUDA/ROCm/TPU plugins build it: ``compute_capability`` exists only on GPUs."""

    def __init__(self, platform: str, kind: str, cc: str | None = None, bytes_limit: int | None = None) -> None:
        self.platform, self.device_kind = platform, kind
        if cc is not None:
            self.compute_capability = cc
        self._limit = bytes_limit

    def memory_stats(self) -> dict[str, int] | None:
        return {"bytes_in_use": 0, "bytes_limit": self._limit} if self._limit else None


def fake_torch(capability: tuple[int, int] | None = None, total_memory: int = 0) -> object:
    """torch as _torch_or_none() returns it: CUDA available iff a capability is given; no Apple GPU."""
    from types import SimpleNamespace

    cuda = SimpleNamespace(
        is_available=lambda: capability is not None,
        get_device_capability=lambda device=None: capability,
        get_device_properties=lambda device: SimpleNamespace(total_memory=total_memory),
    )
    return SimpleNamespace(cuda=cuda, backends=SimpleNamespace(mps=None))


@pytest.fixture
def on_runtime(monkeypatch: pytest.MonkeyPatch):
    """Make detect() see ``accel`` as JAX's default devices (8 simulated CPU devices beside them) and ``torch``."""
    import jax

    monkeypatch.delenv("LABKIT_EMULATE", raising=False)  # emulate.apply() reads it inside detect()
    monkeypatch.setattr(device, "_tpu_present", lambda: False)
    monkeypatch.setattr(device, "xla_installed", lambda: False)

    def use(accel: list[FakeJaxDevice], torch: object | None) -> None:
        cpus = [FakeJaxDevice("cpu", "cpu") for _ in range(8)]
        monkeypatch.setattr(jax, "devices", lambda backend=None: cpus if backend == "cpu" else accel)
        monkeypatch.setattr(device, "_torch_or_none", lambda: torch)

    return use


def test_detect_h100_is_a_bf16_gpu_with_torchs_memory(on_runtime) -> None:
    # A CUDA runtime: JAX reports platform "gpu", compute_capability "9.0"; its bytes_limit is only the
    # allocator's share, so the whole-GPU figure comes from torch's total_memory.
    on_runtime([FakeJaxDevice("gpu", "NVIDIA H100 80GB HBM3", "9.0", H100_JAX_LIMIT)],
               fake_torch((9, 0), H100_TORCH_BYTES))
    rt = device.detect()
    assert (rt.platform, rt.chip, rt.device_count, rt.memory_bytes, rt.bf16) == (
        "gpu", "NVIDIA H100 80GB HBM3", 1, H100_TORCH_BYTES, True)
    assert (rt.simulated, rt.torch_device, rt.cpu_devices, rt.emulated_on) == (False, "cuda", 8, None)


def test_detect_t4_has_no_native_bf16(on_runtime) -> None:
    # A Colab/Kaggle T4 is compute capability 7.5: no bf16 tensor cores, so Lab 04 takes its fp16 path.
    on_runtime([FakeJaxDevice("gpu", "Tesla T4", "7.5", 11_300_000_000)], fake_torch((7, 5), T4_TORCH_BYTES))
    rt = device.detect()
    assert (rt.platform, rt.chip, rt.bf16, rt.memory_bytes) == ("gpu", "Tesla T4", False, T4_TORCH_BYTES)


@pytest.mark.parametrize("name, kind, cc, torch, memory, torch_device", [
    # Without torch, the memory is JAX's bytes_limit and torch work has nowhere to go.
    ("cuda", "NVIDIA A100-SXM4-40GB", "8.0", None, 30_000_000_000, "none"),
    # ROCm: XLA's compute_capability is the gfx arch; ROCm torch answers as "cuda", MI300X capability (9, 4).
    ("rocm", "AMD Instinct MI300X", "gfx942", fake_torch((9, 4), 205_822_885_888), 205_822_885_888, "cuda"),
])
def test_detect_calls_cuda_and_rocm_platform_names_gpu(on_runtime, name, kind, cc, torch, memory, torch_device) -> None:
    # Some jaxlib builds name the platform after the plugin ("cuda"/"rocm"); the course calls both "gpu".
    on_runtime([FakeJaxDevice(name, kind, cc, 30_000_000_000)] * 2, torch)
    rt = device.detect()
    assert (rt.platform, rt.chip, rt.device_count, rt.bf16, rt.memory_bytes, rt.torch_device) == (
        "gpu", kind, 2, True, memory, torch_device)


def test_detect_tpu_v5_lite_is_bf16_with_memory_from_bytes_limit(on_runtime) -> None:
    # A TPU VM: JAX platform "tpu", device_kind "TPU v5 lite", no compute_capability; torch (CPU wheel) has no CUDA.
    on_runtime([FakeJaxDevice("tpu", "TPU v5 lite", bytes_limit=V5E_HBM)] * 8, fake_torch(None))
    rt = device.detect()
    assert (rt.platform, rt.chip, rt.device_count, rt.bf16, rt.memory_bytes) == (
        "tpu", "TPU v5 lite", 8, True, V5E_HBM)
    assert rt.torch_device == "cpu" and not rt.simulated


def test_gpu_bf16_without_compute_capability_asks_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    # Older jaxlib GPU devices have no compute_capability attribute: torch.cuda.get_device_capability(0) decides.
    gpu = FakeJaxDevice("gpu", "NVIDIA A100-SXM4-40GB")
    assert not hasattr(gpu, "compute_capability")
    monkeypatch.setattr(device, "_torch_or_none", lambda: fake_torch((8, 0)))
    assert device._gpu_bf16(gpu) is True
    monkeypatch.setattr(device, "_torch_or_none", lambda: fake_torch((7, 5)))
    assert device._gpu_bf16(FakeJaxDevice("gpu", "Tesla T4")) is False
    monkeypatch.setattr(device, "_torch_or_none", lambda: fake_torch(None))  # torch without CUDA: say no
    assert device._gpu_bf16(gpu) is False
    monkeypatch.setattr(device, "_torch_or_none", lambda: None)  # no torch at all
    assert device._gpu_bf16(gpu) is False


def test_gpu_bf16_on_rocm_gfx_capability_does_not_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    # On ROCm, XLA reports compute_capability as the gfx arch ("gfx942" on an MI300X), not "major.minor":
    # float() of it raised ValueError and detect() failed. Unparsable: ask torch (ROCm torch: (9, 4)).
    monkeypatch.setattr(device, "_torch_or_none", lambda: fake_torch((9, 4)))
    assert device._gpu_bf16(FakeJaxDevice("gpu", "AMD Instinct MI300X", "gfx942")) is True
    monkeypatch.setattr(device, "_torch_or_none", lambda: None)
    assert device._gpu_bf16(FakeJaxDevice("gpu", "AMD Instinct MI300X", "gfx942")) is False


def test_detect_h100_emulating_a_t4(on_runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    # LABKIT_EMULATE=t4 on an H100: detect() reports the T4's name, 16 GB and no bf16, the H100 in emulated_on.
    on_runtime([FakeJaxDevice("gpu", "NVIDIA H100 80GB HBM3", "9.0", H100_JAX_LIMIT)],
               fake_torch((9, 0), H100_TORCH_BYTES))
    monkeypatch.setenv("LABKIT_EMULATE", "t4")
    rt = device.detect()
    assert (rt.chip, rt.memory_bytes, rt.bf16, rt.emulated_on) == (
        "NVIDIA T4", 16_000_000_000, False, "NVIDIA H100 80GB HBM3")


@pytest.mark.parametrize("kind, served", [("cuda", "cuda"), ("xla", "cpu"), ("mps", "cpu"), ("cpu", "cpu")])
def test_serving_device_is_the_gpu_or_the_host_never_torch_xla(monkeypatch: pytest.MonkeyPatch, kind: str,
                                                               served: str) -> None:
    import torch

    monkeypatch.setattr(device, "torch_device_kind", lambda prefer_xla=False: kind)  # a GPU / TPU / Mac runtime
    monkeypatch.setattr(torch.cuda, "is_available", lambda: kind == "cuda")  # torch_device("cuda") checks it
    monkeypatch.setattr(device, "xla_device", lambda: pytest.fail("serving_device asked torch-xla for a device"))
    assert device.serving_device() == torch.device(served)


def test_timing_on_cuda_without_cuda_says_what_to_use(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # this machine, or a CPU-only torch wheel
    with pytest.raises(RuntimeError, match=r"device='cuda', but this torch sees no CUDA GPU; use device.torch_device"):
        device.torch_sync("cuda")
