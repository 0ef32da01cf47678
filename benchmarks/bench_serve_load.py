"""Benchmark: serving the course GPT under load — open-loop arrivals, static vs continuous batching.

Not a test (timings depend on the machine). Run it on the runtime you want to measure:

    .venv/bin/python benchmarks/bench_serve_load.py                  # full profile: the "small" GPT
    .venv/bin/python benchmarks/bench_serve_load.py --profile smoke  # CPU-sized: checks the script works

For each engine of labkit.export.slots (torch: its decode step a CUDA graph on CUDA; JAX jit),
requests arrive as a seeded Poisson process with mixed prompt and output lengths and are served
with static and with continuous batching (labkit.export.load). Metrics are vLLM's
(`vllm bench serve`, vllm/benchmarks/serve.py): TTFT, TPOT (excluding the first token), ITL, E2E at p50/p95/p99, output
tokens/s, and goodput under an SLO.

Rates and SLO follow the device, so one script means the same thing on a CPU and on an H100:
- unloaded: each request alone (a rate so low that none overlap) gives TTFT0 and TPOT0 (p50);
- capacity ~ 1 / (TTFT0 + (mean output - 1) * TPOT0 / slots) requests/s (a prefill per request, which
  makes the first token; the other decode steps shared by the slots); the sweep offers LOADS x capacity;
- SLO: TTFT <= 10 x TTFT0 and TPOT <= 3 x TPOT0 (``--slo-ttft-ms`` / ``--slo-tpot-ms`` to state
  your own).
Writes benchmarks/results/serve_load_<device>_<host>.json (device, versions, config, the SLO,
every point) and one latency-vs-throughput PNG per engine beside it.
"""

from __future__ import annotations

import argparse
import json
import socket
import time
from dataclasses import asdict
from pathlib import Path


import labkit
from _results import default_path, slug
from labkit.export import capacity, load, plots, slots
from labkit.gpt.config import get_config
from labkit.gpt.convert import flat_params_numpy, flax_to_torch
from labkit.gpt.flax_model import FlaxGPT
from labkit.runtime import versions

PROFILES = {  # model, batch rows, requests per run, prompt and output lengths (inclusive), loads
    "full": dict(model="small", overrides={}, slots=32, requests=400, prompt=(16, 128), output=(16, 128),
                 loads=(0.25, 0.5, 0.75, 1.0, 1.25, 1.5)),
    "smoke": dict(model="test", overrides={"d_model": 64, "n_head": 4, "seq_len": 64}, slots=8, requests=48,
                  prompt=(4, 24), output=(4, 32), loads=(0.25, 0.5, 1.0, 1.5)),
}
SLO_RULE = "TTFT <= 10 x and TPOT <= 3 x the p50 of one request served alone, on this device"


def unloaded(engine, reqs: list[load.Request], slots_n: int) -> dict[str, float]:
    """(Lab 05) Each request alone (no overlap): p50 TTFT and TPOT, and the capacity they imply."""
    s = load.load_stats(load.serve_open_loop(load.alone(reqs), engine, "continuous"), load.SLO())
    ttft, tpot = s.ms("ttft", 50) / 1e3, s.ms("tpot", 50) / 1e3
    est = capacity.estimate_terms(reqs, ttft, tpot, slots_n)  # idle p50s, every row busy, no idle time
    return {"ttft_p50_s": ttft, "tpot_p50_s": tpot, "capacity_req_s": est.req_per_s}


