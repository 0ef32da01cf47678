"""Benchmark: wall-clock seconds of each lab's smoke profile on this machine, against its target.

Not a test (timings flake on a busy machine); run it on a quiet machine and commit the result:

    .venv/bin/python benchmarks/bench_labs.py [LAB ...]

Writes benchmarks/results/labs_<profile>_<hostname>.json and prints a table for the README.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import tempfile
import time
from pathlib import Path

from labkit.course import runner

from labkit.runtime import versions
# Smoke-profile targets on a 2-core CPU machine, seconds (from the issues).
TARGETS_S = {
    "00_know_your_accelerator": 60,
    "01_systolic_vs_cuda_cores": 90,
    "02_mfu": 90,
    "03_gspmd_sharding": 120,
    "04_mixed_precision": 120,
    "05_train_tpu_serve_gpu": 120,
    "06_cost_per_token": 60,
}


def main() -> None:
    """Run the labs once and write their timings with the machine they ran on."""
    ap = argparse.ArgumentParser()
    ap.add_argument("labs", nargs="*")
    ap.add_argument("--profile", default="smoke")
    ap.add_argument("--out", default=None, help="keep executed notebooks and report.html here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = runner.run(args.labs, args.profile, args.out or tmp)
    rows = []
    for lab in report["labs"]:
        target = TARGETS_S.get(lab["name"]) if args.profile == "smoke" else None
        rows.append({"lab": lab["name"], "status": lab["status"], "seconds": lab["seconds"], "target_s": target,
                     "within_target": None if target is None else lab["seconds"] <= target})
    result = {
        "profile": args.profile,
        "machine": {"hostname": socket.gethostname(), "platform": platform.platform(), "cpu_count": os.cpu_count(),
                    "device": report["device"], "runtime": report["runtime"]},
        "versions": versions.collect(),
        "date": time.strftime("%Y-%m-%d"),
        "commit": report.get("commit"),  # the course commit the labs ran at (<sha>+dirty if uncommitted)
        "labs": rows,
    }
    out = Path(__file__).parent / "results" / f"labs_{args.profile}_{socket.gethostname()}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    for r in rows:
        print(f"{r['lab']:28s} {r['status']:8s} {r['seconds']:7.1f} s  target {r['target_s']} s")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
