"""labkit.sharding.op_names and Collective.origin on the op_name strings XLA really writes.

The literals below were recorded from the compiled HLO of the course GPT's training step (smoke
sizes: vocab 256, seq 32, 2 layers, d_model 128, batch 16) under jax/jaxlib 0.10.2 on XLA:CPU, 8
simulated devices: XLA's all-reduce combiner merged several all-reduces into one tuple all-reduce and
their op_names into one. The last test compiles the tp step again and checks the reading still holds.
"""

from __future__ import annotations

import pytest

from labkit.sharding import collectives as C
from labkit.sharding import op_names as O
from tests.conftest import run_result

# tp, all-reduce.14: element 0 f32[16,32,128] (a row-parallel matmul's output, forward pass),
# element 1 f32[16,32] (log-softmax's sum over the split vocabulary, backward pass).
TP_FWD_BWD = "jit(step)/(jvp()/dot_general:transpose(jvp(jit(log_softmax)))/reduce_sum)"
# tp, all-reduce.15: element 0 f32[16,32,128] backward matmul, element 1 f32[16,32,1] forward gather.
TP_BWD_FWD = "jit(step)/(transpose(jvp(btd,dke->btke))/dot_general:jvp(jit(take_along_axis))/gather)"
# dp, all-reduce.22: the 22 arrays of the gradient all-reduce; element 21, f32[], is the loss (forward).
DP_GRADS = ("jit(step)/(" + ":".join(
    ["transpose(jvp())/reduce_sum"] * 4 + ["transpose(jvp())/dot_general"] * 3
    + ["transpose(jvp(btd,dke->btke))/dot_general"] + ["transpose(jvp())/reduce_sum"] * 4
    + ["transpose(jvp())/dot_general"] * 3 + ["transpose(jvp(btd,dke->btke))/dot_general"]
    + ["transpose(jvp())/reduce_sum"] * 3
    + ["transpose(jvp())/dot_general", "transpose(jvp(jit(_take)))/scatter-add", "jvp()/reduce_sum"]) + ")")


def test_plain_op_names() -> None:
    assert O.parts("jit(step)/jvp()/dot_general") == ["jit(step)/jvp()/dot_general"]
    assert O.origin("jit(step)/transpose(jvp(btd,dke->btke))/dot_general") == "backward dot_general"
    assert O.origin("jit(step)/jvp(jit(_take))/gather") == "forward gather"
    assert O.origin("jit(f)/dot_general") == "dot_general" and O.origin("") == "(compiler)"
    with pytest.raises(TypeError, match="op_name must be the HLO metadata string"):
        O.parts(None)  # type: ignore[arg-type]


def test_combined_names_split_in_operand_order() -> None:
    assert O.parts(TP_FWD_BWD) == ["jit(step)/jvp()/dot_general",
                                   "jit(step)/transpose(jvp(jit(log_softmax)))/reduce_sum"]
    # The bug this module fixes: the last "/" segment of the whole name made both arrays "backward reduce_sum".
    assert [O.origin(TP_FWD_BWD, i, 2) for i in (0, 1)] == ["forward dot_general", "backward reduce_sum"]
    assert [O.origin(TP_BWD_FWD, i, 2) for i in (0, 1)] == ["backward dot_general", "forward gather"]
    assert [O.array_phase(TP_FWD_BWD, i, 2) for i in (0, 1)] == ["forward", "backward"]
    parts = O.parts(DP_GRADS)
    assert len(parts) == 22 and all(p.startswith("jit(step)/") for p in parts)
    assert O.origin(DP_GRADS, 4, 22) == "backward dot_general" and O.origin(DP_GRADS, 20, 22) == "backward scatter-add"
    assert O.origin(DP_GRADS, 21, 22) == "forward reduce_sum"  # the loss


