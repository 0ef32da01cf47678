"""labkit.sharding.collectives: the HLO collective parser (hand-written HLO and real compiled programs)
and the ring cost model. Programs compiled for 8 devices run in their own process."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labkit.sharding import collectives as C
from tests.conftest import run_result

# A reduce-scatter as the XLA CPU backend writes it: all-reduce, then each device keeps its
# slice with a dynamic-slice at an offset computed from partition-id.
CPU_RS = """HloModule jit_f, entry_computation_layout={(f32[16,8]{1,0})->f32[2,32]{1,0}}, num_partitions=8

%add.clone (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %add = f32[] add(%x, %y)
}

%fused_computation.1 (param_0.1: f32[16,32], param_1.1: u32[]) -> f32[2,32] {
  %param_0.1 = f32[16,32]{1,0} parameter(0)
  %param_1.1 = u32[] parameter(1)
  %constant.8 = s32[] constant(0)
  %multiply.2 = s32[] multiply(%param_1.1, %constant.8)
  ROOT %dynamic-slice.3 = f32[2,32]{1,0} dynamic-slice(%param_0.1, %multiply.2, %constant.8), dynamic_slice_sizes={2,32}
}

ENTRY %main.0_spmd (param.1: f32[16,8], param.2: f32[8,32]) -> f32[2,32] {
  %param.1 = f32[16,8]{1,0} parameter(0), sharding={devices=[1,8]<=[8]}
  %param.2 = f32[8,32]{1,0} parameter(1), sharding={devices=[8,1]<=[8]}
  %dot = f32[16,32]{1,0} dot(%param.1, %param.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %all-reduce = f32[16,32]{1,0} all-reduce(%dot), channel_id=1, replica_groups=mesh['axis_0'=8,'axis_1'=1] {'axis_0'}, use_global_device_ids=true, to_apply=%add.clone, metadata={op_name="jit(f)/dot_general"}
  %partition-id.1 = u32[] partition-id()
  ROOT %multiply_dynamic-slice_fusion = f32[2,32]{1,0} fusion(%all-reduce, %partition-id.1), kind=kLoop, calls=%fused_computation.1
}
"""

# A tuple all-reduce (the combiner merged two gradients), explicit and iota replica groups,
# an all-gather, a GPU-style async all-gather-start/done pair, a permute and a tuple all-to-all.
MIXED = """HloModule jit_g, num_partitions=8

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (p0: f32[64], p1: bf16[256,64], p2: f32[8,16], p3: f32[4,8]) -> f32[] {
  %p0 = f32[64]{0} parameter(0)
  %p1 = bf16[256,64]{1,0} parameter(1)
  %p2 = f32[8,16]{1,0} parameter(2)
  %p3 = f32[4,8]{1,0} parameter(3)
  %all-reduce.22 = (f32[64]{0}, bf16[256,64]{1,0}) all-reduce(%p0, %p1), channel_id=2, replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, to_apply=%sum, metadata={op_name="jit(step)/transpose(jvp())/reduce_sum"}
  %gte.0 = f32[64]{0} get-tuple-element(%all-reduce.22), index=0
  %all-gather.3 = f32[64,16]{1,0} all-gather(%p2), channel_id=3, replica_groups=[1,8]<=[8], dimensions={0}, use_global_device_ids=true, metadata={op_name="jit(step)/jvp()/dot_general"}
  %ag-start = (f32[8,16]{1,0}, f32[16,16]{1,0}) all-gather-start(%p2), channel_id=4, replica_groups=[4,2]<=[2,4]T(1,0), dimensions={0}
  %ag-done = f32[16,16]{1,0} all-gather-done(%ag-start)
  %cp = f32[4,8]{1,0} collective-permute(%p3), channel_id=5, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  %a2a = (f32[1,8]{1,0}, f32[1,8]{1,0}, f32[1,8]{1,0}, f32[1,8]{1,0}) all-to-all(%p3, %p3, %p3, %p3), channel_id=6, replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT %r = f32[] constant(0)
}
"""


def test_cpu_reduce_scatter_is_named_as_such() -> None:
    (c,) = C.collectives(CPU_RS)
    assert (c.kind, c.compiled_as) == ("reduce-scatter", C.EMULATED_RS)
    assert c.shape == (16, 32) and c.dtype == "f32" and c.bytes == 16 * 32 * 4
    assert c.group_size == 8 and c.replica_groups == (tuple(range(8)),)
    assert c.ring_bytes == pytest.approx(7 / 8 * c.bytes)  # what a native reduce-scatter sends
    assert c.compiled_ring_bytes == pytest.approx(2 * 7 / 8 * c.bytes)  # what the CPU all-reduce sent
    assert c.origin == "dot_general"
    # The summaries and totals keep both: the ring model of the kind, and what was compiled.
    (row,) = C.summarize([c])
    assert row["bytes sent"] == pytest.approx(7 / 8 * 2048) and row["sent as compiled"] == pytest.approx(2 * 7 / 8 * 2048)
    assert C.compiled_sent_bytes([c]) == pytest.approx(2 * C.sent_bytes([c]))
    assert "GPU pipeline fuses" in C.__doc__ and "no native" not in C.__doc__


def test_plain_all_reduce_is_not_mistaken_for_reduce_scatter() -> None:
    plain = CPU_RS.replace("ROOT %multiply_dynamic-slice_fusion = f32[2,32]{1,0} fusion(%all-reduce, "
                           "%partition-id.1), kind=kLoop, calls=%fused_computation.1",
                           "ROOT %neg = f32[16,32]{1,0} negate(%all-reduce)")
    (c,) = C.collectives(plain)
    assert (c.kind, c.compiled_as) == ("all-reduce", "all-reduce")


def test_every_kind_with_shapes_bytes_and_groups() -> None:
    table = C.collectives(MIXED)
    assert C.kinds(table) == {"all-reduce": 2, "all-gather": 2, "all-to-all": 1, "collective-permute": 1}
    ar = [c for c in table if c.kind == "all-reduce"]
    assert [(c.shape, c.dtype, c.bytes) for c in ar] == [((64,), "f32", 256), ((256, 64), "bf16", 256 * 64 * 2)]
    assert all(c.replica_groups == ((0, 1, 2, 3), (4, 5, 6, 7)) and c.group_size == 4 for c in ar)
    assert ar[0].origin == "backward reduce_sum" and ar[0].name == "all-reduce.22[0]"
    # the tuple all-reduce's two arrays are one call, sending both arrays' ring bytes
    per_call = C.sent_per_call(table)
    assert per_call["all-reduce.22"] == pytest.approx(sum(c.ring_bytes for c in ar)) and len(per_call) == len(table) - 1
    ag, ag_async = [c for c in table if c.kind == "all-gather"]
    assert ag.shape == (8, 16) and ag.bytes == 512 and ag.group_size == 8 and ag.origin == "forward dot_general"
    assert ag.ring_bytes == 7 * 512  # in a ring each device sends 7 shards: its own, then 6 forwarded
    assert ag_async.compiled_as == "all-gather-start" and ag_async.replica_groups == ((0, 4), (1, 5), (2, 6), (3, 7))
    (cp,) = [c for c in table if c.kind == "collective-permute"]
    assert cp.replica_groups == ((0, 1), (1, 2), (2, 3), (3, 0)) and cp.ring_bytes == cp.bytes == 128
    (a2a,) = [c for c in table if c.kind == "all-to-all"]
    assert a2a.bytes == 4 * 128 and a2a.shape == (4, 4, 8)


def test_replica_group_spellings() -> None:
    assert C.parse_replica_groups("replica_groups=[2,4]<=[8]") == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert C.parse_replica_groups("replica_groups=[4,2]<=[2,4]T(1,0)") == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert C.parse_replica_groups("replica_groups={}", n_devices=4) == ((0, 1, 2, 3),)
    mesh = "replica_groups=mesh['axis_0'=2,'axis_1'=1,'axis_2'=4] {'axis_2'}"
    assert C.parse_replica_groups(mesh) == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert C.parse_replica_groups("replica_groups=mesh['a'=2,'b'=4] {'a'}") == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert C.parse_replica_groups("replica_groups=mesh['a'=8] {'a':(2)2}") == ((0, 2), (1, 3), (4, 6), (5, 7))


def test_shapes_and_dtypes() -> None:
    assert C.parse_shape("(f32[64]{0}, /*index=1*/bf16[2,3]{1,0}, s32[])") == [
        ("f32", (64,)), ("bf16", (2, 3)), ("s32", ())]
    assert C.nbytes("bf16", (2, 3)) == 12 and C.nbytes("f32", ()) == 4
    with pytest.raises(ValueError, match="unknown HLO element type"):
        C.nbytes("f13", (2,))


def test_ring_cost_model() -> None:
    n, b = 8, 1e6
    assert C.ring_bytes("all-reduce", b, n) == pytest.approx(2 * 7 / 8 * b)
    assert C.ring_bytes("reduce-scatter", b, n) + C.ring_bytes("all-gather", b / n, n) == pytest.approx(
        C.ring_bytes("all-reduce", b, n)), "all-reduce = reduce-scatter + all-gather"
    assert C.ring_bytes("all-reduce", b, 1) == 0
    v5e, v5e_uni = C.link_for("TPU v5e"), C.link_for("TPU v5e", "ring")
    h100 = C.link_for("NVIDIA H100 80GB HBM3")  # what the runtime reports
    assert (v5e.gbs, v5e_uni.gbs, h100.gbs) == (100.0, 50.0, 450.0)  # 400/2/4*2, 400/2/4, 900/2
    assert C.link_for("TPU v5p").gbs == pytest.approx(1200 / 2 / 6 * 2)  # 3-D torus: 6 links
    assert C.ring_time("all-reduce", b, n, h100) == pytest.approx(2 * 7 / 8 * b / 450e9)
    table = C.collectives(MIXED)
    assert C.comm_time(table, v5e) == pytest.approx(sum(c.ring_bytes for c in table) / 100e9)
    with pytest.raises(ValueError, match="no interconnect figure"):
        C.link_for("Intel Xeon")
    with pytest.raises(ValueError, match="algorithm"):
        C.link_for("TPU v5e", "tree")


def test_summaries() -> None:
    table = C.collectives(MIXED)
    rows = C.summarize(table)
    assert [r["kind"] for r in rows] == ["all-reduce", "all-gather", "all-to-all", "collective-permute"]
    assert sum(r["array bytes D"] for r in rows) == C.array_bytes(table)
    assert C.total_bytes(table, "all-reduce") == 256 + 256 * 64 * 2
    assert len(C.summarize(table, detail=True)) == 6  # the two all-gathers differ in how they compiled
    assert {"kind", "operand shape", "array bytes D", "replica groups", "bytes sent"} <= set(table[0].row())
    by_kind = {r["kind"]: r for r in rows}
    # all-gathers: operand (8,16) f32 = 512 B on 8 devices -> D = 4096; (8,16) on pairs -> D = 1024
    assert by_kind["all-gather"]["array bytes D"] == 4096 + 1024
    assert by_kind["all-gather"]["bytes sent"] == pytest.approx(7 / 8 * 4096 + 1 / 2 * 1024)
    assert C.sent_bytes(table) == pytest.approx(sum(r["bytes sent"] for r in rows))
    assert C.array_bytes(table, "all-reduce") == C.total_bytes(table, "all-reduce")  # a reduction's operand is D
    # No emulated reduce-scatter here: as compiled, every collective sends its own kind's ring bytes.
    assert C.compiled_sent_bytes(table) == pytest.approx(C.sent_bytes(table))
    assert all(r["sent as compiled"] == pytest.approx(r["bytes sent"]) for r in rows)


def test_one_definition_of_bytes_sent_by_hand() -> None:
    # D = 1,000 bytes over n = 4 devices, ring: each device forwards 3 of the 4 quarters (750 B) for an
    # all-gather or a reduce-scatter, and both phases (1,500 B) for an all-reduce.
    assert C.bytes_sent("all-gather", 1000, 4) == 750
    assert C.bytes_sent("reduce-scatter", 1000, 4) == 750
    assert C.bytes_sent("all-reduce", 1000, 4) == 1500
    assert C.bytes_sent("all-reduce", 1000, 1) == 0
    # From the HLO operand: an all-gather's operand is one 250-byte shard, a reduction's the whole array.
    assert C.ring_bytes("all-gather", 250, 4) == 750 and C.ring_bytes("reduce-scatter", 1000, 4) == 750
    # FSDP's all-gather + reduce-scatter of a weight sends exactly what DP's all-reduce of it sends.
    assert C.bytes_sent("all-gather", 1000, 4) + C.bytes_sent("reduce-scatter", 1000, 4) == C.bytes_sent(
        "all-reduce", 1000, 4)
    with pytest.raises(ValueError, match="unknown collective"):
        C.bytes_sent("broadcast", 1000, 4)
    assert "(n-1)/n x D" in C.SENT and "2(n-1)/n x D" in C.SENT


# ---------------------------------------------------------------------------------------
# Real compiled programs on 8 simulated devices (own process)
# ---------------------------------------------------------------------------------------

SCRIPT = r"""
import json
import labkit
labkit.setup(cpu_devices=8, quiet=True)
import jax, jax.numpy as jnp, numpy as np
from labkit.sharding import layouts as S, collectives as C
mesh = S.make_mesh((8,), ("data",), "auto")
P, N = S.spec_of, lambda spec: S.named(mesh, spec)
out = {}

# Data-parallel MLP step: the gradient all-reduce moves exactly the parameter bytes (+4 for the loss).
params = {"w1": np.ones((32, 64), np.float32), "b1": np.ones(64, np.float32), "w2": np.ones((64, 16), np.float32)}
def loss(p, x):
    return jnp.mean((jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"]) ** 2)
def step(p, x):
    l, g = jax.value_and_grad(loss)(p, x)
    return jax.tree.map(lambda a, b: a - 0.1 * b, p, g), l
rep = {k: N(P()) for k in params}
f = jax.jit(step, in_shardings=(rep, N(P("data", None))), out_shardings=(rep, N(P())))
t = C.collectives(f.lower(params, np.ones((64, 32), np.float32)).compile())
out["dp"] = {"kinds": C.kinds(t), "bytes": C.total_bytes(t), "param_bytes": sum(v.nbytes for v in params.values()),
             "groups": sorted({c.group_size for c in t})}

# Gather a split array whole: one all-gather whose result is 8 x the operand.
x = np.ones((64, 32), np.float32)
g = jax.jit(lambda a: a, in_shardings=N(P("data", None)), out_shardings=N(P()))
t = C.collectives(g.lower(x).compile())
out["gather"] = {"kinds": C.kinds(t), "bytes": C.total_bytes(t), "shape": list(t[0].shape)}

# Partial sums split over the output rows: the CPU's reduce-scatter (all-reduce + dynamic-slice) ...
h = jax.jit(lambda a, b: a @ b, in_shardings=(N(P(None, "data")), N(P("data", None))), out_shardings=N(P("data", None)))
t = C.collectives(h.lower(np.ones((16, 64), np.float32), np.ones((64, 32), np.float32)).compile())
out["rs_auto"] = {"kinds": C.kinds(t), "compiled_as": [c.compiled_as for c in t], "bytes": C.total_bytes(t)}
# ... and the real one, written by hand with shard_map.
m = jax.jit(jax.shard_map(lambda a: jax.lax.psum_scatter(a, "data", scatter_dimension=0, tiled=True),
                          mesh=mesh, in_specs=P(None, "data"), out_specs=P("data", None)))
t = C.collectives(m.lower(np.ones((64, 64), np.float32)).compile())
out["rs_manual"] = {"kinds": C.kinds(t), "compiled_as": [c.compiled_as for c in t], "bytes": C.total_bytes(t)}
# A ring shift: collective-permute.
r = jax.jit(jax.shard_map(lambda a: jax.lax.ppermute(a, "data", [(i, (i + 1) % 8) for i in range(8)]),
                          mesh=mesh, in_specs=P("data"), out_specs=P("data")))
t = C.collectives(r.lower(np.ones(64, np.float32)).compile())
out["permute"] = {"kinds": C.kinds(t), "bytes": C.total_bytes(t), "pairs": len(t[0].replica_groups)}
# Resplit rows -> columns: all-to-all.
a = jax.jit(lambda v: v, in_shardings=N(P("data", None)), out_shardings=N(P(None, "data")))
t = C.collectives(a.lower(np.ones((64, 64), np.float32)).compile())
out["a2a"] = {"kinds": C.kinds(t), "bytes": C.total_bytes(t)}
# A max over the devices (a softmax's row-max over vocabulary shards): an all-reduce whose combiner is max.
mx = jax.jit(jax.shard_map(lambda a: jax.lax.pmax(a, "data"), mesh=mesh, in_specs=P("data"), out_specs=P()))
t = C.collectives(mx.lower(np.ones(64, np.float32)).compile())
out["pmax"] = [[c.kind, c.reduce_op] for c in t]

# Bad input: a program not yet compiled (its HLO has no collectives yet), or not compiled at all.
def err(fn):
    try:
        return f"no error: {fn()!r}"
    except Exception as e:
        return f"{type(e).__name__}: {e}"
out["errors"] = {"lowered": err(lambda: C.collectives(mx.lower(np.ones(64, np.float32)))),
                 "jitted": err(lambda: C.collectives(mx)),
                 "schedule_lowered": err(lambda: C.schedule(mx.lower(np.ones(64, np.float32)))),
                 "compiled_as_table": err(lambda: C.kinds(mx.lower(np.ones(64, np.float32)).compile()))}
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled() -> dict:
    return run_result(SCRIPT, timeout=240)


def test_dp_gradient_all_reduce_bytes_equal_parameter_bytes(compiled: dict) -> None:
    dp = compiled["dp"]
    assert dp["kinds"] and set(dp["kinds"]) == {"all-reduce"}
    assert dp["bytes"] == dp["param_bytes"] + 4  # every gradient once, plus the scalar loss
    assert dp["groups"] == [8]


def test_all_gather_operand_is_one_shard(compiled: dict) -> None:
    assert compiled["gather"]["kinds"] == {"all-gather": 1}
    assert compiled["gather"]["bytes"] == 64 * 32 * 4 // 8 and compiled["gather"]["shape"] == [8, 32]


def test_reduce_scatter_auto_on_cpu_and_by_hand(compiled: dict) -> None:
    auto, manual = compiled["rs_auto"], compiled["rs_manual"]
    assert auto["kinds"] == {"reduce-scatter": 1} and auto["compiled_as"] == [C.EMULATED_RS]
    assert auto["bytes"] == 16 * 32 * 4  # the full partial-sum array
    assert manual["kinds"] == {"reduce-scatter": 1} and manual["compiled_as"] == ["reduce-scatter"]
    assert manual["bytes"] == 64 * 8 * 4


def test_a_max_all_reduce_says_max(compiled: dict) -> None:
    assert compiled["pmax"] == [["all-reduce", "max"]]


def test_permute_and_all_to_all(compiled: dict) -> None:
    assert compiled["permute"] == {"kinds": {"collective-permute": 1}, "bytes": 8 * 4, "pairs": 8}
    assert set(compiled["a2a"]["kinds"]) == {"all-to-all"}
    assert compiled["a2a"]["bytes"] == math.prod((64, 64)) * 4 // 8


def test_uncompiled_programs_are_refused_with_the_fix(compiled: dict) -> None:
    e = compiled["errors"]
    # A Lowered's HLO is the program before the partitioner: it would silently read as "no collectives".
    assert e["lowered"].startswith("TypeError")
    assert "got a Lowered (f.lower(args)): call .compile() first" in e["lowered"]
    assert e["schedule_lowered"].startswith("TypeError") and "schedule: " in e["schedule_lowered"]
    assert e["jitted"].startswith("TypeError") and "(call .lower(args).compile() on it first)" in e["jitted"]
    assert e["compiled_as_table"].startswith("TypeError") and "list of Collective" in e["compiled_as_table"]


def test_schedule_is_the_entry_computation_in_text_order() -> None:
    seq = C.schedule(MIXED)
    assert [n for n, _, _ in seq] == ["p0", "p1", "p2", "p3", "all-reduce.22", "gte.0", "all-gather.3",
                                      "ag-start", "ag-done", "cp", "a2a", "r"]
    assert seq[4] == ("all-reduce.22", "all-reduce", "jit(step)/transpose(jvp())/reduce_sum")
    assert seq[6][2] == "jit(step)/jvp()/dot_general" and seq[7] == ("ag-start", "all-gather-start", "")
    # Fused computations are not the entry's: CPU_RS's dynamic-slice lives inside a fusion.
    assert "dynamic-slice.3" not in [n for n, _, _ in C.schedule(CPU_RS)]
    with pytest.raises(ValueError, match="no ENTRY computation"):
        C.schedule("HloModule m\n")


def test_entry_name_of_an_hlo_module() -> None:
    from labkit.sharding import hlo_text

    assert hlo_text.entry_name("HloModule m\n\n%add (a: f32[]) -> f32[] {\n}\n\nENTRY %main.0_spmd (p: f32[2]) -> f32[2] {\n}\n") \
        == "main.0_spmd"
    assert hlo_text.entry_name("HloModule m\n") is None


def test_the_reduction_op_is_read_from_to_apply() -> None:
    # A reduce-scatter of a max (a row-max over vocabulary shards) costs a sum's bytes: the tables say which.
    (add,) = C.collectives(CPU_RS)
    (mx,) = C.collectives(CPU_RS.replace("ROOT %add = f32[] add(%x, %y)", "ROOT %m = f32[] maximum(%x, %y)"))
    assert (add.reduce_op, mx.reduce_op) == ("sum", "max") and mx.kind == "reduce-scatter"
    assert mx.row()["reduction"] == "max" and mx.ring_bytes == add.ring_bytes
    rows = C.summarize([add, mx], detail=True)
    assert sorted(r["reduction"] for r in rows) == ["max", "sum"]  # two rows: the same shape, two combiners
    table = C.collectives(MIXED)
    assert [c.reduce_op for c in table if c.kind == "all-reduce"] == ["sum", "sum"]  # a tuple all-reduce: one combiner
    assert all(c.reduce_op == "" for c in table if c.kind != "all-reduce")  # data movement has none


def test_source_parameter_follows_one_operand_ops_to_the_argument() -> None:
    from labkit.sharding import hlo_text

    text = """HloModule m, num_partitions=8

ENTRY %main (param.3: f32[32,128], param.4: f32[16]) -> f32[] {
  %param.3 = f32[32,128]{1,0} parameter(0), sharding={devices=[8,1]<=[8]}, metadata={op_name="params[\\'wte\\']"}
  %param.4 = f32[16]{0} parameter(1), metadata={op_name="params[\\'lnf_g\\']"}
  %bitcast.1 = f32[128,32]{0,1} bitcast(%param.3), metadata={op_name="jit(step)/jvp()/transpose"}
  %add.2 = f32[16]{0} add(%param.4, %param.4)
  %all-gather.1 = f32[128,256]{0,1} all-gather(%bitcast.1), channel_id=1, replica_groups=[1,8]<=[8], dimensions={1}
  %all-gather.2 = f32[128]{0} all-gather(%add.2), channel_id=2, replica_groups=[1,8]<=[8], dimensions={0}
  %tuple.1 = (f32[16]{0}, f32[16]{0}) tuple(%param.4, %add.2)
  %opt-barrier.1 = (f32[16]{0}, f32[16]{0}) opt-barrier(%tuple.1)
  %gte.0 = f32[16]{0} get-tuple-element(%opt-barrier.1), index=0
  %gte.1 = f32[16]{0} get-tuple-element(%opt-barrier.1), index=1
  ROOT %r = f32[] constant(0)
}
"""
    instrs, _, _ = hlo_text.parse_module(text)
    assert hlo_text.source_parameter("bitcast.1", instrs) == "wte"  # through the transpose's bitcast
    assert hlo_text.source_parameter("param.4", instrs) == "lnf_g"
    assert hlo_text.source_parameter("add.2", instrs) is None  # two operands: a new array, not a weight
    assert hlo_text.source_parameter("nowhere", instrs) is None
    # ZeRO-3's re-gather reads the shard back out of an optimization barrier: element 0 is the weight
    assert hlo_text.source_parameter("gte.0", instrs) == "lnf_g" and hlo_text.source_parameter("gte.1", instrs) is None


# ------------------------------------------------------------------ bad input is refused, naming the value


@pytest.mark.parametrize(("call", "err", "match"), [
    (lambda: C.bytes_sent("all-reduce", -1e6, 8), ValueError, r"array_bytes must be .*>= 0, got -1000000.0"),
    (lambda: C.bytes_sent("all-reduce", float("nan"), 8), ValueError, r"array_bytes .*got nan"),
    (lambda: C.bytes_sent("all-reduce", "1e6", 8), TypeError, r"array_bytes .*got '1e6' \(str\)"),
    (lambda: C.bytes_sent("all-reduce", 1e6, 0), ValueError, r"n must be >= 1, got 0; e.g. n=8"),
    (lambda: C.bytes_sent("all-reduce", 1e6, -4), ValueError, r"n must be >= 1, got -4"),
    (lambda: C.bytes_sent("all-reduce", 1e6, 2.5), TypeError, r"n must be a whole number >= 1, got 2.5"),
    (lambda: C.ring_bytes("all-gather", "1e6", 8), TypeError, r"nbytes \(HLO operand bytes\) .*got '1e6'"),
    (lambda: C.collectives("not compiled"), ValueError, r"got 'not compiled': not HLO module text"),
    (lambda: C.collectives(None), TypeError, r"collectives: pass f.lower\(args\).compile\(\) .*got None \(NoneType\)"),
    (lambda: C.schedule(42), TypeError, r"schedule: .*got 42 \(int\)"),
    (lambda: C.kinds("abc"), TypeError, r"list of Collective.*got 'abc' \(str\)"),
    (lambda: C.kinds([1]), TypeError, r"got 1 \(int\) in the list"),
    (lambda: C.sent_bytes(None), TypeError, r"list of Collective.*got None"),
    (lambda: C.summarize(None), TypeError, r"list of Collective.*got None"),
    (lambda: C.sent_bytes([], "allreduce"), ValueError, r"unknown collective kind 'allreduce'"),
    (lambda: C.array_bytes([], "gather"), ValueError, r"unknown collective kind 'gather'"),
])
def test_bad_input_names_the_value(call, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        call()


def test_edge_values_that_are_legal() -> None:
    assert C.bytes_sent("all-reduce", 0, 8) == 0.0  # an empty array sends nothing
    assert C.bytes_sent("all-gather", 1000, 1) == 0.0  # a group of one sends nothing
    assert C.bytes_sent("all-reduce", 1000, np.int64(4)) == 1500  # numpy counts are counts
    table = C.collectives(MIXED)
    assert C.sent_bytes(iter(table)) == C.sent_bytes(table) and C.kinds(()) == {}  # any iterable of rows
    assert C.sent_bytes(table, "all-to-all") == sum(c.ring_bytes for c in table if c.kind == "all-to-all")
