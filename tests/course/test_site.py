"""labkit.course.site: the source tree (which notebooks, which labels, the links); the Sphinx build when installed."""

from __future__ import annotations

import base64
import io
import json
import shutil
from pathlib import Path

import pytest

from labkit.course import site, source

ROOT = Path(__file__).resolve().parents[2]


def png() -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def notebook(title: str, outputs: list | None = None, injected: bool = False, failed: bool = False) -> dict:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": f"# {title}\n\nWhat it asks: \\[x^2\\] and \\(y\\)."},
             {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": outputs or [],
              "source": "x = 1"}]
    if injected:
        cells.insert(1, {"cell_type": "code", "metadata": {"tags": ["injected-parameters"]}, "outputs": [],
                         "execution_count": 1, "source": "# Parameters\nPROFILE = 'auto'"})
    if failed:  # papermill's red banners, above the first cell and above the failing one
        tag = {"tags": ["papermill-error-cell-tag"]}
        cells.insert(0, {"cell_type": "markdown", "metadata": tag, "source": "<span>An Exception was encountered</span>"})
        cells.insert(-1, {"cell_type": "markdown", "metadata": tag, "source": "<span>Execution using papermill</span>"})
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture
def course(tmp_path: Path) -> dict[str, Path]:
    """Three clean labs, and a CPU run where 00 passed with a plot, 01 failed and 02 never ran."""
    labs, run = tmp_path / "labs", tmp_path / "run"
    labs.mkdir()
    run.mkdir()
    for stem, title in (("00_know", "Lab 00 — Know"), ("01_systolic", "Lab 01 — Systolic"), ("02_mfu", "Lab 02 — MFU")):
        (labs / f"{stem}.ipynb").write_text(json.dumps(notebook(title)))
    plot = {"output_type": "display_data", "metadata": {}, "data": {"image/png": png(), "text/plain": "<Figure>"}}
    (run / "00_know.ipynb").write_text(json.dumps(notebook("Lab 00 — Know", [plot], injected=True)))
    (run / "01_systolic.ipynb").write_text(json.dumps(notebook("Lab 01 — Systolic", injected=True, failed=True)))
    report = {"device": "AMD EPYC", "profile": "auto", "started": "2026-11-24T19:43:33+0000",
              "runtime": {"platform": "cpu", "device_count": 8, "simulated": True},
              "versions": {"python": "3.11.7", "jax": "0.10.2", "torch": "2.13.0+cpu"},
              "labs": [{"name": "00_know", "status": "ok", "seconds": 25.0, "metrics": {"profile": "smoke"},
                        "notebook": "00_know.ipynb"},
                       {"name": "01_systolic", "status": "failed", "seconds": 3.0, "metrics": {},
                        "notebook": "01_systolic.ipynb",
                        "error": {"cell": 4, "ename": "AssertionError", "evalue": "cycles differ"}}]}
    (run / "report.json").write_text(json.dumps(report))
    (run / site.COMMIT_FILE).write_text("74fa167\n")
    guide = tmp_path / "INSTRUCTOR.md"
    guide.write_text("# Instructor guide\n")
    bench = tmp_path / "benchmarks" / "cpu"
    bench.mkdir(parents=True)
    shutil.copy(run / "report.json", bench / "report.json")
    return {"labs": labs, "run": run, "guide": guide, "bench": bench.parent, "src": tmp_path / "src"}


def assemble(c: dict[str, Path], benchmarks: Path | None = None) -> list[site.SitePage]:
    return site.assemble(c["run"], c["src"], benchmarks, sorted(c["labs"].glob("*.ipynb")), c["guide"])


