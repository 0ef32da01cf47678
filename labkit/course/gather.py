"""`labkit gather`: merge many run reports into one cross-chip comparison (course).

A workshop room has 30-100 runtimes; each ``labkit run`` writes a ``report.json``. This module
finds the reports (files, or folders searched recursively for ``report*.json``), validates each
(JSON that parses, the run report's shape, this course version, not a run already gathered) and
merges the accepted ones per chip: runs, labs ok/failed, failures grouped by cell and error, and
each lab's key numbers with their spread. Nothing is merged silently: every file that is left
out is named with its reason. :mod:`labkit.course.gather_html` draws the page.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from labkit.course.report import stopped_note
from labkit.course.runner import prepare_out_dir, resolved_profile
from labkit.course.source import VERSION
from labkit.runtime import hardware

REPORT_GLOB = "report*.json"  # what `labkit run` writes (and per-run copies such as report_<commit>.json)
UNRECORDED = "unrecorded"  # a report written before the runner stamped the course version


@dataclass
class Skip:
    """A file left out of the gathering, and why (course)."""
    path: str
    reason: str


@dataclass
class Run:
    """One accepted run report: where it came from, its chip and its labs (course)."""
    path: str
    device: str  # what the runtime reported, e.g. "NVIDIA H100 80GB HBM3"
    chip: str  # the chip table's name for it, or the reported name when the table does not know it
    known: bool  # the chip table has a row for it
    platform: str
    profile: str  # the sizes the run used ("smoke", "full"); "auto" only for an old report that never said
    version: str  # course version the run recorded, or UNRECORDED
    started: str
    emulated_on: str | None
    stopped: str | None = None  # "SIGINT during 03_gspmd_sharding; not run: 04, 05" for a run cut short
    labs: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # labs left out as duplicates of an earlier run


def find_reports(paths: list[str | Path]) -> tuple[list[Path], list[Skip]]:
    """Report files named or found under the folders given, in a stable order; missing paths skipped (course)."""
    found: list[Path] = []
    missing: list[Skip] = []
    for p in map(Path, paths):
        if p.is_dir():
            here = sorted(f for f in p.rglob(REPORT_GLOB) if f.is_file())
            if not here:  # said, not silently empty: "0 skipped, see above" with nothing above helped no one
                missing.append(Skip(str(p), f"no {REPORT_GLOB} under it ({sum(1 for _ in p.rglob('*.json'))} other "
                                            ".json files); pass the report files, or the folders labkit run wrote"))
            found += here
        elif p.is_file():
            found.append(p)
        else:
            missing.append(Skip(str(p), "no such file or folder"))
    seen: set[Path] = set()
    unique = [f for f in found if not (f.resolve() in seen or seen.add(f.resolve()))]
    return unique, missing


def report_version(report: dict[str, Any]) -> str:
    """The course version a report was written by, wherever the runner put it; UNRECORDED if nowhere (course)."""
    versions = report.get("versions") if isinstance(report.get("versions"), dict) else {}
    for v in (report.get("course_version"), versions.get("labkit"), report.get("labkit_version")):
        if isinstance(v, str) and v:
            return v
    return UNRECORDED


def _invalid(report: Any) -> str | None:
    """Why a parsed JSON value is not a run report; None if it is one."""
    if not isinstance(report, dict):
        return f"not a labkit run report: the JSON is a {type(report).__name__}, not an object"
    labs = report.get("labs")
    if not isinstance(labs, list):
        return "not a labkit run report: no 'labs' list"
    if not labs:
        return "a run report with no labs (the run stopped before its first lab finished)"
    for i, lab in enumerate(labs):
        if not isinstance(lab, dict) or not isinstance(lab.get("name"), str) or "status" not in lab:
            return f"lab #{i + 1} has no 'name' or 'status': not a labkit run report"
        if not isinstance(lab.get("metrics", {}), dict):
            return f"lab {lab['name']}: 'metrics' is not an object"
        if not isinstance(lab.get("error"), (dict, type(None))):
            return f"lab {lab['name']}: 'error' is a {type(lab['error']).__name__}, not an object or null"
    return None


def load(path: str | Path) -> tuple[dict[str, Any] | None, str | None]:
    """(report, None) for a valid run report file, else (None, the reason) (course)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return None, f"unreadable: {e}"
    if not text.strip():
        return None, "empty file"
    try:
        report = json.loads(text)
    except json.JSONDecodeError as e:
        return None, f"truncated or invalid JSON ({e.msg} at line {e.lineno}, column {e.colno})"
    why = _invalid(report)
    return (None, why) if why else (report, None)


