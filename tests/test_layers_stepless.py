"""A draft model class that selects no layer by the step (its ``forward`` takes the step into
``**kwargs`` and never reads it), whose constructor asserts the layer count it derived from
the config, on small trees written here (:mod:`trees` shape): the plan, the outcome, and
``layers --all``."""

from __future__ import annotations

from scan_helpers import write_tree
from test_layers import planned_scan

from auditor.analyses.dispatch import DispatchProvider, Setting
from auditor.analyses.partial_eval import Evaluator, Obj, Path, Unknown
from auditor.analyses.partial_eval.expressions import World
from auditor.facts.extract import PAttr, PCall, PName
from auditor.services.layers import PlanQuery, matrix_settings
from trees import gate_tree

CONSTANT = "constant — eagle-style by design"

_FLAT_FAMILY = '''
        if hf_config.model_type == "flat" and getattr(hf_config, "num_nextn_predict_layers", 0) > 0:
            hf_config.model_type = "flat_mtp"
        if hf_config.model_type == "flat_mtp":
            n_predict = getattr(hf_config, "num_nextn_predict_layers", 1)
            hf_config.update({"n_predict": n_predict, "architectures": ["FlatMTPModel"]})
        return hf_config
'''

# The layer count derived from the config (through three locals and a text-config getter),
# asserted, and the container built empty and filled by a loop over count x pattern.
_FLAT_MODEL = '''
import torch.nn as nn


class FlatPredictor(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        speculative_config = vllm_config.speculative_config
        draft_model_config = speculative_config.draft_model_config
        config = draft_model_config.hf_config.get_text_config()
        {count}
        {check}
        self.pattern = config.block_pattern
        self.pattern_len = len(self.pattern)
        self.layers = nn.ModuleDict()
        total = self.num_mtp_layers * self.pattern_len
        for i in range(total):
            self.layers[str(i)] = nn.Linear(4, 4)

    def forward(self, x):
        for i in range(self.pattern_len):
            x = self.layers[str(i)](x)
        return x


class FlatMTP(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = FlatPredictor(vllm_config=vllm_config)

    def forward(self, x, {kwargs}):
        return self.model(x)
'''

_COUNT = 'self.num_mtp_layers = getattr(config, "num_nextn_predict_layers", 1)'
_CHECK = 'assert self.num_mtp_layers == 1, "Only one MTP layer is supported"'


def _files(check: str = _CHECK, kwargs: str = "**kwargs", count: str = _COUNT) -> dict[str, str]:
    files = gate_tree()
    spec = files["vllm/config/speculative.py"]
    files["vllm/config/speculative.py"] = spec.replace("        return hf_config\n", _FLAT_FAMILY, 1)
    files["vllm/models/registry.py"] = files["vllm/models/registry.py"].replace(
        "}\n", '    "FlatMTPModel": ("flat_mtp", "FlatMTP"),\n}\n')
    files["vllm/models/flat_mtp.py"] = _FLAT_MODEL.format(check=check, kwargs=kwargs, count=count)
    return files


def _plans(tmp_path, settings: list[Setting], **variant: str):
    root = write_tree(tmp_path / "t", _files(**variant))
    return planned_scan(root, settings)


def _flat(runner: str, k: int, n: int) -> Setting:
    return Setting(runner, k, architecture="FlatMTPModel", fields=(("num_nextn_predict_layers", n),))


def test_one_layer_every_step_runs_layer_0_and_the_why_says_the_model_takes_no_step(tmp_path):
    _, plans = _plans(tmp_path, [_flat("v2", 3, 1)])
    plan = plans[0]
    assert plan.model_class == ("vllm/models/flat_mtp.py", "FlatMTP")
    assert plan.proposer is not None and plan.proposer[1] == "EagleStyleSpeculator"
    assert plan.loop is not None and plan.loop.function == "EagleStyleSpeculator.propose"
    assert plan.outcome == "plan"
    assert [(s.forward_layer, s.head_layer, s.verdict) for s in plan.steps] == [(0, None, CONSTANT)] * 3
    assert "FlatMTP takes no per-step selection" in plan.steps[0].why
    # The layer count comes from how the container is built (count x pattern, filled in a loop).
    assert (plan.num_mtp_layers, plan.layer_field) == (1, "num_nextn_predict_layers")
    assert plan.compiled is not None and [s.forward_layer for s in plan.compiled.steps] == [0, 0, 0]
    assert "selects no layer by the step" in plan.compiled.why


def test_more_layers_are_rejected_by_the_constructors_assert(tmp_path):
    _, plans = _plans(tmp_path, [_flat("v2", 2, 2), _flat("v1", 1, 2)])
    for plan in plans:
        assert plan.outcome == "rejected", plan.steps
        r = plan.rejections[0]
        assert (r.path, r.function, r.when) == ("vllm/models/flat_mtp.py", "FlatPredictor.__init__", "build")
        assert r.line == 12 and "Only one MTP layer is supported" in r.message
        assert all(s.verdict == "rejected" and s.forward_layer is None for s in plan.steps)


