"""What issue #11 promises on real vLLM releases: the per-step layer plan per runner, and
MTP006 (fetched with the release cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from scan_helpers import by_rule, scan_release

from auditor.analyses.dispatch import DispatchProvider, Plan, Setting
from auditor.services.citations import cite

pytestmark = pytest.mark.release

CONSTANT = "constant — eagle-style by design"
DEEPSEEK = (("num_nextn_predict_layers", 3),)
QWEN35 = (("mtp_num_hidden_layers", 3),)


def _plan(version: str, runner: str, arch: str, fields, k: int = 3) -> Plan:
    """As `layers` plans: asked in the scan's loading phase, then with its findings."""
    from release_cache import first_scan, release_cache_dir, release_root

    from auditor.facts.cache import FactsCache
    from auditor.common.config import Config
    from auditor.engine.scan import run_scan
    from auditor.source.trees import DirectoryTree
    from rules import all_rules

    setting = Setting(runner, k, architecture=arch, fields=fields)
    from auditor.services.layers import PlanQuery

    root = release_root(version)
    with first_scan(version):
        scan = run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(release_cache_dir()), 2,
                        queries=[PlanQuery(lambda _dispatch: [setting])])
    assert scan.analysis is not None
    plan = cite(scan.analysis.get(DispatchProvider).plan(setting), scan.result.findings)
    assert not any("frozen" in n for n in plan.notes), plan.notes
    return plan


def test_0_33_v2_deepseek_runs_the_multi_module_speculator_step_i_layer_i():
    plan = _plan("0.33.0", "v2", "DeepSeekMTPModel", DEEPSEEK)
    assert plan.proposer == ("vllm/v1/worker/gpu/spec_decode/multi_module_mtp/speculator.py", "MultiModuleMTPSpeculator")
    assert plan.model_class == ("vllm/model_executor/models/deepseek_mtp.py", "DeepSeekMTP")
    assert plan.num_mtp_layers == 3
    assert [s.forward_layer for s in plan.steps] == [0, 1, 2]
    assert [s.head_layer for s in plan.steps] == [0, 1, 2]
    assert {s.verdict for s in plan.steps} == {"threaded"}
    gate = next(d for d in plan.decisions if "use_multi_module_mtp" in d.condition)
    assert gate.value is True and gate.path == "vllm/v1/worker/gpu/spec_decode/__init__.py" and gate.line == 65
    assert "hf_config.num_nextn_predict_layers (default 1)" in gate.fields


def test_0_33_v1_deepseek_is_eagle_style_layer_0():
    plan = _plan("0.33.0", "v1", "DeepSeekMTPModel", DEEPSEEK)
    assert plan.proposer is not None and plan.proposer[1] == "EagleProposer"
    assert plan.loop is not None and plan.loop.function == "SpecDecodeBaseProposer.propose"
    assert [s.forward_layer for s in plan.steps] == [0, 0, 0]
    assert {s.verdict for s in plan.steps} == {CONSTANT}
    taken = next(d for d in plan.decisions if d.value is True and "use_eagle" in d.condition)
    assert taken.path == "vllm/v1/worker/gpu_model_runner.py"


def test_0_33_v2_qwen35_moe_takes_the_eagle_style_speculator_and_mtp006_says_why():
    plan = _plan("0.33.0", "v2", "Qwen3_5MoeMTP", QWEN35)
    assert plan.proposer is not None and plan.proposer[1] == "MTPSpeculator"
    assert plan.proposer[1] != "MultiModuleMTPSpeculator"
    assert plan.model_class == ("vllm/model_executor/models/qwen3_5_mtp.py", "Qwen3_5MoeMTP")
    assert plan.num_mtp_layers == 3 and plan.layer_field == "mtp_num_hidden_layers"
    assert [s.forward_layer for s in plan.steps] == [0, 0, 0]
    gate = next(d for d in plan.decisions if "use_multi_module_mtp" in d.condition)
    assert gate.value is False
    mtp006 = by_rule(scan_release("0.33.0"), "MTP006")
    qwen = [f for f in mtp006 if "Qwen3_5MoeMTP" in {c.name for c in f.affected_classes}]
    assert len(qwen) == 1
    f = qwen[0]
    assert (f.path, f.line, f.function) == ("vllm/config/speculative.py", 2191, "SpeculativeConfig.use_multi_module_mtp")
    assert "num_nextn_predict_layers (default 1)" in f.message and "from mtp_num_hidden_layers" in f.message
    assert "MultiModuleMTPSpeculator" in f.message


