"""A config.json as vLLM loads it (``auditor/analyses/dispatch/config_classes.py``): the config
class its config registry names for the model type gives the fields the file lacks their
literal ``__init__`` defaults, nested sub-configs too; and a validation test that raises
itself (``K % 0``) rejects the configuration with Python's exception. Small trees written here
(:mod:`trees` shape), never vLLM's code."""

from __future__ import annotations

import json

import pytest

from scan_helpers import write_tree
from test_layers import planned_scan
from trees import gate_tree

from auditor.analyses.dispatch import DispatchProvider, Setting
from auditor.analyses.partial_eval import Obj
from auditor.analyses.dispatch.syntax import to_obj

_REGISTRY = '''
class LazyConfigDict(dict):
    def __getitem__(self, key):
        import vllm.transformers_utils.configs as configs

        return getattr(configs, super().__getitem__(key))


_CONFIG_REGISTRY = LazyConfigDict(
    deep="DeepConfig",
    **{"deep-other": "DeepTextConfig"},
)
'''

_PACKAGE = '''
import importlib

_CLASS_TO_MODULE = {
    "DeepConfig": "vllm.transformers_utils.configs.deep",
    "DeepTextConfig": "vllm.transformers_utils.configs.deep",
}


def __getattr__(name):
    return getattr(importlib.import_module(_CLASS_TO_MODULE[name]), name)
'''

_CLASSES = '''
from transformers import PretrainedConfig


class DeepTextConfig(PretrainedConfig):
    def __init__(self, num_nextn_predict_layers=0, hidden_size=8, computed=None, **kwargs):
        self.num_nextn_predict_layers = num_nextn_predict_layers
        self.hidden_size = hidden_size
        self.computed = hidden_size * 2
        super().__init__(**kwargs)


class DeepConfig(PretrainedConfig):
    def __init__(self, text_config=None, num_nextn_predict_layers={top}, **kwargs):
        if text_config is None:
            self.text_config = DeepTextConfig()
        elif isinstance(text_config, dict):
            self.text_config = DeepTextConfig(**text_config)
        else:
            self.text_config = text_config
        self.num_nextn_predict_layers = num_nextn_predict_layers
        super().__init__(**kwargs)
'''

_VALIDATION = '''
    def __post_init__(self):
        n_predict = getattr(self.draft_model_config.hf_config, "n_predict", None)
        if n_predict is not None:
            if self.num_speculative_tokens > n_predict and self.num_speculative_tokens % n_predict != 0:
                raise ValueError("num_speculative_tokens must be divisible by n_predict")
'''


def _tree(tmp_path, top: int = 1):
    files = gate_tree()
    files["vllm/config/speculative.py"] = files["vllm/config/speculative.py"].replace(
        "    def use_multi_module_mtp(self):", _VALIDATION.strip("\n") + "\n\n    def use_multi_module_mtp(self):")
    files["vllm/transformers_utils/config.py"] = _REGISTRY
    files["vllm/transformers_utils/configs/__init__.py"] = _PACKAGE
    files["vllm/transformers_utils/configs/deep.py"] = _CLASSES.replace("{top}", str(top))
    return write_tree(tmp_path / "t", files)


def _target(**fields) -> str:
    return json.dumps({"architectures": ["DeepForCausalLM"], "model_type": "deep", **fields})


def test_a_field_the_config_json_lacks_takes_the_config_class_default(tmp_path):
    root = _tree(tmp_path, top=1)
    lacking, given = planned_scan(root, [Setting("v2", 2, target_config=_target()),
                                         Setting("v2", 2, target_config=_target(num_nextn_predict_layers=3))])[1]
    assert lacking.num_mtp_layers == 1, lacking.notes  # DeepConfig's default, not "absent"
    assert given.num_mtp_layers == 3  # the file's own value wins


def test_a_validation_test_that_divides_by_zero_rejects_with_pythons_exception(tmp_path):
    root = _tree(tmp_path, top=0)  # the class's default: 0 MTP layers, and K % 0 in the check
    (plan,) = planned_scan(root, [Setting("v2", 2, target_config=_target())])[1]
    assert plan.outcome == "rejected", plan.notes
    (r,) = plan.rejections
    assert (r.path, r.function, r.when) == ("vllm/config/speculative.py", "SpeculativeConfig.__post_init__", "validation")
    assert r.message == "ZeroDivisionError: integer modulo by zero"
    # The line is the test's, not the raise's: Python raises while testing.
    assert "%" in (root / r.path).read_text().splitlines()[r.line - 1]


