"""Which size of each lab to run: ``PROFILE = "auto"`` becomes "smoke" or "full" (Lab 00).

"smoke" is sized for a laptop CPU, "full" for an accelerator. The choice is recorded, so the
run report says which sizes produced its numbers.
"""

from __future__ import annotations

from labkit.course.report import record
from labkit.runtime.bootstrap import runtime


def resolve_profile(profile: str = "auto") -> str:
    """"auto" -> "smoke" on CPU, "full" on GPU/TPU; records the choice (Lab 00)."""
    if profile not in ("auto", "smoke", "full"):
        raise ValueError(f"PROFILE must be 'auto', 'smoke' or 'full', got {profile!r}.")
    if profile == "auto":
        profile = "smoke" if runtime().platform == "cpu" else "full"
    record("profile", profile)
    return profile