def test_0_33_k_smaller_than_the_layer_count():
    # K=2 < 3 layers: min(3, 2) > 1, the multi-module speculator, steps 0 and 1 reach layers 0 and 1.
    plan = _plan("0.33.0", "v2", "DeepSeekMTPModel", DEEPSEEK, k=2)
    assert plan.proposer is not None and plan.proposer[1] == "MultiModuleMTPSpeculator"
    assert [s.forward_layer for s in plan.steps] == [0, 1]
    # K=1: the gate is closed (min(3, 1) = 1), the eagle-style MTP speculator.
    plan = _plan("0.33.0", "v2", "DeepSeekMTPModel", DEEPSEEK, k=1)
    assert plan.proposer is not None and plan.proposer[1] == "MTPSpeculator"


def test_0_30_v2_deepseek_heads_stay_at_layer_0():
    plan = _plan("0.30.0", "v2", "DeepSeekMTPModel", DEEPSEEK)
    assert plan.proposer is not None and plan.proposer[1] == "MultiModuleMTPSpeculator"
    assert [s.forward_layer for s in plan.steps] == [0, 1, 2]
    assert [s.head_layer for s in plan.steps] == [0, 0, 0]
    mtp003 = {f.fingerprint for f in by_rule(scan_release("0.30.0"), "MTP003")}
    assert all(s.verdict.startswith("lost at ") and s.verdict[len("lost at "):] in mtp003 for s in plan.steps)


def test_0_22_v2_factory_with_one_case_builds_the_eagle_speculator_and_no_mtp006():
    # init_speculator: `if speculative_config.use_eagle(): return EagleSpeculator(...)`, else raise (issue 18:
    # was "no dispatch factory for runner v2 found").
    plan = _plan("0.22.1", "v2", "DeepSeekMTPModel", DEEPSEEK)
    assert plan.proposer is not None and plan.proposer[1] == "EagleSpeculator"
    assert not any("no dispatch factory" in n for n in plan.notes)
    assert [s.forward_layer for s in plan.steps] == [0, 0, 0] and {s.verdict for s in plan.steps} == {CONSTANT}
    taken = next(d for d in plan.decisions if "use_eagle" in d.condition)
    assert taken.value is True and taken.function == "init_speculator"
    assert not by_rule(scan_release("0.22.1"), "MTP006")


def test_layers_cli_on_a_release_hf_config(tmp_path):
    target = tmp_path / "config.json"
    target.write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
                                  "num_nextn_predict_layers": 3}))
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "layers", "--release", "0.33.0", "--hf-config", str(target),
                        "--k", "3", "--format", "json"], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    v1, v2 = json.loads(r.stdout)["plans"]
    assert v2["architecture"] == "DeepSeekMTPModel" and v2["proposer"]["class"] == "MultiModuleMTPSpeculator"
    assert [s["forward_layer"] for s in v2["steps"]] == [0, 1, 2]
    assert [s["forward_layer"] for s in v1["steps"]] == [0, 0, 0]
    override = [d for d in v2["decisions"] if d["function"] == "SpeculativeConfig.hf_config_override"]
    assert any(d["value"] is True and "deepseek_mtp" in d["condition"] for d in override)


