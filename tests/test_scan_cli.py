"""The scan command as a user runs it: exit codes, formats, bad input, never executing scanned code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import invoke
from scan_helpers import scan_tree, write_tree

from rules._examples import wrapper

BAD_WRAPPER = {"vllm/models/m_mtp.py": wrapper("return self.model(input_ids, positions, hidden_states)")}
GOOD_WRAPPER = {"vllm/models/m_mtp.py": wrapper("return self.model(input_ids, positions, hidden_states, **kwargs)")}


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """``mtp-audit ARGS`` in this process (see :mod:`cli_runner`)."""
    return invoke(*args, cwd=cwd, env=env)


def run_process(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """``mtp-audit ARGS`` in a new interpreter: for what only a process start reads (PYTHONPATH)."""
    return subprocess.run([sys.executable, "-m", "auditor.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=300)


@pytest.fixture
def cache_env(tmp_path):
    return {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}


def test_exit_1_with_findings_and_0_clean(tmp_path, cache_env):
    bad = write_tree(tmp_path / "bad", BAD_WRAPPER)
    good = write_tree(tmp_path / "good", GOOD_WRAPPER)
    r = run_cli("scan", str(bad), "-q", env=cache_env)
    assert r.returncode == 1, r.stderr
    assert "MTP001" in r.stdout and "WrapperMTP.forward" in r.stdout
    r = run_cli("scan", str(good), "-q", env=cache_env)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_cli("scan", str(bad), "-q", "--exit-zero", env=cache_env)
    assert r.returncode == 0
    r = run_cli("scan", str(bad), "-q", "--ignore", "MTP001", env=cache_env)
    assert r.returncode == 0
    r = run_cli("scan", str(bad / "vllm"), "-q", "--select", "MTP001", "--format", "json", env=cache_env)
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["version"] == 1 and [f["rule"] for f in doc["findings"]] == ["MTP001"]


def test_json_sarif_github_formats(tmp_path, cache_env):
    bad = write_tree(tmp_path / "bad", BAD_WRAPPER)
    sarif = json.loads(run_cli("scan", str(bad), "-q", "-f", "sarif", env=cache_env).stdout)
    assert sarif["version"] == "2.1.0"
    res = sarif["runs"][0]["results"][0]
    assert res["ruleId"] == "MTP001" and res["partialFingerprints"]
    gh = run_cli("scan", str(bad), "-q", "-f", "github", env=cache_env).stdout
    assert gh.startswith("::error file=vllm/models/m_mtp.py,line=")


@pytest.mark.parametrize(
    "args,needle",
    [
        (["scan", "/nonexistent/path"], "path does not exist"),
        (["scan"], "give exactly one target"),
        (["scan", "--release", "0.0.0-not-a-version"], "not a version"),
        (["explain", "deadbeef", "."], "no vllm/ package"),
        (["rules", "MTP999"], "unknown rule"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, args, needle, cache_env):
    r = run_cli(*args, cwd=tmp_path, env=cache_env)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_file_instead_of_directory(tmp_path, cache_env):
    f = tmp_path / "x.py"
    f.write_text("x = 1\n")
    r = run_cli("scan", str(f), env=cache_env)
    assert r.returncode == 2 and "got a file" in r.stderr and "Traceback" not in r.stderr


def test_unparsable_files_are_listed_and_skipped(tmp_path):
    files = dict(BAD_WRAPPER)
    files["vllm/broken.py"] = "def f(:\n    spec_step_idx\n"
    files["vllm/py2.py"] = "print 'spec_step_idx'\n"
    files["vllm/latin.py"] = b"# -*- coding: latin-1 -*-\nname = '\xe9'  # spec_step_idx\n"
    files["vllm/nul.py"] = b"spec_step_idx = 1\0\n"
    files["vllm/empty.py"] = ""
    scan = scan_tree(write_tree(tmp_path, files))
    kinds = {p.path: p.kind for p in scan.result.problems}
    assert kinds.get("vllm/broken.py") == "parse-error"
    assert kinds.get("vllm/py2.py") == "parse-error"
    assert "vllm/nul.py" in kinds
    assert "vllm/latin.py" not in kinds  # a coding cookie is honoured
    assert [f.rule for f in scan.result.findings] == ["MTP001"]  # the rest is still analysed


def test_scanned_code_is_never_imported_or_executed(tmp_path, cache_env):
    marker = tmp_path / "EXECUTED"
    boom = f"import pathlib; pathlib.Path({str(marker)!r}).write_text('x')\nraise SystemExit('imported!')\n"
    files = dict(BAD_WRAPPER)
    files["vllm/__init__.py"] = boom + "spec_step_idx = 0\n"
    files["vllm/models/__init__.py"] = boom
    files["setup.py"] = boom
    files["vllm/conftest.py"] = boom + "spec_step_idx = 1\n"
    files["vllm/evil.pth"] = f"import pathlib; pathlib.Path({str(marker)!r}).write_text('pth')\n"
    root = write_tree(tmp_path / "tree", files)
    r = run_cli("scan", str(root), "-q", "-f", "json", env=cache_env)
    assert r.returncode == 1, r.stderr
    assert not marker.exists()
    assert json.loads(r.stdout)["findings"][0]["rule"] == "MTP001"


def test_rules_command_prints_docs():
    r = run_cli("rules")
    assert r.returncode == 0 and "MTP001" in r.stdout and "MTP005" in r.stdout
    r = run_cli("rules", "MTP003")
    assert "get_top_tokens" in r.stdout


def test_graph_and_explain(tmp_path, cache_env):
    bad = write_tree(tmp_path / "bad", BAD_WRAPPER)
    dot = run_cli("graph", str(bad), env=cache_env).stdout
    assert dot.startswith("digraph") and "WrapperMTP.forward" in dot and "spec_step_idx=absent" in dot
    g = json.loads(run_cli("graph", str(bad), "-f", "json", env=cache_env).stdout)
    assert any(n["function"] == "Predictor.forward" for n in g["nodes"])
    fid = json.loads(run_cli("scan", str(bad), "-q", "-f", "json", env=cache_env).stdout)["findings"][0]["fingerprint"]
    r = run_cli("explain", fid[:8], str(bad), env=cache_env)
    assert r.returncode == 0, r.stderr
    assert "self.layers[spec_step_idx % self.num_mtp_layers]" in r.stdout


def test_fingerprint_survives_unrelated_line_moves(tmp_path):
    a = scan_tree(write_tree(tmp_path / "a", BAD_WRAPPER)).result.findings[0]
    moved = {k: "# a comment\n\n\nimport os\n" + v for k, v in BAD_WRAPPER.items()}
    b = scan_tree(write_tree(tmp_path / "b", moved)).result.findings[0]
    assert a.line != b.line and a.fingerprint == b.fingerprint


def test_corrupt_cache_is_rebuilt(tmp_path):
    root = write_tree(tmp_path / "t", BAD_WRAPPER)
    cache = tmp_path / "cache"
    first = scan_tree(root, cache_dir=cache).result.to_json()
    for p in (cache / "facts").rglob("*.json"):
        p.write_text("{not json")
    assert scan_tree(root, cache_dir=cache).result.to_json() == first
    for p in (cache / "facts").rglob("*.json"):
        p.write_text(json.dumps({"key": "x", "tool": "0.0.0", "facts": {}}))
    assert scan_tree(root, cache_dir=cache).result.to_json() == first


def test_installed_vllm_is_found_without_importing_it(tmp_path, cache_env):
    site = tmp_path / "site"
    marker = tmp_path / "IMPORTED"
    files = dict(BAD_WRAPPER)
    files["vllm/__init__.py"] = f"import pathlib; pathlib.Path({str(marker)!r}).write_text('x')\nraise ImportError('no')\n"
    write_tree(site, files)
    r = run_process("scan", "--installed", "-q", "-f", "json", env={**cache_env, "PYTHONPATH": str(site)})
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["findings"][0]["path"] == "vllm/models/m_mtp.py"
    assert not marker.exists()


def test_installed_without_vllm_is_a_clear_error(tmp_path, cache_env):
    r = run_process("scan", "--installed", env={**cache_env, "PYTHONPATH": ""}, cwd=tmp_path)
    # This test environment has no vLLM (the runtime checker has its own venv).
    assert r.returncode == 2 and "vLLM is not installed" in r.stderr and "Traceback" not in r.stderr
