"""labkit.export.bundle: every bad input refused with the file named, nothing half-loaded; signatures (Lab 05)."""

from __future__ import annotations

import os
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flax import nnx

from labkit.export import bundle, publish, routes
from labkit.export.bundle import BundleError
from labkit.gpt.config import get_config
from labkit.gpt.convert import flat_params_numpy
from labkit.gpt.flax_model import FlaxGPT
from labkit.gpt.torch_model import TorchGPT
from tests.export.bundle_cases import BAD, DEEP, W, P, _cut, _rehash

CFG = get_config("test")  # n_head=2, d_model=32
CFG4 = get_config("test", n_head=4)  # same tensor shapes as CFG, another model
SK, PK = publish.new_ed25519_key()


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bundles")
    routes.save_bundle(FlaxGPT(CFG, rngs=nnx.Rngs(0)), d / "good", key=SK)
    routes.save_bundle(FlaxGPT(CFG4, rngs=nnx.Rngs(1)), d / "nhead4")
    return {"good": d / "good", "nhead4": d / "nhead4"}


@pytest.fixture
def good(made: dict[str, Path], tmp_path: Path) -> Path:
    return Path(shutil.copytree(made["good"], tmp_path / "gpt"))


def _targets() -> list[Any]:
    return [TorchGPT(CFG), FlaxGPT(CFG, rngs=nnx.Rngs(3))]


def _refused(root: Path, match: str, key: Any = None) -> None:
    for model in _targets():
        before = flat_params_numpy(model)
        with pytest.raises(BundleError, match=match):
            routes.load_bundle(root, model, key=key)
        after = flat_params_numpy(model)
        assert all(np.array_equal(before[k], after[k]) for k in before), "a refused load changed the model"


@pytest.mark.parametrize("case", list(BAD))
def test_bad_bundle_refused_with_file_named_and_nothing_loaded(case: str, good: Path) -> None:
    make, match = BAD[case]
    make(good)
    if match is None:  # the digests agree: only a signature can refuse this one
        routes.load_bundle(good, TorchGPT(CFG))
    else:
        _refused(good, match)
    _refused(good, r"gpt/bundle.json: the signature does not match|" + (match or "^$"), key=PK)


def test_oversized_file_refused_before_it_is_read(good: Path) -> None:
    os.truncate(good / W, 600 * 2**20)  # the size in the manifest refuses it: its 600 MB are never read
    tracemalloc.start()
    try:
        with pytest.raises(BundleError, match=rf"gpt/{W}: 629145600 bytes"):
            bundle.verify(good)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, f"refusing took {peak / 2**20:.0f} MiB: the file was read"


def test_deeply_nested_signature_refused(good: Path) -> None:
    (good / bundle.SIGNATURE).write_text(DEEP)
    _refused(good, r"gpt/bundle.sig: not a labkit signature file \(nested too deeply", key=PK)


def test_a_missing_or_empty_path_says_so(tmp_path: Path) -> None:
    with pytest.raises(bundle.BundleError, match=r"^no bundle path given: pass the bundle's folder"):
        bundle.verify("")
    with pytest.raises(bundle.BundleError, match=r"nope: no such file or folder; pass the bundle's folder"):
        bundle.verify(tmp_path / "nope")
    with pytest.raises(bundle.BundleError, match=r"empty/bundle.json: no bundle here"):
        bundle.verify(Path(tmp_path / "empty").mkdir() or tmp_path / "empty")  # a folder, but no manifest


def test_good_bundle_loads_and_summarises(good: Path) -> None:
    v = bundle.verify(good, PK)
    assert v.signature == "ed25519" and bundle.verify(good).signature == "unchecked (no key given)"
    assert v.summary().startswith("OK gpt: GPT 2x32 (n_head 2), 20 tensors, forward [cpu/cuda/tpu]")
    exp = v.program("forward")
    assert exp.fun_name == bundle.program_tag(v.manifest["config"], "forward")
    model, _ = routes.load_bundle(good, TorchGPT(CFG), key=PK)
    flat, loaded = v.tensors(), flat_params_numpy(model)
    assert flat.keys() == loaded.keys() and all(np.array_equal(flat[k], loaded[k]) for k in flat)


