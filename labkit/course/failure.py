"""Why a lab run failed, read from its executed notebook and papermill's log (Lab 00).

`labkit run` reports the first cell whose output is an error; where no cell errored (a timeout, a
kernel that died, papermill failing before the first cell) it names the cell that was running, or
papermill's own exception from its log. Pure functions of the notebook (a dict, as ``json.loads``
gives it) and the log text, so each case is tested without running a kernel.
"""

from __future__ import annotations

import re
from typing import Any

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # terminal colour codes in tracebacks and logs
# The last line of a Python traceback: "pkg.mod.SomeError: message" (or just the name).
EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Kernel|Warning)\w*)(?::\s?(.*))?$")
NO_CELL = "none (papermill stopped before the first cell)"


def code_cells(nb: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """(1-based number, cell) of each code cell as the learner counts them in the stored notebook (Lab 00)."""
    cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"
             and "injected-parameters" not in c.get("metadata", {}).get("tags", [])]
    return [(i + 1, c) for i, c in enumerate(cells)]


def source_of(cell: dict[str, Any]) -> str:
    """A cell's source as one string (nbformat stores it as a string or a list of lines) (Lab 00)."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def first_error(nb: dict[str, Any]) -> dict[str, Any] | None:
    """The first cell whose output is an error: its code-cell number, source and traceback (Lab 00)."""
    for number, cell in code_cells(nb):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return {
                    "cell": number,
                    "source": source_of(cell),
                    "ename": out.get("ename", ""),
                    "evalue": out.get("evalue", ""),
                    "traceback": ANSI.sub("", "\n".join(out.get("traceback", []))),
                }
    return None


def last_started(nb: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """The last code cell papermill started: where a lab that hung or whose kernel died stopped (Lab 00)."""
    started = [(n, c) for n, c in code_cells(nb)
               if c.get("metadata", {}).get("papermill", {}).get("start_time")]
    return started[-1] if started else None


def exception_from_log(log: str) -> tuple[str, str] | None:
    """(name, message) of the last Python exception in a log, e.g. papermill's own (Lab 00)."""
    lines = log.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        m = EXC_LINE.match(lines[i].rstrip())
        if m and any("Traceback (most recent call last)" in x for x in lines[:i]):
            return m.group(1).rsplit(".", 1)[-1], (m.group(2) or "").strip()
    return None


def describe_failure(nb: dict[str, Any], log: str, status: str, timeout_s: float) -> dict[str, Any]:
    """What failed: the error cell, else the cell that was running, else papermill's exception (Lab 00)."""
    error = first_error(nb)
    if error:
        return error
    error = {"cell": NO_CELL, "source": ""}
    last = last_started(nb)
    if last is not None:
        error.update(cell=last[0], source=source_of(last[1]))
    if status == "timeout":
        where = f"cell {last[0]} was still running" if last else "no cell had started"
        return {**error, "ename": "Timeout", "evalue": f"lab did not finish within {timeout_s:.0f} s ({where})"}
    exc = exception_from_log(log)
    ename, evalue = exc if exc else ("Failed", "papermill exited with an error but printed no exception; see log_tail")
    if ename == "DeadKernelError" and last is not None:
        evalue += f" while running cell {last[0]} (it crashed or exited the kernel process)"
    return {**error, "ename": ename, "evalue": evalue}
