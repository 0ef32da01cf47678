"""labkit.export.manifest: the schema and the pinned identity, refused by field name (Lab 05)."""

from __future__ import annotations

from typing import Any

import pytest

from labkit.export import manifest
from labkit.export.manifest import BundleError


def _good() -> dict[str, Any]:
    cfg = {"n_layer": 2}
    return {"format": manifest.FORMAT, "bundle_version": manifest.VERSION, "config": cfg,
            "config_sha256": manifest.config_digest(cfg), "name": "lab05-gpt", "version": "3",
            "weights": {"file": manifest.WEIGHTS, "bytes": 8, "sha256": "0" * 64,
                        "tensors": [["w", "float32", [2], "0"]]},
            "programs": {}}


def test_schema_accepts_a_good_manifest_and_names_the_bad_field() -> None:
    manifest.check_schema(_good(), "b/bundle.json")
    for edit, match in ((lambda m: m.update(version=3), "field 'version' is a int, expected a str"),
                        (lambda m: m["weights"].update(bytes=True), "field 'weights.bytes' is a bool"),
                        (lambda m: m["weights"].update(file="../x"), "is not a plain file name")):
        m = _good()
        edit(m)
        with pytest.raises(BundleError, match=rf"^b/bundle.json: .*{match}"):
            manifest.check_schema(m, "b/bundle.json")


def test_identity_is_checked_only_when_pinned() -> None:
    m = _good()
    manifest.check_identity(m, None, "w")  # nothing pinned: nothing checked
    manifest.check_identity(m, {"name": "lab05-gpt", "version": "3"}, "w")
    with pytest.raises(BundleError, match="w: version is '3', the server expects '4'"):
        manifest.check_identity(m, {"version": "4"}, "w")
    del m["name"]
    with pytest.raises(BundleError, match="w: name is missing"):
        manifest.check_identity(m, {"name": "lab05-gpt"}, "w")
