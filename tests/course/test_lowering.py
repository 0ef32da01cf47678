"""labkit.course.lowering: every registered lab function lowers for TPU and CUDA on this CPU-only machine."""

from __future__ import annotations

import pytest

from labkit.course import cli, lowering


def test_every_registered_function_lowers_for_tpu_and_cuda() -> None:
    results = lowering.lower_all(("tpu", "cuda"))
    failed = [f"{r.name} on {r.platform}: {r.error}" for r in results if not r.ok]
    assert not failed, "\n".join(failed)
    names = {r.name for r in results}
    assert {"lab00.matmul_bf16", "lab01.pallas_matmul", "lab02.gpt_forward", "lab02.gpt_train_step",
            "lab02.gpt_train_step_remat",
            "lab04.fp8_matmul_grad", "lab04.bf16_grad", "lab05.exported_forward",
            *(f"lab03.sharded_train_step_{s}" for s in ("dp", "fsdp", "tp", "dp_tp"))} <= names
    assert {r.platform for r in results if r.name == "lab01.pallas_matmul"} == {"tpu"}  # TPU-only kernel
    assert all(r.stablehlo_bytes > 0 for r in results)


def test_a_tpu_incompatible_function_is_caught() -> None:
    """Fixture: a Pallas block of (3, 5) lowers on CPU in interpret mode but not with Mosaic."""
    reg: dict[str, lowering.Lowerable] = {}

    @lowering.register("fixture.unaligned_pallas", "test", platforms=("tpu",), registry=reg)
    def _bad():  # type: ignore[no-untyped-def]
        import jax
        import jax.numpy as jnp
        from jax.experimental import pallas as pl

        def kernel(x_ref, o_ref):  # type: ignore[no-untyped-def]
            o_ref[...] = x_ref[...] * 2

        def f(x):  # type: ignore[no-untyped-def]
            spec = pl.BlockSpec((3, 5), lambda i: (i, 0))
            return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,),
                                  in_specs=[spec], out_specs=spec)(x)

        return jax.jit(f), (jax.ShapeDtypeStruct((6, 5), jnp.float32),)

    (r,) = lowering.lower_all(("tpu",), registry=reg)
    assert not r.ok and r.platform == "tpu"
    assert "divisible by 8 and 128" in r.error


def test_register_twice_and_unknown_names() -> None:
    reg: dict[str, lowering.Lowerable] = {}
    lowering.register("x", "t", registry=reg)(lambda: (None, ()))
    with pytest.raises(ValueError, match="registered twice"):
        lowering.register("x", "t", registry=reg)(lambda: (None, ()))
    with pytest.raises(ValueError, match="registered:"):
        lowering.lower_all(("tpu",), names=["nope"])


def test_parse_platforms() -> None:
    assert lowering.parse_platforms("tpu, cuda") == ("tpu", "cuda")
    with pytest.raises(ValueError, match="choose from"):
        lowering.parse_platforms("tpu,npu")


def test_cli_lower(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["lower", "lab00.matmul_bf16", "--platform", "tpu,cuda"]) == 0
    out = capsys.readouterr().out
    assert "2 lowered, 0 failed" in out
    assert cli.main(["lower", "--platform", "quantum"]) == 2


@pytest.mark.parametrize("platform", ["tpu", "cuda"])
def test_lab04_lowerings_carry_the_formats_they_teach(platform: str) -> None:
    """Lab 04's registered steps lower with the narrow types in the program, not silently upcast to fp32."""
    from jax import export

    import labkit.course.lowerables  # noqa: F401  fills the registry (lower_all does this itself)

    for name, types in (("lab04.fp8_matmul_grad", ("f8E4M3FN", "f8E5M2")), ("lab04.bf16_grad", ("bf16",))):
        fn, args = lowering.REGISTRY[name].make()
        text = export.export(fn, platforms=(platform,))(*args).mlir_module()
        missing = [t for t in types if t not in text]
        assert not missing, f"{name} on {platform}: no {missing} in the lowered program"


