"""`labkit run`: execute labs headless with papermill and write the run report (Lab 00).

Each lab runs in its own process (papermill + a fresh kernel), under a per-lab wall-clock
timeout, with ``$LABKIT_METRICS_FILE`` pointing at a file where ``labkit.record`` writes.
Afterwards the executed notebook is scanned for the failing cell, and everything goes
into ``report.json`` and ``report.html`` in the output directory.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from labkit.runtime import versions
from labkit.course.report import METRICS_ENV, read_metrics

PROFILES = ("auto", "smoke", "full")
DEFAULT_TIMEOUT_S = 1800  # per lab; the smoke profile of every lab takes a few minutes at most
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class LabNotFound(LookupError):
    """Raised when a lab name matches no notebook in labs/ (Lab 00)."""


@dataclass
class LabResult:
    """One lab's outcome in the run report (Lab 00)."""

    name: str
    status: str  # "ok" | "failed" | "timeout"
    seconds: float
    metrics: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None  # {"cell": index, "source", "ename", "evalue", "traceback"}
    notebook: str = ""  # executed notebook, relative to the report


def labs_dir() -> Path:
    """The course's labs/ folder: next to the labkit package, else ./labs (Lab 00)."""
    here = Path(__file__).resolve().parents[2] / "labs"
    if here.is_dir():
        return here
    cwd = Path.cwd() / "labs"
    if cwd.is_dir():
        return cwd
    raise FileNotFoundError(
        f"no labs/ folder next to labkit ({here}) or in the current directory; run labkit "
        "from a clone of the course repository or pass --labs DIR."
    )


def available_labs(directory: Path | None = None) -> list[Path]:
    """Every lab notebook ``NN_topic.ipynb``, in course order (Lab 00)."""
    d = directory or labs_dir()
    return sorted(p for p in d.glob("[0-9][0-9]_*.ipynb") if p.is_file())


def resolve_labs(names: list[str], directory: Path | None = None) -> list[Path]:
    """Map names like "00", "0", "00_know_your_accelerator" or "mfu" to notebooks (Lab 00)."""
    labs = available_labs(directory)
    if not names:
        return labs
    chosen: list[Path] = []
    for name in names:
        key = Path(name).stem.lower()
        hits = [
            p
            for p in labs
            if key in (p.stem.lower(), p.stem[:2], p.stem.split("_", 1)[1].lower())
            or (key.isdigit() and int(key) == int(p.stem[:2]))
        ]
        if len(hits) != 1:
            listing = ", ".join(p.stem for p in labs) or "(none)"
            raise LabNotFound(f"unknown lab {name!r}; available labs: {listing}")
        chosen.append(hits[0])
    return chosen


def _first_error(nb: dict[str, Any]) -> dict[str, Any] | None:
    """The first cell whose output is an error: its code-cell number, source and traceback (Lab 00)."""
    code_index = 0
    for cell in nb.get("cells", []):
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.get("cell_type") != "code" or "injected-parameters" in tags:
            continue  # count code cells as the learner sees them in the stored notebook
        code_index += 1
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                src = cell.get("source", "")
                return {
                    "cell": code_index,
                    "source": "".join(src) if isinstance(src, list) else src,
                    "ename": out.get("ename", ""),
                    "evalue": out.get("evalue", ""),
                    "traceback": _ANSI.sub("", "\n".join(out.get("traceback", []))),
                }
    return None


def run_lab(
    path: Path, out_dir: Path, profile: str = "auto", timeout_s: float = DEFAULT_TIMEOUT_S
) -> LabResult:
    """Execute one lab in a fresh process and kernel; never raises for a failing lab (Lab 00)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    executed = out_dir / path.name
    metrics_file = out_dir / f"{path.stem}.metrics.json"
    metrics_file.unlink(missing_ok=True)
    env = dict(os.environ, **{METRICS_ENV: str(metrics_file.resolve())})
    cmd = [
        sys.executable, "-m", "papermill", str(path), str(executed),
        "-p", "PROFILE", profile, "--cwd", str(path.parent), "--no-progress-bar",
    ]  # fmt: skip
    t0 = time.perf_counter()
    # A new session lets a timeout kill papermill *and* its kernel together.
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=timeout_s)
        status = "ok" if proc.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        status = "timeout"
    seconds = time.perf_counter() - t0
    error = None
    if status != "ok":
        nb = json.loads(executed.read_text()) if executed.exists() else {}
        error = _first_error(nb) or {}
        if status == "timeout":
            error.setdefault("ename", "Timeout")
            error.setdefault("evalue", f"lab did not finish within {timeout_s:.0f} s")
        error["log_tail"] = _ANSI.sub("", log.decode(errors="replace"))[-3000:]
    return LabResult(path.stem, status, round(seconds, 2), read_metrics(metrics_file), error, executed.name)


def detect_runtime() -> dict[str, Any]:
    """Runtime of this machine, detected in a child process (Lab 00).

    A child so the runner itself never initialises JAX on a GPU (which would reserve memory
    the labs need) and never freezes its CPU device count.
    """
    code = (
        "import json, labkit.runtime.device as d; d.simulate_devices(d.requested_cpu_devices()); "
        "print(json.dumps(d.detect().as_dict()))"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, json.JSONDecodeError, IndexError) as e:
        return {"platform": "unknown", "chip": "unknown", "error": f"runtime detection failed: {e}"}


def run(
    names: list[str] | None = None,
    profile: str = "auto",
    out_dir: str | Path = "build/run",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    directory: Path | None = None,
) -> dict[str, Any]:
    """Run labs, write ``report.json`` and ``report.html`` in ``out_dir``; return the report (Lab 00)."""
    from labkit.measure.bench import progress

    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    labs = resolve_labs(list(names or []), directory)
    if not labs:
        raise LabNotFound(f"no lab notebooks found in {directory or labs_dir()}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runtime = detect_runtime()
    report: dict[str, Any] = {
        "runtime": runtime,
        "device": runtime.get("chip", "unknown"),
        "profile": profile,
        "versions": versions.collect(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "out_dir": str(out.resolve()),  # executed notebooks live here, named as in "notebook"
        "labs": [],
    }
    bar = progress(labs, desc="labs", total=len(labs))
    for lab in bar:
        if hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(lab.stem)
        result = run_lab(lab, out, profile, timeout_s)
        report["labs"].append(asdict(result))
        print(f"{result.status:>7}  {result.seconds:7.1f} s  {result.name}", flush=True)
        _write(report, out)  # after every lab: a crash later still leaves a report
    return report


def _write(report: dict[str, Any], out: Path) -> None:
    from labkit.course.report_html import write_html

    (out / "report.json").write_text(json.dumps(report, indent=2))
    write_html(report, out / "report.html", out)
