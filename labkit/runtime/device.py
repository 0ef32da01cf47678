"""What am I running on? The module that knows runtimes (Lab 00).

Everything that differs between a laptop CPU, a Colab/Kaggle GPU and a TPU lives here:
detecting the chip, simulating several CPU devices for sharding labs, picking the torch
device, and the torch-xla guard. No labkit module but this one (and :mod:`.matmul_precision`) imports
``torch_xla`` or touches ``XLA_FLAGS`` /
``XLA_PYTHON_CLIENT_*`` (:mod:`labkit.runtime.emulate` sets the memory fraction, for this module).
"""

from __future__ import annotations

import importlib.util
import numbers
import os
import platform
import sys
from dataclasses import asdict, dataclass
from typing import Any, Callable

from labkit.runtime import emulate

# How many CPU devices labs simulate when no multi-device accelerator is present. Sharding
# labs build an 8-device mesh (a TPU v5e-8 / 8-GPU node) so 8 is the course default.
DEFAULT_CPU_DEVICES = 8
MAX_CPU_DEVICES = 512  # 4096 simulated devices already take seconds and GBs to start; the labs need 8
CPU_DEVICES_ENV = "LABKIT_CPU_DEVICES"


@dataclass(frozen=True)
class Runtime:
    """What a lab runs on, as detected by :func:`detect` (Lab 00)."""

    platform: str  # "cpu" | "gpu" | "tpu": JAX's default backend
    chip: str  # chip name as the runtime reports it, e.g. "NVIDIA H100 80GB HBM3"
    device_count: int  # devices of that platform visible to JAX
    memory_bytes: int | None  # per device; None when the runtime does not say
    bf16: bool  # native bf16 matrix math (not emulated)
    simulated: bool  # True when the devices are simulated CPU devices
    host: str  # "local" | "colab" | "kaggle"
    torch_device: str  # what torch work should use: "cuda", "xla", "mps" or "cpu"
    cpu_devices: int  # CPU devices JAX sees (simulated mesh size on any runtime)
    emulated_on: str | None = None  # the real chip when $LABKIT_EMULATE makes this one look smaller

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for reports (Lab 00)."""
        return asdict(self)


# --------------------------------------------------------------------------------------
# Simulated CPU devices
# --------------------------------------------------------------------------------------


def jax_backend_initialized() -> bool:
    """True once JAX has created its backends; device counts are frozen from then on (Lab 03)."""
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge
    except ImportError:  # pragma: no cover - layout changed; assume the worst
        return True
    check = getattr(xla_bridge, "backends_are_initialized", None)
    return bool(check()) if check is not None else bool(getattr(xla_bridge, "_backends", {}))


def simulate_devices(n: int = DEFAULT_CPU_DEVICES) -> int:
    """Give JAX ``n`` CPU devices for sharding on one machine; call before any JAX work (Lab 03).

    Only the CPU backend is affected: on a GPU/TPU runtime the accelerator stays JAX's default
    and the simulated CPU mesh is there for the sharding labs' fallback. Returns ``n``.
    """
    if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:  # numpy ints too: np.arange sweeps
        raise ValueError(f"simulate_devices needs a positive integer device count, got {n!r}; "
                         "e.g. simulate_devices(8).")
    if n > MAX_CPU_DEVICES:  # JAX would start them all, one thread pool each: minutes and GBs, then swap
        raise ValueError(f"simulate_devices({n}): too many simulated devices (each is a real CPU client: "
                         f"thousands take minutes and GBs); use at most {MAX_CPU_DEVICES} — the labs need 8.")
    if jax_backend_initialized():
        import jax

        have = len(jax.devices("cpu"))
        if have == n:
            return n  # already set up exactly as asked (e.g. setup() ran twice)
        raise RuntimeError(
            f"JAX has already initialised its backends with {have} CPU device(s), so it cannot switch to {n}. "
            f"Device counts are fixed the first time JAX runs anything. Restart the kernel (or the Python "
            f"process) and call labkit.setup() / labkit.runtime.device.simulate_devices({n}) before any other JAX code."
        )
    # Also for torch-xla on CPU (PJRT_DEVICE=CPU): same device count for both frameworks.
    os.environ.setdefault("CPU_NUM_DEVICES", str(n))
    # Don't let JAX grab 75% of GPU memory up front: labs run torch in the same process.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    emulate.cap_jax_memory()  # $LABKIT_EMULATE: JAX reads its memory cap once, when it starts the GPU
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", int(n))
    except AttributeError:  # pragma: no cover - jax older than the option: use the flag
        flag = f"--xla_force_host_platform_device_count={n}"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
    return int(n)


def requested_cpu_devices() -> int:
    """The simulated CPU device count: $LABKIT_CPU_DEVICES or the course default of 8 (Lab 03)."""
    raw = os.environ.get(CPU_DEVICES_ENV, str(DEFAULT_CPU_DEVICES))
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{CPU_DEVICES_ENV}={raw!r} is not an integer; set it to e.g. 8.") from None
    if not 1 <= n <= MAX_CPU_DEVICES:
        raise ValueError(f"{CPU_DEVICES_ENV}={raw!r} must be between 1 and {MAX_CPU_DEVICES}; set it to e.g. 8.")
    return n


# --------------------------------------------------------------------------------------
# Detection
# --------------------------------------------------------------------------------------


def detect_host(environ: dict[str, str] | None = None) -> str:
    """"colab", "kaggle" or "local", from the environment the notebook host sets (Lab 00)."""
    env = os.environ if environ is None else environ
    if "COLAB_RELEASE_TAG" in env or "COLAB_GPU" in env or "COLAB_TPU_ADDR" in env:
        return "colab"
    if "KAGGLE_KERNEL_RUN_TYPE" in env or "KAGGLE_URL_BASE" in env:
        return "kaggle"
    return "local"


def cpu_name() -> str:
    """The CPU model string from /proc/cpuinfo (Linux) or platform (Lab 00)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _cpu_has_bf16() -> bool:
    # AVX512-BF16 / AMX give x86 CPUs native bf16 dot products; without them bf16 is emulated.
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def _host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return None


