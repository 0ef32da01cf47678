"""(Lab 01) How fast does labkit.matmul.systolic simulate? Cycles and PE-MACs per second, one core.

Run from the repository root:  python benchmarks/bench_systolic.py
Prints a table and writes benchmarks/cpu-2core/systolic.json (or --out). The goal (issue 15):
a 32 x 32 array on a 512 x 512 x 512 GEMM in at most 1 s on one core, at least 20x faster than
SCALE-Sim 3.0 on the same case (its times: tests/matmul/scalesim_3_0_cycles.json). Before the
fold-batched simulator (commit 18abb90) that case took 1.0-1.8 s on the same 2-core VM.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
import time
from pathlib import Path

# One core: set before numpy loads, so its BLAS (used by the A @ B check) starts one thread.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing labkit
from labkit.matmul import systolic  # noqa: E402

# (rows, cols, M, K, N, dtype): the lab's reference point, the target, bigger arrays.
CASES = [(8, 8, 64, 32, 48, "int"), (16, 16, 128, 128, 128, "int"),
         (32, 32, 128, 128, 128, "int"), (32, 32, 128, 128, 128, "float"),
         (64, 64, 256, 256, 256, "float"), (128, 128, 256, 256, 256, "float"),
         (32, 32, 512, 512, 512, "int")]
TARGET_S = 1.0      # s, 32 x 32 array on 512^3, activity recorded or not
TARGET_SPEEDUP = 20.0  # x SCALE-Sim 3.0's wall time on the same case
SCALESIM = json.loads((ROOT / "tests" / "matmul" / "scalesim_3_0_cycles.json").read_text())


def pin_to_one_core() -> bool:
    """(Lab 01) Run this process on a single CPU core where the OS allows it."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        return True
    return False


def time_case(rows: int, cols: int, M: int, K: int, N: int, dtype: str, dataflow: str,
              repeats: int = 3, activity: bool = True) -> dict:
    """(Lab 01) Best-of-`repeats` wall time of one simulate() call, activity recorded or not."""
    rng = np.random.default_rng(0)
    if dtype == "int":
        A, B = rng.integers(-128, 128, (M, K)), rng.integers(-128, 128, (K, N))
    else:
        A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        res = systolic.simulate(A, B, rows, cols, dataflow, record_activity=activity)
        best = min(best, time.perf_counter() - start)  # s
    assert np.allclose(res.product, A @ B) and res.cycles == systolic.cycles(
        M, K, N, rows, cols, dataflow).cycles
    return {"rows": rows, "cols": cols, "M": M, "K": K, "N": N, "dtype": dtype,
            "dataflow": dataflow, "activity": activity, "cycles": res.cycles, "seconds": best,
            "cycles_per_s": res.cycles / best,
            "pe_macs_per_s": res.cycles * rows * cols / best,  # every PE steps every cycle
            "useful_macs_per_s": M * K * N / best, "utilization": res.utilization}


def main() -> None:
    """(Lab 01) Time every case for every dataflow, print a table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "cpu-2core" / "systolic.json")
    out = parser.parse_args().out
    pinned = pin_to_one_core()
    rows = [time_case(*case, dataflow=df, activity=act) for case in CASES for df in ("os", "ws", "is")
            for act in ((True, False) if case[2] == 512 else (True,))]
    print(f"{'array':>8} {'GEMM MxKxN':>12} {'dtype':>5} {'flow':>4} {'act':>3} {'cycles':>7} "
          f"{'seconds':>8} {'cycles/s':>9} {'PE-MACs/s':>10} {'util':>5}")
    for r in rows:
        array, gemm = f"{r['rows']}x{r['cols']}", f"{r['M']}x{r['K']}x{r['N']}"
        print(f"{array:>8} {gemm:>12} {r['dtype']:>5} {r['dataflow']:>4} {'yes' if r['activity'] else 'no':>3} "
              f"{r['cycles']:>7} {r['seconds']:>8.3f} {r['cycles_per_s']:>9.3g} {r['pe_macs_per_s']:>10.3g} "
              f"{r['utilization']:>5.2f}")
    scalesim_s = {c["dataflow"]: c["seconds"] for c in SCALESIM["speed_512_32x32"]}  # s, SCALE-Sim 3.0
    target = [r for r in rows if (r["rows"], r["M"]) == (32, 512)]
    for r in target:
        r["speedup_vs_scalesim"] = scalesim_s[r["dataflow"]] / r["seconds"]
    worst = max(r["seconds"] for r in target)
    least = min(r["speedup_vs_scalesim"] for r in target)
    ok = worst <= TARGET_S and least >= TARGET_SPEEDUP
    print(f"32x32 array on 512^3: slowest {worst:.3f} s (target <= {TARGET_S} s), at least {least:.0f}x "
          f"SCALE-Sim 3.0's {min(scalesim_s.values()):.1f}-{max(scalesim_s.values()):.1f} s "
          f"(target >= {TARGET_SPEEDUP:.0f}x): {'OK' if ok else 'TOO SLOW'}")
    machine = {"hostname": socket.gethostname(), "platform": platform.platform(),
               "processor": platform.processor() or platform.machine(),
               "cpu_count": os.cpu_count(), "pinned_to_one_core": pinned,
               "python": platform.python_version(), "numpy": np.__version__}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine, "target_s": TARGET_S, "target_speedup": TARGET_SPEEDUP,
                               "target_worst_s": worst, "least_speedup_vs_scalesim": least,
                               "scalesim_3_0_seconds": scalesim_s, "results": rows}, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


if __name__ == "__main__":
    main()
