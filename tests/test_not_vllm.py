"""A tree without vLLM MTP code is not a clean tree (issue 20): ``scan`` says "no MTP code
found" (exit 2); in ``history`` it is a skipped revision, never "fixed"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import git

from scan_helpers import write_tree

from auditor.services.history import run_history
from rules import all_rules
from rules._examples import draft_tree, wrapper

ACTOR = git.Actor("Test", "test@example.invalid")
DROPS = wrapper("return self.model(input_ids, positions, hidden_states)")
LOOP = "out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=token_index + 1))"
NOT_VLLM = {"vllm/__init__.py": "", "vllm/util.py": "def helper(x):\n    return x\n"}


def commit(repo: git.Repo, files: dict[str, str], message: str, remove: list[str] = ()) -> None:
    root = Path(repo.working_tree_dir)
    for rel in remove:
        repo.index.remove([rel], working_tree=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        repo.index.add([rel])
    repo.index.commit(message, author=ACTOR, committer=ACTOR)


def test_history_skips_a_revision_without_mtp_code_instead_of_calling_it_fixed(tmp_path: Path) -> None:
    repo = git.Repo.init(tmp_path / "r", initial_branch="main")
    files = draft_tree(LOOP, model=DROPS)
    commit(repo, files, "drops")
    repo.create_tag("v0.1.0")
    commit(repo, NOT_VLLM, "everything replaced", remove=[p for p in files if p not in NOT_VLLM])
    repo.create_tag("v0.2.0")
    hist = run_history(tmp_path / "r", cache_dir=tmp_path / "cache", workers=1, rules=all_rules())
    first, second = hist.releases
    assert first.scanned and first.result.findings
    assert not second.scanned and "no MTP code found" in second.skipped
    assert hist.deltas[1] is None  # nothing is reported fixed


def test_scan_of_a_tree_without_mtp_code_is_an_error(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "t", NOT_VLLM)
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "scan", str(root), "-q", "--cache-dir", str(tmp_path / "c")],
                       capture_output=True, text=True, timeout=300)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith("mtp-audit: error: no MTP code found in ") and len(r.stderr.splitlines()) == 1


def test_a_tree_whose_mtp_file_does_not_parse_is_reported_not_called_empty(tmp_path: Path) -> None:
    files = draft_tree(LOOP, model=DROPS)
    files["vllm/models/m_mtp.py"] += "\ndef broken(:\n    pass\n"
    root = write_tree(tmp_path / "t", files)
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "scan", str(root), "-q", "--cache-dir", str(tmp_path / "c")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "[parse-error]" in r.stdout and "no MTP code" not in r.stderr
