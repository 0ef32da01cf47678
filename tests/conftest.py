"""Shared test set-up: the repository root and a helper to run Python in a fresh process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter: JAX device counts are per process."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)


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
