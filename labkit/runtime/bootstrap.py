"""`labkit.setup()`: the first cell of every lab (Lab 00).

On Colab/Kaggle it first adds the packages the labs need that the runtime lacks (never
torch/jax: see :mod:`labkit.runtime.install`). Then it sets up the simulated CPU mesh *before* JAX
starts (it cannot change afterwards), detects the runtime, and prints what it found.
"""

from __future__ import annotations

import os

from labkit.runtime import device
from labkit.runtime.device import Runtime

_runtime: Runtime | None = None


def setup(cpu_devices: int | None = None, quiet: bool = False) -> Runtime:
    """Simulate CPU devices, detect the runtime and say what was found; idempotent (Lab 00)."""
    global _runtime
    host = device.detect_host()
    if host in ("colab", "kaggle") and _runtime is None:
        from labkit.runtime import install

        install.ensure(host=host)
    n = device.requested_cpu_devices() if cpu_devices is None else cpu_devices  # 0 is refused, not the default
    device.simulate_devices(n)
    again = _runtime is not None
    _runtime = device.detect()
    if _runtime.emulated_on and _runtime.torch_device == "cuda":
        from labkit.runtime import emulate

        emulate.cap_torch_memory()  # JAX's cap was set before it started (device.simulate_devices)
    if not quiet:
        rt = _runtime
        mem = f", {rt.memory_bytes / 2**30:.0f} GiB" if rt.memory_bytes else ""
        sim = f" ({rt.cpu_devices} simulated CPU devices for sharding)" if rt.platform != "cpu" or rt.simulated else ""
        print(f"{'already set up: ' if again else ''}{rt.platform.upper()} runtime on {rt.host}: "
              f"{devices_line(rt)}{mem}; bf16 native: {'yes' if rt.bf16 else 'no'}; "
              f"torch device: {rt.torch_device}{sim if rt.platform != 'cpu' else ''}")
        if rt.emulated_on:
            print(f"emulating a {rt.chip} on this {rt.emulated_on} ($LABKIT_EMULATE): its memory "
                  f"({rt.memory_bytes / 1e9:.0f} GB) and bf16 support, not its speed")
        if rt.platform != "cpu" and rt.device_count == 1:
            print(f"one {rt.platform.upper()} here: Lab 03 (sharding) runs its meshes on the {rt.cpu_devices} "
                  "simulated CPU devices; the other labs use the accelerator.")
    return _runtime


def devices_line(rt: Runtime, cores: int | None = None) -> str:
    """'1 x NVIDIA H100 ...', or on a CPU '8 simulated JAX devices on 2 cores (AMD EPYC)' (Lab 00)."""
    # On a CPU the device count is the simulated mesh, not the hardware: saying "8 x AMD EPYC" on a
    # 2-core machine hides why every timing there is noisy.
    if rt.platform == "cpu" and rt.simulated:
        n = cores if cores is not None else (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                             else os.cpu_count() or 1)
        return f"{rt.device_count} simulated JAX devices on {n} core{'s' if n != 1 else ''} ({rt.chip})"
    return f"{rt.device_count} x {rt.chip}"


def runtime() -> Runtime:
    """The runtime found by :func:`setup` (runs setup quietly if needed) (Lab 00)."""
    return _runtime or setup(quiet=True)
