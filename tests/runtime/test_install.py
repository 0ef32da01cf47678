"""labkit.runtime.install: the Colab/Kaggle bootstrap adds what is missing and never touches torch/jax."""

from __future__ import annotations

import json
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
    assert p.install == ["flax>=0.12.2", "optax>=0.2.4"]  # a floor: pip cannot fall back to an old flax
    assert p.pins == {"torch": "2.8.0+cu126", "jax": "0.10.2", "jaxlib": "0.10.2", "numpy": "2.0.2"}
    assert p.stops == [] and p.notes == []


def test_plan_pins_numpy_and_accelerator_plugins() -> None:
    found = {**COLAB, "jax": "0.11.2", "jaxlib": "0.11.2", "numpy": "1.26.4", "jax-cuda12-plugin": "0.11.2",
             "jax_cuda12_pjrt": "0.11.2", "libtpu": None}
    p = install.plan(found, ("flax",))
    assert p.pins["numpy"] == "1.26.4"  # the runtime's numpy is never upgraded (it was: 1.26.4 -> 2.4.0)
    assert p.pins["jax_cuda12_plugin"] == p.pins["jax_cuda12_pjrt"] == "0.11.2" and "libtpu" not in p.pins


def test_old_companion_is_upgraded_and_said() -> None:
    p = install.plan({**COLAB, "jax": "0.10.2", "jaxlib": "0.10.2", "flax": "0.8.5"}, ("flax",))
    assert p.install == ["flax>=0.12.2"]
    assert p.notes and "flax 0.8.5 is older than the course's 0.12.2" in p.notes[0]


def test_companion_floors_match_pyproject() -> None:
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = dict(d.split(">=") for d in deps if ">=" in d)
    for name, lo in install.COMPANIONS.items():
        assert floors.get(name) == lo, f"{name}: install.COMPANIONS says >= {lo}, pyproject.toml {floors.get(name)}"


def test_out_of_range_jax_stops_without_reinstalling() -> None:
    p = install.plan(COLAB, ("flax",))
    assert "jax" not in " ".join(p.install)
    assert any("jax 0.7.2 is outside the supported range >= 0.10" in r and "Not reinstalling" in r for r in p.stops)
    with pytest.raises(install.BootstrapError, match="nothing was installed"):
        install.ensure(("flax",), found=COLAB, run=lambda cmd: pytest.fail("pip must not run"))


@pytest.mark.parametrize("missing", ["torch", "jax", "jaxlib", "numpy"])
def test_missing_runtime_package_is_a_stop(missing: str) -> None:
    found = {**COLAB, "jax": "0.10.2", "jaxlib": "0.10.2", missing: None}
    p = install.plan(found, ("flax",), host="kaggle")
    assert any(r.startswith(f"{missing} is not installed") and "Settings > Environment" in r for r in p.stops)
    # torch present, jax absent: it used to say "never installs jax" and then pip installed flax + jax
    with pytest.raises(install.BootstrapError, match=f"{missing} is not installed"):
        install.ensure(("flax",), found=found, run=lambda cmd: pytest.fail("pip must not run"))


def _fake_pip(seen: list[list[str]], installed: list[tuple[str, str]]):
    def run(cmd: list[str]) -> subprocess.CompletedProcess:
        seen.append(cmd)
        report = Path(cmd[cmd.index("--report") + 1])
        report.write_text(json.dumps({"install": [{"metadata": {"name": n, "version": v}} for n, v in installed]}))
        return subprocess.CompletedProcess(cmd, 0, "", "")
    return run


