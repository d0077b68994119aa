"""`mtp-audit layers` on small trees written here (the dispatch shapes of vLLM, our code):
the per-step plan, its JSON contract, the decision chain, and bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from scan_helpers import scan_tree, write_tree

from auditor.common.cache_entry import unseal

from auditor.analyses.dispatch import DispatchProvider, Setting
from auditor.services.citations import cite
from cli_runner import invoke
from trees import gate_tree as _tree

PLAN_KEYS = {"runner", "method", "k", "architecture", "proposer", "model_class", "num_mtp_layers", "steps", "decisions"}
STEP_KEYS = {"step", "forward_layer", "forward_layers", "head_layer", "verdict", "why"}

# Qwen's wrapper takes the step in **kwargs and drops it: under the per-step drafter the
# step is lost (MTP001), and the plan must say where.
_DROPPING_QWEN = '''
import torch.nn as nn


class QwenPredictor(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_mtp_layers = config.mtp_num_hidden_layers
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])

    def forward(self, x, spec_step_idx: int = 0):
        return self.layers[spec_step_idx % self.num_mtp_layers](x)


class QwenMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = QwenPredictor(config)

    def forward(self, x, **kwargs):
        return self.model(x)
'''


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``mtp-audit ARGS`` in this process (see :mod:`cli_runner`)."""
    return invoke(*args, env=env)


@pytest.fixture
def tree(tmp_path) -> Path:
    return write_tree(tmp_path / "t", _tree())


@pytest.fixture
def cache_env(tmp_path):
    return {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}


def planned_scan(root: Path, settings, config=None):
    """A scan that asks for the plans in its loading phase (as `layers` does), then the
    plans again with the scan's findings."""
    from auditor.facts.cache import FactsCache
    from auditor.common.config import Config
    from auditor.engine.scan import run_scan
    from auditor.source.trees import DirectoryTree
    from rules import all_rules

    class Plans:
        def ask(self, analysis):
            for s in settings:
                analysis.get(DispatchProvider).plan(s)

    scan = run_scan(DirectoryTree(root), config or Config(), all_rules(), FactsCache(None), 1, queries=[Plans()])
    assert scan.analysis is not None
    d = scan.analysis.get(DispatchProvider)
    return scan, [cite(d.plan(s), scan.result.findings) for s in settings]


def _plan(root: Path, setting: Setting):
    plan = planned_scan(root, [setting])[1][0]
    assert not any("frozen" in n for n in plan.notes)
    return plan


def test_gate_open_threads_step_i_to_layer_i(tree):
    plan = _plan(tree, Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3),)))
    assert plan.proposer == ("vllm/spec_decode/speculators.py", "MultiModuleSpeculator")
    assert plan.model_class == ("vllm/models/deep_mtp.py", "DeepMTP")
    assert plan.num_mtp_layers == 3 and plan.layer_field == "num_nextn_predict_layers"
    assert [(s.forward_layer, s.verdict) for s in plan.steps] == [(0, "threaded"), (1, "threaded"), (2, "threaded")]
    gate = [d for d in plan.decisions if "use_multi_module_mtp" in d.condition]
    assert gate and gate[0].value is True and gate[0].line == 4
    assert "hf_config.num_nextn_predict_layers (default 1)" in gate[0].fields


def test_more_steps_than_layers_wrap_around(tree):
    plan = _plan(tree, Setting("v2", 4, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 2),)))
    assert [s.forward_layer for s in plan.steps] == [0, 1, 0, 1]


def test_k_smaller_than_the_layer_count_closes_the_gate(tree):
    # min(3, 1) > 1 is False: the eagle-style drafter, layer 0.
    plan = _plan(tree, Setting("v2", 1, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3),)))
    assert plan.proposer is not None and plan.proposer[1] == "EagleStyleSpeculator"
    assert [(s.forward_layer, s.verdict) for s in plan.steps] == [(0, "constant — eagle-style by design")]


