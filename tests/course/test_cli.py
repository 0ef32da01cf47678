"""labkit.course.cli: `labkit verify` on good, tampered and malformed bundles (exit codes, messages) (Lab 05)."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from flax import nnx

from labkit.course import cli
from labkit.export import bundle, publish, routes
from labkit.gpt.config import get_config
from labkit.gpt.flax_model import FlaxGPT
from tests.export.bundle_cases import BAD, DEEP, P, _entry, _rehash

SK, PK = publish.new_ed25519_key()


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cli")
    routes.save_bundle(FlaxGPT(get_config("test"), rngs=nnx.Rngs(0)), d / "gpt", key=SK)
    routes.save_bundle(FlaxGPT(get_config("test", n_head=4), rngs=nnx.Rngs(1)), d / "nhead4")  # same shapes
    (d / "pub.pem").write_bytes(PK)
    return d


def _run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["verify", *argv])
    out, err = capsys.readouterr()
    return code, out.strip(), err.strip()


def test_verify_good_bundle_one_line(signed: Path, capsys: pytest.CaptureFixture) -> None:
    code, out, err = _run(capsys, str(signed / "gpt"), "--key", str(signed / "pub.pem"))
    assert code == 0 and err == "" and len(out.splitlines()) == 1
    assert out.startswith("OK gpt: GPT 2x32") and "signature: ed25519" in out
    assert out.endswith("; 1 program(s) checked against the config; name/version not pinned (--name, --version)")
    code, out, _ = _run(capsys, str(signed / "gpt" / "bundle.json"))
    assert code == 0 and "signature: unchecked (no key given)" in out


def test_verify_tampered_bundle(signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = Path(shutil.copytree(signed / "gpt", tmp_path / "gpt"))
    w = root / bundle.WEIGHTS
    raw = bytearray(w.read_bytes())
    raw[-3] ^= 0x01
    w.write_bytes(raw)
    code, out, err = _run(capsys, str(root))
    assert code == 1 and out == "" and "REFUSED gpt/weights.safetensors: SHA-256" in err
    # The editor recomputes the digests: integrity passes, the signature does not.
    m = json.loads((root / bundle.MANIFEST).read_text())
    index, _, _ = bundle.parse_safetensors(bytes(raw), "w")
    m["weights"].update(bytes=len(raw), sha256=bundle.sha256(bytes(raw)),
                        tensors=[[n, dt, list(s), bundle.sha256(bytes(raw[b:e]))] for n, (dt, s, b, e) in index.items()])
    (root / bundle.MANIFEST).write_text(json.dumps(m))
    assert _run(capsys, str(root))[0] == 0
    code, _, err = _run(capsys, str(root), "--key", str(signed / "pub.pem"))
    assert code == 1 and "REFUSED gpt/bundle.json: the signature does not match" in err


def test_verify_malformed_inputs(signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = Path(shutil.copytree(signed / "gpt", tmp_path / "gpt"))
    (root / bundle.MANIFEST).write_text("[]")
    code, _, err = _run(capsys, str(root))
    assert code == 1 and "gpt/bundle.json: the manifest is a JSON list" in err
    code, _, err = _run(capsys, str(tmp_path / "nowhere"))
    assert code == 1 and "nowhere: no such file or folder" in err  # bundle.verify says so since d482d2e
    code, _, err = _run(capsys, str(signed / "gpt"), "--key", str(tmp_path / "missing.pem"))
    assert code == 1 and "no key file at" in err


def test_verify_refuses_in_one_line_never_a_traceback(signed: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    root = Path(shutil.copytree(signed / "gpt", tmp_path / "gpt"))
    m = json.loads((root / bundle.MANIFEST).read_text())
    m["weights"]["tensors"][0] = ["x"]  # valid JSON, wrong entry shape: once a raw ValueError
    (root / bundle.MANIFEST).write_text(json.dumps(m))
    code, out, err = _run(capsys, str(root))
    assert code == 1 and out == "" and err.count("\n") == 0
    assert "REFUSED gpt/bundle.json: weights.tensors[0] must be [name, dtype, shape, sha256], got ['x']" in err
    import torch

    torch.save({"a": torch.zeros(2)}, tmp_path / "model.pt")
    code, _, err = _run(capsys, str(tmp_path / "model.pt"))
    assert code == 1 and "REFUSED refusing to load model.pt" in err and "convert_torch_checkpoint" in err
    (tmp_path / "k1").write_bytes(b"k")
    code, _, err = _run(capsys, str(signed / "gpt"), "--key", str(tmp_path / "k1"))
    assert code == 1 and "REFUSED key file k1: an HMAC secret must be at least 16 bytes" in err


def _refused_in_one_line(capsys: pytest.CaptureFixture, match: str, *argv: str) -> None:
    code, out, err = _run(capsys, *argv)
    assert code == 1 and out == "" and len(err.splitlines()) == 1 and "Traceback" not in err
    assert re.search(match, err), err


@pytest.mark.parametrize("case", ["programs a list", "manifest nested 100000 deep", "offsets strings, digests recomputed",
                                  "weights manifest config a list, digests recomputed", "weights grown to 600 MB",
                                  "weights a link to a copy outside", "weights a folder"])
def test_verify_refuses_audited_inputs(case: str, signed: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture) -> None:
    root = Path(shutil.copytree(signed / "gpt", tmp_path / "gpt"))
    make, match = BAD[case]  # the loader's own table: the command says what the loader says
    make(root)
    _refused_in_one_line(capsys, "labkit verify: REFUSED " + match, str(root))


def test_verify_refuses_deep_signature_and_malformed_bare_weights(signed: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    root = Path(shutil.copytree(signed / "gpt", tmp_path / "gpt"))
    (root / bundle.SIGNATURE).write_text(DEEP)
    _refused_in_one_line(capsys, r"gpt/bundle.sig: not a labkit signature file \(nested too deeply",
                         str(root), "--key", str(signed / "pub.pem"))
    x = tmp_path / "x.safetensors"
    shutil.copy(signed / "gpt" / bundle.WEIGHTS, x)
    _entry(x, "data_offsets", lambda o: list(map(str, o)))
    _refused_in_one_line(capsys, r"REFUSED x.safetensors: malformed header entry for tensor", str(x))


def test_verify_checks_every_program(signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # n_head=4's program in an n_head=2 bundle, re-digested: the digests agree; only deserializing tells.
    root = Path(shutil.copytree(signed / "gpt", tmp_path / "gpt"))
    shutil.copy(signed / "nhead4" / P, root / P)
    _rehash(root)
    _refused_in_one_line(capsys, rf"REFUSED gpt/{P}: exported as 'gpt_forward_cfg\w+', .*different model config",
                         str(root))


def test_verify_without_jax_checks_the_digests_and_says_so(signed: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "jax", None)  # `import jax` now raises ImportError, as on a torch-only host
    code, out, err = _run(capsys, str(signed / "gpt"), "--key", str(signed / "pub.pem"))
    assert code == 0 and err == "" and len(out.splitlines()) == 1 and "signature: ed25519" in out
    assert "; programs not deserialized (jax is not installed here): digests only;" in out, out


def test_verify_bare_weights_file(signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    w = signed / "gpt" / bundle.WEIGHTS
    code, out, _ = _run(capsys, str(w))
    assert code == 0 and "integrity only: no signature" in out
    bad = tmp_path / "cut.safetensors"
    bad.write_bytes(w.read_bytes()[:-10])
    code, _, err = _run(capsys, str(bad))
    assert code == 1 and "cut.safetensors: 10 bytes missing (truncated)" in err
    assert _run(capsys, str(w), "--key", str(signed / "pub.pem"))[0] == 1


def test_gather_is_wired_to_its_own_parser(tmp_path, capsys) -> None:
    """`labkit gather` hands its arguments to labkit.course.gather.main (reports, then --out)."""
    from labkit.course import cli

    missing = tmp_path / "nothing.json"
    code = cli.main(["gather", str(missing), "--out", str(tmp_path / "out")])
    out = capsys.readouterr()
    assert f"skipped {missing}" in out.out  # the missing report is named with its reason
    assert code == 1  # nothing could be gathered


def test_run_bad_input_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    """`labkit run --timeout -5` / `--out FILE`: a clear message and exit 2, never a traceback (issue 20)."""
    from labkit.course import cli

    assert cli.main(["run", "00", "--timeout", "-5", "--out", str(tmp_path / "r")]) == 2
    assert "--timeout 1800" in capsys.readouterr().err
    afile = tmp_path / "afile"
    afile.write_text("")
    assert cli.main(["run", "00", "--out", str(afile)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as e:
        cli.main([*argv, "--help"])
    assert e.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines


def test_help_states_defaults_and_the_real_rules(capsys) -> None:
    """--out/--timeout say their defaults; --profile says auto's real rule; `lower` names the labs it covers."""
    from labkit.course import lowerables  # noqa: F401 - fills the registry
    from labkit.course.profile import FULL_MIN_MEMORY_GB
    from labkit.course.registry import REGISTRY

    run = _help(capsys, "run")
    assert "(default: build/run)" in run and "(default: 1800)" in run
    assert f"full on an accelerator with >= {FULL_MIN_MEMORY_GB} GB per device" in run and "smoke on a CPU or a smaller chip" in run
    top = _help(capsys)
    lowered = sorted({e.lab[:2] for e in REGISTRY.values()})
    assert f"lower the compiled functions registered for Labs {', '.join(lowered[:-1])} and {lowered[-1]}" in top
    assert "every lab's" not in top
    for command in ("list", "student"):
        assert "--labs-dir LABS_DIR" in _help(capsys, command)


