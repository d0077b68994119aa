"""Dispatch: for a concrete configuration, which drafter a runner builds, which draft
model class it loads, which loop runs the draft steps, and — per draft step — which
MTP layer ``forward`` and the head select; plus the static facts rule MTP006 needs
(the gates that decide whether the per-step drafter is built, and the config-override
families that choose a draft architecture).

Dispatch points are found in the code under the names ``[tool.mtp-audit]`` gives
(``dispatch-factories``, ``config-overrides``; vLLM's names are only the defaults):
a factory is a function whose if/elif chain builds drafter objects (``return
XSpeculator(...)``, ``self.drafter = XProposer(...)``), a drafter being a class whose
methods hold a draft loop; an override function is one that writes ``override-field``
(``architectures``). The chains are run by the partial evaluator
(:mod:`auditor.analyses.partial_eval`), never imported or executed.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Callable, Iterable, Sequence

import msgspec

from ..facts.extract import (
    Chain,
    ModuleFacts,
    FunctionFact,
    LoopFact,
    PAttr,
    PBool,
    PCall,
    PCompare,
    PConst,
    PDict,
    PExpr,
    PIfExp,
    PName,
    PNot,
    PSeq,
    PSubscript,
    SAssign,
    SExpr,
    SIf,
    SRaise,
    SReturn,
    Stmt,
    chain_of,
)
from ..index.index import ClassKey, FuncKey, SymbolKind
from ..model.findings import ClassReachability, Finding, Hop, LoopReach, Meaning
from .base import Analyses, Provider
from .loops import FORWARD_METHODS, LoopProvider, LoopResult, LoopSelection, StepKind
from .partial_eval import (
    ClassRef,
    Decision,
    Evaluator,
    FuncRef,
    Instance,
    Obj,
    Path,
    Unknown,
    Value,
    World,
    describe,
)
from .reachability import ReachabilityProvider
from .registry import RegistryProvider
from .types import TypeProvider



@dataclass(frozen=True)
class ModelPath:
    """A draft loop that reaches a model class, and the layer selections it reaches there."""

    loop: LoopResult
    forward: tuple[LoopSelection, ...]  # selected in forward / __call__
    heads: tuple[LoopSelection, ...]  # selected in a head method (compute_logits, get_top_tokens)


class Verdict(str, Enum):
    THREADED = "threaded"
    CONSTANT = "constant — eagle-style by design"
    LOST = "lost"  # rendered "lost at <finding id>"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Setting:
    """The concrete configuration a plan is made for."""

    runner: str
    k: int
    method: str = "mtp"
    platform: str = "cuda"
    architecture: str | None = None  # a registered draft architecture (--arch)
    fields: tuple[tuple[str, Any], ...] = ()  # draft hf-config fields (--set)
    target_config: str | None = None  # the target's config.json text (--hf-config)


@dataclass(frozen=True)
class DecisionRow:
    path: str
    line: int
    function: str
    condition: str
    value: bool | None
    fields: tuple[str, ...]
    depends_on: str = ""
    taken: bool | None = None

    @classmethod
    def of(cls, d: Decision) -> "DecisionRow":
        return cls(d.path, d.line, d.function, d.condition, d.value, d.fields, d.depends_on, d.taken)


@dataclass(frozen=True)
class StepPlan:
    step: int
    forward_layer: int | None
    head_layer: int | None
    verdict: str
    why: str


@dataclass(frozen=True)
class Plan:
    setting: Setting
    architecture: str | None
    proposer: ClassKey | None
    proposer_site: Hop | None
    loop: Hop | None
    model_class: ClassKey | None
    num_mtp_layers: int | None
    layer_field: str | None
    steps: tuple[StepPlan, ...]
    decisions: tuple[DecisionRow, ...]
    alternatives: tuple[ClassKey, ...] = ()  # other drafters an unknown branch could build
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Route:
    """A drafter a runner's factory can build for an MTP method, whatever the draft
    config and K; ``conditions`` are the guards it depends on (value unknown), with the
    side the route takes."""

    runner: str
    drafter: ClassKey
    site: Hop
    conditions: tuple[DecisionRow, ...]

    def describe(self) -> str:
        return " and ".join(f"{d.condition} is {d.taken}" for d in self.conditions)


@dataclass(frozen=True)
class Pairing:
    """How a function of a drafter class is paired with MTP draft models by dispatch."""

    paired: bool  # some MTP route builds a drafter whose class hierarchy holds it
    condition: str  # "" when reached unconditionally (or not a drafter's code); else when it is reached


@dataclass(frozen=True)
class Gate:
    """A factory branch that builds ``proposer`` when ``predicate`` holds, and the
    draft hf-config field the predicate reads with a default."""

    factory: FuncKey
    line: int
    condition: str
    predicate: FuncKey
    field: str
    default: str
    read_line: int
    proposer: ClassKey


@dataclass(frozen=True)
class Family:
    """One branch of a config-override function that picks draft architectures."""

    override: FuncKey
    line: int
    condition: str
    architectures: tuple[str, ...]
    sets: frozenset[str]  # hf-config fields the branch writes
    literal_writes: tuple[tuple[str, Any], ...] = ()  # fields it sets to literals, and fields its guard compares to one


class _TreeWorld(World):
    def __init__(self, provider: "DispatchProvider") -> None:
        self.p = provider

    def resolve_name(self, path: str, name: str) -> Value:
        for sym in self.p.index.resolve(path, name):
            if sym.kind is SymbolKind.CLASS:
                return ClassRef((sym.path, sym.name))
            if sym.kind is SymbolKind.FUNCTION:
                return FuncRef((sym.path, sym.name))
        return _module_constant(self.p.index.facts.get(path), name)

    def method(self, cls: tuple[str, str], name: str) -> tuple[tuple[str, str], FunctionFact] | None:
        return self.p.index.method(cls, name)

    def function(self, key: tuple[str, str]) -> FunctionFact | None:
        return self.p.index.function(key)


class DispatchProvider(Provider):
    dependencies = (TypeProvider, RegistryProvider, LoopProvider, ReachabilityProvider)

    def __init__(self, analyses: Analyses) -> None:
        super().__init__(analyses)
        self.types = self.dep(TypeProvider)
        self.registry = self.dep(RegistryProvider)
        self.loops = self.dep(LoopProvider)
        self.reach = self.dep(ReachabilityProvider)
        self.roles = dict(self.config.dispatch_roles)
        self._located: dict[str, list[FuncKey]] | None = None
        self._factories: dict[str, list[FuncKey]] | None = None
        # Plugin runner classes that reach a factory of their own: (class, vLLM classes it
        # subclasses, its factories).
        self._plugin_runners: list[tuple[ClassKey, tuple[ClassKey, ...], tuple[FuncKey, ...]]] = []
        self._loop_memo: dict[tuple[ClassKey, FuncKey, int], LoopResult] = {}
        self._drafter: dict[ClassKey, bool] = {}
        self._per_step: dict[ClassKey, bool] = {}
        self._gates: list[Gate] | None = None
        self._routes: list[Route] | None = None
        self._pairing: dict[tuple[FuncKey, ClassKey | None], Pairing] = {}
        self._families: list[Family] | None = None

    # -- loading (before the index is frozen) --------------------------------------
    def prepare(self) -> None:
        """Load the dispatch code and explore the drafters the gates build (the engine
        calls this in its loading phase, after the draft loops were explored). Plans for
        other drafters must be asked before the index is frozen too (a query ``run_scan``
        takes): exploring a drafter's loops may parse more files."""
        for gate in self.count_gates():
            self.threads_per_step(gate.proposer)
        self.families()
        for rt in self.routes():  # the drafters MTP can run: their loops feed the reachability table
            self.drafter_loops(rt.drafter)

    def _locate_all(self) -> dict[str, list[FuncKey]]:
        if self._located is not None:
            return self._located
        names = sorted({n for ns in self.config.dispatch_factories.values() for n in ns} | set(self.config.config_overrides))
        found: dict[str, list[FuncKey]] = {n: [] for n in names}

        def scan_facts(path: str) -> None:
            facts = self.index.facts.get(path)
            if facts is None:
                return
            for n in names:
                cls, _, meth = n.rpartition(".")
                if not cls and meth in facts.functions:
                    found[n].append((path, meth))
                for cname, c in facts.classes.items():
                    if (cname == cls or (not cls)) and meth in c.methods:
                        found[n].append((path, f"{cname}.{meth}"))

        for path in sorted(self.index.facts):
            scan_facts(path)
        missing = [n for n in names if not found[n]]
        if missing and not self.index.frozen:
            needles: list[bytes] = []
            for n in missing:
                cls, _, meth = n.rpartition(".")
                needles += [f"class {cls}(".encode(), f"class {cls}:".encode()] if cls else [f"def {meth}(".encode()]
            files = [p for p in self.index.files if p not in self.index.facts]
            narrow = getattr(self.index.tree, "files_containing", None)
            if narrow is not None:
                hits = narrow(needles)
                files = [p for p in files if p in hits]
            for path in files:
                try:
                    data = self.index.tree.read(path)
                except OSError:
                    continue
                if any(nd in data for nd in needles):
                    self.index.load(path)
                    scan_facts(path)
        self._located = {n: sorted(set(v)) for n, v in found.items()}
        return self._located

    def factories(self) -> dict[str, list[FuncKey]]:
        """Per runner, the functions under the configured names that build drafters in
        their own branches (a function of the same name that only calls a factory is not one).
        Where a platform plugin's runner subclasses the class that holds a runner's factory
        and reaches a factory of its own, the plugin's factory decides for that runner
        (:meth:`plugin_factories`)."""
        if self._factories is not None:
            return self._factories
        located = self._locate_all()
        out = {
            r: [k for n in ns for k in located.get(n, []) if self._built_classes(k)]
            for r, ns in sorted(self.config.dispatch_factories.items())
        }
        for r, keys in self.plugin_factories(out).items():
            out[r] = keys
        self._factories = out
        return out

    # -- a platform plugin's own dispatch ---------------------------------------------
    def plugin_factories(self, host: dict[str, list[FuncKey]]) -> dict[str, list[FuncKey]]:
        """Per runner, the factories of platform plugins that replace vLLM's.

        The rule (generic; no plugin is named): a runner's configured factory is a method
        of a class (``GPUModelRunner.__init__``: the runner class). A class in a plugin
        root whose MRO holds that class is the plugin's runner for it; the functions its
        own (plugin-defined) methods call — through ``self.m()`` and module-level names,
        a few calls deep — that build drafters in their own branches (the criterion vLLM's
        factories are kept by) are the plugin's factories for that runner. Runners whose
        factory is a plain function (V2's ``init_speculator``) keep vLLM's."""
        roots = getattr(self.index.tree, "plugin_roots", None)
        if not roots or getattr(self.index.tree, "root_of", None) is None:
            return {}
        in_plugin = self._in_plugin
        out: dict[str, list[FuncKey]] = {}
        for runner, keys in sorted(host.items()):
            owners = sorted({c for k in keys if not in_plugin(k[0]) for c in [self.types.defining_class(k)] if c is not None})
            if not owners:
                continue
            found: list[FuncKey] = []
            for sub in self._plugin_subclasses(roots, owners, in_plugin):
                reached = self._reached_factories(sub, in_plugin)
                if reached:
                    self._plugin_runners.append((sub, tuple(owners), tuple(reached)))
                found += reached
            if found:
                out[runner] = sorted(set(found))
        return out

    def _in_plugin(self, path: str) -> bool:
        root_of = getattr(self.index.tree, "root_of", None)
        return bool(root_of is not None and root_of(path).plugin)

    def _plugin_entries(self, drafter: ClassKey) -> list[str]:
        """The draft entry methods of a drafter a plugin's factory builds: where vLLM's
        runner class calls a configured entry (``self.drafter.propose(...)`` in some
        method M), the plugin runner's own M calls the drafter through the same attribute;
        the methods it calls there that the plugin defines for this drafter (``_propose``)
        are the entries — the plugin's own draft loop, not vLLM's."""
        self.factories()
        entries = set(self.config.proposer_entries)
        out: list[str] = []
        for runner_cls, owners, factories in self._plugin_runners:
            if not any(drafter in self._built_classes(f) for f in factories):
                continue
            for owner in owners:
                for name, fn in sorted(self.index.methods(owner).items()):
                    attrs = {c.func[1] for c in fn.calls if c.func and len(c.func) == 3 and c.func[0] == "self"
                             and c.func[2] in entries}
                    mine = self.index.method(runner_cls, name)
                    if not attrs or mine is None or not self._in_plugin(mine[0][0]):
                        continue
                    for c in mine[1].calls:
                        if c.func and len(c.func) == 3 and c.func[0] == "self" and c.func[1] in attrs:
                            hit = self.index.method(drafter, c.func[2])
                            if hit is not None and self._in_plugin(hit[0][0]):
                                out.append(c.func[2])
        return list(dict.fromkeys(out))

    def _plugin_subclasses(self, roots: Sequence[Any], owners: list[ClassKey], in_plugin: Callable[[str], bool]) -> list[ClassKey]:
        names = sorted({o[1] for o in owners})
        needles = [n.encode() for n in names]
        subs: list[ClassKey] = []
        for root in roots:
            for path in root.tree.python_files():
                facts = self.index.facts.get(path)
                if facts is None:
                    if self.index.frozen:
                        continue
                    try:
                        data = self.index.tree.read(path)
                    except OSError:
                        continue
                    if not any(nd in data for nd in needles):
                        continue
                    facts = self.index.load(path)
                    if facts is None:
                        continue
                for cname in sorted(facts.classes):
                    key = (path, cname)
                    if any(o in self.index.mro(key)[1:] for o in owners):
                        subs.append(key)
        return sorted(set(subs))

    def _reached_factories(self, runner_cls: ClassKey, in_plugin: Callable[[str], bool], depth: int = 4) -> list[FuncKey]:
        """Plugin functions that build drafters in their own branches, called from the
        plugin runner's own methods within ``depth`` calls."""
        todo: list[tuple[FuncKey, int]] = []
        for c in self.index.mro(runner_cls):
            if in_plugin(c[0]):
                todo += [((c[0], f"{c[1]}.{m}"), 0) for m in sorted(self.index.methods(c))]
        seen: set[FuncKey] = set()
        out: list[FuncKey] = []
        while todo:
            fkey, d = todo.pop(0)
            if fkey in seen:
                continue
            seen.add(fkey)
            fn = self.index.function(fkey)
            if fn is None:
                continue
            if in_plugin(fkey[0]) and self._built_classes(fkey):
                out.append(fkey)
                continue
            if d >= depth:
                self.limits.hit("plugin-factory-depth")
                continue
            for call in fn.calls:
                ch = call.func
                if not ch:
                    continue
                if len(ch) == 2 and ch[0] == "self":
                    hit = self.index.method(runner_cls, ch[1])
                    if hit is not None and in_plugin(hit[0][0]):
                        todo.append(((hit[0][0], f"{hit[0][1]}.{ch[1]}"), d + 1))
                elif len(ch) == 1:
                    for sym in self.index.resolve(fkey[0], ch[0]):
                        if sym.kind is SymbolKind.FUNCTION and in_plugin(sym.path):
                            todo.append(((sym.path, sym.name), d + 1))
        return out

    def overrides(self) -> list[FuncKey]:
        located = self._locate_all()
        out = []
        for n in self.config.config_overrides:
            for k in located.get(n, []):
                fn = self.index.function(k)
                if fn is not None and self._writes_override_field(fn.body):
                    out.append(k)
        return out

    def spec_config_class(self) -> ClassKey | None:
        """The class holding the override function: its methods are the predicates."""
        for k in self.overrides():
            cls = self.types.defining_class(k)
            if cls is not None:
                return cls
        return None

    # -- drafters ----------------------------------------------------------------
    def is_drafter(self, cls: ClassKey) -> bool:
        found = self._drafter.get(cls)
        if found is None:
            found = any(self.loops.loops_in(m) for c in self.index.mro(cls) for m in self.index.methods(c).values())
            self._drafter[cls] = found
        return found

    def _entry_methods(self, cls: ClassKey) -> list[tuple[FuncKey, FunctionFact]]:
        """Methods reachable through ``self.m()`` calls from the drafter's entry methods."""
        todo = self._plugin_entries(cls) or list(self.config.proposer_entries)
        bound = self._bound_methods(cls)
        seen: set[str] = set()
        out: list[tuple[FuncKey, FunctionFact]] = []
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.add(name)
            found = self.index.method(cls, name)
            if found is None:
                continue
            owner, fn = found
            out.append(((owner[0], f"{owner[1]}.{name}"), fn))
            for call in fn.calls:
                if call.func and len(call.func) == 2 and call.func[0] == "self":
                    todo.append(call.func[1])
            # A bound method kept in an attribute and called through it later
            # (``self._runnable = self._run_draft`` ... ``partial(self._runnable, ...)()``).
            for read in fn.live:
                if read.startswith("self."):
                    todo += bound.get(read[5:], [])
        return out

    def _bound_methods(self, cls: ClassKey) -> dict[str, list[str]]:
        """``self.attr = self.m`` in the class hierarchy's methods: attr -> [m]."""
        out: dict[str, list[str]] = {}
        for c in self.index.mro(cls):
            for fn in self.index.methods(c).values():
                for a in fn.attr_assigns:
                    ch = a.value.chain
                    if (len(a.target) == 2 and a.target[0] == "self" and ch and len(ch) == 2 and ch[0] == "self"
                            and self.index.method(cls, ch[1]) is not None):
                        out.setdefault(a.target[1], []).append(ch[1])
        return out

    def model_path(self, proposer: ClassKey, model: ClassKey) -> ModelPath | None:
        """The first draft loop of ``proposer`` that reaches ``model`` (the one a plan reports),
        with the selections it reaches in the model's forward and in its heads."""
        for r in self.drafter_loops(proposer):
            if any(e.model_class == model for e in r.entries):
                sels = [s for s in r.selections if s.model_class == model]
                return ModelPath(
                    r,
                    tuple(s for s in sels if s.method in FORWARD_METHODS),
                    tuple(s for s in sels if s.method in self.config.head_methods),
                )
        return None

    def drafter_loops(self, cls: ClassKey) -> list[LoopResult]:
        """The draft loops an instance of ``cls`` runs, explored with ``self`` of that class."""
        methods = self._entry_methods(cls)
        if not any(self.loops.loops_in(fn) for _, fn in methods):
            methods = []
            for c in self.index.mro(cls):
                for name, fn in sorted(self.index.methods(c).items()):
                    methods.append(((c[0], f"{c[1]}.{name}"), fn))
        out = []
        for fkey, fn in sorted(methods, key=lambda m: (m[0], m[1].line)):
            for loop in self.loops.loops_in(fn):
                memo_key = (cls, fkey, loop.id)
                res = self._loop_memo.get(memo_key)
                if res is None and self.types.defining_class(fkey) == cls:
                    # Explored already by the loop provider, with the same ``self``.
                    res = next((r for r in self.loops.loop_results() if r.func == fkey and r.loop.id == loop.id), None)
                if res is None:
                    res = self.loops.explore_loop(fkey, fn, loop, ctx=cls)
                self._loop_memo[memo_key] = res
                out.append(res)
        return out

    def threads_per_step(self, cls: ClassKey) -> bool:
        """A loop of the drafter hands a threaded parameter that varies per step to a draft model."""
        found = self._per_step.get(cls)
        if found is None:
            found = any(e.kind is StepKind.VARYING for r in self.drafter_loops(cls) for e in r.entries)
            self._per_step[cls] = found
        return found

    def selects_per_step(self, drafter: ClassKey, model: ClassKey) -> bool:
        """A loop of the drafter reaches a layer selection of ``model`` through ``forward``
        (the model picks a layer by the step, so the per-step drafter matters to it)."""
        return any(s.model_class == model and s.method in FORWARD_METHODS
                   for r in self.drafter_loops(drafter) for s in r.selections)

    def _resolve_class(self, path: str, func: PExpr) -> ClassKey | None:
        ch = _chain(func)
        if ch is None:
            return None
        for sym in self.index.resolve_chain(path, ch):
            if sym.kind is SymbolKind.CLASS:
                return (sym.path, sym.name)
        return None

    def _built_classes(self, fkey: FuncKey) -> list[ClassKey]:
        fn = self.index.function(fkey)
        out: list[ClassKey] = []
        for stmt in _walk(fn.body if fn else ()):
            value = stmt.value if isinstance(stmt, (SReturn, SAssign)) else None
            if isinstance(value, PCall):
                cls = self._resolve_class(fkey[0], value.func)
                if cls is not None and self.is_drafter(cls):
                    out.append(cls)
        return list(dict.fromkeys(out))

    # -- static facts for MTP006 ---------------------------------------------------
    def gates(self) -> list[Gate]:
        """Factory branches guarded by a predicate method of the speculative config that
        reads a draft hf-config field with a default."""
        if self._gates is not None:
            return self._gates
        out: list[Gate] = []
        spec_cls = self.spec_config_class()
        for _runner, keys in self.factories().items():
            for fkey in keys:
                fn = self.index.function(fkey)
                if fn is None or spec_cls is None:
                    continue
                for s in _walk(fn.body):
                    if not isinstance(s, SIf):
                        continue
                    built = [c for c in self._direct_builds(fkey[0], s.body) if self.is_drafter(c)]
                    if not built:
                        continue
                    for call in _calls(s.test):
                        if not isinstance(call.func, PAttr) or not self._is_role(call.func.value, "speculative"):
                            continue
                        found = self.index.method(spec_cls, call.func.attr)
                        if found is None:
                            continue
                        owner, pred = found
                        pkey = (owner[0], f"{owner[1]}.{call.func.attr}")
                        for fld, default, line in self._defaulted_reads(pred):
                            for cls in built:
                                out.append(Gate(fkey, s.line, s.text, pkey, fld, default, line, cls))
        self._gates = sorted(set(out), key=lambda g: (g.factory, g.line, g.field, g.proposer))
        return self._gates

    def count_gates(self) -> list[Gate]:
        """Gates whose field sizes the MTP layers of some draft model (a layer count, not
        e.g. ``model_type``)."""
        counts = {f for c in self.registry.model_classes() for f in self.reach.layer_count_fields(c)}
        return [g for g in self.gates() if g.field in counts]

    def _direct_builds(self, path: str, body: tuple[Stmt, ...]) -> list[ClassKey]:
        out = []
        for s in body:
            value = s.value if isinstance(s, (SReturn, SAssign)) else None
            if isinstance(value, PCall):
                cls = self._resolve_class(path, value.func)
                if cls is not None:
                    out.append(cls)
        return out

    def _is_role(self, e: PExpr, role: str) -> bool:
        name = self.roles.get(role)
        return (isinstance(e, PName) and e.id == name) or (isinstance(e, PAttr) and e.attr == name)

    def _defaulted_reads(self, fn: FunctionFact) -> list[tuple[str, str, int]]:
        """``getattr(<...>.hf_config, "F", default)`` in a predicate body: (F, default, line)."""
        out = []
        for s in _walk(fn.body):
            for e in _stmt_exprs(s):
                for call in _calls(e):
                    if (isinstance(call.func, PName) and call.func.id == "getattr" and len(call.args) == 3
                            and isinstance(call.args[1], PConst) and isinstance(call.args[1].value, str)
                            and self._is_role(call.args[0], "hf")):
                        d = call.args[2]
                        out.append((call.args[1].value, repr(d.value) if isinstance(d, PConst) else "…", s.line))
        return out

    def families(self) -> list[Family]:
        if self._families is not None:
            return self._families
        out: list[Family] = []
        for okey in self.overrides():
            fn = self.index.function(okey)
            if fn is None:
                continue
            for s in _walk(fn.body):
                if isinstance(s, SIf):
                    archs, sets = self._family_writes(s.body)
                    if archs:
                        lits = self._guard_literals(s.test) + self._literal_writes(s.body)
                        out.append(Family(okey, s.line, s.text, tuple(archs), frozenset(sets), tuple(lits)))
        self._families = out
        return out

    def _family_writes(self, body: tuple[Stmt, ...]) -> tuple[list[str], set[str]]:
        archs: list[str] = []
        sets: set[str] = set()
        fields = set(self.config.override_field)
        for s in _walk(body):
            if isinstance(s, SExpr) and isinstance(s.value, PCall) and isinstance(s.value.func, PAttr) \
                    and s.value.func.attr == "update" and s.value.args and isinstance(s.value.args[0], PDict):
                d = s.value.args[0]
                for k, v in zip(d.keys, d.values):
                    if isinstance(k, PConst) and isinstance(k.value, str):
                        sets.add(k.value)
                        if k.value in fields:
                            archs.extend(_strings(v))
            elif isinstance(s, SAssign):
                for t in s.targets:
                    if isinstance(t, PAttr):
                        sets.add(t.attr)
                    elif isinstance(t, PSubscript) and isinstance(t.index, PConst) and isinstance(t.index.value, str):
                        sets.add(t.index.value)
                        if t.index.value in fields:
                            archs.extend(_strings(s.value))
                if isinstance(s.value, PDict):
                    for k, v in zip(s.value.keys, s.value.values):
                        if isinstance(k, PConst) and isinstance(k.value, str):
                            sets.add(k.value)
                            if k.value in fields:
                                archs.extend(_strings(v))
        return list(dict.fromkeys(archs)), sets

    def _guard_literals(self, test: PExpr) -> list[tuple[str, Any]]:
        """``hf_config.model_type == "x"`` in the family's guard: the draft config has it."""
        out: list[tuple[str, Any]] = []
        for sub in _subexprs(test):
            if (isinstance(sub, PCompare) and sub.ops == ("==",) and isinstance(sub.left, PAttr)
                    and self._is_role(sub.left.value, "hf") and isinstance(sub.comparators[0], PConst)):
                out.append((sub.left.attr, sub.comparators[0].value))
        return out if not isinstance(test, PBool) or test.op == "and" else []

    def _literal_writes(self, body: tuple[Stmt, ...]) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for s in body:  # this branch's own statements, not nested ones
            if isinstance(s, SAssign) and isinstance(s.value, PConst):
                out += [(t.attr, s.value.value) for t in s.targets if isinstance(t, PAttr) and self._is_role(t.value, "hf")]
            elif isinstance(s, SExpr) and isinstance(s.value, PCall) and isinstance(s.value.func, PAttr) \
                    and s.value.func.attr == "update" and self._is_role(s.value.func.value, "hf") \
                    and s.value.args and isinstance(s.value.args[0], PDict):
                d = s.value.args[0]
                out += [(k.value, v.value) for k, v in zip(d.keys, d.values)
                        if isinstance(k, PConst) and isinstance(k.value, str) and isinstance(v, PConst)
                        and k.value not in self.config.override_field]
        return out

    def family_fields(self, arch: str) -> dict[str, Any]:
        """What the override code sets, as literals, for the family that picks ``arch``."""
        out: dict[str, Any] = {}
        for fam in self.families():
            if arch in fam.architectures and len(fam.architectures) == 1:
                out.update(dict(fam.literal_writes))
        return out

    def _writes_override_field(self, body: tuple[Stmt, ...]) -> bool:
        fields = set(self.config.override_field)
        for s in _walk(body):
            for e in _stmt_exprs(s):
                for sub in _subexprs(e):
                    if isinstance(sub, PDict) and any(isinstance(k, PConst) and k.value in fields for k in sub.keys):
                        return True
            if isinstance(s, SAssign) and any(
                (isinstance(t, PAttr) and t.attr in fields)
                or (isinstance(t, PSubscript) and isinstance(t.index, PConst) and t.index.value in fields)
                for t in s.targets
            ):
                return True
        return False

    # -- registry --------------------------------------------------------------------
    def architectures(self) -> list[str]:
        return sorted({a for _, archs in self.registry.registry() for a in archs})

    def mtp_architectures(self) -> list[tuple[str, ClassKey]]:
        """Every registered architecture whose class takes part in step threading, with
        its class (one per architecture; platform copies share their architecture)."""
        mtp = set(self.registry.model_classes())
        out: dict[str, ClassKey] = {}
        for cls, archs in self.registry.registry():
            if cls in mtp:
                for a in archs:
                    out.setdefault(a, cls)
        return sorted(out.items())

    def layer_count_field(self, arch: str, platform: str) -> str | None:
        model = self.model_class_for(arch, platform)
        fields = self.reach.layer_count_fields(model) if model else []
        return fields[0] if fields else None

    def classes_for(self, arch: str) -> list[ClassKey]:
        return [c for c, archs in self.registry.registry() if arch in archs]

    def model_class_for(self, arch: str, platform: str) -> ClassKey | None:
        cands = sorted(self.classes_for(arch))
        if not cands:
            return None
        dirs = set(self.config.platform_dirs.values())
        want = self.config.platform_dirs.get(platform, platform)

        def segments(c: ClassKey) -> set[str]:
            return set(c[0].split("/")[:-1])

        exact = [c for c in cands if want in segments(c)]
        if exact:
            return exact[0]
        neutral = [c for c in cands if not (segments(c) & dirs)]
        return (neutral or cands)[0]

    # -- one concrete configuration ---------------------------------------------------
    def draft_config(self, setting: Setting) -> tuple[Obj | None, list[Decision], list[str]]:
        """The draft's hf config: given (``--arch``/``--set``) or the target's config run
        through the override code (``--hf-config``)."""
        notes: list[str] = []
        hf_label = self.roles["hf"]
        field_name = self.config.override_field[0]
        if setting.target_config is None:
            fields: dict[str, Value] = {}
            if setting.architecture:
                # What the override code writes for this family (literals), then --set.
                fields.update(self.family_fields(setting.architecture))
                fields[field_name] = [setting.architecture]
            fields.update(dict(setting.fields))
            return Obj(hf_label, fields, closed=True), [], notes
        data = json.loads(setting.target_config)
        hf = _to_obj(hf_label, data)
        for k, v in setting.fields:
            hf.fields[k] = v
        decisions: list[Decision] = []
        ev = Evaluator(_TreeWorld(self), self.limits.hit)
        for okey in self.overrides():
            fn = self.index.function(okey)
            if fn is None:
                continue
            params = [p.name for p in fn.params if p.name not in ("self", "cls")]
            arg = hf_label if hf_label in params else (params[0] if params else hf_label)
            paths = ev.run(okey, fn, {arg: hf})
            if len(paths) > 1:
                notes.append(f"{okey[1]} has {len(paths)} possible outcomes; the first is used")
            p = paths[0]
            decisions += [d for d in p.decisions if d.value is not False]
            if isinstance(p.returned, Obj):
                hf = p.returned
            if p.raised:
                notes.append(f"{okey[1]} raises for this config: {p.raised}")
        return hf, decisions, notes

    def _world(self, setting: Setting, hf: Obj) -> dict[str, Obj]:
        r = self.roles
        draft = Obj(r["draft"], {r["hf"]: hf})
        field_name = self.config.override_field[0]
        if field_name in hf.fields:
            draft.fields[field_name] = hf.fields[field_name]
        spec = Obj(r["speculative"], {r["method"]: setting.method, r["k"]: setting.k, r["draft"]: draft},
                   cls=self.spec_config_class())
        root = Obj(r["root"], roles={r["speculative"]: spec})
        return {"speculative": spec, "root": root}

    def dispatch(self, setting: Setting) -> tuple[list[tuple[ClassKey, Hop, list[Decision]]], list[str]]:
        """Drafters the runner's factory can build for this configuration, each with the
        branches that lead to it (more than one only when a guard is unknown)."""
        hf, _, notes = self.draft_config(setting)
        assert hf is not None
        world = self._world(setting, hf)
        factories = self.factories().get(setting.runner, [])
        if not factories:
            return [], notes + [f"no dispatch factory for runner {setting.runner} found in this tree"]
        out: list[tuple[ClassKey, Hop, list[Decision]]] = []
        for fkey in factories:
            out += self._run_factory(fkey, world)
        return out, notes

    def _run_factory(self, fkey: FuncKey, world: dict[str, Obj]) -> list[tuple[ClassKey, Hop, list[Decision]]]:
        fn = self.index.function(fkey)
        if fn is None:
            return []
        ev = Evaluator(_TreeWorld(self), self.limits.hit)
        args: dict[str, Value] = {}
        for p in fn.params:
            if p.name == "self":
                owner = self.types.defining_class(fkey)
                args["self"] = Obj("self", cls=owner, roles={self.roles["root"]: world["root"],
                                                              self.roles["speculative"]: world["speculative"]})
            elif p.name == self.roles["root"]:
                args[p.name] = world["root"]
            elif p.name == self.roles["speculative"]:
                args[p.name] = world["speculative"]
            elif p.name == self.roles["method"]:
                # A factory handed the method itself (``get_x(method, vllm_config, ...)``).
                args[p.name] = world["speculative"].fields.get(self.roles["method"], Unknown(p.name))
        relevant = self._dispatch_ifs(fkey, fn.body)
        # Only the dispatch chain and local names are run: the factory's other statements
        # (a runner's __init__ builds much else) cannot change which drafter it builds.
        pruned = msgspec.structs.replace(fn, body=self._prune(fkey, fn.body, relevant))
        out: list[tuple[ClassKey, Hop, list[Decision]]] = []
        for path in ev.run(fkey, pruned, args):
            built = self._drafter_of(path)
            if built is not None:
                cls, line = built
                chain = [d for d in path.decisions if d.line in relevant]
                out.append((cls, Hop(fkey[0], line, fkey[1], f"builds {cls[1]}"), chain))
        return out

    def _prune(self, fkey: FuncKey, body: tuple[Stmt, ...], relevant: set[int]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in body:
            if isinstance(s, SIf):
                if s.line in relevant:
                    out.append(msgspec.structs.replace(s, body=self._prune(fkey, s.body, relevant),
                                                       orelse=self._prune(fkey, s.orelse, relevant)))
            elif isinstance(s, SAssign) and all(isinstance(t, PName) for t in s.targets):
                out.append(s)
            elif isinstance(s, (SReturn, SRaise)):
                out.append(s)
            elif isinstance(s, SAssign) and isinstance(s.value, PCall):
                cls = self._resolve_class(fkey[0], s.value.func)
                if cls is not None and self.is_drafter(cls):
                    out.append(s)
        return tuple(out)

    def _dispatch_ifs(self, fkey: FuncKey, body: tuple[Stmt, ...]) -> set[int]:
        """Lines of the ``if`` statements that enclose or precede (elif) a drafter build:
        the decision chain; the factory's other branches are left out."""
        lines: set[int] = set()

        def visit(stmts: tuple[Stmt, ...]) -> bool:
            found = False
            for s in stmts:
                if isinstance(s, SIf):
                    inner = visit(s.body) | visit(s.orelse)
                    if inner:
                        lines.add(s.line)
                        found = True
                elif isinstance(s, (SReturn, SAssign)) and isinstance(s.value, PCall):
                    cls = self._resolve_class(fkey[0], s.value.func)
                    if cls is not None and self.is_drafter(cls):
                        found = True
            return found

        visit(body)
        return lines

    def _drafter_of(self, path: Path) -> tuple[ClassKey, int] | None:
        found: tuple[ClassKey, int] | None = None
        for _target, value, line in path.built:
            if isinstance(value, Instance) and self.is_drafter(value.cls):
                found = (value.cls, line)
        if isinstance(path.returned, Instance) and self.is_drafter(path.returned.cls):
            found = (path.returned.cls, path.returned.line)
        return found

    # -- precision for the scan: which drafters MTP can run ----------------------------
    def routes(self) -> list[Route]:
        """Every drafter the factories can build for an MTP method (``mtp-methods``), over
        any draft config and K (both unknown: their guards fork)."""
        if self._routes is not None:
            return self._routes
        out: list[Route] = []
        r = self.roles
        for method in self.config.mtp_methods:
            hf = Obj(r["hf"])  # open: every field unknown
            draft = Obj(r["draft"], {r["hf"]: hf})
            spec = Obj(r["speculative"], {r["method"]: method, r["draft"]: draft}, cls=self.spec_config_class())
            root = Obj(r["root"], roles={r["speculative"]: spec})
            for runner, factories in self.factories().items():
                for fkey in factories:
                    for cls, site, chain in self._run_factory(fkey, {"root": root, "speculative": spec}):
                        conds = tuple(DecisionRow.of(d) for d in chain if d.value is None and d.fields)
                        out.append(Route(runner, cls, site, conds))
        self._routes = list(dict.fromkeys(out))
        return self._routes

    def pairing(self, fkey: FuncKey) -> Pairing:
        """Whether function ``fkey`` (a method of a drafter class) runs in a drafter built
        for MTP, and when: a route runs it when its drafter's class hierarchy resolves the
        method to this very function (a subclass may override it).

        Trees without dispatch factories (fixtures, vendored subsets) pair everything."""
        cls = self.types.defining_class(fkey)
        key = (fkey, cls)
        found = self._pairing.get(key)
        if found is not None:
            return found
        routes = self.routes()
        name = fkey[1].rpartition(".")[2]

        def runs(drafter: ClassKey) -> bool:
            hit = self.index.method(drafter, name)
            return hit is not None and hit[0] == cls

        if not routes or cls is None:
            found = Pairing(True, "")
        else:
            mine = [rt for rt in routes if runs(rt.drafter)]
            runners = {rt.runner for rt in routes}
            everywhere = any(all(runs(rt.drafter) for rt in routes if rt.runner == r) for r in runners)
            built = {c for keys in self.factories().values() for f in keys for c in self._built_classes(f)}
            if not mine:
                # Built by a factory, never for MTP: not paired. Unknown to every factory
                # (a runner whose dispatch is not configured): paired, as without dispatch.
                found = Pairing(not any(runs(b) for b in built), "")
            elif everywhere or any(not rt.conditions for rt in mine):
                # Every drafter one runner can build for MTP runs this code: no gate decides.
                found = Pairing(True, "")
            else:
                alts = [f"{rt.describe()} ({rt.runner.upper()} builds {rt.drafter[1]})" for rt in mine[:2]]
                more = f", or {len(mine) - 2} more" if len(mine) > 2 else ""
                found = Pairing(True, " or ".join(alts) + more)
        self._pairing[key] = found
        return found

    def refine_reachability(self, rows: list[ClassReachability]) -> list[ClassReachability]:
        """The reachability table with dispatch: loops of drafters no MTP dispatch builds
        are left out, loops behind a gate say when they run, and the loops MTP drafters
        run with ``self`` of a subclass (the V2 default MTP speculator) are added."""
        if not self.routes():
            return rows
        by_label = {f"{lr.func[0]}:{lr.loop.line} {lr.func[1]}": lr for lr in self.loops.loop_results()}
        known = {(lr.func, lr.loop.id) for lr in self.loops.loop_results()}
        extra: dict[tuple[FuncKey, int], list[tuple[Route, LoopResult]]] = {}
        for rt, res in self.dispatched_loops():
            if (res.func, res.loop.id) not in known:
                extra.setdefault((res.func, res.loop.id), []).append((rt, res))
        out: list[ClassReachability] = []
        for row in rows:
            cls = (row.model_class.path, row.model_class.name)
            loops: list[LoopReach] = []
            for reach in row.loops:
                lr = by_label.get(reach.loop)
                pairing = self.pairing(lr.func) if lr is not None else Pairing(True, "")
                if not pairing.paired:
                    continue
                if pairing.condition:
                    reach = replace(reach, detail=f"{reach.detail}; reached only when {pairing.condition}")
                loops.append(reach)
            for (fkey, _lid), group in sorted(extra.items()):
                drafters = sorted({rt.drafter[1] for rt, _ in group})
                label = f"{fkey[0]}:{group[0][1].loop.line} {fkey[1]} (as {', '.join(drafters)})"
                added = self.reach.loop_reach(group[0][1], cls, label)
                if added is None:
                    continue
                reach = added
                conds = [rt for rt, _ in group]
                if all(rt.conditions for rt in conds):
                    when = " or ".join(f"{rt.describe()} ({rt.runner.upper()} builds {rt.drafter[1]})" for rt in conds[:2])
                    reach = replace(reach, detail=f"{reach.detail}; reached only when {when}")
                loops.append(reach)
            out.append(replace(row, loops=loops))
        return out

    def dispatched_loops(self) -> list[tuple[Route, LoopResult]]:
        """Draft loops of MTP drafters run with ``self`` of the drafter where the loop's own
        class is a base (the V2 MTP speculator runs its base class's loop): loops the
        loop provider, exploring each loop with its defining class, does not pair with
        draft models. Only drafters the index has already explored are used once frozen."""
        out: list[tuple[Route, LoopResult]] = []
        for rt in self.routes():
            if self.index.frozen and not any(k[0] == rt.drafter for k in self._loop_memo):
                continue
            for res in self.drafter_loops(rt.drafter):
                if self.types.defining_class(res.func) != rt.drafter and res.entries:
                    out.append((rt, res))
        return out

    def plan(self, setting: Setting, findings: Sequence[Finding] = ()) -> Plan:
        hf, override_decisions, notes = self.draft_config(setting)
        assert hf is not None
        field_name = self.config.override_field[0]
        archs = hf.fields.get(field_name)
        arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else setting.architecture
        options, more = self.dispatch(setting)
        notes += more
        decisions = [DecisionRow.of(d) for d in override_decisions]
        model = self.model_class_for(arch, setting.platform) if arch else None
        if arch is None:
            notes.append("the draft architecture is unknown for this config")
        if not options:
            return Plan(setting, arch, None, None, None, model, None, None, (), tuple(decisions), (), tuple(notes))
        proposer, site, chain = options[0]
        decisions += [DecisionRow.of(d) for d in chain]
        alternatives = tuple(dict.fromkeys(c for c, _, _ in options[1:] if c != proposer))
        n, layer_field = self._layer_count(model, hf) if model else (None, None)
        if self.index.frozen and not any(k[0] == proposer for k in self._loop_memo) and self._entry_methods(proposer):
            notes.append("planned after the index was frozen: files the drafter's loops need may be missing "
                         "(ask for plans in a query run_scan takes)")
        loop, steps = self._steps(setting, proposer, model, n, findings)
        if alternatives:
            deps = sorted({d.depends_on for d in chain if d.value is None and d.depends_on})
            why = f"the drafter depends on {', '.join(deps) or 'an unknown branch'}: {proposer[1]} or {', '.join(c[1] for c in alternatives)}"
            steps = tuple(StepPlan(s.step, s.forward_layer, s.head_layer, Verdict.UNKNOWN.value, why) for s in steps)
        return Plan(setting, arch, proposer, site, loop, model, n, layer_field, steps, tuple(decisions), alternatives,
                    tuple(notes))

    def _layer_count(self, model: ClassKey, hf: Obj) -> tuple[int | None, str | None]:
        # The field on the draft config, else on a config nested in it (a multimodal
        # checkpoint keeps the text model's fields one level down).
        nested = [v for _, v in sorted(hf.fields.items()) if isinstance(v, Obj)]
        for f in self.reach.layer_count_fields(model):
            for holder in [hf, *nested]:
                v = holder.fields.get(f)
                if isinstance(v, int) and not isinstance(v, bool):
                    return v, f if holder is hf else f"{holder.label}.{f}"
        fields = self.reach.layer_count_fields(model)
        return None, (fields[0] if fields else None)

    def _steps(self, setting: Setting, proposer: ClassKey, model: ClassKey | None, n: int | None,
               findings: Sequence[Finding]) -> tuple[Hop | None, tuple[StepPlan, ...]]:
        def all_steps(verdict: Verdict, why: str) -> tuple[StepPlan, ...]:
            return tuple(StepPlan(i, None, None, verdict.value, why) for i in range(setting.k))

        if model is None:
            return None, all_steps(Verdict.UNKNOWN, "no registered draft model class for this architecture")
        path = self.model_path(proposer, model)
        if path is None:
            return None, all_steps(Verdict.UNKNOWN, f"no draft loop of {proposer[1]} reaches {model[1]}")
        r, fwd, heads = path.loop, list(path.forward), list(path.heads)
        param = self.params[0]
        entries = [e for e in r.entries if e.model_class == model and e.param == param]
        fkind = _kind(fwd)
        hkind = _kind(heads)
        entry_varies = any(e.kind is StepKind.VARYING for e in entries if e.method in FORWARD_METHODS)
        loop_label = f"{r.func[1]} ({r.func[0]}:{r.loop.line})"

        def layer(kind: StepKind | None, i: int) -> int | None:
            if kind is None:
                return None
            if kind is StepKind.VARYING:
                return i % n if n else i
            return 0

        lost_at = None
        if fkind is not StepKind.VARYING and entry_varies or fkind is StepKind.VARYING and hkind not in (None, StepKind.VARYING):
            bad = [s for s in (fwd if fkind is not StepKind.VARYING else heads) if s.kind is not StepKind.VARYING]
            lost_at = _finding_on(bad, findings, model)
        steps = []
        for i in range(setting.k):
            fl, hl = layer(fkind, i), layer(hkind, i)
            if fkind is None:
                verdict, why = Verdict.UNKNOWN, f"{loop_label} reaches {model[1]} but no layer selection on the path"
            elif lost_at is not None:
                verdict, why = Verdict.LOST, lost_at[1]
            elif fkind is StepKind.VARYING:
                sel = next(s for s in fwd if s.kind is StepKind.VARYING)
                verdict = Verdict.THREADED
                why = f"{loop_label} passes {param} per step; {_last(sel)} selects {sel.container}[…]" + (
                    f": step {i} -> layer {fl}" + (f" (mod {n})" if n and i >= n else ""))
            else:
                sel = fwd[0]
                verdict = Verdict.CONSTANT
                why = (f"{loop_label} hands no per-step {param} to {model[1]} ({'/'.join(sorted({s.kind.value for s in fwd}))}): "
                       f"{_last(sel)} selects {sel.container} with step 0 every step")
            steps.append(StepPlan(i, fl, hl, verdict.value if verdict is not Verdict.LOST else f"lost at {lost_at[0]}"  # type: ignore[index]
                                  , why))
        return r.hop, tuple(steps)


# -- helpers -------------------------------------------------------------------------


def _kind(sels: list[LoopSelection]) -> StepKind | None:
    kinds = {s.kind for s in sels}
    for k in (StepKind.VARYING, StepKind.CONSTANT, StepKind.ABSENT):
        if k in kinds:
            return k
    return None


def _last(sel: LoopSelection) -> str:
    h = sel.hops[-1]
    return f"{h.function} ({h.path}:{h.line})"


def _finding_on(sels: list[LoopSelection], findings: Sequence[Finding], model: ClassKey) -> tuple[str, str] | None:
    """The finding that loses the step (``Meaning.STEP_LOST``) on these selections' paths."""
    on_path = {(h.path, h.function) for s in sels for h in s.hops}
    for f in sorted(findings, key=lambda f: (f.rule, f.path, f.line)):
        if f.meaning is Meaning.STEP_LOST and (f.path, f.function) in on_path:
            return f.fingerprint, f"{f.rule} at {f.path}:{f.line} {f.function}: {f.message}"
    if sels:
        h = sels[0].hops[-1]
        return f"{h.path}:{h.line}", f"the step does not reach {sels[0].container} in {h.function} ({h.path}:{h.line})"
    return None


def _module_constant(facts: ModuleFacts | None, name: str) -> Value:
    """A module-level name assigned once to a literal of constants (``_TYPES = {"a"}``):
    its value, read with ``ast.literal_eval`` from the assignment's text (never run)."""
    assigns = facts.module_assigns.get(name, ()) if facts is not None else ()
    if len(assigns) != 1 or not assigns[0].constant:
        return Unknown(name)
    try:
        value = ast.literal_eval(assigns[0].text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return Unknown(name)
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    if isinstance(value, (str, int, float, bool, tuple, list)) or value is None:
        return value
    return Unknown(name)


def _to_obj(label: str, data: dict[str, Any]) -> Obj:
    fields: dict[str, Value] = {}
    for k, v in data.items():
        fields[k] = _to_obj(f"{label}.{k}", v) if isinstance(v, dict) else v
    return Obj(label, fields, closed=True)


def _chain(e: PExpr) -> Chain | None:
    parts: list[str] = []
    while isinstance(e, PAttr):
        parts.append(e.attr)
        e = e.value
    if isinstance(e, PName):
        parts.append(e.id)
        return tuple(reversed(parts))
    return None


def _walk(stmts: Iterable[Stmt]) -> Iterable[Stmt]:
    for s in stmts:
        yield s
        if isinstance(s, SIf):
            yield from _walk(s.body)
            yield from _walk(s.orelse)


def _stmt_exprs(s: Stmt) -> list[PExpr]:
    if isinstance(s, SIf):
        return [s.test]
    if isinstance(s, SReturn):
        return [s.value] if s.value is not None else []
    if isinstance(s, SAssign):
        return [s.value, *s.targets]
    if isinstance(s, SExpr):
        return [s.value]
    return []


def _subexprs(e: PExpr) -> Iterable[PExpr]:
    yield e
    kids: list[PExpr | None] = []
    if isinstance(e, PAttr):
        kids = [e.value]
    elif isinstance(e, PCall):
        kids = [e.func, *e.args, *(k.value for k in e.keywords)]
    elif isinstance(e, PCompare):
        kids = [e.left, *e.comparators]
    elif isinstance(e, PBool):
        kids = list(e.values)
    elif isinstance(e, PNot):
        kids = [e.operand]
    elif isinstance(e, PSeq):
        kids = list(e.elts)
    elif isinstance(e, PDict):
        kids = [*e.keys, *e.values]
    elif isinstance(e, PSubscript):
        kids = [e.value, e.index]
    elif isinstance(e, PIfExp):
        kids = [e.test, e.body, e.orelse]
    for k in kids:
        if k is not None:
            yield from _subexprs(k)


def _calls(e: PExpr) -> list[PCall]:
    return [s for s in _subexprs(e) if isinstance(s, PCall)]


def _strings(e: PExpr) -> list[str]:
    """String literals a value can be: ``["A"]``, ``["A" if c else "B"]``."""
    return [s.value for s in _subexprs(e) if isinstance(s, PConst) and isinstance(s.value, str)
            and not _in_test(e, s)]


def _in_test(root: PExpr, node: PExpr) -> bool:
    for s in _subexprs(root):
        if isinstance(s, PIfExp) and any(x is node for x in _subexprs(s.test)):
            return True
    return False


__all__ = ["DecisionRow", "DispatchProvider", "Family", "Gate", "Plan", "Setting", "StepPlan", "Verdict", "describe",
           "chain_of"]
