"""Benchmark (Lab 03): predicted vs measured communication and step time per sharding strategy.

Not a test (timings depend on the machine). Run it on the runtime you want to measure:

    .venv/bin/python benchmarks/bench_sharding.py                  # smoke: the lab's CPU-sized GPT
    .venv/bin/python benchmarks/bench_sharding.py --profile full   # the lab's full-profile GPT

For each strategy (dp, fsdp, tp, dp_tp) it compiles the GPT step on the 8-device mesh of
``labkit.sharding.layouts.mesh_devices`` and records: the measured step time; the collectives table;
*measured* communication = every collective of the table replayed alone (a shard_map program
of the same kind, operand size and group) and timed; *predicted* communication = the ring
model with this runtime's link fitted beforehand on an all-reduce size sweep (a fixed cost per
collective + ring bytes / bandwidth); and the bandwidth-only prediction for a TPU v5e-8 and an 8x H100 node.
Writes benchmarks/results/sharding_<device>_<host>.json.
"""

from __future__ import annotations

import argparse
import json
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np

import labkit
from _results import default_path
from labkit.sharding import collectives as coll
from labkit.runtime import versions

PROFILES = {  # the lab's two sizes (labs/03_gspmd_sharding.ipynb, Sizes)
    "smoke": dict(cfg=dict(vocab_size=256, seq_len=32, n_layer=2, n_head=8, d_model=128), batch=16, repeats=10),
    "full": dict(cfg=dict(vocab_size=256, seq_len=256, n_layer=4, n_head=8, d_model=256), batch=32, repeats=10),
}
SWEEP_BYTES = [2**k for k in range(10, 25, 2)]  # all-reduce sizes for the link fit: 1 KiB .. 16 MiB



