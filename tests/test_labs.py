"""Every lab: stored clean, follows the conventions, and runs end to end (papermill, smoke).

Each CI row executes every lab once, as something a user runs. Here, in the README's test command (on
the lock), `labkit run` (papermill) executes the *student copies*, once, for every check that reads a
run: each lab ends ok, records its figures, reports every exercise "not done yet" and leaves no
scratch. A student copy is its lab with the solution regions stubbed (tests/course/test_student.py
checks that nothing else changes), so its records are the lab's; the solutions are judged by
tests/course/exercises, and run in place by nbval (`pytest --nbval-lax labs/`: CI's second row, on the
newest versions, executes the instructor notebooks cell by cell as learners' Jupyter would).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from labkit.course import check, runner, student
from labkit.runtime import hardware

ROOT = Path(__file__).resolve().parent.parent
LABS = runner.available_labs(ROOT / "labs")

# What each lab must record for the run report (the issues name these keys).
REQUIRED_METRICS = {
    "00_know_your_accelerator": {"matmul_tflops_measured", "bandwidth_gbs_measured", "peak_tflops_spec",
                                 "bandwidth_probe", "overhead_bound_ops", "profile_reason", "peak_memory_gib_host"},
    "01_systolic_vs_cuda_cores": {"sim_cycles_os_8x8_64x32x48", "sim_cycles_ws_8x8_64x32x48",
                                  "sim_cycles_is_8x8_64x32x48", "sim_convention", "shape_sweep_points",
                                  "mxu_compute_bound_batch_v5e", "triton_speed_vs_cublas_aligned",
                                  "triton_speed_vs_cublas_ragged", "triton_speed_vs_cublas_tuned",
                                  "triton_tuned_config"},
    "02_mfu": {"flops_per_token_analytic", "flops_per_step_xla", "flops_per_step_torch", "mfu_jax",
               "mfu_torch", "peak_used", "op_share_matmul", "op_share_matmul_jax"},
    "03_gspmd_sharding": {"strategies", "collective_bytes_dp", "collective_bytes_fsdp", "collective_bytes_tp",
                          "max_abs_diff_vs_unsharded", "multiprocess_max_abs_diff", "fsdp_peak_mib_kept",
                          "fsdp_peak_mib_regather", "fsdp_bytes_kept", "fsdp_bytes_regather",
                          *(f"comm_{m}_{k}" for m in ("alpha_us", "gbs") for k in ("all_gather", "all_reduce")),
                          *(f"comm_compute_ratio_{s}_{y}" for s in ("dp", "fsdp", "tp", "dp_tp") for y in ("v5e8", "h100x8"))},
    "04_mixed_precision": {"format_table", "final_loss_fp32", "final_loss_bf16", "final_loss_fp16_scaled",
                           "step_time_per_precision", "loss_gap_bf16_vs_fp32", "loss_noise_floor_fp32",
                           "fp8_rel_err_current", "fp8_rel_err_delayed", "fp8_rel_err_block", "fp8_speedup_vs_bf16",
                           "loss_end_gap_vs_fp32", "loss_beats_fp32",
                           *(f"bf16_speedup_vs_{b}_{f}" for b in ("tf32", "fp32") for f in ("jax", "torch"))},
    "05_train_tpu_serve_gpu": {"parity_max_abs_logit_diff", "greedy_tokens_identical", "artifact_platforms",
                               "serve_tokens_per_s", "serve_p50_ms", "cross_device_max_abs_logit_diff",
                               "bf16_top1_agreement", "bf16_kl", "load_ttft_p50_ms", "load_goodput_req_s",
                               "cross_device_by_route", "bf16_kl_by_route", "cross_device_own_model_max_abs_logit_diff",
                               "shipped_artifact_jax"},
    "06_cost_per_token": {"cost_per_mtok_train", "cost_per_mtok_serve", "claims_checked"},
}


def _nb(path: Path) -> dict:
    return json.loads(path.read_text())


def test_there_are_labs() -> None:
    assert LABS and LABS[0].stem == "00_know_your_accelerator"


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_stored_clean(lab: Path) -> None:
    dirty = [i for i, c in enumerate(_nb(lab)["cells"]) if c.get("outputs") or c.get("execution_count")]
    assert dirty == [], f"{lab.name}: cells {dirty} stored with outputs; clear them before committing"


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_conventions(lab: Path) -> None:
    cells = [c for c in _nb(lab)["cells"] if c["cell_type"] == "code"]
    src = lambda c: "".join(c["source"])  # noqa: E731
    assert "labkit.setup()" in src(cells[0]), "first code cell must bootstrap with labkit.setup()"
    assert "parameters" in cells[1].get("metadata", {}).get("tags", []), "second code cell must be tagged parameters"
    assert re.search(r'^PROFILE = "auto"', src(cells[1]), re.M)
    assert any("labkit.resolve_profile(PROFILE)" in src(c) for c in cells)
    assert any("labkit.record(" in src(c) for c in cells), "a lab records its key numbers"
    assert any("assert " in src(c) for c in cells), "a lab checks what it teaches"
    sol = sum(src(c).count("### BEGIN SOLUTION") for c in cells)
    assert sol == sum(src(c).count("### END SOLUTION") for c in cells) and 2 <= sol <= 4, "2-4 exercises, balanced"
    setup_words = ("pip install", "XLA_FLAGS", "jax_num_cpu_devices", "sys.path")
    # The first cell is the generated bootstrap (tests/test_course.py); after it, no setup code.
    assert not [w for c in cells[1:] for w in setup_words if w in src(c)], "setup belongs in labkit, not in a lab"


MAX_CELL_LINES = 25  # cells teach (the formula, the loop, the assertion); labkit does the plumbing
LONG_CELL_KEY = "long_cell"  # cell metadata {"labkit": {"long_cell": "<why this cell must be long>"}}


def long_cells(nb: dict, limit: int = MAX_CELL_LINES) -> list[tuple[int, int, str | None]]:
    """(cell index, lines, the reason it may be long or None) for each code cell over ``limit`` lines."""
    return [(i, n, c.get("metadata", {}).get("labkit", {}).get(LONG_CELL_KEY))
            for i, c in enumerate(nb["cells"])
            if c["cell_type"] == "code" and (n := len("".join(c["source"]).splitlines())) > limit]


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_code_cells_are_short(lab: Path) -> None:
    # The allow-list lives on the cell itself, so an exception travels with its reason.
    found = long_cells(_nb(lab))
    unexcused = [f"cell {i}: {n} lines" for i, n, why in found if not why]
    assert not unexcused, (f"{lab.name}: code cells over {MAX_CELL_LINES} lines: {unexcused}; move plots and "
                           f"plumbing into the topic's labkit package, or give the cell metadata "
                           f'{{"labkit": {{"{LONG_CELL_KEY}": "<reason>"}}}}')
    vague = [f"cell {i}: {why!r}" for i, _, why in found if why and len(why.split()) < 5]
    assert not vague, f"{lab.name}: a long cell's reason must say why in a sentence: {vague}"


def test_long_cell_check_can_fail() -> None:
    code = lambda n, **meta: {"cell_type": "code", "source": "x = 1\n" * n, "metadata": meta}  # noqa: E731
    nb = {"cells": [code(25), code(26), code(40, labkit={LONG_CELL_KEY: "the loop is the lesson, line by line"}),
                    {"cell_type": "markdown", "source": "text\n" * 99, "metadata": {}}]}
    assert long_cells(nb) == [(1, 26, None), (2, 40, "the loop is the lesson, line by line")]


@pytest.fixture(scope="module")
def student_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """`labkit run` of every lab's student copy, once: the run the tests below read."""
    copies = tmp_path_factory.mktemp("student") / "labs"
    student.write_student_copies(LABS, copies)
    scratch = tmp_path_factory.mktemp("kernel-tmp")  # the kernels' TMPDIR: what the labs leave there is checked
    mp = pytest.MonkeyPatch()
    mp.setenv("TMPDIR", str(scratch))
    mp.setenv(check.MODE_ENV, "report")  # report, don't stop: the stubs are "not done yet"
    try:
        report = runner.run([], "auto", tmp_path_factory.mktemp("run"), timeout_s=900, directory=copies)
    finally:
        mp.undo()
    return report | {"kernel_tmpdir": str(scratch)}


