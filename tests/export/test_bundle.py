"""labkit.export.bundle: every bad input refused with the file named, nothing half-loaded; signatures (Lab 05)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from flax import nnx

from labkit.export import bundle, publish, routes
from labkit.export.bundle import BundleError
from labkit.gpt.config import get_config
from labkit.gpt.convert import flat_params_numpy
from labkit.gpt.flax_model import FlaxGPT
from labkit.gpt.torch_model import TorchGPT

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


def _manifest(root: Path) -> dict[str, Any]:
    return json.loads((root / bundle.MANIFEST).read_text())


def _rehash(root: Path) -> None:
    """What an editor with write access does: recompute every digest so the manifest matches the files."""
    m = _manifest(root)
    for entry in [m["weights"], *m["programs"].values()]:
        data = (root / entry["file"]).read_bytes()
        entry["bytes"], entry["sha256"] = len(data), bundle.sha256(data)
    data = (root / bundle.WEIGHTS).read_bytes()
    try:
        index, _, _ = bundle.parse_safetensors(data, "w")
    except BundleError:  # a broken file: keep the old tensor list
        index = {}
    if index:
        m["weights"]["tensors"] = [[n, dt, list(s), bundle.sha256(data[b:e])] for n, (dt, s, b, e) in index.items()]
    (root / bundle.MANIFEST).write_text(json.dumps(m))


def _edit(root: Path, fn: Callable[[dict[str, Any]], Any]) -> None:
    m = _manifest(root)
    fn(m)  # edits in place
    (root / bundle.MANIFEST).write_text(json.dumps(m))


def _flip(path: Path, offset: int = -7) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x10
    path.write_bytes(raw)


def _append(path: Path, extra: bytes) -> None:
    path.write_bytes(path.read_bytes() + extra)


def _cut(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def _huge_header(path: Path) -> None:
    raw = path.read_bytes()
    path.write_bytes(struct.pack("<Q", 2**62) + raw[8:])


def _header(path: Path, fn: Callable[[dict[str, Any]], Any]) -> None:
    """Rewrite a safetensors file's JSON header, edited in place by fn; the tensor bytes stay."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    fn(header)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def _entry(path: Path, key: str, fn: Callable[[list[int]], list[Any]]) -> None:
    """Rewrite `key` ("shape" or "data_offsets") of the header's first 1-D tensor with fn."""
    def edit(h: dict[str, Any]) -> None:
        t = next(t for k, t in h.items() if k != "__metadata__" and len(t["shape"]) == 1)
        t[key] = fn(t[key])
    _header(path, edit)


def _weights_config(path: Path, config: Any) -> None:
    """Replace the config in the weights' own labkit_manifest (safetensors metadata)."""
    def edit(h: dict[str, Any]) -> None:
        h["__metadata__"]["labkit_manifest"] = json.dumps({**json.loads(h["__metadata__"]["labkit_manifest"]),
                                                           "config": config})
    _header(path, edit)


def _link_outside(path: Path) -> None:
    """Move a file out of the bundle and leave a symbolic link to it: same bytes, same digest."""
    target = path.parent.parent / f"outside-{path.name}"
    shutil.move(path, target)
    path.symlink_to(target)