def test_nested_sub_configs_take_their_class_defaults_and_computed_fields_stay_out(tmp_path):
    root = _tree(tmp_path)
    seen: dict[str, Obj] = {}

    class Apply:  # asked in the loading phase, as a plan is
        def ask(self, analysis):
            classes = analysis.get(DispatchProvider).config_classes
            for name, data in (("nested", {"model_type": "deep", "text_config": {"hidden_size": 4}}),
                               ("absent", {"model_type": "deep"}),
                               ("quoted", {"model_type": "deep-other"}),
                               ("unregistered", {"model_type": "other", "text_config": {}})):
                obj = to_obj("hf_config", data)
                classes.apply(obj)
                seen[name] = obj

    from auditor.common.config import Config
    from auditor.engine.scan import run_scan
    from auditor.facts.cache import FactsCache
    from auditor.source.trees import DirectoryTree
    from rules import all_rules

    run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(None), 1, queries=[Apply()])
    nested = seen["nested"].fields["text_config"]
    assert isinstance(nested, Obj) and nested.fields == {"hidden_size": 4, "num_nextn_predict_layers": 0}
    assert seen["nested"].fields["num_nextn_predict_layers"] == 1
    built = seen["absent"].fields["text_config"]  # text_config=None builds DeepTextConfig()
    assert isinstance(built, Obj) and built.closed and built.fields == {"hidden_size": 8, "num_nextn_predict_layers": 0}
    assert seen["quoted"].fields == {"model_type": "deep-other", "hidden_size": 8, "num_nextn_predict_layers": 0}
    assert seen["unregistered"].fields["text_config"].fields == {}  # no class: exactly the file


_HOOKED = '''

class HookedConfig(DeepConfig):
    def __getattribute__(self, key):
        text_config = super().__getattribute__("text_config")
        if key in text_config.__dict__:
            return getattr(text_config, key)
        return super().__getattribute__(key)
'''


def _hooked_tree(tmp_path):
    """:func:`_tree` whose registry loads ``deep`` into HookedConfig."""
    files_root = _tree(tmp_path)
    classes = files_root / "vllm/transformers_utils/configs/deep.py"
    classes.write_text(classes.read_text() + _HOOKED)
    registry = files_root / "vllm/transformers_utils/config.py"
    registry.write_text(registry.read_text().replace('deep="DeepConfig",', 'deep="HookedConfig",'))
    package = files_root / "vllm/transformers_utils/configs/__init__.py"
    package.write_text(package.read_text().replace(
        '"DeepConfig": "vllm.transformers_utils.configs.deep",',
        '"DeepConfig": "vllm.transformers_utils.configs.deep",\n    "HookedConfig": "vllm.transformers_utils.configs.deep",'))
    return files_root


def test_a_class_that_hooks_attribute_reads_leaves_what_the_file_lacks_unknown(tmp_path):
    # HookedConfig answers reads from its text_config: a field the file lacks at the top level
    # is whatever the hook returns, never the "absent" default a getattr would take.
    files_root = _hooked_tree(tmp_path)
    target = json.dumps({"architectures": ["DeepForCausalLM"], "model_type": "deep",
                         "text_config": {"num_nextn_predict_layers": 3}})
    (plan,) = planned_scan(files_root, [Setting("v2", 3, target_config=target)])[1]
    # use_multi_module_mtp's getattr(hf_config, "num_nextn_predict_layers", 1): the hook decides.
    gate = [d for d in plan.decisions if "use_multi_module_mtp" in d.condition]
    assert gate and gate[0].value is None, [(d.condition, d.value) for d in plan.decisions]
    assert plan.alternatives  # MultiModuleSpeculator or EagleStyleSpeculator: not one drafter claimed


