"""Bootstrap on Colab/Kaggle: add the packages the labs need, never touch the runtime's own.

Colab and Kaggle images ship torch, jax, jaxlib, numpy and their CUDA/TPU libraries, built for
that runtime; reinstalling or upgrading any of them breaks the runtime. So the bootstrap:

- stops, with the remedy, when one of them is missing or outside the supported range (it never
  installs them: a pip-installed jax would not match the runtime's CUDA/TPU stack);
- installs only the *companions* (flax, optax, ...) that are missing or older than the course
  needs, in one pip call constrained to every runtime package present (pip then picks companion
  versions that fit the runtime's jax and numpy, or fails -- and a failed call installs nothing);
- lists every package it changed, from pip's own installation report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Sequence

from labkit.runtime import versions
from labkit.runtime.doctor import SUPPORTED

# Companions the labs import that a runtime may lack, with the course's minimum version (pip
# names; the lower bounds of pyproject.toml, checked by a test). jupyterlab/nbval are for maintainers.
COMPANIONS = {"flax": "0.12.2", "optax": "0.2.4", "ml_dtypes": "0.5", "matplotlib": "3.8", "papermill": "2.6",
              "nbformat": "5.9", "tqdm": "4.66", "safetensors": "0.4", "cryptography": "42"}
NEEDED = tuple(COMPANIONS)
# The runtime's own stack: pinned wherever present, never installed, upgraded or downgraded.
PROTECTED = ("torch", "jax", "jaxlib", "numpy", "torch_xla", "libtpu", "jax_cuda12_plugin", "jax_cuda12_pjrt",
             "jax_cuda13_plugin", "jax_cuda13_pjrt")
REQUIRED = ("torch", "jax", "jaxlib", "numpy")  # the labs cannot run without these: missing = stop
# Supported ranges of the protected packages, from the doctor's table (jaxlib follows jax).
PROTECTED_RANGES = {"jax": SUPPORTED["jax"], "jaxlib": SUPPORTED["jax"], "torch": SUPPORTED["torch"]}
WHERE = {"colab": "Runtime > Change runtime type", "kaggle": "Settings > Environment (Always use latest environment)"}


class BootstrapError(RuntimeError):
    """The bootstrap stopped: nothing was installed (Lab 00)."""


@dataclass
class InstallPlan:
    """What the bootstrap will do on this runtime (Lab 00)."""

    install: list[str] = field(default_factory=list)  # pip requirements, e.g. "flax>=0.11"
    pins: dict[str, str] = field(default_factory=dict)  # protected package -> installed version (kept)
    stops: list[str] = field(default_factory=list)  # problems we will not fix by reinstalling: the cell stops
    notes: list[str] = field(default_factory=list)  # companions found too old (upgraded within the pins)

    @property
    def nothing_to_do(self) -> bool:
        """True when every needed package is there already (Lab 00)."""
        return not self.install


def plan(found: dict[str, str | None], needed: Sequence[str] = NEEDED, host: str = "colab") -> InstallPlan:
    """Decide what to install from a name -> version map; pure, so it is testable (Lab 00)."""
    p = InstallPlan()
    get = lambda n: found.get(n) or found.get(n.replace("_", "-")) or found.get(n.replace("-", "_"))  # noqa: E731
    where = WHERE.get(host, "your environment")
    for name in needed:
        v, lo = get(name), COMPANIONS.get(name)
        if not v:
            p.install.append(f"{name}>={lo}" if lo else name)
        elif lo and versions.release(v) < versions.release(lo):
            p.install.append(f"{name}>={lo}")
            p.notes.append(f"{name} {v} is older than the course's {lo}: upgrading it (only if it fits the "
                           f"runtime's pinned packages)")
    p.pins = {n: v for n in PROTECTED if (v := get(n))}
    for name in REQUIRED:
        if not get(name):
            p.stops.append(f"{name} is not installed on this runtime, and the course never installs it (it must "
                           f"match the runtime's CUDA/TPU stack): pick a runtime that ships it via {where}.")
    for name, (lo, hi) in PROTECTED_RANGES.items():
        v = get(name)
        if v and not versions.in_range(v, lo, hi):
            need = f">= {lo}" + (f", < {hi}" if hi else "")
            p.stops.append(f"{name} {v} is outside the supported range {need}. Not reinstalling it (that would "
                           f"break this runtime's accelerator stack). Remedy: choose a newer image via {where}, "
                           f"or install the runtime's own build yourself, e.g. pip install -U '{name}>={lo}' "
                           f"(for jax on TPU: 'jax[tpu]', on GPU: 'jax[cuda12]'), then restart the kernel.")
    return p


def pip_command(p: InstallPlan, constraints_file: str, report_file: str) -> list[str]:
    """The single pip call that installs ``p.install`` without moving the pinned packages (Lab 00)."""
    return [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "-c", constraints_file, "--report", report_file, *p.install]


def changes(report: dict) -> list[tuple[str, str]]:
    """(name, version) of every package pip installed, from its ``--report`` JSON (Lab 00)."""
    return [(i["metadata"]["name"], i["metadata"]["version"]) for i in report.get("install", [])]


def ensure(
    needed: Sequence[str] = NEEDED,
    host: str = "colab",
    found: dict[str, str | None] | None = None,
    run: Callable[[list[str]], subprocess.CompletedProcess] | None = None,
) -> InstallPlan:
    """Install missing companions in one constrained pip call; stop on a bad runtime; list changes (Lab 00)."""
    found = found if found is not None else {n: versions.version(n) for n in (*needed, *PROTECTED)}
    p = plan(found, needed, host)
    if p.stops:
        raise BootstrapError("the course cannot run on this runtime as it is; nothing was installed:\n- "
                             + "\n- ".join(p.stops))
    for msg in p.notes:
        print(f"labkit: {msg}")
    if p.nothing_to_do:
        print("labkit: every package the labs need is already installed; nothing to do.")
        return p
    run = run or (lambda cmd: subprocess.run(cmd, capture_output=True, text=True))
    with tempfile.TemporaryDirectory() as tmp:
        pins, report = os.path.join(tmp, "pins.txt"), os.path.join(tmp, "report.json")
        with open(pins, "w") as f:
            f.write("".join(f"{name}=={v}\n" for name, v in p.pins.items()))
        print(f"labkit: installing {', '.join(p.install)} (keeping {', '.join(f'{k} {v}' for k, v in p.pins.items())})")
        out = run(pip_command(p, pins, report))
        done = json.load(open(report)) if out.returncode == 0 and os.path.exists(report) else {}
    if out.returncode != 0:
        tail = "\n".join((out.stderr or out.stdout or "").strip().splitlines()[-8:])
        pinned = ", ".join(f"{k}=={v}" for k, v in p.pins.items())
        raise BootstrapError(
            f"could not install {', '.join(p.install)} alongside this runtime's {pinned}; nothing was installed "
            f"(pip resolves and downloads before it installs). If pip says no version satisfies a requirement, "
            f"the course's minimum companion does not support this runtime's jax/numpy: the pair needed is "
            f"{', '.join(p.install)} with jax >= {SUPPORTED['jax'][0]}; choose a newer runtime image. If pip could "
            f"not connect, the runtime is offline (on Kaggle: Settings > Internet). pip said:\n{tail}")
    changed = changes(done)
    moved = [(n, v) for n, v in changed if n.lower().replace("-", "_") in PROTECTED]
    print("labkit: installed " + (", ".join(f"{n} {v}" for n, v in changed) or "nothing new"))
    if moved:  # pip's constraints make this impossible; say so loudly if a pip ever does it
        raise BootstrapError(f"pip changed the runtime's own {moved} despite the pins: restart the runtime")
    return p