def test_other_field_never_opens_the_gate(tree):
    scan, (plan,) = planned_scan(tree, [Setting("v2", 3, architecture="QwenMTP", fields=(("mtp_num_hidden_layers", 3),))])
    assert plan.proposer is not None and plan.proposer[1] == "EagleStyleSpeculator"
    assert [s.forward_layer for s in plan.steps] == [0, 0, 0]
    # The constant is explained by the gate that never opens for QwenMTP: its MTP006 finding.
    mtp006 = [f for f in scan.result.findings if f.rule == "MTP006" and any(c.name == "QwenMTP" for c in f.affected_classes)]
    assert mtp006
    assert {s.verdict for s in plan.steps} == {f"constant — gate never opens (MTP006 {mtp006[0].fingerprint})"}
    gate = next(d for d in plan.decisions if "use_multi_module_mtp" in d.condition)
    assert gate.value is False


def test_lost_step_names_the_finding(tmp_path):
    files = _tree(', "num_nextn_predict_layers": n_predict')
    files["vllm/models/qwen_mtp.py"] = _DROPPING_QWEN
    root = write_tree(tmp_path / "t", files)
    setting = Setting("v2", 2, architecture="QwenMTP", fields=(("num_nextn_predict_layers", 2), ("mtp_num_hidden_layers", 2)))
    scan, (plan,) = planned_scan(root, [setting])
    mtp001 = [f for f in scan.result.findings if f.rule == "MTP001" and f.function == "QwenMTP.forward"]
    assert mtp001
    assert plan.proposer is not None and plan.proposer[1] == "MultiModuleSpeculator"
    assert [s.verdict for s in plan.steps] == [f"lost at {mtp001[0].fingerprint}"] * 2
    assert [s.forward_layer for s in plan.steps] == [0, 0]
    assert "MTP001" in plan.steps[0].why


def test_hf_config_runs_the_override_code(tree, tmp_path, cache_env):
    target = tmp_path / "config.json"
    target.write_text(json.dumps({"model_type": "qwen", "architectures": ["QwenForCausalLM"], "mtp_num_hidden_layers": 3}))
    r = run_cli("layers", str(tree), "--hf-config", str(target), "--k", "3", "--runner", "v2", "--format", "json", env=cache_env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert PLAN_KEYS <= set(doc)
    assert doc["architecture"] == "QwenMTP" and doc["model_class"] == {"class": "QwenMTP", "path": "vllm/models/qwen_mtp.py"}
    assert doc["num_mtp_layers"] == 3
    assert doc["proposer"]["class"] == "EagleStyleSpeculator"
    override = [d for d in doc["decisions"] if d["function"] == "SpeculativeConfig.hf_config_override"]
    assert [d["line"] for d in override] == [8] and override[0]["value"] is True
    assert [set(s) for s in doc["steps"]] == [STEP_KEYS] * 3
    assert all(s["forward_layers"] == [s["forward_layer"]] for s in doc["steps"])  # one selected layer


def test_both_runners_without_runner_and_formats(tree, cache_env):
    r = run_cli("layers", str(tree), "--arch", "DeepMTPModel", "--set", "num_nextn_predict_layers=3", "--k", "2",
                "--format", "json", env=cache_env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [p["runner"] for p in doc["plans"]] == ["v1", "v2"]
    v1, v2 = doc["plans"]
    assert v1["proposer"] is None and any("runner v1" in n for n in v1["notes"])  # this tree has no V1 factory
    # ... so nothing says which drafter runs: every step unknown, never "none built" (a release
    # without that runner, as vLLM 0.34.0 has no V1 runner).
    assert [s["verdict"] for s in v1["steps"]] == ["unknown", "unknown"]
    assert all("no dispatch factory for runner v1" in s["why"] for s in v1["steps"])
    text = run_cli("layers", str(tree), "--arch", "DeepMTPModel", "--set", "num_nextn_predict_layers=3", "--k", "2",
                   "--runner", "v1", env=cache_env).stdout
    assert "drafter:     not known" in text and "none built" not in text
    assert [s["forward_layer"] for s in v2["steps"]] == [0, 1]
    assert [s["head_layer"] for s in v2["steps"]] == [None, None]  # one shared head
    r = run_cli("layers", str(tree), "--arch", "DeepMTPModel", "--set", "num_nextn_predict_layers=3", "--k", "2",
                "--runner", "v2", "--format", "markdown", env=cache_env)
    assert r.returncode == 0 and "| step | forward layer | head layer | verdict | why |" in r.stdout
    r = run_cli("layers", str(tree), "--arch", "DeepMTPModel", "--set", "num_nextn_predict_layers=3", "--k", "2",
                "--runner", "v2", env=cache_env)
    assert r.returncode == 0 and "MultiModuleSpeculator" in r.stdout and "threaded" in r.stdout


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--arch", "QwenMPT", "--k", "3"], "unknown draft architecture 'QwenMPT'; closest registered: QwenMTP"),
        (["--arch", "QwenMTP", "--k", "3", "--set", "novalue"], "--set takes FIELD=VALUE"),
        (["--arch", "QwenMTP", "--k", "3", "--set", "text_config..n=3"], "--set takes FIELD=VALUE"),
        (["--k", "3"], "give exactly one of --arch"),
        (["--arch", "QwenMTP", "--hf-config", "x.json", "--k", "3"], "give exactly one of --arch"),
        (["--hf-config", "/nonexistent/config.json", "--k", "3"], "cannot read --hf-config"),
    ],
)
def test_bad_input_is_one_line_exit_2(tree, cache_env, args, fragment):
    r = run_cli("layers", str(tree), *args, "-q", env=cache_env)  # -q: no progress lines, the error alone
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mtp-audit: error: ") and fragment in lines[0], r.stderr


