"""labkit.sharding.layouts, labkit.sharding.train_step, labkit.sharding.memory_model, labkit.sharding.plots (Lab 03).

Everything that needs 8 devices runs once, in its own process (JAX fixes the device count at
start-up), and reports JSON; the tests below assert on it. Pure-Python checks run in-process.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from labkit.sharding import layouts as sharding
from labkit.runtime.device import xla_installed
from tests.conftest import run_result

SCRIPT = r"""
import json
import labkit
labkit.setup(cpu_devices=8, quiet=True)
import jax, numpy as np
import matplotlib
matplotlib.use("Agg")
from labkit.sharding import layouts as S, train_step as st, memory_model as mm, collectives as C, plots as shard_viz
from labkit.gpt.config import GPTConfig
out = {"errors": {}}

def err(key, fn):
    try:
        fn()
        out["errors"][key] = None
    except Exception as e:
        out["errors"][key] = f"{type(e).__name__}: {e}"

cfg = GPTConfig(vocab_size=256, seq_len=16, n_layer=1, n_head=8, d_model=32)
params = st.init_params(cfg, seed=0)
x, y = st.demo_batch(cfg, 8)

# The functional GPT is the course GPT: same loss as FlaxGPT and TorchGPT on the same weights.
from labkit.gpt.convert import load_flat_params
from labkit.gpt.flax_model import abstract_flax_gpt, flax_loss
from labkit.gpt.torch_model import TorchGPT, torch_loss
import torch
flat = st.flat_from_params(params, cfg)
out["roundtrip_exact"] = all(np.array_equal(a, b) for a, b in zip(st.params_from_flat(flat, cfg).values(), params.values()))
ours = float(st.gpt_loss(params, x, y, cfg))
out["loss_vs_flax"] = abs(ours - float(flax_loss(load_flat_params(abstract_flax_gpt(cfg), flat), x, y)))
out["loss_vs_torch"] = abs(ours - float(torch_loss(load_flat_params(TorchGPT(cfg), flat), torch.from_numpy(x).long(), torch.from_numpy(y).long())))

single = st.build_step(cfg, "single")
a = single.place(params, x, y)
p0, _, l0 = single.compile(*a, fast=True)(*a)
p0, l0 = st.to_numpy(p0), float(l0)
out["strategies"] = {}
for name in S.STRATEGIES:
    step = st.build_step(cfg, name)
    a = step.place(params, x, y)
    c = step.compile(*a, fast=True)
    p, o, l = c(*a)
    est = mm.estimate(name, cfg, 8, step.mesh, step.param_specs)
    out["strategies"][name] = {
        "loss_diff": abs(float(l) - l0), "weight_diff": st.max_abs_diff(st.to_numpy(p), p0),
        "mesh": dict(step.mesh.shape), "kinds": C.kinds(C.collectives(c)),
        "param_spec_fc": str(p["blocks.0.w_fc"].sharding.spec),
        "mu_spec_fc": str(o[0].mu["blocks.0.w_fc"].sharding.spec),
        "memory": mm.check(est, c), "state": est.state, "peak": est.peak}
fig = shard_viz.show_layouts({"x": a[2], "w_fc": a[0]["blocks.0.w_fc"], "ln": a[0]["blocks.0.ln1_g"],
                              "qkv": a[0]["blocks.0.w_qkv"]}, step.mesh, title="t")
out["viz_axes"] = len(fig.axes)
out["tiles_dp_tp_fc"] = [ids for _, ids in shard_viz.tiles((32, 128), a[0]["blocks.0.w_fc"].sharding)]

