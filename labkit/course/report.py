"""`record(key, value)`: a lab's key numbers, collected into the run report (Lab 00).

Inside a lab, ``labkit.record("matmul_tflops_measured", 312.4)`` keeps the value in memory
and, when the lab runs under ``labkit run``, also writes it to the JSON file named by
``$LABKIT_METRICS_FILE`` (the runner sets it per lab and reads it back afterwards), so the
numbers reach ``report.json`` / ``report.html`` without scraping notebook output.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path
from typing import Any

METRICS_ENV = "LABKIT_METRICS_FILE"
_recorded: dict[str, Any] = {}


def _jsonable(key: str, value: Any) -> Any:
    # numpy / jax / torch scalars -> Python numbers; anything else must already be JSON.
    if hasattr(value, "item") and getattr(value, "size", getattr(value, "numel", lambda: 1)) in (1, None):
        try:
            value = value.item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"record({key!r}, {value}): the value is not finite; a lab must not report {value}.")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"record({key!r}, ...): value of type {type(value).__name__} is not JSON-serialisable "
            f"({e}); record numbers, strings, bools, None, or lists/dicts of them."
        ) from None
    return value


def record(key: str, value: Any) -> None:
    """Record one of the lab's key numbers for the run report (Lab 00)."""
    # Returns None on purpose: a record() that ends a cell would otherwise echo its value.
    if not isinstance(key, str) or not key.isidentifier():
        raise ValueError(f"record key must be an identifier-like string such as 'mfu_jax', got {key!r}.")
    value = _jsonable(key, value)
    _recorded[key] = value
    path = os.environ.get(METRICS_ENV)
    if path:
        p = Path(path)
        data = json.loads(p.read_text()) if p.exists() and p.stat().st_size else {}
        data[key] = value
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(p)  # atomic: the runner never reads a half-written file


def record_exercise(name: str, status: str) -> None:
    """Add one exercise check's latest outcome to the lab's ``exercises`` record: {check: status} (Lab 00)."""
    tally = dict(_recorded.get("exercises") or {})
    tally[name] = status  # a check run again (a learner's second try) replaces its earlier outcome
    record("exercises", tally)


def exercise_tally(metrics: dict[str, Any]) -> str:
    """'  exercises: 2 passed, 1 not done' from a lab's metrics; '' when it ran no exercise check (Lab 00)."""
    tally = metrics.get("exercises")
    if not isinstance(tally, dict) or not tally:
        return ""
    counts = Counter(tally.values())
    return "  exercises: " + ", ".join(f"{counts[s]} {s}" for s in ("passed", "wrong", "not done") if counts[s])


def stopped_note(report: dict[str, Any], none: str = "") -> str | None:
    """'SIGINT during 03_gspmd_sharding; not run: 04, 05' from a run report; None for a run that ended (Lab 00).

    ``none``: what to say when no lab was left (else the "not run" part is left out).
    """
    stop = report.get("stopped")
    if not isinstance(stop, dict):
        return None
    not_run = ", ".join(str(n) for n in stop.get("not_run") or []) or none
    return (f"{stop.get('signal', 'a signal')}" + (f" during {stop['lab']}" if stop.get("lab") else " between labs")
            + (f"; not run: {not_run}" if not_run else ""))


def recorded() -> dict[str, Any]:
    """Everything recorded so far in this process (Lab 00)."""
    return dict(_recorded)


def read_metrics(path: str | Path) -> dict[str, Any]:
    """The metrics a lab wrote to ``path``; empty if it recorded nothing (Lab 00)."""
    p = Path(path)
    if not p.exists() or not p.stat().st_size:
        return {}
    return json.loads(p.read_text())
