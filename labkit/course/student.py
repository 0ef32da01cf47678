"""`labkit student`: student copies of the labs — solutions replaced by stubs, outputs cleared.

The clearing is nbgrader's ``ClearSolutions`` + ``ClearOutput`` preprocessors (the
well-kept tool for exactly this: same ``### BEGIN SOLUTION`` / ``### END SOLUTION``
markers, indentation-aware stubs), used through nbconvert's preprocessor API. nbgrader is
an instructor-only dependency (extra ``instructor``); learners never need it. Before clearing,
every lab is validated here so a broken region is refused with the file and cell named,
instead of producing a copy that silently leaks or loses a solution.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
# The stub raises NotImplementedError, which every labkit check reports as "not done yet".
STUB = '# YOUR CODE HERE\nraise NotImplementedError("Your turn: complete this function, then run the check below.")'
_CHECK_CALL = re.compile(r"\blab\d\d\.check_\w+\(")


class StudentCopyError(ValueError):
    """A lab cannot be turned into a student copy; the message names file and cell (Lab 00)."""


def _code_cells(nb: Any) -> list[tuple[int, Any]]:
    """(1-based code-cell number, cell) pairs, numbered as a learner counts them (Lab 00)."""
    return [(i + 1, c) for i, c in enumerate(c for c in nb.cells if c.cell_type == "code")]


def validate(nb: Any, path: str | Path) -> int:
    """Check solution markers pair up and every check follows a solution; return the count (Lab 00)."""
    regions = 0
    open_since_check = 0  # solution regions seen since the last check call
    for number, cell in _code_cells(nb):
        depth = 0
        for line in cell.source.splitlines():
            if BEGIN in line:
                if depth:
                    raise StudentCopyError(f"{path}: code cell {number} opens a solution region inside another one")
                depth += 1
            elif END in line:
                if not depth:
                    raise StudentCopyError(f"{path}: code cell {number} closes a solution region it never opened")
                depth -= 1
                regions += 1
                open_since_check += 1
        if depth:
            raise StudentCopyError(f"{path}: code cell {number} has an unclosed solution region ({BEGIN} without {END})")
        if _CHECK_CALL.search(cell.source):
            if not open_since_check:
                call = _CHECK_CALL.search(cell.source).group(0)  # type: ignore[union-attr]
                raise StudentCopyError(f"{path}: code cell {number} calls {call}...) but no solution region precedes it")
            open_since_check = 0
    return regions


def solution_lines(nb: Any) -> list[str]:
    """The non-blank lines inside solution regions: what a student copy must not contain (Lab 00)."""
    lines, inside = [], False
    for _, cell in _code_cells(nb):
        for line in cell.source.splitlines():
            if BEGIN in line:
                inside = True
            elif END in line:
                inside = False
            elif inside and line.strip():
                lines.append(line.strip())
    return lines


def student_notebook(path: str | Path) -> Any:
    """The student version of one lab notebook (validated, solutions stubbed, outputs cleared) (Lab 00)."""
    try:
        from nbgrader.preprocessors import ClearOutput, ClearSolutions
    except ImportError:
        raise ImportError("labkit student needs nbgrader: pip install -e '.[instructor]'") from None
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:  # noqa: BLE001  not JSON, not a notebook (jsonschema), unreadable: one line, the file named
        first = (str(e).splitlines() or [""])[0][:160]
        raise StudentCopyError(f"{path}: not a readable notebook ({type(e).__name__}: {first}); fix it or remove it "
                               "from --labs-dir") from None
    if not validate(nb, path):
        raise StudentCopyError(f"{path}: no solution regions ({BEGIN} ... {END}) to clear")
    clear = ClearSolutions(enforce_metadata=False, code_stub={"python": STUB}, begin_solution_delimeter="BEGIN SOLUTION",
                           end_solution_delimeter="END SOLUTION")
    nb, _ = clear.preprocess(nb, {})
    nb, _ = ClearOutput().preprocess(nb, {})
    for cell in nb.cells:  # keep the stored format: no execution counts, no nbgrader bookkeeping
        cell.metadata.pop("nbgrader", None)
        if cell.cell_type == "code":
            cell.execution_count = None
    return nb


def check_no_solutions_overwritten(targets: Sequence[Path]) -> None:
    """StudentCopyError naming the first existing target that holds solutions: never write over one (Lab 00)."""
    for target in targets:
        try:
            text = target.read_text(encoding="utf-8", errors="replace") if target.is_file() else ""
        except OSError as e:
            raise StudentCopyError(f"{target}: cannot read the notebook already there ({e.strerror or e}); "
                                   "pass an empty folder, e.g. --out build/student") from None
        if "BEGIN SOLUTION" in text:
            raise StudentCopyError(f"{target} already exists and holds solutions ({BEGIN}): it is an instructor "
                                   "notebook, not a student copy; pass another --out (e.g. build/student) or "
                                   "move it away")


def write_student_copies(labs: Sequence[Path], out_dir: str | Path) -> list[Path]:
    """Write student copies of ``labs`` into ``out_dir``; checks everything before writing any (Lab 00).

    Refused: ``out_dir`` being the folder the labs are read from, a file or unwritable, a broken lab,
    and a notebook already in ``out_dir`` that holds solutions (a copy would overwrite it with stubs).
    """
    from labkit.course.runner import check_not_source, prepare_out_dir

    try:
        check_not_source(out_dir, list(labs), example="build/student")  # the copies would replace the solutions
    except (OSError, ValueError) as e:  # the labs' own folder
        raise StudentCopyError(str(e)) from None
    copies = [(lab, student_notebook(lab)) for lab in labs]  # every lab read and validated before --out is made
    try:
        out = prepare_out_dir(out_dir, example="build/student")
    except (OSError, ValueError) as e:  # a file, unwritable, empty
        raise StudentCopyError(str(e)) from None
    check_no_solutions_overwritten([out / lab.name for lab in labs])
    written = []
    for lab, nb in copies:
        target = out / lab.name
        nbformat.write(nb, target)
        written.append(target)
    return written
