"""labkit.course.failure: every way a run is explained, on notebooks as papermill writes them."""

from __future__ import annotations

from typing import Any

from labkit.course import failure


def _cell(source: Any, outputs: list[dict[str, Any]] | None = None, started: bool = True,
          tags: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"tags": tags or []}
    if started:
        meta["papermill"] = {"start_time": "2026-11-27T10:00:00"}
    return {"cell_type": "code", "source": source, "metadata": meta, "outputs": outputs or []}


def _nb(*cells: dict[str, Any]) -> dict[str, Any]:
    return {"cells": [{"cell_type": "markdown", "source": "# a lab", "metadata": {}}, *cells]}


ERROR = {"output_type": "error", "ename": "AssertionError", "evalue": "bf16 should be faster",
         "traceback": ["\x1b[0;31mAssertionError\x1b[0m", "Traceback line"]}


def test_cells_are_numbered_as_the_learner_counts_them() -> None:
    # papermill's injected-parameters cell is not in the stored notebook: the numbers must not shift
    nb = _nb(_cell("PROFILE = 'auto'"), _cell("PROFILE = 'smoke'", tags=["injected-parameters"]),
             _cell(["x = ", "1"]))
    assert [(n, failure.source_of(c)) for n, c in failure.code_cells(nb)] == [(1, "PROFILE = 'auto'"), (2, "x = 1")]


def test_the_first_error_cell_wins_and_loses_its_colour_codes() -> None:
    nb = _nb(_cell("a = 1"), _cell("assert fast", [ERROR]), _cell("later", [{**ERROR, "ename": "ValueError"}]))
    err = failure.describe_failure(nb, "Traceback (most recent call last):\nPapermillExecutionError: x", "failed", 60)
    assert (err["cell"], err["source"], err["ename"], err["evalue"]) == (2, "assert fast", "AssertionError",
                                                                        "bf16 should be faster")
    assert err["traceback"] == "AssertionError\nTraceback line"  # no \x1b[...m left for report.html


def test_a_timeout_names_the_running_cell_or_says_none_started() -> None:
    nb = _nb(_cell("a = 1"), _cell("while True: pass"), _cell("never", started=False))
    err = failure.describe_failure(nb, "", "timeout", 90.4)
    assert (err["cell"], err["source"], err["ename"]) == (2, "while True: pass", "Timeout")
    assert err["evalue"] == "lab did not finish within 90 s (cell 2 was still running)"
    err = failure.describe_failure(_nb(_cell("a = 1", started=False)), "", "timeout", 30)
    assert err["cell"] == failure.NO_CELL and err["evalue"] == "lab did not finish within 30 s (no cell had started)"


def test_a_dead_kernel_names_the_cell_it_died_in() -> None:
    log = ("Executing\nTraceback (most recent call last):\n  File 'x'\n"
           "nbclient.exceptions.DeadKernelError: Kernel died\n")
    err = failure.describe_failure(_nb(_cell("a = 1"), _cell("os._exit(3)")), log, "failed", 60)
    assert (err["cell"], err["ename"]) == (2, "DeadKernelError")
    assert err["evalue"] == "Kernel died while running cell 2 (it crashed or exited the kernel process)"


def test_papermills_own_exception_or_a_plain_failure() -> None:
    log = ("Executing\nTraceback (most recent call last):\n  File 'x'\n    y\n"
           "jupyter_client.kernelspec.NoSuchKernel: No such kernel named k\n")
    assert failure.exception_from_log(log) == ("NoSuchKernel", "No such kernel named k")
    assert failure.exception_from_log("all fine\nValueError: not after a traceback") is None
    err = failure.describe_failure({}, log, "failed", 60)  # papermill stopped before writing a notebook
    assert (err["cell"], err["ename"], err["evalue"]) == (failure.NO_CELL, "NoSuchKernel", "No such kernel named k")
    err = failure.describe_failure({}, "exit 1", "failed", 60)
    assert err["ename"] == "Failed" and "printed no exception" in err["evalue"]