def test_program_for_another_config_refused(good: Path, made: dict[str, Path]) -> None:
    # n_head=4's program, same tensor shapes, dropped in and re-digested: its own name gives it away.
    shutil.copy(made["nhead4"] / P, good / P)
    _rehash(good)
    v = bundle.verify(good)
    with pytest.raises(BundleError, match=rf"gpt/{P}: exported as 'gpt_forward_cfg.*different model config"):
        v.program("forward")
    with pytest.raises(BundleError, match="no program 'step'"):
        v.program("step")


def test_a_program_exported_with_safety_checks_off_is_refused(good: Path) -> None:
    """The platform check switched off at export: the program would run on a platform it was not lowered for."""
    import jax

    from labkit.export import stablehlo

    fn = stablehlo._tagged(stablehlo.forward_fn(CFG), CFG, "forward")  # the right config tag: only the checks differ
    b, t = jax.export.symbolic_shape("b, t", constraints=(f"t <= {CFG.seq_len}",))
    exp = jax.export.export(jax.jit(fn), platforms=["cpu", "cuda", "tpu"],
                            disabled_checks=[jax.export.DisabledSafetyCheck.platform()])(
        stablehlo.weight_specs(CFG), jax.ShapeDtypeStruct((b, t), np.int32))
    assert stablehlo.artifact_facts(exp)["disabled_safety_checks"] == ["platform"]
    (good / P).write_bytes(exp.serialize())
    _rehash(good)
    with pytest.raises(BundleError, match=rf"gpt/{P}: checks disabled at export \['platform'\]"):
        bundle.verify(good).program("forward")


def test_artifact_facts_of_a_program_this_course_exports(good: Path) -> None:
    import jax

    facts = routes.artifact_facts(bundle.verify(good).program("forward"))
    assert facts["platforms"] == ["cpu", "cuda", "tpu"] and facts["devices"] == 1
    assert facts["disabled_safety_checks"] == [] and facts["custom_calls"] == ["shape_assertion"]  # symbolic shapes
    lo, hi = facts["calling_conventions_supported_here"]
    assert (lo, hi) == (jax.export.minimum_supported_calling_convention_version,
                        jax.export.maximum_supported_calling_convention_version) and lo <= facts["calling_convention"] <= hi
    assert [int(x) for x in facts["stablehlo"].split(".")][0] >= 1  # e.g. "1.15.0", read from the serialized module
    m = bundle.verify(good).manifest["exported_with"]  # and the manifest records them for a reader without jax
    assert (m["stablehlo"], m["calling_convention"]) == (facts["stablehlo"], facts["calling_convention"])


def test_weights_for_another_config_refused(good: Path, made: dict[str, Path]) -> None:
    shutil.copy(made["nhead4"] / W, good / W)
    _refused(good, rf"gpt/{W}: SHA-256")  # a file from another bundle
    _rehash(good)
    _refused(good, rf"gpt/{W}: written for another model config; .*'n_head': \(4, 2\)")


def test_consistent_but_broken_artifact_is_a_bundle_error(good: Path) -> None:
    _cut(good / P, 300)  # today jax.export.deserialize raises a raw struct.error here
    _rehash(good)
    with pytest.raises(BundleError, match=rf"gpt/{P}: not a jax.export artifact .*struct.error|error"):
        bundle.verify(good).program("forward")


def test_signatures_hmac_wrong_key_and_algorithm(good: Path, tmp_path: Path) -> None:
    secret = b"a-shared-secret-of-32-bytes-long"
    publish.sign(good, secret)
    assert bundle.verify(good, secret).signature == "hmac-sha256"
    with pytest.raises(BundleError, match="the signature does not match"):
        bundle.verify(good, b"another-secret-of-32-bytes-long!")
    with pytest.raises(BundleError, match="signed with hmac-sha256, but the key given is for ed25519"):
        bundle.verify(good, PK)  # the verifier's key picks the algorithm, never the bundle
    (good / bundle.SIGNATURE).unlink()
    with pytest.raises(BundleError, match="bundle.sig: missing, but a key was given"):
        bundle.verify(good, secret)
    publish.sign(good, SK)
    # An OpenSSH public key file is not a PEM: it reads as an HMAC secret, and the refusal says so and how to convert
    (tmp_path / "id.pub").write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB3xZz user@host\n")
    with pytest.raises(BundleError, match=r"signed with ed25519, but key file id\.pub is for hmac-sha256; it is not a "
                                          r"PEM, so it was read as an HMAC secret: .*ssh-keygen -e -m PKCS8"):
        bundle.verify(good, tmp_path / "id.pub")
    other_pk = publish.new_ed25519_key()[1]
    with pytest.raises(BundleError, match="the signature does not match"):
        bundle.verify(good, other_pk)
    (tmp_path / "pub.pem").write_bytes(PK)
    assert bundle.verify(good, tmp_path / "pub.pem").signature == "ed25519"  # a key file works too
    with pytest.raises(BundleError, match="at least 16 bytes"):
        bundle.verify(good, b"short")


