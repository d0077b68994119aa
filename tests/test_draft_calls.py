"""A draft-time call of a method the draft model class lacks (issue 18,
:mod:`auditor.analyses.dispatch.draft_calls`), on small trees written here (:mod:`trees`
shape): the drafter samples the first draft token before its draft loop through a helper
that calls ``self.model.top_ids(...)`` under an option; ``nn.Module.__getattr__`` raises
``AttributeError`` there at step 0 when the model class (with its bases in the tree) does
not define it."""

from __future__ import annotations

from scan_helpers import write_tree
from test_layers import planned_scan
from trees import sampling_drafter_tree

from auditor.analyses.dispatch import Setting

_SAMPLE = '''
    def _sample(self, x, meta):
        if self.local_argmax or meta.all_greedy:
            if self.local_argmax:
                return self.model.top_ids(x)
        return self.model.logits(x)
'''

_MODEL_EXTRA = "\n    def logits(self, x):\n        return x\n"


def _files(model_extra: str = "", model_bases: str = "nn.Module", extra_module: str = "") -> dict[str, str]:
    files = sampling_drafter_tree(_SAMPLE)
    model = files["vllm/models/deep_mtp.py"].replace("class DeepMTP(nn.Module):", f"{extra_module}\n\nclass DeepMTP({model_bases}):")
    files["vllm/models/deep_mtp.py"] = model + _MODEL_EXTRA + model_extra
    return files


def _deep(**options: object) -> Setting:
    return Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3),),
                   options=tuple(sorted(options.items())))


def _plans(tmp_path, settings: list[Setting], **variant: str):
    return planned_scan(write_tree(tmp_path / "t", _files(**variant)), settings)[1]


def test_the_missing_method_raises_at_the_first_step_its_guard_admits(tmp_path):
    on, off, unset = _plans(tmp_path, [_deep(use_local_argmax_reduction=True), _deep(use_local_argmax_reduction=False),
                                       _deep()])
    assert on.outcome == "raises" and on.step_raise is not None, on.steps
    r = on.step_raise
    assert (r.step, r.path, r.function) == (0, "vllm/spec_decode/speculators.py", "MultiModuleSpeculator._sample")
    assert r.message == "AttributeError(\"'DeepMTP' object has no attribute 'top_ids'\")"
    assert [s.verdict for s in on.steps] == ["raises at step 0"] * 3
    assert all(s.forward_layer is None for s in on.steps)
    # Guard false: the call never runs, the steps run as planned.
    assert off.outcome == "plan" and [s.forward_layer for s in off.steps] == [0, 1, 2]
    assert not any("top_ids" in n for n in off.notes)
    # The option unset (the tree's config class gives it no default): undecided, a plan with a note.
    assert unset.outcome == "plan" and any("top_ids" in n and "cannot decide" in n for n in unset.notes), unset.notes


def test_a_method_the_model_has_another_way_does_not_raise(tmp_path):
    on = _deep(use_local_argmax_reduction=True)
    base = '''
class HeadBase(nn.Module):
    def top_ids(self, x):
        return x
'''
    variants = {
        "base in the tree": {"extra_module": base, "model_bases": "HeadBase"},
        "set in __init__": {"model_extra": "\n    def setup(self):\n        self.top_ids = nn.Identity()\n"},
        "__getattr__": {"model_extra": "\n    def __getattr__(self, name):\n        return getattr(self.layers, name)\n"},
        "a base outside the tree": {"model_bases": "nn.Module, Mixin"},
        "an nn.Module method": {"model_extra": ""},
    }
    for label, variant in variants.items():
        files = _files(**variant)
        if label == "an nn.Module method":  # the drafter calls what torch's nn.Module defines
            files["vllm/spec_decode/speculators.py"] = files["vllm/spec_decode/speculators.py"].replace(
                "self.model.top_ids(x)", "self.model.named_modules(x)")
        (plan,) = planned_scan(write_tree(tmp_path / label.replace(" ", "_"), files), [on])[1]
        assert plan.outcome == "plan", (label, plan.steps)
        assert [s.forward_layer for s in plan.steps] == [0, 1, 2], label


def test_a_draft_model_whose_class_is_unknown_does_not_raise(tmp_path):
    files = _files()
    files["vllm/spec_decode/speculators.py"] = files["vllm/spec_decode/speculators.py"].replace(
        "self.model = get_model(self.vllm_config)", "self.model = get_model(self.vllm_config)\n        self.model = wrap(self.model)")
    (plan,) = planned_scan(write_tree(tmp_path / "t", files), [_deep(use_local_argmax_reduction=True)])[1]
    assert plan.outcome != "raises", plan.steps