def test_labs_leave_no_scratch_folders_behind(student_run: dict) -> None:
    """Labs 03 and 05 used to leave a folder in /tmp per run (a few MB each): a TemporaryDirectory goes with the kernel.

    `labkit run` gives each lab's processes a TMPDIR of their own and removes it, recording what was left there:
    nothing, as when a learner runs the lab in Jupyter, where no runner sweeps up after it.
    """
    left = {r["name"]: r["left_in_tmp"] for r in student_run["labs"] if r["left_in_tmp"]}
    assert not left, f"the labs left these in their TMPDIR: {left}"
    kept = sorted(p.name for p in Path(student_run["kernel_tmpdir"]).iterdir() if not p.name.startswith("torchinductor_"))
    assert not kept, f"left in the run's TMPDIR after `labkit run` ended: {kept}"


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_lab_runs_and_records(student_run: dict, lab: Path) -> None:
    result = next(r for r in student_run["labs"] if r["name"] == lab.stem)
    err = result["error"] or {}
    assert result["status"] == "ok", f"cell {err.get('cell')}: {err.get('ename')}: {err.get('evalue')}\n{err.get('traceback', '')[-2000:]}"
    missing = REQUIRED_METRICS.get(lab.stem, set()) - set(result["metrics"])
    assert not missing, f"{lab.stem} did not record {sorted(missing)}"
    assert result["metrics"]["profile"] == "smoke"  # auto -> smoke on a CPU runtime


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_student_copy_reports_every_exercise_not_done(student_run: dict, lab: Path) -> None:
    """A learner who has done nothing yet runs the lab to its end, and every check says "not done yet"."""
    result = next(r for r in student_run["labs"] if r["name"] == lab.stem)
    assert result["status"] == "ok", f"{lab.stem}'s student copy did not run to its end: {result['error']}"
    executed = nbformat.read(Path(student_run["out_dir"]) / result["notebook"], as_version=4)
    text = "\n".join(o.get("text", "") for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", []))
    n_checks = sum(len(student._CHECK_CALL.findall(c.source)) for c in executed.cells if c.cell_type == "code")
    assert text.count("not done yet") == n_checks >= 2
    assert "✔" not in text  # no stub passes a check


def test_lab00_numbers(student_run: dict) -> None:
    m = next(r for r in student_run["labs"] if r["name"] == "00_know_your_accelerator")["metrics"]
    assert m["matmul_tflops_measured"] > 0 and m["bandwidth_gbs_measured"] > 0
    spec = hardware.lookup(m["chip"])
    assert m["peak_tflops_spec"] == (spec.peak_tflops[m["matmul_dtype"]] if spec else None)
    assert m["ridge_flop_per_byte_measured"] == pytest.approx(
        m["matmul_tflops_measured"] * 1e12 / (m["bandwidth_gbs_measured"] * 1e9), rel=1e-9)


def test_instructor_guide_covers_every_lab() -> None:
    guide = (ROOT / "labs" / "INSTRUCTOR.md").read_text()
    for lab in LABS:
        num, topic = lab.stem[:2], lab.stem[3:].replace("_", " ")
        assert f"### {num} " in guide, f"INSTRUCTOR.md has no section for {lab.stem}"
        assert re.search(rf"^\| {num} \|", guide, re.M), f"INSTRUCTOR.md's key-numbers table lacks lab {num}"
    for heading in ("Before the workshop", "Workshop agendas", "One day", "Two days"):
        assert heading in guide


def test_readme_smoke_column_is_the_committed_benchmark() -> None:
    """The README's "smoke on 2-core CPU" column and its source line quote benchmarks/results/labs_smoke_*.json."""
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"`benchmarks/results/labs_smoke_<host>\.json` \(the CPU column: [^,]+, (\d{4}-\d\d-\d\d), "
                      r"commit (\w+)\)", " ".join(readme.split()))
    assert found, "the README no longer names the smoke benchmark's date and commit: update this test with it"
    runs = [json.loads(p.read_text()) for p in sorted((ROOT / "benchmarks" / "results").glob("labs_smoke_*.json"))]
    run = next((r for r in runs if r["date"] == found.group(1) and r["commit"].startswith(found.group(2))), None)
    assert run, f"no committed labs_smoke_*.json from {found.groups()}"
    for lab in run["labs"]:
        num = lab["lab"][:2]
        row = next(line for line in readme.splitlines() if line.startswith(f"| [{num} "))
        quoted = re.search(r"\| (\d+) s \(target (\d+) s\) \|", row)
        assert quoted, f"README row {num} has no 'N s (target T s)' smoke cell"
        assert (int(quoted.group(1)), int(quoted.group(2))) == (round(lab["seconds"]), lab["target_s"]), (num, lab)


