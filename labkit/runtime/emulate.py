"""Emulating a learner's smaller GPU on a bigger one: ``LABKIT_EMULATE=t4`` (Lab 00).

Most learners run on a 16 GB T4 (Colab, Kaggle) while the course is developed on bigger GPUs.
Setting ``LABKIT_EMULATE`` before the first cell makes an H100 behave, for the course's purposes,
like the named chip:

- **memory** is capped at the emulated chip's: JAX through ``XLA_PYTHON_CLIENT_MEM_FRACTION``
  (read once, when JAX creates its GPU backend, so it is set before that) and torch through
  ``torch.cuda.set_per_process_memory_fraction``. Each framework gets the whole emulated memory;
  on the real chip they share it, so the labs also record both peaks (their sum must fit);
- **bf16** is reported absent where the chip has none (a T4), so labs take their fp16 paths;
- **specs**: ``Runtime.chip`` becomes the emulated chip, so peaks, rooflines and the profile come
  from its table row; ``Runtime.emulated_on`` keeps the real one.

It does not emulate speed: a T4's FLOP/s and bandwidth are not imposed, so timings stay the big
GPU's (the run report says emulated, and on what).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, replace
from typing import Any, Mapping

from labkit.runtime import hardware

EMULATE_ENV = "LABKIT_EMULATE"
TARGETS = {"t4": "NVIDIA T4", "l4": "NVIDIA L4", "a100-40gb": "NVIDIA A100 SXM 40GB"}  # key -> chip table name
JAX_FRACTION_ENV = "XLA_PYTHON_CLIENT_MEM_FRACTION"


@dataclass(frozen=True)
class Emulation:
    """A chip to look like: its table name, memory in bytes and native bf16 (Lab 00)."""

    key: str  # "t4"
    chip: str  # "NVIDIA T4", a hardware table name
    memory_bytes: int  # the vendor's figure (16 GB -> 16e9 bytes)
    bf16: bool  # native bf16 matrix math


def requested(environ: Mapping[str, str] | None = None) -> Emulation | None:
    """The emulation ``$LABKIT_EMULATE`` asks for, or None; an unknown name is a clear error (Lab 00)."""
    raw = (os.environ if environ is None else environ).get(EMULATE_ENV, "").strip().lower()
    if not raw:
        return None
    if raw not in TARGETS:
        raise ValueError(f"{EMULATE_ENV}={raw!r} is not a chip the course emulates; use one of "
                         f"{', '.join(TARGETS)} (or unset it).")
    spec = hardware.lookup(TARGETS[raw])
    assert spec is not None, f"hardware table lacks {TARGETS[raw]}"  # a test keeps TARGETS in the table
    return Emulation(raw, spec.name, int(spec.memory_bytes), spec.peak("bf16") is not None)


def memory_fraction(em: Emulation, physical_bytes: int) -> float:
    """Share of this GPU's memory that equals the emulated chip's; refuses a bigger chip (Lab 00)."""
    if physical_bytes <= 0:
        raise ValueError(f"physical GPU memory must be positive, got {physical_bytes} bytes")
    if em.memory_bytes > physical_bytes:
        raise ValueError(f"{EMULATE_ENV}={em.key}: a {em.chip} has {em.memory_bytes / 1e9:.0f} GB, more than this "
                         f"GPU's {physical_bytes / 1e9:.0f} GB; emulate a smaller chip or unset {EMULATE_ENV}.")
    return em.memory_bytes / physical_bytes


def gpu_memory_bytes() -> int | None:
    """Total memory of GPU 0 without starting JAX (torch, else nvidia-smi); None without a GPU (Lab 00)."""
    try:
        import torch

        if torch.cuda.is_available():
            return int(torch.cuda.get_device_properties(0).total_memory)
    except ImportError:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = out.stdout.strip().splitlines()[:1]
    return int(float(first[0]) * 2**20) if out.returncode == 0 and first else None  # MiB -> bytes


def cap_jax_memory(environ: dict[str, str] | None = None, physical_bytes: int | None = None) -> float | None:
    """Before JAX starts: set its GPU memory fraction to the emulated chip's share; the fraction or None (Lab 00)."""
    env = os.environ if environ is None else environ
    em = requested(env)
    if em is None:
        return None
    physical = physical_bytes if physical_bytes is not None else gpu_memory_bytes()
    if physical is None:
        raise ValueError(f"{EMULATE_ENV}={em.key} emulates a GPU on a bigger GPU, and this machine has none; "
                         f"unset {EMULATE_ENV}.")
    frac = memory_fraction(em, physical)
    env[JAX_FRACTION_ENV] = f"{frac:.4f}"
    return frac


def cap_torch_memory(physical_bytes: int | None = None, torch_module: Any = None) -> float | None:
    """Cap torch's CUDA allocator at the emulated chip's memory; the fraction or None (Lab 00)."""
    em = requested()
    if em is None:
        return None
    torch = torch_module
    if torch is None:
        import torch
    physical = physical_bytes if physical_bytes is not None else int(torch.cuda.get_device_properties(0).total_memory)
    frac = memory_fraction(em, physical)
    torch.cuda.set_per_process_memory_fraction(frac, 0)
    return frac


def apply(rt: Any, environ: Mapping[str, str] | None = None) -> Any:
    """The Runtime as the emulated chip: its name, memory and bf16, the real chip in ``emulated_on`` (Lab 00)."""
    em = requested(environ)
    if em is None:
        return rt
    if rt.platform != "gpu":
        raise ValueError(f"{EMULATE_ENV}={em.key} emulates a GPU on a bigger GPU; this runtime is "
                         f"{rt.platform.upper()} ({rt.chip}). Unset {EMULATE_ENV}.")
    if rt.memory_bytes:
        memory_fraction(em, rt.memory_bytes)  # refuses to emulate a bigger chip
    return replace(rt, chip=em.chip, memory_bytes=em.memory_bytes, bf16=em.bf16 and rt.bf16, emulated_on=rt.chip)
