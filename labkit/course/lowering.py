"""`labkit lower`: lower each lab's compiled functions for TPU and CUDA on a CPU-only machine.

``jax.export`` runs the whole JAX → StableHLO lowering for a target platform without the
hardware (Pallas kernels included: their TPU/GPU lowering runs too). So CI without
accelerators still catches "works on my CPU, breaks on the TPU" — an unaligned Pallas
block, a primitive with no TPU lowering — before a learner on Colab does.

Each lab's core functions are registered in :mod:`labkit.course.lowerables` with example shapes (small: lowering cost
grows with program size, not with data).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from labkit.course.registry import PLATFORMS, REGISTRY, Lowerable, register

@dataclass(frozen=True)
class LowerResult:
    """Outcome of lowering one function for one platform (Lab 00)."""

    name: str
    lab: str
    platform: str
    ok: bool
    error: str = ""
    stablehlo_bytes: int = 0  # size of the lowered module text: a rough program-size figure


def parse_platforms(text: str) -> tuple[str, ...]:
    """"tpu,cuda" -> ("tpu", "cuda"), refusing unknown names (Lab 00)."""
    plats = tuple(p.strip().lower() for p in text.split(",") if p.strip())
    bad = [p for p in plats if p not in PLATFORMS]
    if not plats or bad:
        raise ValueError(f"unknown platform(s) {bad or text!r}; choose from {', '.join(PLATFORMS)}")
    return plats


def lower_one(entry: Lowerable, platform: str) -> LowerResult:
    """Lower ``entry`` for ``platform`` with jax.export; never raises for a lowering error (Lab 00)."""
    from jax import export

    try:
        fn, args = entry.make()
        exported = export.export(fn, platforms=(platform,))(*args)
        return LowerResult(entry.name, entry.lab, platform, True, stablehlo_bytes=len(exported.mlir_module()))
    except Exception as e:  # noqa: BLE001 - any lowering failure is the finding we report
        msg = f"{type(e).__name__}: {e}".splitlines()[0][:500]
        return LowerResult(entry.name, entry.lab, platform, False, error=msg)


def lower_all(
    platforms: Sequence[str] = ("tpu", "cuda"),
    names: Sequence[str] | None = None,
    registry: dict[str, Lowerable] | None = None,
) -> list[LowerResult]:
    """Lower every registered function (or ``names``) for every platform (Lab 00)."""
    if registry is None:
        _register_course()
    reg = REGISTRY if registry is None else registry
    unknown = [n for n in names or [] if n not in reg]
    if unknown:
        raise ValueError(f"unknown lowering check(s) {unknown}; registered: {', '.join(sorted(reg))}")
    chosen = [reg[n] for n in (names or sorted(reg))]
    return [lower_one(e, p) for e in chosen for p in platforms if p in e.platforms]


def _register_course() -> None:
    # Import the modules whose functions register themselves; kept here so that
    # `import labkit.course.lowering` stays cheap and never initialises JAX.
    import labkit.course.lowerables  # noqa: F401


__all__ = ["PLATFORMS", "REGISTRY", "Lowerable", "LowerResult", "register", "parse_platforms",
           "lower_one", "lower_all"]