# Explicit vs Auto axis types.
mx = S.make_mesh((2, 4), ("data", "model"), "explicit")
ma = S.make_mesh((2, 4), ("data", "model"), "auto")
out["axis_types"] = [str(mx.axis_types), str(ma.axis_types)]
xe = S.place(np.ones((8, 16), np.float32), mx, S.spec_of("data", "model"))
we = S.place(np.ones((16, 4), np.float32), mx, S.spec_of("model", None))
err("explicit_ambiguous", lambda: jax.jit(lambda u, v: u @ v)(xe, we))
ye = jax.jit(lambda u, v: jax.numpy.matmul(u, v, out_sharding=S.named(mx, S.spec_of("data", None))))(xe, we)
out["explicit_out_sharding"] = [str(ye.sharding.spec), float(np.asarray(ye).max())]

# Bad input.
err("mesh_size", lambda: S.make_mesh((4, 4), ("data", "model")))
err("mesh_names", lambda: S.make_mesh((2, 4), ("data",)))
err("non_divisible", lambda: S.place(np.ones((10, 16), np.float32), ma, S.spec_of("model", None), name="tokens"))
err("unknown_axis", lambda: S.check_divisible("w", (8, 8), S.spec_of("expert", None), ma))
err("named_unknown_axis", lambda: S.named(ma, S.spec_of("dta")))
err("place_tuple_spec", lambda: S.place(np.ones((8, 16), np.float32), ma, ("data", None)))
err("tp_heads", lambda: st.build_step(GPTConfig(vocab_size=256, seq_len=16, n_layer=1, n_head=4, d_model=32), "tp"))
err("too_late", lambda: S.simulate(4))
err("same_count_ok", lambda: S.simulate(8))

# One collective by hand == the partitioner's, with the same or fewer bytes.
m1 = S.make_mesh((8,), ("data",))
rng = np.random.default_rng(0)
xl, yl, wl = (rng.standard_normal(s).astype(np.float32) for s in ((32, 64), (32, 16), (64, 16)))
ca, cm = (S.grad_reduce_scatter(m1, manual).lower(xl, yl, wl).compile() for manual in (False, True))
ga, gm = np.asarray(ca(xl, yl, wl)), np.asarray(cm(xl, yl, wl))
ta, tm = C.collectives(ca), C.collectives(cm)
out["shard_map"] = {"max_diff": float(np.abs(ga - gm).max()),
                    "ref_diff": float(np.abs(gm - S.linear_grad(xl.astype(np.float64), yl, wl)).max()),
                    "auto_sent": sum(c.compiled_ring_bytes for c in ta), "manual_sent": sum(c.compiled_ring_bytes for c in tm),
                    "kinds": [C.kinds(ta), C.kinds(tm)]}
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def res() -> dict:
    return run_result(SCRIPT, timeout=300, tail=4000)


def test_functional_gpt_is_the_course_gpt(res: dict) -> None:
    assert res["roundtrip_exact"]
    assert res["loss_vs_flax"] < 1e-5 and res["loss_vs_torch"] < 1e-5


@pytest.mark.parametrize("name", list(sharding.STRATEGIES))
def test_each_strategy_matches_the_unsharded_step(res: dict, name: str) -> None:
    r = res["strategies"][name]
    assert r["loss_diff"] < 1e-5  # fp32, only the order of additions differs
    assert r["weight_diff"] < 5e-5  # 5% of one Adam step (lr 1e-3); Adam amplifies tiny-gradient noise


def test_strategy_layouts_and_collectives(res: dict) -> None:
    s = res["strategies"]
    assert s["dp"]["mesh"] == {"data": 8} and s["dp_tp"]["mesh"] == {"data": 2, "model": 4}
    assert set(s["dp"]["kinds"]) == {"all-reduce"}
    assert {"all-gather", "reduce-scatter"} <= set(s["fsdp"]["kinds"])
    assert set(s["tp"]["kinds"]) == {"all-reduce"}
    # FSDP shards Adam's moments like the parameters; Megatron splits d_ff of w_fc.
    assert s["fsdp"]["mu_spec_fc"] == s["fsdp"]["param_spec_fc"] != "P()"
    assert s["tp"]["param_spec_fc"] == "P(None, 'model')"