def test_ensure_runs_one_constrained_pip_call_and_lists_changes(capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[list[str]] = []
    found = {**COLAB, "jax": "0.10.2", "jaxlib": "0.10.2"}
    install.ensure(("flax", "tqdm"), found=found, run=_fake_pip(seen, [("flax", "0.12.0"), ("tqdm", "4.67.1")]))
    assert len(seen) == 1 and seen[0][-2:] == ["flax>=0.12.2", "tqdm>=4.66"]
    assert not any(a.split(">=")[0] in ("torch", "jax", "jaxlib", "numpy") for a in seen[0])
    assert "labkit: installed flax 0.12.0, tqdm 4.67.1" in capsys.readouterr().out


def test_ensure_writes_every_pin_to_the_constraints() -> None:
    pins: list[str] = []

    def run(cmd: list[str]) -> subprocess.CompletedProcess:
        pins.append(Path(cmd[cmd.index("-c") + 1]).read_text())
        return _fake_pip([], [])(cmd)

    install.ensure(("flax",), found={**COLAB, "jax": "0.10.2", "jaxlib": "0.10.2"}, run=run)
    assert pins[0].splitlines() == ["torch==2.8.0+cu126", "jax==0.10.2", "jaxlib==0.10.2", "numpy==2.0.2"]


def test_ensure_refuses_a_pip_that_moved_a_protected_package() -> None:
    run = _fake_pip([], [("numpy", "2.4.0"), ("flax", "0.12.0")])
    with pytest.raises(install.BootstrapError, match="numpy"):
        install.ensure(("flax",), found={**COLAB, "jax": "0.10.2", "jaxlib": "0.10.2"}, run=run)


def test_ensure_failure_is_clear() -> None:
    fail = lambda cmd: subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version that satisfies flax")  # noqa: E731
    found = {"torch": "2.8.0", "jax": "0.10.2", "jaxlib": "0.10.2", "numpy": "2.0.2"}
    with pytest.raises(install.BootstrapError, match="nothing was installed.*flax>=0.12.2 with jax >= 0.10"):
        install.ensure(("flax",), found=found, run=fail)


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
    for name, version in (("torch", "2.8.0"), ("jax", jax_version), ("jaxlib", jax_version), ("numpy", "1.26.4")):
        info = site / f"{name}-{version}.dist-info"  # metadata only: what pip and importlib.metadata read
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text("")
        (info / "INSTALLER").write_text("colab\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLAB_RELEASE_TAG="release-colab-test")
    env.pop("VIRTUAL_ENV", None)
    return py, env


def _versions(py: Path, env: dict[str, str]) -> str:
    code = "from importlib.metadata import version as v; print(v('torch'), v('jax'), v('jaxlib'), v('numpy'))"
    return subprocess.check_output([py, "-c", code], text=True, env=env).strip()


ENSURE = "from labkit.runtime import install; install.ensure(needed=('tqdm',), host='colab')"


def test_simulated_colab_installs_missing_and_keeps_torch_jax(tmp_path: Path) -> None:
    py, env = _fake_colab_venv(tmp_path / "colab")
    before = _versions(py, env)
    first = subprocess.run([py, "-c", ENSURE], capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "installing tqdm>=4.66 (keeping torch 2.8.0, jax 0.10.2, jaxlib 0.10.2, numpy 1.26.4)" in first.stdout
    assert subprocess.run([py, "-c", "import tqdm"], env=env).returncode == 0
    assert _versions(py, env) == before == "2.8.0 0.10.2 0.10.2 1.26.4"
    assert "labkit: installed tqdm " in first.stdout
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
    assert _versions(py, env) == "2.8.0 0.10.2 0.10.2 1.26.4"


def test_simulated_colab_out_of_range_jax_stops_untouched(tmp_path: Path) -> None:
    py, env = _fake_colab_venv(tmp_path / "oldjax", jax_version="0.4.30")
    code = "from labkit.runtime import install; install.ensure(needed=('tqdm',), host='colab')"
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode != 0
    assert "BootstrapError" in out.stderr and "jax 0.4.30 is outside the supported range" in out.stderr
    assert subprocess.run([py, "-c", "import tqdm"], env=env, capture_output=True).returncode != 0
    assert _versions(py, env) == "2.8.0 0.4.30 0.4.30 1.26.4"
