"""One exercise check over many random draws: a hint must not depend on the cases a seed happens to give."""

from __future__ import annotations

from types import ModuleType
from typing import Iterator

import numpy as np
import pytest

from labkit.course import check


def over_seeds(monkeypatch: pytest.MonkeyPatch, module: ModuleType, n: int = 40) -> Iterator[int]:
    """Report mode, then ``module``'s case generator reseeded 0, 1, ... n - 1; yields each seed."""
    monkeypatch.setenv(check.MODE_ENV, "report")
    for seed in range(n):
        monkeypatch.setattr(module, "_rng", lambda seed=seed: np.random.default_rng(seed))
        yield seed
