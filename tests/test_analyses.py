"""Unit tests of the analysis providers on small trees: binding, resolution, taint,
selection, the fixpoint memo and the provider framework itself."""

from __future__ import annotations

import pytest
from scan_helpers import write_tree

from auditor.analyses import (
    Analyses,
    FixpointMemo,
    FlowProvider,
    Limits,
    PassKind,
    Provider,
    RegistryProvider,
    TypeProvider,
)
from auditor.analyses.flow import sources_for, taint
from auditor.analyses.analysis import Analysis
from auditor.facts.cache import FactsCache
from auditor.common.config import Config
from auditor.index.index import Index
from auditor.source.trees import DirectoryTree

MODEL = '''
import torch.nn as nn


class Predictor(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(config.num_nextn_predict_layers)])

    def forward(self, input_ids, positions, hidden_states, spec_step_idx: int = 0):
        idx = spec_step_idx % len(self.layers)
        return self.layers[idx](hidden_states)


class Base(nn.Module):
    def forward(self, x, spec_step_idx=0):
        return self.model(x, None, x, spec_step_idx)


class Wrapper(Base):
    def __init__(self, config):
        super().__init__()
        self.model = Predictor(config)

    def run(self, x, **kwargs):
        kw = {"positions": None}
        kw["spec_step_idx"] = kwargs.get("spec_step_idx", 0)
        a = self.model(x, None, x, 3)
        b = self.model(x, None, hidden_states=x, **kw)
        m = self.model
        c = m.forward(x, None, x, spec_step_idx=1, bogus=2)
        return super().forward(x)
'''


def _analysis(tmp_path, files=None):
    root = write_tree(tmp_path, files or {"vllm/m_mtp.py": MODEL})
    index = Index(DirectoryTree(root), Config(), FactsCache(None), 1)
    index.load_seeds()
    return Analysis(index, Config())


def _calls(a, func):
    key = ("vllm/m_mtp.py", func)
    fn = a.index.function(key)
    assert fn is not None
    return key, fn, a.types.defining_class(key)


def test_attribute_types_follow_the_most_derived_assignment(tmp_path):
    a = _analysis(tmp_path)
    assert a.types.attr_types(("vllm/m_mtp.py", "Wrapper"), "model") == (("vllm/m_mtp.py", "Predictor"),)
    containers = a.types.containers(("vllm/m_mtp.py", "Predictor"))
    assert [(c.attr, c.config_fields, c.iterated) for c in containers] == [("layers", ("num_nextn_predict_layers",), False)]


def test_resolution_of_self_attribute_alias_and_super(tmp_path):
    a = _analysis(tmp_path)
    key, fn, ctx = _calls(a, "Wrapper.run")
    per_call = [(c.func, [t.func[1] for t in a.calls.targets(key, fn, ctx, i)]) for i, c in enumerate(fn.calls)]
    # self.model(...) twice and the alias m.forward(...) reach Predictor.forward; super().forward
    # reaches Base.forward with self still a Wrapper; kwargs.get and super() reach nothing of ours.
    assert per_call == [
        (("kwargs", "get"), []),
        (("self", "model"), ["Predictor.forward"]),
        (("self", "model"), ["Predictor.forward"]),
        (("m", "forward"), ["Predictor.forward"]),
        (("super()", "forward"), ["Base.forward"]),
        (("super",), []),
    ]
    sup = a.calls.targets(key, fn, ctx, 4)[0]
    assert sup.ctx == ("vllm/m_mtp.py", "Wrapper") and sup.bound


def test_binding_positional_keyword_dict_and_unknown(tmp_path):
    a = _analysis(tmp_path)
    key, fn, ctx = _calls(a, "Wrapper.run")
    bindings = []
    for i, call in enumerate(fn.calls):
        for tgt in a.calls.targets(key, fn, ctx, i):
            if tgt.func[1] == "Predictor.forward":
                bindings.append(a.calls.bind(call, fn, tgt))
    positional, via_dict, alias = bindings
    assert positional.params["spec_step_idx"].how is PassKind.POSITIONAL  # 4th positional after self
    assert positional.params["spec_step_idx"].expr.literal == 3
    assert via_dict.params["spec_step_idx"].how is PassKind.DICT
    assert via_dict.params["spec_step_idx"].describe() == "**kw"
    assert via_dict.params["hidden_states"].how is PassKind.KEYWORD
    assert alias.unknown_keywords == ["bogus"] and "spec_step_idx" in alias.params


