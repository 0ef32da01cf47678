"""The docs quote only numbers the committed run reports hold (labs/INSTRUCTOR.md, README.md, colab/README.md).

Every number in Lab 04's row of the key-numbers table and in its "Time to run" line must be found in
the committed report of that column's runtime: the CPU column in benchmarks/cpu-2core/report.json,
the GPU column in benchmarks/nvidia-h100-80gb-hbm3/report.json (its latest Lab 04 entry: metrics,
seconds, error text). A metric the report lacks is quoted as "awaits a GPU run", never as a figure.
Lab 05's GPU column comes from benchmarks/nvidia-h200/report.json (labelled "H200 measured"); its full
time names both GPUs: the H100's latest complete run (2026-11-26) and the H200's. Beyond "some value
rounds to it", NAMED ties each key figure of Labs 00, 01, 02, 04 and 05 to the one metric its words name
(a swap of JAX's and torch's figures fails), the H100 figures quoted in Lab 00's text are checked and Lab 04's
are printed from the committed files, never typed. Every lab's smoke and full times, the guide's CPU header, colab/README.md's timing
table and README.md's H100 column are checked against the same reports, and the gather command the
docs recommend is checked to do what they say.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "labs" / "INSTRUCTOR.md"
CPU_REPORT = ROOT / "benchmarks" / "cpu-2core" / "report.json"
GPU_REPORT = ROOT / "benchmarks" / "nvidia-h100-80gb-hbm3" / "report.json"
H200_REPORT = ROOT / "benchmarks" / "nvidia-h200" / "report.json"
LAB = "04_mixed_precision"
LAB05 = "05_train_tpu_serve_gpu"
# Lab 04's metrics from issue 17: the GPU column says "awaits a GPU run" until the H100 report has them.
NEW_GPU_METRICS = ("loss_gap_bf16_vs_fp32", "loss_noise_floor_fp32", "fp8_rel_err_current", "fp8_rel_err_delayed",
                   "fp8_rel_err_block", "fp8_speedup_vs_bf16", "bf16_speedup_vs_tf32_jax", "bf16_speedup_vs_tf32_torch",
                   "bf16_speedup_vs_fp32_jax", "bf16_speedup_vs_fp32_torch")
AWAITS = "awaits a GPU run"
# A number standing alone: not part of a name such as fp32, H100, T4, e4m3 or v5e; "1.37x", "44%" and
# "1e-3" count; atomic, so "1.75x" cannot shrink to "1" to escape the check.
NUMBER = re.compile(r"(?<![\w.\-^])(?>(\d+(?:\.\d+)?(?:e[-+]?\d+)?))(%|x)?(?![\w]|\.\d)")


def lab_entry(report: dict, lab: str = LAB) -> dict:
    """The report's entry for ``lab``."""
    return next(e for e in report["labs"] if e["name"] == lab)


def _numbers_in(value: Any) -> list[float]:
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, str):
        return [float(n) for n, _ in NUMBER.findall(value)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers_in(v)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers_in(v)]
    return []


def backed(entry: dict) -> list[float]:
    """Every number the entry holds: metrics (nested), seconds, the error's text."""
    return _numbers_in(entry.get("metrics") or {}) + _numbers_in(entry.get("seconds")) + \
        _numbers_in((entry.get("error") or {}).get("evalue", ""))


def quoted_matches(num: str, unit: str, value: float) -> bool:
    """True if ``num`` (as written, with its unit "%", "x" or "") is ``value`` rounded to the digits written."""
    v = value * 100 if unit == "%" else value
    mant, _, exp = num.partition("e")
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    half_step = 0.5 * 10.0 ** (int(exp or 0) - decimals)
    return abs(v - float(num)) <= half_step * (1 + 1e-9)


def unbacked(text: str, entry: dict) -> list[str]:
    """Numbers in ``text`` that no value of ``entry`` rounds to."""
    have = backed(entry)
    return [num + unit for num, unit in NUMBER.findall(text) if not any(quoted_matches(num, unit, v) for v in have)]


