"""vLLM 0.30.0 audited together with vllm-ascend 0.30.0rc2 (the plugin release that pairs
with it), both fetched into the cache at test time.

What is asserted here was found by reading vllm-ascend's code (paths in the sdist):

* ``vllm_ascend/spec_decode/step3p5.py`` — ``AscendStep3p5MTPProposer._run_window_draft_steps``
  loops ``for draft_step in range(self.num_speculative_tokens - 1)`` (line 627), sets
  ``spec_step_idx = draft_step + 1`` (632) and puts it into ``model_kwargs`` (656) for
  ``self.model(**model_kwargs)`` (661), and hands it to ``_sample_draft_tokens_for_step``
  (673), which calls ``compute_logits(..., spec_step_idx=spec_step_idx)`` (184): it
  threads the step. Its first pass, ``_run_merged_draft``, passes the constant 0 (523,
  550) before any loop, which is correct.
* ``vllm_ascend/spec_decode/llm_base_proposer.py`` —
  ``AscendSpecDecodeBaseProposer._run_merged_draft`` loops
  ``for draft_index in range(self.num_speculative_tokens - 1)`` (1675), builds
  ``model_kwargs`` without the step (1738-1744), calls ``self.model(**model_kwargs)``
  (1746) and ``self.model.compute_logits(sample_hidden_states)`` (1761): it does not
  thread the step (the same EAGLE-style reuse as vLLM's own V1 proposer).
* ``vllm_ascend/models/__init__.py`` — ``register_model()`` registers
  ``AscendDeepSeekMTP`` for ``DeepSeekMTPModel`` and ``DeepseekV32MTPModel`` (72, 73),
  ``DeepSeekV4MTP`` for ``DeepSeekV4MTPModel`` (50), ``Glm5NextMTP`` for
  ``Glm5NextMTPModel`` (86-89), ``AscendKimiK3MTP`` for ``KimiK3MTPModel`` (23-26), all
  as "module:Class" strings. ``vllm_ascend/models/deepseek_mtp.py:34``
  (``AscendDeepSeekMTP.forward``) passes the step on positionally to ``super().forward``;
  ``deepseek_v4/mtp.py:283,291`` and ``glm5next/mtp.py:241,248,257`` pass it to their
  predictors, which select ``self.layers[...]`` with it (deepseek_v4/mtp.py:216-217,
  glm5next/mtp.py:163).
* ``vllm_ascend/patch/worker/patch_qwen3_5.py`` — under ``if Qwen3_5MultiTokenPredictor
  is not None:`` it defines ``qwen3_5_mtp_forward`` (selects ``self.layers[current_step_idx]``
  at 173) and patches ``Qwen3_5MultiTokenPredictor.forward = qwen3_5_mtp_forward``
  (202). vLLM's ``Qwen3_5MTP.forward`` still calls its predictor without the step, so
  that vLLM finding remains, now naming the plugin's function as the callee.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from auditor.facts.cache import FactsCache
from auditor.common.config import Config
from auditor.engine.scan import Scan, run_scan
from auditor.source.fetch import fetch_release
from auditor.source.trees import CombinedTree, DirectoryTree, Root, locate_plugin
from release_cache import release_cache_dir
from rules import all_rules

pytestmark = pytest.mark.release

VLLM, PLUGIN, PLUGIN_VERSION = "0.30.0", "vllm-ascend", "0.30.0rc2"
STEP3P5 = "vllm_ascend/spec_decode/step3p5.py"
BASE = "vllm_ascend/spec_decode/llm_base_proposer.py"
PATCH_QWEN = "vllm_ascend/patch/worker/patch_qwen3_5.py"


def _vllm_tree() -> DirectoryTree:
    return DirectoryTree(fetch_release(VLLM, release_cache_dir(), progress=False), label=f"vllm-{VLLM}")


@lru_cache(maxsize=None)
def vllm_alone() -> Scan:
    return run_scan(_vllm_tree(), Config(), all_rules(), FactsCache(release_cache_dir()), 2)


@lru_cache(maxsize=None)
def with_ascend() -> Scan:
    root = fetch_release(PLUGIN_VERSION, release_cache_dir(), progress=False, project=PLUGIN)
    plugin = locate_plugin(root, name=PLUGIN)
    tree = CombinedTree([Root("vllm", _vllm_tree(), False), Root(PLUGIN, plugin, True)])
    return run_scan(tree, Config(), all_rules(), FactsCache(release_cache_dir()), 2)


def loops_by_label(scan: Scan) -> dict[str, dict[str, bool]]:
    """loop label -> {model class name: step i reaches layer i}."""
    out: dict[str, dict[str, bool]] = {}
    for r in scan.result.reachability:
        for lp in r.loops:
            out.setdefault(lp.loop, {})[r.model_class.name] = lp.steps_reach_layers
    return out


def test_plugin_package_is_found_from_its_entry_points():
    root = fetch_release(PLUGIN_VERSION, release_cache_dir(), progress=False, project=PLUGIN)
    tree = locate_plugin(root, name=PLUGIN)
    assert tree.packages == ("vllm_ascend",)  # setup.py / egg-info entry points, not tests/ or benchmarks/
    assert all(p.startswith("vllm_ascend/") for p in tree.python_files())


def test_window_draft_loop_threads_the_step():
    loops = loops_by_label(with_ascend())
    (label,) = [k for k in loops if k.startswith(f"{STEP3P5}:627 ")]
    assert label.endswith("AscendStep3p5MTPProposer._run_window_draft_steps")
    reached = loops[label]
    assert reached["Step3p5MTP"] is True
    # Routes (issue 18): the plugin builds this proposer only for a Step-3.5 draft
    # (use_step3p5_mtp()), so the loop is not paired with the DeepSeek/GLM classes.
    for cls in ("AscendDeepSeekMTP", "DeepSeekV4MTP", "Glm5NextMTP", "AscendKimiK3MTP"):
        assert cls not in reached, cls


def test_merged_draft_loop_does_not_thread_the_step():
    scan = with_ascend()
    loops = loops_by_label(scan)
    (label,) = [k for k in loops if k.startswith(f"{BASE}:1675 ")]
    assert label.endswith("AscendSpecDecodeBaseProposer._run_merged_draft")
    assert not any(loops[label].values())
    (f,) = [f for f in scan.result.findings if f.rule == "MTP002" and f.path == BASE]
    assert (f.line, f.function, f.root) == (1675, "AscendSpecDecodeBaseProposer._run_merged_draft", PLUGIN)
    assert [h.line for h in f.trace[:2]] == [1675, 1746]  # the loop, then self.model(**model_kwargs)


def test_registrations_take_the_architectures_over():
    scan = with_ascend()
    archs = {(r.model_class.path, r.model_class.name): r.architectures for r in scan.result.reachability}
    assert archs[("vllm_ascend/models/deepseek_mtp.py", "AscendDeepSeekMTP")] == ["DeepSeekMTPModel", "DeepseekV32MTPModel"]
    assert archs[("vllm_ascend/models/deepseek_v4/mtp.py", "DeepSeekV4MTP")] == ["DeepSeekV4MTPModel"]
    assert archs[("vllm_ascend/models/glm5next/mtp.py", "Glm5NextMTP")] == ["Glm5NextMTPModel"]
    assert archs[("vllm_ascend/models/kimi_k3_mtp.py", "AscendKimiK3MTP")] == ["KimiK3MTPModel"]
    taken = {"DeepSeekMTPModel", "DeepseekV32MTPModel", "DeepSeekV4MTPModel", "Glm5NextMTPModel", "KimiK3MTPModel"}
    for (path, _name), names in archs.items():
        if path.startswith("vllm/"):
            assert not taken & set(names), (path, names)
    # vLLM alone maps them to its own classes.
    alone = {a for r in vllm_alone().result.reachability if r.model_class.path.startswith("vllm/") for a in r.architectures}
    assert taken <= alone


def test_qwen3_5_predictor_patch_changes_the_vllm_finding():
    alone = [f for f in vllm_alone().result.findings if f.function == "Qwen3_5MTP.forward"]
    combined = [f for f in with_ascend().result.findings if f.function == "Qwen3_5MTP.forward"]
    assert [(f.rule, f.callee) for f in alone] == [("MTP001", "Qwen3_5MultiTokenPredictor.forward")]
    (f,) = combined
    assert (f.rule, f.path, f.root, f.callee) == ("MTP001", "vllm/model_executor/models/qwen3_5_mtp.py", "vllm", "qwen3_5_mtp_forward")
    assert (f.trace[-1].path, f.trace[-1].line) == (PATCH_QWEN, 173)
    index = with_ascend().analysis.index
    original = ("vllm/model_executor/models/qwen3_5_mtp.py", "Qwen3_5MultiTokenPredictor.forward")
    assert index.patched()[original] == (PATCH_QWEN, "qwen3_5_mtp_forward")
    assert index.patch_site((PATCH_QWEN, "qwen3_5_mtp_forward")) == f"{PATCH_QWEN}:202"


def test_other_vllm_findings_remain():
    # Read in vllm_ascend: models/__init__.py:72-73 registers AscendDeepSeekMTP for
    # DeepSeekMTPModel and DeepseekV32MTPModel, so vLLM's DeepSeekMTP (whose compile finding
    # MTP007 reports) is no longer loaded for those architectures; the plugin's drafters
    # override dummy_run (llm_base_proposer.py:778 AscendSpecDecodeBaseProposer.dummy_run), so
    # vLLM's warm-up loop runs on no route. patch/worker/patch_qwen3_5.py:202 replaces the
    # predictor's forward: the MTP001 on Qwen3_5MTP.forward stays, with its id (stable ids
    # do not depend on which code the callee resolves to). Every other vLLM finding stays.
    changed = {("MTP002", "SpecDecodeBaseProposer.dummy_run"), ("MTP007", "DeepSeekMTP")}
    alone = {f.fingerprint: f for f in vllm_alone().result.findings}
    combined = {f.fingerprint for f in with_ascend().result.findings}
    gone = {(f.rule, f.function) for fp, f in alone.items() if fp not in combined}
    assert gone == changed
    remaining = [f for fp, f in alone.items() if (f.rule, f.function) not in changed]
    assert len(remaining) == len(alone) - len(changed)


def test_every_chain_through_a_patched_method_names_the_plugin_file():
    scan = with_ascend()
    index = scan.analysis.index
    patched = index.patched()
    # A patch that saved the original and calls it (patch_speculative_config.py:16, :87
    # wraps hf_config_override) keeps the original running: only patched-away code must
    # never appear in a chain.
    originals = {k for k in patched if index.replaced(k)}
    replacements = {v for k, v in patched.items() if index.replaced(k)}
    chains = [f.trace for f in scan.result.findings] + [lp.trace for r in scan.result.reachability for lp in r.loops]
    through = 0
    for chain in chains:
        for hop in chain:
            assert (hop.path, hop.function) not in originals, hop  # never vLLM's patched-away code
            if (hop.path, hop.function) in replacements:
                through += 1
                assert hop.path.startswith("vllm_ascend/"), hop
    assert through > 0


def test_plugin_findings_carry_the_plugin_root():
    scan = with_ascend()
    for f in scan.result.findings:
        assert f.root == (PLUGIN if f.path.startswith("vllm_ascend/") else "vllm")
    assert [r.name for r in scan.result.roots] == ["vllm", PLUGIN]


def test_plugin_scan_is_deterministic():
    """Patches resolve on demand, in the order the analysis asks: a second, fresh scan
    (and one with a different worker count) gives the same report."""
    root = fetch_release(PLUGIN_VERSION, release_cache_dir(), progress=False, project=PLUGIN)
    tree = CombinedTree([Root("vllm", _vllm_tree(), False), Root(PLUGIN, locate_plugin(root, name=PLUGIN), True)])
    again = run_scan(tree, Config(), all_rules(), FactsCache(release_cache_dir()), 1)
    assert again.result.to_json() == with_ascend().result.to_json()


# -- the plugin's own dispatch (``layers --plugin``) -------------------------------------
#
# Read in vllm-ascend 0.30.0rc2: ``NPUModelRunner(GPUModelRunner)``
# (``vllm_ascend/worker/model_runner_v1.py:364``) builds its drafter in ``_set_up_drafter``
# (732) via ``self._get_drafter()`` (755, 771), which returns
# ``get_spec_decode_method(self.speculative_config.method, ...)``
# (``vllm_ascend/spec_decode/__init__.py:41``). For method "mtp" that chain tests, in order:
# line 52 ``method == "mtp" and ...use_gemma4_mtp()`` (vLLM's predicate: draft
# ``model_type == "gemma4_mtp"``: False for DeepSeek); 54 ``method in ("eagle", "eagle3",
# "mtp")`` (True); 56 ``use_step3p5_mtp()`` (``model_type == "step3p5_mtp"``: False); 58
# ``method == "mtp" and is_multi_kv_cache_group_mtp(vllm_config)``
# (``multi_kv_cache_group_proposer.py:22``: ``model_type`` in {"glm5_next_mtp"} or the
# architectures meet {"Glm5NextMTPModel"}: False for DeepSeekMTPModel); so line 60 builds
# ``AscendEagleProposer``. The runner's ``propose_draft_token_ids`` (1898; vLLM's override
# point, where vLLM calls ``self.drafter.propose``) calls ``self.drafter._propose`` (2098),
# ``AscendSpecDecodeBaseProposer._propose``, which runs ``self._runnable`` — bound to
# ``self._run_merged_draft`` (300) — whose loop at 1675 calls ``self.model(**model_kwargs)``
# without the step: every draft step runs MTP layer 0.


@lru_cache(maxsize=None)
def ascend_plans() -> tuple:
    from auditor.analyses.dispatch import Setting
    from auditor.services.layers import plan_tree

    root = fetch_release(PLUGIN_VERSION, release_cache_dir(), progress=False, project=PLUGIN)
    tree = CombinedTree([Root("vllm", _vllm_tree(), False), Root(PLUGIN, locate_plugin(root, name=PLUGIN), True)])
    deepseek = (("num_nextn_predict_layers", 3),)
    glm = (("num_nextn_predict_layers", 3),)

    def choose(_dispatch):
        return [Setting("v1", 3, "mtp", "cuda", "DeepSeekMTPModel", deepseek),
                Setting("v1", 3, "mtp", "cuda", "Glm5NextMTPModel", glm)]

    return tuple(plan_tree(tree, Config(), all_rules(), FactsCache(release_cache_dir()), choose, 2))


def test_layers_with_ascend_v1_takes_the_plugins_factory_and_its_own_draft_loop():
    plan = ascend_plans()[0]
    assert plan.proposer == ("vllm_ascend/spec_decode/eagle_proposer.py", "AscendEagleProposer")
    assert plan.alternatives == ()
    assert plan.proposer_site is not None and (plan.proposer_site.path, plan.proposer_site.line) == (
        "vllm_ascend/spec_decode/__init__.py", 60)
    rows = {d.line: d.value for d in plan.decisions if d.path == "vllm_ascend/spec_decode/__init__.py"}
    assert rows == {42: False, 44: False, 46: False, 48: False, 50: False, 52: False, 54: True, 56: False, 58: False}
    assert plan.loop is not None and (plan.loop.path, plan.loop.line) == (BASE, 1675)
    assert plan.loop.function == "AscendSpecDecodeBaseProposer._run_merged_draft"
    assert plan.model_class == ("vllm_ascend/models/deepseek_mtp.py", "AscendDeepSeekMTP")
    assert plan.num_mtp_layers == 3
    assert [(s.forward_layer, s.head_layer, s.verdict) for s in plan.steps] == [
        (0, 0, "constant — eagle-style by design")] * 3


def test_layers_with_ascend_glm5next_takes_the_multi_kv_cache_group_branch():
    # The architecture allowlist of is_multi_kv_cache_group_mtp holds Glm5NextMTPModel.
    plan = ascend_plans()[1]
    assert plan.proposer == ("vllm_ascend/spec_decode/multi_kv_cache_group_proposer.py",
                             "AscendMultiKVCacheGroupMTPProposer")
    rows = {d.line: d.value for d in plan.decisions if d.path == "vllm_ascend/spec_decode/__init__.py"}
    assert rows[58] is True
