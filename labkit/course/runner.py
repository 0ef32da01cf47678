"""`labkit run`: execute labs headless with papermill and write the run report (Lab 00).

Each lab runs in its own process (papermill + a fresh kernel), under a per-lab wall-clock
timeout, with ``$LABKIT_METRICS_FILE`` pointing at a file where ``labkit.record`` writes.
Papermill, the kernel (which jupyter starts in a session of its own) and everything the lab
starts are one :class:`labkit.runtime.processes.ProcessTree`: ended together after the lab,
whether it passed, failed or timed out, and checked gone. Afterwards the executed notebook is
scanned for the failing cell (or, when no cell ran, papermill's own exception), and everything
goes into ``report.json`` and ``report.html`` in the output directory.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from labkit.runtime import versions
from labkit.course import source
from labkit.course.failure import ANSI, describe_failure
from labkit.course.profile import profile_for
from labkit.course.report import METRICS_ENV, exercise_tally, read_metrics
from labkit.runtime.processes import ProcessTree

PROFILES = ("auto", "smoke", "full")
DEFAULT_TIMEOUT_S = 1800  # per lab; the smoke profile of every lab takes a few minutes at most
WATCH_S = 1.0  # how often the runner looks for new processes of a running lab


class LabNotFound(LookupError):
    """Raised when a lab name matches no notebook in labs/ (Lab 00)."""


class AmbiguousLab(LabNotFound):
    """Raised when a lab name matches more than one notebook; the message lists them (Lab 00)."""


class OutDirError(OSError):
    """An output folder that cannot be created or written to; the message names it and the fix (Lab 00)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped `labkit run`: the signal, the lab it stopped, its partial notebook (Lab 00)."""

    def __init__(self, signum: int = signal.SIGINT, lab: str | None = None, notebook: Path | None = None,
                 finished: int | None = None) -> None:
        super().__init__(signum)
        self.signum, self.lab, self.notebook, self.finished = signum, lab, notebook, finished

    def __str__(self) -> str:
        what = f"interrupted by {signal.Signals(self.signum).name}"
        if self.lab is not None:
            nb = self.notebook
            where = f"partial notebook at {nb}" if nb is not None and nb.exists() else "no notebook written yet"
            what += f" while running {self.lab} ({where})"
        if self.finished is None:  # stopped outside the labs' loop: nothing to say about a report
            return what
        kept = f"report.json lists only the {self.finished} lab(s) that finished" if self.finished else "no report written"
        return f"{what}; {kept}"


def check_timeout(timeout_s: object) -> float:
    """The per-lab timeout as a float; TypeError / ValueError naming the value otherwise (Lab 00)."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)):
        raise TypeError(f"timeout_s (--timeout) must be a number of seconds, got {timeout_s!r} "
                        f"({type(timeout_s).__name__})")
    if not math.isfinite(timeout_s) or timeout_s <= 0:
        raise ValueError(f"timeout_s (--timeout) must be a finite number of seconds > 0, got "
                         f"{timeout_s!r}; pass e.g. --timeout {DEFAULT_TIMEOUT_S} (the default), or "
                         f"a larger finite value for a slow runtime")
    return float(timeout_s)


def prepare_out_dir(out_dir: str | Path, flag: str = "--out", example: str = "build/run") -> Path:
    """Create the output folder and check it takes files; else a one-line error naming it and the fix (Lab 00).

    ValueError for an empty path, NotADirectoryError when it (or a parent) is a file, OutDirError
    when it cannot be created or written to (a read-only mount, an immutable folder, /proc).
    """
    if not str(out_dir).strip():
        raise ValueError(f"{flag} is empty ({str(out_dir)!r}): pass a folder (it is created if missing), "
                         f"e.g. {flag} {example}")
    out = Path(out_dir)
    try:
        blocker = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
        if blocker is None:
            out.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=out, prefix=".labkit-write-check-"):
                pass  # created and removed: the folder takes files
    except OSError as e:
        raise OutDirError(f"{flag} {out}: cannot write there ({e.strerror or e}); pass a folder you can "
                          f"write to, e.g. {flag} {example}") from None
    if blocker is not None:
        raise NotADirectoryError(
            f"{flag} {out}: {blocker} is a file, not a folder. Pass a folder path (it is created if "
            f"missing), e.g. {flag} {example}, or move the file {blocker} away.")
    return out


def check_not_source(out_dir: str | Path, labs: list[Path], flag: str = "--out", example: str = "build/run") -> None:
    """ValueError when ``out_dir`` is the folder ``labs`` are read from: writing there replaces them (Lab 00)."""
    out = Path(out_dir).resolve()
    if any(lab.parent.resolve() == out for lab in labs):
        raise ValueError(f"{flag} {out_dir} is the folder the lab notebooks are read from ({out}): writing there "
                         f"would replace them; pass another folder, e.g. {flag} {example}")