def lab_cells(guide: str, lab: str = "04") -> tuple[str, str, str]:
    """(CPU cell, GPU cell, TPU cell) of a lab's row (Lab 04's by default) in the key-numbers table."""
    row = next(line for line in guide.splitlines() if line.startswith(f"| {lab} |"))
    cells = [c.strip() for c in row.strip().strip("|").split(" | ")]
    return cells[1], cells[2], cells[3]


def lab_time_line(guide: str, lab: str = "04") -> str:
    """A lab's "Time to run" line (Lab 04's by default), continuation lines included."""
    section = guide.split(f"### {lab} ", 1)[1].split("\n### ", 1)[0]
    lines = section.splitlines()
    i = next(i for i, line in enumerate(lines) if "Time to run" in line)
    more = itertools.takewhile(lambda line: line.startswith("  "), lines[i + 1:])  # indented continuation
    return " ".join([lines[i]] + [line.strip() for line in more])


def missing_metrics(entry: dict) -> list[str]:
    m = entry.get("metrics") or {}
    return [k for k in NEW_GPU_METRICS if m.get(k) is None]


# ------------------------------------------------------------------------------- the checks


@pytest.fixture(scope="module")
def guide() -> str:
    return GUIDE.read_text()


def test_cpu_column_numbers_come_from_the_cpu_report(guide: str) -> None:
    cpu, _, _ = lab_cells(guide)
    entry = lab_entry(json.loads(CPU_REPORT.read_text()))
    assert not unbacked(cpu, entry), f"INSTRUCTOR.md Lab 04 CPU column quotes {unbacked(cpu, entry)}: not in {CPU_REPORT.name}"


def test_gpu_column_numbers_come_from_the_h100_report(guide: str) -> None:
    _, gpu, _ = lab_cells(guide)
    entry = lab_entry(json.loads(GPU_REPORT.read_text()))
    assert not unbacked(gpu, entry), (f"INSTRUCTOR.md Lab 04 GPU column quotes {unbacked(gpu, entry)}: not in "
                                      f"{GPU_REPORT.relative_to(ROOT)} (latest Lab 04 run, commit {entry.get('commit')})")
    if missing_metrics(entry):
        assert AWAITS in gpu, f"the H100 report lacks {missing_metrics(entry)}: the GPU column must say '{AWAITS}'"
    else:
        assert AWAITS not in gpu, "the H100 report now has every Lab 04 metric: quote them instead of 'awaits'"


def test_time_to_run_comes_from_the_reports(guide: str) -> None:
    line = lab_time_line(guide)
    smoke, _, full = line.partition("full")
    assert not unbacked(smoke.split("Time to run", 1)[1], lab_entry(json.loads(CPU_REPORT.read_text())))
    assert not unbacked(full, lab_entry(json.loads(GPU_REPORT.read_text())))


def test_lab05_gpu_column_and_time_come_from_the_h200_and_h100_reports(guide: str) -> None:
    _, gpu, _ = lab_cells(guide, "05")
    entry = lab_entry(json.loads(H200_REPORT.read_text()), LAB05)
    assert "H200 measured" in gpu
    assert not unbacked(gpu, entry), (f"INSTRUCTOR.md Lab 05 GPU column quotes {unbacked(gpu, entry)}: not in "
                                      f"{H200_REPORT.relative_to(ROOT)} (commit {entry.get('commit')})")
    smoke, _, full = lab_time_line(guide, "05").partition("full")
    assert not unbacked(smoke.split("Time to run", 1)[1], lab_entry(json.loads(CPU_REPORT.read_text()), LAB05))
    found = re.search(r"^ (\d+) s on an H100 .*?\), (\d+) s on one H200", full)
    assert found, f"Lab 05's full time must name the H100's and the H200's seconds: {full!r}"
    h100 = lab_entry(json.loads(GPU_REPORT.read_text()), LAB05)
    assert [int(g) for g in found.groups()] == [round(h100["seconds"]), round(entry["seconds"])]
    assert "stopped" not in full, "the H100 has a complete Lab 05 run: do not call its runs stopped"


