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


def test_custom_call_targets_reads_bare_quoted_and_generic_names() -> None:
    # MLIR quotes a symbol that is not an identifier (`weird-name`) and escapes `"` and `\` as \XX; the old scan
    # (`custom_call @([\w.$-]+)`) missed quoted names, and the course's artifact_facts cut `__gpu$xla...` at `$`.
    text = ('%0 = stablehlo.custom_call @shape_assertion(%a) {has_side_effect = true}\n'
            '%1 = stablehlo.custom_call @"weird-name"(%b) : (tensor<2xf32>) -> tensor<2xf32>\n'
            '%2 = "stablehlo.custom_call"(%c) {api_version = 2 : i32, call_target_name = "a\\22b\\5Cc"} : ()\n'
            '%3 = stablehlo.custom_call @__gpu$xla.gpu.triton(%d)\n')
    assert manifest.custom_call_targets(text) == ["shape_assertion", "weird-name", 'a"b\\c', "__gpu$xla.gpu.triton"]
    assert manifest.custom_call_targets("%0 = stablehlo.add %a, %b") == []


@pytest.mark.parametrize("text", ['%1 = mhlo.custom_call @x(%b)',  # another dialect's custom call
                                  '%1 = stablehlo.custom_call @1bad(%b)',  # a form the patterns do not read
                                  'backend_config = "no custom_call here"\n'
                                  '%1 = stablehlo.custom_call @"x"(%b)'])  # the word inside a string
def test_custom_call_targets_refuses_what_it_cannot_name(text: str) -> None:
    with pytest.raises(BundleError, match=r"mentions custom_call \d time\(s\) but only \d custom-call target"):
        manifest.custom_call_targets(text)
