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


def test_a_tree_gives_its_processes_a_tmpdir_it_removes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What a killed kernel leaves (its connection file) or torchrun always leaves (torchelastic_*) goes with the tree.
    outer = tmp_path / "tmp"
    outer.mkdir()
    monkeypatch.setenv("TMPDIR", str(outer))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    tree = ProcessTree()
    env = tree.env()
    code = "import tempfile; tempfile.mkdtemp(prefix='torchelastic_'); print(tempfile.gettempdir())"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    tree.add(proc)
    seen = Path(proc.communicate(timeout=30)[0].strip())
    assert seen == tree.tmpdir and seen.parent == outer  # inside the caller's TMPDIR, one per tree
    assert env["TMP"] == env["TEMP"] == str(seen)
    # torch.compile's cache stays where torch puts it by default: it is meant to outlive a run.
    assert Path(env["TORCHINDUCTOR_CACHE_DIR"]).parent == outer
    tree.end()
    assert [n.split("_")[0] for n in tree.left_in_tmp] == ["torchelastic"]
    assert list(outer.iterdir()) == []  # removed, contents and all
    assert tree.remove_tmp() == tree.left_in_tmp  # a second end() or remove_tmp() changes nothing


def test_a_tree_keeps_a_callers_compile_cache_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    tree = ProcessTree()
    try:
        assert tree.env()["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "cache")
    finally:
        tree.end()
    assert tree.tmpdir is None
