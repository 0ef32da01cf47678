"""labkit.precision.reference_run: Lab 04 prints the committed H100 figures, read from benchmarks/ (Lab 04)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from labkit.precision import reference_run as rr

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / rr.H100_DIR


def test_load_reads_the_latest_lab04_entry_and_the_diagnosis_run() -> None:
    report, diag = json.loads((H100 / "report.json").read_text()), json.loads((H100 / "bf16_loss.json").read_text())
    entry = [e for e in report["labs"] if e["name"] == rr.LAB][-1]
    ref = rr.load()
    assert ref.commit == entry["commit"] and ref.device == report["device"]
    assert ref.final_loss == entry["metrics"]["final_loss_per_precision"]
    assert ref.fp8_speedup == entry["metrics"].get("fp8_speedup_vs_bf16")
    assert ref.date is not None and any(ref.date in str(h["run"]) and h["commit"] == ref.commit
                                        for h in report["history"])
    assert ref.diag_date == diag["date"] and set(ref.diag_losses) == set(diag["runs"])
    assert ref.diag_losses["bf16"] == diag["runs"]["bf16"]["losses"] and ref.diag_attention["bf16"] == "cudnn"


def test_window_means_are_plain_means_of_the_last_windows() -> None:
    losses = [9.0] * 5 + [4.0, 2.0, 3.0, 1.0]
    assert rr.window_means(losses, 4, 2) == [3.0, 2.0]
    assert rr.window_means(losses, 4, 4) == [2.5]


def test_bad_input(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="git clone it"):
        rr.load(tmp_path)
    base = tmp_path / rr.H100_DIR
    base.mkdir(parents=True)
    (base / "report.json").write_text(json.dumps({"device": "x", "labs": [{"name": "02_mfu"}]}))
    (base / "bf16_loss.json").write_text(json.dumps({"date": "2026-01-01", "runs": {}}))
    with pytest.raises(ValueError, match="has no 04_mixed_precision entry"):
        rr.load(tmp_path)
    for last, width in ((5, 2), (10, 2), (0, 0), (4, 8)):
        with pytest.raises(ValueError, match="width dividing last"):
            rr.window_means([1.0] * 8, last, width)
