"""Value flow of a threaded parameter: which locals derive from it (taint) and whether
its value reaches a layer selection (``self.layers[f(step)]``), directly or through
callees, ``**kwargs`` forwarding and attribute side channels."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..facts.extract import CallFact, FunctionFact, SubscriptFact
from ..index.index import ClassKey, FuncKey
from ..model.findings import Hop
from .base import Analyses, FixpointMemo, Provider
from .calls import ArgSource, CallProvider, Target


@dataclass(frozen=True)
class Selection:
    """A parameter's value reaches a layer selection; ``hops`` lead from the function to it."""

    hops: tuple[Hop, ...]
    container: str


def taint(fn: FunctionFact, sources: set[str]) -> set[str]:
    """Local names whose value derives from ``sources`` (a fixpoint over assignments)."""
    tainted = set(sources)
    if not tainted:
        return tainted
    changed = True
    while changed:
        changed = False
        for name, exprs in fn.assigns.items():
            if name not in tainted and any(tainted.intersection(e.names) for e in exprs):
                tainted.add(name)
                changed = True
    return tainted


def sources_for(fn: FunctionFact, param: str) -> set[str]:
    """Names that carry ``param``'s value at the start of ``fn``."""
    if param in fn.param_names or param.startswith("self."):
        return {param}
    kw = fn.kwargs_param
    if kw is None:
        return set()
    # The value sits inside **kwargs: reads like kwargs["p"] / kwargs.get("p").
    quoted = re.compile(rf"['\"]{re.escape(param)}['\"]")
    return {name for name, exprs in fn.assigns.items() for e in exprs if kw in e.names and quoted.search(e.text)}


def selecting_subscripts(fn: FunctionFact) -> list[SubscriptFact]:
    """Subscripts of a ``self.<container>`` (candidate layer selections)."""
    return [s for s in fn.subscripts if s.container[0] == "self" and len(s.container) >= 2]


class FlowProvider(Provider):
    dependencies = (CallProvider,)

    def __init__(self, analyses: Analyses) -> None:
        super().__init__(analyses)
        self.calls = self.dep(CallProvider)
        self._selects: FixpointMemo[tuple[FuncKey, ClassKey | None, str], Selection | None] = FixpointMemo(
            lambda: None, self.limits, "selection", iterate=False
        )

    def direct_selection(self, fkey: FuncKey, fn: FunctionFact, tainted: set[str]) -> Selection | None:
        for sub in selecting_subscripts(fn):
            if tainted.intersection(sub.index.names):
                label = ".".join(sub.container)
                return Selection((self.hop(fkey, sub.line, f"selects {label}[{sub.index.text}]"),), label)
        return None

    def selects(self, func: FuncKey, ctx: ClassKey | None, param: str) -> Selection | None:
        """Whether ``param`` of ``func`` (named, in **kwargs, or ``self.param``) reaches a selection."""
        return self._selects.query((func, ctx, param), lambda: self._compute(func, ctx, param))

    def _compute(self, func: FuncKey, ctx: ClassKey | None, param: str) -> Selection | None:
        fn = self.index.function(func)
        if fn is None:
            return None
        sources = sources_for(fn, param)
        if not sources and not (fn.kwargs_param and not param.startswith("self.")):
            return None
        tainted = taint(fn, sources)
        direct = self.direct_selection(func, fn, tainted)
        if direct:
            return direct
        base = param.rpartition(".")[2]
        # Side channel: self.model.spec_step_idx = spec_step_idx, read as self.spec_step_idx.
        for s in fn.attr_assigns:
            tgt = s.target
            if len(tgt) >= 3 and tgt[0] == "self" and tgt[-1] in self.params and tainted.intersection(s.value.names):
                for obj, _ in self.calls.objects_of_chain(ctx, tgt[1:-1], None):
                    for mkey, _m in self.index_methods_of(obj):
                        sel = self.selects(mkey, obj, "self." + tgt[-1])
                        if sel:
                            return Selection((self.hop(func, s.line, f"sets {'.'.join(tgt)}"),) + sel.hops, sel.container)
        for ci, call in enumerate(fn.calls):
            for target in self.calls.targets(func, fn, ctx, ci):
                b = self.calls.bind(call, fn, target)
                for cparam, src in sorted(b.params.items()):
                    if tainted.intersection(src.expr.names):
                        sel = self.selects(target.func, target.ctx, cparam)
                        if sel:
                            return self._via(func, call, target, cparam, src, sel)
                if b.forwards_kwargs and param not in fn.param_names and not param.startswith("self."):
                    sel = self.selects(target.func, target.ctx, base)
                    if sel:
                        note = f"forwards **kwargs to {target.func[1]}"
                        return Selection((self.hop(func, call.line, note),) + sel.hops, sel.container)
        return None

    def _via(self, func: FuncKey, call: CallFact, tgt: Target, cparam: str, src: ArgSource, sel: Selection) -> Selection:
        note = f"passes {src.expr.text} as {cparam} ({src.describe()}) to {tgt.func[1]}"
        site = self.index.patch_site(tgt.func)
        if site:
            note += f" (patched in at {site})"
        return Selection((self.hop(func, call.line, note),) + sel.hops, sel.container)

    def index_methods_of(self, cls: ClassKey) -> list[tuple[FuncKey, FunctionFact]]:
        """Every method callable on an instance of ``cls`` (nearest definition in the MRO)."""
        out: list[tuple[FuncKey, FunctionFact]] = []
        seen: set[str] = set()
        for c in self.index.mro(cls):
            for name, m in sorted(self.index.methods(c).items()):
                if name not in seen:
                    seen.add(name)
                    out.append((self.index.method_key(c, name), m))
        return out