def lab_fingerprint(device: str, lab: dict[str, Any]) -> str:
    """Same chip, lab, status, seconds (to 10 ms), numbers and error = the same lab run, wherever copied (course)."""
    # "commit" and "notebook" are left out: a merged report adds them to labs copied from a run.
    err = lab.get("error") if isinstance(lab.get("error"), dict) else {}
    key = {"device": device, **{k: lab.get(k) for k in ("name", "status", "seconds", "metrics")},
           "error": [err.get(k) for k in ("cell", "ename", "evalue")]}
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def _run(path: Path, report: dict[str, Any]) -> Run:
    rt = report.get("runtime") if isinstance(report.get("runtime"), dict) else {}
    device = str(report.get("device") or rt.get("chip") or "unknown")
    spec = hardware.lookup(device)
    return Run(str(path), device, spec.name if spec else device, spec is not None,
               str(rt.get("platform", "unknown")),  # an old report's "auto": the sizes its labs recorded
               resolved_profile(str(report.get("profile", "?")), report["labs"]), report_version(report),
               str(report.get("started", "")), rt.get("emulated_on"), stopped_note(report))


def gather(paths: list[str | Path], version: str = VERSION) -> tuple[list[Run], list[Skip]]:
    """Load, validate and de-duplicate every report under ``paths``: (accepted runs, skipped files) (course)."""
    files, skipped = find_reports(paths)
    runs: list[Run] = []
    first_seen: dict[str, str] = {}  # lab fingerprint -> the report it was first gathered from
    for f in files:
        report, why = load(f)
        if report is None:
            skipped.append(Skip(str(f), why or "invalid"))
            continue
        got = report_version(report)
        if got != UNRECORDED and got != version:
            skipped.append(Skip(str(f), f"from course version {got}; this gathering is for version {version}"))
            continue
        try:  # the page reads every field: a report with one of the wrong type is skipped, not fatal to the rest
            merged([replace(_run(f, report), labs=report["labs"])], [], version)
        except (TypeError, AttributeError, KeyError, ValueError) as e:
            skipped.append(Skip(str(f), f"a field of the wrong type ({type(e).__name__}: {str(e)[:120]}): "
                                        "not a run report as labkit run writes them"))
            continue
        run, origins = _run(f, report), set()
        for lab in report["labs"]:
            fp = lab_fingerprint(run.device, lab)
            if fp in first_seen:
                run.dropped.append(f"{lab['name']} (the same run as in {first_seen[fp]})")
                origins.add(first_seen[fp])
            else:
                first_seen[fp] = str(f)
                run.labs.append(lab)
        if not run.labs:
            where = ", ".join(sorted(origins))
            skipped.append(Skip(str(f), f"duplicate: every lab in it is the same run as in {where}"))
            continue
        runs.append(run)
    return runs, skipped



def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _ratio(a: Any, b: Any) -> float | None:
    a, b = _num(a), _num(b)
    return a / b if a is not None and b else None


def _tokens_per_s(fw: str) -> Callable[[dict[str, Any]], float | None]:
    def get(m: dict[str, Any]) -> float | None:
        recorded = _num(m.get(f"tokens_per_s_{fw}"))
        if recorded is not None:
            return recorded
        # Older reports: tokens per step (FLOPs per step / FLOPs per token) over the step time.
        tokens = _ratio(m.get("flops_per_step_analytic"), m.get("flops_per_token_analytic"))
        return _ratio(tokens, m.get(f"step_time_{fw}_s"))
    return get


