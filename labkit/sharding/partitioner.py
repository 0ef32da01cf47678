"""Who does what: the program after Shardy's propagation and after XLA's SPMD partitioner (Lab 03).

JAX lowers a jitted function with its sharding annotations (``sdy.sharding``). Inside XLA's
``spmd-partitioner`` pipeline, **Shardy** (pass ``shardy-xla``; ``sharding-propagation`` when
GSPMD's propagation is used instead) *propagates* the annotations: every instruction gets a
``sharding=``, the shapes are still global and there is no collective yet. Then XLA's **SPMD
partitioner** (pass ``spmd-partitioning``, the one GSPMD introduced and both share) rewrites the
program into the per-device one: shapes become shards and the collectives appear.
:func:`stages` compiles a lowered program with XLA's own dump options for this one compile
(:func:`labkit.runtime.compile_options.dump_passes`; the process-wide flags stay untouched) and
returns the module after each of those passes, so a cell can show the split instead of stating it.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from typing import Any

from labkit.runtime import compile_options
from labkit.sharding import collectives as coll
from labkit.sharding import hlo_text

PASSES = ("shardy-xla", "sharding-propagation", "spmd-partitioning")  # propagation (Shardy / GSPMD), partitioning
_DUMP = re.compile(r"\.(?P<n>\d{4})\.(?P<pipeline>[\w\-]+)\.after_(?P<after>[\w\-]+)\.before_(?P<before>[\w\-]+)\.txt$")


@dataclass(frozen=True)
class Stage:
    """The HLO module between two compiler passes of the SPMD pipeline (Lab 03)."""

    after: str  # the pass that just ran, e.g. "shardy-xla"
    before: str  # the pass that runs next, e.g. "spmd-partitioning"
    text: str  # the module's HLO text at that point

    @property
    def stage(self) -> str:
        """(Lab 03) Where this module sits: before propagation, propagated, or partitioned."""
        propagation = PASSES[:2]  # Shardy's pass or GSPMD's
        if self.after == "spmd-partitioning":
            return "partitioned"
        if self.after in propagation:
            return "propagated"
        return "before propagation" if self.before in propagation else f"before {self.before}"

    @property
    def collectives(self) -> int:
        """(Lab 03) How many collectives the module holds at this point."""
        return len(coll.collectives(self.text))

    def row(self) -> dict[str, Any]:
        """(Lab 03) Table row: stage, passes, instructions, how many carry a sharding, parameter shapes, collectives."""
        entry = hlo_text.entry_name(self.text)
        instrs, _, _ = hlo_text.parse_module(self.text)
        ops = [d for d in instrs.values() if d["computation"] == entry]  # the entry computation's, in order
        return {"stage": self.stage, "after pass": self.after, "next pass": self.before, "instructions": len(ops),
                "with a sharding=": sum("sharding={" in d["attrs"] for d in ops),
                "parameter shapes": ", ".join(re.sub(r"\{[^}]*\}", "", d["shape"]) for d in ops
                                              if d["op"] == "parameter"),  # layout {1,0} dropped
                "collectives": self.collectives}


def stages(lowered: Any, passes: tuple[str, ...] = PASSES) -> tuple[Any, list[Stage]]:
    """(Lab 03) Compile ``lowered`` (``jax.jit(f).lower(...)``); (compiled, the module around each pass in passes).

    The first stage is the module before the first of ``passes`` that ran. An empty list means
    this backend's compiler dumped none of them (a compile served from a cache dumps nothing).
    """
    if not isinstance(passes, (tuple, list)) or not passes or not all(
            isinstance(p, str) and re.fullmatch(r"[\w\-]+", p) for p in passes):
        raise ValueError(f"passes must be a tuple of XLA pass names such as {PASSES}, got {passes!r}")
    with tempfile.TemporaryDirectory(prefix="labkit-spmd-") as d:
        compiled, _ = compile_options.compile_dumping(lowered, d, passes)  # refused: nothing dumped, [] below
        found = []
        for name in os.listdir(d):
            m = _DUMP.search(name)
            if m and (m["after"] in passes or m["before"] in passes):
                with open(os.path.join(d, name)) as f:
                    found.append((name.split(".")[0], int(m["n"]), Stage(m["after"], m["before"], f.read())))
    first = min((module for module, _, _ in found), default=None)  # one module per compile: the first dumped
    return compiled, [s for module, _, s in sorted(found, key=lambda t: t[:2]) if module == first]
