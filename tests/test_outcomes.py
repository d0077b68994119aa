"""Outcomes, not only plans (issue 18), on small trees written here: a validation of the
speculative config that raises for the configuration (``rejected``), an assert in the draft
model's constructor (``rejected`` at build), and an assert on the route that fails for a draft
step (``raises at step i``)."""

from __future__ import annotations

from scan_helpers import write_tree
from test_layers import planned_scan

from auditor.analyses.dispatch import Setting
from trees import _SPEC, gate_tree as _tree

# K must be divisible by n_predict when it is larger (the shape of vLLM's check).
_VALIDATION = '''
    def __post_init__(self):
        if self.method == "mtp":
            n_predict = getattr(self.draft_model_config.hf_config, "n_predict", None)
            if n_predict is not None:
                if self.num_speculative_tokens is None:
                    self.num_speculative_tokens = n_predict
                elif self.num_speculative_tokens > n_predict and self.num_speculative_tokens % n_predict != 0:
                    raise ValueError(f"num_speculative_tokens:{self.num_speculative_tokens} must be divisible by {n_predict=}")
        if self.unknown_flag:
            raise ValueError("depends on a field nobody sets")
'''

_ASSERTING_MODEL = '''
import torch.nn as nn


class DeepMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.num_nextn_predict_layers <= 3, "at most three MTP layers"
        self.num_mtp_layers = config.num_nextn_predict_layers
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])

    def forward(self, x, spec_step_idx: int = 0):
        assert spec_step_idx < 2, "only two steps"
        return self.layers[spec_step_idx % self.num_mtp_layers](x)
'''


def _files() -> dict[str, str]:
    files = _tree()
    files["vllm/config/speculative.py"] = _SPEC.replace("{qwen_extra}", "") + _VALIDATION
    files["vllm/models/deep_mtp.py"] = _ASSERTING_MODEL
    return files


def _plan(tmp_path, setting: Setting):
    root = write_tree(tmp_path / "t", _files())
    return planned_scan(root, [setting])[1][0]


def test_k_not_divisible_by_n_predict_is_rejected_with_the_message_and_line(tmp_path):
    target = '{"model_type": "deep", "num_nextn_predict_layers": 2}'  # the override sets n_predict = 2
    plan = _plan(tmp_path, Setting("v2", 3, target_config=target))
    assert plan.outcome == "rejected"
    r = plan.rejections[0]
    assert (r.path, r.function, r.when) == ("vllm/config/speculative.py", "SpeculativeConfig.__post_init__", "validation")
    assert "must be divisible by" in r.message and r.line > 0
    assert all(s.verdict == "rejected" and s.forward_layer is None for s in plan.steps)
    # The raise behind a field nobody sets is not a rejection: it stays a note.
    assert any("depend on fields this configuration leaves unknown" in n for n in plan.notes)


def test_k_divisible_by_n_predict_is_a_plan(tmp_path):
    target = '{"model_type": "deep", "num_nextn_predict_layers": 2}'
    plan = _plan(tmp_path, Setting("v2", 2, target_config=target))
    assert plan.outcome == "plan" and not plan.rejections
    assert [s.forward_layer for s in plan.steps] == [0, 1]


def test_an_assert_in_the_draft_models_constructor_rejects_at_build(tmp_path):
    plan = _plan(tmp_path, Setting("v2", 2, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 4),)))
    assert plan.outcome == "rejected"
    r = plan.rejections[0]
    assert (r.function, r.when) == ("DeepMTP.__init__", "build") and "at most three MTP layers" in r.message


def test_an_assert_on_the_route_raises_at_the_first_step_it_fails(tmp_path):
    plan = _plan(tmp_path, Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3),)))
    assert plan.outcome == "raises" and plan.raises_at_step == 2
    assert plan.step_raise is not None and plan.step_raise.function == "DeepMTP.forward"
    assert [(s.forward_layer, s.verdict) for s in plan.steps] == [(0, "threaded"), (1, "threaded"),
                                                                 (None, "raises at step 2")]


def test_the_eagle_style_drafter_never_raises_there(tmp_path):
    # One MTP layer: the gate keeps the eagle-style drafter, which hands step 0 every step.
    plan = _plan(tmp_path, Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 1),)))
    assert plan.outcome == "plan" and plan.raises_at_step is None


# The override branch keys on the TARGET's architecture (as vLLM's MiMo branch does), which a
# draft config given with --arch does not carry: running the whole override over it never
# enters the branch, so the field the branch computes (n_predict) must come from the branch
# itself, run over the given fields.
def _arch_keyed(tmp_path, n_predict_expr: str):
    files = _files()
    files["vllm/config/speculative.py"] = files["vllm/config/speculative.py"].replace(
        'if hf_config.model_type == "deep":', 'if hf_config.architectures[0] == "DeepForCausalLM":').replace(
        'n_predict = getattr(hf_config, "num_nextn_predict_layers", None)\n            hf_config.update({"n_predict": n_predict, "architectures": ["DeepMTPModel"]})',
        f'n_predict = {n_predict_expr}\n            hf_config.update({{"n_predict": n_predict, "architectures": ["DeepMTPModel"]}})')
    assert "DeepForCausalLM" in files["vllm/config/speculative.py"] and n_predict_expr in files["vllm/config/speculative.py"]
    root = write_tree(tmp_path / "t", files)
    return lambda k, n: planned_scan(root, [Setting("v2", k, architecture="DeepMTPModel",
                                                    fields=(("num_nextn_predict_layers", n),))])[1][0]


