"""The engine's analyses over the index: types, call resolution, argument flow.

* :meth:`Analysis.attr_types` — what ``self.<attr>`` can be (classes, or the
  draft-model registry when a loader built it).
* :meth:`Analysis.resolve_call` — the functions a call site can reach
  (``self.m()``, ``super().m()``, MRO, ``self.attr(...)`` → ``forward``,
  ``self.a.b.m()``, module functions, callables passed as arguments).
* :meth:`Analysis.bind` — which callee parameter each argument lands in
  (keyword, positional through the signature, ``**kwargs`` forwarding, ``**d``
  for dicts built in the caller).
* :meth:`Analysis.selects` — whether a parameter's value reaches a layer
  selection (``self.layers[f(step)]``) directly or through callees.
* :meth:`Analysis.explore_loop` — follow one draft loop's calls, carrying which
  values vary per step, into every draft model class it reaches.
* :attr:`Analysis.graph` — the call graph (networkx), edges annotated with how
  each threaded parameter is passed.

Rules only query this module; they never walk syntax themselves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

import networkx as nx

from .config import Config
from .index import ClassKey, FuncKey, Index
from .model import ClassRef, Hop

REGISTRY = ("<registry>", "<draft models>")
MODULE_CONTAINERS = {"ModuleList", "ModuleDict"}
MAX_DEPTH = 10


@dataclass(frozen=True)
class Target:
    func: FuncKey
    ctx: ClassKey | None  # the receiver's class (``self`` inside the callee)
    bound: bool  # first parameter is self/cls and is not in the argument list
    model_class: ClassKey | None = None  # the draft model class a registry fan-out entered


@dataclass
class Binding:
    """Where each argument of one call lands in one callee's signature."""

    params: dict[str, dict[str, Any]] = field(default_factory=dict)  # callee param -> source
    unknown_keywords: list[str] = field(default_factory=list)
    forwards_kwargs: bool = False
    opaque_dicts: list[str] = field(default_factory=list)  # **d whose keys are not known here


@dataclass(frozen=True)
class Selection:
    """A parameter's value reaches a layer selection; ``hops`` lead from the function to it."""

    hops: tuple[Hop, ...]
    container: str


@dataclass
class LoopEntry:
    """A call from a draft loop (possibly through helpers) into a draft model's method."""

    loop_hop: Hop
    call_hop: Hop
    model_class: ClassKey
    method: str
    kind: str  # per threaded param: "varying" | "constant" | "absent"
    accepts: bool  # the callee can take the parameter
    hops: tuple[Hop, ...]
    callee: FuncKey


@dataclass
class LoopSelection:
    model_class: ClassKey
    kind: str  # "varying" | "constant" | "absent"
    hops: tuple[Hop, ...]
    container: str
    method: str  # the draft model entry method this selection was reached through


@dataclass
class LoopResult:
    func: FuncKey
    loop: dict[str, Any]
    hop: Hop
    entries: list[LoopEntry] = field(default_factory=list)
    selections: list[LoopSelection] = field(default_factory=list)


