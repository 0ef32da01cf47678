"""Start N processes of one program on this machine, watch them, tear them down (Lab 03).

What a TPU pod or a GPU cluster does across hosts, on one host: every process gets the
coordinator address (always ``127.0.0.1`` here), its process id and the process count —
``LABKIT_COORDINATOR`` / ``LABKIT_PROCESS_ID`` / ``LABKIT_NUM_PROCESSES`` for
``labkit.runtime.distributed.init_distributed`` (JAX), and torchrun's ``MASTER_ADDR`` / ``MASTER_PORT`` /
``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` for ``torch.distributed`` — and
``LABKIT_CPU_DEVICES`` simulated CPU devices.

It never hangs: a process that dies makes :func:`launch` kill the others at once and raise
:class:`LaunchError` naming the process, its exit code and the end of its output; a run that
exceeds ``timeout_s`` is killed the same way; a coordinator port already in use is refused
before anything starts.

It leaves nothing behind: each process runs in its own session, and :class:`ProcessTree` ends
the whole tree — the processes, everything they started (found by descent, process group,
session and an inherited tag) — on every exit path, then checks that every one of them is gone.
The lab runner (``labkit run``) uses the same class for each lab's papermill and kernel.

    python -m labkit.sharding.launch --nproc 2 --devices-per-proc 4 -- python -m labkit.sharding.train_step ...
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from labkit.runtime import device, distributed
from labkit.runtime.processes import TAG_ENV, ProcessesLeftRunning, ProcessTree  # noqa: F401  (re-exported)

HOST = "127.0.0.1"  # processes of a local run talk over loopback only
POLL_S = 0.05  # how often the watcher looks at the processes
GRACE_S = 3.0  # after SIGTERM, how long before SIGKILL


class LaunchError(RuntimeError):
    """A launched process failed, the run timed out, or it could not start (Lab 03)."""


@dataclass(frozen=True)
class LaunchResult:
    """Exit codes, outputs and wall time of a successful multi-process run (Lab 03)."""

    returncodes: tuple[int, ...]
    outputs: tuple[str, ...]  # stdout + stderr of each process, by process id
    seconds: float
    port: int


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (Lab 03)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def check_port(port: int) -> None:
    """Raise LaunchError if the coordinator port on 127.0.0.1 is already taken (Lab 03)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError as e:
            raise LaunchError(
                f"coordinator port {port} on {HOST} is already in use ({e.strerror}); another "
                f"run may still be alive. Pass port=None (--port 0) to pick a free one, or stop "
                f"the process that holds it (e.g. `lsof -i :{port}`).") from None


