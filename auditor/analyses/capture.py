"""Capture and compilation: where a draft step's Python value stops mattering.

A captured CUDA graph replays the kernels recorded at capture: a Python argument of a
replayed call changes nothing unless the graph cache is *keyed* on it. A class compiled
once with its guards dropped bakes a Python ``int`` it indexes with into the trace.
This provider recognises, from what the code does (never from class names):

* **graph wrappers** (:class:`GraphWrapper`) — classes whose call path captures a graph
  (a ``with`` of a capture context such as ``torch.cuda.graph(...)``, a call such as
  ``g.capture_begin()``, or entering a class whose ``__enter__`` does) and which replay
  later; and how their cache key is built: from the forward context only (the batch),
  from the call's arguments, or by a key function handed to the constructor and
  applied to the call's arguments;
* **installations** (:class:`Installation`) — where such a wrapper is built around a
  callable and stored (``drafter.model = Wrapper(drafter.model, ...)``;
  ``self.runner = Wrapper(model, key_fn=key_fn)`` inside an installer method, resolved
  per caller of that method), with the key function actually passed and the branch
  conditions that guard the site (the switch that enables that path);
* **whole-loop captures** (:class:`LoopCapture`) — a method containing a draft loop
  handed to a function that captures it as one graph;
* **compiled classes** (:class:`CompiledClass`) — classes under a compile decorator,
  with the arguments the decorator marks dynamic and its enabling condition;
* and, joining these with the draft loops, **frozen steps** (:class:`FrozenStep`): a
  draft loop hands a per-step value to a layer selection only through a captured region
  whose key does not include it, or through a compiled ``forward`` that does not mark
  it dynamic.

The vocabulary (capture and replay APIs, compile decorators and their argument names)
comes from the configuration (``[tool.mtp-audit]``), with torch's and vLLM's names as
defaults.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from ..facts.extract import BranchFact, CallFact, Chain, ExprFact, FunctionFact
from ..index.index import ClassKey, FuncKey, SymbolKind
from ..model.findings import Hop
from .base import Analyses, Provider
from .calls import CallProvider, Target
from .flow import taint
from .loops import FORWARD_METHODS, LoopEntry, LoopProvider, LoopResult, LoopSelection, StepKind
from .types import TypeProvider

_MAX_CAPTURE_DEPTH = 4
_MAX_INSTALLER_DEPTH = 2
# Conditions that test for presence, not for a configuration: left out of guard texts.
_STRUCTURAL = re.compile(r"\bis (?:not )?None\b|^(?:hasattr|isinstance|callable)\(|^not (?:hasattr|isinstance)\(")


class KeyKind(str, Enum):
    """How a graph wrapper builds the key of its graph cache."""

    BATCH = "batch"  # from the forward context only (batch shape): no call argument
    ARGUMENTS = "arguments"  # computed in the wrapper from the call's arguments
    KEY_FN = "key-fn"  # a function handed to the constructor, applied to the call's arguments


@dataclass(frozen=True)
class GraphWrapper:
    cls: ClassKey
    dispatch: FuncKey  # the method a call of an instance runs (``__call__``)
    capture: Hop  # where its call path captures
    replay: Hop | None  # where it replays
    key_kind: KeyKind
    key_text: str  # the key expression(s), as written
    key_fn_param: str | None  # KEY_FN: the constructor parameter holding the key function
    key_params: tuple[str, ...]  # threaded parameters the key reads from the call's arguments itself

    @property
    def name(self) -> str:
        return self.cls[1]


@dataclass(frozen=True)
class Installation:
    """One place a graph wrapper is built around a callable and stored."""

    wrapper: GraphWrapper
    site: FuncKey  # the function that runs the construction (or calls the installer)
    line: int
    col: int
    root: ClassKey | None  # ``self`` there
    slot: tuple[str, ...]  # attribute path from ``root`` where the wrapper is stored
    wrapped: str  # the wrapped callable, as written
    key_fn: str | None  # the key function passed (None: none)
    key_includes: tuple[str, ...]  # threaded parameters the effective key includes
    guards: tuple[str, ...]  # branch conditions that must hold to get here, outermost first
    via: tuple[Hop, ...]  # the installer call(s) and the construction

    @property
    def slot_text(self) -> str:
        return ".".join(self.slot) if self.slot else "?"

    def describe_key(self, param: str) -> str:
        """How this installation's graphs are keyed, said against ``param``."""
        w = self.wrapper
        if w.key_kind is KeyKind.KEY_FN and self.key_fn is None:
            return f"keyed by the batch only (no {w.key_fn_param} is passed)"
        if w.key_kind is KeyKind.KEY_FN:
            return f"keyed by {w.key_fn_param}={self.key_fn}, which does not read {param}"
        if w.key_kind is KeyKind.ARGUMENTS:
            return f"keyed by {w.key_text}, which does not read {param}"
        return "keyed by the batch only" if w.key_text else "captured once, with no key"

    def guard_text(self) -> str:
        # Conditions are joined with `and`; only an `or` inside one needs parentheses.
        return " and ".join(f"({g})" if " or " in re.sub(r"\[=.*?\]", "", g) else g for g in self.guards)


