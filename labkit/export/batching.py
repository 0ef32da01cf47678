"""What batching must buy a decode step, and why the bar depends on the device (Lab 05).

A decode step reads every weight once whatever its rows, and does arithmetic per row. On a GPU or
TPU a small model's step is bound by launch overhead and weight reads, so ``ratio`` x the rows cost
little more time: the bar is that they cost under ``STEP_GROWTH`` (4x) a one-row step, i.e. tokens/s
grows by more than ``ratio / 4``. On a CPU the rows' arithmetic is real work for a few cores and the
step grows with the batch (JAX jit's step of Lab 05's smoke GPT grew 3.5x for 8x the rows on a quiet
2-core VM, and 4x beside other jobs in CI, where 8x the rows then gave exactly 2x the tokens/s), so
there the claim is only that batching still pays: more than ``CPU_GAIN`` (1.5x) the tokens/s, i.e.
the step grows by less than ``ratio / 1.5``. Both bars fail where a step grows as fast as its rows.
"""

from __future__ import annotations

from typing import Any

STEP_GROWTH = 4.0  # accelerator: a step carrying `ratio` x the rows costs under this many one-row steps
CPU_GAIN = 1.5  # CPU: the larger batch must serve more than this many times the tokens/s


def on_cpu(decoder: Any) -> bool:
    """Whether a serve decoder runs on the CPU: torch's by its .device, JAX's by its weights' device (Lab 05)."""
    dev = getattr(decoder, "device", None)
    if dev is not None:  # TorchDecoder, StaticTorchDecoder: a torch.device
        return getattr(dev, "type", str(dev)) == "cpu"
    flat = getattr(decoder, "flat", None)
    if not flat:
        raise TypeError(f"{type(decoder).__name__} has neither .device (torch) nor .flat weights (JAX): "
                        "pass a labkit.export.serve decoder")
    return next(iter(flat.values())).devices().pop().platform == "cpu"


def gain_bar(ratio: float, cpu: bool) -> float:
    """The tokens/s gain `ratio` x the rows must beat: ratio / 4 (>= 1.5) on an accelerator, 1.5 on a CPU (Lab 05)."""
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not ratio > CPU_GAIN:
        raise ValueError(f"ratio must be a number above {CPU_GAIN} (largest batch / smallest), got {ratio!r}: "
                         "tokens/s cannot grow by more than the rows do, so sweep batches further apart")
    return CPU_GAIN if cpu else max(ratio / STEP_GROWTH, CPU_GAIN)  # below 6x, ratio / 4 asks less than a CPU