def test_a_str_key_is_a_file_path_never_a_secret(good: Path, tmp_path: Path) -> None:
    sig = (good / bundle.SIGNATURE).read_bytes()
    typo = str(tmp_path / "sk_typo.pem")  # once silently used as an HMAC secret anyone could guess
    for call in (lambda: publish.sign(good, typo), lambda: bundle.verify(good, typo)):
        with pytest.raises(BundleError, match=rf"key file '{typo}' does not exist: pass the path"):
            call()
    with pytest.raises(BundleError, match="is a folder"):
        publish.sign(good, tmp_path)
    with pytest.raises(BundleError, match="a PEM key given as str: pass it as bytes"):
        publish.sign(good, SK.decode())
    with pytest.raises(BundleError, match=r"key must be bytes .*got int 12345"):
        publish.sign(good, 12345)
    (tmp_path / "k1").write_bytes(b"k")
    with pytest.raises(BundleError, match="key file k1: an HMAC secret must be at least 16 bytes, got 1"):
        publish.sign(good, tmp_path / "k1")
    assert (good / bundle.SIGNATURE).read_bytes() == sig  # no refused key wrote a signature
    (tmp_path / "secret").write_bytes(b"a-shared-secret-of-32-bytes-long")
    publish.sign(good, str(tmp_path / "secret"))  # a secret *file*, by str path, is the way to pass one
    assert bundle.verify(good, b"a-shared-secret-of-32-bytes-long").signature == "hmac-sha256"


def test_rewriting_a_bundle_drops_its_old_signature(good: Path) -> None:
    routes.save_bundle(FlaxGPT(CFG, rngs=nnx.Rngs(9)), good)
    assert not (good / bundle.SIGNATURE).exists() and bundle.verify(good).signature == "none"