def test_the_check_fails_on_an_unbacked_number() -> None:
    entry = {"metrics": {"fp8_speedup_vs_bf16": None, "x": {"jax": 0.4358}}, "seconds": 146.34,
             "error": {"evalue": "jax bf16: final loss 2.854 vs fp32 2.747"}}
    assert unbacked("fp8 matmul 1.37x bf16; torch bf16 1.75x.", entry) == ["1.37x", "1.75x"]
    assert unbacked("44% error, 146 s, 2.854 vs 2.747, fp32 and H100 and e4m3 are names", entry) == []
    assert unbacked("agree to 1e-3; 45% zero; ends with 3.75.", entry) == ["1e-3", "45%", "3.75"]
    assert missing_metrics(entry) == list(NEW_GPU_METRICS)
    row = "| 04 | a 44% | b 1.37x | c |"
    assert lab_cells(row) == ("a 44%", "b 1.37x", "c")


def test_lab01_schedule_figures_come_from_the_committed_h100_runs(guide: str) -> None:
    from labkit.matmul import reference_chips as rc

    text = " ".join(guide.split())  # the sentence wraps across lines
    found = re.search(r"cuBLAS beat the whole-tile model at (\d+) of (\d+) swept shapes, by up to ([\d.]+)x, and at "
                      r"(\d+) of (\d+) probed shapes, by up to ([\d.]+)x; it beat the Stream-K model at none, "
                      r"reaching at most ([\d.]+) and ([\d.]+) of it", text)
    assert found, "Lab 01's objectives no longer quote the schedule check: update this test with the text"
    g = found.groups()
    for source, (beat, shapes, most), sk_most in zip(rc.H100_SOURCES, (g[0:3], g[3:6]), g[6:8]):
        tiles, sk = (rc.measured_over_model(rc.h100_cublas(source), schedule=s) for s in ("tiles", "stream-k"))
        assert (int(beat), int(shapes), float(most)) == ((tiles > 1).sum(), len(tiles), round(tiles.max(), 2)), source
        assert (sk > 1).sum() == 0 and float(sk_most) == round(sk.max(), 2), source


# ------------------------------------------------------------------ each quote tied to the figure it names
# "Any value of the entry rounds to it" lets two figures trade places (JAX's speed-up quoted as torch's).
# Here each quoted figure is found by the words around it and compared with the one metric it names.
MFU_MEDIUM = ROOT / "benchmarks" / "nvidia-h100-80gb-hbm3" / "mfu_gpt2-medium.json"
BF16_LOSS = ROOT / "benchmarks" / "nvidia-h100-80gb-hbm3" / "bf16_loss.json"
H100_BF16_SPEC = 989.0  # TFLOP/s: the peak Lab 02's "of spec" divides by (labkit.runtime.hardware, H100 SXM)


def _metrics(report: Path, lab: str) -> dict:
    return lab_entry(json.loads(report.read_text()), lab)["metrics"]


def _pct(key: str) -> Any:
    return lambda m: 100 * m[key]