def _per_b(m: dict[str, Any], key: str) -> float | None:
    params = _num(m.get("token_model_params"))
    return _ratio(m.get(key), params / 1e9) if params else None


def _speedup(fw: str, base: str) -> Callable[[dict[str, Any]], float | None]:
    def get(m: dict[str, Any]) -> float | None:
        recorded = _num(m.get(f"bf16_speedup_vs_{base}_{fw}"))
        if recorded is not None:
            return recorded
        # Older reports: the step-time ratio from step_time_per_precision (fp32 only; no TF32 there).
        t = (m.get("step_time_per_precision") or {}).get(fw) or {} if base == "fp32" else {}
        return _ratio(t.get(base), t.get("bf16"))
    return get


def _key(name: str) -> Callable[[dict[str, Any]], float | None]:
    return lambda m: _num(m.get(name))


# (lab prefix, label, unit, how to read it from the lab's recorded metrics). The metric names are
# the ones the labs pass to labkit.record; derived figures say what they are derived from.
KEY_NUMBERS: list[tuple[str, str, str, Callable[[dict[str, Any]], float | None]]] = [
    ("00", "matmul peak measured", "TFLOP/s", _key("matmul_tflops_measured")),
    ("00", "matmul peak spec (lab)", "TFLOP/s", _key("peak_tflops_spec")),
    ("00", "measured / spec", "fraction", lambda m: _ratio(m.get("matmul_tflops_measured"), m.get("peak_tflops_spec"))),
    ("00", "fp32 matmul measured", "TFLOP/s", _key("matmul_fp32_tflops_measured")),
    ("00", "memory bandwidth measured", "GB/s", _key("bandwidth_gbs_measured")),
    ("02", "MFU JAX", "fraction", _key("mfu_jax")),
    ("02", "MFU torch", "fraction", _key("mfu_torch")),
    ("02", "tokens/s JAX", "tokens/s", _tokens_per_s("jax")),
    ("02", "tokens/s torch", "tokens/s", _tokens_per_s("torch")),
    ("04", "bf16 speed-up over fp32, JAX", "x", _speedup("jax", "fp32")),
    ("04", "bf16 speed-up over fp32, torch", "x", _speedup("torch", "fp32")),
    ("04", "bf16 speed-up over TF32, JAX", "x", _speedup("jax", "tf32")),
    ("04", "bf16 speed-up over TF32, torch", "x", _speedup("torch", "tf32")),
    ("04", "fp8 speed-up over bf16", "x", _key("fp8_speedup_vs_bf16")),
    ("05", "serving tokens/s (best path)", "tokens/s", _key("serve_tokens_per_s")),
    ("05", "serving p50 step latency", "ms", _key("serve_p50_ms")),
    ("05", "time to first token p50", "ms", _key("serve_ttft_p50_ms")),
    ("05", "time to first token p50 under load", "ms", _key("load_ttft_p50_ms")),
    ("05", "goodput under load", "requests/s", _key("load_goodput_req_s")),
    ("06", "cost per M training tokens", "USD", _key("cost_per_mtok_train")),
    ("06", "cost per M serving tokens", "USD", _key("cost_per_mtok_serve")),
    ("06", "token model parameters", "count", _key("token_model_params")),
    # Cost scales with model size (6 x params FLOPs per training token): per 1B parameters, chips
    # that ran different model sizes (smoke vs full) can be compared.
    ("06", "cost per M training tokens per 1B params", "USD", lambda m: _per_b(m, "cost_per_mtok_train")),
    ("06", "cost per M serving tokens per 1B params", "USD", lambda m: _per_b(m, "cost_per_mtok_serve")),
]


def group_key(run: Run) -> str:
    """One column per chip and profile: smoke and full sizes are different experiments (course)."""
    emu = f" (emulated on {run.emulated_on})" if run.emulated_on else ""
    return f"{run.chip}{emu} · {run.profile}"


