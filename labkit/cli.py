"""The `labkit` command: `labkit run [LAB ...]` and `labkit doctor` (Lab 00)."""

from __future__ import annotations

import argparse
import sys

from labkit import runner


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="labkit", description="Accelerator Labs: run labs, check this runtime.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="execute labs headless with papermill and write report.json/html")
    r.add_argument("labs", nargs="*", help="lab names or numbers (default: every lab), e.g. 00 mfu")
    r.add_argument("--profile", choices=runner.PROFILES, default="auto",
                   help="smoke (small, CPU-friendly), full (accelerator sizes), auto (smoke on CPU)")
    r.add_argument("--out", default="build/run", help="folder for executed notebooks and the report")
    r.add_argument("--timeout", type=float, default=runner.DEFAULT_TIMEOUT_S, help="seconds per lab")
    sub.add_parser("doctor", help="runtime, chip, versions, known incompatibilities")
    sub.add_parser("list", help="list the labs")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `labkit` console script (Lab 00)."""
    args = _parser().parse_args(argv)
    if args.command == "list":
        for lab in runner.available_labs():
            print(lab.stem)
        return 0
    if args.command == "doctor":
        from labkit import doctor

        d = doctor.diagnose()
        print(doctor.format_report(d))
        return 1 if any(f.level == "error" for f in d["findings"]) else 0
    try:
        report = runner.run(args.labs, args.profile, args.out, args.timeout)
    except runner.LabNotFound as e:
        print(f"labkit run: {e}", file=sys.stderr)
        return 2
    failed = [lab["name"] for lab in report["labs"] if lab["status"] != "ok"]
    print(f"report: {args.out}/report.html  ({len(report['labs']) - len(failed)} ok, {len(failed)} failed)")
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
