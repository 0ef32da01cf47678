"""Shared test set-up: the repository root and helpers to run Python in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter: JAX device counts are per process."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)


def run_result(code: str, timeout: float = 300, tail: int = 3000) -> dict:
    """Run ``code`` in a fresh interpreter; it must succeed and print ``RESULT<json>``: that json."""
    proc = run_python(code, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-tail:]
    return json.loads([l for l in proc.stdout.splitlines() if l.startswith("RESULT")][-1][len("RESULT"):])


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def report_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exercise checks print and return instead of raising ("report, don't stop")."""
    from labkit.course.check import MODE_ENV

    monkeypatch.setenv(MODE_ENV, "report")


@pytest.fixture
def stop_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exercise checks in their default mode: a wrong answer raises."""
    from labkit.course.check import MODE_ENV

    monkeypatch.delenv(MODE_ENV, raising=False)


# The files that take longest on 2 cores, first: pytest-xdist's --dist loadfile hands files out in collection
# order, so the ~11-minute run of every lab (tests/test_labs.py) would otherwise start last and end alone.
LONGEST_FIRST = ("tests/test_labs.py", "tests/course/test_lowering.py", "tests/precision/test_train.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move the longest test files to the front, keeping every file's own order (CI's wall time)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order
