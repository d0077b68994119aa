"""Soundness of the partial evaluator (issue 18): each test is a way an unknown used to
become a known — a callee's write leaking across paths, an override's fork cut to its
first path, side effects of unknown branches and callees skipped, container writes not
modelled, a cross-module constant not resolved, paths beyond the cap dropped."""

from __future__ import annotations

import json
import textwrap

import msgspec

from scan_helpers import write_tree
from test_layers import planned_scan
from test_partial_eval import _World

from auditor.analyses.dispatch import Setting
from auditor.analyses.partial_eval import MAX_CALL_DEPTH, MAX_PATHS, ClassRef, Evaluator, FuncRef, Obj, Unknown, World
from auditor.facts.extract import UNPACK, PCall, PConst, PName, PSubscript, extract
from trees import gate_tree as _tree


def _paths(src: str, func: str, **args):
    world = _FunctionsWorld(src)
    ev = Evaluator(world)
    return ev.run(("m.py", func), world.facts.functions[func], args), ev


def _one(src: str, func: str, **args):
    paths, _ = _paths(src, func, **args)
    assert len(paths) == 1, paths
    return paths[0].returned


def test_a_callees_write_on_one_path_does_not_reach_the_caller_from_another():
    src = """
def helper(cfg):
    if cfg.mystery:
        cfg.x = 1
        return 0
    cfg.x = 2
    return 0

def f(cfg):
    helper(cfg)
    return cfg.x
"""
    cfg = Obj("cfg", {"x": 0})
    value = _one(src, "f", cfg=cfg)
    assert isinstance(value, Unknown) and isinstance(cfg.fields["x"], Unknown)
    # Both paths agreeing is still known.
    agreeing = src.replace("cfg.x = 1", "cfg.x = 2")
    assert _one(agreeing, "f", cfg=Obj("cfg", {"x": 0})) == 2


def test_forked_paths_have_their_own_objects():
    src = """
def f(cfg):
    if cfg.mystery:
        cfg.x = 1
        return cfg
    cfg.x = 2
    return cfg
"""
    paths, _ = _paths(src, "f", cfg=Obj("cfg", {}))
    assert sorted(p.returned.fields["x"] for p in paths) == [1, 2]
    assert paths[0].returned is not paths[1].returned


def test_an_override_that_forks_keeps_every_path_and_its_gate_is_not_known():
    src = """
def override(hf_config):
    if hf_config.mystery:
        hf_config.update({"architectures": ["A"]})
        return hf_config
    if hf_config.model_type == "x":
        hf_config.update({"architectures": ["A"]})
        return hf_config
    hf_config.update({"architectures": ["B"], "n": 2})
    return hf_config
"""
    world = _FunctionsWorld(src)
    hf = Obj("hf_config", {"model_type": "y"})
    joined = Evaluator(world).run_joined(("m.py", "override"), world.facts.functions["override"], {"hf_config": hf})
    assert joined.returned is hf
    archs = hf.fields["architectures"]  # ["A"] or ["B"]: a list of one unknown name
    assert isinstance(archs, Unknown) or isinstance(archs[0], Unknown)
    assert isinstance(hf.fields["n"], Unknown) and hf.fields["n"].maybe_absent
    assert any(d.value is None and d.condition == "hf_config.mystery" for d in joined.decisions)
    # Decided: one path, known.
    hf = Obj("hf_config", {"model_type": "y", "mystery": False})
    Evaluator(world).run_joined(("m.py", "override"), world.facts.functions["override"], {"hf_config": hf})
    assert hf.fields["architectures"] == ["B"] and hf.fields["n"] == 2


_FORKING_OVERRIDE = '''
from vllm.platforms import platform_supports_mtp


class SpeculativeConfig:
    @staticmethod
    def hf_config_override(hf_config):
        if hf_config.model_type == "deep" and platform_supports_mtp():
            n_predict = getattr(hf_config, "num_nextn_predict_layers", None)
            hf_config.update({"n_predict": n_predict, "architectures": ["DeepMTPModel"]})
            return hf_config
        if hf_config.model_type == "deep":
            hf_config.model_type = "qwen_mtp"
            hf_config.update({"architectures": ["QwenMTP"]})
        return hf_config

    def use_multi_module_mtp(self):
        if self.method != "mtp" or self.draft_model_config is None:
            return False
        num_mtp_layers = getattr(self.draft_model_config.hf_config, "num_nextn_predict_layers", 1)
        return min(num_mtp_layers, self.num_speculative_tokens) > 1
'''