class Analysis:
    def __init__(self, index: Index, config: Config) -> None:
        self.index = index
        self.config = config
        self.params = list(config.threaded_params)
        self._attr_memo: dict[tuple[ClassKey, str], list[ClassKey]] = {}
        self._returns_memo: dict[tuple[FuncKey, ClassKey | None], list[ClassKey]] = {}
        self._select_memo: dict[tuple[FuncKey, ClassKey | None, str], Selection | None] = {}
        self._select_stack: set[tuple[FuncKey, ClassKey | None, str]] = set()
        self._resolve_memo: dict[tuple[FuncKey, ClassKey | None, int, int], list[Target]] = {}
        self._registry: list[tuple[ClassKey, list[str]]] | None = None
        self._model_classes: list[ClassKey] | None = None
        self._parts_memo: dict[ClassKey, set[ClassKey]] = {}
        self.graph: nx.MultiDiGraph = nx.MultiDiGraph()
        self._loops_cache: list[LoopResult] | None = None
        self._relevant: list[tuple[FuncKey, dict[str, Any]]] | None = None
        self._registry_pairs: list[tuple[ClassKey, ClassKey]] | None = None
        self._chain_memo: dict[tuple, list[tuple[ClassKey, ClassKey | None]]] = {}

    # ------------------------------------------------------------------
    # functions and classes
    def defining_class(self, key: FuncKey) -> ClassKey | None:
        cls, _, _ = key[1].rpartition(".")
        if not cls:
            return None
        facts = self.index.load(key[0])
        if facts and cls in facts["classes"]:
            return (key[0], cls)
        return None

    def functions(self) -> Iterable[tuple[FuncKey, dict[str, Any]]]:
        for path, facts in self.index.loaded():
            for name, fn in sorted(facts["functions"].items()):
                yield (path, name), fn
            for cname, cls in sorted(facts["classes"].items()):
                for mname, fn in sorted(cls["methods"].items()):
                    yield (path, f"{cname}.{mname}"), fn

    def relevant_functions(self) -> list[tuple[FuncKey, dict[str, Any]]]:
        """The functions rules examine: every function of a seed file, and every method of a
        class that is part of a draft model. Fixed before any rule runs, so findings never
        depend on the order in which resolution happened to load files."""
        if self._relevant is None:
            self.loop_results()
            keys: set[FuncKey] = set()
            for path in self.index.seeds:
                facts = self.index.facts.get(path)
                if not facts:
                    continue
                keys.update((path, n) for n in facts["functions"])
                for cname, cls in facts["classes"].items():
                    keys.update((path, f"{cname}.{m}") for m in cls["methods"])
            for mc in self.model_classes():
                for part in self.model_parts(mc):
                    for m in self.index.class_facts(part).get("methods", {}):
                        keys.add((part[0], f"{part[1]}.{m}"))
            out = []
            for k in sorted(keys):
                fn = self.index.function(k)
                if fn is not None:
                    out.append((k, fn))
            self._relevant = out
            self.index.frozen = True
        return self._relevant

    @staticmethod
    def param_names(fn: dict[str, Any]) -> list[str]:
        return [p["name"] for p in fn["params"]]

    @staticmethod
    def kwargs_param(fn: dict[str, Any]) -> str | None:
        for p in fn["params"]:
            if p["kind"] == "kwarg":
                return p["name"]
        return None

    def hop(self, key: FuncKey, line: int, note: str) -> Hop:
        return Hop(key[0], line, key[1], note)

    # ------------------------------------------------------------------
    # registry and draft model classes
    def registry(self) -> list[tuple[ClassKey, list[str]]]:
        """Draft model classes from the registry tables, with their architecture names."""
        if self._registry is not None:
            return self._registry
        by_class: dict[ClassKey, list[str]] = {}
        for path, facts in list(self.index.loaded()):
            for tname, table in sorted(facts.get("tables", {}).items()):
                if tname not in self.config.registry_tables:
                    continue
                for arch, (module, cls) in sorted(table.items()):
                    mpath = self.index.resolve_module_path(module, path)
                    if mpath is None:
                        continue
                    for sym in self.index.resolve(mpath, cls):
                        if sym.kind == "class":
                            by_class.setdefault((sym.path, sym.name), []).append(arch)
        self._registry = sorted(by_class.items())
        return self._registry

    def step_aware(self, cls: ClassKey, depth: int = 0) -> bool:
        """A class, or a module it holds, has a method taking or reading a threaded parameter."""
        for c in self.index.mro(cls):
            for m in self.index.class_facts(c).get("methods", {}).values():
                names = self.param_names(m)
                if any(p in names for p in self.params):
                    return True
                if any(("self." + p) in m["live"] for p in self.params):
                    return True
        if depth < 2:
            for t in self.held_types(cls):
                if t != REGISTRY and self.step_aware(t, depth + 1):
                    return True
        return False

    def model_classes(self) -> list[ClassKey]:
        """Draft model classes that take part in step threading (MTP models)."""
        if self._model_classes is None:
            reg = [c for c, _ in self.registry() if self.step_aware(c)]
            if not reg:
                # No registry in this tree (a fixture, a vendored subset): every
                # step-aware class that no other step-aware class holds is a model.
                aware = [c for c in self.index.all_classes() if self._declares_step(c)]
                held: set[ClassKey] = set()
                for c in aware:
                    for t in self.held_types(c):
                        held.update(self.index.mro(t) if t != REGISTRY else [])
                reg = [c for c in aware if c not in held]
            self._model_classes = sorted(set(reg))
        return self._model_classes

    def _declares_step(self, cls: ClassKey) -> bool:
        for m in self.index.class_facts(cls).get("methods", {}).values():
            if any(p in self.param_names(m) for p in self.params):
                return True
        return False

    def architectures(self, cls: ClassKey) -> list[str]:
        for c, archs in self.registry():
            if c == cls:
                return archs
        return []

    def model_parts(self, cls: ClassKey) -> set[ClassKey]:
        """Every class whose code runs as part of a model: its MRO and held modules, recursively."""
        if cls in self._parts_memo:
            return self._parts_memo[cls]
        parts: set[ClassKey] = set()
        todo = [cls]
        while todo and len(parts) < 200:
            c = todo.pop()
            for m in self.index.mro(c):
                if m in parts:
                    continue
                parts.add(m)
                for t in self.held_types(m):
                    if t != REGISTRY:
                        todo.append(t)
        self._parts_memo[cls] = parts
        return parts

    def affected_models(self, func: FuncKey) -> list[ClassRef]:
        owner = self.defining_class(func)
        if owner is None:
            return []
        out = [ClassRef(*c) for c in self.model_classes() if owner in self.model_parts(c)]
        return out

    # ------------------------------------------------------------------
    # attribute types
    def held_types(self, cls: ClassKey) -> list[ClassKey]:
        out: list[ClassKey] = []
        attrs: set[str] = set()
        for c in self.index.mro(cls):
            for m in self.index.class_facts(c).get("methods", {}).values():
                for s in m["attr_sets"]:
                    if len(s["target"]) == 2 and s["target"][0] == "self":
                        attrs.add(s["target"][1])
        for a in sorted(attrs):
            out.extend(self.attr_types(cls, a))
        return list(dict.fromkeys(out))

    def attr_types(self, cls: ClassKey, attr: str) -> list[ClassKey]:
        key = (cls, attr)
        if key in self._attr_memo:
            return self._attr_memo[key]
        self._attr_memo[key] = []
        out: list[ClassKey] = []
        for c in self.index.mro(cls):
            methods = self.index.class_facts(c).get("methods", {})
            found = False
            for mname, m in sorted(methods.items()):
                for s in m["attr_sets"]:
                    if s["target"] == ["self", attr]:
                        found = True
                        out.extend(self._value_types(cls, (c[0], f"{c[1]}.{mname}"), m, s["value"], 0))
            if found:
                break  # the most derived class that assigns the attribute wins
        out = list(dict.fromkeys(out))
        self._attr_memo[key] = out
        return out

    def _value_types(self, ctx: ClassKey | None, fkey: FuncKey, fn: dict[str, Any], e: dict[str, Any], depth: int) -> list[ClassKey]:
        if depth > 6:
            return []
        call = e.get("call")
        ch = e.get("ch")
        if call:
            if call[0] == "self" and len(call) == 2 and ctx is not None:
                found = self.index.method(ctx, call[1])
                if found:
                    mkey = (found[0][0], f"{found[0][1]}.{call[1]}")
                    return self.returned_types(mkey, ctx, depth + 1)
                return []
            if call[0] in ("self", "super()"):
                return []
            if call[-1] in self.config.loaders:
                return [REGISTRY]
            local = fn["assigns"].get(call[0]) if len(call) == 1 else None
            if local:
                return []
            out: list[ClassKey] = []
            for sym in self.index.resolve_chain(fkey[0], call):
                if sym.kind == "class":
                    if self.index.class_facts((sym.path, sym.name)).get("name") in MODULE_CONTAINERS:
                        continue
                    out.append((sym.path, sym.name))
                elif sym.kind == "function":
                    out.extend(self.returned_types((sym.path, sym.name), self.defining_class((sym.path, sym.name)), depth + 1))
            return out
        if ch:
            if ch[0] == "self" and len(ch) == 2 and ctx is not None:
                return self.attr_types(ctx, ch[1])
            if len(ch) == 1 and ch[0] in fn["assigns"]:
                out = []
                for alt in fn["assigns"][ch[0]]:
                    if alt.get("ch") != ch:
                        out.extend(self._value_types(ctx, fkey, fn, alt, depth + 1))
                return out
        return []

    def returned_types(self, fkey: FuncKey, ctx: ClassKey | None, depth: int = 0) -> list[ClassKey]:
        key = (fkey, ctx)
        if key in self._returns_memo:
            return self._returns_memo[key]
        self._returns_memo[key] = []
        fn = self.index.function(fkey)
        out: list[ClassKey] = []
        if fn is not None:
            if fkey[1].rpartition(".")[2] in self.config.loaders:
                out = [REGISTRY]
            else:
                for r in fn["returns"]:
                    out.extend(self._value_types(ctx, fkey, fn, r, depth + 1))
        out = list(dict.fromkeys(out))
        self._returns_memo[key] = out
        return out

    def expand(self, objs: Iterable[ClassKey], model_class: ClassKey | None) -> list[tuple[ClassKey, ClassKey | None]]:
        out: list[tuple[ClassKey, ClassKey | None]] = []
        for o in objs:
            if o == REGISTRY:
                if self._registry_pairs is None:
                    self._registry_pairs = [(m, m) for m in self.model_classes()]
                out.extend(self._registry_pairs)
            else:
                out.append((o, model_class))
        return out

    # ------------------------------------------------------------------
    # call resolution
    def _call_object(self, obj: ClassKey, model_class: ClassKey | None) -> list[Target]:
        """Calling an instance: its own ``__call__`` if the tree defines one, else ``forward``."""
        for name in ("__call__", "forward"):
            found = self.index.method(obj, name)
            if found:
                return [Target((found[0][0], f"{found[0][1]}.{name}"), obj, True, model_class)]
        return []

    def _objects_of_chain(
        self, ctx: ClassKey | None, parts: list[str], model_class: ClassKey | None
    ) -> list[tuple[ClassKey, ClassKey | None]]:
        """Types of ``self.parts[0].parts[1]...`` starting from ``ctx`` (memoised, like attr_types)."""
        key = (ctx, tuple(parts), model_class)
        cached = self._chain_memo.get(key)
        if cached is not None:
            return cached
        objs: list[tuple[ClassKey, ClassKey | None]] = [(ctx, model_class)] if ctx else []
        for part in parts:
            nxt: list[tuple[ClassKey, ClassKey | None]] = []
            for o, mc in objs:
                nxt.extend(self.expand(self.attr_types(o, part), mc))
            objs = list(dict.fromkeys(nxt))
        self._chain_memo[key] = objs
        return objs

    def resolve_call(
        self,
        fkey: FuncKey,
        fn: dict[str, Any],
        ctx: ClassKey | None,
        chain: list[str] | None,
        callables: dict[str, list[tuple[ClassKey, ClassKey | None]]] | None = None,
        model_class: ClassKey | None = None,
        _depth: int = 0,
    ) -> list[Target]:
        if not chain or _depth > 3:
            return []
        head = chain[0]
        if head == "super()":
            owner = self.defining_class(fkey)
            if ctx is None or owner is None or len(chain) != 2:
                return []
            found = self.index.method(ctx, chain[1], after=owner)
            if found:
                return [Target((found[0][0], f"{found[0][1]}.{chain[1]}"), ctx, True, model_class)]
            return []
        if head == "self" and ctx is not None:
            if len(chain) == 1:
                return self._call_object(ctx, model_class)
            objs = self._objects_of_chain(ctx, chain[1:-1], model_class)
            return self._member_call(objs, chain[-1])
        if callables and head in callables:
            objs = list(callables[head])
            if len(chain) == 1:
                out: list[Target] = []
                for o, mc in objs:
                    out.extend(self._call_object(o, mc))
                return out
            for part in chain[1:-1]:
                nxt = []
                for o, mc in objs:
                    nxt.extend(self.expand(self.attr_types(o, part), mc))
                objs = nxt
            return self._member_call(objs, chain[-1])
        if head in fn["assigns"]:
            # A local alias of an attribute chain (model = self.model).
            out = []
            for alt in fn["assigns"][head]:
                ach = alt.get("ch")
                if ach and ach[0] == "self" and len(ach) >= 2:
                    out.extend(self.resolve_call(fkey, fn, ctx, ach + chain[1:], callables, model_class, _depth + 1))
            return out
        if head in self.param_names(fn):
            return []
        out = []
        for sym in self.index.resolve_chain(fkey[0], chain):
            if sym.kind == "function":
                owner = self.defining_class((sym.path, sym.name))
                out.append(Target((sym.path, sym.name), owner, False, model_class))
        return out

    def _member_call(self, objs: list[tuple[ClassKey, ClassKey | None]], name: str) -> list[Target]:
        out: list[Target] = []
        for o, mc in objs:
            found = self.index.method(o, name)
            if found:
                out.append(Target((found[0][0], f"{found[0][1]}.{name}"), o, True, mc))
                continue
            for t, mc2 in self.expand(self.attr_types(o, name), mc):
                out.extend(self._call_object(t, mc2))
        return list(dict.fromkeys(out))

    def targets(self, fkey: FuncKey, fn: dict[str, Any], ctx: ClassKey | None, ci: int) -> list[Target]:
        """Context-free resolution of call ``ci`` of ``fkey`` (memoised)."""
        key = (fkey, ctx, ci, 0)
        if key not in self._resolve_memo:
            self._resolve_memo[key] = self.resolve_call(fkey, fn, ctx, fn["calls"][ci]["func"])
        return self._resolve_memo[key]

    # ------------------------------------------------------------------
    # argument binding
    def bind(self, call: dict[str, Any], caller: dict[str, Any], target: Target) -> Binding:
        callee = self.index.function(target.func)
        b = Binding()
        if callee is None:
            return b
        params = list(callee["params"])
        static = any(d.endswith("staticmethod") for d in callee.get("decorators", []))
        if target.bound and not static and params and params[0]["kind"] in ("pos", "posonly"):
            params = params[1:]
        positional = [p for p in params if p["kind"] in ("pos", "posonly")]
        by_name = {p["name"]: p for p in params if p["kind"] in ("pos", "kwonly")}
        has_kwargs = any(p["kind"] == "kwarg" for p in params)
        for i, arg in enumerate(call["args"]):
            if i < len(positional):
                b.params[positional[i]["name"]] = {"expr": arg, "how": "positional"}
        def keyword(name: str, src: dict[str, Any]) -> None:
            if name in by_name:
                b.params[name] = src
            elif has_kwargs:
                b.params[name] = src  # lands in **kwargs: a virtual parameter of that name
            else:
                b.unknown_keywords.append(name)
        for name, expr in call["kwargs"]:
            keyword(name, {"expr": expr, "how": "keyword"})
        caller_kwargs = self.kwargs_param(caller)
        for d in call["dstar"]:
            ch = d.get("ch")
            if ch and len(ch) == 1 and ch[0] == caller_kwargs:
                b.forwards_kwargs = True
            elif ch and len(ch) == 1 and ch[0] in caller["dicts"]:
                for key, expr in caller["dicts"][ch[0]]:
                    if key != "**":
                        keyword(key, {"expr": expr, "how": f"**{ch[0]}"})
            elif ch and len(ch) == 1:
                b.opaque_dicts.append(ch[0])
        return b

    def accepts(self, func: FuncKey, param: str) -> bool:
        fn = self.index.function(func)
        if fn is None:
            return False
        return param in self.param_names(fn) or self.kwargs_param(fn) is not None

    # ------------------------------------------------------------------
    # taint: which locals derive from a set of sources
    @staticmethod
    def taint(fn: dict[str, Any], sources: set[str]) -> set[str]:
        tainted = set(sources)
        if not tainted:
            return tainted
        changed = True
        assigns = fn["assigns"]
        while changed:
            changed = False
            for name, exprs in assigns.items():
                if name in tainted:
                    continue
                for e in exprs:
                    if tainted.intersection(e.get("n", ())):
                        tainted.add(name)
                        changed = True
                        break
        return tainted

    def _sources_for(self, fn: dict[str, Any], param: str) -> set[str]:
        """Names that carry ``param``'s value at the start of ``fn``."""
        if param in self.param_names(fn):
            return {param}
        if param.startswith("self."):
            return {param}
        kw = self.kwargs_param(fn)
        if kw is None:
            return set()
        # The value sits inside **kwargs: reads like kwargs["p"] / kwargs.get("p").
        out: set[str] = set()
        for name, exprs in fn["assigns"].items():
            for e in exprs:
                if kw in e.get("n", ()) and re.search(rf"['\"]{re.escape(param)}['\"]", e.get("t", "")):
                    out.add(name)
        return out

    # ------------------------------------------------------------------
    # selection: does a parameter's value choose a layer?
    def direct_selection(self, fkey: FuncKey, fn: dict[str, Any], tainted: set[str]) -> Selection | None:
        for sub in fn["subscripts"]:
            cont = sub["container"]
            if cont[0] != "self" or len(cont) < 2:
                continue
            if tainted.intersection(sub["index"]["n"]):
                label = ".".join(cont)
                return Selection(
                    (self.hop(fkey, sub["line"], f"selects {label}[{sub['index']['t']}]"),), label
                )
        return None

    def selects(self, func: FuncKey, ctx: ClassKey | None, param: str) -> Selection | None:
        """Whether ``param`` of ``func`` (named, in **kwargs, or ``self.param``) reaches a selection."""
        key = (func, ctx, param)
        if key in self._select_memo:
            return self._select_memo[key]
        if key in self._select_stack:
            return None
        self._select_stack.add(key)
        try:
            result = self._selects(func, ctx, param)
        finally:
            self._select_stack.discard(key)
        self._select_memo[key] = result
        return result

    def _selects(self, func: FuncKey, ctx: ClassKey | None, param: str) -> Selection | None:
        fn = self.index.function(func)
        if fn is None:
            return None
        sources = self._sources_for(fn, param)
        if not sources and not (self.kwargs_param(fn) and not param.startswith("self.")):
            return None
        tainted = self.taint(fn, sources)
        direct = self.direct_selection(func, fn, tainted)
        if direct:
            return direct
        base = param.rpartition(".")[2]
        # Side channel: self.model.spec_step_idx = spec_step_idx, read as self.spec_step_idx.
        for s in fn["attr_sets"]:
            tgt = s["target"]
            if len(tgt) >= 3 and tgt[0] == "self" and tgt[-1] in self.params and tainted.intersection(s["value"]["n"]):
                for obj, _ in self._objects_of_chain(ctx, tgt[1:-1], None):
                    for mkey, m in self._methods_of(obj):
                        sel = self.selects(mkey, obj, "self." + tgt[-1])
                        if sel:
                            return Selection((self.hop(func, s["line"], f"sets {'.'.join(tgt)}"),) + sel.hops, sel.container)
        for ci, call in enumerate(fn["calls"]):
            for tgt in self.targets(func, fn, ctx, ci):
                b = self.bind(call, fn, tgt)
                for cparam, src in sorted(b.params.items()):
                    expr = src["expr"]
                    if tainted.intersection(expr["n"]):
                        sel = self.selects(tgt.func, tgt.ctx, cparam)
                        if sel:
                            return self._via(func, call, tgt, cparam, src, sel)
                if b.forwards_kwargs and param not in self.param_names(fn) and not param.startswith("self."):
                    sel = self.selects(tgt.func, tgt.ctx, base)
                    if sel:
                        return Selection(
                            (self.hop(func, call["line"], f"forwards **kwargs to {tgt.func[1]}"),) + sel.hops, sel.container
                        )
        return None

    def _via(self, func: FuncKey, call: dict[str, Any], tgt: Target, cparam: str, src: dict[str, Any], sel: Selection) -> Selection:
        note = f"passes {src['expr']['t']} as {cparam} ({src['how']}) to {tgt.func[1]}"
        return Selection((self.hop(func, call["line"], note),) + sel.hops, sel.container)

    def _methods_of(self, cls: ClassKey) -> list[tuple[FuncKey, dict[str, Any]]]:
        out = []
        seen: set[str] = set()
        for c in self.index.mro(cls):
            for name, m in sorted(self.index.class_facts(c).get("methods", {}).items()):
                if name not in seen:
                    seen.add(name)
                    out.append(((c[0], f"{c[1]}.{name}"), m))
        return out

    # ------------------------------------------------------------------
    # draft loops
    def draft_loops(self) -> list[tuple[FuncKey, ClassKey | None, dict[str, Any], dict[str, Any]]]:
        out = []
        counts = self.config.draft_loop_counts
        for fkey, fn in self.functions():
            matching = set()
            for loop in fn["loops"]:
                it = loop["iter"]
                text = it.get("t", "")
                if any(re.search(rf"\b{re.escape(c)}\b", text) for c in counts) and "range" in text:
                    matching.add(loop["id"])
            for loop in fn["loops"]:
                if loop["id"] in matching and not matching.intersection(loop["parents"]):
                    out.append((fkey, self.defining_class(fkey), fn, loop))
        return out

    def explore_loop(self, fkey: FuncKey, ctx: ClassKey | None, fn: dict[str, Any], loop: dict[str, Any]) -> LoopResult:
        loop_hop = self.hop(fkey, loop["line"], f"draft loop: for … in {loop['iter']['t']}")
        result = LoopResult(fkey, loop, loop_hop)
        varying = self.taint(fn, set(loop["targets"]))
        frame = _Frame(fkey, fn, ctx, varying, {}, {}, None, "", {})
        seen: set[Any] = set()
        for ci, call in enumerate(fn["calls"]):
            if loop["id"] in call["loops"]:
                self._walk(frame, ci, (loop_hop,), 0, result, seen)
        return result

    def _kind(self, frame: "_Frame", src: dict[str, Any] | None, param: str) -> str:
        if src is None:
            return "absent"
        expr = src["expr"]
        if frame.varying.intersection(expr["n"]):
            return "varying"
        for n in expr["n"]:
            if n in frame.param_kinds:
                return frame.param_kinds[n]
        return "constant"

    def _walk(self, frame: "_Frame", ci: int, hops: tuple[Hop, ...], depth: int, result: LoopResult, seen: set[Any]) -> None:
        if depth > MAX_DEPTH:
            return
        call = frame.fn["calls"][ci]
        if frame.model_class is None and not self._worth_following(frame, call):
            return
        targets = self.resolve_call(frame.key, frame.fn, frame.ctx, call["func"], frame.callables, frame.model_class)
        for tgt in targets:
            callee = self.index.function(tgt.func)
            if callee is None:
                continue
            b = self.bind(call, frame.fn, tgt)
            # Dicts that arrived as parameters (run_pw_graph(model, inputs) -> model(**inputs)).
            for d in call["dstar"]:
                ch = d.get("ch")
                if ch and len(ch) == 1 and ch[0] in frame.dict_kinds:
                    for k, kind in frame.dict_kinds[ch[0]].items():
                        b.params.setdefault(k, {"expr": {"t": f"{ch[0]}[{k!r}]", "n": [f"<dict:{ch[0]}:{k}>"]}, "how": f"**{ch[0]}"})
            kinds: dict[str, str] = {}
            sub_frame_kinds: dict[str, str] = {}
            for cparam, src in b.params.items():
                n = src["expr"]["n"]
                dict_key = next((x for x in n if x.startswith("<dict:")), None)
                if dict_key:
                    _, dname, k = dict_key[1:-1].split(":", 2)
                    kinds[cparam] = frame.dict_kinds[dname][k]
                else:
                    kinds[cparam] = self._kind(frame, src, cparam)
                sub_frame_kinds[cparam] = kinds[cparam]
            if b.forwards_kwargs:
                for p in self.params:
                    if p in frame.param_kinds and p not in kinds:
                        kinds[p] = frame.param_kinds[p]
                        sub_frame_kinds[p] = kinds[p]
            call_hop = self.hop(frame.key, call["line"], f"calls {tgt.func[1]}")
            entering = tgt.model_class is not None and frame.model_class is None
            new_hops = hops + (call_hop,)
            if entering:
                method = tgt.func[1].rpartition(".")[2]
                for p in self.params:
                    result.entries.append(
                        LoopEntry(result.hop, call_hop, tgt.model_class, method, kinds.get(p, "absent"),
                                  self.accepts(tgt.func, p), new_hops, tgt.func)
                    )
            # Callables and dicts handed to the callee as arguments.
            callables: dict[str, list[tuple[ClassKey, ClassKey | None]]] = {}
            dict_kinds: dict[str, dict[str, str]] = {}
            for cparam, src in b.params.items():
                ch = src["expr"].get("ch")
                if ch and ch[0] == "self" and len(ch) >= 2:
                    objs = self._objects_of_chain(frame.ctx, ch[1:], frame.model_class)
                    if objs:
                        callables[cparam] = objs
                elif ch and len(ch) == 1 and ch[0] in frame.fn["dicts"]:
                    dk: dict[str, str] = {}
                    for k, expr in frame.fn["dicts"][ch[0]]:
                        if k != "**":
                            dk[k] = self._kind(frame, {"expr": expr}, k)
                    dict_kinds[cparam] = dk
                elif ch and len(ch) == 1 and ch[0] in frame.callables:
                    callables[cparam] = frame.callables[ch[0]]
                elif ch and len(ch) == 1 and ch[0] in frame.dict_kinds:
                    dict_kinds[cparam] = frame.dict_kinds[ch[0]]
            # Side channel into the callee's object.
            attr_kinds = dict(frame.attr_kinds) if tgt.ctx == frame.ctx else {}
            for s in frame.fn["attr_sets"]:
                t = s["target"]
                if len(t) >= 3 and t[0] == "self" and t[-1] in self.params:
                    objs = [o for o, _ in self._objects_of_chain(frame.ctx, t[1:-1], frame.model_class)]
                    if tgt.ctx in objs:
                        attr_kinds[t[-1]] = "varying" if frame.varying.intersection(s["value"]["n"]) else "constant"
            model_class = tgt.model_class or frame.model_class
            varying_src = {p for p, k in sub_frame_kinds.items() if k == "varying"}
            varying_src |= {"self." + p for p, k in attr_kinds.items() if k == "varying"}
            varying = self.taint(callee, varying_src)
            state = (tgt.func, tgt.ctx, model_class, frozenset(sub_frame_kinds.items()), frozenset(attr_kinds.items()),
                     frozenset((k, tuple(v)) for k, v in callables.items()), frozenset((k, frozenset(v.items())) for k, v in dict_kinds.items()))
            if state in seen:
                continue
            seen.add(state)
            entry_method = tgt.func[1].rpartition(".")[2] if entering else frame.entry_method
            sub = _Frame(tgt.func, callee, tgt.ctx, varying, sub_frame_kinds, callables, model_class, entry_method, attr_kinds, dict_kinds)
            if model_class is not None:
                self._record_selections(sub, new_hops, result)
            for cj in range(len(callee["calls"])):
                self._walk(sub, cj, new_hops, depth + 1, result, seen)

    def _worth_following(self, frame: "_Frame", call: dict[str, Any]) -> bool:
        """Before the draft model is entered, a plain function call matters only if it
        receives something that can carry the step: a varying value, a module, a dict."""
        chain = call["func"]
        if not chain:
            return False
        head = chain[0]
        if head in ("self", "super()") or head in frame.callables or head in frame.fn["assigns"]:
            return True
        for e in [*call["args"], *(v for _, v in call["kwargs"]), *call["dstar"], *call["star"]]:
            names = e.get("n", ())
            if frame.varying.intersection(names) or any(n.startswith("self.") for n in names):
                return True
            ch = e.get("ch")
            if ch and len(ch) == 1 and (ch[0] in frame.fn["dicts"] or ch[0] in frame.dict_kinds or ch[0] in frame.callables):
                return True
            if any(n in frame.param_kinds for n in names):
                return True
        return False

    def _record_selections(self, frame: "_Frame", hops: tuple[Hop, ...], result: LoopResult) -> None:
        entry_method = frame.entry_method
        for sub in frame.fn["subscripts"]:
            cont = sub["container"]
            if cont[0] != "self" or len(cont) < 2:
                continue
            names = set(sub["index"]["n"])
            kind = None
            if frame.varying.intersection(names):
                kind = "varying"
            else:
                for p in self.params:
                    src = self._sources_for(frame.fn, p) | ({"self." + p} if ("self." + p) in names else set())
                    if src and self.taint(frame.fn, src).intersection(names):
                        kind = frame.param_kinds.get(p) or frame.attr_kinds.get(p) or "absent"
                        if kind == "varying":
                            kind = "constant"  # varying would have matched above
                        break
            if kind is None:
                continue
            label = ".".join(cont)
            hop = self.hop(frame.key, sub["line"], f"selects {label}[{sub['index']['t']}]")
            assert frame.model_class is not None
            result.selections.append(LoopSelection(frame.model_class, kind, hops + (hop,), label, entry_method))

    def loop_results(self) -> list[LoopResult]:
        cached = self._loops_cache
        if cached is None:
            cached = [self.explore_loop(*args) for args in self.draft_loops()]
            cached = [r for r in cached if r.entries]
            self._loops_cache = cached
        return cached


    def entry_groups(self, result: LoopResult, param: str) -> list[dict[str, Any]]:
        """Entries of one loop grouped by the call site that enters the draft model.

        A group's kind is what that call site hands over for ``param`` to the callees
        that can take it; groups no callee can take the parameter in are left out.
        """
        groups: dict[tuple[str, int, str], dict[str, Any]] = {}
        for e in result.entries:
            if not e.accepts:
                continue
            if self.index.function(e.callee) is None:
                continue
            fn = self.index.function(e.callee)
            takes = param in self.param_names(fn) or self.selects(e.callee, e.model_class, param) is not None
            if not takes:
                continue
            k = (e.call_hop.path, e.call_hop.line, e.method)
            g = groups.setdefault(k, {"entry": e, "kinds": set(), "classes": set()})
            g["kinds"].add(e.kind)
            g["classes"].add(e.model_class)
        out = []
        for k in sorted(groups):
            g = groups[k]
            g["kind"] = "varying" if "varying" in g["kinds"] else ("constant" if "constant" in g["kinds"] else "absent")
            out.append(g)
        return out

    # ------------------------------------------------------------------
    # call graph
    def build_graph(self) -> nx.MultiDiGraph:
        g = nx.MultiDiGraph()
        for fkey, fn in self.relevant_functions():
            node = f"{fkey[0]}::{fkey[1]}"
            g.add_node(node, path=fkey[0], function=fkey[1], line=fn["line"])
            ctx = self.defining_class(fkey)
            for ci, call in enumerate(fn["calls"]):
                for tgt in self.targets(fkey, fn, ctx, ci):
                    b = self.bind(call, fn, tgt)
                    passing = {}
                    for p in self.params:
                        if p in b.params:
                            passing[p] = b.params[p]["how"]
                        elif b.forwards_kwargs:
                            passing[p] = "**kwargs"
                        elif p in b.unknown_keywords:
                            passing[p] = "rejected"
                        else:
                            passing[p] = "absent"
                    g.add_edge(node, f"{tgt.func[0]}::{tgt.func[1]}", line=call["line"], **{f"pass_{k}": v for k, v in passing.items()})
        self.graph = g
        return g


@dataclass
class _Frame:
    key: FuncKey
    fn: dict[str, Any]
    ctx: ClassKey | None
    varying: set[str]
    param_kinds: dict[str, str]
    callables: dict[str, list[tuple[ClassKey, ClassKey | None]]]
    model_class: ClassKey | None
    entry_method: str
    attr_kinds: dict[str, str]
    dict_kinds: dict[str, dict[str, str]] = field(default_factory=dict)

