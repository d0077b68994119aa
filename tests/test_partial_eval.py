"""The three-valued partial evaluator (auditor/analyses/partial_eval/) on small
functions written here: what it knows, what it leaves unknown, and the branches it records."""

from __future__ import annotations

import textwrap

import ast

import msgspec

from auditor.analyses.partial_eval import ClassRef, Evaluator, Instance, Obj, Unknown, World, truth
from auditor.facts.extract import FunctionFact, _Source, extract, stmt_tree


def _with_bodies(src: str):
    """Facts of ``src`` where every function keeps its statement tree (the extractor keeps
    it only for the shapes the dispatch analysis evaluates; here every shape is tested)."""
    facts = extract(src, "m.py", "m", False)
    tree = ast.parse(src)
    source = _Source(src)
    functions = dict(facts.functions)
    classes = dict(facts.classes)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions[node.name] = msgspec.structs.replace(functions[node.name], body=stmt_tree(node.body, source))
        elif isinstance(node, ast.ClassDef):
            methods = dict(classes[node.name].methods)
            for m in node.body:
                if isinstance(m, ast.FunctionDef):
                    methods[m.name] = msgspec.structs.replace(methods[m.name], body=stmt_tree(m.body, source))
            classes[node.name] = msgspec.structs.replace(classes[node.name], methods=methods)
    return msgspec.structs.replace(facts, functions=functions, classes=classes)


class _World(World):
    def __init__(self, src: str) -> None:
        self.facts = _with_bodies(textwrap.dedent(src))

    def resolve_name(self, path, name):
        if name in self.facts.classes:
            return ClassRef(("m.py", name))
        return Unknown(name)

    def method(self, cls, name):
        c = self.facts.classes.get(cls[1])
        if c is not None and name in c.methods:
            return cls, c.methods[name]
        return None


def _run(src: str, func: str, **args):
    world = _World(src)
    cls, _, meth = func.rpartition(".")
    fn: FunctionFact = world.facts.classes[cls].methods[meth] if cls else world.facts.functions[func]
    return Evaluator(world).run(("m.py", func), fn, args), world


def _returned(src: str, func: str, **args):
    paths, _ = _run(src, func, **args)
    assert len(paths) == 1, paths
    return paths[0].returned


GATE = """
class SpecConfig:
    def use_multi(self):
        if self.method != "mtp" or self.draft is None:
            return False
        n = getattr(self.draft.hf_config, "num_nextn_predict_layers", 1)
        return min(n, self.num_speculative_tokens) > 1
"""


def _spec(hf_fields: dict, k: int, method: str = "mtp") -> Obj:
    hf = Obj("hf_config", dict(hf_fields), closed=True)
    draft = Obj("draft", {"hf_config": hf})
    return Obj("spec", {"method": method, "num_speculative_tokens": k, "draft": draft}, cls=("m.py", "SpecConfig"))


def test_getattr_default_applies_to_an_absent_field_of_a_closed_config():
    assert _returned(GATE, "SpecConfig.use_multi", self=_spec({"num_nextn_predict_layers": 3}, 3)) is True
    assert _returned(GATE, "SpecConfig.use_multi", self=_spec({"mtp_num_hidden_layers": 3}, 3)) is False
    # K smaller than the layer count: min(3, 1) > 1 is False.
    assert _returned(GATE, "SpecConfig.use_multi", self=_spec({"num_nextn_predict_layers": 3}, 1)) is False
    assert _returned(GATE, "SpecConfig.use_multi", self=_spec({"num_nextn_predict_layers": 3}, 3, "eagle")) is False


def test_unknown_field_of_an_open_config_stays_unknown():
    spec = _spec({}, 3)
    spec.fields["draft"].fields["hf_config"] = Obj("hf_config", {})  # open: fields not given are unknown
    value = _returned(GATE, "SpecConfig.use_multi", self=spec)
    assert isinstance(value, Unknown) and "num_nextn_predict_layers" in value.reason


def test_predicate_method_call_and_dispatch_chain_records_decisions():
    src = GATE + """
class A: pass
class B: pass
class C: pass

def factory(spec):
    if spec.method == "ngram":
        return A()
    elif spec.use_multi():
        return B()
    elif spec.method in ("mtp", "eagle"):
        return C()
    raise NotImplementedError(spec.method)
"""
    paths, _ = _run(src, "factory", spec=_spec({"mtp_num_hidden_layers": 3}, 3))
    assert len(paths) == 1
    p = paths[0]
    assert p.returned == Instance(("m.py", "C"), 19)
    assert [(d.line, d.value) for d in p.decisions] == [(14, False), (16, False), (18, True)]
    gate = p.decisions[1]
    assert gate.condition == "spec.use_multi()"
    assert any("num_nextn_predict_layers (default 1)" in f for f in gate.fields), gate.fields
    paths, _ = _run(src, "factory", spec=_spec({"num_nextn_predict_layers": 2}, 4))
    assert paths[0].returned.cls == ("m.py", "B")


