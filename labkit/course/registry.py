"""The registry behind `labkit lower`: each lab's compiled function, under a name (Lab 00).

:mod:`labkit.course.lowerables` fills it with the course's functions; :mod:`labkit.course.lowering`
lowers what it holds. Kept apart so the two never import each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

PLATFORMS = ("cpu", "cuda", "tpu", "rocm")

# A factory returns (a jax.jit-ed function, its example arguments as ShapeDtypeStructs).
Factory = Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]


@dataclass(frozen=True)
class Lowerable:
    """One registered function: the lab that teaches it and how to build it (Lab 00)."""

    name: str
    lab: str
    make: Factory
    platforms: tuple[str, ...] = ("cpu", "cuda", "tpu")  # where it is meant to run (a TPU-only kernel says so)


REGISTRY: dict[str, Lowerable] = {}


def register(
    name: str, lab: str, platforms: tuple[str, ...] = ("cpu", "cuda", "tpu"), registry: dict[str, Lowerable] | None = None
) -> Callable[[Factory], Factory]:
    """Decorator: add a factory to the lowering check under ``name`` (Lab 00)."""
    reg = REGISTRY if registry is None else registry

    def deco(make: Factory) -> Factory:
        if name in reg:
            raise ValueError(f"lowering check {name!r} is registered twice")
        reg[name] = Lowerable(name, lab, make, platforms)
        return make

    return deco
