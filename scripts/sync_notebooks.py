"""Rewrite the first code cell of every lab and colab notebook from labkit.course.first_cell().

Run after changing labkit/course.py (e.g. pinning a release tag):  .venv/bin/python scripts/sync_notebooks.py
tests/test_course.py fails until the notebooks agree with labkit.course.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from labkit.course import first_cell

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    """Sync the bootstrap cell of labs/NN_*.ipynb and colab/*.ipynb; keep everything else."""
    for path in sorted(ROOT.glob("labs/[0-9][0-9]_*.ipynb")) + sorted(ROOT.glob("colab/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if c.cell_type == "code")
        if cell.source != first_cell():
            cell.source = first_cell()
            nbformat.write(nb, path)
            print(f"updated {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