def _replay_fn(kind: str, n: int, devices: list, contiguous: bool) -> tuple[Any, Any]:
    """(Lab 03) A jitted program doing one collective of `kind` over groups of n, and its input sharding."""
    import jax
    from jax.sharding import PartitionSpec as P

    from labkit.sharding import layouts as sharding

    shape = (len(devices) // n, n) if contiguous else (n, len(devices) // n)
    names = ("r", "g") if contiguous else ("g", "r")
    mesh = sharding.make_mesh(shape, names, "auto", devices)
    ops = {
        "all-reduce": lambda x: jax.lax.psum(x, "g"),
        "all-gather": lambda x: jax.lax.all_gather(x, "g", tiled=True),
        "reduce-scatter": lambda x: jax.lax.psum_scatter(x, "g", tiled=True),
        "all-to-all": lambda x: jax.lax.all_to_all(x, "g", 0, 0, tiled=True),
        "collective-permute": lambda x: jax.lax.ppermute(x, "g", [(i, (i + 1) % n) for i in range(n)]),
    }
    spec = P(("r", "g") if contiguous else ("g", "r"))  # every device gets its own flat buffer
    f = jax.jit(jax.shard_map(ops[kind], mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False))
    return f, sharding.named(mesh, spec)


def time_collective(kind: str, nbytes: int, n: int, devices: list, contiguous: bool = True,
                    repeats: int = 10) -> float:
    """(Lab 03) Median seconds of one `kind` collective with an nbytes fp32 operand per device."""
    from labkit.measure.bench import time_jax

    per_dev = max(n, (nbytes // 4 + n - 1) // n * n)  # fp32 elements, divisible by the group
    import jax

    f, where = _replay_fn(kind, n, devices, contiguous)
    x = jax.device_put(np.ones(per_dev * len(devices), np.float32), where)  # already on the devices
    return time_jax(f, lambda i: (x,), warmup=2, repeats=repeats).median_s


def fit_link(devices: list, repeats: int) -> dict[str, float]:
    """(Lab 03) Fit t = overhead + ring_bytes / beta to an all-reduce sweep, in relative error."""
    n = len(devices)
    ts = np.array([time_collective("all-reduce", b, n, devices, repeats=repeats) for b in SWEEP_BYTES])
    rb = np.array([coll.ring_bytes("all-reduce", b, n) for b in SWEEP_BYTES])
    # Divide each row by its time: a 1 KiB and a 16 MiB point count alike (relative error).
    (t0, inv_beta), *_ = np.linalg.lstsq(np.stack([np.ones_like(rb), rb], 1) / ts[:, None],
                                         np.ones_like(ts), rcond=None)
    return {"overhead_s": max(float(t0), 0.0), "beta_gbs": 1 / max(float(inv_beta), 1e-15) / 1e9,
            "sweep": [{"bytes": b, "seconds": float(t)} for b, t in zip(SWEEP_BYTES, ts)]}


def main() -> None:
    """(Lab 03) Measure every strategy once on this runtime and write the JSON result."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", choices=list(PROFILES), default="smoke")
    ap.add_argument("--out", type=Path, help="JSON path (default benchmarks/results/sharding_<device>_<host>.json)")
    args = ap.parse_args()
    rt = labkit.setup()
    from labkit.sharding import train_step as st
    from labkit.sharding import layouts as sharding
    from labkit.measure.bench import time_jax
    from labkit.gpt.config import GPTConfig

    prof = PROFILES[args.profile]
    cfg, batch, repeats = GPTConfig(**prof["cfg"]), prof["batch"], prof["repeats"]
    devices = sharding.mesh_devices(8)
    link = fit_link(devices, repeats)
    print(f"{devices[0].platform} link fit: {link['overhead_s'] * 1e6:.0f} µs per collective + bytes / "
          f"{link['beta_gbs']:.2f} GB/s")
    params, (x, y) = st.init_params(cfg), st.demo_batch(cfg, batch)
    systems = {"TPU v5e-8": coll.link_for("TPU v5e"), "8x H100 SXM": coll.link_for("NVIDIA H100 SXM")}
    results = []
    for name in ["single", *sharding.STRATEGIES]:
        step = st.build_step(cfg, name)
        a = step.place(params, x, y)
        c = step.compile(*a)
        t_step = time_jax(lambda: c(*a), warmup=2, repeats=repeats).median_s
        table = coll.collectives(c) if name != "single" else []
        measured = predicted = 0.0
        replays: dict[tuple, float] = {}
        for col in table:
            contiguous = list(col.replica_groups[0]) == list(range(col.replica_groups[0][0],
                                                                   col.replica_groups[0][0] + col.group_size))
            kind = "all-reduce" if col.compiled_as == coll.EMULATED_RS else col.kind  # what ran here
            n = col.group_size if kind != "collective-permute" else len(devices)
            key = (kind, col.bytes, n, contiguous)
            if key not in replays:
                replays[key] = time_collective(kind, col.bytes, n, devices, contiguous, repeats)
            measured += replays[key]
            predicted += link["overhead_s"] + coll.ring_bytes(kind, col.bytes, n) / (link["beta_gbs"] * 1e9)
        row = {"strategy": name, "step_ms": t_step * 1e3, "collectives": len(table),
               "ring_bytes": sum(cl.ring_bytes for cl in table),
               "comm_ms_measured_replay": measured * 1e3, "comm_ms_predicted_here": predicted * 1e3,
               **{f"comm_us_{k}": coll.comm_time(table, lk) * 1e6 for k, lk in systems.items()}}
        results.append(row)
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    report = {
        "device": rt.chip, "platform": devices[0].platform, "mesh_devices": len(devices),
        "host": socket.gethostname(), "date": time.strftime("%Y-%m-%d"), "profile": args.profile,
        "versions": versions.collect(), "config": prof["cfg"], "batch": batch, "link_fit": link,
        "systems": {k: {"gbs": v.gbs, "note": v.note} for k, v in systems.items()}, "results": results,
        "notes": "measured comm = each collective of the compiled step replayed alone and timed; predicted "
                 "comm = ring model with the link fitted on an all-reduce sweep; on simulated CPU devices "
                 "the 'link' is memory copies between threads sharing the machine's cores",
    }
    out = args.out or default_path("sharding", devices[0].platform if devices[0].platform == 'cpu' else rt.chip)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
