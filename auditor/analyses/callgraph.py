"""The call graph of the functions the rules examine, as a networkx multigraph whose
edges say how each threaded parameter is passed (``mtp-audit graph``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Analyses, Provider
from .calls import CallProvider
from .scope import ScopeProvider
from .types import TypeProvider

if TYPE_CHECKING:
    import networkx as nx


class GraphProvider(Provider):
    dependencies = (TypeProvider, CallProvider, ScopeProvider)

    def __init__(self, analyses: Analyses) -> None:
        super().__init__(analyses)
        self.types = self.dep(TypeProvider)
        self.calls = self.dep(CallProvider)
        self.scope = self.dep(ScopeProvider)

    def build_graph(self) -> "nx.MultiDiGraph[str]":
        import networkx  # only `mtp-audit graph` needs it: keep it out of every scan's start-up

        g: nx.MultiDiGraph[str] = networkx.MultiDiGraph()
        for fkey, fn in self.scope.relevant_functions():
            node = f"{fkey[0]}::{fkey[1]}"
            g.add_node(node, path=fkey[0], function=fkey[1], line=fn.line)
            ctx = self.types.defining_class(fkey)
            for ci, call in enumerate(fn.calls):
                for tgt in self.calls.targets(fkey, fn, ctx, ci):
                    b = self.calls.bind(call, fn, tgt)
                    passing = {}
                    for p in self.params:
                        if p in b.params:
                            passing[p] = b.params[p].describe()
                        elif b.forwards_kwargs:
                            passing[p] = "**kwargs"
                        elif p in b.unknown_keywords:
                            passing[p] = "rejected"
                        else:
                            passing[p] = "absent"
                    attrs = {f"pass_{k}": v for k, v in passing.items()}
                    g.add_edge(node, f"{tgt.func[0]}::{tgt.func[1]}", line=call.line, **attrs)
        return g