def _gpu_bf16(device: Any) -> bool:
    # bf16 tensor cores arrived with Ampere (compute capability 8.0); T4 (7.5) and V100 (7.0)
    # have none, which is why Lab 04 falls back to fp16 + loss scaling there.
    cc = getattr(device, "compute_capability", None)
    if cc:
        try:
            return float(cc) >= 8.0
        except ValueError:  # ROCm reports the gfx arch ("gfx942"), not "major.minor": ask torch
            pass
    torch = _torch_or_none()
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.get_device_capability(0)[0] >= 8
    return False


def _torch_or_none() -> Any:
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    return torch


def detect() -> Runtime:
    """Detect platform, chip, device count, memory and bf16 support via JAX (Lab 00).

    Initialises JAX's backends, so call :func:`simulate_devices` (or ``labkit.setup()``) first.
    """
    import jax

    devices = jax.devices()
    first = devices[0]
    plat = first.platform  # "cpu" | "gpu" | "tpu" ("cuda"/"rocm" on some builds)
    plat = "gpu" if plat in ("cuda", "rocm") else plat
    if plat not in ("cpu", "gpu", "tpu"):
        raise RuntimeError(
            f"JAX's default backend is {first.platform!r} ({first.device_kind}), a runtime the course does not "
            "support. Run on CPU instead: set JAX_PLATFORMS=cpu before starting Python (or restart the kernel)."
        )
    memory: int | None = None
    stats = first.memory_stats() if hasattr(first, "memory_stats") else None
    if stats and stats.get("bytes_limit"):
        memory = int(stats["bytes_limit"])
    if plat == "cpu":
        chip, bf16, memory = cpu_name(), _cpu_has_bf16(), _host_memory_bytes()
    elif plat == "gpu":
        chip, bf16 = first.device_kind, _gpu_bf16(first)
        torch = _torch_or_none()
        if torch is not None and torch.cuda.is_available():
            memory = int(torch.cuda.get_device_properties(0).total_memory)
    else:  # TPU: every generation has bf16 MXUs
        chip, bf16 = first.device_kind, True
    return emulate.apply(Runtime(  # $LABKIT_EMULATE: look like the emulated chip
        platform=plat,
        chip=chip,
        device_count=len(devices),
        memory_bytes=memory,
        bf16=bf16,
        simulated=plat == "cpu" and len(devices) > 1,
        host=detect_host(),
        torch_device=torch_device_kind(),
        cpu_devices=len(jax.devices("cpu")),
    ))


