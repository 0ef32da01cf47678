"""labkit.course.student: student copies hide every solution, change nothing else, and still run."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from labkit.course import cli, runner, student

ROOT = Path(__file__).resolve().parents[2]
LABS = runner.available_labs(ROOT / "labs")


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_student_copy_hides_solutions_and_changes_nothing_else(lab: Path) -> None:
    orig = nbformat.read(lab, as_version=4)
    copy = student.student_notebook(lab)
    assert len(orig.cells) == len(copy.cells)
    regions = 0
    for a, b in zip(orig.cells, copy.cells):
        if student.BEGIN in a.source:
            regions += a.source.count(student.BEGIN)
            hidden = student.solution_lines(nbformat.v4.new_notebook(cells=[a]))
            leaked = [line for line in hidden if line in b.source.splitlines() or line in [s.strip() for s in b.source.splitlines()]]
            assert not leaked, f"{lab.name}: solution text left in the student copy: {leaked}"
            assert "NotImplementedError" in b.source and student.BEGIN not in b.source
            # the function signature (the exercise's question) stays
            assert a.source.splitlines()[0] == b.source.splitlines()[0]
        else:
            assert (a.cell_type, a.source, a.metadata) == (b.cell_type, b.source, b.metadata)
        assert not b.get("outputs") and b.get("execution_count") is None
    assert regions >= 2


def _lab_with(tmp_path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    p = tmp_path / "09_broken.ipynb"
    nbformat.write(nb, p)
    return p


@pytest.mark.parametrize(
    "sources, message",
    [
        (["x = 1", "def f():\n    ### BEGIN SOLUTION\n    return 1\n"], "code cell 2 has an unclosed solution region"),
        (["def f():\n    return 1\n    ### END SOLUTION"], "code cell 1 closes a solution region it never opened"),
        (["### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION"], "code cell 1 opens a solution region inside"),
        (["def f():\n    return 1", "lab00.check_ridge_point(f)"], "code cell 2 calls lab00.check_ridge_point(...) but no solution"),
        (["x = 1"], "no solution regions"),
    ],
)
def test_broken_labs_are_refused_naming_file_and_cell(tmp_path: Path, sources: list[str], message: str) -> None:
    lab = _lab_with(tmp_path, *sources)
    with pytest.raises(student.StudentCopyError, match=re.escape(message)) as e:
        student.student_notebook(lab)
    assert "09_broken.ipynb" in str(e.value)
    out = tmp_path / "out"
    with pytest.raises(student.StudentCopyError):
        student.write_student_copies([LABS[0], lab], out)
    assert not out.exists() or not list(out.iterdir())  # nothing half-written


def test_cli_student(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["student", "00", "--out", str(tmp_path)]) == 0
    assert (tmp_path / LABS[0].name).exists()
    assert cli.main(["student", "nope", "--out", str(tmp_path)]) == 2
    assert "available labs" in capsys.readouterr().err


def test_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "copies.ipynb"
    f.write_text("")
    with pytest.raises(student.StudentCopyError, match=rf"--out {f}: {f} is a file, not a folder"):
        student.write_student_copies([LABS[0]], f)


def _tiny_lab(folder: Path, name: str = "09_tiny.ipynb") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "def f():\n    ### BEGIN SOLUTION\n    return 42\n    ### END SOLUTION")])
    nbformat.write(nb, folder / name)
    return folder / name


def test_out_that_is_the_labs_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`labkit student 06 --out labs` overwrote the instructor's solutions with stubs."""
    lab = _tiny_lab(tmp_path / "labs")
    before = lab.read_bytes()
    for out in (tmp_path / "labs", tmp_path / "labs/../labs"):
        with pytest.raises(student.StudentCopyError, match=re.escape(
                f"--out {out} is the folder the lab notebooks are read from ({lab.parent}): writing there would "
                "replace them; pass another folder, e.g. --out build/student")):
            student.write_student_copies([lab], out)
        assert cli.main(["student", "09", "--labs-dir", str(tmp_path / "labs"), "--out", str(out)]) == 2
        assert "is the folder the lab notebooks are read from" in capsys.readouterr().err
    assert lab.read_bytes() == before


def test_a_notebook_with_solutions_in_out_is_never_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lab = _tiny_lab(tmp_path / "labs")
    _tiny_lab(tmp_path / "labs", "08_other.ipynb")
    out = tmp_path / "out"
    assert cli.main(["student", "09", "--labs-dir", str(tmp_path / "labs"), "--out", str(out)]) == 0
    assert "NotImplementedError" in (out / lab.name).read_text() and "return 42" not in (out / lab.name).read_text()
    assert cli.main(["student", "09", "--labs-dir", str(tmp_path / "labs"), "--out", str(out)]) == 0  # a copy: rewritten
    capsys.readouterr()
    instructor = _tiny_lab(out, "08_other.ipynb")  # someone's solutions sit in --out
    before = instructor.read_bytes()
    assert cli.main(["student", "--labs-dir", str(tmp_path / "labs"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"labkit student: {instructor} already exists and holds solutions (### BEGIN SOLUTION): it is an "
                   "instructor notebook, not a student copy; pass another --out (e.g. build/student) or move it away\n")
    assert instructor.read_bytes() == before


def test_unwritable_or_empty_out_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = _tiny_lab(tmp_path / "labs")
    with pytest.raises(student.StudentCopyError, match=r"--out is empty \(''\).*e.g. --out build/student"):
        student.write_student_copies([lab], "")

    def read_only(*a: object, **k: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(runner.tempfile, "NamedTemporaryFile", read_only)
    with pytest.raises(student.StudentCopyError, match=re.escape(
            f"--out {tmp_path / 'ro'}: cannot write there (Read-only file system); pass a folder you can write to, "
            "e.g. --out build/student")):
        student.write_student_copies([lab], tmp_path / "ro")


@pytest.mark.parametrize("text, why", [("{not json", "NotJSONError: Notebook does not appear to be JSON"),
                                       ("{}", "ValidationError")])
def test_a_lab_that_is_not_a_notebook_is_refused_in_one_line_and_nothing_is_made(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, why: str) -> None:
    # Both gave a traceback (exit 1) and left an empty --out folder behind (a bad-input probe).
    labs = tmp_path / "labs"
    _tiny_lab(labs, "01_good.ipynb")
    (labs / "00_bad.ipynb").write_text(text)
    out = tmp_path / "copies"
    assert cli.main(["student", "--labs-dir", str(labs), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"labkit student: {labs / '00_bad.ipynb'}: not a readable notebook ({why}") and \
        err.rstrip().endswith("fix it or remove it from --labs-dir") and len(err.splitlines()) == 1
    assert not out.exists()  # every lab is read before --out is made


def test_a_labs_folder_without_lab_notebooks_is_said_by_student_list_and_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # student and list exited 0 with no output (student also made an empty --out): it looked like success.
    labs = tmp_path / "misnamed"
    _tiny_lab(labs, "mfu.ipynb")
    want = f"no lab notebooks (NN_topic.ipynb, e.g. 02_mfu.ipynb) in {labs}; found mfu.ipynb: rename them so\n"
    for argv in (["student", "--out", str(tmp_path / "s")], ["list"], ["run", "--out", str(tmp_path / "r")]):
        assert cli.main([*argv, "--labs-dir", str(labs)]) == 2
        assert capsys.readouterr().err == f"labkit {argv[0]}: {want}"
    assert not (tmp_path / "s").exists() and not (tmp_path / "r").exists()