def test_a_field_the_override_computes_is_derived_for_a_given_architecture(tmp_path):
    plan = _arch_keyed(tmp_path, 'getattr(hf_config, "num_nextn_predict_layers", None)')
    rejected = plan(3, 2)
    assert rejected.outcome == "rejected"
    r = rejected.rejections[0]
    assert (r.path, r.function, r.when) == ("vllm/config/speculative.py", "SpeculativeConfig.__post_init__", "validation")
    assert "must be divisible by" in r.message
    assert plan(2, 2).outcome == "plan"


def test_a_field_the_override_computes_undecidably_is_unknown_not_absent(tmp_path):
    plan = _arch_keyed(tmp_path, "count_layers(hf_config)")(3, 2)
    # n_predict is unknown: the K % n_predict raise is neither taken nor ruled out (it joins
    # the raise behind unknown_flag among the undecided ones).
    assert plan.outcome != "rejected" and not plan.rejections
    assert "2 validation raise(s) depend on fields this configuration leaves unknown" in plan.notes, plan.notes


# Validation sees the speculative config, never the runner: the v1 and v2 settings of one
# configuration hand it configurations it cannot tell apart, and they are judged once. The
# answer, and the cuts the notes count, must be what judging each one alone gives.
_RECURSIVE_VALIDATION = '''
    def _deep(self, n):
        return self._deep(n + 1)

    def _verify_args(self):
        if self._deep(0):
            raise ValueError("decided past the call depth limit")
'''


def _judged(tmp_path, monkeypatch, settings, shared: bool):
    from auditor.analyses.dispatch import outcomes

    files = _files()
    files["vllm/config/speculative.py"] += _RECURSIVE_VALIDATION
    # The draft config is derived once for both runners too: a cut in the override code.
    files["vllm/config/speculative.py"] = files["vllm/config/speculative.py"].replace(
        "        return hf_config\n", "        hf_config.depth = SpeculativeConfig._deep_override(0)\n        return hf_config\n"
        "\n    @staticmethod\n    def _deep_override(n):\n        return SpeculativeConfig._deep_override(n + 1)\n", 1)
    assert "_deep_override(0)" in files["vllm/config/speculative.py"]
    root = write_tree(tmp_path / ("shared" if shared else "alone"), files)
    judged: list[object] = []
    judge = outcomes.Outcomes._judge

    def counting(self, *args):
        judged.append(args[1])
        return judge(self, *args)

    monkeypatch.setattr(outcomes.Outcomes, "_judge", counting)
    if not shared:
        monkeypatch.setattr(outcomes, "structural_key", lambda v: None)
    scan, plans = planned_scan(root, settings)
    monkeypatch.undo()
    return plans, scan.result.stats.get("limits_hit"), len(judged)


def test_settings_validation_cannot_tell_apart_are_judged_once_with_each_ones_answer(tmp_path, monkeypatch):
    from collections import Counter

    target = '{"model_type": "deep", "num_nextn_predict_layers": 2}'
    settings = [Setting(runner, k, target_config=target) for k in (3, 2) for runner in ("v1", "v2")]
    plans, cuts, judged = _judged(tmp_path, monkeypatch, settings, shared=True)
    alone_plans, _, alone_judged = _judged(tmp_path, monkeypatch, settings, shared=False)
    # (the v1 plan of K 2: this tree has no V1 factory, what V1 builds is unknown; not rejected)
    assert [p.outcome for p in plans] == ["rejected", "rejected", "unknown", "plan"]
    assert plans == alone_plans and judged < alone_judged
    # Each setting's cuts (the recursive check, the recursive override), as its own scan counts them.
    each: Counter[str] = Counter()
    for i, s in enumerate(settings):
        each.update(_judged(tmp_path / str(i), monkeypatch, [s], shared=True)[1])
    assert cuts and cuts == dict(each) and cuts["partial evaluation call depth"] == 2 * len(settings)


def test_the_structural_key_tells_apart_what_the_evaluator_can():
    from auditor.analyses.partial_eval import Obj, Unknown
    from auditor.analyses.partial_eval.values import structural_key

    def spec(n, shared=True):
        hf = Obj("hf", {"n_predict": n, "layers": [1, Unknown("x")]})
        draft = Obj("draft", {"hf_config": hf})
        other = hf if shared else Obj("hf", {"n_predict": n, "layers": [1, Unknown("x")]})
        return Obj("spec", {"draft_model_config": draft, "target_hf": other, "k": 3}, closed=True)

    assert structural_key(spec(2)) == structural_key(spec(2))  # different objects, same structure
    assert structural_key(spec(2)) != structural_key(spec(3))
    assert structural_key(spec(2)) != structural_key(spec(2, shared=False))  # aliasing is seen
    assert structural_key(Obj("o", {"f": 1})) != structural_key(Obj("o", {"f": True}))
    assert structural_key(Obj("o", {"f": 1})) != structural_key(Obj("o", {"f": 1}, closed=True))
    assert structural_key(Obj("o", {"f": object()})) is None  # not a value the evaluator makes