@dataclass
class LabResult:
    """One lab's outcome in the run report (Lab 00)."""

    name: str
    status: str  # "ok" | "failed" | "timeout"
    seconds: float
    metrics: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None  # {"cell": index, "source", "ename", "evalue", "traceback"}
    notebook: str = ""  # executed notebook, relative to the report
    # What the lab's processes left in their own TMPDIR (removed with it): a lab should clean up after
    # itself, as it must when a learner runs it in Jupyter; a killed kernel leaves its connection file.
    left_in_tmp: list[str] = field(default_factory=list)


def labs_dir() -> Path:
    """The course's labs/ folder: next to the labkit package, else ./labs (Lab 00)."""
    here = Path(__file__).resolve().parents[2] / "labs"
    if here.is_dir():
        return here
    cwd = Path.cwd() / "labs"
    if cwd.is_dir():
        return cwd
    raise FileNotFoundError(
        f"no labs/ folder next to labkit ({here}) or in the current directory ({Path.cwd()}); run labkit "
        "from a clone of the course repository, or pass --labs-dir DIR (the folder of NN_topic.ipynb notebooks)"
    )


def available_labs(directory: str | Path | None = None) -> list[Path]:
    """Every lab notebook ``NN_topic.ipynb``, in course order; OSError for a folder that is not there (Lab 00)."""
    d = Path(directory) if directory is not None else labs_dir()
    if not d.is_dir():
        what, err = ("is a file, not a folder", NotADirectoryError) if d.exists() else ("does not exist", FileNotFoundError)
        raise err(f"--labs-dir {d}: {what}; pass the folder that holds the NN_topic.ipynb lab notebooks, "
                  f"e.g. --labs-dir labs")
    return sorted(p for p in d.glob("[0-9][0-9]_*.ipynb") if p.is_file())


def no_labs_message(directory: str | Path | None = None) -> str:
    """Why a labs folder has no lab: the naming it expects, and the notebooks it found instead (Lab 00)."""
    d = Path(directory) if directory is not None else labs_dir()
    other = sorted(p.name for p in d.glob("*.ipynb"))
    return (f"no lab notebooks (NN_topic.ipynb, e.g. 02_mfu.ipynb) in {d}"
            + (f"; found {', '.join(other[:3])}{' ...' if len(other) > 3 else ''}: rename them so" if other else ""))


def resolve_labs(names: list[str], directory: str | Path | None = None) -> list[Path]:
    """Map names like "00", "0", "00_know_your_accelerator" or "mfu" to notebooks, each once, in order (Lab 00)."""
    labs = available_labs(directory)
    if not labs:  # said, never an empty success: run, student and list all come through here
        raise LabNotFound(no_labs_message(directory))
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
        if len(hits) > 1:
            raise AmbiguousLab(f"ambiguous lab name {name!r}: it matches {', '.join(p.stem for p in hits)}; "
                               f"pass the full name, e.g. {hits[0].stem}")
        if not hits:
            listing = ", ".join(p.stem for p in labs) or "(none)"
            raise LabNotFound(f"unknown lab {name!r}; available labs: {listing}")
        if hits[0] not in chosen:  # `labkit run 6 06` runs Lab 06 once
            chosen.append(hits[0])
    return chosen


