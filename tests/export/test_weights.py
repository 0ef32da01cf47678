"""labkit.export.weights: bit-exact Flax <-> safetensors <-> torch, and every bad file refused untouched."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import torch
from flax import nnx
from safetensors.numpy import save_file

from labkit.export import bundle, weights
from labkit.gpt.flax_model import FlaxGPT
from labkit.gpt.torch_model import TorchGPT
from labkit.gpt.convert import flat_params_numpy
from labkit.gpt.config import get_config, param_shapes
from labkit.export.weights import MANIFEST_KEY, WeightsError

CFG = get_config("test")


@pytest.fixture(scope="module")
def flax_model() -> FlaxGPT:
    return FlaxGPT(CFG, rngs=nnx.Rngs(0))


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory, flax_model: FlaxGPT) -> Path:
    p = tmp_path_factory.mktemp("w") / "gpt.safetensors"
    weights.save_weights(flax_model, p)
    return p


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_round_trip_flax_torch_flax_is_bit_exact(tmp_path: Path, flax_model: FlaxGPT, good: Path) -> None:
    tm = weights.load_weights(good, TorchGPT(CFG))
    m2 = weights.save_weights(tm, tmp_path / "from_torch.safetensors")
    back = weights.load_weights(tmp_path / "from_torch.safetensors", FlaxGPT(CFG, rngs=nnx.Rngs(5)))
    ref = flat_params_numpy(flax_model)
    assert _same(ref, flat_params_numpy(tm)) and _same(ref, flat_params_numpy(back))
    assert m2["sha256"] == weights.read_manifest(good)["sha256"]  # same tensors, same hash
    assert m2["source"] == "torch" and weights.read_manifest(good)["source"] == "flax"


def test_manifest_contents(good: Path, flax_model: FlaxGPT) -> None:
    m = weights.read_manifest(good)
    assert m["format"] == weights.FORMAT and m["manifest_version"] == weights.MANIFEST_VERSION
    assert m["config"]["d_model"] == CFG.d_model and m["config"]["n_layer"] == CFG.n_layer
    assert [t[0] for t in m["tensors"]] == list(param_shapes(CFG))  # canonical order
    assert all(t[1] == "float32" and tuple(t[2]) == param_shapes(CFG)[t[0]] for t in m["tensors"])
    assert m["sha256"] == weights.content_hash(flat_params_numpy(flax_model), list(param_shapes(CFG)), m["config"])
    assert m["sha256"] != weights.content_hash(flat_params_numpy(flax_model), list(param_shapes(CFG)))  # config counts
    assert m["frameworks"]["jax"] and m["frameworks"]["torch"] and m["frameworks"]["safetensors"]


def test_hash_covers_names_and_values() -> None:
    flat = {"a": np.zeros(3, np.float32), "b": np.ones(2, np.float32)}
    h = weights.content_hash(flat, ["a", "b"])
    assert h != weights.content_hash(flat, ["b", "a"])
    assert h != weights.content_hash({"a": flat["a"], "b": np.ones(2, np.float32) * 1.0000001}, ["a", "b"])
    assert h != weights.content_hash({"a": np.zeros((3, 1), np.float32), "b": flat["b"]}, ["a", "b"])


def test_torch_state_dict_and_save_suffix(tmp_path: Path, good: Path) -> None:
    sd = weights.load_torch_state_dict(good, CFG)
    TorchGPT(CFG).load_state_dict(sd, strict=True)
    with pytest.raises(WeightsError, match="safetensors"):
        weights.save_weights(TorchGPT(CFG), tmp_path / "model.pt")


# ---------------------------------------------------------------- refusals


def _write(path: Path, flat: dict[str, np.ndarray], manifest: dict[str, Any] | None) -> Path:
    save_file(flat, str(path), metadata={MANIFEST_KEY: json.dumps(manifest)} if manifest is not None else None)
    return path


def _parts(good: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    flat, manifest = weights.read_weights(good)
    return dict(flat), json.loads(json.dumps(manifest))


def _missing(flat: dict, m: dict) -> tuple[dict, dict]:
    flat.pop("ln_f.bias")
    m["tensors"] = [t for t in m["tensors"] if t[0] != "ln_f.bias"]
    return flat, m


def _unexpected(flat: dict, m: dict) -> tuple[dict, dict]:
    flat["head.weight"] = np.zeros((4, 4), np.float32)
    m["tensors"].append(["head.weight", "float32", [4, 4]])
    return flat, m


def _shape(flat: dict, m: dict) -> tuple[dict, dict]:
    flat["wpe.weight"] = flat["wpe.weight"][:-1].copy()
    m["tensors"] = [[n, d, list(flat[n].shape)] for n, d, _ in m["tensors"]]
    return flat, m


def _dtype(flat: dict, m: dict) -> tuple[dict, dict]:
    flat["wte.weight"] = flat["wte.weight"].astype(np.float16)
    m["tensors"] = [[n, flat[n].dtype.name, s] for n, _, s in m["tensors"]]
    return flat, m


def _manifest_lies(flat: dict, m: dict) -> tuple[dict, dict]:
    m["tensors"] = [[n, d, [s[1], s[0]] if n == "wte.weight" else s] for n, d, s in m["tensors"]]
    return flat, m


def _version(flat: dict, m: dict) -> tuple[dict, dict]:
    m["manifest_version"] = 99
    return flat, m


def _hash(flat: dict, m: dict) -> tuple[dict, dict]:
    flat["blocks.1.mlp.fc.weight"] = flat["blocks.1.mlp.fc.weight"].copy()
    flat["blocks.1.mlp.fc.weight"][3, 4] += 1e-3  # a consistent-looking file with changed values
    return flat, m


def _config(flat: dict, m: dict) -> tuple[dict, dict]:
    m["config"]["seq_len"] = CFG.seq_len * 2
    return flat, m


def _format(flat: dict, m: dict) -> tuple[dict, dict]:
    m["format"] = "someone.elses.format"
    return flat, m


BAD: dict[str, tuple[Callable[[dict, dict], tuple[dict, dict]], str]] = {
    "missing key": (_missing, r"missing 1 key\(s\): \['ln_f.bias'\]"),
    "unexpected key": (_unexpected, r"unexpected key\(s\): \['head.weight'\]"),
    "wrong shape": (_shape, r"wpe.weight has shape \(31, 32\), expected \(32, 32\)"),
    "wrong dtype": (_dtype, r"wte.weight has dtype float16, expected float32"),
    "manifest does not describe file": (_manifest_lies, r"the manifest: wte.weight has shape \(32, 256\)"),
    "unsupported version": (_version, r"unsupported manifest_version 99"),
    "hash mismatch": (_hash, r"content hash mismatch"),
    "other config": (_config, r"different model.*seq_len"),
    "foreign format": (_format, r"manifest format 'someone.elses.format'"),
}


@pytest.fixture(params=["torch", "flax"])
def target(request: pytest.FixtureRequest) -> Any:
    return TorchGPT(CFG) if request.param == "torch" else FlaxGPT(CFG, rngs=nnx.Rngs(3))


@pytest.fixture
def no_torch_load(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: Any, **k: Any) -> None:
        raise AssertionError("torch.load must not be called when loading weights")
    monkeypatch.setattr(torch, "load", boom)
    monkeypatch.setattr(pickle, "load", boom)
    monkeypatch.setattr(pickle, "loads", boom)


def _refused(path: Path, model: Any, match: str) -> None:
    before = flat_params_numpy(model)
    with pytest.raises(WeightsError, match=match):
        weights.load_weights(path, model)
    assert _same(before, flat_params_numpy(model)), "a refused load changed the model"


@pytest.mark.parametrize("case", list(BAD))
def test_mismatch_refused_and_nothing_loaded(case: str, tmp_path: Path, good: Path, target: Any,
                                            no_torch_load: None) -> None:
    make, match = BAD[case]
    flat, m = make(*_parts(good))
    _refused(_write(tmp_path / "bad.safetensors", flat, m), target, match)


def test_tampered_file_bytes_caught_by_hash(tmp_path: Path, good: Path, target: Any) -> None:
    raw = bytearray(good.read_bytes())
    raw[-7] ^= 0x10  # one bit of the last tensor's data
    bad = tmp_path / "tampered.safetensors"
    bad.write_bytes(raw)
    _refused(bad, target, "content hash mismatch")


@pytest.mark.parametrize("field, value", [("n_head", 4), ("ln_eps", 1e-4)])  # dropout must be 0: refused anyway
def test_a_config_edit_the_shapes_do_not_show_is_caught_by_the_hash(tmp_path: Path, good: Path, field: str,
                                                                   value: Any) -> None:
    """n_head 2 -> 4 (same tensors) or an ln_eps edit: the hash covers the config, so each is refused."""
    import dataclasses

    flat, m = _parts(good)
    m["config"][field] = value  # the manifest's sha256 left as written: what an editor of the header does
    bad = _write(tmp_path / "edited.safetensors", flat, m)
    with pytest.raises(WeightsError, match="content hash mismatch"):
        weights.read_weights(bad)  # no model to compare with: `labkit verify FILE` takes this path
    _refused(bad, TorchGPT(dataclasses.replace(CFG, **{field: value})), "content hash mismatch")


def test_a_version_1_file_is_refused_with_the_reason(tmp_path: Path, good: Path) -> None:
    flat, m = _parts(good)
    m["manifest_version"] = 1
    with pytest.raises(WeightsError, match=r"manifest_version 1 \(version 1 hashed the tensors but not the config\)"
                                           r".*re-export the weights"):
        weights.read_weights(_write(tmp_path / "v1.safetensors", flat, m))


def test_file_without_manifest_or_not_safetensors(tmp_path: Path, good: Path, target: Any) -> None:
    flat, _ = _parts(good)
    _refused(_write(tmp_path / "plain.safetensors", flat, None), target, "has no labkit manifest")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all")
    _refused(junk, target, "not a safetensors file")
    _refused(tmp_path / "absent.safetensors", target, "no weights file")


def test_pickles_refused_without_unpickling(tmp_path: Path, target: Any, no_torch_load: None) -> None:
    sd = {k: torch.zeros(v) for k, v in param_shapes(CFG).items()}
    pt = tmp_path / "model.pt"
    torch.save(sd, pt)  # the zip + pickle format
    _refused(pt, target, r"refusing to load model.pt: it is a zip archive, the torch.save format")
    disguised = tmp_path / "disguised.safetensors"
    disguised.write_bytes(pt.read_bytes())  # the suffix must not fool the loader
    _refused(disguised, target, "torch.save format")
    raw = tmp_path / "raw.safetensors"
    raw.write_bytes(pickle.dumps({"a": 1}, protocol=4))
    _refused(raw, target, "pickle protocol 4 magic bytes")
    other = tmp_path / "weights.bin"
    other.write_bytes(b"\x00" * 32)
    _refused(other, target, r"suffix '.bin' is a pickle/torch.save format")


def test_convert_trusted_checkpoint_uses_weights_only(tmp_path: Path, flax_model: FlaxGPT) -> None:
    tm = TorchGPT(CFG)
    tm.load_state_dict({k: torch.from_numpy(v) for k, v in flat_params_numpy(flax_model).items()})
    torch.save(tm.state_dict(), tmp_path / "ckpt.pt")
    weights.convert_torch_checkpoint(tmp_path / "ckpt.pt", tmp_path / "ckpt.safetensors", CFG)
    back = weights.load_weights(tmp_path / "ckpt.safetensors", TorchGPT(CFG))
    assert _same(flat_params_numpy(back), flat_params_numpy(flax_model))
    # weights_only=True: a pickle that would build an arbitrary object is rejected by torch.
    torch.save({"wte.weight": torch.zeros(2), "evil": Path("/")}, tmp_path / "evil.pt")
    with pytest.raises(pickle.UnpicklingError):
        weights.convert_torch_checkpoint(tmp_path / "evil.pt", tmp_path / "evil.safetensors", CFG)
    assert not (tmp_path / "evil.safetensors").exists()


def _st(header: dict[str, Any] | bytes, data: bytes = b"") -> bytes:
    """A safetensors file's bytes: 8-byte little-endian header length, the JSON header, the tensor data."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + data


