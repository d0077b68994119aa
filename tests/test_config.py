"""[tool.mtp-audit] configuration: every key works, bad keys and values are named."""

from __future__ import annotations

from pathlib import Path

import pytest
from scan_helpers import scan_tree, write_tree

from auditor.common.config import Config, load_config
from auditor.common.errors import ConfigError
from rules._examples import wrapper

BAD = {"vllm/models/m_mtp.py": wrapper("return self.model(input_ids, positions, hidden_states)")}


def cfg(tmp_path: Path, body: str) -> Config:
    p = tmp_path / "pyproject.toml"
    p.write_text("[tool.mtp-audit]\n" + body)
    return load_config(p)


@pytest.mark.parametrize(
    "body,needle",
    [
        ("colour = 'red'\n", "unknown key tool.mtp-audit.colour"),
        ("select = 'MTP001'\n", "tool.mtp-audit.select must be a list"),
        ("severity = { MTP001 = 'fatal' }\n", "tool.mtp-audit.severity"),
        ("threaded-params = []\n", "threaded-params must name at least one"),
        ("[broken\n", "cannot read configuration"),
    ],
)
def test_bad_configuration_names_the_key(tmp_path, body, needle):
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace(".", r"\.")):
        cfg(tmp_path, body)


def test_select_ignore_and_severity(tmp_path):
    root = write_tree(tmp_path / "t", BAD)
    assert [f.rule for f in scan_tree(root, cfg(tmp_path, "ignore = ['MTP001']\n")).result.findings] == []
    f = scan_tree(root, cfg(tmp_path, "severity = { MTP001 = 'note' }\n")).result.findings
    assert [(x.rule, x.severity.value) for x in f] == [("MTP001", "note")]


def test_other_threaded_parameter_names(tmp_path):
    """The same engine audits any keyword threaded through nn.Module wrappers."""
    src = BAD["vllm/models/m_mtp.py"].replace("spec_step_idx", "expert_slot")
    root = write_tree(tmp_path / "t", {"vllm/models/m_mtp.py": src})
    assert scan_tree(root).result.findings == []
    found = scan_tree(root, cfg(tmp_path, "threaded-params = ['expert_slot']\n")).result.findings
    assert [f.rule for f in found] == ["MTP001"] and "expert_slot" in found[0].message


def test_extra_draft_loop_and_loader_names(tmp_path):
    from rules._examples import draft_tree

    tree = draft_tree("out.append(self.model(input_ids, positions, hidden_states))")
    tree["vllm/spec_decode/proposer.py"] = (
        tree["vllm/spec_decode/proposer.py"]
        .replace("num_speculative_tokens", "n_draft")
        .replace("get_model", "build_drafter")
    )
    tree["vllm/loader.py"] = "def build_drafter(config):\n    raise NotImplementedError\n"
    root = write_tree(tmp_path / "t", tree)
    assert not [f for f in scan_tree(root).result.findings if f.rule == "MTP002"]
    c = cfg(tmp_path, "draft-loop-counts = ['n_draft']\nloaders = ['build_drafter']\n")
    assert [f.rule for f in scan_tree(root, c).result.findings if f.rule == "MTP002"] == ["MTP002"]


def test_cli_reads_the_trees_pyproject(tmp_path):
    import subprocess
    import sys

    root = write_tree(tmp_path / "t", BAD)
    (root / "pyproject.toml").write_text("[tool.mtp-audit]\nignore = ['MTP001']\n")
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "scan", str(root), "-q", "--no-cache"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    (root / "pyproject.toml").write_text("[tool.mtp-audit]\nbogus = 1\n")
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "scan", str(root), "-q", "--no-cache"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown key tool.mtp-audit.bogus" in r.stderr


def test_suppressions_and_baseline(tmp_path):
    import json
    import subprocess
    import sys

    src = BAD["vllm/models/m_mtp.py"].replace(
        "return self.model(input_ids, positions, hidden_states)",
        "return self.model(input_ids, positions, hidden_states)  # mtp-audit: ignore[MTP001] single-layer only",
    )
    root = write_tree(tmp_path / "t", {"vllm/models/m_mtp.py": src})
    f = scan_tree(root).result.findings
    assert [(x.rule, x.suppressed) for x in f] == [("MTP001", True)]

    root2 = write_tree(tmp_path / "b", BAD)
    base = tmp_path / "baseline.json"

    def run(*args):
        return subprocess.run([sys.executable, "-m", "auditor.cli", *args], capture_output=True, text=True)

    assert run("baseline", "create", str(root2), "-o", str(base), "--no-cache").returncode == 0
    assert json.loads(base.read_text())["findings"][0]["rule"] == "MTP001"
    assert run("scan", str(root2), "-q", "--no-cache", "--baseline", str(base)).returncode == 0
    (root2 / "vllm/models/m_mtp.py").write_text(
        BAD["vllm/models/m_mtp.py"].replace("hidden_states)\n", "hidden_states, **kwargs)\n")
    )
    r = run("scan", str(root2), "-q", "--no-cache", "--baseline", str(base))
    assert r.returncode == 0 and "fixed and can be removed" in r.stderr
    base.write_text("{}")
    r = run("scan", str(root2), "-q", "--no-cache", "--baseline", str(base))
    assert r.returncode == 2 and "not a mtp-audit baseline" in r.stderr
