"""Lab 04's committed H100 reference run, read from the repository's benchmarks/ (Lab 04).

A figure measured on a GPU the learner may not have is still a measurement: the lab loads it from the
committed files and prints it with the commit and date it came from, instead of typing it into text
that goes stale. Two files under ``benchmarks/nvidia-h100-80gb-hbm3/``:

- ``report.json``: ``labkit run --profile full``'s report; Lab 04's latest entry gives the commit and the
  metrics (final losses per framework and precision, fp8 speed-ups); its ``history`` dates the run.
- ``bf16_loss.json``: ``benchmarks/diag_bf16_loss.py``'s per-step training losses of JAX runs (fp32, bf16
  with cuDNN's and with XLA's attention, fp16), its date and each run's attention kernel.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from labkit.measure.committed import ROOT, lab_run
H100_DIR = "benchmarks/nvidia-h100-80gb-hbm3"
LAB = "04_mixed_precision"


@dataclass(frozen=True)
class ReferenceRun:
    """(Lab 04) The committed H100 run's Lab 04 figures and where they came from."""

    device: str                               # e.g. "NVIDIA H100 80GB HBM3"
    commit: str                               # the commit Lab 04 ran at
    date: str | None                          # YYYY-MM-DD from the report's history; None if not recorded
    final_loss: dict[str, dict[str, float]]   # {framework: {precision: mean loss of the last 5 steps}}, nats/token
    fp8_speedup: float | None                 # x over bf16, amax + cast included; None: not recorded
    fp8_gemm_speedup: float | None            # x over bf16, the fp8 GEMM alone; None: not recorded in that run
    diag_date: str                            # bf16_loss.json's date
    diag_losses: dict[str, list[float]]       # bf16_loss.json: per-step training losses by run name
    diag_attention: dict[str, str]            # bf16_loss.json: the attention kernel of each run ("cudnn", "xla")


def _read(path: Path) -> dict:
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: the committed H100 runs come with the course's repository "
                                "(git clone it; a pip-installed labkit carries no benchmarks/)")
    return json.loads(path.read_text())


def load(root: str | Path = ROOT) -> ReferenceRun:
    """(Lab 04) Lab 04's figures from the committed H100 report.json and bf16_loss.json under ``root``."""
    base = Path(root) / H100_DIR
    report, diag = _read(base / "report.json"), _read(base / "bf16_loss.json")
    entry = lab_run(report, LAB)
    if not entry:
        raise ValueError(f"{base / 'report.json'} has no {LAB} entry: run `labkit run 04 --profile full` on the H100")
    m, dates = entry["metrics"], re.findall(r"\d{4}-\d\d-\d\d", str(entry["run"]))
    return ReferenceRun(device=report["device"], commit=entry["commit"], date=dates[-1] if dates else None,
                        final_loss=m["final_loss_per_precision"], fp8_speedup=m.get("fp8_speedup_vs_bf16"),
                        fp8_gemm_speedup=m.get("fp8_gemm_speedup_vs_bf16"), diag_date=diag["date"],
                        diag_losses={k: list(r["losses"]) for k, r in diag["runs"].items()},
                        diag_attention={k: r["attention"] for k, r in diag["runs"].items()})


def window_means(losses: Sequence[float], last: int, width: int = 20) -> list[float]:
    """(Lab 04) Means of consecutive ``width``-step windows over the last ``last`` losses: is a curve still falling?"""
    if not (isinstance(last, int) and isinstance(width, int) and 0 < width <= last <= len(losses)
            and last % width == 0):
        raise ValueError(f"need 0 < width <= last <= len(losses) = {len(losses)} with width dividing last; got "
                         f"last={last!r}, width={width!r} (e.g. last=80, width=20)")
    tail = np.asarray(losses[-last:], dtype=np.float64)
    return [float(w.mean()) for w in tail.reshape(-1, width)]
