"""Reading compiled HLO text: instructions, computations, users, and what a device slices (Lab 03).

:mod:`labkit.sharding.collectives` finds the collectives with these; a reduce-scatter the SPMD
partitioner wrote as an all-reduce is recognised by :func:`sliced_by_partition`: each device keeps a
``dynamic-slice`` of the sum at an offset computed from its own ``partition-id``.
"""

from __future__ import annotations

import re

_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>\(.*?\)|[\w]+\[[^\]]*\](?:\{[^}]*\})?|[\w]+\[\])\s+(?P<op>[\w\-]+)\((?P<args>[^)]*)\)(?P<attrs>.*)$")
_COMP = re.compile(r"^(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s.*\{\s*$")
_ENTRY = re.compile(r"^ENTRY\s+%?([\w.\-]+)", re.M)


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
