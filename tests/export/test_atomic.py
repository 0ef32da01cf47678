"""labkit.export.atomic: a failed write leaves the previous file or folder exactly as it was (Lab 05)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labkit.export import atomic


def _fail_on(monkeypatch: pytest.MonkeyPatch, name: str, call: int, errno: int = 28) -> None:
    """Make os.<name> raise a disk-full OSError on its call-th call (1-based)."""
    real, calls = getattr(os, name), [0]

    def flaky(*args, **kwargs):
        calls[0] += 1
        if calls[0] == call:
            raise OSError(errno, os.strerror(errno))
        return real(*args, **kwargs)

    monkeypatch.setattr(atomic.os, name, flaky)


def test_write_file_failure_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "w.bin"
    atomic.write_file(p, b"old")
    p.chmod(0o640)
    _fail_on(monkeypatch, "fsync", 1)  # the disk fills while the new bytes are flushed
    with pytest.raises(OSError, match=r"could not write .*w.bin \(disk full\?\).*the previous file is unchanged"):
        atomic.write_file(p, b"new and longer")
    assert p.read_bytes() == b"old" and os.listdir(tmp_path) == ["w.bin"]  # no temp file left behind
    monkeypatch.undo()
    atomic.write_file(p, b"new")
    assert p.read_bytes() == b"new" and p.stat().st_mode & 0o777 == 0o640  # the file keeps its permissions


def test_replace_folder_failure_at_any_point_keeps_the_old_folder(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "b"
    atomic.replace_folder(root, {"a": b"1", "b": b"2"})
    before = {p.name: p.read_bytes() for p in root.iterdir()}
    for name, call in (("fsync", 2), ("rename", 2), ("rename", 1)):  # mid-write, swapping in, moving aside
        _fail_on(monkeypatch, name, call)
        with pytest.raises(OSError, match="the previous folder is unchanged"):
            atomic.replace_folder(root, {"a": b"new", "c": b"3"})
        monkeypatch.undo()
        assert {p.name: p.read_bytes() for p in root.iterdir()} == before, (name, call)
        assert os.listdir(tmp_path) == ["b"], f"temporary folders left after a failed {name}"
    atomic.replace_folder(root, {"a": b"new", "c": b"3"})
    assert {p.name: p.read_bytes() for p in root.iterdir()} == {"a": b"new", "c": b"3"}
    assert os.listdir(tmp_path) == ["b"]
