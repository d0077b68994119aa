"""The facade rules query: one object per scan giving access to the index, the
configuration and every analysis provider (:mod:`auditor.analyses`).

Rules never walk syntax themselves; they ask the providers::

    analysis.scope.relevant_functions()      # what to examine
    analysis.calls.targets(...), .bind(...)  # what a call reaches, where arguments land
    analysis.flow.selects(...)               # does a parameter choose a layer?
    analysis.loops.loop_results()            # draft loops and what they hand over
"""

from __future__ import annotations

from typing import TypeVar

from . import (
    Analyses,
    CallProvider,
    CaptureProvider,
    DispatchProvider,
    FlowProvider,
    GraphProvider,
    LoopProvider,
    Provider,
    ReachabilityProvider,
    RegistryProvider,
    ScopeProvider,
    TypeProvider,
)
from ..common.config import Config
from ..index.index import FuncKey, Index
from ..model.findings import ClassReachability, Hop

P = TypeVar("P", bound=Provider)


class Analysis:
    def __init__(self, index: Index, config: Config) -> None:
        self.index = index
        self.config = config
        self.params: list[str] = list(config.threaded_params)
        self.providers = Analyses(index, config)

    def get(self, cls: type[P]) -> P:
        """Any provider, including ones added after this facade was written."""
        return self.providers.get(cls)

    @property
    def types(self) -> TypeProvider:
        return self.providers.get(TypeProvider)

    @property
    def registry(self) -> RegistryProvider:
        return self.providers.get(RegistryProvider)

    @property
    def calls(self) -> CallProvider:
        return self.providers.get(CallProvider)

    @property
    def flow(self) -> FlowProvider:
        return self.providers.get(FlowProvider)

    @property
    def loops(self) -> LoopProvider:
        return self.providers.get(LoopProvider)

    @property
    def scope(self) -> ScopeProvider:
        return self.providers.get(ScopeProvider)

    @property
    def reachability(self) -> ReachabilityProvider:
        return self.providers.get(ReachabilityProvider)

    @property
    def graph(self) -> GraphProvider:
        return self.providers.get(GraphProvider)

    @property
    def capture(self) -> CaptureProvider:
        return self.providers.get(CaptureProvider)

    @property
    def dispatch(self) -> DispatchProvider:
        return self.providers.get(DispatchProvider)

    def reachability_table(self) -> list[ClassReachability]:
        """The report's reachability table: per MTP class, the draft loops reaching it,
        refined by dispatch (issue 11)."""
        return self.dispatch.refine_reachability(self.reachability.reachability())

    def limits_hit(self) -> dict[str, int]:
        return self.providers.limits.as_dict()

    def prepare(self) -> None:
        """The loading phase: explore the draft loops and fix the set of functions rules
        examine (both may parse more files). The engine freezes the index after this.
        A platform plugin's monkeypatches are installed first, before any method is
        resolved."""
        from . import PluginProvider

        plugins = self.get(PluginProvider)
        plugins.install()
        self.scope.relevant_functions()
        # Issue 12: graph wrappers and the places that install them may live in files
        # nothing above reached (the model runner); load them now, after the functions
        # other rules examine are fixed, so those rules see the same set as before.
        self.capture.prepare()
        self.dispatch.prepare()
        # A plugin's patches of classes loaded by any of the above take effect before the freeze.
        plugins.settle_loaded()

    @staticmethod
    def hop(key: FuncKey, line: int, note: str) -> Hop:
        return Hop(key[0], line, key[1], note)
