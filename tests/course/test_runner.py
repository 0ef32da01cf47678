"""labkit.course.runner / cli: tiny throwaway labs that pass, fail and hang; the report they produce."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import nbformat
import pytest

from labkit.course import cli, failure, runner


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
    assert names(["1", "0", "01", "fails", "00"]) == ["01_fails", "00_passes"]  # each lab once, first mention's order


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
    from labkit.course import source

    assert on_disk["course_version"] == source.VERSION and on_disk["commit"] == source.commit()  # gather, site
    assert set(on_disk["labs"][0]) >= {"name", "status", "seconds", "metrics", "error"}
    assert on_disk["versions"]["jax"] and on_disk["runtime"]["platform"] == "cpu"
    assert (on_disk["profile"], on_disk["profile_requested"]) == ("smoke", "smoke")
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


# ------------------------------------------------------------------ processes, timeouts, bad input

_SPAWN = ("import os, subprocess\n"
          "kids = [subprocess.Popen(['sleep', '600']), subprocess.Popen(['sleep', '600'], start_new_session=True)]\n"
          "open({pids!r}, 'w').write(' '.join(map(str, [os.getpid()] + [k.pid for k in kids])))\n")


def _recorded_pids(path: Path) -> list[int]:
    pids = [int(p) for p in path.read_text().split()]
    assert len(pids) == 3  # the kernel and its two sleeps
    return pids


def _assert_gone(pids: list[int]) -> None:
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.parametrize(("tail", "status"), [
    ("import time\ntime.sleep(600)", "timeout"),  # a hang: the kernel and its children outlive papermill's kill
    ("raise RuntimeError('lab crashed')", "failed"),  # an error: papermill shuts the kernel, not its children
    ("x = 1", "ok"),  # a lab that passes but leaves a child running
])
def test_no_process_outlives_its_lab(tmp_path: Path, tail: str, status: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pids = tmp_path / "pids"
    lab = _lab(tmp_path / "00_spawns.ipynb", _SPAWN.format(pids=str(pids)), tail)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    # 12 s: long enough for a kernel to start on a busy CI machine and reach the hang
    result = runner.run_lab(lab, tmp_path / "run", "smoke", timeout_s=12 if status == "timeout" else 120)
    assert result.status == status
    _assert_gone(_recorded_pids(pids))
    # Nor a file: a killed papermill never removes its kernel's connection file (a tmp*.json in the temp
    # folder, one per timed-out lab, before the lab's processes got a TMPDIR of their own).
    assert list(tmp.iterdir()) == []
    killed = status == "timeout"
    assert [n for n in result.left_in_tmp if n.endswith(".json")] == ([] if not killed else result.left_in_tmp)
    assert bool(result.left_in_tmp) == killed
    if status == "timeout":  # code cell 1 is the parameters cell, 2 spawns, 3 hangs
        assert result.error["cell"] == 3 and "time.sleep(600)" in result.error["source"]
        assert "cell 3 was still running" in result.error["evalue"]


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_to_labkit_run_stops_the_kernel_and_what_the_lab_started(tmp_path: Path, signame: str) -> None:
    """`timeout 300 labkit run ...` (benchmarks/device_run.sh) ends with SIGTERM, Ctrl-C with SIGINT: the kernel, a
    session of its own, must not outlive the command (it did: two lab kernels kept computing after `timeout` had
    stopped their runs); one line says where the run stopped, and the previous report claiming success is gone."""
    import signal
    import subprocess
    import sys
    import time

    pids = tmp_path / "pids"
    labs = tmp_path / "labs"
    labs.mkdir()
    _lab(labs / "00_spawns.ipynb", _SPAWN.format(pids=str(pids)), "import time\ntime.sleep(600)")
    out = tmp_path / "run"
    out.mkdir()
    (out / "report.json").write_text(json.dumps({"labs": [{"name": "00_spawns", "status": "ok"}]}))
    (out / "report.html").write_text("<p>ok</p>")
    proc = subprocess.Popen([sys.executable, "-m", "labkit.course.cli", "run", "00", "--labs-dir", str(labs),
                             "--out", str(out), "--timeout", "300"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while not (pids.exists() and len(pids.read_text().split()) == 3) and time.time() - t0 < 120:
        time.sleep(0.2)  # wait for the lab to start its children
    recorded = _recorded_pids(pids)
    signum = getattr(signal, signame)
    proc.send_signal(signum)
    assert proc.wait(timeout=60) == 128 + signum
    _assert_gone(recorded)
    err = proc.stderr.read()
    assert err.strip() == (f"labkit run: interrupted by {signame} while running 00_spawns (partial notebook at "
                           f"{out / '00_spawns.ipynb'}); no report written"), err
    assert not (out / "report.json").exists() and not (out / "report.html").exists()


@pytest.mark.parametrize("bad", [0, -5, float("nan"), float("inf"), -0.0])
def test_timeout_must_be_positive_and_finite(bad: float, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=rf"timeout_s \(--timeout\) must be a finite number of seconds > 0, got {bad!r}"):
        runner.run(["00"], "smoke", tmp_path, timeout_s=bad)
    with pytest.raises(TypeError, match="timeout_s"):
        runner.check_timeout("15")
    assert not (tmp_path / "report.json").exists()  # refused before anything ran


def test_out_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "report.txt"
    f.write_text("not a folder")
    with pytest.raises(NotADirectoryError, match=rf"--out {f}: {f} is a file, not a folder.*e.g. --out build/run"):
        runner.run(["00"], "smoke", f, timeout_s=10)
    with pytest.raises(NotADirectoryError, match="is a file"):
        runner.prepare_out_dir(f / "sub")


def test_a_name_that_matches_two_labs_is_ambiguous(tmp_path: Path) -> None:
    _lab(tmp_path / "03_sharding.ipynb", "x = 1")
    _lab(tmp_path / "03_sharding_extra.ipynb", "x = 1")
    with pytest.raises(runner.AmbiguousLab, match="ambiguous lab name '3': it matches 03_sharding, 03_sharding_extra"):
        runner.resolve_labs(["3"], tmp_path)
    assert [p.stem for p in runner.resolve_labs(["03_sharding_extra"], tmp_path)] == ["03_sharding_extra"]


def test_a_broken_notebook_reports_the_real_error(tmp_path: Path) -> None:
    (tmp_path / "00_broken.ipynb").write_text('{"cells": [')
    dies = _lab(tmp_path / "01_dies.ipynb", "x = 1", "import os\nos._exit(3)")
    err = runner.run_lab(tmp_path / "00_broken.ipynb", tmp_path / "run", "smoke", 60).error
    assert err["ename"] == "NotJSONError" and "does not appear to be JSON" in err["evalue"]
    assert err["cell"] == failure.NO_CELL
    err = runner.run_lab(dies, tmp_path / "run", "smoke", 60).error
    assert err["ename"] == "DeadKernelError" and err["cell"] == 3 and "os._exit" in err["source"]
    assert "while running cell 3" in err["evalue"]


# ------------------------------------------------------------------ refused before anything runs


def _no_lab_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise AssertionError("a lab ran")

    monkeypatch.setattr(runner, "run_lab", boom)
    monkeypatch.setattr(runner, "detect_runtime", boom)


def test_out_that_is_the_labs_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`labkit run 06 --labs-dir cp --out cp` deleted cp/06_*.ipynb: papermill's output is the lab it reads."""
    labs = tmp_path / "labs"
    labs.mkdir()
    lab = _lab(labs / "00_one.ipynb", "x = 1")
    before = lab.read_bytes()
    with pytest.raises(ValueError, match="is the folder the lab notebooks are read from"):
        runner.run_lab(lab, labs, "smoke", 60)  # refused before it unlinks its output, which is the lab
    _no_lab_runs(monkeypatch)
    for out in (labs, tmp_path / "labs/../labs", Path(os.path.relpath(labs))):
        with pytest.raises(ValueError, match=re.escape(f"--out {out} is the folder the lab notebooks are read from "
                                                       f"({labs}): writing there would replace them; pass another "
                                                       "folder, e.g. --out build/run")):
            runner.run(["00"], "smoke", out, 60, labs)
    assert lab.read_bytes() == before and sorted(labs.iterdir()) == [lab]