def run_lab(
    path: Path, out_dir: Path, profile: str = "auto", timeout_s: float = DEFAULT_TIMEOUT_S
) -> LabResult:
    """Execute one lab in a fresh process and kernel; never raises for a failing lab (Lab 00)."""
    timeout_s = check_timeout(timeout_s)
    check_not_source(out_dir, [path])  # papermill would write over the lab it reads
    out_dir = prepare_out_dir(out_dir)
    executed = out_dir / path.name
    metrics_file = out_dir / f"{path.stem}.metrics.json"
    metrics_file.unlink(missing_ok=True)
    executed.unlink(missing_ok=True)  # a stale copy from an earlier run must not be read as this one
    tree = ProcessTree()  # papermill, its kernel (a session of its own) and all the lab starts
    env = tree.env(dict(os.environ, **{METRICS_ENV: str(metrics_file.resolve())}))
    cmd = [
        sys.executable, "-m", "papermill", str(path), str(executed),
        "-p", "PROFILE", profile, "--cwd", str(path.parent), "--no-progress-bar",
    ]  # fmt: skip
    t0 = time.perf_counter()
    status = "failed"
    with tempfile.TemporaryFile() as log_file:  # a file, not a pipe: a chatty lab cannot block
        proc = subprocess.Popen(cmd, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            tree.add(proc)
            while proc.poll() is None:
                left = timeout_s - (time.perf_counter() - t0)
                if left <= 0:
                    status = "timeout"
                    break
                tree.watch()  # remember the kernel's session while it is alive
                try:
                    proc.wait(timeout=min(WATCH_S, left))
                except subprocess.TimeoutExpired:
                    pass
            else:
                status = "ok" if proc.returncode == 0 else "failed"
        finally:
            tree.end()  # every exit path: ok, failed, timeout, an exception or Ctrl-C here
        seconds = time.perf_counter() - t0
        log_file.seek(0)
        log = ANSI.sub("", log_file.read().decode(errors="replace"))
    error = None
    if status != "ok":
        try:
            nb = json.loads(executed.read_text()) if executed.exists() else {}
        except (OSError, ValueError):  # papermill killed mid-write
            nb = {}
        error = describe_failure(nb, log, status, timeout_s)
        error["log_tail"] = log[-3000:]
    return LabResult(path.stem, status, round(seconds, 2), read_metrics(metrics_file), error, executed.name,
                     tree.left_in_tmp)


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


def resolved_profile(requested: str, labs: list[dict[str, Any]], runtime: dict[str, Any] | None = None) -> str:
    """The sizes a run used: what its labs recorded, else what "auto" picks on ``runtime``, else "auto" (Lab 00)."""
    if requested != "auto":
        return requested
    seen = sorted({str(m["profile"]) for lab in labs if isinstance(m := lab.get("metrics"), dict)
                   and m.get("profile") in ("smoke", "full")})
    if seen:
        return "+".join(seen)  # one of them in any real run: every lab resolves "auto" on the same chip
    if not runtime or runtime.get("platform") in (None, "unknown"):
        return requested
    rt = SimpleNamespace(**{k: runtime.get(k) for k in ("platform", "chip", "memory_bytes", "emulated_on")})
    return profile_for(rt)[0]


def run(
    names: list[str] | None = None,
    profile: str = "auto",
    out_dir: str | Path = "build/run",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    directory: str | Path | None = None,
) -> dict[str, Any]:
    """Run labs, write ``report.json`` and ``report.html`` in ``out_dir``; return the report (Lab 00).

    Every check comes before anything runs; then the previous report in ``out_dir`` is removed, so
    a run stopped part-way (Ctrl-C, SIGTERM: :class:`Interrupted`) never leaves one claiming success.
    """
    from labkit.measure.bench import progress

    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    timeout_s = check_timeout(timeout_s)  # before anything runs: the CLI's --timeout lands here
    labs = resolve_labs(list(names or []), directory)  # LabNotFound for a folder without labs
    check_not_source(out_dir, labs)  # papermill would write each executed copy over its lab
    out = prepare_out_dir(out_dir)
    for stale in ("report.json", "report.html"):
        (out / stale).unlink(missing_ok=True)
    finished: list[dict[str, Any]] = []
    current: Path | None = None
    bar: Any = None
    try:
        runtime = detect_runtime()
        report: dict[str, Any] = {
            "course_version": source.VERSION,  # gather refuses to merge reports of another course version
            "commit": source.commit(),  # what exactly ran: "<sha>" or "<sha>+dirty"; None outside git
            "runtime": runtime,
            "device": runtime.get("chip", "unknown"),
            "profile": resolved_profile(profile, [], runtime),  # the sizes; the labs' own record wins below
            "profile_requested": profile,
            "versions": versions.collect(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "out_dir": str(out.resolve()),  # executed notebooks live here, named as in "notebook"
            "labs": finished,
        }
        bar = progress(labs, desc="labs", total=len(labs))
        for lab in bar:
            current = lab
            if hasattr(bar, "set_postfix_str"):
                bar.set_postfix_str(lab.stem)
            result = run_lab(lab, out, profile, timeout_s)
            finished.append(asdict(result))
            current = None
            report["profile"] = resolved_profile(profile, finished, runtime)
            tally = exercise_tally(result.metrics)  # a student run's checks: "  exercises: 2 passed, 1 not done"
            print(f"{result.status:>7}  {result.seconds:7.1f} s  {result.name}{tally}", flush=True)
            _write(report, out)  # after every lab: a crash later still leaves a report
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM turned into one by the CLI: run_lab has ended the lab
        signum = e.signum if isinstance(e, Interrupted) else signal.SIGINT
        if finished:  # the labs that finished stay reported, and the report says the run was cut short
            report["stopped"] = {"signal": signal.Signals(signum).name, "lab": current.stem if current else None,
                                 "not_run": [p.stem for p in labs[len(finished) + bool(current):]]}
            _write(report, out)
        raise Interrupted(signum, current.stem if current else None, out / current.name if current else None,
                          len(finished)) from None
    finally:
        if hasattr(bar, "close"):
            bar.close()
    return report


def _write(report: dict[str, Any], out: Path) -> None:
    from labkit.course.report_html import write_html

    tmp = out / ".report.json.partial"  # then renamed: a stop mid-write never leaves a truncated report
    tmp.write_text(json.dumps(report, indent=2))
    os.replace(tmp, out / "report.json")
    write_html(report, out / "report.html", out)