def test_memory_model_vs_memory_analysis(res: dict) -> None:
    for name, r in res["strategies"].items():
        m = r["memory"]
        assert m["state ok"], f"{name}: state ratio {m['state ratio']}"  # within 1 %
        assert m["peak ok"], f"{name}: peak ratio {m['peak ratio']}"  # within a factor 1.5
    s = res["strategies"]
    # ZeRO-3 vs DP (memory_model.zero_bytes): 3Ψ/N against 3Ψ of weights + Adam state, N = 8; the batch is split in both
    assert s["fsdp"]["state"] == pytest.approx(s["dp"]["state"] / 8, rel=0.01) and s["fsdp"]["peak"] < s["dp"]["peak"]


def test_pictures(res: dict) -> None:
    assert res["viz_axes"] == 8  # 2 rows of 4: the mesh, 4 arrays, 3 blank
    # dp_tp: w_fc (32, 128) split by columns over "model" (4), replicated over "data" (2).
    assert res["tiles_dp_tp_fc"] == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_explicit_and_auto_axes(res: dict) -> None:
    assert res["axis_types"] == ["(Explicit, Explicit)", "(Auto, Auto)"]
    assert "out_sharding" in res["errors"]["explicit_ambiguous"]
    assert res["explicit_out_sharding"] == ["P('data', None)", 16.0]


def test_bad_input_errors(res: dict) -> None:
    e = res["errors"]
    assert "needs 16 devices but 8" in e["mesh_size"] and "(2, 4)" in e["mesh_size"]
    assert "2 axes but 1 names" in e["mesh_names"]
    assert "array 'tokens' dim 0 (size 10) is not divisible by mesh axis 'model' (size 4)" in e["non_divisible"]
    assert "'expert'" in e["unknown_axis"]
    assert e["named_unknown_axis"].startswith("ShardingError") and "names mesh axis 'dta'" in e["named_unknown_axis"]
    assert e["place_tuple_spec"].startswith("TypeError") and "spec_of('data', None)" in e["place_tuple_spec"]
    assert "n_head=4" in e["tp_heads"] and "dp_tp" in e["tp_heads"]
    assert e["too_late"].startswith("RuntimeError") and "already initialised" in e["too_late"]
    assert e["same_count_ok"] is None


def test_shard_map_matches_the_partitioner(res: dict) -> None:
    sm = res["shard_map"]
    assert sm["max_diff"] < 1e-6 and sm["ref_diff"] < 1e-4
    assert sm["manual_sent"] <= sm["auto_sent"]
    assert sm["kinds"] == [{"reduce-scatter": 1}, {"reduce-scatter": 1}]


def test_unknown_strategy_lists_valid_names() -> None:
    with pytest.raises(sharding.ShardingError, match="unknown sharding strategy 'zero'; valid: dp, fsdp, tp, dp_tp"):
        sharding.get_strategy("zero")


def test_mesh_shapes_of_presets() -> None:
    assert sharding.get_strategy("dp").mesh_shape(8) == (8,)
    assert sharding.get_strategy("dp_tp").mesh_shape(8) == (2, 4)
    assert sharding.get_strategy("dp_tp").mesh_shape(8, model=2) == (4, 2)
    with pytest.raises(sharding.ShardingError, match="does not divide"):
        sharding.get_strategy("dp_tp").mesh_shape(6, model=4)


XLA_SCRIPT = r"""
import json
from labkit.sharding import torch_spmd as torch_sharding
print("RESULT" + json.dumps({k: {x: v for x, v in torch_sharding.xla_spmd_mlp(k).items() if x != "hlo"}
                             for k in ("dp", "tp")}))
"""


@pytest.mark.skipif(not xla_installed(), reason="torch-xla not installed (optional extra 'xla')")
def test_torch_xla_spmd_matches_torch() -> None:
    res = run_result(XLA_SCRIPT, timeout=300)
    for layout in ("dp", "tp"):
        assert res[layout]["max_abs_diff"] < 1e-4 and res[layout]["annotations"]


