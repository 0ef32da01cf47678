"""The host CPU's last-level cache, read from Linux sysfs: what a bandwidth probe's buffer must outgrow (Lab 00)."""

from __future__ import annotations

import re
from pathlib import Path

SYSFS_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")  # one indexN/ folder per cache cpu0 sees
_UNIT = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}  # sysfs writes sizes as "48K", "2048K", "480M"


def last_level_cache_bytes(root: Path | str = SYSFS_CACHES) -> int | None:
    """(Lab 00) Bytes of cpu0's highest-level data or unified cache, None where sysfs does not say (macOS, Windows).

    A virtual machine reports what its hypervisor passes through, often the whole host socket's L3,
    shared with every other guest: a ceiling on what this machine can keep in cache, not a promise.
    """
    found: list[tuple[int, int]] = []  # (level, bytes)
    for d in sorted(Path(root).glob("index*")):
        try:
            level, kind = int((d / "level").read_text()), (d / "type").read_text().strip()
            m = re.fullmatch(r"(\d+)\s*([KMG]?)", (d / "size").read_text().strip())
        except (OSError, ValueError):  # a folder without the three files: not a cache description
            continue
        if kind != "Instruction" and m:  # the instruction cache never holds the probe's data
            found.append((level, int(m.group(1)) * _UNIT[m.group(2)]))
    return max(found)[1] if found else None
