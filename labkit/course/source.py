"""Where the course lives: repository, pinned ref, the labs' first cell and their badges.

The one place that knows the repository's URL and ref. The first cell of every lab, the
"Open in Colab/Kaggle" badges in the README and the Colab/Kaggle bootstrap are all
generated from here, and a test checks they agree.
"""

from __future__ import annotations

from pathlib import Path

REPO = "accelerator-labs/accelerator-labs"  # GitHub owner/name
REF = "main"  # branch or tag the notebooks, badges and the bootstrap fetch; pin a release tag here
CLONE_DIR = "accelerator-labs"  # where Colab/Kaggle clone it, relative to the notebook's folder

FIRST_CELL = """\
try:
    import labkit
except ModuleNotFoundError:  # Colab / Kaggle: fetch the course once, at its pinned ref
    import os, subprocess, sys
    if not os.path.isdir("{dest}"):
        subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", "{ref}", "{url}", "{dest}"], check=True)
    sys.path.insert(0, os.path.abspath("{dest}"))
    import labkit

rt = labkit.setup()  # detect the runtime, add missing packages (never torch/jax), simulate 8 CPU devices"""


def repo_url() -> str:
    """HTTPS clone URL of the course repository (Lab 00)."""
    return f"https://github.com/{REPO}"


def first_cell(ref: str = REF) -> str:
    """The bootstrap cell every lab starts with, rendered for ``ref`` (Lab 00)."""
    return FIRST_CELL.format(dest=CLONE_DIR, ref=ref, url=repo_url())


def colab_url(notebook: str | Path, ref: str = REF) -> str:
    """"Open in Colab" link for a notebook path relative to the repository root (Lab 00)."""
    return f"https://colab.research.google.com/github/{REPO}/blob/{ref}/{Path(notebook).as_posix()}"


def kaggle_url(notebook: str | Path, ref: str = REF) -> str:
    """"Open in Kaggle" link for a notebook path relative to the repository root (Lab 00)."""
    return f"https://kaggle.com/kernels/welcome?src=https://github.com/{REPO}/blob/{ref}/{Path(notebook).as_posix()}"


def badges(notebook: str | Path) -> str:
    """Markdown for both badges of one notebook (Lab 00)."""
    colab = "https://colab.research.google.com/assets/colab-badge.svg"
    kaggle = "https://kaggle.com/static/images/open-in-kaggle.svg"
    return f"[![Open in Colab]({colab})]({colab_url(notebook)}) [![Open in Kaggle]({kaggle})]({kaggle_url(notebook)})"