NAMED: list[tuple[str, int, Any, str, tuple[Any, ...]]] = [  # (lab, column, source, pattern, one getter per group)
    ("01", 0, lambda: _metrics(CPU_REPORT, "01_systolic_vs_cuda_cores"),
     r"OS (\d+), WS (\d+), IS (\d+) .*?128→129 halves MXU utilization \(([\d.]+)\)",
     (lambda m: m["sim_cycles_os_8x8_64x32x48"], lambda m: m["sim_cycles_ws_8x8_64x32x48"],
      lambda m: m["sim_cycles_is_8x8_64x32x48"], lambda m: m["mxu128_util_n129_over_n128"])),
    ("02", 0, lambda: _metrics(CPU_REPORT, "02_mfu"),
     r"MFU ([\d.]+) \(JAX\) and ([\d.]+) \(torch\) of the \*measured\* fp32 peak",
     (lambda m: m["mfu_jax_vs_measured"], lambda m: m["mfu_torch_vs_measured"])),
    ("00", 0, lambda: _metrics(CPU_REPORT, "00_know_your_accelerator"),
     r"matmul ([\d.]+) TFLOP/s \(bf16\), bandwidth (\d+) GB/s \(best probe: torch copy; JAX stream in place (\d+), "
     r"JAX read (\d+), torch read (\d+)\), ridge ([\d.]+) FLOP/byte",
     (lambda m: m["matmul_tflops_measured"], lambda m: m["bandwidth_gbs_copy_torch"],
      lambda m: m["bandwidth_gbs_stream_in_place_jax"], lambda m: m["bandwidth_gbs_read_jax"],
      lambda m: m["bandwidth_gbs_read_torch"], lambda m: m["ridge_flop_per_byte_measured"])),
    ("00", 1, lambda: _metrics(GPU_REPORT, "00_know_your_accelerator"),
     r"bf16 (\d+) TFLOP/s of (\d+) spec, fp32 (\d+), HBM read ([\d.]+) TB/s \(JAX; torch copy ([\d.]+)\), "
     r"ridge (\d+) FLOP/byte",
     (lambda m: m["matmul_tflops_measured"], lambda m: m["peak_tflops_spec"], lambda m: m["matmul_fp32_tflops_measured"],
      lambda m: m["bandwidth_gbs_read_jax"] / 1e3, lambda m: m["bandwidth_gbs_copy_torch"] / 1e3,
      lambda m: m["ridge_flop_per_byte_measured"])),
    ("02", 1, lambda: _metrics(GPU_REPORT, "02_mfu"),
     r"JAX ([\d.]+)%, torch\.compile ([\d.]+)% of spec \(([\d.]+)% / ([\d.]+)% of the measured (\d+) TFLOP/s\)",
     (_pct("mfu_jax"), _pct("mfu_torch"), _pct("mfu_jax_vs_measured"), _pct("mfu_torch_vs_measured"),
      lambda m: H100_BF16_SPEC * m["mfu_jax"] / m["mfu_jax_vs_measured"])),
    ("02", 1, lambda: json.loads(MFU_MEDIUM.read_text()),
     r"torch\.compile ([\d.]+)% of spec at ([\d.]+) ms/step\b.*?Flax ([\d.]+)% at ([\d.]+) ms/step",
     (lambda m: 100 * m["torch"]["mfu_vs_spec"], lambda m: 1e3 * m["torch"]["step_time_s_median"],
      lambda m: 100 * m["jax"]["mfu_vs_spec"], lambda m: 1e3 * m["jax"]["step_time_s_median"])),
    ("04", 0, lambda: _metrics(CPU_REPORT, LAB),
     r"without loss scaling: (\d+)% error \(best loss scale: ([\d.e-]+)\); bf16 final-loss gap to fp32 ([\d.]+) "
     r"\(JAX\) against an init-to-init floor \(same batches\) of ([\d.]+).*?bf16 step at ([\d.]+)x \(JAX\) and "
     r"([\d.]+)x \(torch\) the speed of fp32",
     (_pct("fp16_grad_error_unscaled"), lambda m: m["fp16_grad_error_best_scale"],
      lambda m: m["loss_gap_bf16_vs_fp32"]["jax"], lambda m: m["loss_noise_floor_fp32"]["jax"],
      lambda m: m["bf16_speedup_vs_fp32_jax"], lambda m: m["bf16_speedup_vs_fp32_torch"])),
    ("04", 1, lambda: _metrics(GPU_REPORT, LAB),
     r"bf16 step ([\d.]+)x \(JAX\) and ([\d.]+)x \(torch\) faster than TF32, ([\d.]+)x and ([\d.]+)x faster than "
     r"true fp32; bf16 loss gap to fp32 ([\d.]+) nats \(JAX, floor ([\d.]+)\) and ([\d.]+) \(torch, floor ([\d.]+)\)",
     (lambda m: m["bf16_speedup_vs_tf32_jax"], lambda m: m["bf16_speedup_vs_tf32_torch"],
      lambda m: m["bf16_speedup_vs_fp32_jax"], lambda m: m["bf16_speedup_vs_fp32_torch"],
      lambda m: m["loss_gap_bf16_vs_fp32"]["jax"], lambda m: m["loss_noise_floor_fp32"]["jax"],
      lambda m: m["loss_gap_bf16_vs_fp32"]["torch"], lambda m: m["loss_noise_floor_fp32"]["torch"])),
    ("04", 1, lambda: _metrics(GPU_REPORT, LAB),
     r"bf16 ends at ([\d.]+) against fp32's ([\d.]+), torch's three runs all end at ([\d.]+) to ([\d.]+)",
     (lambda m: m["final_loss_per_precision"]["jax"]["bf16"], lambda m: m["final_loss_per_precision"]["jax"]["fp32"],
      lambda m: min(m["final_loss_per_precision"]["torch"].values()),
      lambda m: max(m["final_loss_per_precision"]["torch"].values()))),
    ("04", 1, lambda: _metrics(GPU_REPORT, LAB), r"fp8 matmul ([\d.]+)x bf16 with quantization",
     (lambda m: m["fp8_speedup_vs_bf16"],)),
    *[("04", col, lambda r=rep: _metrics(r, LAB), r"fp8 recipe errors[^:]*: current ([\d.]+), delayed ([\d.]+), "
       r"per-block ([\d.]+)", (lambda m: m["fp8_rel_err_current"], lambda m: m["fp8_rel_err_delayed"],
                               lambda m: m["fp8_rel_err_block"])) for col, rep in ((0, CPU_REPORT), (1, GPU_REPORT))],
    ("05", 1, lambda: _metrics(H200_REPORT, LAB05),
     r"serves ([\d.]+)x JAX jit's tokens/s at batch 1 and ([\d.]+)x at batch 32, .*?steps ([\d.]+)x faster than eager "
     r"at batch 1.*?top-1 agreement ([\d.]+), KL ([\d.e-]+)",
     (lambda m: m["serve_best_torch_over_jax_batch1"], lambda m: m["serve_best_torch_over_jax_batch32"],
      lambda m: m["serve_cuda_graph_step_speedup_batch1"], lambda m: m["bf16_top1_agreement"], lambda m: m["bf16_kl"])),
]


