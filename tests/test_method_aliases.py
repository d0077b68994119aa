"""A method written as a family's own name (issue 18): vLLM's speculative config rewrites
``deepseek_mtp`` to ``mtp`` in its first statements (``if self.method in
get_args(MTPModelTypes) and self.method != "mtp": self.method = "mtp"``), so the route is
``mtp``'s. ``typing.get_args`` of a module's ``Literal[...]`` alias is evaluated (nested aliases
flattened, as ``Literal`` flattens them), checked against CPython running the same fixture
source (ours, never scanned code); anything else stays unknown. Small trees written here
(:mod:`trees` shape), never vLLM's code."""

from __future__ import annotations

import sys
import textwrap
import types

import pytest
from scan_helpers import write_tree
from test_layers import planned_scan
from trees import gate_tree

from auditor.analyses.dispatch import Setting
from auditor.analyses.dispatch.syntax import TreeWorld
from auditor.analyses.partial_eval import Evaluator, Unknown
from auditor.common.config import Config
from auditor.facts.cache import FactsCache
from auditor.index.index import Index
from auditor.source.trees import DirectoryTree

TYPES = "vllm/types.py"
USES = "vllm/uses.py"
TYPES_SRC = textwrap.dedent('''
    from typing import Literal

    Inner = Literal["b", "c"]
    Outer = Literal["a", Inner, "b", 3]
    Mixed = Literal["a", int]
''')
USES_SRC = textwrap.dedent('''
    from typing import get_args, Literal
    from vllm.types import Outer, Mixed


    def member(x):
        return x in get_args(Outer)


    def count():
        return len(get_args(Outer))


    def mixed(x):
        return x in get_args(Mixed)


    def local_alias(x):
        return x in get_args(Local)


    Local = Literal["z"]
''')
SHADOW_SRC = textwrap.dedent('''
    from typing import Literal

    Local = Literal["z"]


    def get_args(t):
        return ("other",)


    def member(x):
        return x in get_args(Local)
''')


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = write_tree(tmp_path_factory.mktemp("literals"),
                      {TYPES: TYPES_SRC, USES: USES_SRC, "vllm/shadow.py": SHADOW_SRC})
    return TreeWorld(Index(DirectoryTree(root), Config(), FactsCache(None)))


def _evaluate(world: TreeWorld, path: str, func: str, **args):
    fn = world.index.function((path, func))
    assert fn is not None and fn.body, f"{func} keeps no statement tree"
    return Evaluator(world).run_joined((path, func), fn, args).returned


def _cpython(func: str, **args):
    names = {"vllm.types": TYPES_SRC, "vllm.uses": USES_SRC}
    made = {}
    try:
        for name, src in names.items():  # our own fixture, never scanned code
            made[name] = module = types.ModuleType(name)
            sys.modules[name] = module
            exec(compile(src, name, "exec"), module.__dict__)
        return getattr(made["vllm.uses"], func)(**args)
    finally:
        for name in made:
            del sys.modules[name]


@pytest.mark.parametrize("func,args", [
    ("member", {"x": "a"}), ("member", {"x": "c"}), ("member", {"x": "d"}), ("member", {"x": 3}),
    ("count", {}),  # nested alias flattened, the repeated "b" dropped
    ("local_alias", {"x": "z"}),
])
def test_get_args_of_a_literal_alias_is_what_cpython_computes(world, func, args):
    got = _evaluate(world, USES, func, **args)
    assert not isinstance(got, Unknown), got
    assert got == _cpython(func, **args)


def test_an_alias_with_a_type_member_or_a_get_args_of_our_own_stays_unknown(world):
    assert isinstance(_evaluate(world, USES, "mixed", x="a"), Unknown)  # ``int`` is no literal
    # The module's own ``get_args`` is not typing's (typing's would say ``"other"`` is no member):
    # it is a callee whose body the facts do not keep, so the answer is unknown.
    assert isinstance(_evaluate(world, "vllm/shadow.py", "member", x="other"), Unknown)