def test_lab02_skips_the_torch_breakdown_without_kernel_records(monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """A CUDA profile with launches but no kernels (no CUPTI): Lab 02 says why, draws the phases, records None."""
    from types import SimpleNamespace

    import matplotlib.pyplot as plt

    from labkit.measure import breakdown, plots

    cells = ["".join(c["source"]) for c in _nb(ROOT / "labs/02_mfu.ipynb")["cells"] if c["cell_type"] == "code"]
    why = "the CUDA profiler recorded no kernels in 5 steps on cuda:0: is CUPTI available"

    def no_kernels(*args: object, **kwargs: object) -> None:
        raise breakdown.NoKernelRecords(why)

    monkeypatch.setattr(breakdown, "torch_op_breakdown", no_kernels)
    recorded: dict[str, object] = {}
    phase = {"forward": 0.002, "backward": 0.005, "optimizer": 0.001}  # s
    ns = {"torch_batches": [(None, None)], "tt": None, "DTYPE": "bf16", "tdev": "cuda:0", "plt": plt, "plots": plots,
          "show": lambda *a, **k: pytest.fail("a table was shown with no profile"), "phases": {"torch": phase},
          "xla": SimpleNamespace(matmul_flop_share=0.97), "slower_backward": SimpleNamespace(holds=True),
          "ref_peak": {"bf16": SimpleNamespace(kind="spec")}, "labkit": SimpleNamespace(record=recorded.__setitem__),
          "torch_here": True}
    for marker in ("breakdown.torch_op_breakdown(", "plots.plot_step_time_breakdown(ops", "if ops is not None:"):
        exec(next(c for c in cells if marker in c), ns)  # the lab's own cells, in order
    plt.close("all")
    assert ns["ops"] is None and recorded == {"op_share_matmul": None, "op_share_matmul_of_step": None}
    out = capsys.readouterr().out
    assert f"torch breakdown skipped: {why}" in out and "only the phases are drawn" in out


def test_lab02_breakdown_on_a_recorded_h100_profile(capsys: pytest.CaptureFixture) -> None:
    """Lab 02's check cell fed the kernels an H100 recorded (tests/measure/fixtures): shares, idle time, the peak bound."""
    from types import SimpleNamespace

    from labkit.measure import bench, breakdown

    run = json.loads((ROOT / "tests/measure/fixtures/torch_kernels_h100.json").read_text())["runs"][0]
    ops = breakdown.attribute([(k["kernel"], k["us_per_step"], (k["launched_by"] or [None])[0]) for k in run["kernels"]])
    kernel_ms = run["kernel_us_per_step"] / 1e3  # 2.29 ms of kernels per step
    assert ops.source == breakdown.BY_LAUNCHER and ops.ms_per_step == pytest.approx(kernel_ms)
    cell = next("".join(c["source"]) for c in _nb(ROOT / "labs/02_mfu.ipynb")["cells"]
                if c["cell_type"] == "code" and "if ops is not None:" in "".join(c["source"]))
    recorded: dict[str, object] = {}
    ns = {"ops": ops, "tc": SimpleNamespace(flops=1e9), "now_step_s": {"torch": kernel_ms * 1.25 / 1e3}, "bench": bench,
          "breakdown": breakdown, "bound": SimpleNamespace(flops=989e12, kind="spec", label=lambda: "spec bf16 peak"), "slack": 1.0,
          "torch_ceiling": lambda: 989e12,  # section 6's first cell: the spec peak on a GPU
          "measure_into": lambda *a: pytest.fail("a spec peak is not measured again"), "DTYPE": "bf16",
          "xla_matmul_share": 0.97, "labkit": SimpleNamespace(record=recorded.__setitem__), "torch_skipped": 0}
    exec(cell, ns)
    out = capsys.readouterr().out
    assert recorded["op_share_matmul"] == pytest.approx(ops.matmul_share)
    assert recorded["op_share_matmul_of_step"] == pytest.approx(ops.matmul_share / 1.25)  # the step is 1.25x its kernels
    assert "the GPU idled 20% of it" in out and f"{ops.matmul_share:.0%} of the profiled time" in out
    # 10 TFLOP in ~1 ms of matmuls: faster than the peak however often it is measured again; the check fires
    ns.update(tc=SimpleNamespace(flops=1e13), measure_into=lambda *a: [989e12])
    with pytest.raises(AssertionError, match="matmuls faster than the peak"):
        exec(cell, ns)


def test_lab02_section6_without_torch_on_the_chip(capsys: pytest.CaptureFixture) -> None:
    """A TPU runtime without torch-xla: section 6 says why torch is skipped, draws JAX's phases alone, records None."""
    from types import SimpleNamespace

    import matplotlib.pyplot as plt

    from labkit.measure import plots

    cells = ["".join(c["source"]) for c in _nb(ROOT / "labs/02_mfu.ipynb")["cells"] if c["cell_type"] == "code"]
    recorded: dict[str, object] = {}
    ns = {"torch_here": False, "DTYPE": "bf16", "plt": plt, "plots": plots,
          "show": lambda *a, **k: pytest.fail("a torch table was shown without torch on the chip"),
          "phases": {"jax": {"forward": 0.001, "backward": 0.003, "optimizer": 0.001}},  # section 6's JAX split
          "xla": SimpleNamespace(matmul_flop_share=0.97), "ref_peak": {"bf16": SimpleNamespace(kind="spec")},
          "labkit": SimpleNamespace(record=recorded.__setitem__)}
    for marker in ("breakdown.torch_op_breakdown(", "plots.plot_step_time_breakdown(ops", "if ops is not None:"):
        exec(next(c for c in cells if marker in c), ns)  # the lab's own cells, in order
    plt.close("all")
    assert ns["ops"] is None and recorded == {"op_share_matmul": None, "op_share_matmul_of_step": None}
    assert "torch breakdown skipped: torch runs on this host's CPU" in capsys.readouterr().out


def test_lab02_headline_follows_a_step_that_did_not_reproduce() -> None:
    """Section 5: a re-timed step is the headline; a measured peak it beats is measured again, every headline restated."""
    from dataclasses import replace
    from types import SimpleNamespace

    from labkit.measure import bench, mfu, steptime

    cells = ["".join(c["source"]) for c in _nb(ROOT / "labs/02_mfu.ipynb")["cells"] if c["cell_type"] == "code"]
    recorded: dict[str, object] = {}
    peak = mfu.measured_peak(1e11, "fp32", "CPU X", "jax matmul 512x512x512")
    ns = {"mfu": mfu, "steptime": steptime, "bench": bench, "replace": replace, "flops_per_step": 4e8, "DTYPE": "fp32",
          "rt": SimpleNamespace(chip="CPU X"), "measured": {"fp32": peak}, "ref_peak": {"fp32": peak}, "VARIANT": "palm",
          "P": SimpleNamespace(batch=8), "T": 64, "labkit": SimpleNamespace(record=recorded.__setitem__),
          "FRAMEWORKS": ("jax", "torch"), "step_s": {"jax": 0.010, "torch": 0.012},
          "timing": {fw: SimpleNamespace(spread=0.05) for fw in ("jax", "torch")}}
    exec(next(c for c in cells if "def headline(" in c), ns)  # section 4: 40% and 33% of the 0.1 TFLOP/s peak
    assert recorded["mfu_jax"] == pytest.approx(0.4)
    # jax re-timed at 3.5 ms: 0.114 TFLOP/s, above section 4's measured peak, which a busy moment had slowed
    ns.update(reproduced={"jax": False, "torch": True}, step_s={"jax": 0.0035, "torch": 0.012},
              measure_into=lambda tries, dt: tries.append(SimpleNamespace(flops_per_s=1.3e11, framework="torch",
                                                                         name="matmul 512x512x512")) or [1.3e11])
    exec(next(c for c in cells if "restate = [" in c), ns)
    assert recorded["mfu_jax"] == pytest.approx(4e8 / 0.0035 / 1.3e11)  # the step as it runs now, the new peak
    assert recorded["mfu_torch"] == pytest.approx(4e8 / 0.012 / 1.3e11)  # restated against the same peak
    assert "1.3e+11" not in str(recorded["peak_used"]) and "0.13 TFLOP/s" in str(recorded["peak_used"])
