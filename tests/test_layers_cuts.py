"""Issue 18 (item 5): every cut of the partial evaluator goes into the plan's notes, and a
route a cut could decide — the factory run stopped following something on the way to the
drafter it builds — gets the verdict ``unknown``, with a why naming the cut.

The trees are :func:`trees.gate_tree` with the V2 factory replaced: its guard is decided
by a helper the evaluator follows only to its call depth, or it forks more often than the
evaluator follows paths."""

from __future__ import annotations

from pathlib import Path

from scan_helpers import write_tree
from test_layers import planned_scan
from trees import gate_tree

from auditor.analyses.dispatch import Setting
from auditor.analyses.partial_eval.evaluator import MAX_PATHS
from auditor.analyses.partial_eval.expressions import MAX_CALL_DEPTH
from auditor.model.findings import ReachVerdict

_SETTING = Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3),))


def _deep_factory(depth: int) -> str:
    """The guard asks a helper that recurses ``depth`` times before it reads K; the other
    branch raises (so the drafter is not one of two the plan would list as alternatives)."""
    return f'''
def _needs_steps(speculative_config, n):
    if n == 0:
        return speculative_config.num_speculative_tokens > 1
    return _needs_steps(speculative_config, n - 1)


def init_speculator(vllm_config):
    speculative_config = vllm_config.speculative_config
    if _needs_steps(speculative_config, {depth}):
        from vllm.spec_decode.speculators import MultiModuleSpeculator

        return MultiModuleSpeculator(vllm_config)
    raise NotImplementedError(speculative_config.method)
'''


def _tree(tmp_path: Path, factory: str) -> Path:
    files = gate_tree()
    files["vllm/spec_decode/__init__.py"] = factory
    return write_tree(tmp_path / "t", files)


def _plan(root: Path):
    plan = planned_scan(root, [_SETTING])[1][0]
    assert not any("frozen" in n for n in plan.notes)
    return plan


def test_a_guard_the_evaluator_follows_to_the_end_decides_the_drafter(tmp_path):
    plan = _plan(_tree(tmp_path, _deep_factory(1)))
    assert plan.proposer == ("vllm/spec_decode/speculators.py", "MultiModuleSpeculator")
    assert [s.verdict for s in plan.steps] == ["threaded"] * 3
    assert not any("call depth" in n for n in plan.notes)


def test_a_call_depth_cut_before_the_factory_decides_makes_every_step_unknown(tmp_path):
    plan = _plan(_tree(tmp_path, _deep_factory(MAX_CALL_DEPTH + 2)))
    # The only build the run sees is the multi-module one (the other branch raises), but
    # the guard that leads to it was cut short: which drafter runs is not known.
    assert plan.proposer == ("vllm/spec_decode/speculators.py", "MultiModuleSpeculator")
    assert [s.verdict for s in plan.steps] == ["unknown"] * 3
    cut = f"beyond the call depth of {MAX_CALL_DEPTH}"
    assert all("decided past a cut of the evaluator" in s.why and cut in s.why for s in plan.steps)
    assert any(cut in n for n in plan.notes)  # the cut is a note too
    assert all(s.forward_layer is not None for s in plan.steps)  # the layers the loop would give stay shown


def _forking_factory(forks: int) -> str:
    """``forks`` guards on fields no configuration gives, each enclosing a build of the same
    drafter (kept on an attribute, as V1's runner keeps ``self.drafter``): more paths than
    the evaluator follows before the build that is returned."""
    ifs = "".join(f"    if speculative_config.flag_{i}:\n        vllm_config.drafter = EagleStyleSpeculator(vllm_config)\n"
                  for i in range(forks))
    return f'''
def init_speculator(vllm_config):
    from vllm.spec_decode.speculators import EagleStyleSpeculator

    speculative_config = vllm_config.speculative_config
    vllm_config.drafter = EagleStyleSpeculator(vllm_config)
{ifs}    return vllm_config.drafter
'''


def test_few_forks_to_one_drafter_are_no_cut(tmp_path):
    plan = _plan(_tree(tmp_path, _forking_factory(2)))
    assert plan.proposer == ("vllm/spec_decode/speculators.py", "EagleStyleSpeculator")
    assert all(s.verdict.startswith("constant") for s in plan.steps) and len(plan.steps) == 3
    assert not any("paths" in n for n in plan.notes)


def test_paths_beyond_the_cap_joined_before_the_build_make_every_step_unknown(tmp_path):
    forks = MAX_PATHS.bit_length() + 1  # 2**forks > MAX_PATHS
    plan = _plan(_tree(tmp_path, _forking_factory(forks)))
    assert [s.verdict for s in plan.steps] == ["unknown"] * 3
    assert all(f"more than the {MAX_PATHS} the evaluator follows" in s.why for s in plan.steps)
    assert any(f"more than the {MAX_PATHS} the evaluator follows" in n for n in plan.notes)


def _override_returning(returned: str) -> str:
    """The config override rewrites the config in place, then returns ``returned``."""
    return f'''
class SpeculativeConfig:
    @staticmethod
    def hf_config_override(hf_config):
        if hf_config.model_type == "deep":
            n_predict = getattr(hf_config, "num_nextn_predict_layers", None)
            hf_config.update({{"n_predict": n_predict, "architectures": ["DeepMTPModel"]}})
        return {returned}

    def use_multi_module_mtp(self):
        num_mtp_layers = getattr(self.draft_model_config.hf_config, "num_nextn_predict_layers", 1)
        return min(num_mtp_layers, self.num_speculative_tokens) > 1
'''