def spread(values: list[float]) -> dict[str, Any]:
    """n, median, min and max of one number across runs of the same chip (course)."""
    return {"n": len(values), "median": statistics.median(values), "min": min(values), "max": max(values),
            "values": values}


def key_numbers(runs: list[Run]) -> dict[str, dict[str, dict[str, Any]]]:
    """{lab: {"label (unit)": {chip column: spread}}} for every key number any run recorded (course)."""
    cells: dict[str, dict[str, dict[str, list[float]]]] = {}
    for run in runs:
        for lab in run.labs:
            m = lab.get("metrics") or {}
            for prefix, label, unit, get in KEY_NUMBERS:
                if not lab["name"].startswith(prefix):
                    continue
                v = get(m)
                if v is not None:
                    cells.setdefault(lab["name"], {}).setdefault(f"{label} ({unit})", {}) \
                        .setdefault(group_key(run), []).append(v)
    return {lab: {k: {c: spread(v) for c, v in cols.items()} for k, cols in rows.items()}
            for lab, rows in sorted(cells.items())}


def chip_summary(runs: list[Run]) -> dict[str, dict[str, Any]]:
    """Per chip column: runs, labs ok / failed, and failures grouped by lab, cell and error (course)."""
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        s = out.setdefault(group_key(run), {"chip": run.chip, "known": run.known, "platform": run.platform,
                                            "runs": 0, "runs_stopped": 0, "labs_ok": 0, "labs_failed": 0,
                                            "failures": {}})
        s["runs"] += 1
        s["runs_stopped"] += run.stopped is not None  # cut short: its missing labs are not failures
        for lab in run.labs:
            if lab["status"] == "ok":
                s["labs_ok"] += 1
                continue
            s["labs_failed"] += 1
            err = lab.get("error") or {}
            what = f"{err.get('ename', lab['status'])}: {str(err.get('evalue', ''))[:200]}".rstrip(": ")
            key = f"{lab['name']} | cell {err.get('cell', '?')} | {what}"
            f = s["failures"].setdefault(key, {"lab": lab["name"], "cell": err.get("cell", "?"),
                                               "error": what, "count": 0, "reports": []})
            f["count"] += 1
            f["reports"].append(run.path)
    for s in out.values():
        s["failures"] = sorted(s["failures"].values(), key=lambda f: (-f["count"], f["lab"]))
    return out


def peak_basis(runs: list[Run]) -> dict[str, str]:
    """Per chip column, the peak Lab 02's MFU is a fraction of (spec, or measured on a CPU) (course)."""
    return {group_key(r): str(lab["metrics"]["peak_used"]) for r in runs for lab in r.labs
            if lab["name"].startswith("02") and (lab.get("metrics") or {}).get("peak_used")}


def disagreements(runs: list[Run]) -> list[dict[str, str]]:
    """Numbers the chip table contradicts: a measured peak or bandwidth above spec, an unknown chip (course)."""
    out: list[dict[str, str]] = []
    for run in runs:
        spec = hardware.lookup(run.device)
        if spec is None:
            why = ("a CPU: the table holds accelerators only, so its labs use the measured peak"
                   if run.platform == "cpu" else "add a row (with sources) to labkit/runtime/hardware.py")
            out.append({"kind": "unknown chip", "chip": run.device, "report": run.path,
                        "detail": f"'{run.device}' is not in the chip table ({why})"})
            continue
        emu = f" (emulated on {run.emulated_on}: the compute is that chip's)" if run.emulated_on else ""
        for lab in run.labs:
            m = lab.get("metrics") or {}
            if not lab["name"].startswith("00"):
                continue
            dtype = m.get("matmul_dtype") if m.get("matmul_dtype") in hardware.DTYPES else "bf16"
            table_peak, measured = spec.peak_tflops.get(dtype), _num(m.get("matmul_tflops_measured"))
            if table_peak and measured is not None and measured > table_peak:
                out.append({"kind": "measured peak above spec", "chip": run.chip, "report": run.path,
                            "detail": f"{measured:.1f} TFLOP/s {dtype} measured > {table_peak:g} in the table{emu}"})
            bw = _num(m.get("bandwidth_gbs_measured"))
            if bw is not None and bw > spec.bandwidth_gbs:
                out.append({"kind": "measured bandwidth above spec", "chip": run.chip, "report": run.path,
                            "detail": f"{bw:.0f} GB/s measured > {spec.bandwidth_gbs:g} GB/s in the table{emu}"})
            lab_spec = _num(m.get("peak_tflops_spec"))
            if lab_spec is not None and table_peak and abs(lab_spec - table_peak) > 1e-6 * table_peak:
                out.append({"kind": "spec changed", "chip": run.chip, "report": run.path,
                            "detail": f"the lab used {lab_spec:g} TFLOP/s {dtype}; the table now says {table_peak:g}"})
    return out


