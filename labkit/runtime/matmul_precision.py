"""torch's float32 matmul precision on every torch device, torch-xla included (Labs 00 and 04).

``torch.set_float32_matmul_precision`` governs CUDA (TF32) and the CPU; torch-xla ignores it and reads
its own switch in ``torch_xla.backends`` (torch-xla >= 2.8), whose default on a TPU rounds fp32 inputs
to one bf16 pass. A lab that means "true fp32" must set both.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import Any, Iterator

# torch's float32 matmul setting -> torch-xla's own switch (torch_xla.backends, torch-xla >= 2.8). On a TPU its
# "default" rounds fp32 inputs to one bf16 pass, "high" takes three bf16 passes and "highest" six (~fp32):
# the same levels as JAX's Precision. torch-xla ignores torch.set_float32_matmul_precision.
XLA_MATMUL_PRECISION = {"highest": "highest", "high": "high", "medium": "default"}


@contextlib.contextmanager
def fp32_matmul_precision(setting: str, device: Any = "cpu") -> Iterator[None]:
    """(Lab 04) torch's float32 matmul ``setting`` on ``device`` inside the block, torch-xla included; restored after.

    ``torch.set_float32_matmul_precision`` governs CUDA (TF32) and CPU; on an XLA device the same
    level is set through ``torch_xla.backends``, which logs a warning each time it changes, so it
    is changed only when it differs.
    """
    import torch

    if setting not in XLA_MATMUL_PRECISION:
        raise ValueError(f"setting must be one of {', '.join(XLA_MATMUL_PRECISION)} "
                         f"(torch.set_float32_matmul_precision values), got {setting!r}")
    before = torch.get_float32_matmul_precision()
    xla_before = None
    try:
        torch.set_float32_matmul_precision(setting)
        if torch.device(device).type == "xla":
            backends = importlib.import_module("torch_xla.backends")
            if not hasattr(backends, "set_mat_mul_precision"):
                raise RuntimeError("this torch-xla has no torch_xla.backends.set_mat_mul_precision (added in 2.8), "
                                   "so its fp32 matmuls stay at its default (one bf16 pass on a TPU): upgrade "
                                   "torch-xla, or read them as bf16")
            xla_before = backends.get_mat_mul_precision()
            if xla_before != XLA_MATMUL_PRECISION[setting]:
                backends.set_mat_mul_precision(XLA_MATMUL_PRECISION[setting])
        yield
    finally:
        torch.set_float32_matmul_precision(before)
        if xla_before is not None and xla_before != XLA_MATMUL_PRECISION[setting]:
            importlib.import_module("torch_xla.backends").set_mat_mul_precision(xla_before)