def test_pages_labels_and_links(course: dict[str, Path]) -> None:
    before = {p.name: p.read_text() for p in course["labs"].iterdir()}
    pages = assemble(course, course["bench"])
    assert [(p.lab, p.status, p.executed) for p in pages] == [
        ("00_know", "ok", True), ("01_systolic", "failed", True), ("02_mfu", "not run", False)]
    assert {p.name: p.read_text() for p in course["labs"].iterdir()} == before  # labs/ is never written

    nb = json.loads((course["src"] / "labs/00_know.ipynb").read_text())
    assert nb["cells"][0]["source"].startswith("# Lab 00")  # the title stays the page title
    b = nb["cells"][1]["source"]
    assert nb["cells"][1]["id"] == "labkit-site-banner"
    for needle in ("**AMD EPYC** (cpu, 8 simulated devices)", "**auto → smoke**", "commit `74fa167`",
                   "jax 0.10.2", "torch 2.13.0+cpu", "passed in 25 s", source.colab_url("labs/00_know.ipynb"),
                   source.kaggle_url("labs/00_know.ipynb")):
        assert needle in b, needle
    assert not any("injected-parameters" in c["metadata"].get("tags", []) for c in nb["cells"])
    assert nb["cells"][-1]["outputs"][0]["data"]["image/png"]  # the run's plot is on the page

    assert "$$x^2$$ and $y$" in nb["cells"][0]["source"]  # Jupyter's \\[..\\] as MyST's dollars
    failed_nb = json.loads((course["src"] / "labs/01_systolic.ipynb").read_text())
    assert failed_nb["cells"][0]["source"].startswith("# Lab 01")  # papermill's banners are gone
    assert not any("Exception was encountered" in c["source"] or "papermill" in c["source"] for c in failed_nb["cells"])
    assert "**failed** at cell 4: `AssertionError: cycles differ`" in failed_nb["cells"][1]["source"]
    clean = json.loads((course["src"] / "labs/02_mfu.ipynb").read_text())["cells"][1]["source"]
    assert "no executed copy in the reference run" in clean

    index = (course["src"] / "index.md").read_text()
    assert "[02_mfu](labs/02_mfu.ipynb) | not run |" in index and "labs/00_know\n" in index
    assert "gathered/index.html" in index and "instructor" in index
    assert (course["src"] / "_extra/gathered/index.html").is_file()
    assert (course["src"] / "instructor.md").read_text() == "# Instructor guide\n"
    assert 'nb_execution_mode = "off"' in (course["src"] / "conf.py").read_text()


def test_no_gathered_link_without_reports_and_no_run_is_refused(course: dict[str, Path], tmp_path: Path) -> None:
    assemble(course)
    assert "gathered" not in (course["src"] / "index.md").read_text()
    with pytest.raises(FileNotFoundError, match="make the reference run first"):
        site.assemble(tmp_path / "nowhere", course["src"])
    (course["run"] / site.COMMIT_FILE).unlink()
    assert site.run_commit(course["run"], {}) == "unknown (not recorded)"
    assert site.run_commit(course["run"], {"commit": "abc"}) == "abc"


def test_reference_run_needs_an_accelerator_and_its_notebooks(course: dict[str, Path], tmp_path: Path) -> None:
    assert site.reference_run(course["bench"]) is None  # a CPU report is never the committed reference
    gpu = tmp_path / "benchmarks" / "h100"
    gpu.mkdir()
    rep = json.loads((course["run"] / "report.json").read_text())
    rep["runtime"]["platform"] = "gpu"
    (gpu / "report.json").write_text(json.dumps(rep))
    assert site.reference_run(course["bench"]) is None  # its executed notebooks are not committed
    for lab in rep["labs"]:
        shutil.copy(course["run"] / lab["notebook"], gpu / lab["notebook"])
    assert site.reference_run(course["bench"]) == gpu
    assert site.main(["reference", "--benchmarks", str(course["bench"])]) == 0
    assert site.main(["reference", "--benchmarks", str(tmp_path / "empty")]) == 1


def _sphinx_build() -> str | None:
    found = shutil.which("sphinx-build") or ROOT / "build/.venv-site/bin/sphinx-build"
    return str(found) if Path(found).is_file() else None


@pytest.mark.skipif(_sphinx_build() is None, reason="the site extra (Sphinx + MyST-NB) is not installed")
def test_sphinx_builds_a_page_per_lab_with_its_plots(course: dict[str, Path], tmp_path: Path) -> None:
    assemble(course, course["bench"])
    out = tmp_path / "site"
    done = site.build(course["src"], out, _sphinx_build())
    assert done.returncode == 0, done.stderr[-2000:]
    for stem in ("00_know", "01_systolic", "02_mfu"):
        assert (out / "labs" / f"{stem}.html").is_file(), stem
    page = (out / "labs/00_know.html").read_text()
    assert "reference run" in page and "74fa167" in page
    assert '<img alt="../_images/' in page and list((out / "_images").glob("*.png"))
    assert (out / "gathered/index.html").is_file() and (out / "instructor.html").is_file()


@pytest.mark.parametrize("report", [
    {"profile": "auto"},  # an old report: the CLI argument only
    {"profile": "smoke", "profile_requested": "auto"},  # since the runner records what "auto" resolved to
])
def test_the_banner_names_what_was_asked_and_what_ran(report: dict) -> None:
    lab = {"name": "00_know", "status": "ok", "seconds": 1.0, "metrics": {"profile": "smoke"}}
    assert "profile **auto → smoke**" in site.banner({**report, "device": "x", "runtime": {}}, lab, "abc", "labs/00.ipynb")
    full = site.banner({"profile": "full", "profile_requested": "full", "device": "x", "runtime": {}},
                       {**lab, "metrics": {"profile": "full"}}, "abc", "labs/00.ipynb")
    assert "profile **full**" in full and "→" not in full