def test_parse_safetensors_structure_checks() -> None:
    from safetensors.numpy import save

    data = save({"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(2, np.int32)})
    index, meta, start = bundle.parse_safetensors(data, "x.safetensors")
    flat = bundle.tensors_from(data, index)
    assert np.array_equal(flat["a"], np.arange(6).reshape(2, 3)) and flat["b"].dtype == np.int32
    for bad, match in ((data[:7], "too short"), (data + b"\0", "1 trailing bytes"), (data[:-4], "4 bytes missing"),
                       (b"\x04" + b"\0" * 7 + b"[1,]", "not JSON"), (b"\x02" + b"\0" * 7 + b"[]", "not an object")):
        with pytest.raises(BundleError, match=rf"x.safetensors: .*{match}"):
            bundle.parse_safetensors(bad, "x.safetensors")


def test_a_program_calling_a_target_off_the_allowlist_is_refused(good: Path) -> None:
    """A custom call JAX guarantees (so no check is disabled) but the loader does not allow: refused by name."""
    import jax
    import jax.numpy as jnp

    from labkit.export import stablehlo
    from tests.export.bundle_cases import _edit

    fwd = stablehlo.forward_fn(CFG)

    def fn(flat: dict[str, Any], tokens: Any) -> Any:  # the forward pass plus a LAPACK call (QR) on the CPU
        return fwd(flat, tokens) + 0 * jnp.linalg.qr(flat["wte.weight"][:4, :4])[0].sum()

    b, t = jax.export.symbolic_shape("b, t", constraints=(f"t <= {CFG.seq_len}",))
    exp = jax.export.export(jax.jit(stablehlo._tagged(fn, CFG, "forward")), platforms=["cpu"])(
        stablehlo.weight_specs(CFG), jax.ShapeDtypeStruct((b, t), np.int32))
    extra = set(stablehlo.artifact_facts(exp)["custom_calls"]) - bundle.ALLOWED_CUSTOM_CALLS
    assert extra and not exp.disabled_safety_checks  # nothing in the file's own fields gives it away
    (good / P).write_bytes(exp.serialize())
    _edit(good, lambda m: m["programs"]["forward"].update(platforms=["cpu"]))
    _rehash(good)
    with pytest.raises(BundleError, match=rf"gpt/{P}: calls custom-call target\(s\) \['{sorted(extra)[0]}'"):
        bundle.verify(good).program("forward")
    bundle.verify(good).program("forward", allow=bundle.ALLOWED_CUSTOM_CALLS | extra)  # a deployment's own list


def test_the_course_programs_pass_the_allowlist(tmp_path: Path) -> None:
    from labkit.export import reference

    routes.save_bundle(FlaxGPT(CFG, rngs=nnx.Rngs(0)), tmp_path / "b", programs=("forward", "step"))
    v = bundle.verify(tmp_path / "b")
    for name in ("forward", "step"):
        assert set(routes.artifact_facts(v.program(name))["custom_calls"]) <= bundle.ALLOWED_CUSTOM_CALLS
    bundle.verify(reference.load_reference().bundle).program("forward")  # the shipped reference's program


def test_a_pinned_name_and_version_refuse_substitution_and_rollback(tmp_path: Path) -> None:
    """The signature binds the manifest; only a pinned identity tells two bundles of one key apart."""
    model = FlaxGPT(CFG, rngs=nnx.Rngs(0))
    for name, version in (("lab05-gpt", "2"), ("lab05-gpt", "1"), ("other-gpt", "2")):
        routes.save_bundle(model, tmp_path / f"{name}-{version}", key=SK, name=name, version=version)
    routes.save_bundle(model, tmp_path / "unnamed", key=SK)
    pin = {"name": "lab05-gpt", "version": "2"}
    v = bundle.verify(tmp_path / "lab05-gpt-2", PK, expected=pin)
    assert v.manifest["name"] == "lab05-gpt" and v.summary().startswith("OK lab05-gpt-2 (lab05-gpt 2): GPT")
    for other, match in (("other-gpt-2", "name is 'other-gpt'"), ("lab05-gpt-1", "version is '1'"),
                         ("unnamed", "name is missing")):
        assert bundle.verify(tmp_path / other, PK).signature == "ed25519"  # same key: the signature alone passes
        with pytest.raises(BundleError, match=rf"{other}/bundle.json: {match}, the server expects"):
            routes.load_bundle(tmp_path / other, TorchGPT(CFG), key=PK, expected=pin)
    for bad in ({}, {"model": "x"}, "lab05-gpt"):
        with pytest.raises(BundleError, match="expected must map some of"):
            bundle.verify(tmp_path / "lab05-gpt-2", PK, expected=bad)


def test_a_quoted_target_name_is_read_and_refused(tmp_path: Path) -> None:
    """A hand-made file: an FFI call named `weird-name` (MLIR prints it quoted), its disabled check left out."""
    import dataclasses
    from dataclasses import asdict

    import jax
    import jax.numpy as jnp

    from labkit.export import weights
    from labkit.export.manifest import program_tag

    def fn(x: Any) -> Any:
        return jax.ffi.ffi_call("weird-name", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    fn.__name__ = fn.__qualname__ = program_tag(asdict(CFG), "forward")  # the tag the loader checks
    exp = jax.export.export(jax.jit(fn), platforms=("cpu",),
                            disabled_checks=[jax.export.DisabledSafetyCheck.custom_call("weird-name")])(
        jax.ShapeDtypeStruct((2,), jnp.float32))
    hand = dataclasses.replace(exp, disabled_safety_checks=())  # nothing in the file's own fields gives it away
    assert '@"weird-name"' in hand.mlir_module()  # the form the old scan, custom_call @([\w.$-]+), did not see
    data, _ = weights.weights_bytes(TorchGPT(CFG))
    publish.write(tmp_path / "b", asdict(CFG), data, {"forward": (hand.serialize(), ["cpu"])})
    with pytest.raises(BundleError, match=r"b/forward\.jaxexport: calls custom-call target\(s\) \['weird-name'\]"):
        bundle.verify(tmp_path / "b").program("forward")
