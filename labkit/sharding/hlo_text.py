"""Reading compiled HLO text: instructions, computations, users, and what a device slices (Lab 03).

:mod:`labkit.sharding.collectives` finds the collectives with these; a reduce-scatter the SPMD
partitioner wrote as an all-reduce is recognised by :func:`sliced_by_partition`: each device keeps a
``dynamic-slice`` of the sum at an offset computed from its own ``partition-id``.
"""

from __future__ import annotations

import re
import sys
from typing import Any

_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>\(.*?\)|[\w]+\[[^\]]*\](?:\{[^}]*\})?|[\w]+\[\])\s+(?P<op>[\w\-]+)\((?P<args>[^)]*)\)(?P<attrs>.*)$")
_COMP = re.compile(r"^(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s.*\{\s*$")
_ENTRY = re.compile(r"^ENTRY\s+%?([\w.\-]+)", re.M)


def is_lowered(x: Any) -> bool:
    """(Lab 03) Whether x is a jax Lowered (``f.lower(args)``): its HLO is from before the partitioner ran."""
    return isinstance(x, getattr(sys.modules.get("jax.stages"), "Lowered", ()))  # jax is loaded if x is one


def entry_name(text: str) -> str | None:
    """(Lab 03) The name of the module's ENTRY computation, e.g. "main.0_spmd"; None if the text has none."""
    m = _ENTRY.search(text)
    return m[1] if m else None


def parse_module(text: str) -> tuple[dict[str, dict], dict[str, str], dict[str, list[dict]]]:
    """(Lab 03) {instruction: fields} over all computations, {computation: body}, {instruction: users}."""
    instrs: dict[str, dict] = {}
    comps: dict[str, str] = {}
    current, body = None, []
    for line in text.splitlines():
        if current is None:
            c = _COMP.match(line)
            if c and "=" not in line.split("{")[0].split("->")[0].split("(")[0]:
                current, body = c["name"], []
        elif line.strip() == "}":
            comps[current], current = "\n".join(body), None
        else:
            body.append(line)
            m = _INSTR.match(line)
            if m:
                d = m.groupdict() | {"computation": current}
                d["operands"] = re.findall(r"%([\w.\-]+)", d["args"])
                instrs[d["name"]] = d
    users: dict[str, list[dict]] = {}
    for d in instrs.values():
        for o in d["operands"]:
            users.setdefault(o, []).append(d)
    return instrs, comps, users


def from_partition_id(name: str, instrs: dict, comps: dict, depth: int = 0) -> bool:
    """(Lab 03) True if instruction ``name`` is, or is computed from, this device's partition-id."""
    d = instrs.get(name)
    if d is None or depth > 6:
        return False
    if d["op"] in ("partition-id", "replica-id"):
        return True
    called = re.search(r"calls=%([\w.\-]+)", d["attrs"])
    if called and "partition-id(" in comps.get(called[1], ""):
        return True
    return any(from_partition_id(o, instrs, comps, depth + 1) for o in d["operands"])


def sliced_by_partition(name: str, instrs: dict, users: dict, comps: dict, depth: int = 0) -> bool:
    """(Lab 03) True if ``name`` flows (through bitcasts/copies) into a dynamic-slice at partition-id."""
    for u in users.get(name, []):
        if u["op"] in ("bitcast", "copy", "reshape", "get-tuple-element") and depth < 4:
            if sliced_by_partition(u["name"], instrs, users, comps, depth + 1):
                return True
        called = re.search(r"calls=%([\w.\-]+)", u["attrs"])
        slices = u["op"] == "dynamic-slice" or (
            u["op"] == "fusion" and called is not None and "dynamic-slice(" in comps.get(called[1], ""))
        if slices and (from_partition_id(u["name"], instrs, comps) or any(
                from_partition_id(o, instrs, comps) for o in u["operands"] if o != name)):
            return True
    return False


_PARAM_NAME = re.compile(r"""op_name="[^"]*\[\\?['"]?([^'"\\\]]+)\\?['"]?\]""")  # params['wte'] -> wte


def source_parameter(name: str, instrs: dict, depth: int = 0) -> str | None:
    """(Lab 03) The JAX name ("wte") of the argument ``name`` reads, through one-operand ops; None if not one."""
    d = instrs.get(name)
    if d is None or depth > 6:
        return None
    if d["op"] == "parameter":  # jit writes the argument's pytree path into its metadata: params['wte']
        m = _PARAM_NAME.search(d["attrs"])
        return m[1] if m else None
    if d["op"] == "get-tuple-element":  # element i of tuple(...), possibly through an opt-barrier of it
        i, src = int(re.search(r"index=(\d+)", d["attrs"])[1]), instrs.get(d["operands"][0])
        while src is not None and src["op"] == "opt-barrier" and len(src["operands"]) == 1:
            src = instrs.get(src["operands"][0])
        ok = src is not None and src["op"] == "tuple" and i < len(src["operands"])
        return source_parameter(src["operands"][i], instrs, depth + 1) if ok else None
    # bitcast, copy, transpose, a one-input fusion: the same array, moved; two inputs make a new one
    return source_parameter(d["operands"][0], instrs, depth + 1) if len(d["operands"]) == 1 else None
