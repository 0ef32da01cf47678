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
            "lab04.fp8_matmul_grad", "lab04.bf16_grad", "lab05.exported_forward"} <= names
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