def named_mismatches(text: str, pattern: str, getters: tuple[Any, ...], metrics: dict) -> list[str]:
    """Each group of ``pattern`` in ``text`` against the figure its getter names; a missing sentence is a mismatch."""
    found = re.search(pattern, " ".join(text.split()))
    if not found:
        return [f"no sentence matches {pattern!r}"]
    assert len(found.groups()) == len(getters), pattern
    return [f"{num} (report: {get(metrics):.6g})" for num, get in zip(found.groups(), getters)
            if not quoted_matches(num, "", get(metrics))]


@pytest.mark.parametrize("lab, col, source, pattern, getters", NAMED, ids=[f"{n[0]}-{'cpu gpu'.split()[n[1]]}-{i}"
                                                                        for i, n in enumerate(NAMED)])
def test_each_quote_is_the_figure_it_names(guide: str, lab: str, col: int, source: Any, pattern: str,
                                           getters: tuple[Any, ...]) -> None:
    cell = lab_cells(guide, lab)[col]
    bad = named_mismatches(cell, pattern, getters, source())
    assert not bad, f"INSTRUCTOR.md Lab {lab} {'CPU GPU'.split()[col]} column: {bad}"


def test_named_check_fails_when_two_figures_trade_places() -> None:
    m = {"bf16_speedup_vs_tf32_jax": 1.83, "bf16_speedup_vs_tf32_torch": 2.34}
    getters = (lambda m: m["bf16_speedup_vs_tf32_jax"], lambda m: m["bf16_speedup_vs_tf32_torch"])
    pattern = r"bf16 ([\d.]+)x \(JAX\) and ([\d.]+)x \(torch\)"
    assert named_mismatches("bf16 1.83x (JAX) and 2.34x (torch)", pattern, getters, m) == []
    swapped = "bf16 2.34x (JAX) and 1.83x (torch)"
    assert not unbacked(swapped, {"metrics": m})  # the any-value check lets the swap through ...
    assert named_mismatches(swapped, pattern, getters, m) == ["2.34 (report: 1.83)", "1.83 (report: 2.34)"]  # ... this not
    assert named_mismatches("reworded", pattern, getters, m) == [f"no sentence matches {pattern!r}"]