# --------------------------------------------------------------------------------------
# torch / torch-xla
# --------------------------------------------------------------------------------------


def xla_installed() -> bool:
    """True when torch-xla can be imported (optional extra ``xla``) (Lab 05)."""
    return importlib.util.find_spec("torch_xla") is not None


def torch_device_kind(prefer_xla: bool = False) -> str:
    """"cuda", "xla", "mps" or "cpu": where torch work should go on this runtime (Lab 00)."""
    torch = _torch_or_none()
    if torch is None:
        return "none"
    if torch.cuda.is_available():
        return "cuda"
    if xla_installed() and (prefer_xla or os.environ.get("TPU_NAME") or _tpu_present()):
        return "xla"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def _tpu_present() -> bool:
    # TPU VMs expose /dev/accel* (v4+) or /dev/vfio; checking files avoids initialising JAX.
    return any(os.path.exists(p) for p in ("/dev/accel0", "/dev/vfio/0"))


def torch_device(kind: str | None = None) -> Any:
    """A ``torch.device`` for ``kind`` (default: :func:`torch_device_kind`) (Lab 00)."""
    import torch

    kind = kind or torch_device_kind()
    if (t := torch_kind(kind)) == "xla":
        return xla_device()
    if t in ("cuda", "mps") and not (torch.cuda if t == "cuda" else torch.backends.mps).is_available():
        what = "a CUDA GPU" if t == "cuda" else "an Apple GPU (mps)"
        raise RuntimeError(f"torch cannot see {what} here; use torch_device('cpu').")
    return torch.device(kind)


def serving_device() -> Any:
    """(Lab 05) Where torch serves when no device is named: the CUDA GPU if torch sees one, else the host CPU.

    Not torch-xla, even on a TPU: a decode step's shapes change every token and a lazy XLA tensor program
    recompiles for each new one; not mps, where the CUDA-graph and compile paths the lab times do not run.
    """
    return torch_device("cuda" if torch_device_kind() == "cuda" else "cpu")


def torch_kind(device: Any) -> str:
    """(Lab 00) ``torch.device(device).type``; None, 'gpu' or 'tpu' (not torch devices) get a ValueError with the fix."""
    if device is None or str(device).split(":")[0].strip().lower() in ("gpu", "tpu"):
        raise ValueError(f"torch has no device {device!r}: use 'cuda' for a GPU, 'xla' (torch-xla) for a TPU, or 'cpu'")
    import torch

    return torch.device(device).type


def torch_on_chip(platform: str, device: Any) -> bool:
    """(Lab 00) Whether torch work on ``device`` runs on this runtime's chip: not on a GPU/TPU runtime's host CPU.

    On a TPU runtime without torch-xla, :func:`torch_device` is the host CPU: torch's timings there say
    nothing about the TPU, so the labs leave torch out of the comparison instead of comparing chips.
    """
    if platform not in ("cpu", "gpu", "tpu"):
        raise ValueError(f"platform must be 'cpu', 'gpu' or 'tpu' (labkit.setup().platform), got {platform!r}")
    return platform == "cpu" or torch_kind(device) != "cpu"


def xla_device() -> Any:
    """The torch-xla device (TPU, or CPU with PJRT_DEVICE=CPU); clear error if not installed (Lab 05)."""
    _xla_env()
    import torch_xla

    return torch_xla.device()


