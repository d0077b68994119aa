"""A drafter's draft loops, explored with ``self`` of the drafter, and what they hand the
draft models per step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...facts.extract import FunctionFact
from ...index.index import ClassKey, FuncKey
from ...index.self_calls import bound_methods, self_call_closure
from ..loops import FORWARD_METHODS, LoopResult, StepKind
from .part import DispatchPart

if TYPE_CHECKING:
    from .provider import DispatchProvider


class DrafterLoops(DispatchPart):
    def __init__(self, provider: DispatchProvider) -> None:
        super().__init__(provider)
        self._loop_memo: dict[tuple[ClassKey, FuncKey, int], LoopResult] = {}
        self._per_step: dict[ClassKey, bool] = {}

    def explored_loops(self) -> dict[tuple[ClassKey, FuncKey, int], LoopResult]:
        """Every loop explored so far: (drafter, loop's function, loop id) -> its result. The
        loading phase's are kept per tree (:mod:`auditor.engine.prepared`), which gives them
        back to a new scan of the same files (they read no configuration)."""
        return self._loop_memo

    def explored(self, cls: ClassKey) -> bool:
        """Whether a loop of drafter ``cls`` was explored (it may have parsed files)."""
        return any(k[0] == cls for k in self._loop_memo)

    def entry_methods(self, cls: ClassKey) -> list[tuple[FuncKey, FunctionFact]]:
        """Methods reachable through ``self.m()`` calls from the drafter's entry methods
        (a plugin's own, else ``proposer-entries``), bound methods called through an
        attribute included: the walk the loop provider takes for proposing code."""
        entries = self.provider.plugin_dispatch.plugin_entries(cls) or list(self.config.proposer_entries)
        return [((owner[0], f"{owner[1]}.{name}"), fn)
                for owner, name, fn in self_call_closure(self.index, cls, entries, bound_methods(self.index, cls))]

    def drafter_loops(self, cls: ClassKey) -> list[LoopResult]:
        """The draft loops an instance of ``cls`` runs, explored with ``self`` of that class."""
        methods = self.entry_methods(cls)
        # The entry methods are the drafter's proposing code: a ``range`` loop there that
        # runs the draft model is a draft loop whatever its count is called (a tree's levels).
        proposing = True
        if not any(self.loops.loops_in(fn) for _, fn in methods):
            proposing = False
            methods = []
            for c in self.index.mro(cls):
                for name, fn in sorted(self.index.methods(c).items()):
                    methods.append(((c[0], f"{c[1]}.{name}"), fn))
        out = []
        for fkey, fn in sorted(methods, key=lambda m: (m[0], m[1].line)):
            for loop in self.loops.loops_in(fn, proposing):
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
        return any(s.model_class == model and s.method in FORWARD_METHODS and s.position is None
                   for r in self.drafter_loops(drafter) for s in r.selections)
