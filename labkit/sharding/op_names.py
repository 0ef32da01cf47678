"""Which JAX op asked for a collective: the HLO ``op_name`` metadata, combined names split (Lab 03).

Every HLO instruction JAX emits carries ``metadata={op_name="jit(step)/transpose(jvp())/dot_general"}``:
the jitted function, the transformation stack (``jvp(...)``: the forward pass of a gradient,
``transpose(...)``: its backward pass) and the primitive. When XLA's collective combiner merges
several collectives into one tuple all-reduce, it merges their names too: the common prefix, then
each name's rest inside parentheses, separated by ``:`` -- recorded from jax 0.10.2's XLA:CPU
(tests/sharding/test_op_names.py holds the strings)::

    jit(step)/(jvp()/dot_general:transpose(jvp(jit(log_softmax)))/reduce_sum)

is a *forward* matmul's all-reduce (tuple element 0) and a *backward* log-softmax reduction's
(element 1) in one call. :func:`parts` splits such a name into one full op_name per merged
instruction, in operand order; :func:`origin` names the op of one array of the call.
"""

from __future__ import annotations

import re

from labkit.measure.xla_breakdown import BACKWARD, FORWARD, name_stack_phase  # noqa: F401  (FORWARD, BACKWARD: re-exported)


def _split_top(text: str, sep: str) -> list[str]:
    """Split ``text`` at ``sep`` characters outside parentheses."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == sep and depth == 0:
            out.append(text[start:i])
            start = i + 1
    return out + [text[start:]]


def parts(op_name: str) -> list[str]:
    """(Lab 03) One full op_name per instruction a combined op_name merged, in operand order; [op_name] if none."""
    if not isinstance(op_name, str):
        raise TypeError(f"op_name must be the HLO metadata string, got {type(op_name).__name__} {op_name!r}")
    segments = _split_top(op_name, "/")  # "/" inside a merged group is not a path separator of the whole
    last = segments[-1]
    if not (last.startswith("(") and last.endswith(")")) or len(_split_top(last[1:-1], ":")) < 2:
        return [op_name]
    prefix = "/".join(segments[:-1])
    out: list[str] = []
    for rest in _split_top(last[1:-1], ":"):  # a merged name can itself be merged: flatten it
        out += parts(f"{prefix}/{rest}" if prefix else rest)
    return out


def phase(op_name: str) -> str:
    """(Lab 03) "backward" (a transpose), "forward" (a jvp) or "" for one (not combined) op_name."""
    return name_stack_phase(op_name)


def describe(op_name: str) -> str:
    """(Lab 03) "forward dot_general", "backward reduce_sum", "mul": phase and primitive of one op_name."""
    if not op_name:
        return "(compiler)"
    op = re.sub(r"\(.*?\)", "", _split_top(op_name, "/")[-1]).strip("()") or "?"
    return f"{phase(op_name)} {op}".strip()


def _selected(op_name: str, index: int | None, arrays: int) -> list[str]:
    """The one name array ``index`` of a call of ``arrays`` arrays answers to, else every merged name, in order."""
    names = parts(op_name)
    if len(names) > 1 and index is not None and len(names) == arrays and 0 <= index < arrays:
        return [names[index]]  # one part per array, in operand order
    return names


def origin(op_name: str, index: int | None = None, arrays: int = 1) -> str:
    """(Lab 03) What asked for array ``index`` of a call of ``arrays`` arrays whose metadata is ``op_name``.

    A combined name with one part per array is read in operand order (the order XLA's combiner
    merges operands and names); any other combination is reported whole as "combined: ...".
    """
    names = _selected(op_name, index, arrays)
    if len(names) == 1:
        return describe(names[0])
    return "combined: " + " + ".join(dict.fromkeys(describe(n) for n in names))  # distinct, in order


def array_phase(op_name: str, index: int | None = None, arrays: int = 1) -> str:
    """(Lab 03) forward/backward of one array of a (possibly combined) call; "" when it cannot tell."""
    phases = {phase(n) for n in _selected(op_name, index, arrays)}
    return phases.pop() if len(phases) == 1 else ""
