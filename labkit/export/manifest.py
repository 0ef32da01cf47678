"""A bundle's manifest: its error type, digests, schema and the identity a server pins (Lab 05).

``bundle.json`` names the model config, every file's size and SHA-256 and every program's platforms
(``labkit.export.bundle`` reads it, ``labkit.export.publish`` writes it). Its optional ``name`` and
``version`` say *which* model this is: a signature proves who published a manifest, not that it is the
model this server meant to load. Without them, any other bundle the same key signed (another model of the
same config, an older release) verifies just as well; ``verify(..., expected={"name": ..., "version": ...})``
refuses one whose identity is not the one pinned in the serving config.

Like ``bundle``, this file imports nothing from labkit: a serving process loads both by path.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

FORMAT, VERSION = "labkit.export.bundle", 1
MANIFEST, SIGNATURE, WEIGHTS = "bundle.json", "bundle.sig", "weights.safetensors"
IDENTITY = ("name", "version")  # optional str fields that say which model a manifest is; signed with it
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")  # no folders, no "..": files stay in the bundle


class BundleError(ValueError):
    """A bundle or weights file the loader refuses; the message names the file and the problem (Lab 05)."""


def sha256(data: bytes) -> str:
    """Hex SHA-256 of bytes (Lab 05)."""
    return hashlib.sha256(data).hexdigest()


def config_digest(config: dict[str, Any]) -> str:
    """SHA-256 of a config dict in canonical JSON (sorted keys): what binds programs to weights (Lab 05)."""
    return sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode())


def program_tag(config: dict[str, Any], kind: str = "forward") -> str:
    """The function name a program is exported under, e.g. gpt_forward_cfg1a2b...; it travels inside it (Lab 05)."""
    return f"gpt_{kind}_cfg{config_digest(config)[:16]}"


def parse_json(where: str, data: bytes | str, what: str = "not valid JSON",
               error: type[BundleError] = BundleError) -> Any:
    """json.loads that refuses with `error` naming the file: bad UTF-8, bad JSON, nesting too deep (Lab 05)."""
    try:
        return json.loads(data)
    except RecursionError:  # "[[[[..." 100k deep: the parser recurses once per level and runs out of stack
        raise error(f"{where}: {what} (nested too deeply to parse; a labkit file is a few levels deep)") from None
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise error(f"{where}: {what} ({e})") from None


def ints(x: Any) -> bool:
    """A JSON list of ints >= 0; bools are ints to Python, so the type is compared exactly (Lab 05)."""
    return isinstance(x, list) and all(type(i) is int and i >= 0 for i in x)


def _fields(where: str, prefix: str, obj: Any, fields: dict[str, type]) -> None:
    """Refuse `obj` unless it is an object whose `fields` have these JSON types, its "file" a plain name."""
    if not isinstance(obj, dict):
        raise BundleError(f"{where}: {prefix.rstrip('.') or 'manifest'} is not an object")
    for k, typ in fields.items():
        if type(obj.get(k)) is not typ:  # exact, as json.loads builds them: true is not a byte count
            got = "missing" if k not in obj else f"a {type(obj[k]).__name__}"
            raise BundleError(f"{where}: field '{prefix}{k}' is {got}, expected a {typ.__name__}")
    if "file" in fields and not _SAFE_NAME.match(obj["file"]):
        raise BundleError(f"{where}: {prefix}file {obj['file']!r} is not a plain file name in the bundle")


def check_schema(m: Any, where: str) -> None:
    """Refuse a manifest whose shape is wrong, naming the first missing or mistyped field (Lab 05)."""
    if not isinstance(m, dict):
        raise BundleError(f"{where}: the manifest is a JSON {type(m).__name__}, not an object")
    if m.get("format") != FORMAT:
        raise BundleError(f"{where}: format {m.get('format')!r}, expected {FORMAT!r}")
    if m.get("bundle_version") != VERSION:
        raise BundleError(f"{where}: bundle_version {m.get('bundle_version')!r}; this labkit reads {VERSION}. "
                          "Upgrade labkit or re-export the bundle.")
    entry = {"file": str, "bytes": int, "sha256": str}
    # The top level first: the checks below iterate "weights" and "programs", so they must be objects.
    _fields(where, "", m, {"config": dict, "config_sha256": str, "weights": dict, "programs": dict})
    _fields(where, "weights.", m["weights"], {**entry, "tensors": list})
    for k, p in m["programs"].items():
        _fields(where, f"programs.{k}.", p, {**entry, "platforms": list, "config_sha256": str})
    for i, t in enumerate(m["weights"]["tensors"]):
        if not (isinstance(t, list) and len(t) == 4 and isinstance(t[0], str) and isinstance(t[1], str)
                and ints(t[2]) and isinstance(t[3], str)):
            raise BundleError(f"{where}: weights.tensors[{i}] must be [name, dtype, shape, sha256], got {str(t)[:80]}")
    for k, p in m["programs"].items():
        if not all(isinstance(x, str) for x in p["platforms"]):
            raise BundleError(f"{where}: programs.{k}.platforms must list platform names, got {p['platforms']}")
    bad = [k for k in IDENTITY if k in m and not isinstance(m[k], str)]
    if bad:
        raise BundleError(f"{where}: field '{bad[0]}' is a {type(m[bad[0]]).__name__}, expected a str")


def check_identity(m: dict[str, Any], expected: dict[str, str] | None, where: str) -> None:
    """Refuse a manifest whose name/version are not the ones the server pinned (substitution, rollback) (Lab 05)."""
    if expected is None:
        return
    if not isinstance(expected, dict) or not expected or set(expected) - set(IDENTITY):
        raise BundleError(f"expected must map some of {list(IDENTITY)} to str, got {str(expected)[:80]}")
    for k, want in expected.items():
        if m.get(k) != want:
            got = f"{m[k]!r}" if k in m else "missing"
            raise BundleError(f"{where}: {k} is {got}, the server expects {want!r}: another model (or release) than "
                              "the one pinned, perhaps signed by the same key; deploy the bundle you meant")


# A custom call in a StableHLO module's text. MLIR prints its target as a symbol: bare where the name is an
# identifier (`@shape_assertion`, `@__gpu$xla.gpu.triton`), quoted with \XX escapes otherwise
# (`@"weird-name"`); the generic form carries it as `call_target_name = "..."`.
_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_PRETTY = re.compile(r'stablehlo\.custom_call @(?:' + _QUOTED + r'|([A-Za-z_][\w$.]*))')
_GENERIC = re.compile(r'"stablehlo\.custom_call"\(.*?call_target_name = ' + _QUOTED)


def _unescape(s: str) -> str:
    """MLIR's string escapes (\\\\ and \\XX hex bytes) undone (Lab 05)."""
    raw = re.sub(r"\\(\\|[0-9A-Fa-f]{2})", lambda m: "\\" if m[1] == "\\" else chr(int(m[1], 16)), s)
    return raw.encode("latin-1", "replace").decode("utf-8", "replace")


def custom_call_targets(text: str) -> list[str]:
    """(Lab 05) The target of every custom call in a StableHLO module's text, one per op, in order.

    Fails closed: every appearance of ``custom_call`` in the text must be an op whose target was read
    (a name the patterns miss, another dialect's custom call, the word inside a string), else BundleError.
    """
    found = [(m.start(), _unescape(m[1]) if m[1] is not None else m[2]) for m in _PRETTY.finditer(text)]
    found += [(m.start(), _unescape(m[1])) for m in _GENERIC.finditer(text)]
    if (n := text.count("custom_call")) != len(found):
        raise BundleError(f"the program mentions custom_call {n} time(s) but only {len(found)} custom-call "
                          "target(s) could be read: refusing a program whose native calls cannot all be named")
    return [name for _, name in sorted(found)]