def test_dispatch_names_come_from_the_configuration(tmp_path):
    """vLLM's names are only defaults: a tree whose factory has another name is planned
    once [tool.mtp-audit] names it, and not before."""
    from auditor.common.config import load_config

    files = _tree()
    files["vllm/spec_decode/__init__.py"] = files["vllm/spec_decode/__init__.py"].replace("def init_speculator", "def make_drafter")
    root = write_tree(tmp_path / "t", files)
    setting = Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3),))
    assert _plan(root, setting).proposer is None
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.mtp-audit]\ndispatch-factories = { v2 = ["make_drafter"] }\n')
    _, (plan,) = planned_scan(root, [setting], load_config(pyproject))
    assert plan.proposer is not None and plan.proposer[1] == "MultiModuleSpeculator"
    assert [s.forward_layer for s in plan.steps] == [0, 1, 2]


@pytest.mark.parametrize(
    "body,needle",
    [
        ('dispatch-factories = { v2 = "init_speculator" }\n', "dispatch-factories must map names to lists of non-empty strings"),
        ('dispatch-roles = { colour = "red" }\n', "dispatch-roles has unknown role(s) colour"),
        ("platform-dirs = { cuda = 3 }\n", "platform-dirs must map names to non-empty strings"),
    ],
)
def test_bad_dispatch_configuration_names_the_key(tmp_path, body, needle):
    from auditor.common.config import load_config
    from auditor.common.errors import ConfigError

    p = tmp_path / "pyproject.toml"
    p.write_text("[tool.mtp-audit]\n" + body)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    assert needle in str(err.value)