def test_gather_refuses_a_bad_out_and_writes_nothing_when_nothing_gathered(tmp_path, capsys) -> None:
    out = tmp_path / "page"
    assert cli.main(["gather", str(tmp_path / "none.json"), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "no run report could be gathered from 1 path(s) (1 skipped, see above); nothing written" in err
    assert not (out / "index.html").exists() and not (out / "gathered.json").exists()
    afile = tmp_path / "afile"
    afile.write_text("")
    for bad, said in (("", "--out is empty ('')"), (str(afile), "is a file, not a folder")):
        assert cli.main(["gather", str(tmp_path), "--out", bad]) == 2
        err = capsys.readouterr().err
        assert said in err and "e.g. --out build/gathered" in err and "build/run" not in err


def test_verify_pins_name_and_version(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A signature binds no identity: an older release signed by the same key passes unless the shell pins it."""
    model = FlaxGPT(get_config("test"), rngs=nnx.Rngs(0))
    routes.save_bundle(model, tmp_path / "v0", key=SK, name="lab05-gpt", version="0")
    (tmp_path / "pub.pem").write_bytes(PK)
    key = ["--key", str(tmp_path / "pub.pem")]
    code, out, _ = _run(capsys, str(tmp_path / "v0"), *key)
    assert code == 0 and out.startswith("OK v0 (lab05-gpt 0)") and out.endswith("name/version not pinned (--name, --version)")
    code, out, _ = _run(capsys, str(tmp_path / "v0"), *key, "--name", "lab05-gpt", "--version", "0")
    assert code == 0 and out.endswith("; pinned name 'lab05-gpt', version '0'")
    code, out, err = _run(capsys, str(tmp_path / "v0"), *key, "--name", "lab05-gpt", "--version", "1")
    assert code == 1 and out == "" and err == ("labkit verify: REFUSED v0/bundle.json: version is '0', the server expects '1': "
                                               "another model (or release) than the one pinned, perhaps signed by the "
                                               "same key; deploy the bundle you meant")
    code, _, err = _run(capsys, str(tmp_path / "v0"), "--name", "other-gpt")  # a pin works without a key too
    assert code == 1 and "name is 'lab05-gpt', the server expects 'other-gpt'" in err


def test_verify_refuses_an_empty_pin(signed: Path, capsys: pytest.CaptureFixture) -> None:
    # `--name "$MODEL"` with MODEL unset passed as "not pinned", exit 0 (a bad-input probe)
    for flag in ("--name", "--version"):
        assert cli.main(["verify", str(signed / "gpt"), flag, ""]) == 2
        out, err = capsys.readouterr()
        field = flag[2:]
        assert out == "" and err == (f"labkit verify: {flag} is empty: pass the {field} the manifest must carry, "
                                     f"or leave {flag} out\n")
