"""Bootstrap on Colab/Kaggle: add the packages the labs need, never touch the runtime's own.

Colab and Kaggle images ship torch, jax, jaxlib and their CUDA/TPU libraries, built for that
runtime; reinstalling them breaks the runtime. So the bootstrap installs only what is
*missing*, in one pip call constrained to the versions already installed (pip then fails
rather than upgrade torch or jax, and a failed call installs nothing). A protected package
that is missing or outside the supported range gets a remedy message, never a reinstall.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Sequence

from labkit.runtime import versions
from labkit.runtime.doctor import SUPPORTED

# What the labs import that a runtime may lack (pip names). jupyterlab/nbval are for maintainers.
NEEDED = ("flax", "optax", "ml_dtypes", "matplotlib", "papermill", "nbformat", "tqdm", "safetensors")
# Installed by the runtime, tied to its drivers/chips: never installed or upgraded by us.
PROTECTED = ("torch", "jax", "jaxlib", "torch_xla", "libtpu")
# Supported ranges of the protected packages, from the doctor's table (jaxlib follows jax).
PROTECTED_RANGES = {"jax": SUPPORTED["jax"], "jaxlib": SUPPORTED["jax"], "torch": SUPPORTED["torch"]}


class BootstrapError(RuntimeError):
    """Installing the missing packages failed; nothing was installed (Lab 00)."""


@dataclass
class InstallPlan:
    """What the bootstrap will do on this runtime (Lab 00)."""

    install: list[str] = field(default_factory=list)  # missing packages, pip names
    pins: dict[str, str] = field(default_factory=dict)  # protected package -> installed version (kept)
    remedies: list[str] = field(default_factory=list)  # problems we will not fix by reinstalling

    @property
    def nothing_to_do(self) -> bool:
        """True when every needed package is there already (Lab 00)."""
        return not self.install


def plan(found: dict[str, str | None], needed: Sequence[str] = NEEDED, host: str = "colab") -> InstallPlan:
    """Decide what to install from a name -> version map; pure, so it is testable (Lab 00)."""
    p = InstallPlan()
    p.install = [n for n in needed if not found.get(n.replace("-", "_")) and not found.get(n)]
    p.pins = {n: v for n in PROTECTED if (v := found.get(n))}
    where = {"colab": "Runtime > Change runtime type (or Runtime > Restart)", "kaggle": "Settings > Environment"}.get(
        host, "your environment")
    for name, (lo, hi) in PROTECTED_RANGES.items():
        v = found.get(name)
        mm, lo_mm = versions.major_minor(v), versions.major_minor(lo)
        hi_mm = versions.major_minor(hi)
        if v is None:
            p.remedies.append(f"{name} is not installed on this runtime. The course never installs it for you "
                              f"(it must match the runtime's CUDA/TPU stack): pick a runtime that ships it via {where}.")
        elif mm is not None and (mm < lo_mm or (hi_mm is not None and mm >= hi_mm)):
            need = f">= {lo}" + (f", < {hi}" if hi else "")
            p.remedies.append(f"{name} {v} is outside the supported range {need}. Not reinstalling it (that would "
                              f"break this runtime's accelerator stack). Remedy: choose a newer image via {where}, "
                              f"or install the runtime's own build yourself, e.g. pip install -U '{name}>={lo}' "
                              f"(for jax on TPU: 'jax[tpu]', on GPU: 'jax[cuda12]'), then restart the kernel.")
    return p


def pip_command(p: InstallPlan, constraints_file: str) -> list[str]:
    """The single pip call that installs ``p.install`` without moving the pinned packages (Lab 00)."""
    return [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "-c", constraints_file, *p.install]


def ensure(
    needed: Sequence[str] = NEEDED,
    host: str = "colab",
    found: dict[str, str | None] | None = None,
    run: Callable[[list[str]], subprocess.CompletedProcess] | None = None,
) -> InstallPlan:
    """Install missing packages in one constrained pip call; idempotent; says what it did (Lab 00)."""
    found = found if found is not None else {n: versions.version(n) for n in (*needed, *PROTECTED)}
    p = plan(found, needed, host)
    for msg in p.remedies:
        print(f"labkit: {msg}")
    if p.nothing_to_do:
        print("labkit: every package the labs need is already installed; nothing to do.")
        return p
    run = run or (lambda cmd: subprocess.run(cmd, capture_output=True, text=True))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("".join(f"{name}=={v}\n" for name, v in p.pins.items()))
    try:
        print(f"labkit: installing {', '.join(p.install)} (keeping {', '.join(f'{k} {v}' for k, v in p.pins.items())})")
        out = run(pip_command(p, f.name))
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        tail = "\n".join((out.stderr or out.stdout or "").strip().splitlines()[-8:])
        raise BootstrapError(
            f"could not install {', '.join(p.install)}; nothing was installed (pip resolves and downloads "
            f"before it installs). Is the runtime online? On Kaggle turn on Settings > Internet. pip said:\n{tail}"
        )
    return p