def test_a_getattribute_hook_leaves_a_field_given_differently_in_a_sub_config_unknown(tmp_path):
    files_root = _hooked_tree(tmp_path)
    differ = json.dumps({"architectures": ["DeepForCausalLM"], "model_type": "deep", "num_nextn_predict_layers": 1,
                         "text_config": {"num_nextn_predict_layers": 3}})
    same = json.dumps({"architectures": ["DeepForCausalLM"], "model_type": "deep", "num_nextn_predict_layers": 3,
                       "text_config": {"num_nextn_predict_layers": 3}})
    unknown, known = planned_scan(files_root, [Setting("v2", 3, target_config=differ),
                                               Setting("v2", 3, target_config=same)])[1]
    gate = [d.value for d in unknown.decisions if "use_multi_module_mtp" in d.condition]
    assert gate == [None] and unknown.alternatives
    assert [d.value for d in known.decisions if "use_multi_module_mtp" in d.condition] == [True]
    assert known.proposer[1] == "MultiModuleSpeculator" and not known.alternatives


# A config class without the layer-count field (vLLM 0.31.0's HYV3Config has no
# num_nextn_predict_layers): the draft model's constructor reads it plainly.
_BARE = '''
from transformers import PretrainedConfig


class DeepBareConfig(PretrainedConfig):
    def __init__(self, hidden_size=8, **kwargs):
        self.hidden_size = hidden_size
        super().__init__(**kwargs)
{extra}
'''


def _bare_tree(tmp_path, extra: str = "", base: str = "from transformers import PretrainedConfig"):
    files = gate_tree()
    files["vllm/transformers_utils/config.py"] = _REGISTRY.replace('deep="DeepConfig"', 'deep="DeepBareConfig"')
    files["vllm/transformers_utils/configs/__init__.py"] = _PACKAGE.replace(
        '"DeepConfig": "vllm.transformers_utils.configs.deep",',
        '"DeepBareConfig": "vllm.transformers_utils.configs.deep",')
    files["vllm/transformers_utils/configs/deep.py"] = _BARE.replace("{extra}", extra).replace(
        "from transformers import PretrainedConfig", base)
    return write_tree(tmp_path / "t", files)


def test_a_layer_count_field_neither_the_file_nor_its_config_class_gives_rejects_the_build(tmp_path):
    root = _bare_tree(tmp_path)
    lacking, given = planned_scan(root, [Setting("v2", 2, target_config=_target()),
                                         Setting("v2", 2, target_config=_target(num_nextn_predict_layers=2))])[1]
    assert lacking.outcome == "rejected", (lacking.notes, lacking.steps)
    (r,) = lacking.rejections
    assert (r.path, r.function, r.when) == ("vllm/models/deep_mtp.py", "DeepMTP.__init__", "build")
    assert "config.num_nextn_predict_layers" in (root / r.path).read_text().splitlines()[r.line - 1]
    assert given.outcome == "plan" and given.num_mtp_layers == 2
    assert not any("gives no" in n for n in given.notes), given.notes
    # CPython's words for the read (transformers' PretrainedConfig answers a missing name the
    # same way: its __getattribute__ only maps attribute_map's names)
    ns: dict = {}
    exec(_BARE.replace("from transformers import PretrainedConfig", "class PretrainedConfig:\n"
                       "    def __init__(self, **kwargs):\n        self.__dict__.update(kwargs)").replace("{extra}", ""), ns)
    try:
        ns["DeepBareConfig"](architectures=["DeepForCausalLM"]).num_nextn_predict_layers  # noqa: B018
    except AttributeError as e:
        assert r.message == f"AttributeError: {e}"
    else:
        raise AssertionError("CPython reads it")


@pytest.mark.parametrize("extra, base", [
    ("\n    def derive(self):\n        self.num_nextn_predict_layers = 1\n", None),  # a method may set it
    ("\n    attribute_map = {'num_nextn_predict_layers': 'hidden_size'}\n", None),  # mapped to another field
    ("\n    num_nextn_predict_layers: int\n", None),  # an annotated field (a dataclass-style config)
    ("\n    def fill(self, name):\n        setattr(self, name, 1)\n", None),  # a name not written as a literal
    ("", "from elsewhere import PretrainedConfig"),  # a base that is not transformers': anything
])
def test_a_field_the_config_class_may_hold_is_not_said_to_raise(tmp_path, extra, base):
    root = _bare_tree(tmp_path, extra, base or "from transformers import PretrainedConfig")
    (plan,) = planned_scan(root, [Setting("v2", 2, target_config=_target())])[1]
    assert plan.outcome == "plan" and plan.num_mtp_layers is None, plan.rejections
    assert any(n.startswith("the configuration gives no num_nextn_predict_layers") for n in plan.notes), plan.notes