def test_layers_all_matrix_on_0_33():
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "layers", "--release", "0.33.0", "--all", "--format", "json"],
                       capture_output=True, text=True, env=dict(os.environ), timeout=600)
    assert r.returncode == 0, r.stderr
    rows = {(p["architecture"], p["runner"]): p for p in json.loads(r.stdout)["plans"]}
    assert len(rows) >= 60
    ds = rows[("DeepSeekMTPModel", "v2")]
    assert ds["proposer"]["class"] == "MultiModuleMTPSpeculator" and [s["forward_layer"] for s in ds["steps"]] == [0, 1, 2]
    q = rows[("Qwen3_5MoeMTP", "v2")]
    assert q["proposer"]["class"] == "MTPSpeculator" and [s["forward_layer"] for s in q["steps"]] == [0, 0, 0]
    # The override code sets model_type for Step3.5: V1 builds its own per-step proposer.
    st = rows[("Step3p5MTP", "v1")]
    assert st["proposer"]["class"] == "Step3p5MTPProposer" and [s["forward_layer"] for s in st["steps"]] == [0, 1, 2]


def test_0_33_scan_precision_from_dispatch():
    scan = scan_release("0.33.0")
    # StandaloneARSpeculator is built only for method "draft_model": not reported against MTP classes.
    assert not [f for f in by_rule(scan, "MTP002") if f.function == "StandaloneARSpeculator._multi_step_decode"]
    assert all("standalone_ar" not in lp.loop for r in scan.result.reachability for lp in r.loops)
    # The V2 default MTP path (the eagle-style speculator the gate falls back to) is in the table.
    qwen = next(r for r in scan.result.reachability if r.model_class.name == "Qwen3_5MoeMTP")
    v2 = [lp for lp in qwen.loops if "TargetDependentARSpeculator" in lp.loop and "MTPSpeculator" in lp.loop]
    assert v2 and not any(lp.steps_reach_layers for lp in v2)
    assert "use_multi_module_mtp() is False (V2 builds MTPSpeculator)" in v2[0].detail
    # Issue 18: the V2 default eagle-style MTP loop (run as MTPSpeculator) is an MTP002 too, once
    # per loop, with the routes it covers (was: only in the reachability table).
    v2_mtp002 = [f for f in by_rule(scan, "MTP002") if f.function == "TargetDependentARSpeculator._generate_fused_drafts"]
    assert len(v2_mtp002) == 1 and "(V2 builds MTPSpeculator)" in v2_mtp002[0].message
    assert "run as Gemma4Speculator, MTPSpeculator" in v2_mtp002[0].message
    # Findings behind a gate say when they are reached.
    mtp005 = [f for f in by_rule(scan, "MTP005") if f.function == "MultiModuleMTPSpeculator.get_draft_top_tokens"]
    # Issue 18 (MTP005 over routes): the condition is the routes' that load the classes listed
    # (their families fix the model type, so use_gemma4_mtp() is decided for them).
    assert mtp005 and "reached only when speculative_config.use_multi_module_mtp() is True " \
                      "(V2 builds MultiModuleMTPSpeculator)" in mtp005[0].message


def test_the_public_question_from_a_qwen35_moe_target_config(tmp_path):
    """A Qwen3.5-MoE checkpoint's config.json (MTP layer count nested in text_config), K=3,
    vLLM 0.33.0: vLLM's override picks Qwen3_5MoeMTP, the V2 gate stays closed."""
    target = tmp_path / "config.json"
    target.write_text(json.dumps({"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
                                  "text_config": {"model_type": "qwen3_5_moe_text", "mtp_num_hidden_layers": 3}}))
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "layers", "--release", "0.33.0", "--hf-config", str(target),
                        "--k", "3", "--runner", "v2", "--format", "json"], capture_output=True, text=True,
                       env=dict(os.environ), timeout=600)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["architecture"] == "Qwen3_5MoeMTP" and doc["proposer"]["class"] == "MTPSpeculator"
    assert doc["num_mtp_layers"] == 3 and doc["layer_count_field"] == "hf_config.text_config.mtp_num_hidden_layers"
    assert [s["forward_layer"] for s in doc["steps"]] == [0, 0, 0]
    gate = next(d for d in doc["decisions"] if "use_multi_module_mtp" in d["condition"])
    assert gate["value"] is False and "hf_config.num_nextn_predict_layers (default 1)" in gate["fields"]
