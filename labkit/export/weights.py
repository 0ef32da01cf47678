"""Weights that move between frameworks provably unchanged: safetensors + a manifest (Lab 05).

``save_weights(model, path)`` writes a FlaxGPT's or TorchGPT's canonical flat dict
(``labkit.gpt.config.param_shapes`` names, PyTorch layout, fp32) to a **safetensors** file;
``load_weights(path, model)`` fills either framework's model from it. Safetensors is a JSON
header plus raw little-endian bytes: loading never runs code from the file, unlike pickle
(``torch.save`` / ``.pt`` / ``.bin``), which labkit refuses to open.

**Manifest** — stored *inside* the file, as JSON under the safetensors metadata key
``"labkit_manifest"`` (one file travels; the header is readable without loading tensors)::

    {"format": "labkit.models.weights", "manifest_version": 2,
     "config": {GPTConfig fields},
     "tensors": [[name, dtype, shape], ...],          # canonical order = param_shapes(cfg)
     "sha256": "...",                                 # content_hash(), see below
     "frameworks": {"jax": ..., "flax": ..., "torch": ..., "safetensors": ..., ...},
     "source": "flax" | "torch" | "torch_xla", "created_utc": "2025-..."}

``content_hash`` is SHA-256 over a line ``config|<config digest>`` (``bundle.config_digest``: the
config as canonical JSON) and then, for each tensor in canonical order, a line ``name|dtype|shape``
and its C-order bytes: it covers the config, names, shapes, dtypes and values, and does not depend on
the order safetensors happens to lay tensors out in the file. The config line matters: shapes do not
pin ``n_head``, ``ln_eps`` or ``dropout`` (n_head 2 and 4 give the same tensors), so a file whose
config was edited would otherwise load as another model. Version 1 manifests hashed the tensors
alone; they are refused with a request to re-export.

Loading validates *everything* first — pickle magic, the safetensors structure (header length,
offsets that tile the file exactly: no truncation, no trailing bytes), the manifest's fields,
version, config, key sets, shapes, dtypes, the hash of the bytes actually read — and only then
copies into the model, so a refused file leaves the model exactly as it was. The bytes are parsed
by ``labkit.export.bundle.parse_safetensors``, the same checks a bundle gets; a refusal is a
:class:`WeightsError` (a ``BundleError``) naming the file. The hash is *integrity* only: it sits in
the file it protects. For *authenticity* ship a signed bundle (``labkit.export.bundle``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import pickle
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from labkit.export.atomic import write_file
from labkit.export.bundle import (MAX_HEADER_BYTES, BundleError, config_digest, parse_json, parse_safetensors,
                                  tensors_from)
from labkit.runtime import versions
from labkit.gpt.config import GPTConfig, param_shapes
from labkit.gpt.convert import flat_params_numpy, load_flat_params

MANIFEST_KEY = "labkit_manifest"  # safetensors metadata key holding the manifest JSON
FORMAT = "labkit.models.weights"
MANIFEST_VERSION = 2  # 2: the content hash covers the config too (1 hashed the tensors alone)
SUPPORTED_VERSIONS = (2,)
DTYPE = "float32"  # the canonical storage dtype: fp32 copies and transposes are exact
PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt", ".joblib")
_FRAMEWORKS = ("jax", "flax", "torch", "torch_xla", "safetensors", "numpy")
SOURCES = ("flax", "torch", "torch_xla")  # the framework the weights were trained in


class WeightsError(BundleError):
    """A weights file that labkit refuses to load; the message says why and what to do (Lab 05)."""


def content_hash(flat: dict[str, np.ndarray], names: list[str] | None = None,
                 config: dict[str, Any] | None = None) -> str:
    """SHA-256 hex over the config's digest, then name|dtype|shape + bytes of each tensor in order (Lab 05)."""
    h = hashlib.sha256()
    if config is not None:  # what the shapes do not pin (n_head, ln_eps, dropout) is covered too
        h.update(f"config|{config_digest(config)}\n".encode())
    for name in names if names is not None else list(flat):
        a = np.ascontiguousarray(flat[name])
        h.update(f"{name}|{a.dtype.name}|{','.join(map(str, a.shape))}\n".encode())
        h.update(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())  # little-endian bytes
    return h.hexdigest()


