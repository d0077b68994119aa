"""``history --layers``: since which release draft step i reaches MTP layer i (issue 11 item 3),
over a synthetic git repository of releases written here, and over real imported releases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import git
import pytest
from test_history import assert_one_line_error, commit, invoke

from auditor.common.errors import UsageError
from auditor.output.layer_history import render
from auditor.services.history.layers import PlanCache, run_layer_history
from rules import all_rules
from trees import gate_tree as _tree

INIT = "vllm/spec_decode/__init__.py"
SPECULATORS = "vllm/spec_decode/speculators.py"
DEEP = "vllm/models/deep_mtp.py"


def _variants() -> dict[str, dict[str, str]]:
    """The dispatch fixture of MTP006 in four shapes: the gate that picks the per-step
    speculator missing (eagle-style only), present with the head called without the step,
    the head called with it, and the gate gone again."""
    base = _tree()
    no_gate = base[INIT].replace("speculative_config.use_multi_module_mtp()", "speculative_config.method == 'never'")
    assert no_gate != base[INIT]
    deep = base[DEEP].replace(
        "        self.layers = nn",
        "        self.heads = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])\n        self.layers = nn",
    ).rstrip() + (
        "\n\n    def compute_logits(self, h, spec_step_idx: int = 0):\n"
        "        return self.heads[spec_step_idx % self.num_mtp_layers](h)\n"
    )
    step = "            x = self.model(x, spec_step_idx=step)\n"
    assert step in base[SPECULATORS]
    head_without_step = base[SPECULATORS].replace(step, step + "            x = self.model.compute_logits(x)\n")
    head_with_step = base[SPECULATORS].replace(step, step + "            x = self.model.compute_logits(x, spec_step_idx=step)\n")
    return {
        "v0.1.0": {**base, INIT: no_gate, DEEP: deep, SPECULATORS: head_without_step},
        "v0.2.0": {INIT: base[INIT]},
        "v0.3.0": {SPECULATORS: head_with_step},
        "v0.4.0": {INIT: no_gate},
    }


def build_layer_repo(path: Path) -> None:
    """v0.0.1 without vllm/, then the four shapes of :func:`_variants`, one tag each."""
    repo = git.Repo.init(path, initial_branch="main")
    commit(repo, {"README.md": "docs only\n"}, "initial")
    repo.create_tag("v0.0.1")
    for tag, files in _variants().items():
        commit(repo, files, f"release {tag}")
        repo.create_tag(tag)
    repo.close()


@pytest.fixture(scope="module")
def layer_repo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("layers") / "repo"
    build_layer_repo(path)
    return path


def _row(hist, arch: str, runner: str):
    return next(r for r in hist.rows() if (r.architecture, r.runner) == (arch, runner))


def test_first_release_where_step_i_reaches_layer_i_forward_then_head(layer_repo, tmp_path):
    hist = run_layer_history(layer_repo, cache_dir=tmp_path / "cache", rules=all_rules())
    assert [r.ref for r in hist.releases] == ["v0.0.1", "v0.1.0", "v0.2.0", "v0.3.0", "v0.4.0"]
    assert hist.releases[0].skipped and not hist.releases[0].cells
    deep = _row(hist, "DeepMTPModel", "v2")
    # the gate appears in v0.2.0 (forward layers follow the step), the head follows in v0.3.0,
    # and v0.4.0 loses both again
    assert deep.forward_since == "v0.2.0" and deep.head_since == "v0.3.0"
    assert deep.forward_lost == ("v0.4.0",) and deep.head_lost == ("v0.4.0",)
    cells = deep.cells
    assert cells["v0.1.0"].drafter == "EagleStyleSpeculator" and cells["v0.1.0"].forward == (0, 0, 0)
    assert cells["v0.2.0"].drafter == "MultiModuleSpeculator"
    assert (cells["v0.2.0"].forward, cells["v0.2.0"].head) == ((0, 1, 2), (0, 0, 0))
    assert (cells["v0.3.0"].forward, cells["v0.3.0"].head) == ((0, 1, 2), (0, 1, 2))
    assert cells["v0.4.0"].forward == (0, 0, 0)
    # Qwen sizes its layers by a field the gate never reads: never per step
    qwen = _row(hist, "QwenMTP", "v2")
    assert qwen.forward_since is None and qwen.head_since is None and qwen.shared_head
    assert {c.drafter for c in qwen.cells.values()} == {"EagleStyleSpeculator"}
    # the fixture has no V1 dispatch: rows exist, with no drafter and never a layer
    v1 = _row(hist, "DeepMTPModel", "v1")
    assert v1.forward_since is None and not v1.shared_head and {c.drafter for c in v1.cells.values()} == {None}


def test_k_and_layer_count_change_the_answer(layer_repo, tmp_path):
    """4 steps over 3 layers wrap around (step 3 runs layer 0); 3 steps over 2 layers too."""
    hist = run_layer_history(layer_repo, cache_dir=None, rules=all_rules(), k=4, runners=("v2",))
    deep = _row(hist, "DeepMTPModel", "v2")
    assert deep.cells["v0.3.0"].forward == (0, 1, 2, 0) and deep.forward_since == "v0.2.0"
    assert {r.runner for r in hist.rows()} == {"v2"}
    hist = run_layer_history(layer_repo, cache_dir=None, rules=all_rules(), k=3, layers=2, runners=("v2",),
                             start="v0.3.0", end="v0.3.0")
    deep = _row(hist, "DeepMTPModel", "v2")
    assert deep.cells["v0.3.0"].forward == (0, 1, 0) and deep.forward_since == "v0.3.0"


def test_plans_are_cached_per_tree(layer_repo, tmp_path):
    cache = tmp_path / "cache"
    first = run_layer_history(layer_repo, cache_dir=cache, rules=all_rules())
    assert first.timing["scanned"] == 4 and first.timing["from_cache"] == 0
    second = run_layer_history(layer_repo, cache_dir=cache, rules=all_rules())
    assert second.timing["scanned"] == 0 and second.timing["from_cache"] == 4
    assert render(first, "json") == render(second, "json")
    # other settings are other entries
    other = run_layer_history(layer_repo, cache_dir=cache, rules=all_rules(), k=4)
    assert other.timing["scanned"] == 4
    # a corrupt entry is a miss, recomputed and rewritten
    entries = sorted((cache / "layer-plans").rglob("*.json"))
    assert len(entries) == 8
    for p in entries:
        p.write_text("{not json")
    again = run_layer_history(layer_repo, cache_dir=cache, rules=all_rules())
    assert again.timing["scanned"] == 4 and render(again, "json") == render(first, "json")
    assert PlanCache(None).get("x") is None


def test_history_layers_cli_formats(layer_repo, tmp_path):
    cache = tmp_path / "cache"
    res = invoke("history", layer_repo, "--layers", "--cache-dir", cache, "-q")
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("DeepMTPModel  V2"))
    assert "v0.2.0 (not in v0.4.0)  v0.3.0 (not in v0.4.0)" in line and "0,1,2 / 0,0,0  0,1,2 / 0,1,2" in line
    qwen = next(ln for ln in res.stdout.splitlines() if ln.startswith("QwenMTP       V2"))
    assert qwen.split()[2:5] == ["never", "shared", "head"]
    assert "skipped v0.0.1: no vllm/ directory" in res.stdout

    out = tmp_path / "l.json"
    assert invoke("history", layer_repo, "--layers", "--runner", "v2", "-f", "json", "-o", out, "--cache-dir", cache, "-q").exit_code == 0
    doc = json.loads(out.read_text())
    assert doc["kind"] == "layer-history" and (doc["k"], doc["layers"], doc["runners"]) == (3, 3, ["v2"])
    assert [r["status"] for r in doc["releases"]] == ["skipped", "scanned", "scanned", "scanned", "scanned"]
    deep = next(r for r in doc["rows"] if r["architecture"] == "DeepMTPModel")
    assert (deep["forward_since"], deep["head_since"], deep["forward_lost"]) == ("v0.2.0", "v0.3.0", ["v0.4.0"])
    assert deep["cells"]["v0.2.0"]["forward_reaches"] is True and deep["cells"]["v0.2.0"]["head_reaches"] is False
    assert deep["cells"]["v0.3.0"]["head_layers"] == [0, 1, 2]
    assert "v0.0.1" not in deep["cells"]

    res = invoke("history", layer_repo, "--layers", "-f", "markdown", "--cache-dir", cache, "-q")
    assert "| `DeepMTPModel` | V2 | v0.2.0 (not in v0.4.0) | v0.3.0 (not in v0.4.0) | 0,0,0 / -,-,- | 0,1,2 / 0,0,0 |" in res.stdout

    page = tmp_path / "l.html"
    assert invoke("history", layer_repo, "--layers", "-f", "html", "-o", page, "--cache-dir", cache, "-q").exit_code == 0
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "http" not in text.replace("http-equiv", "")
    assert '<td class="cell threaded"' in text and '<td class="cell unknown"' in text  # v0.3.0; v0.2.0 forward only


def test_history_layers_bad_options(layer_repo, tmp_path):
    cache = tmp_path / "cache"
    assert_one_line_error(invoke("history", layer_repo, "--k", "4", "--cache-dir", cache), UsageError, "go with --layers")
    assert_one_line_error(invoke("history", layer_repo, "--layers", "--runner", "v3", "--cache-dir", cache), UsageError, "v1 or v2")
    assert invoke("history", layer_repo, "--layers", "--k", "1", "--cache-dir", cache).exit_code == 2
    env = {**os.environ, "MTP_AUDIT_CACHE_DIR": str(cache)}
    res = subprocess.run([sys.executable, "-m", "auditor.cli", "history", str(layer_repo), "--layer-count", "2"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 2 and res.stderr.strip().splitlines() == ["mtp-audit: error: --k, --layer-count and --runner go with --layers"]


# --------------------------------------------------------------------------- real releases

REAL = ["0.26.0", "0.30.0", "0.33.0"]


@pytest.fixture(scope="module")
def real_layer_history(tmp_path_factory):
    from release_cache import fresh_cache_dir, release_cache_dir

    from auditor.source.releases import import_releases

    base = tmp_path_factory.mktemp("real-layers")
    repo = base / "releases.git"
    import_releases(REAL, repo, cache_dir=release_cache_dir(), progress=False)
    # fresh plan and result caches: the first run plans every release (facts are shared)
    cache = fresh_cache_dir(base / "cache")
    first = run_layer_history(repo, cache_dir=cache, rules=all_rules())
    second = run_layer_history(repo, cache_dir=cache, rules=all_rules())
    return first, second


@pytest.mark.release
def test_release_deepseek_v2_forward_since_0_30_heads_since_0_33_qwen35_never(real_layer_history):
    hist, again = real_layer_history
    assert [r.ref for r in hist.releases] == [f"v{v}" for v in REAL] and not any(r.skipped for r in hist.releases)
    deep = _row(hist, "DeepSeekMTPModel", "v2")
    # 0.30.0 builds the multi-module speculator: forward layer i at step i, but its sampling
    # path calls compute_logits without the step (head 0); 0.33.0 threads both
    assert deep.forward_since == "v0.30.0" and deep.head_since == "v0.33.0"
    assert not deep.forward_lost and not deep.head_lost
    c30, c33 = deep.cells["v0.30.0"], deep.cells["v0.33.0"]
    assert c30.drafter == c33.drafter == "MultiModuleMTPSpeculator"
    assert c30.forward == (0, 1, 2) and c30.head == (0, 0, 0)
    assert (c33.forward, c33.head) == ((0, 1, 2), (0, 1, 2))
    assert deep.cells["v0.26.0"].forward == (0, 0, 0)
    # V1 stays eagle-style
    assert _row(hist, "DeepSeekMTPModel", "v1").forward_since is None
    # Qwen3.5 sizes its layers by mtp_num_hidden_layers, the gate reads num_nextn_predict_layers
    for arch in ("Qwen3_5MTP", "Qwen3_5MoeMTP"):
        for runner in ("v1", "v2"):
            row = _row(hist, arch, runner)
            assert row.forward_since is None and row.head_since is None, (arch, runner)
    # the second run reads every release's plans from the cache
    assert hist.timing["scanned"] == len(REAL) and hist.timing["from_cache"] == 0
    assert again.timing["scanned"] == 0 and again.timing["from_cache"] == len(REAL)
    assert render(again, "json") == render(hist, "json")
