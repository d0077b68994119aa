"""What issue #2 promises on real vLLM releases (fetched with the release cache)."""

from __future__ import annotations

import pytest
from scan_helpers import by_rule, scan_release
from rules import all_rules

pytestmark = pytest.mark.release

WRAPPER_FORWARDS_STEP = {
    "DeepSeekMTP.forward",
    "Glm4MoeMTP.forward",
    "Glm4MoeLiteMTP.forward",
    "ExaoneMoeMTP.forward",
    "MiMoMTP.forward",
    "ErnieMTP.forward",
}


def _functions(findings):
    return {(f.path, f.function) for f in findings}


@pytest.mark.parametrize("version", ["0.22.1", "0.33.0"])
def test_qwen_wrappers_drop_the_step(version):
    mtp001 = _functions(by_rule(scan_release(version), "MTP001"))
    assert ("vllm/model_executor/models/qwen3_5_mtp.py", "Qwen3_5MTP.forward") in mtp001
    assert ("vllm/model_executor/models/qwen3_next_mtp.py", "Qwen3NextMTP.forward") in mtp001


@pytest.mark.parametrize("version", ["0.22.1", "0.33.0"])
def test_wrappers_that_forward_the_step_are_clean(version):
    scan = scan_release(version)
    flagged = {f.function for f in by_rule(scan, "MTP001")}
    assert not flagged & WRAPPER_FORWARDS_STEP
    # Only wrappers of classes that declare the step but do not pass it are flagged.
    for f in by_rule(scan, "MTP001"):
        assert "without it" in f.message or "constant" in f.message
        assert f.trace[-1].note.startswith("selects "), f.trace


def test_v1_proposer_draft_loop_passes_constant_step():
    scan = scan_release("0.22.1")
    loops = [f for f in by_rule(scan, "MTP002") if f.function == "SpecDecodeBaseProposer.propose"]
    assert len(loops) == 1
    f = loops[0]
    assert f.path == "vllm/v1/spec_decode/llm_base_proposer.py"
    assert "layers 1..N-1" in f.message
    assert f.trace[0].note.startswith("draft loop")
    names = {c.name for c in f.affected_classes}
    assert {"DeepSeekMTP", "Qwen3NextMTP", "Qwen3_5MTP"} <= names


def test_finding_fields_and_affected_classes_0_22_1():
    scan = scan_release("0.22.1")
    qwen = next(f for f in by_rule(scan, "MTP001") if f.function == "Qwen3_5MTP.forward")
    assert qwen.severity.value == "error"
    assert qwen.callee == "Qwen3_5MultiTokenPredictor.forward"
    # The MoE variant inherits the dense wrapper's forward: one defect, both classes.
    assert {c.name for c in qwen.affected_classes} >= {"Qwen3_5MTP", "Qwen3_5MoeMTP"}
    assert [h.path for h in qwen.trace] == ["vllm/model_executor/models/qwen3_5_mtp.py"] * 3


def _reach(scan, cls_name, loop_fragment):
    rows = [r for r in scan.result.reachability if r.model_class.name == cls_name]
    assert rows, f"{cls_name} missing from the reachability report"
    out = []
    for r in rows:
        out += [lp for lp in r.loops if loop_fragment in lp.loop]
    return rows, out


def test_multi_module_speculator_reaches_layers_for_deepseek_not_qwen3_next():
    scan = scan_release("0.33.0")
    ms = "multi_module_mtp/speculator.py"
    rows, ds = _reach(scan, "DeepSeekMTP", ms)
    assert ds and all(lp.steps_reach_layers for lp in ds)
    assert rows[0].layer_count_fields == ["num_nextn_predict_layers"]
    _, glm = _reach(scan, "Glm4MoeMTP", ms)
    assert glm and all(lp.steps_reach_layers for lp in glm)
    rows, qn = _reach(scan, "Qwen3NextMTP", ms)
    assert qn and not any(lp.steps_reach_layers for lp in qn)
    _, qn_v1 = _reach(scan, "Qwen3NextMTP", "llm_base_proposer.py")
    assert qn_v1 and not any(lp.steps_reach_layers for lp in qn_v1)
    rows, q35 = _reach(scan, "Qwen3_5MTP", ms)
    assert rows[0].layer_count_fields == ["mtp_num_hidden_layers"]
    assert q35 and not any(lp.steps_reach_layers for lp in q35)


def test_speculator_loop_itself_threads_the_step():
    scan = scan_release("0.33.0")
    ms = [f for f in scan.result.findings if "multi_module_mtp" in f.path and f.rule in ("MTP002",)]
    assert not ms, "the multi-module speculator passes spec_step_idx=step and must not get MTP002"


def test_platform_copies_stay_distinct():
    scan = scan_release("0.33.0")
    paths = {r.model_class.path for r in scan.result.reachability if r.model_class.name == "DeepSeekV4MTP"}
    assert len(paths) >= 2, paths


def test_scan_is_deterministic():
    from auditor.facts.cache import FactsCache
    from auditor.common.config import Config
    from auditor.engine.scan import run_scan
    from auditor.source.trees import DirectoryTree
    from release_cache import release_root

    root = release_root("0.22.1")
    a = run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(None), workers=2).result.to_json()
    b = run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(None), workers=1).result.to_json()
    assert a == b
    assert a == scan_release("0.22.1").result.to_json()
