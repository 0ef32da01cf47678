"""labkit.measure.committed (Labs 04 and 06): a lab's entry in a committed run report, with its run label."""

from __future__ import annotations

import json

from labkit.measure import committed

REPORT = {"runtime": {"memory_bytes": 85e9},
          "labs": [{"name": "04_mixed_precision", "status": "ok", "commit": "abc", "metrics": {"x": 1.0}},
                   {"name": "06_cost", "status": "failed", "commit": "def"}],
          "history": [{"run": "run A 2026-11-24", "commit": "old", "name": "04_mixed_precision", "status": "ok"},
                      {"run": "run B 2026-11-25", "commit": "abc", "name": "04_mixed_precision", "status": "failed"},
                      {"run": "run C 2026-11-26", "commit": "abc", "name": "04_mixed_precision", "status": "ok"}]}


def test_lab_run_takes_the_entry_and_the_last_run_of_its_commit_and_status() -> None:
    run = committed.lab_run(REPORT, "04_mixed_precision")
    assert run == {"name": "04_mixed_precision", "run": "run C 2026-11-26", "commit": "abc", "status": "ok",
                   "metrics": {"x": 1.0}, "runtime": {"memory_bytes": 85e9}}
    assert committed.lab_run(REPORT, "04") == run  # by number too


def test_lab_run_without_an_entry_or_a_history() -> None:
    assert committed.lab_run(REPORT, "05") == {} and committed.lab_run({}, "04") == {}
    run = committed.lab_run(REPORT, "06")
    assert run["run"] == "run not in the report's history" and run["metrics"] == {}


def test_root_holds_the_committed_reports() -> None:
    path = committed.ROOT / "benchmarks" / "nvidia-h100-80gb-hbm3" / "report.json"
    assert path.exists() and "labs" in json.loads(path.read_text())
