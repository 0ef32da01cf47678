"""labkit.course.gather: synthetic reports from two chips, a failed lab, a duplicate, another version, a truncated file."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from labkit.course import gather
from labkit.course.source import VERSION

H100 = "NVIDIA H100 80GB HBM3"  # what torch reports; the chip table calls it "NVIDIA H100 SXM"


def lab(name: str, metrics: dict, status: str = "ok", seconds: float = 10.0, error: dict | None = None) -> dict:
    return {"name": name, "status": status, "seconds": seconds, "metrics": metrics, "error": error,
            "notebook": f"{name}.ipynb"}


def report(device: str, platform: str, labs: list[dict], version: str | None = VERSION, profile: str = "full",
           started: str = "2026-11-24T10:00:00+0000") -> dict:
    versions = {"python": "3.12.3", "jax": "0.11.2"} | ({"labkit": version} if version else {})
    return {"runtime": {"platform": platform, "chip": device}, "device": device, "profile": profile,
            "versions": versions, "started": started, "labs": labs}


def l00(measured: float, spec: float | None, bw: float = 2000.0) -> dict:
    return lab("00_know_your_accelerator", {"matmul_dtype": "bf16", "matmul_tflops_measured": measured,
                                            "peak_tflops_spec": spec, "bandwidth_gbs_measured": bw})


def l02(mfu_jax: float, mfu_torch: float, peak: str = "spec bf16 matmul peak") -> dict:
    return lab("02_mfu", {"mfu_jax": mfu_jax, "mfu_torch": mfu_torch, "tokens_per_s_jax": 1000.0 * mfu_jax,
                          "flops_per_step_analytic": 2e9, "flops_per_token_analytic": 1e6,
                          "step_time_torch_s": 0.5, "peak_used": peak})


def l04_failed(seconds: float) -> dict:
    return lab("04_mixed_precision", {"profile": "full"}, "failed", seconds, error={
        "cell": 18, "ename": "AssertionError", "evalue": "jax bf16: final loss 2.854 vs fp32 2.747"})


def l04(speedups: dict, per_precision: dict | None = None) -> dict:
    return lab("04_mixed_precision", {**speedups, "step_time_per_precision": per_precision or {}})


def l06(train: float, params: int) -> dict:
    return lab("06_cost_per_token", {"cost_per_mtok_train": train, "cost_per_mtok_serve": train / 3,
                                     "token_model_params": params})


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


@pytest.fixture
def room(tmp_path: Path) -> Path:
    """A shared folder as a workshop leaves it: good runs, and everything that must be skipped."""
    h1 = report(H100, "gpu", [l00(700.0, 989.0), l02(0.30, 0.37), l04_failed(146.34), l06(0.008, 268435456)])
    h2 = report(H100, "gpu", [l00(760.0, 989.0), l02(0.32, 0.35), l04_failed(139.8)], started="2026-11-24T11:00:00+0000")
    v5e = report("TPU v5 lite", "tpu", [l00(150.0, 197.0, bw=700.0), l02(0.45, 0.40), l06(0.002, 268435456)])
    write(tmp_path / "alice/report.json", h1)
    write(tmp_path / "bob/report.json", h2)
    write(tmp_path / "carol/report.json", v5e)
    write(tmp_path / "dave/report.json", h1)  # alice's file uploaded twice
    write(tmp_path / "erin/report.json", report(H100, "gpu", [l00(1.0, 2.0)], version="0.0.9"))
    write(tmp_path / "frank/report.json", json.dumps(h2)[:200])  # upload cut off
    write(tmp_path / "notes/peak.json", {"not": "a report"})  # not report*.json: never looked at
    return tmp_path


def test_two_chips_failed_lab_duplicate_version_truncated(room: Path) -> None:
    runs, skipped = gather.gather([room])
    reasons = {Path(s.path).parent.name: s.reason for s in skipped}
    assert set(reasons) == {"dave", "erin", "frank"}
    assert reasons["dave"].startswith("duplicate") and "alice/report.json" in reasons["dave"]
    assert "course version 0.0.9" in reasons["erin"] and VERSION in reasons["erin"]
    assert reasons["frank"].startswith("truncated or invalid JSON")
    assert sorted(Path(r.path).parent.name for r in runs) == ["alice", "bob", "carol"]
    assert {r.chip for r in runs} == {"NVIDIA H100 SXM", "TPU v5e"}  # canonical names from the chip table

    data = gather.merged(runs, skipped)
    h100, v5e = data["chips"]["NVIDIA H100 SXM · full"], data["chips"]["TPU v5e · full"]
    assert (h100["runs"], h100["labs_ok"], h100["labs_failed"]) == (2, 5, 2)
    assert (v5e["runs"], v5e["labs_ok"], v5e["labs_failed"]) == (1, 3, 0)
    # the same failure in two runs is one group, counted twice
    assert [(f["lab"], f["cell"], f["count"]) for f in h100["failures"]] == [("04_mixed_precision", 18, 2)]
    assert "final loss 2.854" in h100["failures"][0]["error"]


def test_key_numbers_side_by_side_with_spread(room: Path) -> None:
    numbers = gather.merged(*gather.gather([room]))["numbers"]
    peak = numbers["00_know_your_accelerator"]["matmul peak measured (TFLOP/s)"]
    assert peak["NVIDIA H100 SXM · full"] | {"values": None} == {
        "n": 2, "median": 730.0, "min": 700.0, "max": 760.0, "values": None}
    assert peak["TPU v5e · full"]["n"] == 1
    frac = numbers["00_know_your_accelerator"]["measured / spec (fraction)"]["TPU v5e · full"]["median"]
    assert frac == pytest.approx(150 / 197)
    mfu = numbers["02_mfu"]
    assert mfu["MFU torch (fraction)"]["NVIDIA H100 SXM · full"]["median"] == pytest.approx(0.36)
    # tokens/s torch was not recorded: derived from FLOPs per step / per token over the step time
    assert mfu["tokens/s torch (tokens/s)"]["TPU v5e · full"]["median"] == pytest.approx(2000 / 0.5)
    cost = numbers["06_cost_per_token"]["cost per M training tokens per 1B params (USD)"]
    assert cost["TPU v5e · full"]["median"] == pytest.approx(0.002 / 0.268435456)
    assert "04_mixed_precision" not in numbers  # a failed lab that recorded no key number adds no row


def test_lab04_speedups_recorded_or_from_older_step_times(tmp_path: Path) -> None:
    new = l04({"bf16_speedup_vs_fp32_torch": 1.9, "bf16_speedup_vs_tf32_torch": 1.2, "bf16_speedup_vs_tf32_jax": None})
    old = l04({}, {"jax": {"fp32": 6.0, "bf16": 3.0}})  # a report from before the speed-up names
    write(tmp_path / "a/report.json", report(H100, "gpu", [new]))
    write(tmp_path / "b/report.json", report("TPU v5 lite", "tpu", [old]))
    rows = gather.merged(*gather.gather([tmp_path]))["numbers"]["04_mixed_precision"]
    assert rows["bf16 speed-up over fp32, torch (x)"] == {"NVIDIA H100 SXM · full": gather.spread([1.9])}
    assert rows["bf16 speed-up over TF32, torch (x)"]["NVIDIA H100 SXM · full"]["median"] == 1.2
    assert rows["bf16 speed-up over fp32, JAX (x)"] == {"TPU v5e · full": gather.spread([2.0])}
    assert "bf16 speed-up over TF32, JAX (x)" not in rows  # None recorded (no TF32 timed): no number invented


def test_nothing_skipped_silently_and_missing_paths_named(tmp_path: Path) -> None:
    write(tmp_path / "empty/report.json", "")
    write(tmp_path / "list/report.json", [1, 2])
    write(tmp_path / "nolabs/report.json", {"device": "x", "labs": []})
    write(tmp_path / "badlab/report.json", {"device": "x", "labs": [{"status": "ok"}]})
    runs, skipped = gather.gather([tmp_path, tmp_path / "nowhere"])
    reasons = {Path(s.path).parent.name if s.path.endswith(".json") else Path(s.path).name: s.reason for s in skipped}
    assert runs == []
    assert reasons == {
        "empty": "empty file",
        "list": "not a labkit run report: the JSON is a list, not an object",
        "nolabs": "a run report with no labs (the run stopped before its first lab finished)",
        "badlab": "lab #1 has no 'name' or 'status': not a labkit run report",
        "nowhere": "no such file or folder",
    }


def test_a_merged_report_keeps_its_new_labs_and_names_the_copies(tmp_path: Path) -> None:
    run1 = report(H100, "gpu", [l00(700.0, 989.0)])
    merged_report = copy.deepcopy(run1)
    merged_report["labs"][0]["commit"] = "b5e7af1"  # a merged report adds the commit: still the same run
    merged_report["labs"].append(l02(0.3, 0.37))
    write(tmp_path / "a/report_run1.json", run1)
    write(tmp_path / "b/report.json", merged_report)
    runs, skipped = gather.gather([tmp_path])
    assert skipped == []
    assert [[x["name"] for x in r.labs] for r in runs] == [["00_know_your_accelerator"], ["02_mfu"]]
    assert runs[1].dropped == [f"00_know_your_accelerator (the same run as in {tmp_path / 'a/report_run1.json'})"]


def test_unrecorded_version_is_accepted_and_said(tmp_path: Path) -> None:
    write(tmp_path / "report.json", report(H100, "gpu", [l00(700.0, 989.0)], version=None))
    runs, skipped = gather.gather([tmp_path / "report.json"])
    assert skipped == [] and runs[0].version == gather.UNRECORDED
    write(tmp_path / "new/report.json", {**report(H100, "gpu", [l00(1.0, 2.0)], version=None), "course_version": "9"})
    assert "course version 9" in gather.gather([tmp_path / "new"])[1][0].reason


def test_disagreements_with_the_chip_table(tmp_path: Path) -> None:
    runs = [
        gather._run(Path("a"), report(H100, "gpu", [])),
        gather._run(Path("b"), report("Mystery NPU 9000", "gpu", [])),
        gather._run(Path("c"), report("Intel(R) Xeon(R)", "cpu", [])),
    ]
    runs[0].labs = [l00(1050.0, 900.0, bw=3500.0)]  # above the table's 989 and 3350; lab used an old 900
    found = gather.disagreements(runs)
    kinds = [(d["kind"], d["report"]) for d in found]
    assert kinds == [("measured peak above spec", "a"), ("measured bandwidth above spec", "a"),
                     ("spec changed", "a"), ("unknown chip", "b"), ("unknown chip", "c")]
    assert "1050.0 TFLOP/s bf16 measured > 989" in found[0]["detail"]
    assert "add a row" in found[3]["detail"] and "a CPU" in found[4]["detail"]
    runs[0].labs = [l00(700.0, 989.0)]
    assert [d["kind"] for d in gather.disagreements(runs)] == ["unknown chip", "unknown chip"]


def test_main_writes_page_and_json_and_reports_skips(room: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert gather.main([str(room), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "skipped" in printed and "erin" in printed and "frank" in printed
    data = json.loads((out / "gathered.json").read_text())
    assert len(data["runs"]) == 3 and len(data["skipped"]) == 3
    page = (out / "index.html").read_text()
    assert page.count("data:image/png;base64,") == 3
    assert "truncated or invalid JSON" in page and "jax bf16: final loss 2.854" in page


def test_main_exit_codes(tmp_path: Path, capsys) -> None:
    assert gather.main([str(tmp_path / "nothing"), "--out", str(tmp_path / "o")]) == 1
    write(tmp_path / "file", "x")
    assert gather.main([str(tmp_path), "--out", str(tmp_path / "file")]) == 2
    assert "is a file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gather.main([str(tmp_path)])  # --out is required


def test_runs_are_grouped_by_the_resolved_profile(tmp_path: Path) -> None:
    """A report's "auto" split one chip's runs into an "auto" and a "smoke" column; the sizes decide now."""
    l06_smoke = lab("06_cost_per_token", {"cost_per_mtok_train": 0.1, "profile": "smoke"})
    new = {**report("Intel(R) Xeon(R)", "cpu", [l06_smoke]), "profile": "smoke", "profile_requested": "auto"}
    old = report("Intel(R) Xeon(R)", "cpu", [{**l06_smoke, "seconds": 9.0}], profile="auto")  # before the runner resolved it
    unknown = report("Intel(R) Xeon(R)", "cpu", [lab("06_cost_per_token", {}, seconds=8.0)], profile="auto")
    for name, data in (("new", new), ("old", old), ("unknown", unknown)):
        write(tmp_path / name / "report.json", data)
    runs, skipped = gather.gather([tmp_path])
    assert skipped == [] and [r.profile for r in runs] == ["smoke", "smoke", "auto"]
    assert sorted(gather.chip_summary(runs)) == ["Intel(R) Xeon(R) · auto", "Intel(R) Xeon(R) · smoke"]
    assert gather.chip_summary(runs)["Intel(R) Xeon(R) · smoke"]["runs"] == 2


def test_nothing_gathered_writes_nothing_and_a_bad_out_is_refused(tmp_path: Path, capsys,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    write(tmp_path / "in/report.json", "{")
    assert gather.main([str(tmp_path / "in"), "--out", str(out)]) == 1
    assert list(out.iterdir()) == []  # no index.html, no gathered.json
    assert "nothing written to" in capsys.readouterr().err

    def read_only(*a: object, **k: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    from labkit.course import runner

    monkeypatch.setattr(runner.tempfile, "NamedTemporaryFile", read_only)  # an immutable folder
    assert gather.main([str(tmp_path / "in"), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (f"labkit gather: --out {out}: cannot write there (Operation not permitted); "
                                       "pass a folder you can write to, e.g. --out build/gathered\n")


def test_a_run_stopped_early_is_said_everywhere_and_not_counted_as_failures(tmp_path: Path, capsys) -> None:
    cut = report(H100, "gpu", [l00(700.0, 989.0)]) | {
        "stopped": {"signal": "SIGINT", "lab": "02_mfu", "not_run": ["02_mfu", "03_gspmd_sharding"]}}
    write(tmp_path / "gina/report.json", cut)
    write(tmp_path / "hal/report.json", report(H100, "gpu", [l00(710.0, 989.0)]))
    out = tmp_path / "out"
    assert gather.main([str(tmp_path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "stopped early (SIGINT during 02_mfu; not run: 02_mfu, 03_gspmd_sharding)" in printed
    assert printed.count("stopped early") == 1  # hal's run went to its end
    data = json.loads((out / "gathered.json").read_text())
    col = data["chips"][next(iter(data["chips"]))]
    assert (col["runs"], col["runs_stopped"], col["labs_ok"], col["labs_failed"]) == (2, 1, 2, 0)
    assert "SIGINT during 02_mfu" in (out / "index.html").read_text()
    assert gather.stopped_note({"stopped": {"signal": "SIGTERM", "lab": None, "not_run": []}}) == \
        "SIGTERM between labs"
    assert gather.stopped_note({"labs": []}) is None


def test_a_report_with_a_field_of_the_wrong_type_is_skipped_not_fatal(tmp_path: Path, capsys) -> None:
    # Each crashed `labkit gather` with a traceback and lost the good report beside it (a bad-input probe).
    good = report(H100, "gpu", [l00(700.0, 989.0)])
    err_str = copy.deepcopy(good) | {"labs": [lab("00_bad", {}, "failed", error="boom")]}
    not_run = copy.deepcopy(good) | {"stopped": {"signal": "SIGINT", "not_run": 5}}
    per_prec = report(H100, "gpu", [l04({}, per_precision="x")])  # type: ignore[arg-type]
    for name, data in (("good", good), ("err_str", err_str), ("not_run", not_run), ("per_prec", per_prec)):
        write(tmp_path / name / "report.json", data)
    out = tmp_path / "out"
    assert gather.main([str(tmp_path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "skipped " + str(tmp_path / "err_str/report.json") + ": lab 00_bad: 'error' is a str, not an object or null" \
        in printed
    for name, exc in (("not_run", "TypeError"), ("per_prec", "AttributeError")):
        assert f"skipped {tmp_path / name / 'report.json'}: a field of the wrong type ({exc}: " in printed
    assert f"gathered {tmp_path / 'good/report.json'}" in printed and (out / "index.html").is_file()


def test_a_folder_without_reports_is_named_and_a_failed_gathering_leaves_no_old_page(tmp_path: Path, capsys) -> None:
    write(tmp_path / "notes/peak.json", {"not": "a report"})
    write(tmp_path / "in/report.json", report(H100, "gpu", [l00(700.0, 989.0)]))
    out = tmp_path / "out"
    assert gather.main([str(tmp_path / "in"), "--out", str(out)]) == 0 and (out / "index.html").is_file()
    capsys.readouterr()
    assert gather.main([str(tmp_path / "notes"), "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out == (f"skipped {tmp_path / 'notes'}: no report*.json under it (1 other .json files); "
                            "pass the report files, or the folders labkit run wrote\n")
    assert "nothing written to" in captured.err
    assert list(out.iterdir()) == []  # the earlier page is gone: it would pass for this gathering's