def test_a_plan_behind_a_forking_override_is_unknown(tmp_path):
    """The override picks DeepMTPModel or QwenMTP on something not in the config: the
    plan used to take the first path (DeepMTP, threaded); it is unknown."""
    files = _tree()
    files["vllm/config/speculative.py"] = _FORKING_OVERRIDE
    root = write_tree(tmp_path / "t", files)
    target = json.dumps({"model_type": "deep", "architectures": ["DeepForCausalLM"], "num_nextn_predict_layers": 3,
                         "mtp_num_hidden_layers": 3})
    _, (plan,) = planned_scan(root, [Setting("v2", 3, target_config=target)])
    assert {s.verdict for s in plan.steps} == {"unknown"}, plan
    assert not any(s.verdict == "threaded" for s in plan.steps)


def test_unknown_guard_and_unknown_callee_make_their_writes_unknown():
    src = """
def f(cfg, xs, d):
    if cfg.mystery:
        xs.append(1)
        d["k"] = 2
    not_in_the_tree(cfg)
    return (len(xs), d.get("k"), cfg.model_type)
"""
    n, k, model_type = _one(src, "f", cfg=Obj("cfg", {"model_type": "a"}, closed=True), xs=[], d={})
    assert isinstance(n, Unknown) and isinstance(k, Unknown) and isinstance(model_type, Unknown)


class _FunctionsWorld(World):
    """Module-level functions of ``src`` resolvable by name; ``bodies``: every function
    keeps its statement tree (else only those the extractor keeps)."""

    def __init__(self, src: str, bodies: bool = True, bodies_of: str = "") -> None:
        self.facts = _World(src).facts
        if not bodies:  # only the function asked about keeps its tree, as the extractor would not
            plain = extract(textwrap.dedent(src), "m.py", "m", False)
            functions = {n: f if n == bodies_of else plain.functions[n] for n, f in self.facts.functions.items()}
            self.facts = msgspec.structs.replace(self.facts, functions=functions)

    def resolve_name(self, path, name):
        if name in self.facts.classes:
            return ClassRef(("m.py", name))
        return FuncRef(("m.py", name)) if name in self.facts.functions else Unknown(name)

    def function(self, key):
        return self.facts.functions.get(key[1])


def test_a_callee_the_facts_keep_no_body_of_may_write_what_it_is_handed():
    src = """
def writes(cfg):
    cfg.model_type = "b"

def reads(cfg):
    x = cfg.model_type
    return x

def f(cfg):
    if cfg.model_type == "a":
        reads(cfg)
        a = cfg.model_type
        writes(cfg)
        return (a, cfg.model_type)
    return None
"""
    world = _FunctionsWorld(src, bodies=False, bodies_of="f")
    # Plain functions keep no statement tree: they are known only by their facts.
    assert world.facts.functions["f"].body and not world.facts.functions["writes"].body
    cfg = Obj("cfg", {"model_type": "a"}, closed=True)
    paths = Evaluator(world).run(("m.py", "f"), world.facts.functions["f"], {"cfg": cfg})
    a, after = paths[0].returned
    assert a == "a" and isinstance(after, Unknown)


def test_subscript_and_container_writes_are_modelled():
    src = """
def f(cfg):
    overrides = {"n_predict": 1}
    if cfg.model_type == "v4":
        overrides["architectures"] = ["V4MTP"]
    cfg.update(overrides)
    xs = []
    xs.append(cfg.model_type)
    xs += ["z"]
    xs.extend(["w"])
    ys = xs
    ys[0] = "first"
    d = {}
    d.setdefault("a", []).append(3)
    return (cfg.architectures, xs, d, overrides.pop("n_predict"), overrides)
"""
    cfg = Obj("cfg", {"model_type": "v4"}, closed=True)
    archs, xs, d, popped, rest = _one(src, "f", cfg=cfg)
    assert archs == ["V4MTP"] and cfg.fields["n_predict"] == 1
    assert xs == ["first", "z", "w"] and d == {"a": [3]} and popped == 1 and rest == {"architectures": ["V4MTP"]}


