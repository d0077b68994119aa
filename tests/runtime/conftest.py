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


@pytest.fixture(scope="session")
def vllm_package(runtime_py: str) -> str:
    """The vllm package directory of the runtime environment (found, not imported)."""
    r = subprocess.run([runtime_py, "-c", "import importlib.util; "
                        "print(importlib.util.find_spec('vllm').submodule_search_locations[0])"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def static_layers(*args: str, k: int) -> dict:
    """The JSON of `mtp-audit layers ARGS --k K --platform cpu` (the static side, never importing vLLM)."""
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "layers", *args, "--k", str(k), "--platform", "cpu",
                        "--format", "json"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def cli(*args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "runtime_check.cli", *args], cwd=REPO, env=e,
                          capture_output=True, text=True, timeout=timeout)


_RUNS: dict = {}
# The architectures whose K=3 / 3-layer runs the runtime tests share (test_plan_agreement.py,
# test_runtime_layers.py, test_runtime_v2.py, test_runtime_verdicts_patch.py).
SHARED_ARCHS = ("qwen3_5", "qwen3_5_moe", "qwen3_next", "glm4_moe", "deepseek_v3")


def _one_run(doc: dict, arch: str, forced: bool, runner: str) -> dict:
    """The document of one (arch, runner, mode) out of the shared runs' document."""
    mode = "forced" if forced else "shipped"
    runs = [r for r in doc["runs"] if r["arch"] == arch and r["runner"] == runner and r["mode"] == mode]
    failed = [f for f in doc["failed_runs"] if f.get("arch") == arch and f["runner"] == runner and f["mode"] == mode]
    assert len(runs) == 1, f"no {arch} {runner} {mode} run: {failed or doc['failed_runs']}"
    return {**doc, "runs": runs, "failed_runs": failed}


@pytest.fixture(scope="session")
def run_check(runtime_py, tmp_path_factory):
    """run_check(arch, forced, runner) -> the JSON document of
    `check --arch ARCH --k 3 --runner RUNNER [--force-step-idx]`, run once per test session.

    The shared architectures' twenty runs (each of SHARED_ARCHS on v1 and v2, shipped and
    forced) are one `check --arch A --arch B ... --k 3 --runner both --mode both --batch`: one
    import of vLLM per runner for all of them instead of two per architecture (the import is
    most of an eager run); each run is still its own engine, forked from the untouched
    zygote, on its architecture's own synthetic checkpoint. With pytest-xdist the workers
    share one directory of finished documents, and a file lock makes a second worker wait
    for the first worker's runs instead of starting the same engines again."""
    from filelock import FileLock

    # The parent of a worker's base temp is the session's (shared by its workers).
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    shared = shared / "run-check"
    shared.mkdir(exist_ok=True)

    def go(arch: str, forced: bool = False, runner: str = "v1") -> dict:
        assert arch in SHARED_ARCHS, f"{arch} is not one of the shared architectures {SHARED_ARCHS}"
        if not _RUNS:
            done = shared / "shared-k3.json"
            with FileLock(str(done) + ".lock"):
                if not done.is_file():
                    archs = [a for name in SHARED_ARCHS for a in ("--arch", name)]
                    r = cli("check", *archs, "--k", "3", "--runner", "both", "--mode", "both", "--batch",
                            "--format", "json", timeout=2400)
                    assert r.returncode == 0, r.stderr[-3000:]
                    json.loads(r.stdout)  # a document, or the runs are not recorded
                    done.write_text(r.stdout)
                _RUNS["doc"] = json.loads(done.read_text())
        return _one_run(_RUNS["doc"], arch, forced, runner)

    return go
