"""Where the course lives: repository, pinned ref, the labs' first cell and their badges.

The one place that knows the repository's URL and ref. The first cell of every lab, the
"Open in Colab/Kaggle" badges in the README and the Colab/Kaggle bootstrap are all
generated from here, and a test checks they agree.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = "accelerator-labs/accelerator-labs"  # GitHub owner/name
VERSION = "0.1.0"  # this course release; pyproject.toml and labkit.__version__ equal it (a test checks)
REF = f"v{VERSION}"  # the release tag the notebooks, badges and bootstrap fetch: tag each release so
CLONE_DIR = "accelerator-labs"  # where Colab/Kaggle clone it, relative to the notebook's folder
COURSE = "accelerator-labs"  # labkit.COURSE: tells this package apart from unrelated ones named labkit
REF_ENV, URL_ENV = "LABKIT_REF", "LABKIT_REPO_URL"  # forks and mirrors override the ref and URL with these

FIRST_CELL = """\
import os, subprocess, sys
REF = os.environ.get("{ref_env}", "{ref}")  # the course release these labs belong to
URL = os.environ.get("{url_env}", "{url}")  # forks and mirrors: set these two
try:
    import labkit
    if getattr(labkit, "COURSE", None) != "{course}":  # an unrelated package that is also named labkit
        raise ModuleNotFoundError("labkit")
except ModuleNotFoundError:  # Colab / Kaggle: fetch the course once, at its pinned ref
    if not os.path.isdir("{dest}"):
        subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", REF, URL, "{dest}"], check=True)
    sys.path.insert(0, os.path.abspath("{dest}"))
    sys.modules.pop("labkit", None)
    import labkit

if not hasattr(labkit, "check_source"):
    raise RuntimeError(f"{{labkit.__file__}} is an older course release: delete that checkout and rerun this cell")
labkit.check_source(REF)  # a stale or foreign checkout stops here and says what to do
rt = labkit.setup()  # detect the runtime, add missing packages (never torch/jax), simulate 8 CPU devices"""


class SourceError(RuntimeError):
    """The course source on this machine is not the release the notebooks belong to (Lab 00)."""


def repo_url() -> str:
    """HTTPS clone URL of the course repository (Lab 00)."""
    return f"https://github.com/{REPO}"


def first_cell(ref: str = REF) -> str:
    """The bootstrap cell every lab starts with, rendered for ``ref`` (Lab 00)."""
    return FIRST_CELL.format(dest=CLONE_DIR, ref=ref, url=repo_url(), ref_env=REF_ENV, url_env=URL_ENV, course=COURSE)


def _git(root: Path, *args: str) -> str | None:
    out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def commit(root: Path | None = None) -> str | None:
    """Short git commit of the course checkout, "+dirty" with uncommitted changes; None outside git (Lab 00)."""
    root = Path(root) if root is not None else Path(__file__).resolve().parents[2]
    head = _git(root, "rev-parse", "--short=12", "HEAD")
    if head is None:
        return None
    clean = subprocess.run(["git", "-C", str(root), "diff", "--quiet", "HEAD"], capture_output=True).returncode == 0
    return head if clean else f"{head}+dirty"


def check_source(ref: str = REF, root: Path | None = None, quiet: bool = False) -> str:
    """Stop on a stale or foreign checkout: labkit must be ``ref``'s release, a fetched clone at ``ref`` (Lab 00).

    ``root`` is the folder holding ``labkit/`` (default: this one). A release tag ``vX.Y.Z`` must
    name this labkit's VERSION; a clone the bootstrap fetched (shallow, named CLONE_DIR) must have
    ``ref`` checked out. A branch ref (a fork) skips the version check. Returns the one-line summary.
    """
    root = Path(root) if root is not None else Path(__file__).resolve().parents[2]
    fix = f"delete {root} and rerun the first cell to fetch {ref}, or set {REF_ENV}=v{VERSION} to keep it"
    m = re.fullmatch(r"v(\d+(?:\.\d+)*)", ref)
    if m and m.group(1) != VERSION:
        raise SourceError(f"the labkit in {root} is release v{VERSION}, but these notebooks belong to {ref} "
                          f"(a stale or foreign checkout). Remedy: {fix}.")
    if root.name == CLONE_DIR and (root / ".git" / "shallow").exists():  # fetched by the first cell: verify it
        head, want = _git(root, "rev-parse", "HEAD"), _git(root, "rev-parse", f"{ref}^{{commit}}")
        if head is None or head != want:
            raise SourceError(f"{root} is at commit {(head or '?')[:12]}, not at {ref} "
                              f"({'unknown there' if want is None else want[:12]}). Remedy: {fix}.")
    summary = f"course source: labkit v{VERSION} from {root} (ref {ref})"
    if not quiet:
        print(summary)
    return summary


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
