"""labkit.sharding.launch: several processes on 127.0.0.1 — same result as one process, fail fast, no hangs.

Every launch here has a hard timeout; the failure tests use tiny scripts so a regression
shows up as a quick failure, never as a hung test run.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from labkit.sharding import launch

ROOT = Path(__file__).resolve().parents[2]
CFG = {"vocab_size": 256, "seq_len": 16, "n_layer": 1, "n_head": 8, "d_model": 32}


def _jax_step(tmp_path: Path, nproc: int, devices_per_proc: int, name: str) -> np.lib.npyio.NpzFile:
    out = tmp_path / f"{name}.npz"
    cmd = [sys.executable, "-m", "labkit.sharding.train_step", "--strategy", "dp", "--config", json.dumps(CFG),
           "--batch", "8", "--out", str(out)]
    res = launch.launch(cmd, nproc=nproc, devices_per_proc=devices_per_proc, timeout_s=150, cwd=str(ROOT))
    assert all(c == 0 for c in res.returncodes)
    return np.load(out)


def test_two_processes_same_step_as_one(tmp_path: Path) -> None:
    # The same program: 1 process x 8 devices vs 2 processes x 4 devices (jax.distributed + gloo).
    one = _jax_step(tmp_path, 1, 8, "one")
    two = _jax_step(tmp_path, 2, 4, "two")
    assert abs(float(one["loss"]) - float(two["loss"])) < 1e-5
    from labkit.sharding import step_check, train_step as st

    weights = [k for k in one.files if k != "loss" and not k.startswith(st.GRAD_PREFIX)]
    diff = max(float(np.abs(one[k] - two[k]).max()) for k in weights)
    assert diff < 5e-5  # fp32 reduction order (gloo vs in-process) through one Adam step
    # ... and the gradients each wrote (Adam's mu / (1 - b1)) are the same on each parameter's own scale.
    grads = lambda npz: {k: npz[st.GRAD_PREFIX + k] for k in weights}  # noqa: E731
    assert sorted(two.files) == sorted(["loss", *weights, *(st.GRAD_PREFIX + k for k in weights)])
    assert max(step_check.grad_rel_diff(grads(two), grads(one)).values()) < 1e-4


def test_torchrun_ddp_matches_the_jax_step(tmp_path: Path) -> None:
    from labkit.sharding import torch_spmd as torch_sharding

    out = tmp_path / "ddp.npz"
    port = launch.free_port()
    cmd = torch_sharding.torchrun_cmd(2, port, "--config", json.dumps(CFG), "--batch", "8", "--out", str(out))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    res = launch.launch(cmd, nproc=1, timeout_s=150, port=port, cwd=str(ROOT), env=dict(os.environ, TMPDIR=str(tmp)))
    assert "rank 1/2" in res.outputs[0]
    # torchrun's torchelastic_* log folder went with the run's TMPDIR; torch.compile's cache (which importing
    # torch.distributed creates) stays where torch puts it by default, to be reused.
    assert [p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_")] == []
    ddp = np.load(out)
    jax_ref = _jax_step(tmp_path, 1, 8, "ref")
    assert abs(float(ddp["loss"]) - float(jax_ref["loss"])) < 1e-5  # two frameworks, one loss
    # DDP's gradients (the mean over its 2 ranks) are the JAX step's, on each parameter's own scale: the check Lab 03
    # makes, since Adam's first step, lr·g / (|g| + eps), moves the weights the same for a sum over ranks.
    from labkit.gpt.config import GPTConfig
    from labkit.sharding import step_check, train_step as st

    cfg = GPTConfig(**CFG)
    grads = {k[len(st.GRAD_PREFIX):]: ddp[k] for k in ddp.files if k.startswith(st.GRAD_PREFIX)}
    assert {k for k in ddp.files if k != "loss" and not k.startswith(st.GRAD_PREFIX)} == grads.keys()  # one per weight
    ddp_g = st.params_from_flat(grads, cfg)
    jax_g = {k[len(st.GRAD_PREFIX):]: jax_ref[k] for k in jax_ref.files if k.startswith(st.GRAD_PREFIX)}
    assert max(step_check.grad_rel_diff(ddp_g, jax_g).values()) < 1e-4
    summed = {k: 2 * g for k, g in ddp_g.items()}  # a sum over the 2 ranks instead of their mean
    assert min(step_check.grad_rel_diff(summed, jax_g).values()) > 0.99  # the gradient check catches it


def test_a_killed_process_fails_fast(tmp_path: Path) -> None:
    script = tmp_path / "victim.py"
    script.write_text(
        "import os, signal, time\n"
        "if os.environ['LABKIT_PROCESS_ID'] == '1':\n"
        "    time.sleep(0.5); print('about to die', flush=True); os.kill(os.getpid(), signal.SIGKILL)\n"
        "time.sleep(60)  # process 0 would wait forever for its peer\n")
    t0 = time.monotonic()
    with pytest.raises(launch.LaunchError) as e:
        launch.launch([sys.executable, str(script)], nproc=2, timeout_s=60)
    assert time.monotonic() - t0 < 20, "the launcher must not wait for the survivors"
    msg = str(e.value)
    assert "process 1 of 2 died (killed by signal SIGKILL)" in msg and "about to die" in msg
    assert "stopped the others" in msg


def test_a_failing_process_shows_its_output(tmp_path: Path) -> None:
    script = tmp_path / "fail.py"
    script.write_text("import sys\nprint('bad config: d_model must be positive', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(launch.LaunchError, match=r"(?s)died \(exit code 3\).*bad config"):
        launch.launch([sys.executable, str(script)], nproc=2, timeout_s=30)


def test_timeout_kills_everything(tmp_path: Path) -> None:
    script = tmp_path / "slow.py"
    script.write_text("import time\nprint('working', flush=True)\ntime.sleep(60)\n")
    t0 = time.monotonic()
    with pytest.raises(launch.LaunchError, match=r"(?s)timed out after 2 s.*working"):
        launch.launch([sys.executable, str(script)], nproc=2, timeout_s=2)
    assert time.monotonic() - t0 < 15


def test_coordinator_port_taken() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(launch.LaunchError, match=f"coordinator port {port} on 127.0.0.1 is already in use"):
            launch.launch([sys.executable, "-c", "pass"], nproc=2, port=port, timeout_s=10)


def test_environment_of_each_process() -> None:
    env = launch.process_env(1, 2, 12345, 4, base={})
    assert env["LABKIT_COORDINATOR"] == "127.0.0.1:12345" and env["LABKIT_PROCESS_ID"] == "1"
    assert env["LABKIT_NUM_PROCESSES"] == "2" and env["LABKIT_CPU_DEVICES"] == "4"
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["RANK"], env["WORLD_SIZE"]) == ("127.0.0.1", "12345", "1", "2")


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert launch.main(["--nproc", "2"]) == 2  # no "--": usage
    assert launch.main(["--nproc", "2", "--timeout", "30", "--", sys.executable, "-c",
                        "import os; print('hello from', os.environ['LABKIT_PROCESS_ID'])"]) == 0
    out = capsys.readouterr().out
    assert "hello from 0" in out and "hello from 1" in out
    assert launch.main(["--nproc", "1", "--", sys.executable, "-c", "raise SystemExit(4)"]) == 1
    with pytest.raises(ValueError, match="nproc"):
        launch.launch([sys.executable, "-c", "pass"], nproc=0)


def test_a_missing_program_is_a_launch_error() -> None:
    with pytest.raises(launch.LaunchError, match="could not start process 0"):
        launch.launch(["/no/such/program"], nproc=2, timeout_s=10)


# ------------------------------------------------------------------ no process outlives a launch

_SPAWNER = (
    "import os, subprocess, sys, time\n"
    "rank = os.environ['LABKIT_PROCESS_ID']\n"
    "kids = [subprocess.Popen(['sleep', '600']),  # same group as the worker\n"
    "        subprocess.Popen(['sleep', '600'], start_new_session=True)]  # escapes the group\n"
    "with open(os.path.join(sys.argv[1], f'pids{{rank}}'), 'w') as f:\n"
    "    f.write(' '.join(str(p) for p in [os.getpid()] + [k.pid for k in kids]))\n"
    "print('children started', flush=True)\n"
    "{action}\n"
)


def _pids(d: Path, nproc: int) -> list[int]:
    deadline = time.monotonic() + 5
    while len(list(d.glob("pids*"))) < nproc and time.monotonic() < deadline:
        time.sleep(0.05)
    return [int(p) for f in sorted(d.glob("pids*")) for p in f.read_text().split()]


def assert_gone(pids: list[int]) -> None:
    assert pids, "the test workers recorded no pids"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _spawner(tmp_path: Path, action: str) -> list[str]:
    script = tmp_path / "spawner.py"
    script.write_text(_SPAWNER.format(action=action))
    return [sys.executable, str(script), str(tmp_path)]


def test_a_crashed_worker_takes_its_children_with_it(tmp_path: Path) -> None:
    # rank 1 dies after starting two sleeps; rank 0 hangs: every one of the six must be gone
    cmd = _spawner(tmp_path, "time.sleep(0.5)\nif rank == '1': os._exit(7)\ntime.sleep(600)")
    t0 = time.monotonic()
    with pytest.raises(launch.LaunchError, match=r"process 1 of 2 died \(exit code 7\)"):
        launch.launch(cmd, nproc=2, timeout_s=30)
    assert time.monotonic() - t0 < 15
    assert_gone(_pids(tmp_path, 2))


def test_a_timeout_ends_the_whole_tree(tmp_path: Path) -> None:
    with pytest.raises(launch.LaunchError, match="timed out"):
        launch.launch(_spawner(tmp_path, "time.sleep(600)"), nproc=2, timeout_s=2)
    assert_gone(_pids(tmp_path, 2))


def test_children_left_by_a_successful_run_are_ended(tmp_path: Path) -> None:
    res = launch.launch(_spawner(tmp_path, "pass"), nproc=1, timeout_s=30)
    assert res.returncodes == (0,)
    assert_gone(_pids(tmp_path, 1))


@pytest.mark.parametrize(("kwargs", "err", "match"), [
    ({"timeout_s": float("nan")}, ValueError, r"timeout_s .*nan"),
    ({"timeout_s": float("inf")}, ValueError, r"timeout_s .*inf"),
    ({"timeout_s": 0}, ValueError, r"timeout_s .*got 0"),
    ({"timeout_s": -5}, ValueError, r"timeout_s .*-5"),
    ({"timeout_s": "10"}, TypeError, r"timeout_s"),
    ({"port": -1}, ValueError, r"port must be in \[0, 65535\].*-1"),
    ({"port": 70000}, ValueError, r"port .*70000"),
    ({"port": 1.5}, TypeError, r"port"),
    ({"nproc": 0}, ValueError, r"nproc must be >= 1, got 0"),
    ({"nproc": 2.0}, TypeError, r"nproc"),
    ({"devices_per_proc": -1}, ValueError, r"devices_per_proc"),
])
def test_bad_arguments_are_refused_before_anything_starts(kwargs: dict, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        launch.launch([sys.executable, "-c", "pass"], **kwargs)