W, P = bundle.WEIGHTS, "forward.jaxexport"
DEEP = "[" * 100_000 + "]" * 100_000  # valid JSON that once overflowed json's recursion: RecursionError
MALFORMED = rf"gpt/{W}: malformed header entry for tensor '[\w.]+': .*"
TENSOR_ENTRY = r"weights.tensors\[0\] must be \[name, dtype, shape, sha256\]"
BAD: dict[str, tuple[Callable[[Path], Any], str]] = {
    "weights one flipped bit": (lambda r: _flip(r / W), rf"gpt/{W}: SHA-256 .* does not match"),
    "artifact 700 trailing bytes": (lambda r: _append(r / P, b"\x07" * 700), rf"gpt/{P}: .*has trailing bytes"),
    "artifact truncated": (lambda r: _cut(r / P, 200), rf"gpt/{P}: 200 bytes.*truncated"),
    "artifact empty": (lambda r: _cut(r / P, 0), rf"gpt/{P}: 0 bytes.*empty"),
    "artifact missing": (lambda r: (r / P).unlink(), rf"gpt/{P}: listed in the manifest but missing"),
    "weights truncated": (lambda r: _cut(r / W, 5000), rf"gpt/{W}: 5000 bytes.*truncated"),
    "weights trailing zeros": (lambda r: _append(r / W, b"\0" * 64), rf"gpt/{W}: .*trailing bytes"),
    "manifest without tensors": (lambda r: _edit(r, lambda m: m["weights"].pop("tensors")),
                                 r"gpt/bundle.json: field 'weights.tensors' is missing"),
    "manifest without sha256": (lambda r: _edit(r, lambda m: m["weights"].pop("sha256")),
                                r"gpt/bundle.json: field 'weights.sha256' is missing"),
    "manifest without config": (lambda r: _edit(r, lambda m: m.pop("config")),
                                r"gpt/bundle.json: field 'config' is missing"),
    "manifest is a list": (lambda r: (r / bundle.MANIFEST).write_text(json.dumps([_manifest(r)])), r"gpt/bundle.json: the manifest is a JSON list"),
    "manifest not JSON": (lambda r: (r / bundle.MANIFEST).write_bytes(b"{oops"), r"gpt/bundle.json: not valid JSON"),
    "no manifest": (lambda r: (r / bundle.MANIFEST).unlink(), r"gpt/bundle.json: no bundle here"),
    "other version": (lambda r: _edit(r, lambda m: m.update(bundle_version=9)), r"bundle_version 9"),
    "file outside the bundle": (lambda r: _edit(r, lambda m: m["weights"].update(file="../w.safetensors")),
                                r"file '../w.safetensors' is not a plain file name"),
    "tensor entry too short": (lambda r: _edit(r, lambda m: m["weights"]["tensors"].__setitem__(0, ["x"])),
                               rf"gpt/bundle.json: {TENSOR_ENTRY}, got \['x'\]"),
    "tensor entry a number": (lambda r: _edit(r, lambda m: m["weights"].update(tensors=[5])),
                              rf"gpt/bundle.json: {TENSOR_ENTRY}, got 5"),
    "platforms not names": (lambda r: _edit(r, lambda m: m["programs"]["forward"].update(platforms=[1])),
                            r"gpt/bundle.json: programs.forward.platforms must list platform names"),
    "config edited": (lambda r: _edit(r, lambda m: m["config"].update(n_head=4)),
                      r"config_sha256 does not match the config"),
    # Consistent digests, bad contents: the structure checks behind the digests still refuse them.
    "weights truncated, digests recomputed": (lambda r: (_cut(r / W, 5000), _rehash(r)),
                                              rf"gpt/{W}: .*bytes missing \(truncated\)"),
    "weights huge header, digests recomputed": (lambda r: (_huge_header(r / W), _rehash(r)),
                                                rf"gpt/{W}: header length 4611686018427387904 bytes does not fit"),
    "tensor edited, digests recomputed": (lambda r: (_flip(r / W), _rehash(r)), None),  # integrity cannot tell
    # An audit's inputs: each once escaped as a raw Python error, was read in full, or was accepted.
    "programs a list": (lambda r: _edit(r, lambda m: m.update(programs=[1])),
                        r"gpt/bundle.json: field 'programs' is a list, expected a dict"),
    "weights a list": (lambda r: _edit(r, lambda m: m.update(weights=[1])),
                       r"gpt/bundle.json: field 'weights' is a list, expected a dict"),
    "byte count a bool": (lambda r: _edit(r, lambda m: m["weights"].update(bytes=True)),
                          r"gpt/bundle.json: field 'weights.bytes' is a bool, expected a int"),
    "manifest nested 100000 deep": (lambda r: (r / bundle.MANIFEST).write_text(DEEP),
                                    r"gpt/bundle.json: not valid JSON \(nested too deeply"),
    "offsets strings, digests recomputed": (lambda r: (_entry(r / W, "data_offsets", lambda o: list(map(str, o))),
                                                       _rehash(r)), MALFORMED + r"\['\d+', '\d+'\]"),
    "offsets floats, digests recomputed": (lambda r: (_entry(r / W, "data_offsets", lambda o: list(map(float, o))),
                                                      _rehash(r)), MALFORMED + r"\[\d+\.0, \d+\.0\]"),
    "shape strings, digests recomputed": (lambda r: (_entry(r / W, "shape", lambda s: list(map(str, s))), _rehash(r)),
                                          MALFORMED + r"'shape': \['\d+'\]"),
    "shape with a bool, digests recomputed": (lambda r: (_entry(r / W, "shape", lambda s: [*s, True]), _rehash(r)),
                                              MALFORMED + r"'shape': \[\d+, True\]"),
    "weights header nested 50000 deep, digests recomputed": (
        lambda r: ((r / W).write_bytes(struct.pack("<Q", 250_000) + b'{"a":' * 50_000), _rehash(r)),
        rf"gpt/{W}: the safetensors header is not JSON \(nested too deeply"),
    "weights manifest config a list, digests recomputed": (lambda r: (_weights_config(r / W, [1, 2]), _rehash(r)),
                                                           rf"gpt/{W}: no labkit weights manifest with a config"),
    "weights grown to 600 MB": (lambda r: os.truncate(r / W, 600 * 2**20),  # sparse: no disk used
                                rf"gpt/{W}: 629145600 bytes, the manifest says \d+ \(has trailing bytes\)"),
    "weights a link to a copy outside": (lambda r: _link_outside(r / W), rf"gpt/{W}: a symbolic link"),
    "weights a folder": (lambda r: ((r / W).unlink(), (r / W).mkdir()), rf"gpt/{W}: is a folder, not a file"),
}


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