def process_env(rank: int, nproc: int, port: int, devices_per_proc: int,
                base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of process ``rank``: labkit's and torchrun's variables (Lab 03)."""
    env = dict(os.environ if base is None else base)
    env.update({
        distributed.COORDINATOR_ENV: f"{HOST}:{port}", distributed.NUM_PROCESSES_ENV: str(nproc),
        distributed.PROCESS_ID_ENV: str(rank), device.CPU_DEVICES_ENV: str(devices_per_proc),
        "MASTER_ADDR": HOST, "MASTER_PORT": str(port), "RANK": str(rank),
        "WORLD_SIZE": str(nproc), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(nproc),
        "PYTHONUNBUFFERED": "1",
    })
    if Path("/sys/class/net/lo").exists():
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # torch gloo: loopback only
    env.pop("LABKIT_METRICS_FILE", None)  # children must not write the lab's run report
    return env


def _tail(path: Path, lines: int = 15) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def check_launch_args(nproc: Any, devices_per_proc: Any, timeout_s: Any, port: Any) -> None:
    """ValueError / TypeError naming a bad :func:`launch` argument and the fix (Lab 03)."""
    for name, v in (("nproc", nproc), ("devices_per_proc", devices_per_proc)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int >= 1, got {v!r} ({type(v).__name__})")
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}; use e.g. {name}=2")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)):
        raise TypeError(f"timeout_s must be a number of seconds, got {timeout_s!r} ({type(timeout_s).__name__})")
    if not math.isfinite(timeout_s) or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a finite number of seconds > 0, got {timeout_s!r}; "
                         f"use e.g. timeout_s=120 (a NaN or infinite limit would never stop a hung run)")
    if port is not None:
        if isinstance(port, bool) or not isinstance(port, int):
            raise TypeError(f"port must be an int in [0, 65535] or None, got {port!r} ({type(port).__name__})")
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be in [0, 65535] (0 or None picks a free one), got {port}")


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def launch(cmd: Sequence[str], nproc: int = 2, devices_per_proc: int = 4,
           timeout_s: float = 120.0, port: int | None = None,
           env: dict[str, str] | None = None, cwd: str | None = None) -> LaunchResult:
    """(Lab 03) Run ``cmd`` as nproc processes on 127.0.0.1; fail fast, never hang."""
    check_launch_args(nproc, devices_per_proc, timeout_s, port)
    if port is None or port == 0:
        port = free_port()
    check_port(port)
    logdir = Path(tempfile.mkdtemp(prefix="labkit-launch-"))
    logs = [logdir / f"process{r}.log" for r in range(nproc)]
    procs: list[subprocess.Popen] = []
    tree = ProcessTree()  # every worker and all it starts, ended together on every exit path
    t0 = time.monotonic()
    try:
        for r in range(nproc):
            with open(logs[r], "wb") as out:  # files, not pipes: a chatty child cannot block
                try:
                    procs.append(subprocess.Popen(
                        list(cmd), stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                        env=tree.env(process_env(r, nproc, port, devices_per_proc, env)),
                        start_new_session=True))  # own session and group: killed as a group
                except OSError as e:
                    raise LaunchError(f"could not start process {r}: {' '.join(cmd)!r}: {e}") from None
                tree.add(procs[-1])
        while True:
            codes = [p.poll() for p in procs]
            failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                r, c = failed[0]
                tree.end(GRACE_S)  # the dead worker's children too, not only the live workers
                raise LaunchError(
                    f"process {r} of {nproc} died ({_describe(c)}) after "
                    f"{time.monotonic() - t0:.1f} s; stopped the others. Its last output:\n"
                    f"{_tail(logs[r])}")
            if all(c == 0 for c in codes):
                break
            if time.monotonic() - t0 > timeout_s:
                running = [r for r, c in enumerate(codes) if c is None]
                tree.end(GRACE_S)
                raise LaunchError(
                    f"timed out after {timeout_s:.0f} s with process(es) {running} still running "
                    f"(stopped). Last output of process {running[0]}:\n{_tail(logs[running[0]])}")
            time.sleep(POLL_S)
        outputs = tuple(p.read_text(errors="replace") for p in logs)
        return LaunchResult(tuple(codes), outputs, time.monotonic() - t0, port)
    finally:
        tree.end(GRACE_S)  # every exit path (success, KeyboardInterrupt): nothing left running
        for p in logs:
            p.unlink(missing_ok=True)
        logdir.rmdir()


def main(argv: list[str] | None = None) -> int:
    """(Lab 03) CLI: python -m labkit.sharding.launch [--nproc N] ... -- CMD ARGS."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: python -m labkit.sharding.launch [--nproc 2] [--devices-per-proc 4] "
              "[--timeout 120] [--port 0] -- CMD [ARGS...]", file=sys.stderr)
        return 2
    split = argv.index("--")
    ap = argparse.ArgumentParser(prog="python -m labkit.sharding.launch", description=launch.__doc__)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--devices-per-proc", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds for the whole run")
    ap.add_argument("--port", type=int, default=0, help="coordinator port; 0 picks a free one")
    opts = ap.parse_args(argv[:split])
    try:
        res = launch(argv[split + 1:], opts.nproc, opts.devices_per_proc, opts.timeout, opts.port)
    except (ValueError, TypeError) as e:  # a bad --nproc / --timeout / --port
        print(f"labkit.sharding.launch: {e}", file=sys.stderr)
        return 2
    except LaunchError as e:
        print(f"labkit.sharding.launch: {e}", file=sys.stderr)
        return 1
    for r, out in enumerate(res.outputs):
        print(f"--- process {r} (exit {res.returncodes[r]}) ---\n{out.rstrip()}")
    print(f"labkit.sharding.launch: {opts.nproc} processes finished in {res.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