def make_manifest(flat: dict[str, np.ndarray], cfg: GPTConfig, source: str) -> dict[str, Any]:
    """The manifest dict for a canonical flat dict of `cfg` (Lab 05)."""
    names = list(param_shapes(cfg))  # canonical order
    return {
        "format": FORMAT,
        "manifest_version": MANIFEST_VERSION,
        "config": asdict(cfg),
        "tensors": [[n, flat[n].dtype.name, list(flat[n].shape)] for n in names],
        "sha256": content_hash(flat, names, asdict(cfg)),
        "frameworks": {k: v for k, v in versions.collect().items() if k in _FRAMEWORKS or k == "python"},
        "source": source,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def weights_bytes(model: Any, source: str | None = None) -> tuple[bytes, dict[str, Any]]:
    """A FlaxGPT/TorchGPT as safetensors bytes with its manifest -> (bytes, manifest) (Lab 05)."""
    from safetensors.numpy import save

    if source is not None and source not in SOURCES:  # the manifest says where the weights come from
        raise WeightsError(f"source must be one of {SOURCES} (or None: from the model), got {source!r}")
    _check_model(model, "weights_bytes")
    flat = flat_params_numpy(model)  # fp32, PyTorch layout, on the host (works for XLA tensors too)
    is_torch = any(c.__module__.startswith("torch.") for c in type(model).__mro__)
    manifest = make_manifest(flat, model.cfg, source or ("torch" if is_torch else "flax"))
    return save(flat, metadata={MANIFEST_KEY: json.dumps(manifest)}), manifest


def _check_model(model: Any, call: str) -> None:
    """A FlaxGPT or TorchGPT (it has .cfg): a state_dict or a dict of arrays is not one."""
    if not isinstance(getattr(model, "cfg", None), GPTConfig):
        raise WeightsError(f"{call} needs the course model (TorchGPT(cfg) or FlaxGPT), got {type(model).__name__}"
                           + ("; a state_dict has no config: pass the model itself" if isinstance(model, dict) else ""))


def save_weights(model: Any, path: str | Path, source: str | None = None) -> dict[str, Any]:
    """Write a FlaxGPT/TorchGPT to `path` (.safetensors) with its manifest; returns the manifest (Lab 05).

    Written to a temporary file beside `path`, fsync-ed, then renamed over it: a failure (a full
    disk, an interrupt) leaves the previous file exactly as it was.
    """
    p = Path(path)
    if p.suffix != ".safetensors":
        raise WeightsError(f"save_weights writes safetensors: name the file *.safetensors, not {p.name!r}")
    if p.is_dir():
        raise WeightsError(f"{p} is a folder: name a file, e.g. {str(p / 'model.safetensors')!r}")
    blocker = next((q for q in p.parents if q.exists() and not q.is_dir()), None)
    if blocker is not None:
        raise WeightsError(f"{blocker} is a file, so {p.name} cannot be written under it: pick another folder")
    data, manifest = weights_bytes(model, source)
    p.parent.mkdir(parents=True, exist_ok=True)
    write_file(p, data)
    return manifest


def _head(p: Path, n: int) -> bytes:
    """The first n bytes of a file (b"" if absent), without reading the rest of a large checkpoint."""
    if not p.is_file():
        return b""
    with p.open("rb") as f:
        return f.read(n)


def refuse_pickle(path: str | Path) -> None:
    """Raise WeightsError if `path` is a pickle / torch.save file (by magic bytes or suffix) (Lab 05)."""
    p = Path(path)
    head = _head(p, 16)
    why = ""
    if head[:4] == b"PK\x03\x04":
        why = "it is a zip archive, the torch.save format, which stores a pickle inside"
    elif len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        why = f"it starts with pickle protocol {head[1]} magic bytes"
    elif p.suffix.lower() in PICKLE_SUFFIXES:
        why = f"its suffix {p.suffix!r} is a pickle/torch.save format"
    if why:
        raise WeightsError(
            f"refusing to load {p.name}: {why}. Unpickling runs whatever code the file contains, "
            "so labkit loads only .safetensors. If you trust the file, convert it once with "
            "labkit.export.weights.convert_torch_checkpoint (torch.load(..., weights_only=True)).")


def _checked_header(p: Path, data: bytes | None = None) -> tuple[dict, dict[str, str]]:
    """(tensor index, metadata) of a safetensors file after its structure checks; WeightsError otherwise."""
    if not p.is_file():
        raise WeightsError(f"no weights file at {p}")
    refuse_pickle(p)
    if data is None:  # header only: a checkpoint may be large
        with p.open("rb") as f:
            head = f.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else 0
            head += f.read(min(n, MAX_HEADER_BYTES))
        data, total = head, p.stat().st_size
    else:
        total = len(data)
    if len(data) >= 9 and data[8:9] != b"{":  # 8-byte header length, then the JSON header
        raise WeightsError(f"{p.name} is not a safetensors file (no JSON header after 8 bytes)")
    try:
        index, meta, _ = parse_safetensors(data, p.name, total)
    except BundleError as e:
        raise WeightsError(str(e)) from None
    return index, meta


def _parse_manifest(p: Path, meta: dict[str, str]) -> dict[str, Any]:
    """The labkit manifest from safetensors metadata, with its fields and types checked."""
    if MANIFEST_KEY not in meta:
        raise WeightsError(f"{p.name} has no labkit manifest (metadata key {MANIFEST_KEY!r}); "
                           "write it with labkit.export.weights.save_weights")
    manifest = parse_json(p.name, meta[MANIFEST_KEY], "the manifest is not valid JSON", WeightsError)
    if not isinstance(manifest, dict):
        raise WeightsError(f"{p.name}: the manifest is a JSON {type(manifest).__name__}, not an object")
    if manifest.get("format") != FORMAT:
        raise WeightsError(f"{p.name}: manifest format {manifest.get('format')!r}, expected {FORMAT!r}")
    v = manifest.get("manifest_version")
    if v not in SUPPORTED_VERSIONS:
        old = " (version 1 hashed the tensors but not the config)" if v == 1 else ""
        raise WeightsError(f"{p.name}: unsupported manifest_version {v!r}{old}; this labkit reads "
                           f"{list(SUPPORTED_VERSIONS)}. Upgrade labkit or re-export the weights.")
    for k, typ in (("config", dict), ("tensors", list), ("sha256", str)):
        if not isinstance(manifest.get(k), typ):
            got = "missing" if k not in manifest else f"a {type(manifest[k]).__name__}"
            raise WeightsError(f"{p.name}: manifest field {k!r} is {got}, expected a {typ.__name__}; re-export the weights")
    if not all(isinstance(t, list) and len(t) == 3 for t in manifest["tensors"]):
        raise WeightsError(f"{p.name}: manifest 'tensors' must list [name, dtype, shape] entries")
    return manifest


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of a labkit safetensors file, reading only its header (Lab 05)."""
    p = Path(path)
    return _parse_manifest(p, _checked_header(p)[1])


def _problems(have: dict[str, tuple[str, tuple[int, ...]]], want: dict[str, tuple[int, ...]],
              what: str) -> list[str]:
    """Human-readable differences between {name: (dtype, shape)} and the canonical shapes."""
    out = []
    missing, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
    if missing:
        out.append(f"{what} is missing {len(missing)} key(s): {missing[:4]}{'...' if len(missing) > 4 else ''}")
    if extra:
        out.append(f"{what} has {len(extra)} unexpected key(s): {extra[:4]}{'...' if len(extra) > 4 else ''}")
    for name in want:
        if name in have:
            dtype, shape = have[name]
            if tuple(shape) != tuple(want[name]):
                out.append(f"{what}: {name} has shape {tuple(shape)}, expected {tuple(want[name])}")
            if dtype != DTYPE:
                out.append(f"{what}: {name} has dtype {dtype}, expected {DTYPE}")
    return out


def read_weights(path: str | Path, cfg: GPTConfig | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Validated (flat dict, manifest) from a labkit safetensors file; WeightsError on any mismatch (Lab 05)."""
    if not isinstance(path, (str, os.PathLike)):
        raise WeightsError(f"path must be the weights file's path (str or Path), got {type(path).__name__} "
                           f"{path!r:.60}; e.g. load_weights('gpt.safetensors', model)")
    p = Path(path)
    _checked_header(p)  # pickle, structure: before reading a possibly large file in full
    data = p.read_bytes()  # read once: what is checked is what is loaded
    index, meta = _checked_header(p, data)
    manifest = _parse_manifest(p, meta)
    try:
        file_cfg = GPTConfig(**manifest["config"])
    except (TypeError, ValueError) as e:
        raise WeightsError(f"{p.name}: manifest config is not a valid GPTConfig ({e})") from None
    if cfg is not None and file_cfg != cfg:
        diff = {k: (v, getattr(cfg, k)) for k, v in asdict(file_cfg).items() if getattr(cfg, k) != v}
        raise WeightsError(f"{p.name} holds weights for a different model: (file, model) differ in {diff}")
    want = param_shapes(file_cfg)
    try:
        listed = {n: (dt, tuple(s)) for n, dt, s in manifest["tensors"]}
    except TypeError:
        raise WeightsError(f"{p.name}: manifest 'tensors' entries are not [name, dtype, [shape]]") from None
    on_disk = {n: (dt, shape) for n, (dt, shape, _, _) in index.items()}
    problems = _problems(listed, want, "the manifest") + _problems(on_disk, want, "the file")
    if not problems and listed != on_disk:
        problems.append("the manifest's tensor list does not describe the file's tensors")
    if problems:
        raise WeightsError(f"{p.name} does not match {file_cfg}:\n  " + "\n  ".join(problems))
    flat = tensors_from(data, index)  # raw bytes -> numpy; no code runs
    got = content_hash(flat, list(want), manifest["config"])
    if got != manifest["sha256"]:
        raise WeightsError(f"{p.name}: content hash mismatch — the manifest says sha256 "
                           f"{manifest['sha256'][:16]}..., the tensors hash to {got[:16]}.... "
                           "The file (its config or its tensors) was modified or corrupted after it was written; "
                           "re-export it.")
    return {n: flat[n] for n in want}, manifest


def load_weights(path: str | Path, model: Any) -> Any:
    """Fill a FlaxGPT or TorchGPT from a validated weights file; untouched if refused (Lab 05)."""
    _check_model(model, "load_weights")
    flat, _ = read_weights(path, model.cfg)  # raises before the model is touched
    return load_flat_params(model, flat)


def load_torch_state_dict(path: str | Path, cfg: GPTConfig, device: Any = "cpu") -> dict[str, Any]:
    """A validated torch state_dict on `device` for TorchGPT(cfg).load_state_dict (Lab 05)."""
    import torch

    flat, _ = read_weights(path, cfg)
    return {k: torch.from_numpy(v).to(device) for k, v in flat.items()}


def convert_torch_checkpoint(src: str | Path, dst: str | Path, cfg: GPTConfig) -> dict[str, Any]:
    """A trusted torch.save state_dict (e.g. torch-xla's xm.save) -> labkit safetensors (Lab 05).

    The one place labkit reads a pickle, and only with ``weights_only=True``: torch's
    restricted unpickler then accepts tensors and plain containers and nothing callable.
    """
    import torch

    from labkit.gpt.torch_model import TorchGPT

    if not Path(src).is_file():
        raise WeightsError(f"no checkpoint file at {src}: pass the path of a torch.save state_dict")
    try:
        state = torch.load(str(src), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # weights_only refused a global: torch's own message says which
        raise
    except Exception as e:  # a truncated zip, a non-torch file: "cannot read", with the file named
        raise WeightsError(f"{Path(src).name}: torch.load(weights_only=True) cannot read it ({type(e).__name__}: "
                           f"{str(e)[:160]}); the file is truncated, corrupted or not a state_dict") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightsError(f"{Path(src).name} holds a {type(state).__name__} that is not a state_dict "
                           "{name: tensor}; save model.state_dict()")
    flat = {k: v.detach().to(torch.float32).numpy() for k, v in state.items()}
    problems = _problems({k: (v.dtype.name, v.shape) for k, v in flat.items()}, param_shapes(cfg),
                         Path(src).name)
    if problems:
        raise WeightsError("cannot convert: " + "; ".join(problems))
    model = load_flat_params(TorchGPT(cfg), flat)
    return save_weights(model, dst, source="torch")
