"""The CI gate fails for the right reasons: `lint` (and `scan`) driven in a real git repository.

A mistyped rule code, a changed file that no longer parses and a baseline that is
still fully in use must not turn the gate green or give false advice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import git
import pytest

from rules import all_rules

from rules._examples import draft_tree, wrapper

ACTOR = git.Actor("Test", "test@example.invalid")
LOOP = "out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=token_index + 1))"
DROPS = wrapper("return self.model(input_ids, positions, hidden_states)")
FIXED = wrapper("return self.model(input_ids, positions, hidden_states, **kwargs)")
MODEL = "vllm/models/m_mtp.py"
KNOWN = [r.code for r in all_rules()]


def tree(model: str) -> dict[str, str]:
    files = draft_tree(LOOP, model=model)
    files.update({"vllm/__init__.py": "", "vllm/models/__init__.py": "", "vllm/util.py": "X = 1\n"})
    return files


def make_repo(path: Path, model: str) -> git.Repo:
    repo = git.Repo.init(path, initial_branch="main")
    for rel, text in tree(model).items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    repo.index.add(list(tree(model)))
    repo.index.commit("base", author=ACTOR, committer=ACTOR)
    return repo


def cli(cwd: Path, *args: str | Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MTP_AUDIT_CACHE_DIR=str(cache))
    return subprocess.run(
        [sys.executable, "-m", "auditor.cli", *map(str, args)], cwd=cwd, capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture
def dropping(tmp_path: Path) -> Path:
    """A repository whose wrapper drops the step: one MTP001 finding at HEAD."""
    make_repo(tmp_path / "repo", DROPS).close()
    return tmp_path / "repo"


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mtp-audit: error: "), r.stderr
    return lines[0]


# --------------------------------------------------------------------------- 1. rule codes


@pytest.mark.parametrize("command", ["scan", "lint"])
@pytest.mark.parametrize("option", ["--select", "--ignore"])
def test_mistyped_rule_code_on_the_command_line_is_an_error(dropping, cache, command, option):
    extra = ["--base", "HEAD"] if command == "lint" else []
    line = one_error_line(cli(dropping, command, ".", *extra, option, "MTP001,MTP999", cache=cache))
    assert "'MTP999'" in line and option in line
    assert f"known: {', '.join(KNOWN)}" in line


@pytest.mark.parametrize(
    "table, where",
    [
        ('select = ["MTP777"]', "select"),
        ('ignore = ["MTP01"]', "ignore"),
        ('severity = { MTP0011 = "note" }', "severity"),
    ],
)
@pytest.mark.parametrize("command", ["scan", "lint"])
def test_mistyped_rule_code_in_the_configuration_is_an_error(dropping, cache, command, table, where):
    (dropping / "pyproject.toml").write_text(f"[tool.mtp-audit]\n{table}\n")
    extra = ["--base", "HEAD"] if command == "lint" else []
    line = one_error_line(cli(dropping, command, ".", *extra, cache=cache))
    assert f"tool.mtp-audit.{where}" in line and "known: MTP001" in line


def test_known_codes_and_prefixes_still_work(dropping, cache):
    r = cli(dropping, "scan", ".", "-q", "-f", "json", "--select", "mtp00", "--ignore", "MTP002", cache=cache)
    assert r.returncode == 1, r.stderr
    assert [f["rule"] for f in json.loads(r.stdout)["findings"]] == ["MTP001"]


def test_unknown_code_in_a_suppression_comment_is_reported(tmp_path, cache):
    model = DROPS.replace(
        "return self.model(input_ids, positions, hidden_states)",
        "return self.model(input_ids, positions, hidden_states)  # mtp-audit: ignore[MTP0001] typo",
    )
    make_repo(tmp_path / "repo", model).close()
    r = cli(tmp_path / "repo", "scan", ".", "-q", "-f", "json", cache=cache)
    findings = json.loads(r.stdout)["findings"]
    notes = [f for f in findings if f["rule"] == "MTP900"]
    assert len(notes) == 1 and "unknown rule code MTP0001" in notes[0]["message"] and "known: MTP001" in notes[0]["message"]
    # the typo suppressed nothing: the MTP001 finding is still active
    assert any(f["rule"] == "MTP001" and not f.get("suppressed") for f in findings)


# --------------------------------------------------------------------------- 2. parse failures


@pytest.mark.parametrize("broken", [MODEL, "vllm/util.py"])
def test_lint_fails_when_a_changed_file_no_longer_parses(tmp_path, cache, broken):
    """A seed file (the analysis parses it) and a file the analysis never reaches alike."""
    make_repo(tmp_path / "repo", FIXED).close()
    repo_dir = tmp_path / "repo"
    assert cli(repo_dir, "lint", ".", "--base", "HEAD", cache=cache).returncode == 0
    path = repo_dir / broken
    path.write_text(path.read_text() + "\ndef broken(:\n    pass\n")

    r = cli(repo_dir, "lint", ".", "--base", "HEAD", cache=cache)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "MTP901" in r.stdout and broken in r.stdout and "cannot be parsed" in r.stdout
    assert r.stdout.splitlines()[-1].startswith("1 finding (1 error")

    doc = json.loads(cli(repo_dir, "lint", ".", "--base", "HEAD", "-f", "json", cache=cache).stdout)
    assert [(f["rule"], f["path"], f["severity"]) for f in doc["findings"]] == [("MTP901", broken, "error")]

    sarif = json.loads(cli(repo_dir, "lint", ".", "--base", "HEAD", "-f", "sarif", cache=cache).stdout)
    results = sarif["runs"][0]["results"]
    assert [(x["ruleId"], x["level"]) for x in results] == [("MTP901", "error")]
    assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == broken

    gh = cli(repo_dir, "lint", ".", "--base", "HEAD", "-f", "github", cache=cache)
    assert gh.returncode == 1
    assert [ln.split(",")[0] for ln in gh.stdout.splitlines() if ln.startswith("::error")] == [f"::error file={broken}"]


def test_scan_lists_a_parse_error_and_fails_on_it_only_when_asked(tmp_path, cache):
    make_repo(tmp_path / "repo", FIXED).close()
    repo_dir = tmp_path / "repo"
    (repo_dir / MODEL).write_text(FIXED + "\ndef broken(:\n    pass\n")
    r = cli(repo_dir, "scan", ".", "-q", cache=cache)
    assert r.returncode == 0, r.stderr
    assert f"{MODEL}  [parse-error]" in r.stdout and "1 file skipped" in r.stdout
    r = cli(repo_dir, "scan", ".", "-q", "--fail-on-parse-error", cache=cache)
    assert r.returncode == 1


# --------------------------------------------------------------------------- 3. baselines


def test_baseline_advice_only_for_entries_really_gone(dropping, cache, tmp_path):
    baseline = tmp_path / "baseline.json"
    r = cli(dropping, "baseline", "create", ".", "-o", baseline, cache=cache)
    assert r.returncode == 0 and "wrote 1 finding(s)" in r.stderr
    entry = json.loads(baseline.read_text())["findings"][0]["fingerprint"]

    # nothing changed: the baseline is fully in use, so nothing is called fixed
    lint = cli(dropping, "lint", ".", "--base", "HEAD", "--baseline", baseline, "-q", cache=cache)
    scan = cli(dropping, "scan", ".", "--baseline", baseline, "-q", cache=cache)
    assert lint.returncode == 0 and scan.returncode == 0, (lint.stderr, scan.stderr)
    assert "fixed" not in lint.stderr and "fixed" not in scan.stderr
    # a baseline entry of a rule that did not run is not "fixed" either
    scan = cli(dropping, "scan", ".", "--baseline", baseline, "-q", "--select", "MTP002", cache=cache)
    assert "fixed" not in scan.stderr

    # the finding is fixed in the work tree: both commands now say so, the same way
    (dropping / MODEL).write_text(FIXED)
    lint = cli(dropping, "lint", ".", "--base", "HEAD", "--baseline", baseline, "-q", cache=cache)
    scan = cli(dropping, "scan", ".", "--baseline", baseline, "-q", cache=cache)
    expected = f"mtp-audit: 1 baseline entry is fixed and can be removed ({entry})"
    assert expected in lint.stderr and expected in scan.stderr
    assert lint.returncode == 0 and scan.returncode == 0
