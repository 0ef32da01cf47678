"""Which collectives did the partitioner insert, and what do they cost? (Lab 03).

:func:`collectives` reads a compiled program's HLO text (``compiled.as_text()``) and lists every
all-reduce, all-gather, reduce-scatter, all-to-all and collective-permute with its operand
shape, dtype, bytes per device and replica groups. The SPMD partitioner writes a reduce-scatter
as an all-reduce whose result each device cuts with a ``dynamic-slice`` at its own
``partition-id``; XLA's GPU pipeline fuses that pair into one reduce-scatter (its
``ReduceScatterCreator`` pass), its **CPU** pipeline leaves it as it is (a ``psum_scatter``
written by hand still compiles to a native reduce-scatter on CPU). Such a pair is reported as
``reduce-scatter`` with ``compiled_as="all-reduce + dynamic-slice"``, so the table reads
the same on every backend, and :attr:`Collective.compiled_ring_bytes` prices what ran. Each
reduction says what it combines (:attr:`Collective.reduce_op`, from its ``to_apply`` computation):
a sum, or e.g. the max of a softmax's row max over vocabulary shards — same bytes, no gradient.

**Bytes, one definition** (:data:`SENT`): what each device *sends* per collective in the ring
algorithm priced, from the full array D the collective is about (:func:`bytes_sent`):
all-gather and reduce-scatter (n-1)/n x D, all-reduce 2(n-1)/n x D. An all-gather's HLO operand
is one shard (D/n), a reduction's is D: :attr:`Collective.array_bytes` undoes that difference.

Cost model (:func:`ring_bytes`, :func:`link_for`, :func:`comm_time`): bytes sent / the bandwidth
each device pushes into the ring (``labkit.runtime.hardware`` ``link_gbs``); real topologies are
priced in :mod:`labkit.sharding.topology`. Bandwidth only: per-hop latency (~µs) dominates KB-sized
arrays, so small-model predictions are lower bounds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from labkit.gpt.data import check_count, check_real
from labkit.runtime import hardware
from labkit.sharding import hlo_text, op_names

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3": 1,
               "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
               "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
EMULATED_RS = "all-reduce + dynamic-slice"
REDUCE_OPS = {"add": "sum", "maximum": "max", "minimum": "min", "multiply": "prod"}  # others keep their HLO name

_ARRAY = re.compile(r"(?P<dtype>[a-z]+\d*[a-z\d]*)\[(?P<dims>[\d,]*)\]")


@dataclass(frozen=True)
class Collective:
    """One collective of a compiled program, per device (Lab 03)."""

    kind: str  # one of KINDS (logical: an emulated reduce-scatter says "reduce-scatter")
    compiled_as: str  # the HLO op(s) that implement it, e.g. "all-reduce + dynamic-slice"
    name: str  # HLO instruction name
    shape: tuple[int, ...]  # operand shape on one device
    dtype: str  # HLO element type, e.g. "f32"
    bytes: int  # HLO operand bytes on one device (an all-gather's is one shard: use array_bytes)
    group_size: int  # devices that take part together (n of the ring)
    replica_groups: tuple[tuple[int, ...], ...]  # device ids per group (pairs for a permute)
    op_name: str = ""  # the JAX op that caused it (HLO metadata), e.g. "jit(step)/.../dot_general"

    arrays: int = 1  # arrays in its call: a tuple all-reduce carries several (name "call[i]")
    reduce_op: str = ""  # a reduction's combiner ("sum", "max", ...: REDUCE_OPS); "" for data movement

    @property
    def call(self) -> str:
        """The HLO instruction that runs it: one call may carry several arrays (Lab 03)."""
        return self.name.partition("[")[0]  # collectives() names a tuple all-reduce's i-th array "name[i]"

    @property
    def index(self) -> int | None:
        """Which array of its call this is (None: the call carries one) (Lab 03)."""
        m = re.search(r"\[(\d+)\]$", self.name)
        return int(m[1]) if m else None

    @property
    def origin(self) -> str:
        """"forward dot_general", "backward reduce_sum": the JAX op that needed this array (Lab 03)."""
        # A combined call's op_name merges one name per array (labkit.sharding.op_names): read ours.
        return op_names.origin(self.op_name, self.index, self.arrays)

    @property
    def phase(self) -> str:
        """"forward", "backward" or "" (unknown): the pass that needed this array (Lab 03)."""
        return op_names.array_phase(self.op_name, self.index, self.arrays)

    @property
    def array_bytes(self) -> int:
        """D: bytes of the full array the collective is about (an all-gather's result) (Lab 03)."""
        return self.bytes * self.group_size if self.kind == "all-gather" else self.bytes

    @property
    def ring_bytes(self) -> float:
        """Bytes each device sends with a ring algorithm for this kind (Lab 03)."""
        return ring_bytes(self.kind, self.bytes, self.group_size)

    @property
    def compiled_ring_bytes(self) -> float:
        """Ring bytes of what was compiled: an emulated reduce-scatter sends an all-reduce's (Lab 03)."""
        kind = "all-reduce" if self.compiled_as == EMULATED_RS else self.kind
        return ring_bytes(kind, self.bytes, self.group_size)

    def row(self) -> dict[str, Any]:
        """A table row for labkit.course.tables.show (Lab 03)."""
        groups = self.replica_groups
        g = str([list(x) for x in groups[:2]])[:-1] + (", ...]" if len(groups) > 2 else "]")
        return {"kind": self.kind, "reduction": self.reduce_op, "compiled as": self.compiled_as,
                "operand shape": self.shape, "dtype": self.dtype, "array bytes D": self.array_bytes,
                "n": self.group_size, "replica groups": g, "bytes sent": self.ring_bytes, "from": self.origin}


SENT = ("bytes sent = bytes each device sends per collective, ring algorithm, D = the full array: "
        "all-gather / reduce-scatter (n-1)/n x D, all-reduce 2(n-1)/n x D")


def bytes_sent(kind: str, array_bytes: float, n: int) -> float:
    """Bytes one device sends in a ring collective of kind over n devices about a D-byte array (Lab 03)."""
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r}; known: {', '.join(KINDS)}")
    array_bytes = check_real(array_bytes, "array_bytes", 0, closed="low", hint="; D in bytes, e.g. 2**30")
    if check_count(n, "n", 1, example=8) == 1:  # n: devices in the group; one device sends nothing
        return 0.0
    return {
        "all-reduce": 2 * (n - 1) / n * array_bytes,  # reduce-scatter then all-gather
        "all-gather": (n - 1) / n * array_bytes,  # forwards the n-1 shards it does not own
        "reduce-scatter": (n - 1) / n * array_bytes,  # sends n-1 partial shards
        "all-to-all": (n - 1) / n * array_bytes,  # keeps 1/n, sends the rest once
        "collective-permute": float(array_bytes),  # one hop to one peer
    }[kind]