def test_a_step_passed_into_kwargs_is_swallowed_every_step_runs_layer_0(tmp_path):
    # Without the assert, two layers take the per-step drafter, which passes the step.
    _, plans = _plans(tmp_path, [_flat("v2", 2, 2)], check="pass")
    plan = plans[0]
    assert plan.proposer is not None and plan.proposer[1] == "MultiModuleSpeculator"
    assert plan.outcome == "plan"
    assert [(s.forward_layer, s.verdict) for s in plan.steps] == [(0, CONSTANT), (0, CONSTANT)]
    assert "passes spec_step_idx (varying)" in plan.steps[0].why
    assert "takes it into **kwargs and never reads it" in plan.steps[0].why


def test_a_step_passed_to_a_forward_that_cannot_take_it_is_no_plan(tmp_path):
    _, plans = _plans(tmp_path, [_flat("v2", 2, 2)], check="pass", kwargs="scale=1")
    plan = plans[0]
    assert {s.verdict for s in plan.steps} == {"unknown"}
    assert all(s.forward_layer is None for s in plan.steps)
    assert "takes no spec_step_idx and no **kwargs" in plan.steps[0].why


def test_an_assert_on_a_count_set_under_a_branch_decides_nothing(tmp_path):
    count = 'if prefix:\n            ' + _COUNT
    _, plans = _plans(tmp_path, [_flat("v2", 2, 2)], count=count)
    assert plans[0].outcome != "rejected" and not plans[0].rejections


def test_layers_all_plans_the_step_free_architecture_on_its_layer_count_field(tmp_path):
    root = write_tree(tmp_path / "t", _files())
    query = PlanQuery(lambda dispatch: matrix_settings(dispatch, ["v1", "v2"], 2, 1))
    from auditor.common.config import Config
    from auditor.engine.scan import run_scan
    from auditor.facts.cache import FactsCache
    from auditor.source.trees import DirectoryTree
    from rules import all_rules

    scan = run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(None), 1, queries=[query])
    archs = sorted({s.architecture for s in query.settings})
    assert archs == ["DeepMTPModel", "FlatMTPModel", "QwenMTP"]
    flat = [s for s in query.settings if s.architecture == "FlatMTPModel"]
    assert {s.fields for s in flat} == {(("num_nextn_predict_layers", 1),)}
    assert scan.analysis is not None
    dispatch = scan.analysis.get(DispatchProvider)
    # The step-aware models keep their plans: DeepMTP's per-step drafter threads the step.
    deep = dispatch.plan(Setting("v2", 2, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 2),)))
    assert [(s.forward_layer, s.verdict) for s in deep.steps] == [(0, "threaded"), (1, "threaded")]


def _get_text_config(owner: Obj):
    ev = Evaluator(World())
    ev.world.sub_config_getters = {"get_text_config": ("text_config",)}
    call = PCall(PAttr(PName("c"), "get_text_config"), (), ())
    return ev.eval(call, Path({"c": owner}), ("m.py", "f"))


def test_the_text_config_getter_returns_the_sub_config_else_the_config_itself():
    plain = Obj("hf", {"num_nextn_predict_layers": 1}, closed=True)
    assert _get_text_config(plain) is plain
    text = Obj("hf.text_config", {"num_nextn_predict_layers": 2}, closed=True)
    assert _get_text_config(Obj("hf", {"text_config": text}, closed=True)) is text
    # A config whose fields are not all known may hold a sub-config: unknown.
    assert isinstance(_get_text_config(Obj("hf", {"num_nextn_predict_layers": 1})), Unknown)


_ONE_BUILT = '''
import torch.nn as nn


class DeepMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.start = config.num_hidden_layers * 2
        self.num_mtp_layers = 1
        self.layers = nn.ModuleDict({str(i): nn.Linear(4, 4)
                                     for i in range(self.start, self.start + self.num_mtp_layers)})

    def forward(self, x, spec_step_idx: int = 0):
        return self.layers[str(self.start + spec_step_idx % self.num_mtp_layers)](x)
'''


def test_a_count_the_constructor_fixes_is_the_layer_count_whatever_the_config_says(tmp_path):
    files = gate_tree()
    files["vllm/models/deep_mtp.py"] = _ONE_BUILT
    root = write_tree(tmp_path / "t", files)
    setting = Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3),))
    plan = planned_scan(root, [setting])[1][0]
    assert plan.proposer is not None and plan.proposer[1] == "MultiModuleSpeculator"  # the gate reads the field
    assert (plan.num_mtp_layers, plan.layer_field) == (1, None)
    assert [(s.forward_layer, s.verdict) for s in plan.steps] == [(0, "threaded")] * 3
    assert any("builds 1 MTP layer(s) whatever the config says (self.num_mtp_layers = 1 in DeepMTP.__init__)" in n
               for n in plan.notes), plan.notes
