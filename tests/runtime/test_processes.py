"""labkit.runtime.processes: a tree ends everything a run started, orphans in other sessions included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.runtime.processes import ProcessTree


def assert_gone(pids: list[int]) -> None:
    assert pids, "no pids recorded"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_process_tree_finds_orphans_by_tag(tmp_path: Path) -> None:
    # A double fork: the grandchild is orphaned to init in a session of its own, found by its tag.
    tree = ProcessTree()
    pidfile = tmp_path / "pid"
    code = ("import subprocess, sys\n"
            f"p = subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
            f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], env=tree.env(), start_new_session=True)
    tree.add(proc)
    proc.wait(timeout=30)
    orphan = int(pidfile.read_text())
    assert orphan in tree.watch()
    ended = tree.end()
    assert orphan in ended
    assert_gone([orphan, proc.pid])


def test_process_tree_ends_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    # A worker that traps SIGTERM is still ended (SIGKILL after the grace period) and checked gone.
    tree = ProcessTree()
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    proc = subprocess.Popen([sys.executable, "-c", code], env=tree.env(), start_new_session=True)
    tree.add(proc)
    assert proc.pid in tree.end(0.5)
    assert_gone([proc.pid])