def test_torch_xla_absent_message() -> None:
    if xla_installed():
        pytest.skip("torch-xla is installed here")
    from labkit.sharding import torch_spmd as torch_sharding

    with pytest.raises(RuntimeError, match="torch-xla is not installed"):
        torch_sharding.xla_spmd_mlp("dp")


# ------------------------------------------------------------------ bad numbers are refused, not rounded


class _Mesh:
    """Just the ``.shape`` of a (data 2, model 4) mesh: what the layout arithmetic reads."""

    shape = {"data": 2, "model": 4}


@pytest.mark.parametrize(("call", "err", "match"), [
    (lambda: sharding.get_strategy("dp_tp").mesh_shape(8, model=0), sharding.ShardingError, r"model .* must be >= 1, got 0; pass a divisor of 8"),
    (lambda: sharding.get_strategy("dp_tp").mesh_shape(8, model=-2), sharding.ShardingError, r"model .* got -2"),
    (lambda: sharding.get_strategy("dp_tp").mesh_shape(8, model=3), sharding.ShardingError, r"model axis 3 does not divide 8 devices; use model= one of \[1, 2, 4, 8\]"),
    (lambda: sharding.get_strategy("dp_tp").mesh_shape(8, model=2.0), TypeError, r"model .* whole number.*2.0"),
    (lambda: sharding.get_strategy("dp").mesh_shape(0), sharding.ShardingError, r"n_devices must be >= 1, got 0"),
    (lambda: sharding.get_strategy("dp").mesh_shape(float("nan")), TypeError, r"n_devices .*nan"),
    (lambda: sharding.strategy_mesh("dp", 0), sharding.ShardingError, r"n_devices must be >= 1, got 0"),
    (lambda: sharding.strategy_mesh("dp", -8), sharding.ShardingError, r"n_devices must be >= 1, got -8"),
    (lambda: sharding.mesh_devices(0), sharding.ShardingError, r"n \(devices for the mesh\) must be >= 1, got 0"),
    (lambda: sharding.make_mesh((8.9,), ("data",)), TypeError, r"mesh axis size \(shape\[0\] of \(8.9,\)\) must be a whole number.*8.9"),
    (lambda: sharding.make_mesh((2, 0), ("data", "model")), sharding.ShardingError, r"shape\[1\].*got 0"),
    (lambda: sharding.shard_bytes((10, 16), 4, ("model", None), _Mesh()), sharding.ShardingError, r"dim 0 \(size 10\) is not divisible by mesh axis 'model' \(size 4\)"),
    (lambda: sharding.shard_bytes((8, 16), 0, ("model", None), _Mesh()), sharding.ShardingError, r"itemsize .* got 0"),
    (lambda: sharding.shard_bytes((8, 16.5), 4, ("model", None), _Mesh()), TypeError, r"shape\[1\]"),
])
def test_bad_mesh_numbers(call, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        call()


def test_shard_bytes_of_even_splits() -> None:
    assert sharding.shard_bytes((8, 16), 4, ("model", None), _Mesh()) == 8 * 16 * 4 // 4
    assert sharding.shard_bytes((8, 16), 2, (("data", "model"), None), _Mesh()) == 8 * 16 * 2 // 8
    assert sharding.shard_bytes((0, 16), 4, (None, "data"), _Mesh()) == 0


def test_shard_shape_of_even_splits() -> None:
    assert sharding.shard_shape((8, 16), ("model", None), _Mesh()) == (2, 16)
    assert sharding.shard_shape((8, 16), (("data", "model"), None), _Mesh()) == (1, 16)
    assert sharding.shard_shape((8, 16, 4), (None, "data"), _Mesh()) == (8, 8, 4)  # a short spec: the rest whole
    assert math.prod(sharding.shard_shape((8, 16), (None, "model"), _Mesh())) * 4 == sharding.shard_bytes(
        (8, 16), 4, (None, "model"), _Mesh())
    with pytest.raises(sharding.ShardingError, match=r"dim 0 \(size 10\) is not divisible by mesh axis 'model'"):
        sharding.shard_shape((10, 16), ("model", None), _Mesh())


def test_memory_model_refuses_bad_sizes() -> None:
    from labkit.gpt.config import GPTConfig
    from labkit.sharding import memory_model as mm

    cfg = GPTConfig(vocab_size=256, seq_len=16, n_layer=1, n_head=8, d_model=32)
    with pytest.raises(sharding.ShardingError, match=r"batch 10 does not split evenly over the 'data' axis of size 4"):
        mm.activation_bytes(cfg, 10, data=4)
    with pytest.raises(sharding.ShardingError, match=r"batch \(global batch size\) must be >= 1, got 0"):
        mm.estimate("single", cfg, 0)
    with pytest.raises(TypeError, match=r"seq \(tokens per sequence\)"):
        mm.estimate("single", cfg, 8, seq=2.5)
    with pytest.raises(TypeError, match="cfg must be a GPTConfig"):
        mm.estimate("single", {"d_model": 32}, 8)
    assert mm.activation_bytes(cfg, 8, data=2, model=4) > 0


class _FakeJax:
    """jax as a runtime shows it to mesh_devices: jax.devices() the accelerators, jax.devices("cpu") the host's."""

    def __init__(self, accelerators: list, cpus: list) -> None:
        self._acc, self._cpus = accelerators, cpus

    def devices(self, backend: str | None = None) -> list:
        return self._cpus if backend == "cpu" else self._acc


def _devs(platform: str, n: int) -> list:
    from types import SimpleNamespace

    return [SimpleNamespace(platform=platform, id=i) for i in range(n)]


def test_mesh_devices_on_one_gpu_falls_back_to_the_simulated_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    # One GPU (Colab, Kaggle, a lent H100) cannot hold an 8-device mesh: the simulated CPUs of labkit.setup do.
    gpu, cpus = _devs("gpu", 1), _devs("cpu", 8)
    monkeypatch.setattr(sharding, "_jax", lambda: _FakeJax(gpu, cpus))
    assert sharding.mesh_devices(8) == cpus
    assert sharding.mesh_devices(1) == gpu  # a 1-device mesh stays on the accelerator
    # A TPU v5e-8: its 8 chips, not the host's CPUs.
    tpus = _devs("tpu", 8)
    monkeypatch.setattr(sharding, "_jax", lambda: _FakeJax(tpus, cpus))
    assert sharding.mesh_devices(8) == tpus and sharding.mesh_devices(4) == tpus[:4]
    # Neither holds 8: the error names both counts and the fix.
    monkeypatch.setattr(sharding, "_jax", lambda: _FakeJax(gpu, _devs("cpu", 1)))
    with pytest.raises(sharding.ShardingError, match=r"need 8 devices .* has 1 gpu and 1 CPU device\(s\).*cpu_devices=8"):
        sharding.mesh_devices(8)


# ------------------------------------------------------------------ meshes and layouts of the wrong type


def _abstract_mesh():
    """A (data 2, model 4) mesh without devices: named() and place()'s checks run without starting JAX."""
    from jax.sharding import AbstractMesh, AxisType

    # Auto axes, as make_mesh's default: newer JAX (0.12) defaults an AbstractMesh to Explicit axes, where a
    # spec holding UNCONSTRAINED is refused by JAX itself
    return AbstractMesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))


