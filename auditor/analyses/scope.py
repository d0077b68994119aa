"""The functions rules examine: every function of a seed file, and every method of a
class that is part of a draft model. Computed once, after the draft loops have been
explored (which loads what they reach), so findings never depend on the order in which
resolution happened to load files."""

from __future__ import annotations

from ..facts.extract import FunctionFact
from ..index.index import FuncKey
from .base import Analyses, Provider
from .loops import LoopProvider
from .registry import RegistryProvider


class ScopeProvider(Provider):
    dependencies = (LoopProvider, RegistryProvider)

    def __init__(self, analyses: Analyses) -> None:
        super().__init__(analyses)
        self.loops = self.dep(LoopProvider)
        self.registry = self.dep(RegistryProvider)
        self._relevant: list[tuple[FuncKey, FunctionFact]] | None = None

    def relevant_functions(self) -> list[tuple[FuncKey, FunctionFact]]:
        if self._relevant is None:
            self.loops.loop_results()
            keys: set[FuncKey] = set()
            for path in self.index.seeds:
                facts = self.index.facts.get(path)
                if facts is None:
                    continue
                keys.update((path, n) for n in facts.functions)
                for cname, cls in facts.classes.items():
                    keys.update((path, f"{cname}.{m}") for m in cls.methods)
            for mc in self.registry.model_classes():
                for part in self.registry.model_parts(mc):
                    keys.update(self.index.method_key(part, m) for m in self.index.methods(part))
            out = []
            displaced = self.registry.displaced()
            for k in sorted(keys):
                if self.index.replaced(k) or k in displaced:
                    continue  # patched away, or registered over, by a plugin: its code no longer runs
                fn = self.index.function(k)
                if fn is not None:
                    out.append((k, fn))
            self._relevant = out
        return self._relevant