LAB03_SCRIPT = r"""
import json
import labkit
labkit.setup(cpu_devices=8, quiet=True)
import jax
from jax import export
from labkit.course import lowerables as L
from labkit.course.registry import REGISTRY
from labkit.sharding import layouts as S, train_step as st
cfg, out = L.lab03_config(), {}
params, (x, y) = st.init_params(cfg, seed=0), st.demo_batch(cfg, L.LAB03_BATCH)
for name in S.STRATEGIES:
    fn, args = REGISTRY[f"lab03.sharded_train_step_{name}"].make()  # laid out on an abstract 8-device mesh
    tpu = export.export(fn, platforms=("tpu",))(*args)
    step = st.build_step(cfg, name)  # the lab's own step, on 8 simulated CPU devices
    placed = step.place(params, x, y)  # the lab's arrays, as its cells place them
    p1, _, loss1 = step.fn(*placed)
    p2, _, loss2 = export.export(fn, platforms=("cpu",))(*args).call(*step.place(params, x, y))
    out[name] = {"devices": tpu.nr_devices,
                 "specs": [str(s.spec) for s in tpu.in_shardings_jax(step.mesh)],
                 "placed": [str(getattr(a.sharding, "spec", "one device")) for a in jax.tree.leaves(placed)],
                 "lab_specs": [str(step.param_specs[k]) for k in sorted(step.param_specs)],
                 "losses": [float(loss1), float(loss2)], "max_diff": st.max_abs_diff(st.to_numpy(p1), st.to_numpy(p2))}
print("RESULT" + json.dumps(out))
"""


def test_lab03_lowers_the_labs_own_sharded_steps_for_8_chips() -> None:
    """The registered Lab 03 steps are the lab's: its layouts in the TPU program, its numbers when run."""
    from tests.conftest import run_result

    out = run_result(LAB03_SCRIPT, timeout=600)
    assert sorted(out) == ["dp", "dp_tp", "fsdp", "tp"]
    for name, r in out.items():
        assert r["devices"] == 8, f"{name}: lowered for {r['devices']} devices, Lab 03's mesh has 8"
        # every input -- weights, Adam's moments, tokens -- in the layout the lab's own run gave its arrays
        assert r["specs"] == r["placed"], (name, r["placed"])
        assert r["specs"][:len(r["lab_specs"])] == r["lab_specs"], name  # params first, sorted by name
        # the program lowered on devices that need not exist computes the lab's step, bit for bit
        assert r["losses"][0] == r["losses"][1] and r["max_diff"] == 0.0, (name, r["losses"], r["max_diff"])
    assert any("'data'" in s for s in out["fsdp"]["lab_specs"]) and any("'model'" in s for s in out["tp"]["lab_specs"])
    assert not any("'" in s for s in out["dp"]["lab_specs"])  # dp replicates every weight


def test_lab03_lowers_the_shapes_the_lab_runs(root) -> None:
    """lowerables' copy of Lab 03's smoke sizes matches the notebook's (it cannot import a notebook cell)."""
    from labkit.course.lowerables import LAB03_BATCH, LAB03_DEVICES, lab03_config

    c, text = lab03_config(), (root / "labs" / "03_gspmd_sharding.ipynb").read_text()
    smoke = (f'\\"smoke\\": Sizes(GPTConfig(vocab_size={c.vocab_size}, seq_len={c.seq_len}, n_layer={c.n_layer}, '
             f'n_head={c.n_head}, d_model={c.d_model}), batch={LAB03_BATCH},')
    assert smoke in text and f"n_devices={LAB03_DEVICES}, repeats=3" in text, "Lab 03's smoke sizes changed: update lowerables"


def test_abstract_args_refuse_a_batch_the_mesh_cannot_split() -> None:
    from labkit.course.lowerables import lab03_config
    from labkit.sharding import layouts, train_step

    step = train_step.build_step(lab03_config(), "dp", mesh=layouts.abstract_mesh("dp", 8))  # no devices needed
    not_split = r"'tokens x' dim 0 \(size 12\) is not divisible by mesh axis 'data' \(size 8\)"
    with pytest.raises(layouts.ShardingError, match=not_split):
        step.abstract_args(12)
    with pytest.raises(ValueError, match="batch"):
        step.abstract_args(0)
    for run in (lambda: step.place({}, None, None), lambda: step.compile()):  # no devices to hold or run it
        with pytest.raises(layouts.ShardingError, match=r"abstract mesh \{'data': 8\} \(no devices\).*jax.export"):
            run()
    with pytest.raises(layouts.ShardingError, match="model axis 3 does not divide 8 devices"):
        layouts.abstract_mesh("dp_tp", 8, model=3)
