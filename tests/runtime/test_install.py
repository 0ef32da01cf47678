"""labkit.runtime.install: the Colab/Kaggle bootstrap adds what is missing and never touches torch/jax."""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

import pytest

from labkit.runtime import install

ROOT = Path(__file__).resolve().parents[2]
COLAB = {"python": "3.12.11", "torch": "2.8.0+cu126", "jax": "0.7.2", "jaxlib": "0.7.2", "numpy": "2.0.2"}


def test_plan_installs_only_missing_and_pins_protected() -> None:
    found = {**COLAB, "jax": "0.10.2", "jaxlib": "0.10.2", "matplotlib": "3.10.0", "tqdm": "4.67.1"}
    p = install.plan(found, ("flax", "optax", "matplotlib", "tqdm"))
    assert p.install == ["flax", "optax"]
    assert p.pins == {"torch": "2.8.0+cu126", "jax": "0.10.2", "jaxlib": "0.10.2"}
    assert p.remedies == []


def test_out_of_range_jax_gets_a_remedy_not_a_reinstall() -> None:
    p = install.plan(COLAB, ("flax",))
    assert "jax" not in p.install and "jaxlib" not in p.install
    assert any("jax 0.7.2 is outside the supported range >= 0.10" in r and "Not reinstalling" in r for r in p.remedies)
    assert p.pins["jax"] == "0.7.2"  # and pip is told to keep it


def test_missing_torch_is_a_remedy() -> None:
    p = install.plan({"jax": "0.10.2", "jaxlib": "0.10.2"}, ("tqdm",), host="kaggle")
    assert any(r.startswith("torch is not installed") and "Settings > Environment" in r for r in p.remedies)


def test_ensure_runs_one_constrained_pip_call(capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[list[str]] = []

    def fake_pip(cmd: list[str]) -> subprocess.CompletedProcess:
        seen.append(cmd)
        pins = Path(cmd[cmd.index("-c") + 1]).read_text()
        assert "torch==2.8.0+cu126" in pins and "jax==0.10.2" in pins
        return subprocess.CompletedProcess(cmd, 0, "", "")

    found = {**COLAB, "jax": "0.10.2", "jaxlib": "0.10.2"}
    install.ensure(("flax", "tqdm"), found=found, run=fake_pip)
    assert len(seen) == 1 and seen[0][-2:] == ["flax", "tqdm"]
    assert not any(a in ("torch", "jax", "jaxlib") for a in seen[0])


def test_ensure_failure_is_clear() -> None:
    fail = lambda cmd: subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version that satisfies flax")  # noqa: E731
    with pytest.raises(install.BootstrapError, match="nothing was installed.*online"):
        install.ensure(("flax",), found={"torch": "2.8.0", "jax": "0.10.2", "jaxlib": "0.10.2"}, run=fail)


def test_setup_on_colab_calls_the_bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    from labkit.runtime import bootstrap, device

    calls = []
    monkeypatch.setattr(device, "detect_host", lambda environ=None: "colab")
    monkeypatch.setattr(install, "ensure", lambda host: calls.append(host))
    monkeypatch.setattr(device, "simulate_devices", lambda n: n)  # this process's JAX may be running already
    monkeypatch.setattr(bootstrap, "_runtime", None)
    bootstrap.setup(quiet=True)
    assert calls == ["colab"]


# ---- a simulated Colab: a fresh virtual environment with torch and jax "preinstalled" ----------


def _fake_colab_venv(tmp: Path, jax_version: str = "0.10.2") -> tuple[Path, dict[str, str]]:
    venv.EnvBuilder(with_pip=True).create(tmp)
    py = tmp / "bin" / "python"
    site = Path(subprocess.check_output([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    for name, version in (("torch", "2.8.0"), ("jax", jax_version), ("jaxlib", jax_version)):
        info = site / f"{name}-{version}.dist-info"  # metadata only: what pip and importlib.metadata read
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text("")
        (info / "INSTALLER").write_text("colab\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLAB_RELEASE_TAG="release-colab-test")
    env.pop("VIRTUAL_ENV", None)
    return py, env


def _versions(py: Path, env: dict[str, str]) -> str:
    code = "from importlib.metadata import version as v; print(v('torch'), v('jax'), v('jaxlib'))"
    return subprocess.check_output([py, "-c", code], text=True, env=env).strip()


ENSURE = "from labkit.runtime import install; install.ensure(needed=('tqdm',), host='colab')"


def test_simulated_colab_installs_missing_and_keeps_torch_jax(tmp_path: Path) -> None:
    py, env = _fake_colab_venv(tmp_path / "colab")
    before = _versions(py, env)
    first = subprocess.run([py, "-c", ENSURE], capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "installing tqdm (keeping torch 2.8.0, jax 0.10.2, jaxlib 0.10.2)" in first.stdout
    assert subprocess.run([py, "-c", "import tqdm"], env=env).returncode == 0
    assert _versions(py, env) == before == "2.8.0 0.10.2 0.10.2"
    second = subprocess.run([py, "-c", ENSURE], capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0 and "nothing to do" in second.stdout


def test_simulated_colab_offline_installs_nothing(tmp_path: Path) -> None:
    py, env = _fake_colab_venv(tmp_path / "offline")
    # No config files (no local wheel folders), an index nobody listens on, no retries.
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_RETRIES="0",
               PIP_TIMEOUT="2", PIP_NO_CACHE_DIR="1")
    env.pop("PIP_FIND_LINKS", None)
    env.pop("PIP_EXTRA_INDEX_URL", None)
    out = subprocess.run([py, "-c", ENSURE], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode != 0
    assert "BootstrapError" in out.stderr and "nothing was installed" in out.stderr
    assert subprocess.run([py, "-c", "import tqdm"], env=env, capture_output=True).returncode != 0
    assert _versions(py, env) == "2.8.0 0.10.2 0.10.2"


def test_simulated_colab_out_of_range_jax_is_not_touched(tmp_path: Path) -> None:
    py, env = _fake_colab_venv(tmp_path / "oldjax", jax_version="0.4.30")
    code = "from labkit.runtime import install; install.ensure(needed=(), host='colab')"
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "jax 0.4.30 is outside the supported range" in out.stdout
    assert _versions(py, env) == "2.8.0 0.4.30 0.4.30"