def _target_plan(tmp_path: Path, returned: str):
    files = gate_tree()
    files["vllm/config/speculative.py"] = _override_returning(returned)
    root = write_tree(tmp_path / "t", files)
    target = '{"model_type": "deep", "architectures": ["DeepV3"], "num_nextn_predict_layers": 3}'
    return planned_scan(root, [Setting("v2", 3, target_config=target)])[1][0]


def test_an_override_whose_result_the_evaluator_follows_names_the_architecture(tmp_path):
    plan = _target_plan(tmp_path, "hf_config")
    assert plan.architecture == "DeepMTPModel"
    assert [s.verdict for s in plan.steps] == ["threaded"] * 3


def test_an_override_that_may_return_another_config_leaves_the_architecture_unknown(tmp_path):
    # The draft config is what the override returns: here the rewritten config or a fresh
    # one, depending on what a read-only getter says (unknown to the evaluator, which
    # therefore writes nothing unknown). The rewritten target must not be taken for it.
    plan = _target_plan(tmp_path, 'hf_config if hf_config.to_dict().get("keep") else type(hf_config)()')
    assert plan.architecture is None and plan.model_class is None
    assert all(s.verdict == "unknown" for s in plan.steps) and len(plan.steps) == 3
    assert any("hf_config_override returns a config the evaluator cannot tell" in n for n in plan.notes)


def _reach_rows(scan, model: str):
    return [lp for r in scan.result.reachability if r.model_class.name == model for lp in r.loops]


def test_the_scan_views_say_unknown_where_layers_does_past_a_cut(tmp_path):
    # Issue 18: reachability and the findings' route conditions are views of the same
    # routes as the plan: a route decided past a cut is unknown there too, the cut named.
    root = _tree(tmp_path, _deep_factory(MAX_CALL_DEPTH + 2))
    scan, (plan,) = planned_scan(root, [_SETTING])
    assert [s.verdict for s in plan.steps] == ["unknown"] * 3
    cut = f"beyond the call depth of {MAX_CALL_DEPTH}"
    loops = [lp for lp in _reach_rows(scan, "DeepMTP") if "MultiModuleSpeculator" in lp.loop]
    assert loops, _reach_rows(scan, "DeepMTP")
    assert all(lp.verdict is ReachVerdict.UNKNOWN and not lp.steps_reach_layers for lp in loops)
    assert all("past a cut of the evaluator" in lp.detail and cut in lp.detail for lp in loops)
    doc = [lp for r in scan.result.to_json()["reachability"] for lp in r["loops"] if "MultiModuleSpeculator" in lp["loop"]]
    assert doc and all(lp["verdict"] == "unknown" and lp["raise"] is None for lp in doc)


def test_the_same_route_followed_to_the_end_is_threaded_in_the_scan_views(tmp_path):
    scan, (plan,) = planned_scan(_tree(tmp_path, _deep_factory(1)), [_SETTING])
    assert [s.verdict for s in plan.steps] == ["threaded"] * 3
    loops = [lp for lp in _reach_rows(scan, "DeepMTP") if "MultiModuleSpeculator" in lp.loop]
    assert loops and all(lp.verdict is ReachVerdict.THREADED and lp.steps_reach_layers for lp in loops)
    assert not any("past a cut" in lp.detail for lp in loops)


def test_paths_beyond_the_cap_make_the_scan_row_unknown_as_the_plan(tmp_path):
    # One joined path past the cap decides which drafter a configuration gets: the plan
    # is unknown, and so is the row of the loop that drafter runs, the cut named.
    scan, (plan,) = planned_scan(_tree(tmp_path, _forking_factory(MAX_PATHS.bit_length() + 1)), [_SETTING])
    assert [s.verdict for s in plan.steps] == ["unknown"] * 3
    loops = [lp for lp in _reach_rows(scan, "DeepMTP") if "EagleStyleSpeculator" in lp.loop]
    assert loops and all(lp.verdict is ReachVerdict.UNKNOWN for lp in loops)
    assert all(f"more than the {MAX_PATHS} the evaluator follows" in lp.detail for lp in loops)
    # The loop's by-design report says so too: which drafter runs it is unknown past the cut.
    (mtp002,) = [f for f in scan.result.findings if f.rule == "MTP002" and f.function == "EagleStyleSpeculator.propose"]
    assert "which drafter runs it is unknown past a cut of the evaluator" in mtp002.message
    assert f"more than the {MAX_PATHS} the evaluator follows" in mtp002.message


def test_a_cut_on_the_build_and_on_a_path_that_builds_nothing_is_named_once(tmp_path):
    # The same call-depth cut decides the guard of the build and of a path that returns a
    # drafter the evaluator cannot tell: the plan and the row name it once.
    depth = MAX_CALL_DEPTH + 2
    unknown_build = (f"    if _needs_steps(speculative_config, {depth}):\n        return vllm_config.make_drafter()\n"
                     "    raise NotImplementedError")
    factory = _deep_factory(depth).replace("    raise NotImplementedError", unknown_build, 1)
    scan, (plan,) = planned_scan(_tree(tmp_path, factory), [_SETTING])
    cut = f"beyond the call depth of {MAX_CALL_DEPTH}"
    assert [s.verdict for s in plan.steps] == ["unknown"] * 3
    assert all(s.why.count(cut) == 1 for s in plan.steps), plan.steps[0].why
    loops = [lp for lp in _reach_rows(scan, "DeepMTP") if "MultiModuleSpeculator" in lp.loop]
    assert loops and all(lp.verdict is ReachVerdict.UNKNOWN and lp.detail.count(cut) == 1 for lp in loops)
