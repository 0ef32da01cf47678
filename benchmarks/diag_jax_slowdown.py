"""Diagnosis (Lab 02, issue 15): after which of Lab 02's cells does its JAX step slow down on a GPU?

Not a test: a question for a GPU. On two H100s (2026-11-25 and 2026-11-27, benchmarks/nvidia-h100-80gb-hbm3/)
Lab 02's full profile timed its JAX step at 35-36 ms in the timing cell and at 48-50 ms when it timed the
same executable on the same batches again, while torch's step repeated within 3%. The sweep points were slow
too, so the change comes between the timing cell and the sweep. This script replays what runs in between,
in the lab's order, and times the JAX step (``steptime.time_step``, the lab's timer, on the lab's batches)
after each event:

- ``baseline``: the JAX step compiled and warm (the timing cell);
- ``torch``: torch.compile's step compiled and timed in the same process (the timing cell does that too);
- ``flop_count``: the step traced with XLA's attention, compiled and counted (section 3);
- ``peaks``: the best bf16 and fp32 matmuls of both frameworks (section 4's peak cell);
- ``remat``: the step lowered under ``jax.checkpoint`` (section 4's HFU check);
- ``new_shape``: the same trainer compiled and timed at batch 4 (section 5's sweep).

With each timing it records the host's time to queue one step (``steptime.host_share``: a slower step the
host queues as fast as before ran slower on the device; one it queues no faster than it runs waits on the
host), the GPU's SM clock, power and temperature (``pynvml``, where present) and both allocators' memory,
so a slower step can be told apart from a slower chip. On a GPU each row also times a copy of the step
compiled without XLA's command buffers (CUDA graphs, which XLA updates on the host when the buffers a
program runs on move: openxla/xla#35315 measured that cost): the copy holding its speed while the step
slows points at them. ``first_slow`` names the first
event after which the median is ``SLOW`` x the baseline's or more. Writes
benchmarks/results/jax_slowdown_<device>_<host>.json.

    python3 benchmarks/diag_jax_slowdown.py                    # full profile: ~3 min on an H100
    python3 benchmarks/diag_jax_slowdown.py --profile smoke    # tiny model: checks the script on a CPU
"""

from __future__ import annotations

import argparse
import json
import socket
import time
from pathlib import Path
from typing import Any, Callable

import labkit
from _results import default_path
from labkit.gpt import data
from labkit.gpt.config import get_config
from labkit.gpt.convert import flat_params_numpy, load_flat_params, torch_to_flax
from labkit.gpt.torch_model import TorchGPT
from labkit.measure import flops, roofline, steptime
from labkit.runtime import versions

SLOW = 1.15  # a median this many times the baseline's counts as slower (the lab's own repeats agree to ~5%)
PROFILES = {  # Lab 02's full and smoke shapes; matmul sizes of its peak cell
    "full": dict(model="gpt2-small", overrides={"vocab_size": 256}, batch=16, small_batch=4, repeats=10,
                 sizes=(2048, 4096, 8192)),
    "smoke": dict(model="test", overrides={"d_model": 64, "seq_len": 64}, batch=8, small_batch=1, repeats=5,
                  sizes=(512,)),
}


