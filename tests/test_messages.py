"""Every error a user can trigger has a message of its own (issue 20): no "internal error",
one line, exit 2; baselines merge instead of dropping entries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scan_helpers import write_tree  # noqa: E402

from test_file_safety import LOOP, WRAPPER  # noqa: E402
from rules._examples import draft_tree  # noqa: E402

DEEP = "[" * 100_000 + "]" * 100_000


def cli(*args: str | Path, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "auditor.cli", *map(str, args)], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=300)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "t", draft_tree(LOOP, model=WRAPPER))


def one_line(r: subprocess.CompletedProcess[str], *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mtp-audit: error: "), r.stderr
    assert "internal error" not in r.stderr
    for w in words:
        assert w in lines[0]


def test_deeply_nested_baseline(tree: Path, tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    one_line(cli("scan", tree, "-q", "--baseline", deep, "--cache-dir", tmp_path / "c"), "nested too deeply")


def test_stdout_to_dev_full(tree: Path, tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        r = cli("scan", tree, "-q", "--cache-dir", tmp_path / "c", stdout=full.fileno())
    one_line(r, "standard output", "no space left")


def test_baseline_create_keeps_entries_added_by_hand(tree: Path, tmp_path: Path) -> None:
    base = tmp_path / "b.json"
    assert cli("baseline", "create", "-o", base, tree, "--cache-dir", tmp_path / "c").returncode == 0
    doc = json.loads(base.read_text())
    found = {e["fingerprint"] for e in doc["findings"]}
    assert found
    by_hand = {"fingerprint": "0123456789abcdef", "rule": "MTP001", "path": "vllm/other.py", "function": "f"}
    doc["findings"].append(by_hand)
    base.write_text(json.dumps(doc))
    assert cli("baseline", "create", "-o", base, tree, "--cache-dir", tmp_path / "c").returncode == 0
    again = {e["fingerprint"] for e in json.loads(base.read_text())["findings"]}
    assert again == found | {by_hand["fingerprint"]}


def test_baseline_create_refuses_to_replace_a_file_that_is_not_a_baseline(tree: Path, tmp_path: Path) -> None:
    other = tmp_path / "notes.json"
    other.write_text('{"mine": true}\n')
    one_line(cli("baseline", "create", "-o", other, tree, "--cache-dir", tmp_path / "c"), "--force")
    assert other.read_text() == '{"mine": true}\n'
