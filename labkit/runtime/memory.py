"""Peak memory of this process on each device, without starting anything (Lab 00).

Every lab records its peaks (``labkit.course.peaks``) so a run report says whether the lab would
fit a smaller chip: JAX's and torch's device peaks are separate allocators sharing one GPU, so
their *sum* is what a 16 GB T4 must hold.
"""

from __future__ import annotations

import resource
import sys
from typing import Any


def jax_peak_bytes(jax_module: Any = None) -> int | None:
    """Peak bytes JAX has held on its default device; None on a CPU or before JAX has started (Lab 00)."""
    if jax_module is None:
        if "jax" not in sys.modules:
            return None  # never import JAX here: that would start it before setup() simulates devices
        from labkit.runtime.device import jax_backend_initialized

        if not jax_backend_initialized():
            return None
        jax_module = sys.modules["jax"]
    dev = jax_module.devices()[0]
    stats = dev.memory_stats() if hasattr(dev, "memory_stats") else None  # None on CPU, a dict on GPU/TPU
    if not stats or "peak_bytes_in_use" not in stats:
        return None
    return int(stats["peak_bytes_in_use"])


def torch_peak_bytes(torch_module: Any = None) -> int | None:
    """Peak bytes torch's CUDA allocator has held on GPU 0; None without CUDA in use (Lab 00)."""
    torch = torch_module if torch_module is not None else sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return int(torch.cuda.max_memory_allocated(0))


def host_peak_bytes() -> int:
    """Peak resident memory of this process on the host, bytes (Linux reports KiB, macOS bytes) (Lab 00)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def peaks() -> dict[str, int | None]:
    """Peak bytes so far: ``jax``, ``torch`` (device) and ``host`` (resident) (Lab 00)."""
    return {"jax": jax_peak_bytes(), "torch": torch_peak_bytes(), "host": host_peak_bytes()}
