"""Where the benchmark scripts write: benchmarks/results/<kind>_<device>_<host>.json.

Imported by the bench_*.py scripts, which are run as files (``python benchmarks/bench_mfu.py``),
so this folder is on ``sys.path``.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def slug(text: str) -> str:
    """A file-name-safe lower-case slug, e.g. "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "unknown"


def default_path(kind: str, device_name: str) -> Path:
    """benchmarks/results/<kind>_<device>_<host>.json for a benchmark run on this host."""
    return RESULTS / f"{kind}_{slug(device_name)}_{slug(socket.gethostname())}.json"
