"""Bad Lab 05 bundles, made from a good one: the loader's table of refusals, shared by its tests and the CLI's."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any, Callable

from labkit.export import bundle
from labkit.export.bundle import BundleError


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
