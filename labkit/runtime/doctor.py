"""`labkit doctor`: what runtime is this, what is installed, what will not work and why (Lab 00)."""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from typing import Any

from labkit.runtime import versions

# Supported ranges (inclusive lower bound, exclusive upper; None = open). The labs are tested
# with CI's lock (scripts/requirements-py311.lock) and the runtime reports in benchmarks/.
SUPPORTED: dict[str, tuple[str, str | None]] = {
    "jax": ("0.10", None),
    # The oldest flax that runs on jax 0.10 (checked 2026-11-27 with tests/gpt): 0.11 to 0.12.0 cannot be imported
    # (jax._src.core.mutable_array is gone) and 0.12.1's nnx.jit passes jax.jit an argument it removed (abstracted_axes).
    "flax": ("0.12.2", None),
    "optax": ("0.2.4", None),  # pyproject's floor
    "torch": ("2.4", None),
    "torch_xla": ("2.9", "2.10"),
    "papermill": ("2.6", None),
}
REQUIRED = ("jax", "jaxlib", "flax", "optax", "torch", "numpy", "matplotlib", "papermill", "nbval")
# The newest versions the version matrix has run the whole course on (CI's `course.sh test-latest`,
# 2026-11-24: Python 3.12.1). Newer ones are not known to break; the doctor says they are untested.
TESTED_UP_TO = {"jax": "0.12", "flax": "0.12", "torch": "2.14", "numpy": "2.5", "triton": "3.9"}


@dataclass(frozen=True)
class Finding:
    """One line of the doctor's diagnosis (Lab 00)."""

    level: str  # "ok" | "warn" | "error"
    message: str
    fix: str = ""


def _mm(v: str) -> tuple[int, int]:
    mm = versions.major_minor(v)
    return mm if mm is not None else (0, 0)


def check_versions(found: dict[str, str | None], machine: str | None = None) -> list[Finding]:
    """Known incompatibilities and missing packages, from a name -> version map (Lab 00)."""
    machine = machine or f"{sys.platform} {platform.machine()}"
    out: list[Finding] = []
    for pkg in REQUIRED:
        if not found.get(pkg):
            out.append(Finding("error", f"{pkg} is not installed", "pip install -e . (from the course folder)"))
    for pkg, (lo, hi) in SUPPORTED.items():
        v = found.get(pkg)
        if not v:
            continue
        if not versions.in_range(v, lo, hi):
            rng = f">= {lo}" + (f", < {hi}" if hi else "")
            out.append(Finding("error", f"{pkg} {v} is outside the supported range {rng}",
                               f"use a runtime with {pkg} {rng}, or pip install '{pkg}{rng.replace(' ', '')}'"))
    jax_v, jaxlib_v = found.get("jax"), found.get("jaxlib")
    if jax_v and jaxlib_v and _mm(jax_v) != _mm(jaxlib_v):
        out.append(Finding("error", f"jax {jax_v} and jaxlib {jaxlib_v} differ",
                           f"pip install 'jaxlib=={jax_v}' (or the matching jax[cuda]/jax[tpu] extra)"))
    py = found.get("python") or platform.python_version()
    if jax_v and _mm(jax_v) >= (0, 11) and _mm(py) < (3, 12):
        out.append(Finding("error", f"jax {jax_v} needs Python >= 3.12, this is {py}", "pip install 'jax<0.11'"))
    for pkg, top in TESTED_UP_TO.items():
        v = found.get(pkg)
        if v and _mm(v) > _mm(top):
            out.append(Finding("warn", f"{pkg} {v} is newer than the course has been tested with ({top}.x)",
                               "if a lab fails, run `labkit doctor` and report it with the failing cell"))
    tx, t = found.get("torch_xla"), found.get("torch")
    if tx and t and _mm(tx) != _mm(t):
        out.append(Finding("error", f"torch-xla {tx} needs torch {'.'.join(map(str, _mm(tx)))}, found torch {t}",
                           "pip install -e '.[xla]' pins the pair (torch 2.9 + torch-xla 2.9)"))
    if not tx:
        out.append(Finding("warn", "torch-xla not installed: the PyTorch/XLA sections skip",
                           "optional: pip install -e '.[xla]' (Linux x86_64 only)"))
    elif "linux" not in machine or "x86_64" not in machine:
        out.append(Finding("warn", f"torch-xla wheels exist only for Linux x86_64, this is {machine}"))
    return out