def test_unwritable_or_empty_out_is_refused_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _lab(tmp_path / "00_one.ipynb", "x = 1")
    _no_lab_runs(monkeypatch)
    real = runner.tempfile.NamedTemporaryFile

    def read_only(*a: object, dir: object = None, **k: object) -> object:
        if dir == tmp_path / "ro":
            raise PermissionError(13, "Permission denied")
        return real(*a, dir=dir, **k)

    monkeypatch.setattr(runner.tempfile, "NamedTemporaryFile", read_only)  # an immutable folder, as root too
    with pytest.raises(runner.OutDirError, match=rf"^--out {tmp_path / 'ro'}: cannot write there \(Permission denied\); "
                                                 "pass a folder you can write to, e.g. --out build/run$"):
        runner.run(["00"], "smoke", tmp_path / "ro", 60, tmp_path)
    assert runner.prepare_out_dir(tmp_path / "rw") == tmp_path / "rw" and list((tmp_path / "rw").iterdir()) == []
    with pytest.raises(ValueError, match=r"--out is empty \(''\): pass a folder"):
        runner.prepare_out_dir("")
    cases = [("", "--out is empty"), (str(tmp_path / "ro"), "cannot write there (Permission denied)")]
    if Path("/proc/self").is_dir():  # Linux: nothing can be created under /proc, root or not
        cases.append(("/proc/labkit-x/run", "--out /proc/labkit-x/run: cannot write there"))
    for out, said in cases:
        assert cli.main(["run", "00", "--labs-dir", str(tmp_path), "--out", out]) == 2
        err = capsys.readouterr().err
        assert err.startswith("labkit run: ") and said in err and len(err.splitlines()) == 1