_SE, _P = sharding.ShardingError, sharding.spec_of


@pytest.mark.parametrize(("call", "err", "match"), [
    (lambda: sharding.make_mesh(8, ("data",), "auto", _devs("cpu", 8)), TypeError,
     r"mesh shape must be a tuple like \(8,\).*got 8 \(int\)"),
    (lambda: sharding.make_mesh((8,), "data", "auto", _devs("cpu", 8)), TypeError,
     r"mesh names must be a tuple like \('data',\).*got 'data' \(str\)"),
    (lambda: sharding.make_mesh((), (), "auto", _devs("cpu", 8)), _SE, r"mesh shape is empty"),
    (lambda: sharding.make_mesh((8,), (1,), "auto", _devs("cpu", 8)), TypeError,
     r"axis names must be non-empty strings.*got \(1,\)"),
    (lambda: sharding.make_mesh((8,), ("data",), "auto", []), _SE,
     r"devices is empty: mesh \{'data': 8\} needs 8; pass mesh_devices\(8\)"),
    (lambda: sharding.make_mesh((8,), ("data",), "auto", 8), TypeError,
     r"devices must be a list of JAX devices .*got 8"),
    (lambda: sharding.make_mesh((8,), ("data",), "auto", _devs("cpu", 4)), _SE,
     r"needs 8 devices but 4 cpu device\(s\)"),
    (lambda: sharding.place(np.ones((8, 4)), _abstract_mesh(), ("data", None)), TypeError,
     r"spec must be a PartitionSpec from spec_of\(...\), got \('data', None\) \(tuple\); e.g. spec_of\('data', None\)"),
    (lambda: sharding.named(_abstract_mesh(), ["data"]), TypeError,
     r"spec must be a PartitionSpec.*got \['data'\] \(list\)"),
    (lambda: sharding.place([[1, 2]], _abstract_mesh(), _P("data", None)), TypeError,
     r"x \(array\) must be a numpy or jax array, got \[\[1, 2\]\] \(list\)"),
    (lambda: sharding.place(np.ones((8, 4)), None, _P("data", None)), TypeError, r"mesh must be a jax Mesh.*got None"),
    (lambda: sharding.named(_Mesh(), _P("data")), TypeError, r"mesh must be a jax Mesh.*\(_Mesh\)"),
    (lambda: sharding.named(_abstract_mesh(), _P("dta")), _SE,
     r"named: layout P\('dta',\) names mesh axis 'dta', but the mesh has axes \('data', 'model'\)"),
    (lambda: sharding.place(np.ones((8, 4)), _abstract_mesh(), _P("dta"), name="x"), _SE,
     r"x: layout P\('dta',\) names mesh axis 'dta'"),
])
def test_bad_mesh_and_layout_types(call, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        call()


def test_named_accepts_what_the_labs_pass() -> None:
    from jax.sharding import PartitionSpec

    mesh = _abstract_mesh()
    assert sharding.named(mesh, sharding.spec_of("data", None)).spec == sharding.spec_of("data", None)
    assert sharding.named(mesh, sharding.spec_of(("data", "model"))).spec == sharding.spec_of(("data", "model"))
    assert sharding.named(mesh, sharding.spec_of()).spec == sharding.spec_of()
    free = sharding.spec_of(PartitionSpec.UNCONSTRAINED, "model")  # left to the partitioner: no axis to check
    assert sharding.named(mesh, free).spec == free


def test_a_launched_steps_file_round_trips(tmp_path) -> None:
    from labkit.sharding import train_step as st

    w, g = {"wte": np.arange(6.0).reshape(2, 3)}, {"wte": np.full((2, 3), 0.5)}
    st.save_step(str(tmp_path / "s.npz"), 5.25, w, g)
    assert sorted(np.load(tmp_path / "s.npz").files) == ["grad.wte", "loss", "wte"]  # the format the lab ships
    loss, w2, g2 = st.load_step(str(tmp_path / "s.npz"))
    assert loss == 5.25 and w2.keys() == g2.keys() == {"wte"}
    np.testing.assert_array_equal(w2["wte"], w["wte"])
    np.testing.assert_array_equal(g2["wte"], g["wte"])
