"""A speculative config given no ``num_speculative_tokens`` (issue 18: ``--speculative-config`` as
``vllm serve`` takes it; K may be left out). Its validation is judged with K unset: a check that
rejects an unset K rejects the configuration, unless a validation statement before it may
set K (vLLM defaults it from the draft's ``n_predict`` when a draft model is named), where the
outcome is unknown; no step is planned without K. Small trees written here (:mod:`trees`
shape), never vLLM's code."""

from __future__ import annotations

import json

from scan_helpers import write_tree
from test_layers import planned_scan
from trees import gate_tree

from auditor.analyses.dispatch import Setting

_VALIDATION = '''
    model: str | None = None
    num_speculative_tokens: int | None = None

    def __post_init__(self):
        if self.model is not None:
            n_predict = getattr(self.draft_model_config.hf_config, "n_predict", None)
            if n_predict is not None and self.num_speculative_tokens is None:
                self.num_speculative_tokens = n_predict

    def _verify_args(self):
        if self.num_speculative_tokens is None:
            raise ValueError("num_speculative_tokens must be provided")
'''


def _plans(tmp_path, *settings):
    files = gate_tree()
    files["vllm/config/speculative.py"] = files["vllm/config/speculative.py"].replace(
        "    def use_multi_module_mtp(self):", _VALIDATION.strip("\n") + "\n\n    def use_multi_module_mtp(self):")
    return planned_scan(write_tree(tmp_path, files), list(settings))[1]


TARGET = json.dumps({"model_type": "deep", "num_nextn_predict_layers": 2})


def test_k_left_out_is_judged_unset(tmp_path):
    rejected, = _plans(tmp_path, Setting("v2", None, target_config=TARGET))
    (r,) = rejected.rejections
    assert rejected.outcome == "rejected" and rejected.steps == ()
    assert (r.function, r.message) == ("SpeculativeConfig._verify_args", 'ValueError("num_speculative_tokens must be provided")')


def test_k_left_out_with_no_model_stays_unset_through_the_earlier_method_and_a_given_k_plans(tmp_path):
    named, given = _plans(tmp_path, Setting("v2", None, target_config=TARGET, options=(("model", None),)),
                          Setting("v2", 2, target_config=TARGET))
    assert given.outcome == "plan" and [s.forward_layer for s in given.steps] == [0, 1]
    # ``model`` given as None is the class's default: __post_init__ leaves K unset on every path.
    assert named.outcome == "rejected"
    assert given.rejections == ()


def test_k_left_out_with_a_model_named_is_unknown(tmp_path):
    plan, = _plans(tmp_path, Setting("v2", None, target_config=TARGET, options=(("model", "some/checkpoint"),)))
    assert plan.outcome == "unknown" and plan.steps == () and not plan.rejections
    assert any("num_speculative_tokens not given" in n for n in plan.notes)


_THROUGH_HELPER = '''
    model: str | None = None
    num_speculative_tokens: int | None = None

    def __post_init__(self):
        self._defaults()

    def _defaults(self):
        self.num_speculative_tokens = 1

    def _verify_args(self):
        k = self.num_speculative_tokens
        if k is None:
            raise ValueError("num_speculative_tokens must be provided")
'''


def test_a_k_a_helper_sets_before_a_check_that_reads_it_through_a_local_is_not_judged_unset(tmp_path):
    files = gate_tree()
    files["vllm/config/speculative.py"] = files["vllm/config/speculative.py"].replace(
        "    def use_multi_module_mtp(self):", _THROUGH_HELPER.strip("\n") + "\n\n    def use_multi_module_mtp(self):")
    (plan,) = planned_scan(write_tree(tmp_path, files), [Setting("v2", None, target_config=TARGET)])[1]
    assert plan.outcome == "unknown" and not plan.rejections


_NO_METHOD = '''
    method: str | None = None
    model: str | None = None
    num_speculative_tokens: int | None = None

    def __post_init__(self):
        if self.method is None:
            self.method = "draft_model"
        if self.model is None and self.num_speculative_tokens is not None:
            if self.method == "mtp":
                self.model = "<target>"
            else:
                raise ValueError("num_speculative_tokens was provided but without speculative model.")
'''


def test_a_method_left_out_is_the_classs_default_and_its_construction_raise_rejects(tmp_path):
    files = gate_tree()
    files["vllm/config/speculative.py"] = files["vllm/config/speculative.py"].replace(
        "    def use_multi_module_mtp(self):", _NO_METHOD.strip("\n") + "\n\n    def use_multi_module_mtp(self):")
    root = write_tree(tmp_path, files)
    left_out, given = planned_scan(root, [Setting("v2", 3, None, target_config=TARGET),
                                          Setting("v2", 3, "mtp", target_config=TARGET)])[1]
    (r,) = left_out.rejections
    assert left_out.outcome == "rejected" and left_out.steps == ()
    assert (r.function, r.message) == ("SpeculativeConfig.__post_init__",
                                       "ValueError(\"num_speculative_tokens was provided but without speculative model.\")")
    assert given.outcome == "plan" and [s.forward_layer for s in given.steps] == [0, 1, 0]  # 2 layers