def _xla_env() -> None:
    """Raise if torch-xla is missing; off-TPU, point it at the (simulated) CPU devices."""
    if not xla_installed():
        raise RuntimeError(
            "torch-xla is not installed. It is optional: `pip install -e '.[xla]'` "
            "(Linux x86_64 only; pins torch 2.9, torch-xla's last release)."
        )
    if not _tpu_present() and not os.environ.get("TPU_NAME"):
        os.environ.setdefault("PJRT_DEVICE", "CPU")
        os.environ.setdefault("CPU_NUM_DEVICES", str(requested_cpu_devices()))


def torch_sync(device: Any) -> Callable[[], None]:
    """A function that waits until all queued torch work on ``device`` has finished (Lab 00).

    CUDA kernels and XLA graphs run asynchronously: a timer that does not call this measures
    only how fast Python queues work.
    """
    import torch

    kind = torch_kind(device)
    if kind == "cuda":
        if not torch.cuda.is_available():  # else torch's own "Torch not compiled with CUDA" assertion, mid-timing
            raise RuntimeError(f"device={device!r}, but this torch sees no CUDA GPU; use device.torch_device() or 'cpu'")
        return torch.cuda.synchronize
    if kind == "xla":
        import torch_xla
        import torch_xla.core.xla_model as xm

        def _sync() -> None:
            torch_xla.sync()  # cut the lazy graph and launch it
            xm.wait_device_ops()  # then wait for the device to finish

        return _sync
    if kind == "mps":
        return torch.mps.synchronize
    return lambda: None  # CPU torch ops are synchronous


# --------------------------------------------------------------------------------------
# Triton
# --------------------------------------------------------------------------------------

TRITON_INTERPRET_ENV = "TRITON_INTERPRET"


def triton_interpret_if_no_gpu() -> bool:
    """Use Triton's CPU interpreter when torch sees no CUDA GPU; True if interpreting (Lab 01).

    Triton reads ``$TRITON_INTERPRET`` when ``@triton.jit`` decorates a kernel, so call this
    before importing a module that defines Triton kernels. A value the user set wins.
    """
    if TRITON_INTERPRET_ENV not in os.environ:
        torch = _torch_or_none()
        if torch is None or not torch.cuda.is_available():
            os.environ[TRITON_INTERPRET_ENV] = "1"  # kernels run as numpy on the CPU, slowly
    return os.environ.get(TRITON_INTERPRET_ENV, "0").strip().lower() in ("1", "true", "on", "yes")


def xla_spmd() -> Any:
    """torch-xla in SPMD mode: namespace(xs, n_devices, device, hlo, sharding_spec) (Lab 03).

    Enables ``xr.use_spmd()`` (must come before any XLA tensor exists) and returns the
    ``torch_xla.distributed.spmd`` module as ``xs`` plus helpers, so no other labkit module
    imports torch_xla. Clear RuntimeError when torch-xla is not installed.
    """
    from types import SimpleNamespace

    _xla_env()  # raises the "not installed" message; sets PJRT_DEVICE=CPU off-TPU
    import torch_xla
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr

    if not xr.is_spmd():  # once, before the first XLA tensor: one program for all devices from here on
        xr.use_spmd()
    return SimpleNamespace(
        xs=xs, n_devices=xr.global_runtime_device_count(), device=torch_xla.device(),
        hlo=lambda tensors: torch_xla._XLAC._get_xla_tensors_hlo(list(tensors)),
        sharding_spec=lambda t: torch_xla._XLAC._get_xla_sharding_spec(t),
        sync=torch_xla.sync)


def steady_torch_threads(device: Any) -> int:
    """On a CPU, run torch on one intra-op thread so small-model timings are steady (Lab 02).

    torch's OpenMP threads spin-wait for each other: on a CPU shared with other work (a CI
    runner, a small VM) that turns a 15 ms step into 100+ ms of noise, and the small ops of the
    labs' models would not use two threads anyway. JAX keeps its own thread pool. Returns the
    intra-op thread count torch now uses (unchanged off the CPU).
    """
    import torch

    if torch_kind(device) == "cpu":
        torch.set_num_threads(1)
    return torch.get_num_threads()