def test_min_and_max_bound_an_unknown_number():
    src = """
def f(cfg):
    return (min(cfg.n, 1) > 1, min(cfg.n, 3) > 1, max(2, cfg.n) < 2, 1 >= min(1, cfg.n), min(cfg.n, 1) != 5,
            max(min(cfg.n, 1), cfg.m) > 1)
"""
    gt, undecided, lt, flipped, ne, nested = _one(src, "f", cfg=Obj("cfg", {}))
    assert (gt, lt, ne) == (False, False, True)
    # Orderings that a bound would make True are not decided (min(nan, 1) is nan), nor
    # bounds an unknown argument of max does not have.
    assert isinstance(undecided, Unknown) and isinstance(flipped, Unknown) and isinstance(nested, Unknown)


def test_tuple_unpacking_and_loops_do_not_keep_stale_values():
    src = """
def f(cfg):
    a, b = cfg.pair
    names = ["x"]
    for item in cfg.items:
        names.append(item)
    return (a, b, names)
"""
    a, b, names = _one(src, "f", cfg=Obj("cfg", {"pair": (1, 2), "items": Unknown("items")}))
    assert (a, b) == (1, 2) and isinstance(names, Unknown)  # a loop over what the evaluator cannot tell
    # A loop over a known list runs once per element, as CPython does.
    namespace: dict = {}
    exec(compile(src, "m.py", "exec"), namespace)  # our own fixture, never scanned code
    for items in ([], ["y", "z"]):
        cfg = type("Cfg", (), {"pair": (1, 2), "items": items})()
        assert _one(src, "f", cfg=Obj("cfg", {"pair": (1, 2), "items": list(items)})) == namespace["f"](cfg)


def test_a_loop_that_breaks_or_continues_runs_as_cpython_runs_it():
    """``continue`` goes on with the next element, ``break`` leaves the loop, each on its own
    path; a return or raise in the body ends the function as ever."""
    src = """
def f(cfg):
    seen = []
    for name, value in cfg.items:
        if name == "skip":
            continue
        if value == "stop":
            break
        if value == "bad":
            raise ValueError(name)
        seen.append(name)
    return seen
"""
    namespace: dict = {}
    exec(compile(src, "m.py", "exec"), namespace)  # our own fixture, never scanned code
    for items in ([], [("a", "1"), ("skip", "stop"), ("b", "2")], [("a", "1"), ("c", "stop"), ("b", "2")],
                  [("skip", "bad"), ("a", "bad")], [("a", "1")] * 3):
        cfg = type("Cfg", (), {"items": items})()
        try:
            want = namespace["f"](cfg)
        except ValueError:
            want = "raises"
        paths, _ = _paths(src, "f", cfg=Obj("cfg", {"items": list(items)}))
        assert len(paths) == 1, items
        got = "raises" if paths[0].raised else paths[0].returned
        assert got == want, items
    # An element the evaluator cannot tell: both ways, each path its own.
    paths, _ = _paths(src, "f", cfg=Obj("cfg", {"items": [("a", Unknown("v")), ("b", "2")]}))
    assert sorted(repr(q.returned) if not q.raised else "raises" for q in paths) == sorted(
        ["['a', 'b']", "[]", "raises"])


def test_cross_module_constant_written_into_the_draft_config(tmp_path):
    """``from .m import N`` inside the override, then ``hf_config.update({"n": N})``."""
    from auditor.analyses.partial_eval import module_constant
    from auditor.facts.cache import FactsCache
    from auditor.common.config import Config
    from auditor.index.index import Index
    from auditor.source.trees import DirectoryTree

    root = write_tree(tmp_path / "t", {
        "vllm/models/mimo_mtp.py": "_MIMO_NUM_MTP_LAYERS = 1\n_OTHER = [1, 2]\n_COMPUTED = len(_OTHER)\n",
        "vllm/models/alias.py": "from vllm.models.mimo_mtp import _MIMO_NUM_MTP_LAYERS as N\n",
        "vllm/config/speculative.py": textwrap.dedent("""
            def hf_config_override(hf_config):
                from vllm.models.mimo_mtp import _MIMO_NUM_MTP_LAYERS, _COMPUTED
                from vllm.models.alias import N
                hf_config.update({"n_predict": _MIMO_NUM_MTP_LAYERS, "m": N, "c": _COMPUTED})
                return hf_config
        """),
    })
    index = Index(DirectoryTree(root), Config(), FactsCache(None))
    path = "vllm/config/speculative.py"
    assert module_constant(index, path, "_MIMO_NUM_MTP_LAYERS") == 1
    assert module_constant(index, path, "N") == 1
    assert isinstance(module_constant(index, path, "_COMPUTED"), Unknown)
    assert isinstance(module_constant(index, path, "not_there"), Unknown)