@dataclass(frozen=True)
class CompiledClass:
    cls: ClassKey  # the decorated class
    line: int
    decorator: str
    dynamic_args: tuple[str, ...] | None  # None: the decorator infers them (tensor-typed parameters)
    condition: str | None  # the decorator's enabling condition, if any

    def dynamic(self, param: str) -> bool:
        return self.dynamic_args is not None and param in self.dynamic_args


@dataclass(frozen=True)
class LoopCapture:
    """A method holding a draft loop is handed to a function that captures it whole."""

    site: FuncKey
    line: int
    captured: FuncKey
    capturer: FuncKey
    capture: Hop
    loop_line: int
    guards: tuple[str, ...]


class FreezeKind(str, Enum):
    GRAPH = "graph"
    COMPILE = "compile"


@dataclass(frozen=True)
class FrozenStep:
    """A draft loop's per-step value reaches a layer selection only through a region that
    does not see it: a graph replayed under a key without it, or a compiled forward."""

    kind: FreezeKind
    param: str
    loop: FuncKey
    loop_line: int
    model_class: ClassKey
    method: str  # the draft model entry method
    container: str
    hops: tuple[Hop, ...]  # loop -> ... -> the region -> the selection
    installation: Installation | None = None
    compiled: CompiledClass | None = None
    outside: tuple[str, ...] = ()  # entry methods outside the region that still get the step


def _negate(text: str) -> str:
    """``a == b`` -> ``a != b``; ``not x`` -> ``x``; else ``not (text)``."""
    if text.startswith("not ") and " and " not in text and " or " not in text:
        return text[4:]
    if text.count("==") == 1 and "!=" not in text and " and " not in text and " or " not in text:
        return text.replace("==", "!=")
    if text.count("!=") == 1 and "==" not in text and " and " not in text and " or " not in text:
        return text.replace("!=", "==")
    return f"not ({text})"


def _chain_matches(chain: Chain | None, api: str) -> bool:
    if not chain:
        return False
    parts = tuple(api.split("."))
    return chain[-len(parts):] == parts