def test_a_combination_that_does_not_match_the_arrays_is_reported_whole() -> None:
    assert O.origin(TP_FWD_BWD, 0, 3) == "combined: forward dot_general + backward reduce_sum"
    assert O.origin(TP_FWD_BWD) == "combined: forward dot_general + backward reduce_sum"
    assert O.array_phase(TP_FWD_BWD) == "" and O.array_phase(DP_GRADS.replace(":jvp()/reduce_sum", "")) == "backward"
    # A merged name merged again flattens; a parenthesised last segment without ":" is one name.
    assert O.parts("jit(f)/(a/x:(b/y:c/z))") == ["jit(f)/a/x", "jit(f)/b/y", "jit(f)/c/z"]
    assert O.parts("jit(f)/(only)") == ["jit(f)/(only)"]


def _tuple_all_reduce(op_name: str) -> str:
    return f"""HloModule jit_step, num_partitions=8

%sum (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}}

ENTRY %main (p0: f32[16,32,128], p1: f32[16,32]) -> f32[] {{
  %p0 = f32[16,32,128]{{2,1,0}} parameter(0)
  %p1 = f32[16,32]{{1,0}} parameter(1)
  %all-reduce.14 = (f32[16,32,128]{{2,1,0}}, f32[16,32]{{1,0}}) all-reduce(%p0, %p1), channel_id=14, replica_groups=[1,8]<=[8], use_global_device_ids=true, to_apply=%sum, metadata={{op_name="{op_name}"}}
  ROOT %r = f32[] constant(0)
}}
"""


def test_collectives_read_each_array_of_a_combined_call() -> None:
    fwd, bwd = C.collectives(_tuple_all_reduce(TP_FWD_BWD))
    assert (fwd.name, fwd.shape, fwd.arrays, fwd.call, fwd.index) == ("all-reduce.14[0]", (16, 32, 128), 2, "all-reduce.14", 0)
    assert (fwd.origin, fwd.phase) == ("forward dot_general", "forward")
    assert (bwd.origin, bwd.phase) == ("backward reduce_sum", "backward")
    rows = C.summarize([fwd, bwd], detail=True)
    assert sorted(r["from"] for r in rows) == ["backward reduce_sum", "forward dot_general"]
    # one call, two arrays: the tables count both, and the call once
    (row,) = C.summarize([fwd, bwd])
    assert (row["arrays"], row["calls"]) == (2, 1) and "count" not in row
    assert C.calls([fwd, bwd]) == 1 and C.calls([fwd, bwd], "all-gather") == 0


SCRIPT = r"""
import json
import labkit
labkit.setup(cpu_devices=8, quiet=True)
from labkit.gpt.config import GPTConfig
from labkit.sharding import collectives as C, op_names as O, train_step as st
cfg = GPTConfig(vocab_size=256, seq_len=32, n_layer=2, n_head=8, d_model=128)
params = st.init_params(cfg, seed=0)
x, y = st.demo_batch(cfg, 16)
step = st.build_step(cfg, "tp")
t = C.collectives(step.compile(*step.place(params, x, y), fast=True))
calls = {}
for c in t:
    calls.setdefault(c.call, []).append(c)
combined = [v for v in calls.values() if len(O.parts(v[0].op_name)) > 1]
print("RESULT" + json.dumps({
    "combined": [[len(O.parts(v[0].op_name)), len(v)] for v in combined],
    "fwd_dot": [list(c.shape) for c in t if c.origin == "forward dot_general"],
    "unread": [c.origin for c in t if c.origin.startswith("combined")]}))
"""


def test_the_tp_step_compiled_here_reads_part_by_part() -> None:
    r = run_result(SCRIPT, timeout=240)
    # This XLA still combines (else the literals above no longer describe it) and names one part per array.
    assert r["combined"] and all(p == a for p, a in r["combined"]), r["combined"]
    assert r["unread"] == []
    # Megatron: one forward all-reduce per row-parallel matmul (attention out, MLP out) per layer, of activations.
    assert r["fwd_dot"] == [[16, 32, 128]] * 4