def test_paths_beyond_the_cap_are_joined_and_noted_never_dropped():
    # Six independent drafter builds behind unknown guards: 64 ways through, more than the cap.
    ifs = "".join(f"    if cfg.a{i}:\n        cfg.o{i} = A()\n" for i in range(6))
    src = f"""
class A: pass

def f(cfg):
    if cfg.first:
        cfg.o = A()
        k = "x"
    else:
        cfg.o = A()
        k = "y"
{ifs}    return k
"""
    paths, ev = _paths(src, "f", cfg=Obj("cfg"))
    assert len(paths) <= MAX_PATHS
    known = {p.returned for p in paths if not isinstance(p.returned, Unknown)}
    cut = [p for p in paths if any(d.depends_on.startswith("cut:") for d in p.decisions)]
    assert cut and ev.notes and all(p.cuts for p in cut)
    assert "more than the 32" in ev.notes[0]
    # "y" is a real outcome: it is either still known on some path or a cut path leaves it open.
    assert "y" in known or any(isinstance(p.returned, Unknown) for p in cut)


def test_call_depth_cut_is_noted_and_unknown():
    deep = MAX_CALL_DEPTH + 2  # a chain of calls longer than the evaluator follows
    chain = "".join(f"def g{i}(cfg):\n    return g{i + 1}(cfg)\n\n" for i in range(deep))
    src = chain + f"def g{deep}(cfg):\n    cfg.x = 1\n    return 1\n"
    w = _FunctionsWorld(src)
    ev = Evaluator(w)
    cfg = Obj("cfg", {"x": 0})
    paths = ev.run(("m.py", "g0"), w.facts.functions["g0"], {"cfg": cfg})
    assert isinstance(paths[0].returned, Unknown)
    assert isinstance(cfg.fields["x"], Unknown)
    assert any("call depth" in n for n in ev.notes) and paths[0].cuts


def test_a_path_that_raises_is_noted_and_not_joined_into_the_config():
    """An override that raises on some paths: the config is the join of the paths that do
    not raise (a rejected config has none), and the raise is a note."""
    src = """
def override(hf_config):
    n = getattr(hf_config, "n", 1)
    types = getattr(hf_config, "types", None)
    if types is None:
        types = ["sliding"] * n
    if len(types) != hf_config.mystery:
        raise ValueError("one entry per layer")
    hf_config.update({"architectures": ["M"], "types": types})
    return hf_config
"""
    world = _FunctionsWorld(src)
    ev = Evaluator(world)
    hf = Obj("hf_config", {"n": 2, "mystery": Unknown("mystery")}, closed=True)
    joined = ev.run_joined(("m.py", "override"), world.facts.functions["override"], {"hf_config": hf})
    assert joined.raised is None and hf.fields["architectures"] == ["M"] and hf.fields["types"] == ["sliding"] * 2
    assert any("raises" in n and "one entry per layer" in n for n in ev.notes)
    assert any(d.value is None and "len(types)" in d.condition for d in joined.decisions)


def test_an_unknown_method_of_a_config_makes_it_unknown_unless_it_is_a_declared_getter():
    src = """
def f(cfg):
    cfg.get_text_config()
    a = cfg.model_type
    cfg.rewrite()
    return (a, cfg.model_type)
"""
    world = _FunctionsWorld(src)
    world.pure_methods = frozenset({"get_text_config"})
    paths = Evaluator(world).run(("m.py", "f"), world.facts.functions["f"], {"cfg": Obj("cfg", {"model_type": "a"}, closed=True)})
    a, after = paths[0].returned
    assert a == "a" and isinstance(after, Unknown)


def test_a_set_changed_by_a_method_is_unknown():
    src = """
def f(cfg):
    s = set()
    s.add(cfg.model_type)
    return "a" in s
"""
    assert isinstance(_one(src, "f", cfg=Obj("cfg", {"model_type": "a"}, closed=True)), Unknown)


def test_a_local_with_more_than_one_binding_has_no_single_value():
    """``local_defs`` (what the dispatch analyses take a local's value to be anywhere in its
    function) holds only a local bound once: a flat unpacking's element as that element of the
    value (``<unpack>(v, n)[i]``), not a starred one, not one a loop, ``+=``, ``with``,
    ``except`` or import binds again, and no parameter."""
    src = """
def f(p, q):
    a, b = q.pair
    c, *rest = q.more
    x = 0
    x += 1
    y = 1
    for y in range(3):
        pass
    with q.ctx() as w:
        pass
    p = 2
    try:
        e = 1
    except ValueError as e:
        pass
    if q.flag:
        once = q.value
    kept = q.other
"""
    fn = extract(textwrap.dedent(src), "m.py", "m", False).functions["f"]
    assert set(fn.local_defs) == {"a", "b", "once", "kept"}, fn.local_defs
    assert set(fn.top_defs) == {"a", "b", "kept"}
    b = fn.local_defs["b"]
    assert isinstance(b, PSubscript) and b.index == PConst(value=1)
    assert isinstance(b.value, PCall) and b.value.func == PName(id=UNPACK) and b.value.args[1] == PConst(value=2)