def _one(**entry: Any) -> bytes:
    """A file holding one F32 tensor of 4 bytes whose header entry has `entry` edited (e.g. string offsets)."""
    return _st({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], **entry}}, b"\0" * 4)


MALFORMED = r"bad.safetensors: malformed header entry for tensor 'a': "


@pytest.mark.parametrize("case, make, match", [
    ("truncated", lambda raw: raw[:-100], r"bad.safetensors: 100 bytes missing \(truncated\)"),
    ("trailing zeros", lambda raw: raw + b"\0" * 64, r"bad.safetensors: 64 trailing bytes after the tensors"),
    ("huge header length", lambda raw: (2**62).to_bytes(8, "little") + raw[8:],
     r"bad.safetensors: header length 4611686018427387904 bytes does not fit"),
    ("empty", lambda raw: b"", r"bad.safetensors: 0 bytes, too short"),
    # Each once a raw TypeError or RecursionError: exact JSON types, bounded nesting.
    ("offsets strings", lambda raw: _one(data_offsets=["0", "4"]), MALFORMED + r".*\['0', '4'\]"),
    ("offsets floats", lambda raw: _one(data_offsets=[0.0, 4.0]), MALFORMED + r".*\[0\.0, 4\.0\]"),
    ("shape strings", lambda raw: _one(shape=["1"]), MALFORMED + r".*'shape': \['1'\]"),
    ("shape a bool", lambda raw: _one(shape=[True]), MALFORMED + r".*'shape': \[True\]"),
    ("header nested 50000 deep", lambda raw: _st(b'{"a":' * 50_000),
     r"bad.safetensors: the safetensors header is not JSON \(nested too deeply"),
    ("metadata not strings", lambda raw: _st({"__metadata__": {MANIFEST_KEY: 5}}),
     r"bad.safetensors: the header's __metadata__ must map names to strings"),
    ("manifest nested 100000 deep", lambda raw: _st({"__metadata__": {MANIFEST_KEY: "[" * 100_000}}),
     r"bad.safetensors: the manifest is not valid JSON \(nested too deeply"),
])
def test_broken_safetensors_named_in_the_error(case: str, make: Callable[[bytes], bytes], match: str,
                                               tmp_path: Path, good: Path, target: Any) -> None:
    # safetensors itself raises SafetensorError without the file's name for these.
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(make(good.read_bytes()))
    _refused(bad, target, match)
    with pytest.raises(WeightsError, match=match):
        weights.read_manifest(bad)