def test_committed_figures_quoted_in_labs_00_and_04_are_the_reports() -> None:
    """Lab 00's measured-vs-spec text quotes the H100 run (each figure checked); Lab 04 prints its figures from the files."""
    def markdown(nb: str, needle: str) -> str:
        cells = json.loads((ROOT / "labs" / nb).read_text())["cells"]
        return " ".join(" ".join("".join(c["source"]) for c in cells if needle in "".join(c["source"])).split())

    e00 = lab_entry(json.loads(GPU_REPORT.read_text()), "00_know_your_accelerator")
    m = e00["metrics"]
    text = markdown("00_know_your_accelerator.ipynb", "## 5. Measured vs spec")
    found = re.search(r"at commit (\w+)[^)]*\) measured (\d+) of (\d+) TFLOP/s in bf16 \(([\d.]+)%\) and ([\d,]+) of "
                      r"([\d,]+) GB/s \((\d+)%\)", text)
    assert found, "Lab 00's measured-vs-spec text no longer quotes the H100 run: update this test with it"
    commit, *nums = found.groups()
    spec_bw = 3350.0  # GB/s, the H100 SXM datasheet (labkit.runtime.hardware)
    want = (m["matmul_tflops_measured"], m["peak_tflops_spec"], 100 * m["matmul_tflops_measured"] / m["peak_tflops_spec"],
            m["bandwidth_gbs_measured"], spec_bw, 100 * m["bandwidth_gbs_measured"] / spec_bw)
    assert commit == e00["commit"]
    assert all(quoted_matches(n.replace(",", ""), "", w) for n, w in zip(nums, want)), (nums, want)

    # Lab 04 prints the H100 figures from the committed files (labkit.precision.reference_run, tested in
    # tests/precision/test_reference_run.py) instead of typing them into its text: none may come back as text.
    cells = json.loads((ROOT / "labs" / "04_mixed_precision.ipynb").read_text())["cells"]
    prose = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    j = _metrics(GPU_REPORT, LAB)["final_loss_per_precision"]
    typed = [f"{v:.3f}" for d in j.values() for v in d.values() if f"{v:.3f}" in prose]
    assert not typed, f"Lab 04's markdown types the H100 final losses {typed}: print them from reference_run instead"
    assert any("reference_run.load()" in "".join(c["source"]) for c in cells if c["cell_type"] == "code")


def test_open_finding_quotes_the_diagnosis_run(guide: str) -> None:
    text = " ".join(guide.split("**Open finding on the H100:**", 1)[1].split("\n- ", 1)[0].split())
    runs = json.loads(BF16_LOSS.read_text())["runs"]
    j = _metrics(GPU_REPORT, LAB)["final_loss_per_precision"]["jax"]
    found = re.search(r"\(([\d.]+) against ([\d.]+) nats in the full profile\).*?−([\d.]+) nats with cuDNN's, "
                      r"−([\d.]+) with XLA's, fp16 on cuDNN's \+(\d+(?:\.\d+)?)", text)
    assert found, "INSTRUCTOR.md's open finding no longer quotes the diagnosis: update this test with it"
    want = (j["bf16"], j["fp32"], -runs["bf16"]["final_gap_vs_fp32"], -runs["bf16_xla"]["final_gap_vs_fp32"],
            runs["fp16_scaled"]["final_gap_vs_fp32"])
    assert all(quoted_matches(n, "", w) for n, w in zip(found.groups(), want)), (found.groups(), want)


