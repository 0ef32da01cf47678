"""Process trees: everything a run started, ended together on every exit path and checked gone (Lab 03; every lab run).

``labkit run`` (each lab's papermill, its kernel -- which jupyter starts in a session of its own --
and whatever the lab starts) and the multi-process launcher of Lab 03 both start their processes
through a :class:`ProcessTree`, so a crash, a hang or a timeout leaves nothing running -- and
nothing in the temp folder: the tree's processes get a TMPDIR of their own, removed when the tree
ends (a killed kernel's connection file, torchrun's ``torchelastic_*`` log folder).
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

TAG_ENV = "LABKIT_PROCESS_TAGS"  # ":"-joined run tags; every descendant inherits them
_PROC = Path("/proc")
TMP_ENVS = ("TMPDIR", "TEMP", "TMP")  # where Python's tempfile (and most tools) put scratch files
REAP_WAIT_S = 3.0  # how long to wait for init to reap killed orphans (some containers' init polls every ~2 s)


class ProcessesLeftRunning(RuntimeError):
    """Processes of a run survived SIGKILL (e.g. stuck in the kernel); the message lists them (Lab 03)."""


def _table() -> dict[int, tuple[int, int, int, str]]:
    """{pid: (ppid, pgid, sid, state)} of every visible process: /proc on Linux, else ``ps``."""
    out: dict[int, tuple[int, int, int, str]] = {}
    if _PROC.is_dir():
        for d in _PROC.iterdir():
            if not d.name.isdigit():
                continue
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue  # exited while we looked
            f = stat[stat.rindex(")") + 2:].split()  # after "(comm)", which may hold spaces
            out[int(d.name)] = (int(f[1]), int(f[2]), int(f[3]), f[0])
        return out
    # macOS / BSD: no sessions in ps's output (its "sess" is a kernel address); groups suffice
    ps = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,pgid=,state="], capture_output=True, text=True)
    for line in ps.stdout.splitlines():
        pid, ppid, pgid, state = line.split()[:4]
        out[int(pid)] = (int(ppid), int(pgid), int(pgid), state[0])
    return out


def _user() -> str:
    """The user name as torch's inductor spells it in its default cache folder."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
    return re.sub(r'[\\/:*?"<>|]', "_", name)


def _has_tag(pid: int, tag: str) -> bool:
    """Whether the process started with ``tag`` in its TAG_ENV (Linux; False where unreadable)."""
    try:
        env = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    for item in env.split(b"\0"):
        if item.startswith(TAG_ENV.encode() + b"="):
            return tag.encode() in item.split(b"=", 1)[1].split(b":")
    return False