def merged(runs: list[Run], skipped: list[Skip], version: str = VERSION) -> dict[str, Any]:
    """Everything the page shows, as one JSON-ready dict (gathered.json) (course)."""
    return {
        "course_version": version,
        "gathered_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "runs": [{k: v for k, v in asdict(r).items() if k != "labs"} | {"labs": [lab["name"] for lab in r.labs]}
                 for r in runs],
        "skipped": [asdict(s) for s in skipped],
        "chips": chip_summary(runs),
        "numbers": key_numbers(runs),
        "mfu_peak": peak_basis(runs),
        "disagreements": disagreements(runs),
    }


def write(paths: list[str | Path], out_dir: str | Path, version: str = VERSION) -> dict[str, Any]:
    """Gather ``paths`` into ``out_dir``/gathered.json and index.html (nothing when no run is gathered) (course)."""
    from labkit.course.gather_html import write_page

    out = prepare_out_dir(out_dir, example="build/gathered")  # first: a file or unwritable --out, with the fix
    for old in ("gathered.json", "index.html"):  # an earlier gathering's page would pass for this one's
        (out / old).unlink(missing_ok=True)
    runs, skipped = gather(paths, version)
    data = merged(runs, skipped, version)
    if runs:
        (out / "gathered.json").write_text(json.dumps(data, indent=1))
        write_page(data, out / "index.html")
    return data


def main(argv: list[str] | None = None) -> int:
    """`labkit gather REPORT_OR_DIR... --out DIR`: exit 0; 1 when nothing could be gathered; 2 for a bad --out (course)."""
    p = argparse.ArgumentParser(prog="labkit gather", description=__doc__.splitlines()[0])
    p.add_argument("reports", nargs="+", help="report.json files, or folders searched recursively for report*.json")
    p.add_argument("--out", required=True, help="folder for index.html and gathered.json")
    args = p.parse_args(argv)
    try:
        data = write(args.reports, args.out)
    except (OSError, ValueError) as e:  # --out a file, unwritable or empty: one line, no traceback
        print(f"labkit gather: {e}", file=sys.stderr)
        return 2
    for s in data["skipped"]:
        print(f"skipped {s['path']}: {s['reason']}")
    for r in data["runs"]:
        note = f"; left out as duplicates: {', '.join(r['dropped'])}" if r["dropped"] else ""
        note += f"; stopped early ({r['stopped']})" if r["stopped"] else ""
        print(f"gathered {r['path']}: {r['chip']} ({r['profile']}), {len(r['labs'])} labs{note}")
    n = len(data["runs"])
    if not n:
        print(f"labkit gather: no run report could be gathered from {len(args.reports)} path(s) "
              f"({len(data['skipped'])} skipped, see above); nothing written to {args.out}", file=sys.stderr)
        return 1
    print(f"{Path(args.out) / 'index.html'}: {n} run(s) on {len(data['chips'])} chip(s), {len(data['skipped'])} skipped")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