def test_unknown_guard_keeps_both_branches():
    src = """
class A: pass
class B: pass

def factory(cfg):
    if cfg.mystery > 2:
        return A()
    return B()
"""
    paths, _ = _run(src, "factory", cfg=Obj("cfg", {}))
    assert sorted(p.returned.cls[1] for p in paths) == ["A", "B"]
    assert all(p.decisions[0].value is None and "cfg.mystery" in p.decisions[0].depends_on for p in paths)


def test_override_code_rewrites_a_config_with_update_and_attribute_assignments():
    src = """
def override(hf_config, extra=None):
    if extra is not None:
        hf_config.update(extra)
        return hf_config
    if hf_config.model_type in ("deepseek_v3", "deepseek_v32"):
        hf_config.model_type = "deepseek_mtp"
    if hf_config.model_type == "deepseek_mtp":
        n_predict = getattr(hf_config, "num_nextn_predict_layers", None)
        hf_config.update({"n_predict": n_predict, "architectures": ["DeepSeekMTPModel"]})
    if hf_config.model_type == "qwen3_5_moe":
        hf_config.model_type = "qwen3_5_mtp"
        hf_config.update({"n_predict": getattr(hf_config, "mtp_num_hidden_layers", None),
                          "architectures": ["Qwen3_5MoeMTP"]})
    return hf_config
"""
    hf = Obj("hf_config", {"model_type": "deepseek_v3", "num_nextn_predict_layers": 3, "architectures": ["X"]}, closed=True)
    out = _returned(src, "override", hf_config=hf)
    assert out is hf
    assert hf.fields["architectures"] == ["DeepSeekMTPModel"] and hf.fields["n_predict"] == 3
    hf = Obj("hf_config", {"model_type": "qwen3_5_moe", "mtp_num_hidden_layers": 2}, closed=True)
    _returned(src, "override", hf_config=hf)
    assert hf.fields["architectures"] == ["Qwen3_5MoeMTP"] and "num_nextn_predict_layers" not in hf.fields


def test_unknown_guard_without_exit_makes_its_writes_unknown_without_forking():
    src = """
def override(hf_config):
    if hf_config.flag:
        hf_config.update({"architectures": ["A"]})
        hf_config.model_type = "a"
    return hf_config
"""
    hf = Obj("hf_config", {})
    paths, _ = _run(src, "override", hf_config=hf)
    assert len(paths) == 1
    assert isinstance(hf.fields["architectures"], Unknown) and isinstance(hf.fields["model_type"], Unknown)


def test_boolean_short_circuit_with_unknowns_and_literals():
    src = """
def f(cfg):
    a = cfg.unknown_field and False
    b = cfg.unknown_field or True
    c = not cfg.k
    d = {"x", "y"}.intersection(cfg.names)
    e = len(cfg.names) if cfg.k == 0 else max(cfg.k, 7)
    g = hasattr(cfg, "names") and not hasattr(cfg, "absent")
    return (a, b, c, d, e, g)
"""
    cfg = Obj("cfg", {"k": 0, "names": ["y", "z"]}, closed=False)
    a, b, c, d, e, g = _returned(src, "f", cfg=cfg)
    # `x and False` is x when x is falsy (0, "", None): its value is unknown, its truth is not.
    assert isinstance(a, Unknown) and truth(a) is False and isinstance(b, Unknown) and truth(b) is True
    assert c is True and d == frozenset({"y"}) and e == 2
    assert isinstance(g, Unknown)  # open object: whether `absent` exists is not known
    cfg.closed = True
    assert _returned(src, "f", cfg=cfg)[5] is True


def test_calls_it_does_not_understand_are_unknown_not_executed():
    src = """
import os

def f(cfg):
    if os.system("echo hi") == 0:
        return 1
    return eval("2")
"""
    paths, _ = _run(src, "f", cfg=Obj("cfg"))
    values = [p.returned for p in paths]
    assert len(values) == 2 and 1 in values
    assert any(isinstance(v, Unknown) and "eval" in v.reason for v in values)


