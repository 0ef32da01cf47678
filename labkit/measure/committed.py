"""Run reports committed under the repository's benchmarks/<device>/, read by the labs that quote them (Lab 04, 06).

A figure measured on a GPU the learner may not have is still a measurement: a lab loads it from the
committed ``report.json`` (``labkit run``'s report, merged per lab) and prints it with the commit and the
run it came from, instead of typing it into text that goes stale. Each lab entry names its commit; the
report's ``history`` names each run (its date, and what shared the device).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

ROOT = Path(__file__).resolve().parents[2]  # the course repository: benchmarks/ sits beside labkit/


def lab_run(report: Mapping[str, Any], lab: str) -> dict[str, Any]:
    """(Lab 04, Lab 06) A lab's entry in a parsed report: name, run label, commit, status, metrics, runtime; or {}.

    ``lab`` is the lab's full name ("04_mixed_precision") or its number ("04"). The run label is the
    last history entry of the same lab, commit and status ("run not in the report's history" if none).
    """
    entry = next((x for x in report.get("labs", []) if x["name"] == lab or x["name"][:2] == lab), None)
    if entry is None:
        return {}
    runs = [h["run"] for h in report.get("history", []) if h["name"] == entry["name"]
            and h["commit"] == entry.get("commit") and h.get("status") == entry.get("status")]
    return {"name": entry["name"], "run": runs[-1] if runs else "run not in the report's history",
            "commit": entry.get("commit"), "status": entry.get("status"), "metrics": entry.get("metrics") or {},
            "runtime": report.get("runtime", {})}