_SPEC_PRELUDE = '''
from typing import Literal, get_args

FamilyTypes = Literal["deep_mtp", "qwen_mtp", "mtp"]


class SpeculativeConfig:
    def __post_init__(self):
        if self.method is None:
            self.method = "draft_model"
        if self.method in get_args(FamilyTypes) and self.method != "mtp":
            self.method = "mtp"
        if self.model is None:
            if self.method == "mtp":
                self.model = self.target_model
        if self.model_name_says_eagle:
            self.method = "eagle"
'''


def _alias_tree() -> dict[str, str]:
    tree = gate_tree()
    spec = tree["vllm/config/speculative.py"]
    tree["vllm/config/speculative.py"] = spec.replace("class SpeculativeConfig:\n", _SPEC_PRELUDE, 1)
    return tree


@pytest.mark.parametrize("method", ["deep_mtp", "qwen_mtp"])
def test_a_family_method_name_takes_the_mtp_route_with_the_rewrite_among_the_decisions(tmp_path, method):
    root = write_tree(tmp_path, _alias_tree())
    target = '{"model_type": "deep", "num_nextn_predict_layers": 3}'
    given, plain = Setting("v2", 3, method, target_config=target), Setting("v2", 3, "mtp", target_config=target)
    _, (renamed, mtp) = planned_scan(root, [given, plain])
    assert renamed.proposer == mtp.proposer and renamed.proposer[1] == "MultiModuleSpeculator"
    assert [s.forward_layer for s in renamed.steps] == [s.forward_layer for s in mtp.steps] == [0, 1, 2]
    rewrite = [d for d in renamed.decisions if "get_args(FamilyTypes)" in d.condition]
    assert [d.value for d in rewrite] == [True] and not any("get_args" in d.condition for d in mtp.decisions)


def test_a_name_the_alias_does_not_list_is_not_rewritten(tmp_path):
    root = write_tree(tmp_path, _alias_tree())
    target = '{"model_type": "deep", "num_nextn_predict_layers": 3}'
    _, (plan,) = planned_scan(root, [Setting("v2", 3, "other_mtp", target_config=target)])
    assert plan.proposer is None  # the factory's ``method == "mtp"`` is false: nothing is built


_PYDANTIC_UTILS = '''
from pydantic.dataclasses import dataclass


def config(cls):
    return dataclass(cls)
'''

_TYPED_FIELDS = '''
from typing import Literal, get_args

from vllm.config.utils import config

FamilyTypes = Literal["deep_mtp", "qwen_mtp", "mtp"]
Method = Literal["draft_model", FamilyTypes]
SampleMethod = Literal["greedy", "probabilistic"]


@config
class SpeculativeConfig:
    method: Method | None = None
    draft_sample_method: SampleMethod = "greedy"
'''


def _typed_tree(decorated: bool = True) -> dict[str, str]:
    tree = gate_tree()
    spec = tree["vllm/config/speculative.py"]
    head = _TYPED_FIELDS if decorated else _TYPED_FIELDS.replace("@config\n", "")
    tree["vllm/config/speculative.py"] = spec.replace("class SpeculativeConfig:\n", head.lstrip("\n"), 1)
    tree["vllm/config/utils.py"] = _PYDANTIC_UTILS
    return tree


