"""Which size of each lab to run: ``PROFILE = "auto"`` becomes "smoke" or "full" (Lab 00).

"smoke" is sized for a laptop CPU, "full" for a big accelerator: the full profiles were sized and
run on an 80 GB H100 (Lab 02's full step alone holds GPT-2-small at batch 16 x 1024, with torch in
the same process). So "auto" picks "full" only on a chip with at least ``FULL_MIN_MEMORY_GB`` of
memory, and "smoke" elsewhere -- a 16 GB T4 or a v5e chip then fits each lab with room to spare --
and says why. ``PROFILE = "full"`` overrides it. The choice and its reason are recorded, so the run
report says which sizes produced its numbers; so are the lab's memory peaks (:mod:`labkit.course.peaks`).
"""

from __future__ import annotations

from typing import Any

from labkit.course import peaks
from labkit.course.report import record
from labkit.runtime.bootstrap import runtime

FULL_MIN_MEMORY_GB = 40  # GB per device: an A100 40GB and up run "full"; T4 (16), L4 (24), v5e (16) run "smoke"


def profile_for(rt: Any) -> tuple[str, str]:
    """("smoke" | "full", why) for a Runtime: its platform and memory per device (Lab 00)."""
    if rt.platform == "cpu":
        return "smoke", "a CPU: sizes for a laptop"
    where = rt.chip + (f" (emulated on {rt.emulated_on})" if getattr(rt, "emulated_on", None) else "")
    if rt.memory_bytes is None:
        return "full", f"{where}: memory unknown, so the accelerator sizes"
    gb = rt.memory_bytes / 1e9
    if gb >= FULL_MIN_MEMORY_GB:
        return "full", f"{where}: {gb:.0f} GB >= {FULL_MIN_MEMORY_GB} GB, the accelerator sizes"
    return "smoke", (f"{where}: {gb:.0f} GB < the {FULL_MIN_MEMORY_GB} GB the full sizes were run with; "
                     f"set PROFILE = \"full\" to try them anyway")


def resolve_profile(profile: str = "auto") -> str:
    """"auto" -> the profile this chip fits (:func:`profile_for`); records the choice and why (Lab 00)."""
    if profile not in ("auto", "smoke", "full"):
        raise ValueError(f"PROFILE must be 'auto', 'smoke' or 'full', got {profile!r}.")
    peaks.watch()
    if profile == "auto":
        profile, why = profile_for(runtime())
        if runtime().platform != "cpu":
            print(f"profile {profile}: {why}")
    else:
        why = "chosen in the notebook"
    record("profile", profile)
    record("profile_reason", why)
    return profile