def test_raise_ends_a_path():
    src = """
def f(cfg):
    if cfg.k < 1:
        raise ValueError("k")
    return cfg.k * 2
"""
    paths, _ = _run(src, "f", cfg=Obj("cfg", {"k": 0}))
    assert paths[0].raised and paths[0].returned is None
    assert _returned(src, "f", cfg=Obj("cfg", {"k": 3})) == 6


def test_only_dispatch_shaped_functions_keep_their_statement_tree():
    src = textwrap.dedent("""
    class C:
        def predicate(self):
            n = getattr(self.hf, "n", 1)
            return min(n, self.k) > 1

        def plain(self):
            x = 1
            return x

        def loop(self):
            if self.a:
                self.b = 1
            return self.b
    def factory(cfg):
        if cfg.m == "a":
            return A(cfg)
        elif cfg.m == "b":
            return B(cfg)
    def override(hf):
        if hf.t == "x":
            hf.update({"architectures": ["X"]})
        return hf
    """)
    facts = extract(src, "m.py", "m", False)
    methods = facts.classes["C"].methods
    assert methods["predicate"].body and not methods["plain"].body and not methods["loop"].body
    assert facts.functions["factory"].body and facts.functions["override"].body


def test_a_fork_copies_what_is_mutable_and_shares_what_is_not():
    """The values' own copy methods (fork's speed) keep what fork promised: every mutable
    object copied once (aliases stay aliases, cycles close, uids kept); an immutable value (an
    unknown, an object or class of the tree) is shared: it is the same value on both paths, so a
    join of paths that left it unchanged keeps it, bounds and all, and one that changed it on a
    path does not."""
    import copy

    from auditor.analyses.partial_eval.state import fork, join
    from auditor.analyses.partial_eval.values import FuncRef, Path

    hf = Obj("hf", {"n": Unknown("n", upper=3), "k": 2}, cls=("m.py", "HF"))
    spec = Obj("spec", {"hf": hf, "kinds": [Instance(("m.py", "A"), 4), ClassRef(("m.py", "B"))]}, roles={"hf_config": hf})
    hf.fields["back"] = spec  # a cycle
    env = {"spec": spec, "also": hf, "f": FuncRef(("m.py", "f"), spec)}
    p = Path(env)
    q = fork(p)
    s2 = q.env["spec"]
    assert isinstance(s2, Obj) and s2 is not spec and s2.uid == spec.uid and s2.label == "spec" and s2.cls is None
    assert s2.roles["hf_config"] is s2.fields["hf"] is q.env["also"] is not hf
    assert s2.fields["hf"].fields["back"] is s2 and q.env["f"].self_obj is s2
    assert s2.fields["hf"].fields["n"] is hf.fields["n"]
    assert s2.fields["kinds"] == spec.fields["kinds"] and s2.fields["kinds"] is not spec.fields["kinds"]
    assert all(a is b for a, b in zip(s2.fields["kinds"], spec.fields["kinds"]))
    assert vars(s2).keys() == vars(copy.copy(spec)).keys()
    # Unchanged on both paths: the join keeps the one value (its bound too).
    r = fork(p)
    joined = join([p, r], "joined here")
    n = joined.env["spec"].fields["hf"].fields["n"]
    assert isinstance(n, Unknown) and n.reason == "n" and n.upper == 3
    # Changed on one path: unknown, with what it depends on.
    r = fork(p)
    r.env["spec"].fields["hf"].fields["n"] = 1
    joined = join([p, r], "joined there")
    n = joined.env["spec"].fields["hf"].fields["n"]
    assert isinstance(n, Unknown) and n.reason.endswith("joined there")


MAPPING_GET = """
def depths(hf_config):
    mtp_config = getattr(hf_config, "mtp_config", None) or {}
    return mtp_config.get("num_nextn_predict_layers", 0)
"""


def test_get_on_a_nested_mapping_of_a_config_reads_its_field_or_the_default():
    from auditor.analyses.dispatch.syntax import to_obj

    hf = to_obj("hf_config", {"mtp_config": {"num_nextn_predict_layers": 3}})
    assert _returned(MAPPING_GET, "depths", hf_config=hf) == 3
    assert _returned(MAPPING_GET, "depths", hf_config=to_obj("hf_config", {"mtp_config": {}})) == 0  # closed: default
    assert _returned(MAPPING_GET, "depths", hf_config=to_obj("hf_config", {})) == 0  # a real {}: dict.get
    # An open mapping (fields not given may be there) stays unknown.
    open_hf = Obj("hf_config", {"mtp_config": Obj("hf_config.mtp_config", {})}, closed=True)
    value = _returned(MAPPING_GET, "depths", hf_config=open_hf)
    assert isinstance(value, Unknown) and "num_nextn_predict_layers" in value.reason