# ------------------------------------------------------------ timings: one CPU report, the H100's, the H200's
LAB_NAMES = [e["name"] for e in json.loads(CPU_REPORT.read_text())["labs"]]
COLAB_README = ROOT / "colab" / "README.md"
README = ROOT / "README.md"


def _seconds(report: Path) -> dict[str, int]:
    """{"00": whole seconds, ...} of a report's labs."""
    return {e["name"][:2]: round(e["seconds"]) for e in json.loads(report.read_text())["labs"]}


def test_cpu_header_is_the_cpu_report(guide: str) -> None:
    """The key-numbers header names the CPU report's machine, commit, date and every lab's seconds."""
    report = json.loads(CPU_REPORT.read_text())
    text = " ".join(guide.split())
    found = re.search(r"`benchmarks/cpu-2core/report\.json` \(`labkit run`, smoke profile, a 2-core (.+?) VM with 8 "
                      r"simulated JAX devices, commit (\w+), (\d{4}-\d\d-\d\d): 00 (\d+) s, 01 (\d+) s, 02 (\d+) s, "
                      r"03 (\d+) s, 04 (\d+) s, 05 (\d+) s, 06 (\d+) s; ([\d.]+) min for all seven\)", text)
    assert found, "INSTRUCTOR.md's key-numbers header no longer quotes the CPU report: update this test with it"
    cpu, commit, date, *secs, minutes = found.groups()
    assert all(word in report["device"] for word in cpu.split()), (cpu, report["device"])
    assert report["commit"].startswith(commit) and report["started"].startswith(date), (commit, date)
    assert report["runtime"]["device_count"] == 8 and report["runtime"]["simulated"]
    assert all(e["metrics"]["profile"] == "smoke" and e["status"] == "ok" for e in report["labs"])
    assert [int(s) for s in secs] == [round(e["seconds"]) for e in report["labs"]]
    assert quoted_matches(minutes, "", sum(e["seconds"] for e in report["labs"]) / 60), minutes


def test_every_time_to_run_is_the_cpu_and_h100_reports(guide: str) -> None:
    """Each lab's "Time to run": smoke seconds from the CPU report, full seconds from the H100's latest run."""
    cpu, h100 = _seconds(CPU_REPORT), _seconds(GPU_REPORT)
    for name in LAB_NAMES:
        num = name[:2]
        line = lab_time_line(guide, num)
        smoke = re.search(r"smoke (\d+) s", line)
        full = re.search(r"[Ff]ull(?: profile)? (\d+) s", line)
        assert smoke and full, f"Lab {num}'s time to run no longer reads 'smoke N s ... full N s': {line!r}"
        assert (int(smoke.group(1)), int(full.group(1))) == (cpu[num], h100[num]), (num, line)


