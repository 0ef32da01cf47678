"""labkit.sharding.partitioner: the module after propagation has shardings and no collective; after XLA's
SPMD partitioner it has per-device shapes and the collective (8 simulated devices, own process)."""

from __future__ import annotations

import pytest

from labkit.sharding import partitioner as Pt
from tests.conftest import run_result

PROPAGATED = """HloModule jit_f, num_partitions=8

ENTRY %main.0 (x.0: f32[16,32], w.0: f32[32,8]) -> f32[16,8] {
  %x.0 = f32[16,32]{1,0} parameter(0), sharding={devices=[2,4]<=[8]}, metadata={op_name="x"}
  %w.0 = f32[32,8]{1,0} parameter(1), sharding={devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}
  ROOT %dot = f32[16,8]{1,0} dot(%x.0, %w.0), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
}
"""


def test_stage_row_from_hlo_text() -> None:
    row = Pt.Stage("shardy-xla", "spmd-partitioning", PROPAGATED).row()
    assert row == {"stage": "propagated", "after pass": "shardy-xla", "next pass": "spmd-partitioning",
                   "instructions": 3, "with a sharding=": 3, "parameter shapes": "f32[16,32], f32[32,8]", "collectives": 0}


def test_each_stage_is_named() -> None:
    """A cold read met 'after conditional-canonicalizer' as the first row, unexplained: it is the module before propagation."""
    names = [Pt.Stage(a, b, PROPAGATED).stage for a, b in (("conditional-canonicalizer", "shardy-xla"),
                                                           ("shardy-xla", "spmd-partitioning"),
                                                           ("spmd-partitioning", "control-dep-rewriter"),
                                                           ("x", "sharding-propagation"))]
    assert names == ["before propagation", "propagated", "partitioned", "before propagation"]


@pytest.mark.parametrize("passes", [(), ("spmd partitioning",), (3,), ".*", "spmd-partitioning"])
def test_bad_pass_names(passes) -> None:
    with pytest.raises(ValueError, match="passes must be a tuple of XLA pass names"):
        Pt.stages(None, passes)


SCRIPT = r"""
import json
import labkit
labkit.setup(cpu_devices=8, quiet=True)
import jax, numpy as np
from labkit.sharding import collectives as C, layouts as S, partitioner as Pt
mesh = S.make_mesh((2, 4), ("data", "model"), "auto", S.mesh_devices(8))
N = lambda *spec: S.named(mesh, S.spec_of(*spec))
f = jax.jit(lambda x, w: x @ w, in_shardings=(N("data", "model"), N("model", None)), out_shardings=N("data", None))
compiled, stages = Pt.stages(f.lower(np.ones((16, 32), np.float32), np.ones((32, 8), np.float32)))
print("RESULT" + json.dumps({"rows": [s.row() for s in stages], "final": C.kinds(C.collectives(compiled))}))
"""


def test_propagation_then_partitioning() -> None:
    r = run_result(SCRIPT, timeout=240)
    rows = {row["after pass"]: row for row in r["rows"]}
    assert r["rows"][0]["next pass"] in ("shardy-xla", "sharding-propagation")  # the module before propagation
    assert [row["stage"] for row in r["rows"]] == ["before propagation", "propagated", "partitioned"]
    prop = rows.get("shardy-xla") or rows["sharding-propagation"]
    split = rows["spmd-partitioning"]
    # Propagation annotates every instruction and inserts nothing; the partitioner splits shapes and inserts.
    assert prop["collectives"] == 0 and prop["with a sharding="] == prop["instructions"]
    assert prop["parameter shapes"] == "f32[16,32], f32[32,8]" and split["parameter shapes"] == "f32[8,8], f32[8,8]"
    assert split["collectives"] == 1 and r["final"] == {"all-reduce": 1}