@pytest.mark.parametrize("edit, match", [
    (lambda m: m.pop("tensors"), r"manifest field 'tensors' is missing"),
    (lambda m: m.pop("sha256"), r"manifest field 'sha256' is missing"),
    (lambda m: m.pop("config"), r"manifest field 'config' is missing"),
    (lambda m: m.update(tensors={"a": 1}), r"manifest field 'tensors' is a dict, expected a list"),
    (None, r"the manifest is a JSON list, not an object"),  # None: write [manifest]
])
def test_malformed_manifest_is_a_weights_error(edit: Callable[[dict], Any] | None, match: str, tmp_path: Path,
                                               good: Path, target: Any) -> None:
    flat, m = _parts(good)
    if edit is not None:
        edit(m)  # in place
    bad = tmp_path / "bad.safetensors"
    save_file(flat, str(bad), metadata={MANIFEST_KEY: json.dumps(m if edit is not None else [m])})
    _refused(bad, target, "bad.safetensors: " + match)
    assert issubclass(WeightsError, bundle.BundleError)  # one error type for the whole loader


def test_failed_save_leaves_the_previous_file(tmp_path: Path, good: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit.export import atomic

    p = tmp_path / "w.safetensors"
    p.write_bytes(good.read_bytes())

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", disk_full)  # the new bytes never reach the disk
    with pytest.raises(OSError, match=r"could not write .*w.safetensors \(disk full\?\).*previous file is unchanged"):
        weights.save_weights(TorchGPT(CFG), p)
    assert p.read_bytes() == good.read_bytes() and [q.name for q in tmp_path.iterdir()] == ["w.safetensors"]


def test_save_target_and_source_refused_before_writing(tmp_path: Path) -> None:
    (tmp_path / "dir.safetensors").mkdir()
    with pytest.raises(WeightsError, match=r"dir.safetensors is a folder: name a file"):
        weights.save_weights(TorchGPT(CFG), tmp_path / "dir.safetensors")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(WeightsError, match=r"afile is a file, so x.safetensors cannot be written under it"):
        weights.save_weights(TorchGPT(CFG), tmp_path / "afile" / "x.safetensors")
    with pytest.raises(WeightsError, match=r"source must be one of .*got 123"):
        weights.save_weights(TorchGPT(CFG), tmp_path / "s.safetensors", source=123)
    assert not (tmp_path / "s.safetensors").exists()


def test_convert_missing_or_truncated_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(WeightsError, match=r"no checkpoint file at .*nope.pt"):
        weights.convert_torch_checkpoint(tmp_path / "nope.pt", tmp_path / "o.safetensors", CFG)
    torch.save(TorchGPT(CFG).state_dict(), tmp_path / "ckpt.pt")
    (tmp_path / "cut.pt").write_bytes((tmp_path / "ckpt.pt").read_bytes()[:5000])
    with pytest.raises(WeightsError, match=r"cut.pt: torch.load\(weights_only=True\) cannot read it .*truncated"):
        weights.convert_torch_checkpoint(tmp_path / "cut.pt", tmp_path / "o.safetensors", CFG)
    assert not (tmp_path / "o.safetensors").exists()


def test_a_state_dict_is_not_the_model(tmp_path) -> None:
    """A probe passed model.state_dict(): the error came from deep in flax_model ('wte')."""
    import torch

    from labkit.export import weights as W
    from labkit.gpt.config import GPTConfig
    from labkit.gpt.torch_model import TorchGPT

    sd = TorchGPT(GPTConfig(vocab_size=256, seq_len=16, n_layer=1, n_head=2, d_model=32)).state_dict()
    assert isinstance(next(iter(sd.values())), torch.Tensor)
    with pytest.raises(W.WeightsError, match="needs the course model .* got OrderedDict; a state_dict has no config"):
        W.save_weights(sd, tmp_path / "w.safetensors")
    with pytest.raises(W.WeightsError, match="load_weights needs the course model .* got NoneType"):
        W.load_weights(tmp_path / "w.safetensors", None)
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_a_path_that_is_not_a_path_is_named() -> None:
    from labkit.export import weights as w
    from labkit.gpt.config import get_config
    from labkit.gpt.torch_model import TorchGPT

    with pytest.raises(w.WeightsError, match=r"path must be the weights file's path \(str or Path\), got NoneType None"):
        w.load_weights(None, TorchGPT(get_config("test")))  # was a bare TypeError from Path(None)
