"""One bundle, one loader: weights + programs bound by a manifest, checked before loading (Lab 05).

A bundle is a folder::

    bundle.json          the manifest: config, every file's size and SHA-256, every tensor's SHA-256
    bundle.sig           optional: a signature over bundle.json's exact bytes (Ed25519 or HMAC-SHA256)
    weights.safetensors  canonical fp32 weights (``labkit.export.weights``)
    forward.jaxexport    serialized ``jax.export`` programs, one file each, with their platforms

**Integrity** (the digests) catches accidents: a flipped bit, a truncated copy, trailing bytes, a
file from another bundle. It cannot stop someone who can edit the files — they rewrite the digests
too. **Authenticity** (the signature) does: the verifier holds a key the bundle does not carry
(an Ed25519 public key, or an HMAC secret) that the bundle's writer cannot change — pinned in the
serving image or config, not read from beside the bundle — so an edited manifest no longer matches
its signature. What the signature binds is the manifest: pin its ``name`` and ``version`` too
(``verify(..., expected=...)``), or any other bundle the same key signed is accepted in its place.

:func:`verify` reads every file once into memory and checks, in this order and before anything is
deserialized: the signature (when a key is given), the manifest's schema, the config digests that
bind each program to the weights' config, each file's kind (a regular file, not a link or a folder)
and size (before it is read) and SHA-256, the safetensors header (structure only: exact JSON types,
lengths, offsets, no trailing bytes) and each tensor's SHA-256. Only :meth:`Verified.tensors` and
:meth:`Verified.program` then turn the *verified* bytes into arrays and a program (whose config tag,
platforms and disabled safety checks, inside it, are checked once deserialized, before it is
returned). Any refusal is a :class:`BundleError` naming the file.

:meth:`Verified.program` also scans the program for custom-call targets: ``jax.export.deserialize``
only parses the file, but calling the program compiles and runs it, and a custom call invokes whatever
native function this process registered under its name. A target not in ``ALLOWED_CUSTOM_CALLS``
(or the caller's ``allow``) is refused, so the check does not rest on the file's own
``disabled_safety_checks`` field, which a hand-made file simply leaves empty.

Verifying imports nothing from labkit but its sibling ``manifest`` (numpy, and lazily cryptography
and jax), so a fresh serving process loads this file by path and verifies a bundle without the
course or the model code.
Writing a bundle is ``labkit.export.publish.write``, signing it ``labkit.export.publish.sign``
(keys from ``publish.new_ed25519_key``): neither runs in the serving process.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

try:  # a module of labkit.export
    from .manifest import (FORMAT, IDENTITY, MANIFEST, SIGNATURE, VERSION, WEIGHTS, _SAFE_NAME,  # noqa: F401
                           BundleError,
                           check_identity, check_schema, config_digest, custom_call_targets, ints, parse_json,
                           program_tag, sha256)
except ImportError:  # loaded by file path in a serving process without labkit (stablehlo._FRESH): its sibling too
    import importlib.util
    import sys

    _spec = importlib.util.spec_from_file_location("bundle_manifest", Path(__file__).with_name("manifest.py"))
    _mod = sys.modules["bundle_manifest"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_mod)
    from bundle_manifest import (FORMAT, IDENTITY, MANIFEST, SIGNATURE, VERSION, WEIGHTS, _SAFE_NAME,  # noqa: F401
                                 BundleError, check_identity, check_schema, config_digest, custom_call_targets,
                                 ints, parse_json, program_tag, sha256)

MAX_MANIFEST_BYTES = 1 << 20  # a manifest is a few KiB; a bigger one is not ours
MAX_HEADER_BYTES = 100_000_000  # safetensors' own header limit (bytes)
ST_DTYPES = {"F64": ("float64", 8), "F32": ("float32", 4), "F16": ("float16", 2), "BF16": ("bfloat16", 2),
             "I64": ("int64", 8), "I32": ("int32", 4), "I16": ("int16", 2), "I8": ("int8", 1),
             "U8": ("uint8", 1), "BOOL": ("bool", 1)}
Key = Any  # bytes (HMAC secret or PEM), a key file path (str/Path: never the secret itself), or an Ed25519 key
# The custom-call targets a program may name. jax.export.deserialize only parses a file; Exported.call compiles
# and runs it, and a custom call then invokes whatever native function this process registered under that
# name (the file brings no code, but may name any registered target). The course's programs name only JAX's
# shape checks; a deployment whose programs need more (a LAPACK or cuDNN target) lists them explicitly.
ALLOWED_CUSTOM_CALLS = frozenset({"shape_assertion"})


def parse_safetensors(data: bytes, where: str, total: int | None = None
                      ) -> tuple[dict[str, tuple[str, tuple[int, ...], int, int]], dict[str, str], int]:
    """Check a safetensors file's structure -> ({name: (dtype, shape, begin, end)}, metadata, data start) (Lab 05).

    ``data`` is the whole file, or only its first bytes (at least the header) with ``total`` the
    file's size: the structure (lengths, offsets that tile the rest exactly) is checked without the tensors.
    """
    total = len(data) if total is None else total
    if total < 8:
        raise BundleError(f"{where}: {total} bytes, too short for a safetensors file (empty or truncated)")
    (n,) = struct.unpack("<Q", data[:8])  # little-endian u64: the JSON header's length in bytes
    if n > MAX_HEADER_BYTES or 8 + n > total or 8 + n > len(data):
        raise BundleError(f"{where}: header length {n} bytes does not fit the {total}-byte file "
                          "(truncated, or not a safetensors file)")
    header = parse_json(where, data[8:8 + n], "the safetensors header is not JSON")
    if not isinstance(header, dict):
        raise BundleError(f"{where}: the safetensors header is a {type(header).__name__}, not an object")
    meta = header.pop("__metadata__", None) or {}
    if not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        raise BundleError(f"{where}: the header's __metadata__ must map names to strings, got {str(meta)[:80]}")
    tensors, spans = {}, []
    for name, t in header.items():
        # Exact types: "4" or 4.0 as an offset, or true as a dimension, is not a file safetensors wrote.
        e = t if isinstance(t, dict) else {}
        dtype, shape, offsets = e.get("dtype"), e.get("shape"), e.get("data_offsets")
        if not (isinstance(dtype, str) and dtype in ST_DTYPES and ints(shape) and ints(offsets)
                and len(offsets) == 2):
            raise BundleError(f"{where}: malformed header entry for tensor {name!r}: {str(t)[:120]}; expected "
                              '{"dtype": "F32", "shape": [ints], "data_offsets": [begin, end]}')
        (begin, end), shape, itemsize = offsets, tuple(shape), ST_DTYPES[dtype][1]
        if end - begin != math.prod(shape) * itemsize:  # Python ints: a huge shape cannot wrap around to fit
            raise BundleError(f"{where}: tensor {name!r} {dtype}{list(shape)} does not fit offsets {[begin, end]}")
        tensors[name] = (ST_DTYPES[dtype][0], shape, 8 + n + begin, 8 + n + end)
        spans.append((begin, end))
    covered = 0
    for begin, end in sorted(spans):  # tensors must tile the data section: no gaps, no overlaps
        if begin != covered:
            raise BundleError(f"{where}: tensor data has a gap or overlap at byte {8 + n + begin}")
        covered = end
    if 8 + n + covered != total:
        extra = total - (8 + n + covered)
        what = f"{extra} trailing bytes after the tensors" if extra > 0 else f"{-extra} bytes missing (truncated)"
        raise BundleError(f"{where}: {what}; the file was cut or appended to after it was written")
    return tensors, meta, 8 + n


def tensors_from(data: bytes, index: dict[str, tuple[str, tuple[int, ...], int, int]]) -> dict[str, np.ndarray]:
    """{name: array} from a checked safetensors file's bytes and its parse_safetensors index (Lab 05)."""
    out = {}
    for name, (dt, shape, begin, end) in index.items():
        # safetensors stores little-endian; bfloat16 comes from ml_dtypes, a JAX dependency
        dtype = __import__("ml_dtypes").bfloat16 if dt == "bfloat16" else np.dtype(dt).newbyteorder("<")
        arr = np.frombuffer(data, dtype, count=(end - begin) // np.dtype(dtype).itemsize, offset=begin)
        out[name] = arr.reshape(shape).astype(np.dtype(dtype).newbyteorder("="))  # a writable native copy
    return out


# ---------------------------------------------------------------- keys and signatures


def _key_bytes(key: Key) -> tuple[bytes, str]:
    """(key bytes, where they came from): bytes are the key itself; a str or Path is always a key *file*."""
    # A str is never taken as the secret: a mistyped key path must not silently become an HMAC key.
    if isinstance(key, str) and key.lstrip().startswith("-----BEGIN"):
        raise BundleError("a PEM key given as str: pass it as bytes (pem.encode()) or as the path of its file")
    if isinstance(key, (str, os.PathLike)):
        p = Path(key)
        if not p.is_file():
            raise BundleError(f"key file {str(p)!r} {'is a folder' if p.is_dir() else 'does not exist'}: pass the "
                              "path of an Ed25519 PEM or HMAC secret file, or the key itself as bytes")
        return p.read_bytes(), f"key file {p.name}"
    if isinstance(key, (bytes, bytearray)):
        return bytes(key), "key"
    raise BundleError(f"key must be bytes (an Ed25519 PEM, or an HMAC secret of >= 16 bytes), a key file path "
                      f"or an Ed25519 key object; got {type(key).__name__} {str(key)[:40]}")


def _as_key(key: Key, private: bool) -> tuple[str, Any]:
    """("ed25519", key object) or ("hmac-sha256", secret bytes): the key, not the bundle, picks the algorithm."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    if isinstance(key, (ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey)):
        obj, src = key, "key"
    else:
        k, src = _key_bytes(key)
        try:
            if k.lstrip().startswith(b"-----BEGIN PRIVATE KEY"):
                obj = serialization.load_pem_private_key(k, password=None)
            elif k.lstrip().startswith(b"-----BEGIN PUBLIC KEY"):
                obj = serialization.load_pem_public_key(k)
            elif k.lstrip().startswith(b"-----BEGIN"):  # another PEM kind must not become an HMAC secret
                raise BundleError(f"{src}: a PEM of another kind ({k.lstrip()[:40]!r}); use an Ed25519 key "
                                  "(labkit.export.publish.new_ed25519_key)")
            elif len(k.strip()) < 16:
                raise BundleError(f"{src}: an HMAC secret must be at least 16 bytes, got {len(k.strip())}; "
                                  "use e.g. secrets.token_bytes(32)")
            else:
                return "hmac-sha256", k.strip()
        except BundleError:
            raise
        except (ValueError, TypeError) as e:  # a malformed PEM body
            raise BundleError(f"{src}: not a readable PEM key ({e})") from None
    if private and not isinstance(obj, ed25519.Ed25519PrivateKey):
        raise BundleError(f"{src}: signing needs an Ed25519 private key (or an HMAC secret), got a "
                          f"{type(obj).__name__}; nothing was written")
    if not private and isinstance(obj, ed25519.Ed25519PrivateKey):
        obj = obj.public_key()  # verifying with the private key works; ship only the public one
    if not isinstance(obj, (ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey)):
        raise BundleError(f"{src}: unsupported key type {type(obj).__name__}: use Ed25519 or an HMAC secret")
    return "ed25519", obj


def _check_signature(root: Path, raw: bytes, key: Key) -> str:
    """Verify bundle.sig over the manifest bytes with the caller's key; returns the algorithm."""
    from cryptography.exceptions import InvalidSignature

    where = f"{root.name}/{SIGNATURE}"
    alg, k = _as_key(key, private=False)
    if not (root / SIGNATURE).is_file():
        raise BundleError(f"{where}: missing, but a key was given: an unsigned bundle is not authentic")
    sig = parse_json(where, (root / SIGNATURE).read_bytes(), "not a labkit signature file")
    try:
        got_alg, value = sig["algorithm"], bytes.fromhex(sig["signature"])
    except (ValueError, KeyError, TypeError) as e:
        raise BundleError(f"{where}: not a labkit signature file ({e})") from None
    if got_alg != alg:
        given = f"key file {Path(key).name}" if isinstance(key, (str, os.PathLike)) else "the key given"
        hint = ("; it is not a PEM, so it was read as an HMAC secret: pass the publisher's Ed25519 public key PEM (an "
                "OpenSSH key converts with `ssh-keygen -e -m PKCS8 -f KEY.pub`)" if alg == "hmac-sha256" else "")
        raise BundleError(f"{where}: signed with {got_alg}, but {given} is for {alg}{hint}")
    if alg == "hmac-sha256":
        ok = hmac.compare_digest(hmac.new(k, raw, hashlib.sha256).digest(), value)
    else:
        try:
            k.verify(value, raw)
            ok = True
        except InvalidSignature:
            ok = False
    if not ok:
        raise BundleError(f"{root.name}/{MANIFEST}: the signature does not match — the manifest was "
                          "edited after signing, or signed with another key. Do not serve this bundle.")
    return alg


# ---------------------------------------------------------------- verifying and loading


def _regular_size(p: Path, where: str) -> int:
    """The size of a listed file that is a regular file in the bundle itself: not absent, a link or a folder."""
    try:
        st = p.lstat()  # lstat: a link is reported as a link, not as what it points to
    except FileNotFoundError:
        raise BundleError(f"{where}: listed in the manifest but missing") from None
    if stat.S_ISLNK(st.st_mode):  # its target lies outside the bundle, and changes or vanishes without it
        raise BundleError(f"{where}: a symbolic link; a bundle must hold its own files: replace the link "
                          "with a copy of the file it points to")
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a device, pipe or socket"
        raise BundleError(f"{where}: is {kind}, not a file; put the file the manifest lists in its place")
    return st.st_size


def _read(root: Path, entry: dict[str, Any]) -> bytes:
    """A listed file's bytes, after its kind, size and SHA-256 match the manifest."""
    where, p = f"{root.name}/{entry['file']}", root / entry["file"]
    size = _regular_size(p, where)
    if size != entry["bytes"]:  # before reading: a file grown to gigabytes is refused without loading it
        what = "empty" if not size else "truncated" if size < entry["bytes"] else "has trailing bytes"
        raise BundleError(f"{where}: {size} bytes, the manifest says {entry['bytes']} ({what})")
    with p.open("rb") as f:
        data = f.read(size + 1)  # bounded: a file that grew since lstat fails the digest, unread
    if sha256(data) != entry["sha256"]:
        raise BundleError(f"{where}: SHA-256 {sha256(data)[:16]}... does not match the manifest's "
                          f"{entry['sha256'][:16]}...: the file was corrupted or replaced. Re-export it.")
    return data


@dataclass
class Verified:
    """A bundle whose every byte matched its manifest: load tensors and programs from here (Lab 05)."""

    root: Path
    manifest: dict[str, Any]
    signature: str  # "ed25519" / "hmac-sha256" (checked), "unchecked (no key given)", "none"
    blobs: dict[str, bytes] = field(repr=False)
    index: dict[str, tuple[str, tuple[int, ...], int, int]] = field(repr=False)

    def tensors(self) -> dict[str, np.ndarray]:
        """The weights as {name: array}, copied out of the verified bytes (Lab 05)."""
        return tensors_from(self.blobs[self.manifest["weights"]["file"]], self.index)

    def program(self, name: str = "forward", allow: frozenset[str] = ALLOWED_CUSTOM_CALLS) -> Any:
        """Deserialize a verified program; refuse another config's, other platforms', checks off, or a custom
        call not in `allow` (Lab 05)."""
        import jax

        entry = self.manifest["programs"].get(name)
        if entry is None:
            raise BundleError(f"{self.root.name}: no program {name!r}; it has {sorted(self.manifest['programs'])}")
        where = f"{self.root.name}/{entry['file']}"
        try:
            exp = jax.export.deserialize(bytearray(self.blobs[entry["file"]]))
        except Exception as e:  # flatbuffer/version errors: struct.error, ValueError, ...
            raise BundleError(f"{where}: not a jax.export artifact this jax {jax.__version__} can read "
                              f"({type(e).__name__}: {e})") from None
        want = program_tag(self.manifest["config"], name)
        if exp.fun_name != want:
            raise BundleError(f"{where}: exported as {exp.fun_name!r}, but this bundle's config needs {want!r}: "
                              "the program was exported for a different model config")
        if list(exp.platforms) != entry["platforms"]:
            raise BundleError(f"{where}: lowered for {list(exp.platforms)}, the manifest says {entry['platforms']}")
        if exp.disabled_safety_checks:  # it could run where it was not lowered for, or call unguaranteed targets
            raise BundleError(f"{where}: checks disabled at export {[str(c) for c in exp.disabled_safety_checks]}"
                              " (platform or custom-call safety checks); re-export it without disabled_checks")
        # Every platform's lowering is in the one module: a target refused here is refused on every chip.
        try:  # this jaxlib's StableHLO reader: an artifact outside its compatibility window fails here
            text = exp.mlir_module()
        except Exception as e:  # noqa: BLE001  the bytes are verified: any failure is this jaxlib's refusal
            first = str(e).splitlines()[0][:200] if str(e) else ""
            raise BundleError(f"{where}: this jaxlib cannot read its StableHLO ({type(e).__name__}: {first})") from None
        try:  # bare (`@target`), quoted (`@"odd-name"`) and generic forms; unreadable: refused, not skipped
            named = set(custom_call_targets(text))
        except BundleError as e:
            raise BundleError(f"{where}: {e}") from None
        if named - set(allow):
            raise BundleError(f"{where}: calls custom-call target(s) {sorted(named - set(allow))}, not on the "
                              f"loader's allowlist {sorted(allow)}: running it would invoke native code registered "
                              "under that name; re-export without it, or add the target to `allow` if you trust it")
        return exp

    def summary(self) -> str:
        """One line: folder, config, tensor count, programs and platforms, signature status (Lab 05)."""
        c, m = self.manifest["config"], self.manifest
        progs = ", ".join(f"{k} [{'/'.join(p['platforms'])}]" for k, p in m["programs"].items()) or "no programs"
        size = sum(len(b) for b in self.blobs.values()) / 2**20
        ident = " ".join(m[k] for k in IDENTITY if k in m)  # name and version, where the publisher set them
        return (f"OK {self.root.name}{f' ({ident})' if ident else ''}: GPT {c.get('n_layer')}x{c.get('d_model')} "
                f"(n_head {c.get('n_head')}), {len(self.index)} tensors, {progs}, {size:.2f} MiB; digests match; "
                f"signature: {self.signature}")


def _weights_config(where: str, meta: dict[str, str]) -> dict[str, Any]:
    """The config named by the weights' own manifest (labkit.export.weights), in their safetensors header."""
    wm = parse_json(where, meta.get("labkit_manifest", "null"), "the labkit_manifest in its header is not JSON")
    wcfg = wm.get("config") if isinstance(wm, dict) else None
    if not isinstance(wcfg, dict):  # compared key by key with the bundle's config next
        raise BundleError(f"{where}: no labkit weights manifest with a config (an object) in its header; "
                          "write the weights with labkit.export.weights.save_weights")
    return wcfg


def verify(path: str | Path, key: Key | None = None, expected: dict[str, str] | None = None) -> Verified:
    """Check a bundle (folder or its bundle.json) before anything is deserialized -> Verified (Lab 05).

    ``expected`` (e.g. ``{"name": "lab05-gpt", "version": "3"}``, from the serving config) refuses a bundle
    whose manifest names another model or release: with a key, what that key signed; without one, a label.
    """
    if not str(path).strip():
        raise BundleError("no bundle path given: pass the bundle's folder (or its bundle.json)")
    root = Path(path)
    root = root.parent if root.name == MANIFEST else root
    where = f"{root.name}/{MANIFEST}"
    if not root.exists():
        raise BundleError(f"{root}: no such file or folder; pass the bundle's folder (or its bundle.json)")
    if not (root / MANIFEST).is_file():
        raise BundleError(f"{where}: no bundle here (expected a folder with {MANIFEST})")
    raw = (root / MANIFEST).read_bytes()
    if len(raw) > MAX_MANIFEST_BYTES:
        raise BundleError(f"{where}: {len(raw)} bytes, larger than any labkit manifest")
    # Authenticity first: with a key, nothing the bundle says is believed before its signature checks.
    signature = _check_signature(root, raw, key) if key is not None else (
        "unchecked (no key given)" if (root / SIGNATURE).is_file() else "none")
    m = parse_json(where, raw)
    check_schema(m, where)
    check_identity(m, expected, where)
    if config_digest(m["config"]) != m["config_sha256"]:
        raise BundleError(f"{where}: config_sha256 does not match the config it sits next to")
    for name, p in m["programs"].items():
        if p["config_sha256"] != m["config_sha256"]:
            raise BundleError(f"{root.name}/{p['file']}: program {name!r} was exported for another config "
                              f"(sha256 {p['config_sha256'][:12]}...) than the weights' ({m['config_sha256'][:12]}...)")
    blobs = {m["weights"]["file"]: _read(root, m["weights"])}
    blobs.update({p["file"]: _read(root, p) for p in m["programs"].values()})
    wname = f"{root.name}/{m['weights']['file']}"
    index, meta, _ = parse_safetensors(blobs[m["weights"]["file"]], wname)
    listed = [(n, dt, tuple(s), d) for n, dt, s, d in m["weights"]["tensors"]]
    if [(n, dt, s) for n, dt, s, _ in listed] != [(n, *index[n][:2]) for n in index]:
        raise BundleError(f"{wname}: its tensors (names, dtypes, shapes) differ from the manifest's list")
    blob = blobs[m["weights"]["file"]]
    for n, _, _, digest in listed:
        if sha256(blob[index[n][2]:index[n][3]]) != digest:
            raise BundleError(f"{wname}: tensor {n!r} does not match its SHA-256 in the manifest")
    wcfg = _weights_config(wname, meta)
    if wcfg != m["config"]:
        diff = {k: (wcfg.get(k), v) for k, v in m["config"].items() if wcfg.get(k) != v}
        raise BundleError(f"{wname}: written for another model config; (weights, bundle) differ in {diff}")
    return Verified(root, m, signature, blobs, index)
