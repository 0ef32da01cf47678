"""Weights that move between frameworks provably unchanged: safetensors + a manifest (Lab 05).

``save_weights(model, path)`` writes a FlaxGPT's or TorchGPT's canonical flat dict
(``labkit.gpt.config.param_shapes`` names, PyTorch layout, fp32) to a **safetensors** file;
``load_weights(path, model)`` fills either framework's model from it. Safetensors is a JSON
header plus raw little-endian bytes: loading never runs code from the file, unlike pickle
(``torch.save`` / ``.pt`` / ``.bin``), which labkit refuses to open.

**Manifest** — stored *inside* the file, as JSON under the safetensors metadata key
``"labkit_manifest"`` (one file travels; the header is readable without loading tensors)::

    {"format": "labkit.models.weights", "manifest_version": 1,
     "config": {GPTConfig fields},
     "tensors": [[name, dtype, shape], ...],          # canonical order = param_shapes(cfg)
     "sha256": "...",                                 # content_hash(), see below
     "frameworks": {"jax": ..., "flax": ..., "torch": ..., "safetensors": ..., ...},
     "source": "flax" | "torch" | "torch_xla", "created_utc": "2025-..."}

``content_hash`` is SHA-256 over, for each tensor in canonical order, a line
``name|dtype|shape`` and then its C-order bytes: it covers names, shapes, dtypes and values,
and does not depend on the order safetensors happens to lay tensors out in the file.

Loading validates *everything* first — pickle magic, safetensors header, manifest version,
config, key sets, shapes, dtypes, the hash of the bytes actually read — and only then copies
into the model, so a refused file leaves the model exactly as it was.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from labkit.runtime import versions
from labkit.gpt.config import GPTConfig, param_shapes
from labkit.gpt.convert import flat_params_numpy, load_flat_params

MANIFEST_KEY = "labkit_manifest"  # safetensors metadata key holding the manifest JSON
FORMAT = "labkit.models.weights"
MANIFEST_VERSION = 1
SUPPORTED_VERSIONS = (1,)
DTYPE = "float32"  # the canonical storage dtype: fp32 copies and transposes are exact
PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt", ".joblib")
_FRAMEWORKS = ("jax", "flax", "torch", "torch_xla", "safetensors", "numpy")


class WeightsError(ValueError):
    """A weights file that labkit refuses to load; the message says why and what to do (Lab 05)."""


def content_hash(flat: dict[str, np.ndarray], names: list[str] | None = None) -> str:
    """SHA-256 hex over name|dtype|shape + bytes of each tensor, in canonical order (Lab 05)."""
    h = hashlib.sha256()
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
        "sha256": content_hash(flat, names),
        "frameworks": {k: v for k, v in versions.collect().items() if k in _FRAMEWORKS or k == "python"},
        "source": source,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def save_weights(model: Any, path: str | Path, source: str | None = None) -> dict[str, Any]:
    """Write a FlaxGPT/TorchGPT to `path` (.safetensors) with its manifest; returns the manifest (Lab 05)."""
    from safetensors.numpy import save_file

    p = Path(path)
    if p.suffix != ".safetensors":
        raise WeightsError(f"save_weights writes safetensors: name the file *.safetensors, not {p.name!r}")
    flat = flat_params_numpy(model)  # fp32, PyTorch layout, on the host (works for XLA tensors too)
    is_torch = any(c.__module__.startswith("torch.") for c in type(model).__mro__)
    src = source or ("torch" if is_torch else "flax")
    manifest = make_manifest(flat, model.cfg, src)
    p.parent.mkdir(parents=True, exist_ok=True)
    save_file(flat, str(p), metadata={MANIFEST_KEY: json.dumps(manifest)})
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


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of a labkit safetensors file, reading only its header (Lab 05)."""
    from safetensors import safe_open

    p = Path(path)
    if not p.is_file():
        raise WeightsError(f"no weights file at {p}")
    refuse_pickle(p)
    head = _head(p, 9)
    if len(head) < 9 or head[8:9] != b"{":  # 8-byte header length, then the JSON header
        raise WeightsError(f"{p.name} is not a safetensors file (no JSON header after 8 bytes)")
    with safe_open(str(p), framework="np") as f:
        meta = f.metadata() or {}
    if MANIFEST_KEY not in meta:
        raise WeightsError(f"{p.name} has no labkit manifest (metadata key {MANIFEST_KEY!r}); "
                           "write it with labkit.export.weights.save_weights")
    try:
        manifest = json.loads(meta[MANIFEST_KEY])
    except json.JSONDecodeError as e:
        raise WeightsError(f"{p.name}: the manifest is not valid JSON ({e})") from None
    if manifest.get("format") != FORMAT:
        raise WeightsError(f"{p.name}: manifest format {manifest.get('format')!r}, expected {FORMAT!r}")
    v = manifest.get("manifest_version")
    if v not in SUPPORTED_VERSIONS:
        raise WeightsError(f"{p.name}: unsupported manifest_version {v!r}; this labkit reads "
                           f"{list(SUPPORTED_VERSIONS)}. Upgrade labkit or re-export the weights.")
    return manifest


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
    from safetensors import safe_open
    from safetensors.numpy import load_file

    p = Path(path)
    manifest = read_manifest(p)
    try:
        file_cfg = GPTConfig(**manifest["config"])
    except (TypeError, ValueError) as e:
        raise WeightsError(f"{p.name}: manifest config is not a valid GPTConfig ({e})") from None
    if cfg is not None and file_cfg != cfg:
        diff = {k: (v, getattr(cfg, k)) for k, v in asdict(file_cfg).items() if getattr(cfg, k) != v}
        raise WeightsError(f"{p.name} holds weights for a different model: (file, model) differ in {diff}")
    want = param_shapes(file_cfg)
    listed = {n: (dt, tuple(s)) for n, dt, s in manifest["tensors"]}
    with safe_open(str(p), framework="np") as f:  # header only: names, dtypes, shapes
        on_disk = {n: (_np_dtype(f.get_slice(n).get_dtype()), tuple(f.get_slice(n).get_shape()))
                   for n in f.keys()}
    problems = _problems(listed, want, "the manifest") + _problems(on_disk, want, "the file")
    if not problems and listed != on_disk:
        problems.append("the manifest's tensor list does not describe the file's tensors")
    if problems:
        raise WeightsError(f"{p.name} does not match {file_cfg}:\n  " + "\n  ".join(problems))
    flat = load_file(str(p))  # raw bytes -> numpy; no code runs
    got = content_hash(flat, list(want))
    if got != manifest["sha256"]:
        raise WeightsError(f"{p.name}: content hash mismatch — the manifest says sha256 "
                           f"{manifest['sha256'][:16]}..., the tensors hash to {got[:16]}.... "
                           "The file was modified or corrupted after it was written; re-export it.")
    return {n: flat[n] for n in want}, manifest


def _np_dtype(st_dtype: str) -> str:
    """safetensors dtype code ("F32") -> numpy name ("float32")."""
    table = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
             "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}
    return table.get(st_dtype, st_dtype)


def load_weights(path: str | Path, model: Any) -> Any:
    """Fill a FlaxGPT or TorchGPT from a validated weights file; untouched if refused (Lab 05)."""
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

    state = torch.load(str(src), map_location="cpu", weights_only=True)
    if not isinstance(state, dict):
        raise WeightsError(f"{Path(src).name} holds a {type(state).__name__}, not a state_dict")
    flat = {k: v.detach().to(torch.float32).numpy() for k, v in state.items()}
    problems = _problems({k: (v.dtype.name, v.shape) for k, v in flat.items()}, param_shapes(cfg),
                         Path(src).name)
    if problems:
        raise WeightsError("cannot convert: " + "; ".join(problems))
    model = load_flat_params(TorchGPT(cfg), flat)
    return save_weights(model, dst, source="torch")
