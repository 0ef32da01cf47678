"""Versions of the course's stack, read from package metadata without importing (Lab 00)."""

from __future__ import annotations

import platform
import re
from importlib import metadata

# The packages `labkit doctor` and the run report list, in the order a person reads them.
PACKAGES = (
    "jax", "jaxlib", "flax", "optax", "torch", "torch_xla", "numpy", "ml_dtypes",
    "matplotlib", "papermill", "nbval", "jupyterlab", "safetensors",
)  # fmt: skip


def version(package: str) -> str | None:
    """Installed version of ``package``, or None when it is absent (Lab 00)."""
    for name in (package, package.replace("_", "-")):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def collect() -> dict[str, str | None]:
    """Python and every course package's version (None = not installed) (Lab 00)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    found.update({p: version(p) for p in PACKAGES})
    return found


def major_minor(v: str | None) -> tuple[int, int] | None:
    """(major, minor) of a version string like "2.9.0+cu126", None for None (Lab 00)."""
    if not v:
        return None
    parts = v.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None



def release(v: str) -> tuple[int, ...]:
    """Numeric release of a version string: "2.9.0+cu126" -> (2, 9, 0), "0.8.5rc1" -> (0, 8, 5) (Lab 00)."""
    out = []
    for part in v.split("+")[0].split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group()))
        if m.group() != part:
            break
    return tuple(out)


def in_range(v: str, lo: str, hi: str | None = None) -> bool:
    """(Lab 00) Whether version v lies in [lo, hi) by full release (a bound may name a patch: flax 0.12.2)."""
    return release(v) >= release(lo) and (hi is None or release(v) < release(hi))
