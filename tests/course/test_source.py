"""labkit.course.source: one repository URL/ref drives the labs' first cell, the badges and colab/."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.course import source as course, runner

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = runner.available_labs(ROOT / "labs") + sorted((ROOT / "colab").glob("*.ipynb"))


def _first_code(path: Path) -> str:
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    return "".join(cells[0]["source"])


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_starts_with_the_generated_bootstrap(nb: Path) -> None:
    assert _first_code(nb) == course.first_cell(), f"{nb.name}: first cell differs from labkit.course.source.first_cell()"


def test_colab_has_one_run_all_notebook_per_runtime_family() -> None:
    assert {p.stem for p in (ROOT / "colab").glob("*.ipynb")} == {"colab_gpu", "colab_tpu", "kaggle_gpu", "kaggle_tpu"}
    for p in (ROOT / "colab").glob("*.ipynb"):
        src = json.dumps(json.loads(p.read_text())["cells"])
        assert "runner.run(profile=\\\"auto\\\"" in src and "report.html" in src


def test_readme_has_both_badges_for_every_lab() -> None:
    readme = (ROOT / "README.md").read_text()
    for lab in runner.available_labs(ROOT / "labs"):
        rel = lab.relative_to(ROOT).as_posix()
        assert course.colab_url(rel) in readme, f"README lacks the Colab badge of {rel}"
        assert course.kaggle_url(rel) in readme, f"README lacks the Kaggle badge of {rel}"
    # and every badge points at a notebook that exists
    prefix = re.escape(f"github/{course.REPO}/blob/{course.REF}/")
    for target in re.findall(prefix + r"([^)\s]+\.ipynb)", readme):
        assert (ROOT / target).is_file(), f"badge points at missing {target}"


def test_urls() -> None:
    assert course.colab_url("labs/00_x.ipynb") == (
        f"https://colab.research.google.com/github/{course.REPO}/blob/{course.REF}/labs/00_x.ipynb")
    assert course.kaggle_url("labs/00_x.ipynb").startswith("https://kaggle.com/kernels/welcome?src=https://github.com/")


def _bootstrap_part(url: str, ref: str) -> str:
    # The first cell without its last block (labkit.setup needs jax, which a bare Python lacks).
    cell = course.FIRST_CELL.format(dest=course.CLONE_DIR, ref=ref, url=url, ref_env=course.REF_ENV,
                                    url_env=course.URL_ENV, course=course.COURSE)
    return cell.rsplit("\n\n", 1)[0] + "\nprint('LABKIT', labkit.__file__)"


@pytest.fixture(scope="module")
def bare_python() -> str:
    base = getattr(sys, "_base_executable", None)
    probe = subprocess.run([base, "-c", "import labkit"], capture_output=True, cwd="/") if base else None
    if not base or probe.returncode == 0:
        pytest.skip("no Python without labkit installed to play a fresh Colab kernel")
    return base


def test_first_cell_clones_the_course_when_labkit_is_missing(tmp_path: Path, bare_python: str) -> None:
    code = _bootstrap_part(f"file://{ROOT}", "main")
    branch = subprocess.run(["git", "-C", str(ROOT), "branch", "--show-current"], capture_output=True, text=True)
    if branch.stdout.strip() != "main":
        pytest.skip("repository is not on main")
    out = subprocess.run([bare_python, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"{tmp_path}/{course.CLONE_DIR}/labkit/__init__.py" in out.stdout


def test_first_cell_with_a_missing_ref_fails_naming_it(tmp_path: Path, bare_python: str) -> None:
    code = _bootstrap_part(f"file://{ROOT}", "no-such-ref")
    out = subprocess.run([bare_python, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "no-such-ref" in out.stderr and "not found" in out.stderr
    assert not (tmp_path / course.CLONE_DIR).exists()  # nothing half-cloned


def test_first_cell_replaces_an_unrelated_labkit(tmp_path: Path, bare_python: str) -> None:
    # PyPI has an unrelated package named labkit: importable, but not this course. The cell must fetch.
    branch = subprocess.run(["git", "-C", str(ROOT), "branch", "--show-current"], capture_output=True, text=True)
    if branch.stdout.strip() != "main":
        pytest.skip("repository is not on main")
    other = tmp_path / "site" / "labkit"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("NAME = 'someone else'\n")
    code = f"import sys; sys.path.insert(0, {str(tmp_path / 'site')!r})\n" + _bootstrap_part(f"file://{ROOT}", "main")
    out = subprocess.run([bare_python, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"{tmp_path}/{course.CLONE_DIR}/labkit/__init__.py" in out.stdout


def test_one_version_everywhere() -> None:
    import tomllib

    import labkit

    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"] == course.VERSION
    assert labkit.__version__ == course.VERSION and course.REF == f"v{course.VERSION}"
    assert labkit.COURSE == course.COURSE and labkit.check_source is course.check_source


def test_check_source_refuses_a_stale_release(tmp_path: Path) -> None:
    with pytest.raises(course.SourceError, match=r"release v0\.1\.0, but these notebooks belong to v9\.9\.9") as e:
        course.check_source("v9.9.9", root=tmp_path, quiet=True)
    assert str(tmp_path) in str(e.value) and "LABKIT_REF" in str(e.value)
    assert "ref main" in course.check_source("main", root=tmp_path, quiet=True)  # a fork's branch: no version


def _git(root: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=env).stdout


def test_check_source_verifies_a_fetched_clone_is_at_its_ref(tmp_path: Path) -> None:
    clone = tmp_path / course.CLONE_DIR
    clone.mkdir()
    _git(clone, "init", "-q")
    (clone / "a").write_text("1")
    _git(clone, "add", "a")
    _git(clone, "commit", "-qm", "release")
    _git(clone, "tag", course.REF)
    (clone / ".git" / "shallow").write_text("")  # what `git clone --depth 1` leaves
    assert course.check_source(course.REF, root=clone, quiet=True).endswith(f"(ref {course.REF})")
    (clone / "a").write_text("2")
    _git(clone, "commit", "-qam", "later work")
    with pytest.raises(course.SourceError, match=f"not at {course.REF}"):
        course.check_source(course.REF, root=clone, quiet=True)
    with pytest.raises(course.SourceError, match="unknown there"):
        course.check_source("some-branch", root=clone, quiet=True)


def test_commit_names_head_and_dirty_state(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a").write_text("1")
    _git(repo, "add", "a")
    _git(repo, "commit", "-qm", "one")
    head = _git(repo, "rev-parse", "--short=12", "HEAD").strip()
    assert course.commit(repo) == head
    (repo / "a").write_text("2")
    assert course.commit(repo) == f"{head}+dirty"
    plain = tmp_path / "plain"
    plain.mkdir()
    assert course.commit(plain) is None  # /tmp is no git checkout: nothing to name