def ring_bytes(kind: str, nbytes: float, n: int) -> float:
    """Bytes one device sends in a ring collective, from the HLO *operand* bytes (all-gather's: D / n) (Lab 03)."""
    nbytes = check_real(nbytes, "nbytes (HLO operand bytes)", 0, closed="low")  # a str * n would repeat the str
    return bytes_sent(kind, nbytes * n if kind == "all-gather" else nbytes, n)


def parse_shape(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """"f32[16,32]{1,0}" or a tuple "(f32[4], bf16[2,2])" -> [(dtype, dims), ...] (Lab 03)."""
    return [(m["dtype"], tuple(int(d) for d in m["dims"].split(",") if d))
            for m in _ARRAY.finditer(re.sub(r"/\*.*?\*/", "", text))]


def nbytes(dtype: str, dims: tuple[int, ...]) -> int:
    """Bytes of an array of HLO element type dtype and shape dims (Lab 03)."""
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown HLO element type {dtype!r}; known: {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype] * math.prod(dims)


def parse_replica_groups(attrs: str, n_devices: int | None = None) -> tuple[tuple[int, ...], ...]:
    """Replica groups in any HLO spelling: {{0,1},{2,3}}, [2,4]<=[8], mesh['a'=2] {'a'} (Lab 03)."""
    m = re.search(r"source_target_pairs=\{(.*?)\}\}", attrs)
    if m:
        return tuple(tuple(int(v) for v in p.split(",")) for p in re.findall(r"\{([\d,]+)", m[1] + "}"))
    m = re.search(r"replica_groups=\{((?:\{[\d,]*\},?)*)\}", attrs)
    if m:
        groups = tuple(tuple(int(v) for v in g.split(",") if v) for g in re.findall(r"\{([\d,]*)\}", m[1]))
        return groups or ((tuple(range(n_devices)),) if n_devices else ())
    m = re.search(r"replica_groups=\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", attrs)
    if m:
        ids = np.arange(math.prod(int(v) for v in m[2].split(","))).reshape([int(v) for v in m[2].split(",")])
        if m[3]:
            ids = ids.transpose([int(v) for v in m[3].split(",")])
        return tuple(tuple(int(v) for v in row) for row in ids.reshape(-1, int(m[1].split(",")[-1])))
    m = re.search(r"replica_groups=mesh\[(.*?)\](?:\s*device_ids=\(?([\d,]+)\)?)?\s*\{(.*?)\}", attrs)
    if m:
        return _mesh_groups(m[1], m[2], m[3])
    return ()


def _mesh_groups(mesh_text: str, device_ids: str | None, axes_text: str) -> tuple[tuple[int, ...], ...]:
    """Shardy's mesh['a'=2,'b'=4] {'b'} spelling: group devices that differ only along 'b'."""
    names = re.findall(r"'([^']+)'=(\d+)", mesh_text)
    sizes = [int(s) for _, s in names]
    ids = np.array([int(v) for v in device_ids.split(",")]) if device_ids else np.arange(math.prod(sizes))
    refs = {m[1]: (int(m[2]), int(m[3])) if m[2] else None
            for m in re.finditer(r"'([^']+)'(?::\((\d+)\)(\d+))?", axes_text)}
    dims, grouped = [], []  # a sub-axis 'a':(pre)size splits axis a into [pre, size, rest]
    for (name, _), size in zip(names, sizes):
        if name in refs and refs[name] is not None:
            pre, sub = refs[name]
            dims += [pre, sub, size // (pre * sub)]
            grouped.append(len(dims) - 2)
        else:
            grouped += [len(dims)] if name in refs else []
            dims.append(size)
    keep = [d for d in range(len(dims)) if d not in grouped]
    arr = ids.reshape(dims).transpose(keep + grouped).reshape(-1, math.prod(dims[d] for d in grouped))
    return tuple(tuple(int(v) for v in row) for row in arr)


def reduce_op(attrs: str, comps: dict[str, str]) -> str:
    """(Lab 03) "sum" / "max" / ...: the root op of a reduction's ``to_apply`` computation; "" if none."""
    m = re.search(r"to_apply=%?([\w.\-]+)", attrs)
    root = re.search(r"ROOT\s+%?[\w.\-]+\s*=\s*\S+\s+([\w\-]+)\(", comps.get(m[1], "")) if m else None
    return REDUCE_OPS.get(root[1], root[1]) if root else ""


def hlo_of(compiled: Any, what: str = "collectives") -> str:
    """HLO text of a compiled program (``f.lower(args).compile()``) or HLO text; TypeError with the fix (Lab 03)."""
    fix = f"{what}: pass f.lower(args).compile() (a Compiled) or its .as_text(), got"
    if hlo_text.is_lowered(compiled):  # its HLO is from before the partitioner: no collectives yet
        raise TypeError(f"{fix} a Lowered (f.lower(args)): call .compile() first")
    text = compiled.as_text() if callable(getattr(compiled, "as_text", None)) else compiled
    if not isinstance(text, str):
        how = " (call .lower(args).compile() on it first)" if hasattr(compiled, "lower") else ""
        raise TypeError(f"{fix} {repr(compiled)[:60]} ({type(compiled).__name__}){how}")
    if "HloModule" not in text:
        raise ValueError(f"{fix} {text[:60]!r}: not HLO module text (no 'HloModule' header)")
    return text


def check_table(table: Any, kind: str | None = None) -> list[Collective]:
    """The rows of ``table`` (a list of Collective: ``collectives(compiled)``) of ``kind`` (None: all) (Lab 03)."""
    rows = None if isinstance(table, (str, bytes)) or not isinstance(table, Iterable) else list(table)
    bad = table if rows is None else next((c for c in rows if not isinstance(c, Collective)), None)
    if rows is None or bad is not None:
        raise TypeError(f"a collectives table is a list of Collective, e.g. collectives(f.lower(args).compile()); got "
                        f"{repr(bad)[:60]} ({type(bad).__name__}){' in the list' if rows is not None else ''}")
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown collective kind {kind!r}; known: {', '.join(KINDS)} (or None for all)")
    return [c for c in rows if kind is None or c.kind == kind]


def collectives(compiled: Any, n_devices: int | None = None) -> list[Collective]:
    """Every collective in a compiled program (or its HLO text), one row per array (Lab 03)."""
    text = hlo_of(compiled, "collectives")
    if n_devices is None:
        m = re.search(r"num_partitions=(\d+)", text)
        n_devices = int(m[1]) if m else None
    instrs, comps, users = hlo_text.parse_module(text)
    out: list[Collective] = []
    for d in instrs.values():
        op = d["op"].removesuffix("-start")
        if op not in KINDS:
            continue
        groups = parse_replica_groups(d["attrs"], n_devices)
        n = 2 if op == "collective-permute" else (len(groups[0]) if groups else (n_devices or 1))
        meta = re.search(r'op_name="([^"]*)"', d["attrs"])
        src = meta[1] if meta else ""
        operands = [instrs[o] for o in d["operands"] if o in instrs]
        shapes = [parse_shape(o["shape"])[0] for o in operands if parse_shape(o["shape"])]
        if not shapes:  # operand defined outside what we parsed: fall back to the result
            shapes = parse_shape(d["shape"])
        if op == "all-reduce":  # a tuple all-reduce is several arrays reduced together
            tuple_result = d["shape"].startswith("(")
            for i, (dt, dims) in enumerate(shapes):
                if tuple_result:
                    gte = [u for u in users.get(d["name"], []) if u["op"] == "get-tuple-element"
                           and re.search(rf"index={i}\b", u["attrs"])]
                    sliced = any(hlo_text.sliced_by_partition(g["name"], instrs, users, comps) for g in gte)
                else:
                    sliced = hlo_text.sliced_by_partition(d["name"], instrs, users, comps)
                kind, how = ("reduce-scatter", EMULATED_RS) if sliced else ("all-reduce", "all-reduce")
                out.append(Collective(kind, how, d["name"] + (f"[{i}]" if tuple_result else ""), dims,
                                      dt, nbytes(dt, dims), n, groups, src, len(shapes) if tuple_result else 1,
                                      reduce_op(d["attrs"], comps)))
            continue
        dt = shapes[0][0]
        total = sum(nbytes(t, s) for t, s in shapes)
        dims = shapes[0][1] if len(shapes) == 1 else (len(shapes),) + shapes[0][1]
        out.append(Collective(op, d["op"], d["name"], dims, dt, total, n, groups, src,
                              reduce_op=reduce_op(d["attrs"], comps)))  # "" for ops without to_apply
    return out


def schedule(compiled: Any) -> list[tuple[str, str, str]]:
    """(instruction, HLO op, JAX op_name) of the entry computation in the order it runs (Lab 03).

    A compiled module is scheduled (``is_scheduled=true``): its text lists the entry
    computation's instructions in execution order, which is what decides what is alive at once.
    """
    text = hlo_of(compiled, "schedule")
    entry = hlo_text.entry_name(text)
    if entry is None:
        raise ValueError("no ENTRY computation in this HLO text: pass compiled.as_text() of a compiled program")
    instrs, _, _ = hlo_text.parse_module(text)
    out = []
    for d in instrs.values():
        if d["computation"] == entry:
            meta = re.search(r'op_name="([^"]*)"', d["attrs"])
            out.append((d["name"], d["op"], meta[1] if meta else ""))
    return out


def summarize(table: Iterable[Collective], detail: bool = False) -> list[dict[str, Any]]:
    """Rows per kind (or kind, reduction op, shape, origin if detail): arrays, calls, D, bytes sent (Lab 03).

    "arrays" counts arrays; "calls" the HLO collectives that carry them (a tuple all-reduce is one
    call for many arrays, and is counted in each row that holds one of its arrays).
    """
    rows: dict[tuple, dict[str, Any]] = {}
    calls: dict[tuple, set[str]] = {}
    for c in check_table(table):
        key = (KINDS.index(c.kind),) + ((c.reduce_op, c.compiled_as, c.shape, c.dtype, c.group_size, c.origin)
                                        if detail else ())
        head = {"kind": c.kind} | ({"reduction": c.reduce_op, "compiled as": c.compiled_as, "operand shape": c.shape,
                                   "dtype": c.dtype, "n": c.group_size, "from": c.origin} if detail else {})
        r = rows.setdefault(key, head | {"arrays": 0, "calls": 0, "array bytes D": 0, "bytes sent": 0.0,
                                         "sent as compiled": 0.0})
        r["arrays"] += 1
        calls.setdefault(key, set()).add(c.call)
        r["calls"] = len(calls[key])
        r["array bytes D"] += c.array_bytes
        r["bytes sent"] += c.ring_bytes  # the ring model of the logical kind
        r["sent as compiled"] += c.compiled_ring_bytes  # an emulated reduce-scatter sends an all-reduce's
    return [rows[k] for k in sorted(rows, key=str)]


def calls(table: Iterable[Collective], kind: str | None = None) -> int:
    """Collective calls (HLO instructions) in a table, optionally of arrays of one kind (Lab 03)."""
    return len({c.call for c in check_table(table, kind)})


def total_bytes(table: Iterable[Collective], kind: str | None = None) -> int:
    """Sum of HLO operand bytes per device (shards for all-gathers: not a cost; see sent_bytes) (Lab 03)."""
    return sum(c.bytes for c in check_table(table, kind))


def sent_per_call(table: Iterable[Collective]) -> dict[str, float]:
    """(Lab 03) Bytes sent per collective *call*: the arrays of one tuple all-reduce ("name[i]") share one call."""
    out: dict[str, float] = {}
    for c in check_table(table):
        out[c.call] = out.get(c.call, 0.0) + c.ring_bytes
    return out


def sent_bytes(table: Iterable[Collective], kind: str | None = None) -> float:
    """Bytes each device sends per step, ring algorithm (the one definition, SENT) (Lab 03)."""
    return sum(c.ring_bytes for c in check_table(table, kind))


def compiled_sent_bytes(table: Iterable[Collective], kind: str | None = None) -> float:
    """Bytes each device sends per step as compiled (an emulated reduce-scatter: an all-reduce's) (Lab 03)."""
    return sum(c.compiled_ring_bytes for c in check_table(table, kind))


def array_bytes(table: Iterable[Collective], kind: str | None = None) -> int:
    """Sum of the full arrays D the collectives are about, optionally of one kind (Lab 03)."""
    return sum(c.array_bytes for c in check_table(table, kind))


def kinds(table: Iterable[Collective]) -> dict[str, int]:
    """{kind: count} of a collectives table, in KINDS order (Lab 03)."""
    counts = {k: 0 for k in KINDS}
    for c in check_table(table):
        counts[c.kind] += 1
    return {k: v for k, v in counts.items() if v}


# -------------------------------------------------------------------------------------- Ring cost model

ALGORITHMS = ("ring", "bidirectional ring")


@dataclass(frozen=True)
class Link:
    """The bandwidth one device pushes along a ring on a real system (Lab 03)."""

    system: str  # chip name from labkit.runtime.hardware
    gbs: float  # GB/s (1e9 bytes/s) each device sends into the ring
    algorithm: str  # "ring" | "bidirectional ring"
    note: str  # how gbs follows from the spec table


def link_for(chip: str, algorithm: str = "bidirectional ring") -> Link:
    """Ring bandwidth per device from labkit.runtime.hardware's link_gbs: TPU ICI, NVLink, PCIe (Lab 03)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    spec = hardware.lookup(chip)
    if spec is None or spec.link_gbs is None:
        raise ValueError(f"no interconnect figure for chip {chip!r}; known chips: "
                         f"{', '.join(hardware.CHIPS)}")
    one_way = spec.link_gbs / 2  # GB/s the chip can send over all its links together
    if spec.kind == "tpu":
        # A torus has 4 (2-D) or 6 (3-D) links per chip; a ring along one mesh axis uses the
        # links to its two neighbours on that axis: one direction (ring) or both (bidirectional).
        links = 6 if "3D" in spec.interconnect else 4
        used = 2 if algorithm == "bidirectional ring" else 1
        return Link(spec.name, one_way / links * used, algorithm,
                    f"{spec.interconnect}: {links} links x {one_way / links:.0f} GB/s per "
                    f"direction; a {algorithm} along one axis uses {used}")
    # NVLink through NVSwitch (or PCIe through a switch): any ring gets the GPU's whole egress.
    return Link(spec.name, one_way, algorithm,
                f"{spec.interconnect}: switched, a ring gets the GPU's full {one_way:.0f} GB/s "
                f"egress (both directions of a ring share it)")


def ring_time(kind: str, nbytes: float, n: int, link: Link) -> float:
    """Seconds for one collective of operand nbytes over n devices on link (bandwidth only) (Lab 03)."""
    return ring_bytes(kind, nbytes, n) / (link.gbs * 1e9)


def comm_time(table: Iterable[Collective], link: Link) -> float:
    """Predicted seconds of communication per step: the sum over a collectives table (Lab 03)."""
    return sum(ring_time(c.kind, c.bytes, c.group_size, link) for c in check_table(table))
