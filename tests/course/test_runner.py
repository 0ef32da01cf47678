"""labkit.course.runner / cli: tiny throwaway labs that pass, fail and hang; the report they produce."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from labkit.course import cli, runner


def _lab(path: Path, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('PROFILE = "auto"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params] + [nbformat.v4.new_code_cell(c) for c in cells]
    path.write_text(nbformat.writes(nb))
    return path


@pytest.fixture(scope="module")
def fake_labs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("labs")
    _lab(d / "00_passes.ipynb", "from labkit.course.report import record\nrecord('answer', 42)\nrecord('profile_seen', PROFILE)")
    _lab(d / "01_fails.ipynb", "x = 1", "raise ValueError('the lab found a wrong number')", "y = 2")
    _lab(d / "02_hangs.ipynb", "import time\ntime.sleep(300)")
    return d


def test_resolve_labs_by_number_stem_and_topic(fake_labs: Path) -> None:
    names = lambda xs: [p.stem for p in runner.resolve_labs(xs, fake_labs)]  # noqa: E731
    assert names([]) == ["00_passes", "01_fails", "02_hangs"]
    assert names(["0"]) == ["00_passes"]
    assert names(["01"]) == ["01_fails"]
    assert names(["hangs", "00_passes"]) == ["02_hangs", "00_passes"]


def test_unknown_lab_names_the_available_ones(fake_labs: Path) -> None:
    with pytest.raises(runner.LabNotFound, match="available labs: 00_passes, 01_fails, 02_hangs"):
        runner.resolve_labs(["99"], fake_labs)


def test_run_report_ok_failed_timeout(fake_labs: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    report = runner.run([], "smoke", out, timeout_s=20, directory=fake_labs)
    by = {lab["name"]: lab for lab in report["labs"]}
    assert [lab["status"] for lab in report["labs"]] == ["ok", "failed", "timeout"]
    assert by["00_passes"]["metrics"] == {"answer": 42, "profile_seen": "smoke"}
    err = by["01_fails"]["error"]
    assert err["cell"] == 3 and err["ename"] == "ValueError" and "wrong number" in err["evalue"]
    assert "raise ValueError" in err["source"] and "ValueError" in err["traceback"]
    assert by["02_hangs"]["error"]["ename"] == "Timeout"
    assert 19 < by["02_hangs"]["seconds"] < 60
    on_disk = json.loads((out / "report.json").read_text())
    assert {"runtime", "device", "versions", "labs"} <= set(on_disk)
    assert set(on_disk["labs"][0]) >= {"name", "status", "seconds", "metrics", "error"}
    assert on_disk["versions"]["jax"] and on_disk["runtime"]["platform"] == "cpu"
    html = (out / "report.html").read_text()
    assert "01_fails" in html and "wrong number" in html and "class='timeout'" in html
    assert (out / "00_passes.ipynb").exists()


def test_unknown_profile() -> None:
    with pytest.raises(ValueError, match="unknown profile"):
        runner.run(["00"], "turbo")


def test_cli_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "no_such_lab"]) == 2
    assert "available labs" in capsys.readouterr().err
    assert cli.main(["list"]) == 0
    assert "00_know_your_accelerator" in capsys.readouterr().out


def test_cli_failure_exit_code(fake_labs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "labs_dir", lambda: fake_labs)
    assert cli.main(["run", "01", "--out", str(tmp_path), "--profile", "smoke"]) == 1
    assert cli.main(["run", "00", "--out", str(tmp_path), "--profile", "smoke"]) == 0