def test_a_value_a_pydantic_fields_literal_type_lacks_is_rejected_with_pydantics_message(tmp_path):
    root = write_tree(tmp_path, _typed_tree())
    target = '{"model_type": "deep", "num_nextn_predict_layers": 3}'
    settings = [Setting("v2", 3, "other_mtp", target_config=target),
                Setting("v2", 3, "deep_mtp", target_config=target, options=(("draft_sample_method", "probabilstic"),)),
                Setting("v2", 3, "mtp", target_config=target, options=(("draft_sample_method", "probabilistic"),))]
    _, (method, sample, fine) = planned_scan(root, settings)
    assert method.outcome == sample.outcome == "rejected" and fine.outcome == "plan"
    (r,) = method.rejections
    assert (r.path, r.function, r.when) == ("vllm/config/speculative.py", "SpeculativeConfig.method", "validation")
    assert r.message == ("pydantic ValidationError: method: Input should be 'draft_model', 'deep_mtp', 'qwen_mtp' or 'mtp' "
                         "[type=literal_error, input_value='other_mtp', input_type=str]")
    assert "method: Method | None" in (root / r.path).read_text().splitlines()[r.line - 1]
    (r,) = sample.rejections
    assert r.message.startswith("pydantic ValidationError: draft_sample_method: Input should be 'greedy' or 'probabilistic'")


def test_a_class_pydantic_does_not_build_checks_no_field_type(tmp_path):
    root = write_tree(tmp_path, _typed_tree(decorated=False))
    target = '{"model_type": "deep", "num_nextn_predict_layers": 3}'
    _, (plan,) = planned_scan(root, [Setting("v2", 3, "other_mtp", target_config=target)])
    assert plan.outcome == "plan" and plan.proposer is None and not plan.rejections


def test_get_args_of_a_local_or_a_rebound_alias_is_not_the_module_alias(tmp_path):
    src = textwrap.dedent('''
        from typing import Literal, get_args
        from vllm.types import Inner

        Outer = Literal["a"]
        Inner = Inner | None


        def param(Outer, x):
            return x in get_args(Outer)


        def rebound(x):
            return x in get_args(Inner)
    ''')
    root = write_tree(tmp_path, {TYPES: TYPES_SRC, "vllm/local.py": src})
    world = TreeWorld(Index(DirectoryTree(root), Config(), FactsCache(None)))
    assert isinstance(_evaluate(world, "vllm/local.py", "param", Outer=Unknown("Outer"), x="a"), Unknown)
    assert isinstance(_evaluate(world, "vllm/local.py", "rebound", x="b"), Unknown)


@pytest.mark.parametrize("edit,options", [
    # pydantic-core may accept a value equal to a member of another type (True for 1): not claimed.
    (("SampleMethod = Literal[\"greedy\", \"probabilistic\"]", "SampleMethod = Literal[1, 2]"),
     (("draft_sample_method", True),)),
    # A validator that sees the input first may rewrite it.
    (("    method: Method | None = None\n", "    method: Method | None = None\n\n"
      "    @model_validator(mode=\"before\")\n    def _fix(cls, data):\n        return data\n"), ()),
    (("    method: Method | None = None\n", "    method: Method | None = None\n\n"
      "    @field_validator(\"*\")\n    def _fix(cls, value):\n        return value\n"), ()),
])
def test_a_value_pydantic_may_accept_or_a_validator_may_rewrite_is_not_rejected(tmp_path, edit, options):
    tree = _typed_tree()
    tree["vllm/config/speculative.py"] = tree["vllm/config/speculative.py"].replace(*edit)
    root = write_tree(tmp_path, tree)
    target = '{"model_type": "deep", "num_nextn_predict_layers": 3}'
    method = "mtp" if options else "other_mtp"
    _, (plan,) = planned_scan(root, [Setting("v2", 3, method, target_config=target, options=options)])
    assert not plan.rejections, plan.rejections


def test_a_decorator_that_does_not_build_a_pydantic_dataclass_checks_no_field_type(tmp_path):
    tree = _typed_tree()
    tree["vllm/config/utils.py"] = ("from pydantic.dataclasses import dataclass\n\nREG = []\n\n\n"
                                    "def config(cls):\n    REG.append(cls)\n    return cls\n")
    root = write_tree(tmp_path, tree)
    target = '{"model_type": "deep", "num_nextn_predict_layers": 3}'
    _, (plan,) = planned_scan(root, [Setting("v2", 3, "other_mtp", target_config=target)])
    assert not plan.rejections
