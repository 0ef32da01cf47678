"""Writing a bundle: everything checked first, then written beside the target and swapped in (Lab 05).

``write`` turns weights bytes and serialized programs into a bundle folder (``labkit.export.bundle``
describes the format and verifies it). Program names, value shapes, the manifest's JSON and the
signing key are all checked before the disk is touched; the folder is then written as a whole
(``labkit.export.atomic.replace_folder``), so a failure at any point — a bad argument, a full disk,
an interrupted process — leaves the previous bundle exactly as it was, signature included.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

from labkit.export.atomic import replace_folder, write_file
from labkit.export.bundle import Key, _as_key, parse_safetensors
from labkit.export.manifest import (FORMAT, IDENTITY, MANIFEST, SIGNATURE, VERSION, WEIGHTS, _SAFE_NAME, BundleError,
                                    config_digest, sha256)


_RESERVED = ("format", "bundle_version", "config", "config_sha256", "weights", "programs")


def _bundle_files(root: Path) -> None:
    """Refuse a target that is not a folder, or a folder holding anything but an old bundle's files."""
    if root.exists() and not root.is_dir():
        raise BundleError(f"{root} is a file, not a bundle folder: pick another path; nothing was written")
    for parent in root.parents:
        if parent.exists() and not parent.is_dir():
            raise BundleError(f"{parent} is a file, so {root} cannot be a folder under it; nothing was written")
    ours = {MANIFEST, SIGNATURE, WEIGHTS}
    other = sorted(p.name for p in root.iterdir() if p.name not in ours and p.suffix != ".jaxexport") \
        if root.is_dir() else []
    if other:  # the whole folder is replaced: never take someone's files with it
        raise BundleError(f"{root} holds {other[:3]}, which a bundle does not: write the bundle to a new or "
                          "empty folder (or move them out); nothing was written")


def write(root: str | Path, config: dict[str, Any], weights: bytes, programs: dict[str, tuple[bytes, list[str]]],
          info: dict[str, Any] | None = None, key: Key | None = None) -> dict[str, Any]:
    """Write a bundle folder (signed if `key`) from weights bytes and {name: (program bytes, platforms)} (Lab 05).

    Everything is checked first; then the folder is written beside `root` and swapped in, so a
    failure at any point leaves the previous bundle exactly as it was. Returns the manifest.
    """
    root = Path(root)
    _bundle_files(root)
    if not isinstance(config, dict) or not isinstance(weights, (bytes, bytearray)):
        raise BundleError(f"config must be a dict and weights bytes, got {type(config).__name__} and "
                          f"{type(weights).__name__}; nothing was written")
    if not isinstance(programs, dict):
        raise BundleError(f"programs must be a dict {{name: (bytes, platforms)}}, got {type(programs).__name__}")
    for name, value in programs.items():
        if not (isinstance(name, str) and _SAFE_NAME.match(name)):
            raise BundleError(f"program name {name!r} is not a plain file name (letters, digits, _ . -): "
                              "rename it, e.g. 'forward'; nothing was written")
        if not (isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], (bytes, bytearray))
                and isinstance(value[1], (list, tuple)) and all(isinstance(x, str) for x in value[1])):
            raise BundleError(f"program {name!r} must be (serialized bytes, [platform, ...]), got "
                              f"{str(value)[:60]}; nothing was written")
    if not isinstance(info, (dict, type(None))) or set(info or {}) & set(_RESERVED):
        what = sorted(set(info) & set(_RESERVED)) if isinstance(info, dict) else type(info).__name__
        raise BundleError(f"info must be a dict of extra manifest fields, not {what}: the manifest's own fields "
                          f"{list(_RESERVED)} are written by write(); nothing was written")
    bad = [k for k in IDENTITY if k in (info or {}) and not (isinstance(info[k], str) and info[k])]
    if bad:  # the name and version a server pins (manifest.check_identity): non-empty strings
        raise BundleError(f"info[{bad[0]!r}] must be a non-empty str, got {info[bad[0]]!r}; nothing was written")
    tensors, _, _ = parse_safetensors(bytes(weights), f"{root.name}/{WEIGHTS}")
    try:
        cfg_sha = config_digest(config)
        manifest = {
            "format": FORMAT, "bundle_version": VERSION, "config": config, "config_sha256": cfg_sha,
            "weights": {"file": WEIGHTS, "bytes": len(weights), "sha256": sha256(weights),
                        "tensors": [[n, dt, list(s), sha256(weights[b:e])] for n, (dt, s, b, e) in tensors.items()]},
            "programs": {name: {"file": f"{name}.jaxexport", "bytes": len(data), "sha256": sha256(data),
                                "platforms": list(platforms), "config_sha256": cfg_sha}
                         for name, (data, platforms) in programs.items()},
            **(info or {}),
        }
        raw = (json.dumps(manifest, indent=1, allow_nan=False) + "\n").encode()
    except (TypeError, ValueError) as e:  # numpy scalars, NaN, sets ...: refused before any byte is written
        raise BundleError(f"the manifest (config or info) is not plain JSON: {e}. Convert numpy values with "
                          "float()/int()/.tolist(); nothing was written") from None
    files = {WEIGHTS: bytes(weights), **{f"{n}.jaxexport": bytes(d) for n, (d, _) in programs.items()}, MANIFEST: raw}
    if key is not None:
        files[SIGNATURE] = _signature(raw, key)  # signed before the swap: the new bundle appears signed
    root.parent.mkdir(parents=True, exist_ok=True)
    replace_folder(root, files)  # an old bundle.sig goes with the old folder: it does not cover this manifest
    return manifest


# ------------------------------------------------------------------ signing (the publisher's side)


def new_ed25519_key() -> tuple[bytes, bytes]:
    """A fresh Ed25519 key pair as PEM bytes (private, public); keep the private one off the bundle (Lab 05)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    sk = ed25519.Ed25519PrivateKey.generate()
    return (sk.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()),
            sk.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


def fingerprint(public_key: Key) -> str:
    """"sha256:<hex>" of an Ed25519 public key's 32 raw bytes: what a serving config pins and compares (Lab 05)."""
    from cryptography.hazmat.primitives import serialization

    alg, k = _as_key(public_key, private=False)  # a private key gives its public half's fingerprint
    if alg != "ed25519":
        raise BundleError("an HMAC secret has no public fingerprint: publishing one would leak a hash of the secret")
    raw = k.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + sha256(raw)


def _signature(raw: bytes, key: Key) -> bytes:
    """bundle.sig's bytes for manifest bytes `raw`; the key is checked before anything is signed."""
    alg, k = _as_key(key, private=True)
    sig = hmac.new(k, raw, hashlib.sha256).digest() if alg == "hmac-sha256" else k.sign(raw)
    return (json.dumps({"algorithm": alg, "signature": sig.hex()}) + "\n").encode()


def sign(root: str | Path, key: Key) -> Path:
    """Write bundle.sig: an Ed25519 (or HMAC-SHA256) signature over bundle.json's bytes (Lab 05)."""
    root = Path(root)
    if not (root / MANIFEST).is_file():
        raise BundleError(f"{root.name}/{MANIFEST}: no bundle here to sign (write it first)")
    return write_file(root / SIGNATURE, _signature((root / MANIFEST).read_bytes(), key))