def main() -> None:
    """(Lab 05) Sweep offered load for each engine and policy; print, write JSON and PNGs."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", choices=list(PROFILES), default="full")
    ap.add_argument("--slo-ttft-ms", type=float, help=f"default: {SLO_RULE}")
    ap.add_argument("--slo-tpot-ms", type=float)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="JSON path (default benchmarks/results/serve_load_<device>_<host>.json)")
    args = ap.parse_args()

    rt = labkit.setup()
    import jax
    import matplotlib

    matplotlib.use("Agg")
    import torch
    from flax import nnx

    from labkit.runtime import device

    prof = PROFILES[args.profile]
    cfg = get_config(prof["model"], **prof["overrides"])
    tdev = torch.device("cuda" if device.torch_device_kind() == "cuda" else "cpu")
    if tdev.type == "cpu":
        torch.set_num_threads(1)  # steady timings on a shared CPU: a decode step is too small to split
    fm = FlaxGPT(cfg, rngs=nnx.Rngs(0))
    engines = [slots.TorchSlots(flax_to_torch(fm), prof["slots"], device=tdev),
               slots.JaxSlots(cfg, flat_params_numpy(fm), prof["slots"])]
    print(f"{rt.chip}: JAX on {jax.devices()[0].platform}, torch on {tdev.type}; {cfg}; {prof['slots']} rows")

    out = args.out or default_path("serve_load", rt.chip)
    out.parent.mkdir(parents=True, exist_ok=True)
    base = load.poisson_requests(prof["requests"], 1.0, prof["prompt"], prof["output"], cfg.vocab_size, args.seed)
    per_engine = []
    for eng in engines:
        t0 = time.perf_counter()
        for policy in load.POLICIES:  # warm-up: compile every prefill bucket, capture the decode graph
            load.serve_open_loop(base, eng, policy)
        ref = unloaded(eng, base[:16], prof["slots"])
        slo = load.SLO(ttft_s=(args.slo_ttft_ms / 1e3 if args.slo_ttft_ms else 10 * ref["ttft_p50_s"]),
                       tpot_s=(args.slo_tpot_ms / 1e3 if args.slo_tpot_ms else 3 * ref["tpot_p50_s"]))
        rates = [round(x * ref["capacity_req_s"], 3 if ref["capacity_req_s"] < 100 else 1) for x in prof["loads"]]
        stats = load.sweep_rates(eng, rates, prof["requests"], prof["prompt"], prof["output"], slo, seed=args.seed)
        print(f"{eng.name}: alone TTFT {ref['ttft_p50_s'] * 1e3:.2f} ms, TPOT {ref['tpot_p50_s'] * 1e3:.3f} ms, "
              f"capacity ~{ref['capacity_req_s']:.1f} req/s; SLO {slo.describe()} "
              f"({time.perf_counter() - t0:.1f} s)")
        for s in stats:
            print(f"  {s.policy:10s} {s.rate:8.2f} req/s  {s.output_throughput:9.0f} tok/s  "
                  f"TTFT p50/p99 {s.ms('ttft', 50):8.2f} / {s.ms('ttft', 99):8.2f} ms  "
                  f"TPOT p50/p99 {s.ms('tpot', 50):7.3f} / {s.ms('tpot', 99):7.3f} ms  "
                  f"ITL p99 {s.ms('itl', 99):7.3f}  E2E p99 {s.ms('e2e', 99):8.1f} ms  goodput {s.goodput:7.2f} req/s",
                  flush=True)
        png = out.with_name(f"{out.stem}_{slug(eng.name)}.png")
        plots.plot_latency_vs_throughput(stats).savefig(png, dpi=110)
        top = {s.policy: s for s in stats if s.rate == rates[-1]}
        per_engine.append({
            "engine": eng.name, "unloaded": ref, "slo_ms": {"ttft": slo.ttft_s * 1e3, "tpot": slo.tpot_s * 1e3},
            "rates_req_s": rates, "png": png.name, "results": [s.row() for s in stats],
            "at_highest_rate": {"rate": rates[-1], "ttft_p99_ms": {p: s.ms("ttft", 99) for p, s in top.items()},
                                "goodput_req_s": {p: s.goodput for p, s in top.items()}},
        })
    result = {
        "device": rt.chip, "platform": rt.platform, "torch_device": tdev.type, "host": socket.gethostname(),
        "date": time.strftime("%Y-%m-%d"), "profile": args.profile, "versions": versions.collect(),
        "model": {"name": prof["model"], "config": asdict(cfg)}, "dtype": "fp32", "decoding": "greedy",
        "slots": prof["slots"], "requests_per_run": prof["requests"], "prompt_len": prof["prompt"],
        "output_len": prof["output"], "loads_x_capacity": prof["loads"], "seed": args.seed,
        "arrivals": "Poisson (exponential gaps), first request at t=0",
        "slo_rule": SLO_RULE if args.slo_ttft_ms is None else "given on the command line",
        "clock": "virtual: engine calls advance it by their measured wall time; idle gaps skipped",
        "metrics": "vLLM benchmark_serving.py definitions (TPOT excludes the first token)",
        "torch_threads": torch.get_num_threads(), "engines": per_engine,
    }
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out} and {', '.join(e['png'] for e in per_engine)}")


if __name__ == "__main__":
    main()
