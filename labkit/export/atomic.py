"""Atomic writes: a file or a folder appears whole or not at all, and a failure leaves the old one (Lab 05).

A plain ``path.write_bytes(data)`` truncates the target *first*: a full disk, a killed process
or an exception half-way leaves a cut file where a good one was. Here every write goes to a
temporary name next to the target (same folder, so the same file system), is flushed and
fsync-ed, and only then renamed over the target (``os.replace``, atomic on POSIX). A folder (a
bundle) is written the same way as a whole: into a temporary sibling folder, then swapped in.

This module imports nothing from labkit: ``labkit.export.bundle`` uses it without its model code.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def _fsync_dir(folder: Path) -> None:
    """Make a rename inside `folder` durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems refuse fsync on a folder: the rename itself still happened
        pass
    finally:
        os.close(fd)


def _default_mode(folder: bool) -> int:
    """The permissions a plain open()/mkdir() would give: mkstemp/mkdtemp make private (0600/0700) ones."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if folder else 0o666) & ~umask


def _write_synced(path: Path, data: bytes) -> None:
    """Write bytes to a new file and fsync it, so a rename afterwards never exposes a partial file."""
    with open(path, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _unchanged(e: OSError, target: Path, what: str) -> OSError:
    """The same OSError kind, with a message naming the target and saying nothing was replaced."""
    hint = " (disk full?)" if e.errno in (27, 28, 122) else ""  # EFBIG, ENOSPC, EDQUOT
    return type(e)(e.errno, f"could not write {target}{hint}: {e.strerror or e}; {what}")


def write_file(path: str | Path, data: bytes) -> Path:
    """(Lab 05) Write `data` to `path` atomically: temp file in the same folder, fsync, os.replace."""
    path = Path(path)
    existed = path.exists()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, path.stat().st_mode & 0o7777 if existed else _default_mode(folder=False))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise _unchanged(e, path, "the previous file is unchanged" if existed else "nothing was written") from e
        raise
    _fsync_dir(path.parent)
    return path


def replace_folder(root: str | Path, files: dict[str, bytes]) -> Path:
    """(Lab 05) Make folder `root` hold exactly `files` ({name: bytes}), all at once; a failure keeps the old one.

    Written into a temporary sibling folder, then swapped: old folder renamed aside, new one
    renamed in, old one removed. Only the instant between the two renames has no `root`.
    """
    root = Path(root)
    existed = root.exists()
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".new", dir=root.parent))
    try:
        os.chmod(tmp, root.stat().st_mode & 0o7777 if existed else _default_mode(folder=True))
        for name, data in files.items():
            _write_synced(tmp / name, data)
        _fsync_dir(tmp)
        if existed:
            old = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".old", dir=root.parent))
            try:
                os.rename(root, old / root.name)  # aside, inside a fresh folder: the name cannot clash
            except BaseException:
                old.rmdir()
                raise
            try:
                os.rename(tmp, root)
            except BaseException:
                os.rename(old / root.name, root)  # put the previous folder back exactly as it was
                old.rmdir()
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, root)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):
            raise _unchanged(e, root, "the previous folder is unchanged" if existed else "nothing was written") from e
        raise
    _fsync_dir(root.parent)
    return root