def test_all_is_the_matrix_of_every_registered_mtp_architecture_and_runner(tree, cache_env):
    r = run_cli("layers", str(tree), "--all", "--format", "json", env=cache_env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["k"] == 3 and doc["layers"] == 3
    rows = {(p["architecture"], p["runner"]): p for p in doc["plans"]}
    assert set(rows) == {(a, r) for a in ("DeepMTPModel", "QwenMTP") for r in ("v1", "v2")}
    # Each model gets the layer count on its own field: the gate opens only for DeepMTP.
    assert rows[("DeepMTPModel", "v2")]["proposer"]["class"] == "MultiModuleSpeculator"
    assert [s["forward_layer"] for s in rows[("DeepMTPModel", "v2")]["steps"]] == [0, 1, 2]
    assert rows[("QwenMTP", "v2")]["proposer"]["class"] == "EagleStyleSpeculator"
    assert rows[("QwenMTP", "v2")]["num_mtp_layers"] == 3
    r = run_cli("layers", str(tree), "--all", "--k", "2", "--runner", "v2", env=cache_env)
    assert r.returncode == 0, r.stderr
    assert "| `DeepMTPModel` | `DeepMTP` | V2 | `MultiModuleSpeculator` | 0,1 | -,- | threaded |" in r.stdout
    assert "| `QwenMTP` | `QwenMTP` | V2 | `EagleStyleSpeculator` | 0,0 | -,- | constant — gate never opens (MTP006 " in r.stdout
    r = run_cli("layers", str(tree), "--all", "--arch", "QwenMTP", env=cache_env)
    assert r.returncode == 2 and "leave out --arch" in r.stderr


def test_arch_starts_from_what_the_override_writes_for_its_family(tree):
    scan = scan_tree(tree)
    assert scan.analysis is not None
    d = scan.analysis.get(DispatchProvider)
    # The qwen branch guards on model_type == "qwen" and sets model_type = "qwen_mtp".
    assert d.family_fields("QwenMTP") == {"model_type": "qwen_mtp"}
    assert d.family_fields("DeepMTPModel") == {"model_type": "deep"}


def test_all_html_heat_map_is_self_contained_and_coloured_by_verdict(tree, cache_env, tmp_path):
    from html.parser import HTMLParser

    out = tmp_path / "layers.html"
    r = run_cli("layers", str(tree), "--all", "--format", "html", "-o", str(out), env=cache_env)
    assert r.returncode == 0, r.stderr
    page = out.read_text()

    class Cells(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.cells: list[tuple[str, str]] = []  # (class, title)
            self.external: list[str] = []

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "td" and "cell" in (a.get("class") or ""):
                self.cells.append((a["class"], a.get("title", "")))
            if tag in ("script", "link", "img") and (a.get("src") or a.get("href")):
                self.external.append(tag)

    p = Cells()
    p.feed(page)
    assert not p.external, "the page must not load anything"
    # 2 architectures x 2 runners x K=3 steps; this tree has no V1 factory (no steps there).
    classes = [c for c, _ in p.cells]
    assert classes.count("cell threaded") == 3 and classes.count("cell constant") == 3
    assert all(title for c, title in p.cells if c != "cell none")
    assert "<code>MultiModuleSpeculator</code>" in page and "<code>EagleStyleSpeculator</code>" in page


def test_an_unchanged_tree_answers_from_the_cache_and_a_change_is_seen(tree, cache_env, tmp_path):
    args = ["layers", str(tree), "--arch", "DeepMTPModel", "--set", "num_nextn_predict_layers=3", "--k", "3",
            "--runner", "v2", "-f", "json"]
    first = run_cli(*args, env=cache_env)
    assert first.returncode == 0, first.stderr
    stored = list((Path(cache_env["MTP_AUDIT_CACHE_DIR"]) / "layers").rglob("*.txt"))
    assert len(stored) == 1 and unseal(stored[0].stem, stored[0].read_bytes()) == first.stdout.encode()
    again = run_cli(*args, env=cache_env)
    assert again.stdout == first.stdout
    # Another question is another entry; an edited tree is planned again.
    run_cli(*args[:-1], "text", env=cache_env)
    assert len(list((Path(cache_env["MTP_AUDIT_CACHE_DIR"]) / "layers").rglob("*.txt"))) == 2
    src = next(p for p in tree.rglob("*.py") if "spec_step_idx=step" in p.read_text())
    src.write_text(src.read_text().replace("spec_step_idx=step", "spec_step_idx=0"))
    edited = run_cli(*args, env=cache_env)
    assert edited.returncode == 0 and edited.stdout != first.stdout


# vLLM 0.18.0 / 0.22.1: the V2 factory has one supported case and raises otherwise.
_ONE_CASE_FACTORY = '''
def init_speculator(vllm_config):
    speculative_config = vllm_config.speculative_config
    assert speculative_config is not None
    if speculative_config.method == "mtp":
        from vllm.spec_decode.speculators import EagleStyleSpeculator

        return EagleStyleSpeculator(vllm_config)
    raise NotImplementedError(f"{speculative_config.method} is not supported yet.")
'''


def test_a_factory_with_one_supported_case_that_raises_otherwise_is_a_factory(tmp_path):
    files = _tree()
    files["vllm/spec_decode/__init__.py"] = _ONE_CASE_FACTORY
    root = write_tree(tmp_path / "t", files)
    plan = _plan(root, Setting("v2", 2, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 2),)))
    assert not any("no dispatch factory" in n for n in plan.notes), plan.notes
    assert plan.proposer == ("vllm/spec_decode/speculators.py", "EagleStyleSpeculator")
    assert [(s.forward_layer, s.verdict) for s in plan.steps] == [(0, "constant — eagle-style by design")] * 2
    # Another method takes the raising path: no drafter.
    other = _plan(root, Setting("v2", 2, method="ngram", architecture="DeepMTPModel"))
    assert other.proposer is None


