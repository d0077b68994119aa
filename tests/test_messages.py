"""Every error a user can trigger has a message of its own (issue 20): no "internal error",
one line, exit 2; baselines merge instead of dropping entries."""

from __future__ import annotations

import json
import os
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


def test_baseline_create_merging_a_crlf_baseline_keeps_its_line_ends(tree: Path, tmp_path: Path) -> None:
    """A baseline checked out with CRLF line ends (git's autocrlf) is merged in its own shape."""
    base = tmp_path / "b.json"
    assert cli("baseline", "create", "-o", base, tree, "--cache-dir", tmp_path / "c").returncode == 0
    lf = base.read_bytes()
    assert b"\r" not in lf
    base.write_bytes(lf.replace(b"\n", b"\r\n"))
    assert cli("baseline", "create", "-o", base, tree, "--cache-dir", tmp_path / "c").returncode == 0
    assert base.read_bytes() == lf.replace(b"\n", b"\r\n")


def test_baseline_create_refuses_to_replace_a_file_that_is_not_a_baseline(tree: Path, tmp_path: Path) -> None:
    other = tmp_path / "notes.json"
    other.write_text('{"mine": true}\n')
    one_line(cli("baseline", "create", "-o", other, tree, "--cache-dir", tmp_path / "c"), "--force")
    assert other.read_text() == '{"mine": true}\n'


# --------------------------------------------------------------------------- output == input


@pytest.mark.parametrize("command", ["scan-baseline", "scan-config", "layers-hf-config", "baseline-pyproject", "graph-config"])
def test_an_output_that_is_an_input_is_refused_before_any_work(tree: Path, tmp_path: Path, command: str) -> None:
    cache = tmp_path / "c"
    base = tmp_path / "b.json"
    base.write_text(json.dumps({"version": 1, "tool": "mtp-audit", "findings": []}))
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[tool.mtp-audit]\n")
    hf = tmp_path / "config.json"
    hf.write_text('{"architectures": ["DeepSeekV3ForCausalLM"]}')
    (tree / "pyproject.toml").write_text("[tool.mtp-audit]\n")
    args, victim = {
        "scan-baseline": (["scan", tree, "--baseline", base, "-o", base], base),
        "scan-config": (["scan", tree, "--config", cfg, "-o", cfg], cfg),
        "layers-hf-config": (["layers", tree, "--hf-config", hf, "--k", "2", "-o", hf], hf),
        "baseline-pyproject": (["baseline", "create", tree, "-o", tree / "pyproject.toml"], tree / "pyproject.toml"),
        "graph-config": (["graph", tree, "--config", cfg, "-o", cfg], cfg),
    }[command]
    before = victim.read_bytes()
    r = cli(*args, "--cache-dir", cache)
    one_line(r, "own input")
    assert victim.read_bytes() == before
    assert not cache.exists()  # refused before any work: nothing was scanned or cached


def test_an_output_inside_the_scanned_package_is_refused(tree: Path, tmp_path: Path) -> None:
    target = tree / "vllm" / "models" / "m_mtp.py"
    before = target.read_bytes()
    one_line(cli("scan", tree, "-o", target, "--cache-dir", tmp_path / "c"), "inside the scanned tree")
    assert target.read_bytes() == before


def test_baseline_create_force_replaces(tree: Path, tmp_path: Path) -> None:
    other = tmp_path / "notes.json"
    other.write_text('{"mine": true}\n')
    assert cli("baseline", "create", "-o", other, tree, "--force", "-q", "--cache-dir", tmp_path / "c").returncode == 0
    assert json.loads(other.read_text())["version"] == 1


# --------------------------------------------------------------------------- streams and JSON


def test_closed_stdout_is_a_message(tree: Path, tmp_path: Path) -> None:
    for args in (["rules"], ["scan", tree, "-q", "--cache-dir", tmp_path / "c"]):
        r = subprocess.run([sys.executable, "-m", "auditor.cli", *map(str, args)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, timeout=300, close_fds=True,
                           preexec_fn=lambda: os.close(1))
        one_line(r, "standard output is closed")


def test_rules_to_dev_full(tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        r = cli("rules", stdout=full.fileno())
    one_line(r, "standard output", "no space left")


def test_deeply_nested_json_in_hf_config_and_set(tree: Path, tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    one_line(cli("layers", tree, "--hf-config", deep, "--k", "2", "--cache-dir", tmp_path / "c"), "nested too deeply")
    value = "[" * 5000 + "]" * 5000
    one_line(cli("layers", tree, "--arch", "WrapperMTP", "--k", "2", "--set", f"x={value}", "--cache-dir", tmp_path / "c"),
             "nested too deeply")


# --------------------------------------------------------------------------- -q everywhere


def test_every_command_takes_quiet() -> None:
    commands = ["scan", "graph", "explain", "rules", "lint", "fix", "layers", "history", "diff", "bisect",
                "baseline create", "releases import"]
    missing = [c for c in commands if "--quiet" not in cli(*c.split(), "--help").stdout]
    assert missing == []


def test_an_unreadable_file_makes_the_scan_not_clean(tmp_path: Path) -> None:
    """A file the scan cannot read may hold a finding: exit 1 and a line saying so, never
    a clean exit 0 (root reads chmod 000 files, so a FIFO stands for the unreadable file)."""
    good = WRAPPER.replace("return self.model(input_ids, positions, hidden_states)",
                           "return self.model(input_ids, positions, hidden_states, **kwargs)")
    root = write_tree(tmp_path / "t", draft_tree(LOOP, model=good))
    clean = cli("scan", root, "--cache-dir", tmp_path / "c")
    assert clean.returncode == 0, clean.stderr
    (root / "vllm/extra.py").unlink(missing_ok=True)
    os.mkfifo(root / "vllm/extra.py")
    r = cli("scan", root, "--cache-dir", tmp_path / "c")
    assert r.returncode == 1
    assert "1 file(s) could not be read (vllm/extra.py)" in r.stderr


def test_layers_says_when_a_file_could_not_be_read(tmp_path: Path) -> None:
    from trees import gate_tree as _tree

    root = write_tree(tmp_path / "t", _tree())
    os.mkfifo(root / "vllm/extra.py")
    args = ("layers", root, "--arch", "DeepMTPModel", "--set", "num_nextn_predict_layers=3", "--k", "3", "--runner", "v2",
            "-q", "--cache-dir", tmp_path / "c")
    for _ in range(2):  # not cached: the second run says it too
        r = cli(*args)
        assert r.returncode == 0, r.stderr
        assert "could not be read or parsed (vllm/extra.py)" in r.stderr
