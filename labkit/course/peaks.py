"""Every lab records its peak memory: after each cell, in the run report (Lab 00).

:func:`watch` (called by ``resolve_profile``, which every lab runs) registers an IPython
``post_run_cell`` hook, so the last values recorded are the lab's peaks, whichever cell reached
them. Under ``$LABKIT_EMULATE`` it also records whether JAX's and torch's peaks together fit the
emulated chip's memory.
"""

from __future__ import annotations

from typing import Any, Callable

from labkit.course.report import record
from labkit.runtime import emulate, memory

_watching = False
GIB = 2**30


def record_peaks(peaks: Callable[[], dict[str, int | None]] = memory.peaks) -> dict[str, int | None]:
    """Record peak memory (GiB) per device now; and, when emulating, whether the sum fits (Lab 00)."""
    p = peaks()
    for where, b in p.items():
        record(f"peak_memory_gib_{where}", None if b is None else round(b / GIB, 3))
    em = emulate.requested()
    if em is not None:
        device = sum(b or 0 for k, b in p.items() if k != "host")  # bytes, both frameworks on one GPU
        record("emulated_chip", em.chip)
        record("fits_emulated_memory", device <= em.memory_bytes)
    return p


def watch(ipython: Any = None) -> bool:
    """Record peaks after every cell of this notebook; False outside IPython; idempotent (Lab 00)."""
    global _watching
    if ipython is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        ipython = get_ipython()
    if ipython is None:
        return False
    if not _watching:
        ipython.events.register("post_run_cell", lambda result: record_peaks())
        _watching = True
    return True