class ProcessTree:
    """Every process a run started, ended together and checked gone (Lab 03).

    Start each root with ``env=tree.env(...)`` and ``start_new_session=True``, then
    :meth:`add` it. A member is a live root, any descendant, any process in a session or group
    seen among the members, or any process that inherited this tree's tag — so a kernel that
    jupyter starts in a session of its own, or a grandchild orphaned to init, is still found.
    """

    def __init__(self) -> None:
        self.tag = f"labkit-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.roots: list[subprocess.Popen] = []
        self.groups: set[int] = set()  # process-group and session ids seen among the members
        self.pids: set[int] = set()  # every member ever seen (for the caller's records)
        # Never ours: this process, its group, its session (the runner must not kill itself).
        self._mine = {os.getpid(), os.getpgrp(), os.getsid(0)}
        self.tmpdir: Path | None = None  # the members' TMPDIR, made by env(), removed by end()
        self.left_in_tmp: list[str] = []  # what the members left there, as end() found it

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default os.environ) with this tree's tag and its own TMPDIR (Lab 03)."""
        env = dict(os.environ if base is None else base)
        env[TAG_ENV] = ":".join(t for t in (env.get(TAG_ENV, ""), self.tag) if t)
        outer = env.get("TMPDIR") or tempfile.gettempdir()
        if self.tmpdir is None:
            self.tmpdir = Path(tempfile.mkdtemp(prefix="labkit-tmp-", dir=outer))
        # torch.compile's cache lives in the temp folder by default: keep it where it was, so it
        # outlives the tree (a compile cache is meant to be reused, not swept with the scratch).
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(outer, f"torchinductor_{_user()}"))
        env.update(dict.fromkeys(TMP_ENVS, str(self.tmpdir)))
        return env

    def remove_tmp(self) -> list[str]:
        """Remove the members' TMPDIR; the names they left in it, sorted (Lab 03; every lab run)."""
        if self.tmpdir is not None:
            try:
                self.left_in_tmp = sorted(p.name for p in self.tmpdir.iterdir())
            except OSError:
                self.left_in_tmp = []
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None
        return self.left_in_tmp

    def add(self, proc: subprocess.Popen) -> None:
        """Follow ``proc`` and everything it starts (Lab 03)."""
        self.roots.append(proc)
        self.watch()

    def watch(self) -> set[int]:
        """The members now, remembering their groups and sessions; call it now and then (Lab 03)."""
        table = _table()
        live_roots = {p.pid for p in self.roots if p.poll() is None}  # a reaped pid may be reused
        members, frontier = set(live_roots), list(live_roots)
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        while True:
            while frontier:  # descendants
                for c in children.get(frontier.pop(), []):
                    if c not in members:
                        members.add(c)
                        frontier.append(c)
            extra = {pid for pid, (_, pgid, sid, _) in table.items() if pid not in members
                     and (pgid in self.groups or sid in self.groups or _has_tag(pid, self.tag))}
            members -= self._mine
            extra -= self._mine | members
            for pid in members:
                _, pgid, sid, _ = table.get(pid, (0, 0, 0, ""))
                self.groups |= {g for g in (pgid, sid) if g > 1} - self._mine
            if not extra:
                break
            members |= extra  # their descendants, groups and sessions count too
            frontier = list(extra)
        members = {pid for pid in members if table.get(pid, (0, 0, 0, "Z"))[3] != "Z"}
        self.pids |= members
        return members

    def _signal(self, pids: set[int], sig: int) -> None:
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def end(self, grace_s: float = 0.0, wait_s: float = 5.0) -> list[int]:
        """SIGTERM all, wait up to ``grace_s``, freeze and SIGKILL the rest, check all gone (Lab 03).

        Then removes the members' TMPDIR (what was in it: :attr:`left_in_tmp`). Returns every pid
        ended; raises :class:`ProcessesLeftRunning` if any outlives ``wait_s`` (the TMPDIR stays then:
        a live process may still use it).
        """
        ended: set[int] = set()
        if grace_s > 0:
            members = self.watch()
            ended |= members
            self._signal(members, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while members and time.monotonic() < deadline:
                time.sleep(0.05)
                members = self.watch()
        # Freeze before the kill: a stopped process cannot fork a child we would then miss.
        stopped: set[int] = set()
        for _ in range(50):
            new = self.watch() - stopped
            if not new:
                break
            self._signal(new, signal.SIGSTOP)
            stopped |= new
        self._signal(stopped, signal.SIGKILL)
        for g in self.groups:  # whole groups too: members we could not see (another uid, no /proc)
            try:
                os.killpg(g, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        ended |= stopped
        for p in self.roots:
            try:
                p.wait(timeout=wait_s)  # reap our own children
            except subprocess.TimeoutExpired:
                pass
        now = time.monotonic()
        deadline, reaped_by = now + wait_s, now + REAP_WAIT_S
        while True:
            table = _table()
            # Gone: no such pid, or a zombie (dead already; init reaps it, given a moment).
            alive = {pid for pid in ended if table.get(pid, (0, 0, 0, "Z"))[3] != "Z"} | self.watch()
            if not alive:
                if not any(pid in table for pid in ended) or time.monotonic() > reaped_by:
                    self.remove_tmp()
                    return sorted(ended)
            elif time.monotonic() > deadline:
                raise ProcessesLeftRunning(
                    f"process(es) {sorted(alive)} survived SIGKILL for {wait_s:.0f} s (stuck in an "
                    f"uninterruptible system call?); end them by hand: kill -9 {' '.join(map(str, sorted(alive)))}")
            self._signal(alive, signal.SIGKILL)
            time.sleep(0.02)
