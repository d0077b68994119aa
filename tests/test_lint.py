"""Pre-merge lint and autofix on a git repository made from the real vLLM 0.33.0 release."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from scan_helpers import git

from rules import all_rules

pytestmark = pytest.mark.release

DEEPSEEK = "vllm/model_executor/models/deepseek_mtp.py"




def cli(repo: Path, *args: str, cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MTP_AUDIT_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "auditor.cli", *args], cwd=repo, capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def vllm_repo(tmp_path_factory):
    from release_cache import release_root

    src = release_root("0.33.0")
    repo = tmp_path_factory.mktemp("vllm033")
    shutil.copytree(src / "vllm", repo / "vllm", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "vLLM 0.33.0")
    return repo


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    from release_cache import fresh_cache_dir

    return fresh_cache_dir(tmp_path_factory.mktemp("cache"))


def branch(repo: Path, name: str) -> None:
    git(repo, "checkout", "-q", "-B", name, "main")


def test_dropping_the_step_in_deepseek_is_one_new_mtp001(vllm_repo, cache):
    branch(vllm_repo, "drop")
    f = vllm_repo / DEEPSEEK
    text = f.read_text()
    needle = "            inputs_embeds,\n            spec_step_idx,\n        )"
    assert needle in text
    f.write_text(text.replace(needle, "            inputs_embeds,\n        )", 1))
    git(vllm_repo, "commit", "-qam", "drop the step")
    status_before = git(vllm_repo, "status", "--porcelain")

    r = cli(vllm_repo, "lint", ".", "--base", "HEAD~1", cache=cache)
    assert r.returncode == 1, r.stderr
    assert "MTP001" in r.stdout and "DeepSeekMTP.forward" in r.stdout
    assert "1 finding" in r.stdout.splitlines()[-1]

    r = cli(vllm_repo, "lint", ".", "--base", "HEAD~1", "-f", "github", cache=cache)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("::")]
    new = [ln for ln in lines if not ln.startswith("::notice ")]
    assert len(new) == 1 and new[0].startswith(f"::error file={DEEPSEEK},line=")
    # What the change removed is a notice, never an error or a warning. In 0.33.0 it is the
    # compiled-forward MTP007 on DeepSeekMTP: its forward no longer receives the step, so
    # nothing is left to freeze; it is masked by the new MTP001 on its route, never fixed.
    gone = [ln for ln in lines if ln not in new]
    assert all(any(f",title={kind}" in ln for kind in ("fixed%3A ", "behaviour change ", "masked%3A ")) for ln in gone)
    assert not any(",title=fixed%3A MTP007" in ln for ln in gone), gone
    assert any(",title=masked%3A MTP007" in ln and "masked by MTP001 [id " in ln for ln in gone), gone

    r = cli(vllm_repo, "lint", ".", "--base", "HEAD~1", "-f", "sarif", cache=cache)
    results = [x for x in json.loads(r.stdout)["runs"][0]["results"] if x["baselineState"] == "new"]
    assert [x["ruleId"] for x in results] == ["MTP001"]
    assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == DEEPSEEK

    # --fail-on error still fails (MTP001 is an error); the work tree was not touched.
    assert cli(vllm_repo, "lint", ".", "--base", "HEAD~1", "--fail-on", "error", cache=cache).returncode == 1
    assert git(vllm_repo, "status", "--porcelain") == status_before


def test_unrelated_change_is_green(vllm_repo, cache):
    branch(vllm_repo, "unrelated")
    (vllm_repo / "vllm" / "envs_note.py").write_text("NOTE = 'unrelated'\n")
    readme = vllm_repo / "vllm" / "logger.py"
    readme.write_text(readme.read_text() + "\n# an unrelated comment\n")
    git(vllm_repo, "add", "-A")
    git(vllm_repo, "commit", "-qm", "unrelated")
    r = cli(vllm_repo, "lint", ".", "--base", "HEAD~1", cache=cache)
    assert r.returncode == 0, r.stdout + r.stderr
    out = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert len(out) == 1 and out[0].startswith("0 findings"), out


TOY_PREDICTOR = '''
import torch.nn as nn


class ToyPredictor(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n = config.num_nextn_predict_layers
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.n)])

    def forward(self, input_ids, positions, hidden_states{extra}):
        return self.layers[{index}](hidden_states)
'''

TOY_WRAPPER = '''
import torch.nn as nn

from vllm.model_executor.models.toy_predictor import ToyPredictor


class ToyMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = ToyPredictor(config)

    def forward(self, input_ids, positions, hidden_states, **kwargs):
        return self.model(input_ids, positions, hidden_states)

    def compute_logits(self, hidden_states, spec_step_idx: int = 0):
        return hidden_states
'''


def test_change_in_one_file_makes_another_files_wrapper_drop(vllm_repo, cache):
    branch(vllm_repo, "crossfile")
    models = vllm_repo / "vllm" / "model_executor" / "models"
    (models / "toy_predictor.py").write_text(TOY_PREDICTOR.format(extra="", index="0"))
    (models / "toy_mtp.py").write_text(TOY_WRAPPER)
    git(vllm_repo, "add", "-A")
    git(vllm_repo, "commit", "-qm", "toy model, one layer used")
    # The callee gains a step parameter that selects the layer; the wrapper file is unchanged.
    (models / "toy_predictor.py").write_text(
        TOY_PREDICTOR.format(extra=", spec_step_idx: int = 0", index="spec_step_idx % self.n")
    )
    git(vllm_repo, "commit", "-qam", "predictor selects by step")
    r = cli(vllm_repo, "lint", ".", "--base", "HEAD~1", "-f", "json", cache=cache)
    assert r.returncode == 1, r.stderr
    found = json.loads(r.stdout)["findings"]
    assert [(f["rule"], f["path"], f["function"]) for f in found] == [
        ("MTP001", "vllm/model_executor/models/toy_mtp.py", "ToyMTP.forward")
    ]
    assert "introduced by the change to vllm/model_executor/models/toy_predictor.py" in found[0]["message"]


def test_bad_ref_is_one_line_error(vllm_repo, cache):
    r = cli(vllm_repo, "lint", ".", "--base", "no-such-ref", cache=cache)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_fix_qwen_wrappers(vllm_repo, cache):
    branch(vllm_repo, "fix")
    files = ["vllm/model_executor/models/qwen3_5_mtp.py", "vllm/model_executor/models/qwen3_next_mtp.py"]
    before = {p: (vllm_repo / p).read_text() for p in files}
    args = ["fix", "."] + [x for p in files for x in ("--file", p)]
    preview = cli(vllm_repo, *args, "--diff", cache=cache)
    assert preview.returncode == 0, preview.stderr
    assert {p: (vllm_repo / p).read_text() for p in files} == before  # --diff writes nothing
    changed = [ln for ln in preview.stdout.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    # per file: the parameter, and the call one argument per line (ruff/black's layout): 8 lines
    assert 0 < len(changed) <= 16, preview.stdout
    assert "+        spec_step_idx: int = 0," in preview.stdout

    r = cli(vllm_repo, *args, cache=cache)
    assert r.returncode == 0, r.stderr
    import ast

    for p in files:
        after = (vllm_repo / p).read_text()
        ast.parse(after)
        comments = [ln.strip() for ln in before[p].splitlines() if ln.strip().startswith("#")]
        assert comments and comments == [ln.strip() for ln in after.splitlines() if ln.strip().startswith("#")]
    scan = cli(vllm_repo, "scan", ".", "-q", "-f", "json", "--select", "MTP001", cache=cache)
    left = {f["path"] for f in json.loads(scan.stdout)["findings"]}
    assert not left & set(files)
    git(vllm_repo, "checkout", "-q", "--", ".")


def test_fix_refuses_what_would_raise_type_error(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from scan_helpers import scan_tree, write_tree

    from auditor.services.fix import apply_fixes

    # The wrapper's self.model is one of two classes; one cannot take the step.
    src = '''
import torch.nn as nn


class Selecting(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])

    def forward(self, x, spec_step_idx=0):
        return self.layers[spec_step_idx](x)


class Plain(nn.Module):
    def forward(self, x):
        return x


class Wrapper(nn.Module):
    def __init__(self, flag):
        super().__init__()
        if flag:
            self.model = Selecting()
        else:
            self.model = Plain()

    def forward(self, x, **kwargs):
        return self.model(x)
'''
    root = write_tree(tmp_path, {"vllm/m_mtp.py": src})
    scan = scan_tree(root)
    assert [f.rule for f in scan.result.findings] == ["MTP001"]
    report = apply_fixes(scan, root, all_rules())
    assert not report.changed and report.refused
    assert "Plain.forward cannot accept spec_step_idx" in report.refused[0][1]
    assert (root / "vllm/m_mtp.py").read_text() == src
