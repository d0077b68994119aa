"""lint asks git (issue 20): a path is never expanded, the changed files are exactly what
git calls changed (no ignored files, no submodule content), a bare repository lints with
--head."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scan_helpers import write_tree, git  # noqa: E402

from rules._examples import draft_tree, wrapper  # noqa: E402

LOOP = "out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=token_index + 1))"
MODEL = "vllm/models/m_mtp.py"




GOOD = wrapper("return self.model(input_ids, positions, hidden_states, **kwargs)")
BAD = wrapper("return self.model(input_ids, positions, hidden_states)")


def make_repo(path: Path) -> Path:
    write_tree(path, draft_tree(LOOP, model=GOOD))
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    return path


def lint(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "auditor.cli", "lint", str(repo), "--base", "HEAD", *args,
                           "--cache-dir", str(repo.parent / "cache")],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def summary(r: subprocess.CompletedProcess[str]) -> str:
    return r.stderr.strip().splitlines()[-1]


def test_a_dollar_in_the_path_is_not_expanded(tmp_path: Path) -> None:
    make_repo(tmp_path / "other")  # what "$MTPV" would expand to: clean
    repo = make_repo(tmp_path / "$MTPV")
    (repo / MODEL).write_text(BAD)
    r = lint(repo, env={"MTPV": "other"})
    assert r.returncode == 1, r.stderr
    assert summary(r) == "mtp-audit: 1 changed file, 1 new finding"


def test_git_ignored_files_are_not_changed_files(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    (repo / ".gitignore").write_text("vllm/_version.py\nvllm/build/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore")
    (repo / "vllm/_version.py").write_text("version = '1'\n")
    (repo / "vllm/build").mkdir()
    (repo / "vllm/build/broken.py").write_text("def f(:\n")
    (repo / MODEL).write_text(BAD)
    r = lint(repo)
    assert summary(r) == "mtp-audit: 1 changed file, 1 new finding", r.stderr
    assert "MTP901" not in r.stdout and "_version" not in r.stdout


def test_an_untracked_file_is_a_change(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    (repo / "vllm/new_mod.py").write_text("x = 1\n")
    r = lint(repo)
    assert (r.returncode, summary(r)) == (0, "mtp-audit: 1 changed file, 0 new findings"), r.stderr


def test_a_submodule_under_vllm_is_not_linted(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "broken.py").write_text("def f(:\n")
    git(sub, "init", "-q", "-b", "main")
    git(sub, "add", "-A")
    git(sub, "commit", "-q", "-m", "sub")
    repo = make_repo(tmp_path / "r")
    git(repo, "submodule", "add", "-q", str(sub), "vllm/third_party")
    git(repo, "commit", "-q", "-m", "submodule")
    r = lint(repo)
    assert (r.returncode, summary(r)) == (0, "mtp-audit: 0 changed files, 0 new findings"), r.stderr + r.stdout
    assert "MTP901" not in r.stdout


def test_a_bare_repository_lints_with_head(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    (repo / MODEL).write_text(BAD)
    git(repo, "commit", "-q", "-am", "drop")
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "lint", str(bare), "--base", "HEAD~1", "--head", "HEAD",
                        "--cache-dir", str(tmp_path / "cache")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr
    assert summary(r) == "mtp-audit: 1 changed file, 1 new finding"
    without = subprocess.run([sys.executable, "-m", "auditor.cli", "lint", str(bare), "--base", "HEAD~1"],
                             capture_output=True, text=True, timeout=300)
    assert without.returncode == 2 and "--head" in without.stderr
