"""Graph capture: where a function captures a graph (directly, through what it calls, or by
entering a class whose ``__enter__`` does), and the graph wrappers — classes whose call
captures and that replay — with how their cache key is built."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...facts.extract import ExprFact, FunctionFact
from ...index.index import ClassKey, FuncKey, SymbolKind
from ...model.findings import Hop
from ..flow import taint
from .model import GraphWrapper, KeyKind, chain_matches
from .part import CapturePart

if TYPE_CHECKING:
    from .provider import CaptureProvider

MAX_CAPTURE_DEPTH = 4


class GraphFinder(CapturePart):
    def __init__(self, provider: CaptureProvider) -> None:
        super().__init__(provider)
        self._captures: dict[tuple[FuncKey, ClassKey | None], Hop | None] = {}
        self._wrappers: dict[ClassKey, GraphWrapper] | None = None
        self._capture_files: list[str] | None = None
        self._functions_memo: tuple[int, list[tuple[FuncKey, FunctionFact, ClassKey | None]]] | None = None

    def load(self) -> None:
        """Load the files that name a capture API and those that name a wrapper found there
        (before the freeze: resolution may load files only then)."""
        self._capture_files = self.index.files_mentioning([api.encode() for api in self.config.graph_capture_apis])
        for path in self._capture_files:
            self.index.load(path)
        self._wrappers = None
        names = sorted({w.name.rpartition(".")[2] for w in self.wrappers().values()})
        for path in self.index.files_mentioning([n.encode() for n in names]):
            self.index.load(path)

    def functions(self) -> list[tuple[FuncKey, FunctionFact, ClassKey | None]]:
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

    def captures(self, func: FuncKey, ctx: ClassKey | None, _depth: int = 0) -> Hop | None:
        """Where ``func`` (run with ``self`` of class ``ctx``) captures a graph, directly
        or through what it calls; None if it does not."""
        key = (func, ctx)
        if key in self._captures:
            return self._captures[key]
        if _depth > MAX_CAPTURE_DEPTH:
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
                if any(chain_matches(item.called, api) for api in apis):
                    return self.hop(func, w.line, f"captures a graph: with {item.text}")
        for call in fn.calls:
            if any(chain_matches(call.func, api) for api in apis):
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