def test_speculative_config_engine_mode_and_a_model_directory_on_the_command_line(tree, cache_env, tmp_path):
    spec = '{"method": "mtp", "num_speculative_tokens": 2, "draft_sample_method": "probabilistic"}'
    r = run_cli("layers", str(tree), "--speculative-config", spec, "--arch", "DeepMTPModel",
                "--set", "num_nextn_predict_layers=2", "--runner", "v2", "--format", "json", env=cache_env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["k"] == 2 and doc["method"] == "mtp" and doc["outcome"] == "plan" and doc["rejections"] == []
    assert doc["raises_at_step"] is None and "compiled" in doc
    r = run_cli("layers", str(tree), "--speculative-config", spec, "--k", "3", "--arch", "DeepMTPModel", env=cache_env)
    assert r.returncode == 2 and "disagree" in r.stderr
    r = run_cli("layers", str(tree), "--k", "2", "--arch", "DeepMTPModel", "--engine-mode", "jit", env=cache_env)
    assert r.returncode == 2 and "--engine-mode" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("layers", str(tree), "--k", "2", "--arch", "DeepMTPModel", "--runner", "v2", "--engine-mode", "eager",
                "--format", "json", env=cache_env)
    assert r.returncode == 0 and "compiled" not in json.loads(r.stdout)
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text('{"model_type": "deep", "num_nextn_predict_layers": 2}')
    r = run_cli("layers", str(tree), "--hf-config", str(model_dir), "--k", "2", "--runner", "v2", "--format", "json",
                env=cache_env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["architecture"] == "DeepMTPModel"


def test_layers_runs_only_the_rules_whose_findings_a_plan_names(tmp_path):
    """`layers` runs the rules of CITED_MEANINGS only; the plans and forced views equal those
    made with every rule's findings, and the cited findings do change the answer."""
    from auditor.common.config import Config
    from auditor.facts.cache import FactsCache
    from auditor.services.citations import CITED_MEANINGS
    from auditor.services.forced_plan import forced_plan
    from auditor.services.layers import cited_rules, plan_tree_forced
    from auditor.source.trees import DirectoryTree
    from rules import all_rules

    files = _tree(', "num_nextn_predict_layers": n_predict')
    files["vllm/models/qwen_mtp.py"] = _DROPPING_QWEN
    root = write_tree(tmp_path / "t", files)
    setting = Setting("v2", 2, architecture="QwenMTP", fields=(("num_nextn_predict_layers", 2), ("mtp_num_hidden_layers", 2)))
    scan, (plan,) = planned_scan(root, [setting])
    assert {f.meaning for f in scan.result.findings} - CITED_MEANINGS, "the tree has findings a plan does not name"
    assert len(cited_rules(all_rules())) < len(all_rules())
    (fast,), (view,) = plan_tree_forced(DirectoryTree(root), Config(), all_rules(), FactsCache(None), lambda _d: [setting], 1)
    assert scan.analysis is not None
    dispatch = scan.analysis.get(DispatchProvider)
    assert fast == plan
    assert view == forced_plan(dispatch, plan, scan.result.findings)
    uncited = [f for f in scan.result.findings if f.meaning not in CITED_MEANINGS]
    assert cite(dispatch.plan(setting), uncited) != plan