def test_a_walrus_binds_too_and_a_comprehension_variable_is_its_own():
    """A function with ``:=`` has its expressions walked for bindings; a comprehension's
    variable is the comprehension's (Python 3), not a second binding of the function's name."""
    src = """
def f(q):
    y = q.first
    if (y := q.second):
        pass

def g(q):
    x = q.third
    print([x for x in q.items])
"""
    facts = extract(textwrap.dedent(src), "m.py", "m", False)
    assert "y" not in facts.functions["f"].local_defs
    assert "x" in facts.functions["g"].local_defs


class _FactoryWorld(_FunctionsWorld):
    """``factory`` names a library function that returns an object (``object-factories``)."""

    def object_factory(self, path, chain):
        return chain == ("lib", "factory")


def test_an_object_a_configured_factory_returns_is_not_none_and_nothing_else_is_known():
    src = """
def f(cfg):
    x = None
    if cfg.mystery:
        x = lib.factory(3)
    else:
        x = lib.factory(4)
    return x is not None, x is None, x == 3, bool(x)

def g(cfg):
    x = None
    if cfg.mystery:
        x = lib.factory(3)
    return x is not None

def h(cfg):
    x = lib.other(3)
    return x is not None
"""
    def run(func):
        world = _FactoryWorld(src)
        paths = Evaluator(world).run(("m.py", func), world.facts.functions[func], {"cfg": Obj("cfg", {}, closed=False)})
        return [q.returned for q in paths]

    (both,) = run("f")  # (joined: the branch assigns, no fork)
    assert both[0] is True and both[1] is False
    assert isinstance(both[2], Unknown) and isinstance(both[3], Unknown)
    (maybe,) = run("g")  # None on one path
    assert isinstance(maybe, Unknown)
    (other,) = run("h")  # a call not configured: anything, None included
    assert isinstance(other, Unknown)


def test_a_plain_read_of_a_name_a_config_surely_lacks_raises_as_cpython_does():
    src = """
def defaulted(cfg):
    return getattr(cfg, "n", 5), hasattr(cfg, "n")

def plain(cfg):
    return cfg.n

def held(cfg):
    return cfg.computed
"""
    def cfg():  # a config.json {"h": 1} read into a class whose objects may also hold ``computed``
        return Obj("hf_config", {"h": 1}, closed=True, lacks=("BareConfig", frozenset({"computed"})))

    assert _one(src, "defaulted", cfg=cfg()) == (5, False)
    (p,), _ = _paths(src, "plain", cfg=cfg())
    assert p.raised == "AttributeError: 'BareConfig' object has no attribute 'n'"
    (q,), _ = _paths(src, "held", cfg=cfg())  # a name the class may set: unknown, not a raise
    assert q.raised is None and isinstance(q.returned, Unknown)
    (r,), _ = _paths(src, "plain", cfg=Obj("hf_config", {"h": 1}, closed=True))  # the class unknown
    assert r.raised is None and isinstance(r.returned, Unknown)
    class BareConfig:
        h = 1
    try:
        BareConfig().n  # noqa: B018
    except AttributeError as e:
        assert p.raised == f"AttributeError: {e}"


def test_a_list_joined_from_paths_then_changed_is_not_its_options():
    """A list appended to under an undecided test is joined as the values each path held
    (options); appending to it afterwards changes what the name holds, which those options no
    longer say: a membership test on it was decided False (the appended item was in no
    option), and is now unknown. CPython says True here on both paths."""
    src = """
def f(cond):
    lst = []
    if cond:
        lst.append("a")
    lst.append("b")
    return "b" in lst
"""
    got = _one(src, "f", cond=Unknown("cond"))
    assert isinstance(got, Unknown), got
    # Without the later change the options stand, and decide where they agree.
    unchanged = src.replace('    lst.append("b")\n', "")
    assert _one(unchanged, "f", cond=Unknown("cond")) is False
