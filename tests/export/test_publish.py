"""labkit.export.publish: every bad argument refused before the disk is touched, and a failure at any
point leaves the previous bundle exactly as it was, signature included (Lab 05)."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from labkit.export import atomic, bundle, publish, weights
from labkit.export.bundle import BundleError
from labkit.gpt.config import get_config
from labkit.gpt.torch_model import TorchGPT

CFG = get_config("test")
SK, PK = publish.new_ed25519_key()
WB = weights.weights_bytes(TorchGPT(CFG))[0]  # safetensors bytes: no JAX program needed here


def _snap(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir())}


@pytest.fixture
def signed(tmp_path: Path) -> Path:
    root = tmp_path / "out" / "gpt"
    publish.write(root, asdict(CFG), WB, {"forward": (b"program", ["cpu"])}, {"note": "v1"}, key=SK)
    assert bundle.verify(root, PK).signature == "ed25519"
    return root


BAD: dict[str, tuple[dict[str, Any], str]] = {
    "name escapes the folder": ({"programs": {"../escape": (b"xx", ["cpu"])}}, r"program name '../escape' is not"),
    "name is a sub folder": ({"programs": {"sub/fwd": (b"xx", ["cpu"])}}, r"program name 'sub/fwd' .*e.g. 'forward'"),
    "program without platforms": ({"programs": {"f": b"xx"}}, r"program 'f' must be \(serialized bytes"),
    "numpy scalar in info": ({"info": {"loss": np.float32(2.3)}}, r"not plain JSON: .*float32.*float\(\)"),
    "NaN in info": ({"info": {"loss": float("nan")}}, r"not plain JSON"),
    "info overrides the manifest": ({"info": {"weights": {}}}, r"info must be .*\['weights'\]"),
    "public key to sign": ({"key": PK}, r"signing needs an Ed25519 private key.*PublicKey; nothing was written"),
    "int key": ({"key": 12345}, r"key must be bytes .*got int 12345"),
    "short secret": ({"key": b"short"}, r"an HMAC secret must be at least 16 bytes, got 5"),
    "mistyped key path": ({"key": "/no/such/sk.pem"}, r"key file '/no/such/sk.pem' does not exist"),
    "weights not bytes": ({"weights": "w.safetensors"}, r"weights bytes"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_argument_refused_and_old_bundle_untouched(case: str, signed: Path) -> None:
    change, match = BAD[case]
    before = _snap(signed)
    args = {"config": asdict(CFG), "weights": WB, "programs": {}, "info": None, "key": None, **change}
    with pytest.raises(BundleError, match=match):
        publish.write(signed, **args)
    assert _snap(signed) == before and bundle.verify(signed, PK).signature == "ed25519"
    assert os.listdir(signed.parent) == ["gpt"], "something was written beside the bundle"


def test_failure_mid_write_keeps_the_previous_bundle(signed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _snap(signed)
    real, calls = atomic._write_synced, [0]

    def disk_fills(path: Path, data: bytes) -> None:
        calls[0] += 1
        if calls[0] == 2:  # the weights are written, the next file hits a full disk
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(atomic, "_write_synced", disk_fills)
    with pytest.raises(OSError, match=r"could not write .*gpt \(disk full\?\).*previous folder is unchanged"):
        publish.write(signed, asdict(CFG), WB, {"forward": (b"new", ["cpu"])}, key=SK)
    assert _snap(signed) == before and bundle.verify(signed, PK).signature == "ed25519"
    assert os.listdir(signed.parent) == ["gpt"]


def test_rewrite_replaces_the_whole_folder_and_signs_it(signed: Path) -> None:
    secret = b"a-shared-secret-of-32-bytes-long"
    m = publish.write(signed, asdict(CFG), WB, {"step": (b"s", ["cpu"])}, key=secret)
    assert sorted(_snap(signed)) == ["bundle.json", "bundle.sig", "step.jaxexport", "weights.safetensors"]
    assert bundle.verify(signed, secret).signature == "hmac-sha256" and list(m["programs"]) == ["step"]
    publish.write(signed, asdict(CFG), WB, {})  # unsigned now: the old signature must not survive
    assert bundle.verify(signed).signature == "none"


def test_a_folder_that_is_not_a_bundle_is_never_replaced(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("mine")
    with pytest.raises(BundleError, match=r"holds \['notes.txt'\], which a bundle does not"):
        publish.write(tmp_path / "home", asdict(CFG), WB, {})
    assert _snap(tmp_path / "home") == {"notes.txt": b"mine"}
    (tmp_path / "f").write_text("x")
    for target in (tmp_path / "f", tmp_path / "f" / "gpt"):
        with pytest.raises(BundleError, match="is a file"):
            publish.write(target, asdict(CFG), WB, {})


def test_fingerprint_is_the_public_keys_and_refuses_a_secret(tmp_path: Path) -> None:
    fp = publish.fingerprint(PK)
    assert fp.startswith("sha256:") and len(fp) == 7 + 64
    assert publish.fingerprint(SK) == fp  # a private key: its public half's
    (tmp_path / "k.pub").write_bytes(PK)
    assert publish.fingerprint(tmp_path / "k.pub") == fp  # from the file a serving config names
    assert publish.fingerprint(publish.new_ed25519_key()[1]) != fp
    with pytest.raises(BundleError, match="an HMAC secret has no public fingerprint"):
        publish.fingerprint(b"a-shared-secret-of-32-bytes-long")


def test_identity_fields_must_be_non_empty_strings(tmp_path: Path) -> None:
    for bad in ({"name": 3}, {"version": ""}):
        with pytest.raises(BundleError, match=r"info\['(name|version)'\] must be a non-empty str"):
            publish.write(tmp_path / "gpt", asdict(CFG), WB, {}, bad)
    assert not (tmp_path / "gpt").exists()