def test_no_labs_folder_names_the_real_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """labkit installed outside a clone: no labs/ next to the package nor in the cwd."""
    monkeypatch.setattr(runner, "__file__", str(tmp_path / "site/labkit/course/runner.py"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"pass --labs-dir DIR"):
        runner.labs_dir()
    for argv in (["list"], ["run", "00"], ["student", "00", "--out", str(tmp_path / "s")]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"labkit {argv[0]}: no labs/ folder") and "--labs-dir DIR" in err and "--labs " not in err
    assert not (tmp_path / "s").exists()
    _lab(tmp_path / "07_mine.ipynb", "x = 1")
    assert cli.main(["list", "--labs-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "07_mine\n"
    for missing, said in ((tmp_path / "nope", "does not exist"), (tmp_path / "07_mine.ipynb", "is a file, not a folder")):
        for argv in (["list"], ["run", "07"], ["student", "07", "--out", str(tmp_path / "s")]):
            assert cli.main([*argv, "--labs-dir", str(missing)]) == 2
            assert f"--labs-dir {missing}: {said}" in capsys.readouterr().err


# ------------------------------------------------------------------ a stopped run, the resolved profile


def _fake_run_lab(stop_at: str | None, metrics: dict) -> object:
    def run_lab(path: Path, out: Path, profile: str, timeout_s: float) -> runner.LabResult:
        if path.stem == stop_at:
            (out / path.name).write_text("{}")  # papermill had written part of it
            raise KeyboardInterrupt
        return runner.LabResult(path.stem, "ok", 1.0, dict(metrics), None, path.name)
    return run_lab


def test_a_stopped_run_leaves_no_report_claiming_success(fake_labs: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    out.mkdir()
    for name in ("report.json", "report.html"):
        (out / name).write_text('{"labs": [{"name": "01_fails", "status": "ok"}]}')  # an earlier run's
    monkeypatch.setattr(runner, "detect_runtime", lambda: {"platform": "cpu", "chip": "test cpu"})
    monkeypatch.setattr(runner, "run_lab", _fake_run_lab("00_passes", {}))
    with pytest.raises(runner.Interrupted) as e:
        runner.run(["00", "01"], "smoke", out, 60, fake_labs)
    assert (e.value.lab, e.value.notebook, e.value.finished) == ("00_passes", out / "00_passes.ipynb", 0)
    assert not (out / "report.json").exists() and not (out / "report.html").exists()
    monkeypatch.setattr(runner, "run_lab", _fake_run_lab("01_fails", {}))
    assert cli.main(["run", "00", "01", "--labs-dir", str(fake_labs), "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert err == (f"labkit run: interrupted by SIGINT while running 01_fails (partial notebook at "
                   f"{out / '01_fails.ipynb'}); report.json lists only the 1 lab(s) that finished\n")
    kept = json.loads((out / "report.json").read_text())
    assert [lab["name"] for lab in kept["labs"]] == ["00_passes"]
    assert kept["stopped"] == {"signal": "SIGINT", "lab": "01_fails", "not_run": []}  # cut short, and where
    assert "stopped early</b> by SIGINT during 01_fails; not run: none" in (out / "report.html").read_text()
    assert not list(out.glob(".report*"))  # the report is written whole, then renamed


def test_report_records_the_resolved_profile(fake_labs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`labkit gather` grouped a CPU run under "auto": the report now says which sizes ran."""
    cpu = {"platform": "cpu", "chip": "test cpu"}
    monkeypatch.setattr(runner, "detect_runtime", lambda: cpu)
    monkeypatch.setattr(runner, "run_lab", _fake_run_lab(None, {"answer": 1}))
    report = runner.run(["00"], "auto", tmp_path, 60, fake_labs)
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert (report["profile"], on_disk["profile"], on_disk["profile_requested"]) == ("smoke", "smoke", "auto")
    monkeypatch.setattr(runner, "run_lab", _fake_run_lab(None, {"profile": "full"}))  # the lab's own record wins
    assert runner.run(["00"], "auto", tmp_path, 60, fake_labs)["profile"] == "full"
    gpu = {"platform": "gpu", "chip": "g", "memory_bytes": 16e9}
    labs = [{"name": "00", "metrics": {}}, {"name": "01", "metrics": {"profile": "smoke"}}]
    assert runner.resolved_profile("full", labs, cpu) == "full"
    assert runner.resolved_profile("auto", labs, None) == "smoke"
    assert runner.resolved_profile("auto", labs[:1], gpu) == "smoke"
    assert runner.resolved_profile("auto", labs[:1], {**gpu, "memory_bytes": 80e9}) == "full"
    assert runner.resolved_profile("auto", labs[:1], {**gpu, "memory_bytes": None}) == "full"
    assert runner.resolved_profile("auto", labs[:1], {"platform": "unknown"}) == "auto"


def test_the_run_summary_tallies_each_labs_exercises(fake_labs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """An instructor's student run is read at a glance: each lab's line says how its checks ended."""
    monkeypatch.setattr(runner, "detect_runtime", lambda: {"platform": "cpu", "chip": "test cpu"})
    tally = {"exercises": {"ridge point": "not done", "roofline time": "not done", "intensity": "passed"}}
    monkeypatch.setattr(runner, "run_lab", _fake_run_lab(None, tally))
    runner.run(["00"], "smoke", tmp_path, 60, fake_labs)
    assert "00_passes  exercises: 1 passed, 2 not done\n" in capsys.readouterr().out
    assert json.loads((tmp_path / "report.json").read_text())["labs"][0]["metrics"] == tally