def gpu_state() -> dict[str, Any]:
    """SM clock (MHz), power (W) and temperature (C) of GPU 0 through NVML; {} where there is none (Lab 02)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return {"sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                "power_w": pynvml.nvmlDeviceGetPowerUsage(h) / 1e3,
                "temperature_c": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)}
    except Exception as e:  # no NVML (a CPU, a TPU, no driver): say why, time anyway
        return {"unavailable": f"{type(e).__name__}: {e}"}


def memory_state(tdev: Any) -> dict[str, Any]:
    """Bytes JAX's allocator holds (in use, peak) and torch's (allocated, reserved) on the accelerator (Lab 02)."""
    import jax
    import torch

    stats = getattr(jax.devices()[0], "memory_stats", lambda: None)() or {}
    out = {k: stats.get(k) for k in ("bytes_in_use", "peak_bytes_in_use", "bytes_reserved")}
    if tdev.type == "cuda":
        out |= {"torch_allocated": torch.cuda.memory_allocated(), "torch_reserved": torch.cuda.memory_reserved()}
    return out


def main() -> None:
    """(Lab 02) Replay Lab 02's cells between its timing cell and its sweep, timing the JAX step after each."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", choices=list(PROFILES), default="full")
    ap.add_argument("--out", type=Path, help="JSON path (default benchmarks/results/jax_slowdown_<device>_<host>.json)")
    args = ap.parse_args()
    rt = labkit.setup()
    import jax
    import torch

    from labkit.gpt.train import JaxTrainer, OptConfig, TorchTrainer
    from labkit.runtime import device

    prof = PROFILES[args.profile]
    cfg = get_config(prof["model"], **prof["overrides"])
    dtype = "bf16" if rt.bf16 and rt.platform != "cpu" else "fp32"  # Lab 02's DTYPE
    tdev = device.torch_device()
    torch.manual_seed(0)
    init = flat_params_numpy(TorchGPT(cfg))
    train = data.split(data.ByteTokenizer().encode(data.load_corpus()))[0]
    jt = JaxTrainer(torch_to_flax(init, cfg), OptConfig(lr=1e-3), dtype=dtype)
    jb = steptime.step_batches(jt, train, prof["batch"], cfg.seq_len)
    rows: list[dict[str, Any]] = []
    copy: list[Any] = [None]  # the step compiled without command buffers (a GPU only), made after the baseline

    def after(event: str, run: Callable[[], Any]) -> None:
        t0 = time.perf_counter()
        run()
        took = time.perf_counter() - t0
        t = steptime.time_step(jt, jb, prof["repeats"])
        queued, done = steptime.host_share(jt, jb[0])  # queued close to done: the GPU waits on the host
        row = {"event": event, "event_s": took, "median_ms": t.median_s * 1e3, "min_ms": t.min_s * 1e3,
               "spread": t.spread, "host_queue_ms": queued * 1e3, "host_queue_step_ms": done * 1e3}
        if event == "baseline":
            copy[0] = steptime.without_command_buffers(jt, jb[0])
        if copy[0] is not None:  # the same kernels without CUDA graphs: slows too, or holds?
            c = steptime.time_compiled(jt, copy[0], jb, prof["repeats"])
            row |= {"no_command_buffers_median_ms": c.median_s * 1e3, "no_command_buffers_min_ms": c.min_s * 1e3}
        rows.append(row | {"gpu": gpu_state(), "memory": memory_state(tdev)})
        extra = f"; without command buffers {row['no_command_buffers_median_ms']:.3g} ms" if copy[0] is not None else ""
        print(f"{event:11s} ({took:6.1f} s): JAX step {t}; host queued it in {queued * 1e3:.3g} ms of "
              f"{done * 1e3:.3g}{extra}")

    def torch_step() -> None:
        tt = TorchTrainer(load_flat_params(TorchGPT(cfg), init), OptConfig(lr=1e-3), dtype=dtype,
                          compile=rt.platform != "cpu", device=tdev)
        steptime.time_step(tt, steptime.step_batches(tt, train, prof["batch"], cfg.seq_len), prof["repeats"])

    def peaks() -> None:
        for dt in dict.fromkeys((dtype, "fp32")):
            roofline.matmul_sweep("jax", prof["sizes"], dt, repeats=5)
            roofline.matmul_sweep("torch", prof["sizes"], dt, repeats=5, device=tdev)

    def new_shape() -> None:
        steptime.measure_step(jt, train, prof["small_batch"], cfg.seq_len, prof["repeats"])

    after("baseline", lambda: jax.block_until_ready(jt.step(*jb[0])))
    after("torch", torch_step)
    after("flop_count", lambda: flops.xla_count(jt.lower(*jb[0], xla_attention=True)))
    after("peaks", peaks)
    after("remat", lambda: jt.lower(*jb[0], xla_attention=True, remat=True).as_text(dialect="hlo"))
    after("new_shape", new_shape)
    base = rows[0]["median_ms"]
    first_slow = next((r["event"] for r in rows[1:] if r["median_ms"] >= SLOW * base), None)
    print(f"first event after which the JAX step ran {SLOW}x the baseline or slower: {first_slow or 'none'}")
    result = {"device": rt.chip, "platform": rt.platform, "host": socket.gethostname(),
              "date": time.strftime("%Y-%m-%d"), "profile": args.profile, "versions": versions.collect(),
              "model": prof["model"], "batch": prof["batch"], "seq": cfg.seq_len, "dtype": dtype, "slow": SLOW,
              "rows": rows, "first_slow": first_slow, "no_command_buffers": copy[0] is not None}
    out = args.out or default_path("jax_slowdown", rt.chip)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