def test_colab_readme_timing_table_is_the_reports() -> None:
    """colab/README.md: the smoke column is the CPU report, the full column the H100's; the H200 is labelled."""
    text = COLAB_README.read_text()
    flat = " ".join(text.split())
    report = json.loads(CPU_REPORT.read_text())
    found = re.search(r"the smoke column from `benchmarks/cpu-2core/report\.json` \(`labkit run` on a 2-core "
                      r"Intel Xeon VM, commit (\w+), (\d{4}-\d\d-\d\d)\)", flat)
    assert found, "colab/README.md no longer names the CPU report it quotes: update this test with it"
    assert report["commit"].startswith(found.group(1)) and report["started"].startswith(found.group(2))
    cpu, h100 = _seconds(CPU_REPORT), _seconds(GPU_REPORT)
    for num in cpu:
        row = next(line for line in text.split("## Expected time per lab", 1)[1].splitlines()
                   if line.startswith(f"| {num} "))
        cells = re.fullmatch(r"\| \d\d [^|]+ \| (\d+) s \| (\d+) s[^|]* \|", row)
        assert cells, f"colab/README.md row {num}: {row!r}"
        assert (int(cells.group(1)), int(cells.group(2))) == (cpu[num], h100[num]), row
    h200 = re.search(r"also ran on one H200 \(`benchmarks/nvidia-h200/report\.json`\): (\d+) s", flat)
    assert h200 and int(h200.group(1)) == _seconds(H200_REPORT)["05"]


def test_readme_h100_column_is_the_h100_report() -> None:
    readme = README.read_text()
    h100 = _seconds(GPU_REPORT)
    for num, secs in h100.items():
        row = next(line for line in readme.splitlines() if line.startswith(f"| [{num} "))
        quoted = re.search(r"\| (\d+) s²? \|$", row)
        assert quoted and int(quoted.group(1)) == secs, (num, row[-40:])


def test_the_recommended_gather_does_what_the_docs_say(guide: str) -> None:
    """`labkit gather benchmarks/*/report.json` takes every merged report; `benchmarks/` skips the merged ones."""
    from labkit.course import gather

    merged = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "benchmarks").glob("*/report.json"))
    for doc in (guide, README.read_text()):
        assert "labkit gather benchmarks/*/report.json" in doc
    runs, skipped = gather.gather([ROOT / p for p in merged])
    assert not skipped and len(runs) == len(merged), skipped
    runs, skipped = gather.gather([ROOT / "benchmarks"])
    with_dated_runs = {p for p in merged if any(d.is_dir() and re.fullmatch(r"\d{4}-\d\d-\d\d", d.name)
                                                for d in (ROOT / p).parent.iterdir())}
    assert {str(Path(s.path).resolve().relative_to(ROOT)) for s in skipped} == with_dated_runs
    assert all("duplicate" in s.reason for s in skipped)


def test_the_open_finding_names_what_bf16_loss_json_holds(guide: str) -> None:
    """The guide says which runs the committed diagnosis holds, and that the held-out readings await a GPU run."""
    runs = json.loads(BF16_LOSS.read_text())["runs"]
    text = " ".join(guide.split())
    found = re.search(r"it holds training losses only, of `(\w+)`, `(\w+)`, `(\w+)` and `(\w+)`", text)
    assert found and set(found.groups()) == set(runs), (found and found.groups(), sorted(runs))
    assert not any("val_loss_fp32" in r for r in runs.values()), "bf16_loss.json has held-out losses now: quote them"
    assert "awaits a GPU run" in text and "steps_ahead_of_fp32" in text
    assert "steps_ahead_of_fp32" in (ROOT / "benchmarks" / "diag_bf16_loss.py").read_text()


def test_learner_facing_docs_name_no_internal_issue() -> None:
    """INSTRUCTOR.md and colab/ speak to instructors and learners: no "issue 15", no file that is not in the repo."""
    import nbformat

    docs = {"labs/INSTRUCTOR.md": (ROOT / "labs" / "INSTRUCTOR.md").read_text(), "colab/README.md": COLAB_README.read_text()}
    for nb in sorted((ROOT / "colab").glob("*.ipynb")):
        docs[str(nb.relative_to(ROOT))] = "\n".join(c.source for c in nbformat.read(nb, as_version=4).cells
                                                    if c.cell_type == "markdown")
    for name, text in docs.items():
        assert not re.search(r"\bissues? \d+", text, re.I), f"{name} names an internal issue"
        for md in re.findall(r"\b([A-Z][A-Z_]+\.md)\b", text):
            assert list(ROOT.rglob(md)), f"{name} cites {md}, which is not in the repository"