def test_taint_and_sources(tmp_path):
    a = _analysis(tmp_path)
    fn = a.index.function(("vllm/m_mtp.py", "Predictor.forward"))
    assert fn is not None
    assert taint(fn, {"spec_step_idx"}) == {"spec_step_idx", "idx"}
    run = a.index.function(("vllm/m_mtp.py", "Wrapper.run"))
    assert run is not None
    assert sources_for(run, "spec_step_idx") == set()  # read as kwargs.get(...) into a dict, not a local
    assert taint(run, {"x"}) >= {"a", "b", "c"}


def test_selection_through_callees(tmp_path):
    a = _analysis(tmp_path)
    sel = a.flow.selects(("vllm/m_mtp.py", "Base.forward"), ("vllm/m_mtp.py", "Wrapper"), "spec_step_idx")
    assert sel is not None and sel.container == "self.layers"
    assert [h.function for h in sel.hops] == ["Base.forward", "Predictor.forward"]
    assert a.flow.selects(("vllm/m_mtp.py", "Predictor.forward"), None, "positions") is None


RECURSIVE = {
    "vllm/m_mtp.py": '''
import torch.nn as nn


class A(nn.Module):
    def __init__(self):
        self.peer = B()
        self.head = C()

    def forward(self, x, spec_step_idx=0):
        y = self.peer(x, spec_step_idx)
        return self.head(y, spec_step_idx)


class B(nn.Module):
    def __init__(self):
        self.peer = A()

    def forward(self, x, spec_step_idx=0):
        return self.peer(x, spec_step_idx=spec_step_idx)


class C(nn.Module):
    def __init__(self):
        self.layers = nn.ModuleList([])

    def forward(self, x, spec_step_idx=0):
        return self.layers[spec_step_idx](x)
''',
}


@pytest.mark.parametrize("order", [("A", "B"), ("B", "A")])
def test_recursive_selection_does_not_depend_on_query_order(tmp_path, order):
    """A reaches the selection through C; B only through A, which calls B back first.
    Asking A first used to memoise B's answer from the cut cycle (None)."""
    a = _analysis(tmp_path, RECURSIVE)
    path = "vllm/m_mtp.py"
    answers = {c: a.flow.selects((path, f"{c}.forward"), (path, c), "spec_step_idx") for c in order}
    assert answers["A"] is not None and answers["B"] is not None, answers
    assert [h.function for h in answers["B"].hops] == ["B.forward", "A.forward", "C.forward"]


def test_fixpoint_memo_iterates_a_cycle_and_memoises_only_finished_queries():
    limits = Limits()
    memo: FixpointMemo[str, frozenset[str]] = FixpointMemo(frozenset, limits, "test")
    edges = {"a": ["b"], "b": ["a", "c"], "c": []}
    calls: list[str] = []

    def compute(n: str) -> frozenset[str]:
        calls.append(n)
        out = {n}
        for m in edges[n]:
            out |= reach(m)
        return frozenset(out)

    def reach(n: str) -> frozenset[str]:
        return memo.query(n, lambda: compute(n))

    assert reach("a") == {"a", "b", "c"}
    assert reach("b") == {"a", "b", "c"}  # b was inside a's cycle: not memoised from a's first round
    assert "a" in memo and "c" in memo
    assert not limits.as_dict()


def test_a_provider_must_declare_what_it_queries(tmp_path):
    a = _analysis(tmp_path)

    class Sneaky(Provider):
        dependencies = (TypeProvider,)

        def __init__(self, analyses: Analyses) -> None:
            super().__init__(analyses)
            self.flow = self.dep(FlowProvider)

    with pytest.raises(TypeError, match="without declaring"):
        a.get(Sneaky)
    assert isinstance(a.get(RegistryProvider), RegistryProvider)


def test_limits_are_counted(tmp_path):
    deep = "import torch.nn as nn\n\n\n"
    for i in range(14):
        deep += f"class L{i}(nn.Module):\n    def __init__(self):\n        self.inner = L{i + 1}()\n\n    def forward(self, x, spec_step_idx=0):\n        return self.inner(x, spec_step_idx)\n\n\n"
    deep += "class L14(nn.Module):\n    def __init__(self):\n        self.layers = nn.ModuleList([])\n\n    def forward(self, x, spec_step_idx=0):\n        return self.layers[spec_step_idx](x)\n"
    proposer = '''
from vllm.loader import get_model


class Proposer:
    def load_model(self):
        self.model = get_model(None)

    def propose(self, x):
        for i in range(self.num_speculative_tokens):
            x = self.model(x)
        return x
'''
    a = _analysis(tmp_path, {"vllm/m_mtp.py": deep, "vllm/proposer.py": proposer,
                             "vllm/loader.py": "def get_model(c):\n    return None\n"})
    a.prepare()
    assert a.limits_hit().get("draft loop call depth", 0) >= 1