def position(pkg: str, v: str | None) -> str:
    """Where an installed version stands against the supported range, e.g. "jax 0.10.2 in [0.10, -)" (Lab 00)."""
    lo, hi = SUPPORTED[pkg]
    rng = f"[{lo}, {hi or '-'})"
    if not v:
        return f"{pkg} - (range {rng})"
    inside = versions.in_range(v, lo, hi)
    return f"{pkg} {v} {'in' if inside else 'OUTSIDE'} {rng}"


def diagnose() -> dict[str, Any]:
    """Runtime, chip spec, versions and findings for this machine (Lab 00)."""
    from labkit.runtime import device, hardware

    env = []  # the doctor diagnoses a bad setting; it does not stop on it
    try:
        n = device.requested_cpu_devices()
    except ValueError as e:
        n = device.DEFAULT_CPU_DEVICES
        env.append(Finding("error", str(e), f"unset {device.CPU_DEVICES_ENV} or set it to a whole number >= 1 "
                                            f"(this diagnosis used {n}); labs stop on it"))
    device.simulate_devices(n)
    rt = device.detect()
    found = versions.collect()
    findings = env + check_versions(found)
    spec = hardware.lookup(rt.chip)
    if rt.platform != "cpu" and spec is None:
        findings.append(Finding("warn", f"chip {rt.chip!r} is not in labkit.runtime.hardware's spec table",
                                "MFU labs need a peak: pass peak_tflops=... explicitly"))
    if rt.emulated_on:
        findings.append(Finding("warn", f"emulating a {rt.chip} on this {rt.emulated_on} ($LABKIT_EMULATE): JAX "
                                f"and torch capped at {rt.memory_bytes / 1e9:.0f} GB each, bf16 "
                                f"{'on' if rt.bf16 else 'off'}, specs from the {rt.chip} row; timings stay the "
                                f"{rt.emulated_on}'s", "unset LABKIT_EMULATE for the real chip"))
    if not rt.bf16:
        findings.append(Finding("warn", f"{rt.chip} has no native bf16 math",
                                "Lab 04 falls back to fp16 with loss scaling; bf16 timings are emulated"))
    return {"runtime": rt.as_dict(), "spec": spec.name if spec else hardware.UNKNOWN,
            "versions": found, "findings": findings}


def memory_text(rt: dict[str, Any]) -> str:
    """The memory line's figure: per device on a GPU/TPU, the shared host RAM on CPU (Lab 00)."""
    b = rt.get("memory_bytes")
    if not b:
        return "unknown"
    gib = b / 2**30
    if rt.get("platform") != "cpu":
        return f"{gib:.1f} GiB per device"
    n = int(rt.get("device_count") or 1)
    if rt.get("simulated") and n > 1:
        # Simulated CPU devices are slices of one process: they share the host's RAM, none owns a part.
        return (f"{gib:.1f} GiB host RAM shared by all {n} simulated devices "
                f"(not per device; an even split is {gib / n:.1f} GiB each)")
    return f"{gib:.1f} GiB host RAM"


def format_report(d: dict[str, Any]) -> str:
    """Human-readable doctor output (Lab 00)."""
    rt = d["runtime"]
    mem = memory_text(rt)
    lines = [
        f"runtime   {rt['platform']} on {rt['host']}: {rt['device_count']} device(s)"
        + (" (simulated)" if rt["simulated"] else ""),
        f"chip      {rt['chip']}" + (f" (emulated on {rt['emulated_on']})" if rt.get("emulated_on") else "")
        + f"  ->  spec: {d['spec']}",
        f"memory    {mem};  bf16 native: {'yes' if rt['bf16'] else 'no'};  torch device: {rt['torch_device']}",
        "versions  " + ", ".join(f"{k} {v or '-'}" for k, v in d["versions"].items()),
    ]
    lines.append("supported " + ", ".join(position(pkg, d["versions"].get(pkg)) for pkg in SUPPORTED))
    for f in d["findings"] or [Finding("ok", "no known incompatibilities")]:
        lines.append(f"[{f.level:>5}] {f.message}" + (f"\n        fix: {f.fix}" if f.fix else ""))
    return "\n".join(lines)