class CaptureProvider(Provider):
    dependencies = (TypeProvider, CallProvider, LoopProvider)

    def __init__(self, analyses: Analyses) -> None:
        super().__init__(analyses)
        self.types = self.dep(TypeProvider)
        self.calls = self.dep(CallProvider)
        self.loops = self.dep(LoopProvider)
        self._captures: dict[tuple[FuncKey, ClassKey | None], Hop | None] = {}
        self._wrappers: dict[ClassKey, GraphWrapper] | None = None
        self._installations: list[Installation] | None = None
        self._loop_captures: list[LoopCapture] | None = None
        self._compiled: dict[ClassKey, CompiledClass | None] = {}
        self._frozen: list[FrozenStep] | None = None
        self._capture_files: list[str] | None = None
        self._functions_memo: tuple[int, list[tuple[FuncKey, FunctionFact, ClassKey | None]]] | None = None
        counts = "|".join(re.escape(c) for c in self.config.draft_loop_counts)
        self._count_re = re.compile(rf"\b(?:{counts})\b")

    # -- loading ---------------------------------------------------------
    def prepare(self) -> None:
        """Load the files that define graph wrappers and those that install them, and
        compute every result (resolution may load files only before the freeze)."""
        self._capture_files = self.index.files_mentioning([api.encode() for api in self.config.graph_capture_apis])
        for path in self._capture_files:
            self.index.load(path)
        self._wrappers = None
        names = sorted({w.name.rpartition(".")[2] for w in self.wrappers().values()})
        for path in self.index.files_mentioning([n.encode() for n in names]):
            self.index.load(path)
        # Callers of an installer method are looked for among the loaded files (the
        # speculators whose draft loops matter are loaded already): no third pass.
        self.frozen_steps()
        self.loop_captures()

    # -- functions -------------------------------------------------------
    def _functions(self) -> list[tuple[FuncKey, FunctionFact, ClassKey | None]]:
        """Every loaded function and method (recomputed only when more files loaded)."""
        loaded = sum(1 for f in self.index.facts.values() if f is not None)
        if self._functions_memo is not None and self._functions_memo[0] == loaded:
            return self._functions_memo[1]
        out: list[tuple[FuncKey, FunctionFact, ClassKey | None]] = []
        for path, facts in self.index.loaded():
            for name, fn in sorted(facts.functions.items()):
                out.append(((path, name), fn, None))
            for cname, cls in sorted(facts.classes.items()):
                for mname, m in sorted(cls.methods.items()):
                    out.append(((path, f"{cname}.{mname}"), m, (path, cname)))
        self._functions_memo = (loaded, out)
        return out

    # -- capture ---------------------------------------------------------
    def captures(self, func: FuncKey, ctx: ClassKey | None, _depth: int = 0) -> Hop | None:
        """Where ``func`` (run with ``self`` of class ``ctx``) captures a graph, directly
        or through what it calls; None if it does not."""
        key = (func, ctx)
        if key in self._captures:
            return self._captures[key]
        if _depth > _MAX_CAPTURE_DEPTH:
            self.limits.hit("capture depth")
            return None
        self._captures[key] = None  # cycle guard
        found = self._captures_now(func, ctx, _depth)
        self._captures[key] = found
        return found

    def _captures_now(self, func: FuncKey, ctx: ClassKey | None, depth: int) -> Hop | None:
        fn = self.index.function(func)
        if fn is None:
            return None
        apis = self.config.graph_capture_apis
        for w in fn.withs:
            for item in w.items:
                if any(_chain_matches(item.called, api) for api in apis):
                    return self.hop(func, w.line, f"captures a graph: with {item.text}")
        for call in fn.calls:
            if any(_chain_matches(call.func, api) for api in apis):
                return self.hop(func, call.line, f"captures a graph: {'.'.join(call.func or ())}(…)")
        for w in fn.withs:
            for item in w.items:
                # `with X(...)`, or `cap = X(...)` then `with cap:`
                built = [item.called] if item.called else [
                    v.called for v in fn.assigns.get(item.chain[0], ()) if v.called
                ] if item.chain and len(item.chain) == 1 else []
                for sym in (s for b in built if b for s in self.index.resolve_chain(func[0], b)):
                    if sym.kind is not SymbolKind.CLASS:
                        continue
                    enter = self.index.method((sym.path, sym.name), "__enter__")
                    if enter is None:
                        continue
                    ekey = (enter[0][0], f"{enter[0][1]}.__enter__")
                    inner = self.captures(ekey, (sym.path, sym.name), depth + 1)
                    if inner is not None:
                        return self.hop(func, w.line, f"captures a graph: with {item.text} ({inner.function} captures)")
        for ci, call in enumerate(fn.calls):
            if not call.func or call.func[0] not in ("self", "super()") and len(call.func) > 1:
                continue  # module functions and own methods; not arbitrary objects
            for tgt in self.calls.targets(func, fn, ctx, ci):
                inner = self.captures(tgt.func, tgt.ctx, depth + 1)
                if inner is not None:
                    return self.hop(func, call.line, f"calls {tgt.func[1]}, which captures a graph")
        return None

    def _replays(self, cls: ClassKey) -> Hop | None:
        for c in self.index.mro(cls):
            for mname, m in sorted(self.index.methods(c).items()):
                for call in m.calls:
                    if call.func and len(call.func) >= 2 and call.func[-1] in self.config.graph_replay_apis:
                        return self.hop((c[0], f"{c[1]}.{mname}"), call.line, f"replays: {'.'.join(call.func)}()")
        return None

    def wrappers(self) -> dict[ClassKey, GraphWrapper]:
        """Every loaded class whose call captures a graph and that replays one."""
        if self._wrappers is None:
            found: dict[ClassKey, GraphWrapper] = {}
            # Candidates: classes of the files that name a capture API (a wrapper whose
            # capture lives wholly in another file is not looked for: see docs/capture.md).
            files = set(self._capture_files) if self._capture_files is not None else None
            for cls in sorted(self.index.all_classes()):
                if files is not None and cls[0] not in files:
                    continue
                dispatch = self.index.method(cls, "__call__")
                if dispatch is None:
                    continue
                dkey = (dispatch[0][0], f"{dispatch[0][1]}.__call__")
                capture = self.captures(dkey, cls)
                if capture is None:
                    continue
                replay = self._replays(cls)
                if replay is None:
                    continue
                found[cls] = self._wrapper(cls, dkey, dispatch[1], capture, replay)
            self._wrappers = found
        return self._wrappers

    def _wrapper(self, cls: ClassKey, dkey: FuncKey, fn: FunctionFact, capture: Hop, replay: Hop) -> GraphWrapper:
        lookups: list[ExprFact] = []
        for call in fn.calls:
            ch = call.func
            if ch and len(ch) == 3 and ch[0] == "self" and ch[2] == "get" and call.args:
                lookups.append(call.args[0])
        for sub in fn.subscripts:
            if len(sub.container) == 2:
                lookups.append(sub.index)
        values: list[ExprFact] = []
        for e in lookups:
            ch = e.chain
            if ch and len(ch) == 1 and ch[0] in fn.assigns:
                values.extend(v for v in fn.assigns[ch[0]] if v.loop is None)
            else:
                values.append(e)
        values = list({v.text: v for v in values}.values())
        args = set(fn.param_names[1:])
        tainted = taint(fn, args)
        texts = ", ".join(v.text for v in values)
        init = self.index.method(cls, "__init__")
        ctor_attrs: dict[str, str] = {}
        if init is not None:
            init_params = set(init[1].param_names[1:])
            for s in init[1].attr_assigns:
                if len(s.target) == 2 and s.target[0] == "self" and s.value.chain and len(s.value.chain) == 1:
                    if s.value.chain[0] in init_params:
                        ctor_attrs[s.target[1]] = s.value.chain[0]
        from_args = [v for v in values if tainted.intersection(v.names)]
        # Threaded parameters the key reads from the call's arguments itself.
        params = tuple(p for p in self.params if any(re.search(rf"\b{re.escape(p)}\b", v.text) for v in from_args))
        for v in from_args:
            for n in v.names:
                attr = n[5:] if n.startswith("self.") else None
                if attr in ctor_attrs and f"{n}(" in v.text:
                    return GraphWrapper(cls, dkey, capture, replay, KeyKind.KEY_FN, texts, ctor_attrs[attr], params)
        if from_args:
            return GraphWrapper(cls, dkey, capture, replay, KeyKind.ARGUMENTS, texts, None, params)
        return GraphWrapper(cls, dkey, capture, replay, KeyKind.BATCH, texts, None, ())

    # -- installations ---------------------------------------------------
    def _constructions(self) -> list[Installation]:
        """Every construction of a wrapper, as written (before resolving installers)."""
        wrappers = self.wrappers()
        out: list[Installation] = []
        if not wrappers:
            return out
        names = {c[1].rpartition(".")[2] for c in wrappers}
        for fkey, fn, ctx in self._functions():
            for ci, call in enumerate(fn.calls):
                if not call.func or call.func[-1] not in names:
                    continue
                for sym in self.index.resolve_chain(fkey[0], call.func):
                    w = wrappers.get((sym.path, sym.name)) if sym.kind is SymbolKind.CLASS else None
                    if w is not None:
                        out.append(self._construction(fkey, fn, ctx, call, w))
        return out

    def _construction(self, fkey: FuncKey, fn: FunctionFact, ctx: ClassKey | None, call: CallFact, w: GraphWrapper) -> Installation:
        init = self.index.method(w.cls, "__init__")
        params: dict[str, ExprFact] = {}
        first: str | None = None
        if init is not None:
            tgt = Target((init[0][0], f"{init[0][1]}.__init__"), w.cls, True)
            b = self.calls.bind(call, fn, tgt)
            params = {k: v.expr for k, v in b.params.items()}
            positional = [p.name for p in init[1].params[1:]]
            first = positional[0] if positional else None
        wrapped = params[first].text if first in params else (call.args[0].text if call.args else "?")
        key_fn = params.get(w.key_fn_param) if w.key_fn_param else None
        slot: tuple[str, ...] = ()
        for s in fn.attr_assigns:
            if s.line == call.line and s.value.called == call.func:
                slot = self._self_path(fn, s.target) or ()
                break
        key_text = None if key_fn is None or key_fn.text == "None" else key_fn.text
        return Installation(
            wrapper=w, site=fkey, line=call.line, col=call.col, root=ctx, slot=slot, wrapped=wrapped,
            key_fn=key_text, key_includes=self._key_includes(w, fkey, key_fn), guards=self.guards(fkey, fn, ctx, call),
            via=(self.hop(fkey, call.line, f"builds {w.name}({wrapped}, …)"),),
        )

    def _self_path(self, fn: FunctionFact, chain: Chain) -> tuple[str, ...] | None:
        """``self.a.b`` -> (a, b); a local bound to ``self.x`` or ``getattr(self, "x", d)``
        counts as ``self.x``."""
        if chain[0] == "self":
            return tuple(chain[1:])
        for v in fn.assigns.get(chain[0], ()):
            if v.chain and v.chain[0] == "self":
                return tuple(v.chain[1:]) + tuple(chain[1:])
            m = re.match(r"getattr\(\s*self\s*,\s*[\"'](\w+)[\"']", v.text)
            if m:
                return (m.group(1),) + tuple(chain[1:])
        return None

    def _key_includes(self, w: GraphWrapper, fkey: FuncKey, key_fn: ExprFact | None) -> tuple[str, ...]:
        if w.key_kind is not KeyKind.KEY_FN or key_fn is None or key_fn.text == "None":
            return w.key_params
        found = list(w.key_params) + [p for p in self.params if re.search(rf"\b{re.escape(p)}\b", key_fn.text)]
        if not found and key_fn.chain:
            fn = self.index.function(fkey)
            syms = self.index.resolve_chain(fkey[0], key_fn.chain) if fn is not None else []
            for sym in syms:
                target = self.index.function((sym.path, sym.name)) if sym.kind is SymbolKind.FUNCTION else None
                if target is None:
                    continue
                texts = [e.text for es in target.assigns.values() for e in es] + [e.text for e in target.returns]
                found += [p for p in self.params if p in target.param_names or any(p in t for t in texts)]
        return tuple(dict.fromkeys(found))

    def installations(self) -> list[Installation]:
        """Every installation, with installer methods resolved per caller: a construction
        whose wrapped callable or key function is a parameter of the function that builds
        it is installed once per call of that function, with the caller's arguments."""
        if self._installations is None:
            out: list[Installation] = []
            for inst in self._constructions():
                out.extend(self._per_caller(inst, 0))
            self._installations = sorted(set(out), key=lambda i: (i.site, i.line, i.slot, i.via))
        return self._installations

    def _passthrough(self, inst: Installation) -> list[str]:
        """Parameters of an installer method that the construction passes on as the wrapped
        callable or the key function (a constructor wrapping its own argument is not an
        installer: its callers build the outer object)."""
        fn = self.index.function(inst.site)
        name = inst.site[1].rpartition(".")[2]
        if fn is None or inst.root is None or (name.startswith("__") and name.endswith("__")):
            return []
        own = set(fn.param_names[1:])
        return [n for n in (inst.wrapped, inst.key_fn) if n is not None and n in own]

    def _per_caller(self, inst: Installation, depth: int) -> list[Installation]:
        fn = self.index.function(inst.site)
        if fn is None:
            return [inst]
        own = set(fn.param_names[1:])
        passthrough = self._passthrough(inst)
        if not passthrough or depth >= _MAX_INSTALLER_DEPTH:
            if passthrough:
                self.limits.hit("installer depth")
            return [inst]
        name = inst.site[1].rpartition(".")[2]
        out: list[Installation] = []
        for ckey, cfn, cctx in self._functions():
            for ci, call in enumerate(cfn.calls):
                if not call.func or call.func[-1] != name:
                    continue
                for tgt in self.calls.targets(ckey, cfn, cctx, ci):
                    if tgt.func != inst.site:
                        continue
                    b = self.calls.bind(call, cfn, tgt)
                    wrapped = b.params[inst.wrapped].expr.text if inst.wrapped in b.params else inst.wrapped
                    key_src = b.params[inst.key_fn].expr if inst.key_fn is not None and inst.key_fn in b.params else None
                    if inst.key_fn is not None and inst.key_fn in own and key_src is None:
                        key_text = None  # the caller does not pass one: the installer's default
                    else:
                        key_text = key_src.text if key_src is not None else inst.key_fn
                    receiver = self._self_path(cfn, call.func[:-1]) if len(call.func) > 1 else None
                    if receiver is None:
                        continue
                    includes = self._key_includes(inst.wrapper, ckey, key_src) if key_src is not None else ()
                    caller = Installation(
                        wrapper=inst.wrapper, site=ckey, line=call.line, col=call.col, root=cctx,
                        slot=receiver + inst.slot, wrapped=wrapped, key_fn=key_text,
                        key_includes=includes if key_src is not None else (
                            inst.wrapper.key_params if key_text is None else inst.key_includes),
                        guards=self.guards(ckey, cfn, cctx, call) + inst.guards,
                        via=(self.hop(ckey, call.line, f"calls {inst.site[1]}({wrapped}, …)"),) + inst.via,
                    )
                    out.extend(self._per_caller(caller, depth + 1))
        return out or [inst]

    # -- guards ----------------------------------------------------------
    def guards(self, fkey: FuncKey, fn: FunctionFact, ctx: ClassKey | None, call: CallFact) -> tuple[str, ...]:
        """The branch conditions around a call that are switches (presence tests left out),
        each with what it reads when that is a predicate or a flag defined in the tree."""
        out: list[str] = []
        for bid in call.branches:
            if bid >= len(fn.branches):
                continue
            out.extend(self._branch_text(fkey, fn, ctx, fn.branches[bid]))
        return tuple(dict.fromkeys(out))

    def _branch_text(self, fkey: FuncKey, fn: FunctionFact, ctx: ClassKey | None, br: BranchFact) -> list[str]:
        tests = [t for t in br.tests if not _STRUCTURAL.search(t.text)]
        if not tests:
            return []
        texts = [self._explain(fkey, fn, ctx, t) for t in tests]
        if br.negated:
            if len(tests) == 1 and texts[0] == tests[0].text:
                return [_negate(texts[0])]
            joined = " and ".join(texts)
            return [f"not ({joined})"]
        return texts

    def _explain(self, fkey: FuncKey, fn: FunctionFact, ctx: ClassKey | None, test: ExprFact) -> str:
        """``pred()`` -> ``pred() [= <its return expression>]``; ``self.a.flag`` -> ``self.a.flag
        [= <what it is assigned>]``: the switch behind a condition, one level deep."""
        meaning: str | None = None
        called = test.called
        if called and not test.text.startswith("not "):
            targets: list[FuncKey] = []
            if called[0] == "self" and ctx is not None:
                targets = [t.func for t in self.calls.resolve_call(fkey, fn, ctx, called)]
            elif called[0] not in fn.assigns and called[0] not in fn.param_names:
                targets = [(s.path, s.name) for s in self.index.resolve_chain(fkey[0], called) if s.kind is SymbolKind.FUNCTION]
            for t in targets:
                tf = self.index.function(t)
                if tf is not None and len(tf.returns) == 1:
                    meaning = tf.returns[0].text
                    break
        elif test.chain and test.chain[0] == "self" and len(test.chain) >= 2 and ctx is not None:
            objs = [o for o, _ in self.calls.objects_of_chain(ctx, test.chain[1:-1], None)] if len(test.chain) > 2 else [ctx]
            for o in objs:
                for c in self.index.mro(o):
                    for m in self.index.methods(c).values():
                        for s in m.attr_assigns:
                            if s.target == ("self", test.chain[-1]):
                                meaning = s.value.text
                                break
                        if meaning:
                            break
                    if meaning:
                        break
                if meaning:
                    break
        return f"{test.text} [= {meaning}]" if meaning and meaning != test.text else test.text

    # -- compilation -----------------------------------------------------
    def compiled(self, cls: ClassKey) -> CompiledClass | None:
        """The compile decorator on ``cls`` or the nearest base that has one."""
        if cls in self._compiled:
            return self._compiled[cls]
        found: CompiledClass | None = None
        for c in self.index.mro(cls):
            cf = self.index.class_fact(c)
            if cf is None:
                continue
            for i, d in enumerate(cf.decorator_facts):
                if not d.func or d.func[-1] not in self.config.compile_decorators:
                    continue
                dynamic: tuple[str, ...] | None = None
                for arg in self.config.compile_dynamic_args:
                    if arg in d.dict_keys:
                        dynamic = (dynamic or ()) + d.dict_keys[arg]
                condition = next((kw.value.text for kw in d.keywords if kw.name in self.config.compile_condition_args), None)
                # The name, not the full text (shortened in facts): the arguments that
                # matter are reported separately.
                text = "@" + ".".join(d.func) + ("(…)" if d.called and d.keywords else "")
                found = CompiledClass(c, d.line, text, dynamic, condition)
                break
            if found is not None:
                break
        self._compiled[cls] = found
        return found

    # -- whole-loop capture ----------------------------------------------
    def _draft_loop_line(self, fn: FunctionFact) -> int | None:
        for lp in fn.loops:
            if "range" in lp.iter.text and self._count_re.search(lp.iter.text):
                return lp.line
        return None

    def loop_captures(self) -> list[LoopCapture]:
        """Methods holding a draft loop that are handed (as ``self.m``) to a function whose
        call path captures a graph: the whole loop is recorded as one graph."""
        if self._loop_captures is None:
            out: list[LoopCapture] = []
            functions = self._functions()
            # Names of methods that hold a draft loop: only these can be handed over whole.
            loop_methods = {k[1].rpartition(".")[2] for k, fn, ctx in functions
                            if ctx is not None and self._draft_loop_line(fn) is not None}
            for fkey, fn, ctx in functions:
                if ctx is None:
                    continue
                for ci, call in enumerate(fn.calls):
                    handed = [a for a in [*call.args, *(k.value for k in call.keywords)]
                              if a.chain and len(a.chain) == 2 and a.chain[0] == "self" and a.chain[1] in loop_methods]
                    if not handed:
                        continue
                    for a in handed:
                        assert a.chain is not None
                        found = self.index.method(ctx, a.chain[1])
                        if found is None:
                            continue
                        loop_line = self._draft_loop_line(found[1])
                        if loop_line is None:
                            continue
                        for tgt in self.calls.targets(fkey, fn, ctx, ci):
                            cap = self.captures(tgt.func, tgt.ctx)
                            if cap is not None:
                                captured = (found[0][0], f"{found[0][1]}.{a.chain[1]}")
                                out.append(LoopCapture(fkey, call.line, captured, tgt.func, cap, loop_line,
                                                       self.guards(fkey, fn, ctx, call)))
                                break
            self._loop_captures = sorted(set(out), key=lambda c: (c.site, c.line, c.captured))
        return self._loop_captures

    # -- frozen steps ----------------------------------------------------
    def _call_at(self, hop: Hop, callee: str | None) -> CallFact | None:
        fn = self.index.function((hop.path, hop.function))
        if fn is None:
            return None
        at = [c for c in fn.calls if c.line == hop.line and c.func]
        if callee is not None:
            named = [c for c in at if c.func and c.func[-1] == callee]
            if named:
                return named[0]
        return at[0] if len(at) == 1 else (at[0] if at else None)

    def _receiver_path(self, entry: LoopEntry) -> tuple[str, ...] | None:
        """The attribute path, from ``self`` of the loop's class, of the object each hop
        calls into, up to the function that makes the entry call."""
        path: tuple[str, ...] = ()
        for hop in entry.hops[1:-1]:
            callee = hop.note.rpartition(".")[2] if hop.note.startswith("calls ") else None
            call = self._call_at(hop, callee)
            fn = self.index.function((hop.path, hop.function))
            if call is None or fn is None or not call.func:
                return None
            if call.func[0] == "super()":
                continue
            recv = self._self_path(fn, call.func[:-1]) if len(call.func) > 1 else None
            if recv is None:
                return None
            path += recv
        return path

    @staticmethod
    def _step_signature(call: CallFact, param: str) -> set[str]:
        sig = {f"{param}={kw.value.text}" for kw in call.keywords if kw.name == param}
        sig |= {f"**{d.text}" for d in call.star_kwargs}
        return sig

    def _through(self, result: LoopResult, entry: LoopEntry) -> list[tuple[tuple[str, ...], Hop]]:
        """Object calls that carry the entry's step value: the entry call itself when it
        calls an object (not a named method), and calls in the same function that pass
        the step through the same argument (``self.runner(**inputs)`` beside
        ``model(**inputs)``). Each with its attribute path from the loop's ``self``."""
        base = self._receiver_path(entry)
        if base is None:
            return []
        hop = entry.call_hop
        fn = self.index.function((hop.path, hop.function))
        if fn is None:
            return []
        entry_call = self._call_at(hop, None if entry.method in FORWARD_METHODS else entry.method)
        if entry_call is None:
            return []
        out: list[tuple[tuple[str, ...], Hop]] = []
        if entry.method in FORWARD_METHODS and entry_call.func and entry_call.func[-1] != entry.method:
            slot = self._self_path(fn, entry_call.func)
            if slot:
                out.append((base + slot, hop))
        sig = self._step_signature(entry_call, entry.param)
        if sig:
            for call in fn.calls:
                if call is entry_call or not call.func or not sig & self._step_signature(call, entry.param):
                    continue
                slot = self._self_path(fn, call.func)
                if slot:
                    out.append((base + slot, self.hop((hop.path, hop.function), call.line, f"calls {'.'.join(call.func)}")))
        return out

    def _related(self, a: ClassKey | None, b: ClassKey | None) -> bool:
        if a is None or b is None:
            return False
        return a == b or a in self.index.mro(b) or b in self.index.mro(a)

    def _rebased(self, root: ClassKey | None, slot: tuple[str, ...]) -> list[tuple[ClassKey, str]]:
        if root is None or not slot:
            return []
        if len(slot) == 1:
            return [(root, slot[0])]
        objs = [o for o, _ in self.calls.objects_of_chain(root, slot[:-1], None)]
        return [(o, slot[-1]) for o in objs]

    def _installed_at(self, root: ClassKey | None, slot: tuple[str, ...]) -> list[Installation]:
        """Installations stored where an object call goes: the same attribute path from a
        related ``self`` if any; else the same attribute on an object of a related class."""
        insts = self.installations()
        exact = [i for i in insts if i.slot == slot and self._related(i.root, root)]
        if exact:
            return exact
        mine = self._rebased(root, slot)
        out = []
        for i in insts:
            theirs = self._rebased(i.root, i.slot)
            if any(a == b and self._related(o, p) for o, a in mine for p, b in theirs):
                out.append(i)
        return out

    def frozen_steps(self) -> list[FrozenStep]:
        if self._frozen is None:
            out: list[FrozenStep] = []
            for result in self.loops.loop_results():
                root = self.types.defining_class(result.func)
                for param in self.params:
                    out.extend(self._graph_frozen(result, root, param))
                    out.extend(self._compile_frozen(result, param))
            self._frozen = out
        return self._frozen

    def _varying_selection(self, result: LoopResult, entry: LoopEntry) -> LoopSelection | None:
        for s in result.selections:
            if s.model_class == entry.model_class and s.method == entry.method and s.kind is StepKind.VARYING:
                return s
        return None

    def _outside(self, result: LoopResult, model_class: ClassKey, method: str) -> tuple[str, ...]:
        return tuple(sorted({s.method for s in result.selections
                             if s.model_class == model_class and s.kind is StepKind.VARYING and s.method != method}))

    def _graph_frozen(self, result: LoopResult, root: ClassKey | None, param: str) -> list[FrozenStep]:
        out: list[FrozenStep] = []
        seen: set[tuple[Installation, ClassKey]] = set()
        for entry in result.entries:
            if entry.param != param or entry.kind is not StepKind.VARYING or not entry.accepts:
                continue
            selection = self._varying_selection(result, entry)
            if selection is None:
                continue
            sel = selection.hops
            for slot, call_hop in self._through(result, entry):
                for inst in self._installed_at(root, slot):
                    if param in inst.key_includes or (inst, entry.model_class) in seen:
                        continue
                    seen.add((inst, entry.model_class))
                    cut = next((i for i, h in enumerate(sel) if (h.path, h.line) == (entry.call_hop.path, entry.call_hop.line)), None)
                    hops = sel if cut is None else sel[:cut] + (call_hop,) + sel[cut + 1:]
                    out.append(FrozenStep(FreezeKind.GRAPH, param, result.func, result.loop.line, entry.model_class,
                                          entry.method, selection.container, hops, installation=inst,
                                          outside=self._outside(result, entry.model_class, entry.method)))
        return out

    def _compile_frozen(self, result: LoopResult, param: str) -> list[FrozenStep]:
        out: list[FrozenStep] = []
        seen: set[tuple[ClassKey, ClassKey]] = set()
        for s in result.selections:
            if s.kind is not StepKind.VARYING or s.method not in FORWARD_METHODS:
                continue
            if not any(e.param == param and e.model_class == s.model_class and e.kind is StepKind.VARYING
                       for e in result.entries):
                continue
            for hop in s.hops[1:]:
                if hop.function.rpartition(".")[2] != "forward":
                    continue
                owner = self.types.defining_class((hop.path, hop.function))
                if owner is None:
                    continue
                candidates = [owner]
                if owner in self.index.mro(s.model_class):
                    candidates.insert(0, s.model_class)
                comp = next((c for c in (self.compiled(k) for k in candidates) if c is not None), None)
                if comp is None or comp.dynamic(param):
                    continue
                if (comp.cls, s.model_class) not in seen:
                    seen.add((comp.cls, s.model_class))
                    out.append(FrozenStep(FreezeKind.COMPILE, param, result.func, result.loop.line, s.model_class,
                                          s.method, s.container, s.hops, compiled=comp,
                                          outside=self._outside(result, s.model_class, s.method)))
                break
        return out
