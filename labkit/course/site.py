"""The course as a static site: the labs with a reference run's outputs, links, guide, cross-chip page (course).

``assemble`` writes a Sphinx + MyST-NB source tree: each lab as its executed notebook from a
reference run (a committed GPU run under ``benchmarks/<device>/`` whose executed notebooks are
committed, else a CPU run made before the build), with a banner naming the device, profile,
versions and commit it ran on, and its Colab/Kaggle links; an index; the instructor guide; and
the gathered cross-chip page of ``benchmarks/``. ``bash scripts/course.sh site`` runs
``sphinx-build`` on it (the optional ``site`` extra). Nothing is written into ``labs/``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.course import gather, source
from labkit.course.runner import available_labs, labs_dir

ROOT = Path(__file__).resolve().parents[2]
COMMIT_FILE = "commit.txt"  # course.sh writes the commit a run was made at next to its report

CONF = '''# Written by labkit.course.site (a build product): Sphinx + MyST-NB, outputs from the reference run.
project = "Accelerator Labs"
author = "Accelerator Labs"
extensions = ["myst_nb"]
nb_execution_mode = "off"  # the site never runs code: it shows the reference run's outputs
nb_output_stderr = "remove"  # progress bars and warnings on stderr are noise on a page
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "colon_fence"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
html_extra_path = ["_extra"]  # the gathered cross-chip page, copied as it is
html_title = "Accelerator Labs"
suppress_warnings = ["myst.header", "myst.xref_missing", "mystnb.unknown_mime_type"]
try:
    import sphinx_book_theme  # noqa: F401
    html_theme = "sphinx_book_theme"
    html_theme_options = {{"repository_url": "{repo}", "use_repository_button": True}}
except ImportError:  # the site extra brings it; a bare Sphinx still builds the site
    html_theme = "alabaster"
'''


PAPERMILL_TAGS = {"injected-parameters", "papermill-error-cell-tag"}
_DISPLAY, _INLINE = re.compile(r"\\\[(.+?)\\\]", re.S), re.compile(r"\\\((.+?)\\\)", re.S)


def tex_to_dollars(markdown: str) -> str:
    """``\\[..\\]`` / ``\\(..\\)`` (Jupyter's MathJax) as ``$$..$$`` / ``$..$``, which MyST renders (course)."""
    return _INLINE.sub(r"$\1$", _DISPLAY.sub(r"$$\1$$", markdown))


@dataclass
class SitePage:
    """One lab page of the site: which notebook it shows and how it is labelled (course)."""

    lab: str
    source: str  # the notebook the page was made from
    executed: bool  # False: the reference run has no executed copy; the page shows the clean lab
    status: str  # the lab's status in the reference run, or "not run"
    banner: str  # the markdown cell put under the lab's title


def reference_run(benchmarks: Path) -> Path | None:
    """A committed accelerator run whose executed notebooks are committed beside its report, else None (course)."""
    for report_file in sorted(Path(benchmarks).glob("*/report.json")):
        report, _ = gather.load(report_file)
        if report is None or (report.get("runtime") or {}).get("platform") == "cpu":
            continue
        notebooks = [report_file.parent / lab.get("notebook", "") for lab in report["labs"]]
        if notebooks and all(nb.is_file() and nb.suffix == ".ipynb" for nb in notebooks):
            return report_file.parent
    return None


def run_commit(run_dir: Path, report: dict[str, Any]) -> str:
    """The commit the run was made at: the report's, else the file course.sh wrote, else "unknown" (course)."""
    if report.get("commit"):
        return str(report["commit"])
    f = Path(run_dir) / COMMIT_FILE
    return f.read_text().strip() if f.is_file() and f.read_text().strip() else "unknown (not recorded)"


def banner(report: dict[str, Any], lab: dict[str, Any] | None, commit: str, notebook: str) -> str:
    """The label under a lab's title: Colab/Kaggle links, device, profile, versions, commit, status (course)."""
    rt = report.get("runtime") or {}
    v = report.get("versions") or {}
    stack = ", ".join(f"{k} {v[k]}" for k in ("python", "jax", "flax", "torch", "numpy") if v.get(k))
    sim = f", {rt.get('device_count')} simulated devices" if rt.get("simulated") else ""
    profile = str(report.get("profile_requested", report.get("profile", "?")))  # what was asked: "auto"
    resolved = ((lab or {}).get("metrics") or {}).get("profile")
    if resolved and resolved != profile:  # "auto" picks smoke or full per chip: say which it picked
        profile = f"{profile} → {resolved}"
    lines = [
        source.badges(notebook), "",
        ":::{note}",
        f"**Outputs on this page come from a reference run**, not from your runtime: device "
        f"**{report.get('device', 'unknown')}** ({rt.get('platform', '?')}{sim}), profile "
        f"**{profile}**, started {report.get('started', '?')}; course version "
        f"{gather.report_version(report)}, commit `{commit}`; {stack}.",
    ]
    if lab is None:
        lines.append("This lab has no executed copy in the reference run: the page shows the lab without outputs.")
    elif lab.get("status") != "ok":
        err = lab.get("error") or {}
        lines.append(f"In that run this lab **{lab.get('status')}** at cell {err.get('cell', '?')}: "
                     f"`{err.get('ename', '')}: {str(err.get('evalue', ''))[:200]}`; outputs stop there.")
    else:
        lines.append(f"In that run this lab passed in {lab.get('seconds', 0):.0f} s.")
    lines.append(":::")
    return "\n".join(lines)


def _page(nb_path: Path, label: str, out: Path) -> None:
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    # papermill's injected PROFILE cell and its red "An Exception was encountered" cells are the
    # runner's, not the lab's: the banner names the profile and the failing cell instead
    nb["cells"] = cells = [c for c in nb.get("cells", [])
                           if not set(c.get("metadata", {}).get("tags", [])) & PAPERMILL_TAGS]
    for c in cells:
        if c.get("cell_type") == "markdown":
            c["source"] = tex_to_dollars("".join(c.get("source", "")))
    # under the title: the lab's first markdown cell holds its "# Lab NN" heading, the page title
    at = 1 if cells and cells[0].get("cell_type") == "markdown" else 0
    cell = {"cell_type": "markdown", "metadata": {}, "source": label}
    if (nb.get("nbformat"), nb.get("nbformat_minor", 0)) >= (4, 5):
        cell["id"] = "labkit-site-banner"  # nbformat 4.5 requires cell ids
    cells.insert(at, cell)
    out.write_text(json.dumps(nb, indent=1), encoding="utf-8")


def _index(pages: list[SitePage], report: dict[str, Any], commit: str, gathered: bool) -> str:
    rows = [f"| [{p.lab}](labs/{p.lab}.ipynb) | {p.status} | {source.badges(f'labs/{p.lab}.ipynb')} |" for p in pages]
    cross = ("- <a href=\"gathered/index.html\">Across chips</a>: every committed run report gathered by "
             "`labkit gather benchmarks/` (runs, failures, key numbers, plots, chip-table checks)\n" if gathered else "")
    return "\n".join([
        "# Accelerator Labs", "",
        "A notebook-first, hands-on course on **GPU vs TPU for AI**. Read the labs here with the outputs of a "
        "reference run, then open them on your own runtime with the Colab or Kaggle link.", "",
        f"Reference run: **{report.get('device', 'unknown')}**, profile {report.get('profile', '?')}, started "
        f"{report.get('started', '?')}, commit `{commit}`.", "",
        "| lab | in the reference run | open |", "| --- | --- | --- |", *rows, "",
        cross + "- [Instructor guide](instructor.md)", "",
        "```{toctree}", ":hidden:", ":caption: Labs", "", *[f"labs/{p.lab}" for p in pages], "```", "",
        "```{toctree}", ":hidden:", ":caption: For instructors", "", "instructor", "```", ""])


def assemble(run_dir: str | Path, src: str | Path, benchmarks: str | Path | None = None,
             labs: list[Path] | None = None, guide: Path | None = None) -> list[SitePage]:
    """Write the site's Sphinx source tree into ``src`` from a run folder; return its lab pages (course)."""
    run_dir, src = Path(run_dir), Path(src)
    report, why = gather.load(run_dir / "report.json")
    if report is None:
        raise FileNotFoundError(f"{run_dir / 'report.json'}: {why}; make the reference run first "
                                f"(labkit run --out {run_dir}) or point --run at one")
    if src.exists():
        shutil.rmtree(src)  # a build product: never mix pages from two runs
    (src / "labs").mkdir(parents=True)
    commit = run_commit(run_dir, report)
    by_name = {lab["name"]: lab for lab in report["labs"]}
    pages = []
    for clean in labs if labs is not None else available_labs():
        lab = by_name.get(clean.stem)
        executed = run_dir / lab.get("notebook", "") if lab else None
        use = executed if executed is not None and executed.is_file() else clean
        label = banner(report, lab if use != clean else None, commit, f"labs/{clean.name}")
        _page(use, label, src / "labs" / clean.name)
        pages.append(SitePage(clean.stem, str(use), use != clean, lab["status"] if lab else "not run", label))
    guide = guide if guide is not None else labs_dir() / "INSTRUCTOR.md"
    if guide.is_file():
        shutil.copy(guide, src / "instructor.md")
    gathered = False
    if benchmarks is not None and gather.find_reports([benchmarks])[0]:
        gather.write([benchmarks], src / "_extra" / "gathered")
        gathered = True
    (src / "index.md").write_text(_index(pages, report, commit, gathered), encoding="utf-8")
    (src / "conf.py").write_text(CONF.format(repo=source.repo_url()), encoding="utf-8")
    return pages


def build(src: str | Path, out: str | Path, sphinx_build: str = "sphinx-build") -> subprocess.CompletedProcess:
    """Run ``sphinx-build -b html`` on an assembled tree (needs the ``site`` extra) (course)."""
    return subprocess.run([sphinx_build, "-q", "-b", "html", str(src), str(out)], capture_output=True, text=True)


def main(argv: list[str] | None = None) -> int:
    """`python -m labkit.course.site reference|assemble ...`: what course.sh's `site` command calls (course)."""
    p = argparse.ArgumentParser(prog="python -m labkit.course.site", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    ref = sub.add_parser("reference", help="print the committed GPU run to build from; exit 1 if there is none")
    ref.add_argument("--benchmarks", default=str(ROOT / "benchmarks"))
    a = sub.add_parser("assemble", help="write the Sphinx source tree from a run folder")
    a.add_argument("--run", required=True, help="a `labkit run --out` folder: report.json + executed notebooks")
    a.add_argument("--src", required=True, help="where to write the source tree (replaced)")
    a.add_argument("--benchmarks", default=str(ROOT / "benchmarks"), help="run reports for the cross-chip page")
    args = p.parse_args(argv)
    if args.command == "reference":
        found = reference_run(Path(args.benchmarks))
        if found is None:
            print("no committed accelerator run with executed notebooks under " + args.benchmarks, file=sys.stderr)
            return 1
        print(found)
        return 0
    try:
        pages = assemble(args.run, args.src, args.benchmarks)
    except FileNotFoundError as e:
        print(f"site: {e}", file=sys.stderr)
        return 2
    for page in pages:
        print(f"{page.lab:32s} {page.status:8s} {'executed' if page.executed else 'NOT EXECUTED (clean lab)'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
