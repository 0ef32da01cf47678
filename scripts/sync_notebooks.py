"""Bring notebooks and README in line with labkit/course/source.py (repository, ref).

Rewrites the first code cell of every lab and colab notebook from labkit.course.source.first_cell(),
and the Colab/Kaggle badges in the README's lab table from labkit.course.source.badges(). Run after
changing labkit/course/source.py (e.g. the real repository or a release tag):
    .venv/bin/python scripts/sync_notebooks.py
tests/course/test_source.py fails until notebooks and README agree with labkit.course.source.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from labkit.course.source import badges, first_cell

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
    readme = ROOT / "README.md"
    lines = readme.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):  # a lab row: | [NN title](labs/NN_x.ipynb) | question | badges | times... |
        cells = line.split(" | ")
        if line.startswith("| [") and "(labs/" in cells[0] and len(cells) >= 4:
            notebook = cells[0].split("(", 1)[1].rstrip(")")
            cells[2] = badges(notebook)
            lines[i] = " | ".join(cells)
    readme.write_text("".join(lines))


if __name__ == "__main__":
    main()
