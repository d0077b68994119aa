"""Runtime tests: they run a real vLLM engine from the runtime environment
(runtime_check/setup_env.sh). Outside CI they skip when it is missing; in CI (CI set) a
missing environment is a failure, never a silent skip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _runtime_python() -> str | None:
    sys.path.insert(0, str(REPO))
    from runtime_check.cli import RuntimeCheckError, runtime_python

    try:
        py = runtime_python()
    except RuntimeCheckError:
        return None
    r = subprocess.run([py, "-c", "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('vllm') else 3)"])
    return py if r.returncode == 0 else None


@pytest.fixture(scope="session")
def runtime_py() -> str:
    py = _runtime_python()
    if py is None:
        msg = ("runtime environment with vLLM missing: run `bash runtime_check/setup_env.sh` "
               "(or set MTP_AUDIT_RUNTIME_PYTHON)")
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return py


def cli(*args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "runtime_check.cli", *args], cwd=REPO, env=e,
                          capture_output=True, text=True, timeout=timeout)


_RUNS: dict = {}


@pytest.fixture(scope="session")
def run_check(runtime_py, tmp_path_factory):
    """run_check(arch, forced, runner) -> the JSON document of
    `check --arch ARCH --k 3 --runner RUNNER`, run once per test session: with pytest-xdist
    the workers share one directory of finished documents, and a file lock per
    configuration makes the second worker wait for the first worker's run instead of
    starting the same engine again."""
    from filelock import FileLock

    # The parent of a worker's base temp is the session's (shared by its workers).
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    shared = shared / "run-check"
    shared.mkdir(exist_ok=True)

    def go(arch: str, forced: bool = False, runner: str = "v1") -> dict:
        key = (arch, forced, runner)
        if key not in _RUNS:
            done = shared / f"{arch}-{'forced' if forced else 'shipped'}-{runner}.json"
            with FileLock(str(done) + ".lock"):
                if not done.is_file():
                    args = ["check", "--arch", arch, "--k", "3", "--runner", runner, "--format", "json"]
                    if forced:
                        args.append("--force-step-idx")
                    r = cli(*args)
                    assert r.returncode == 0, r.stderr[-3000:]
                    json.loads(r.stdout)  # a document, or the run is not recorded
                    done.write_text(r.stdout)
                _RUNS[key] = json.loads(done.read_text())
        return _RUNS[key]

    return go
