"""Draft model classes: the registry tables (architecture -> module, class), which of
their classes take part in step threading (MTP models), and every class whose code
runs as part of one (its MRO and the modules it holds, recursively)."""

from __future__ import annotations

from ..index.index import ClassKey, FuncKey, SymbolKind
from ..model.findings import ClassRef
from .base import Analyses, Provider
from .plugins import PluginProvider
from .types import REGISTRY, TypeProvider
from ..common.search_limits import limit



class RegistryProvider(Provider):
    dependencies = (TypeProvider, PluginProvider)

    def __init__(self, analyses: Analyses) -> None:
        super().__init__(analyses)
        self.types = self.dep(TypeProvider)
        self.plugins = self.dep(PluginProvider)
        self._registry: list[tuple[ClassKey, list[str]]] | None = None
        self._model_classes: list[ClassKey] | None = None
        self._parts: dict[ClassKey, frozenset[ClassKey]] = {}
        self._displaced_from: list[ClassKey] = []
        self._displaced: frozenset[FuncKey] | None = None

    def registered(self) -> tuple[list[tuple[ClassKey, list[str]]] | None, list[ClassKey] | None]:
        """:meth:`registry` and :meth:`model_classes` if asked already (they read the files
        loaded then): the loading phase's answers, kept per tree by :mod:`auditor.engine.prepared`."""
        return self._registry, self._model_classes

    def restore(self, registry: list[tuple[ClassKey, list[str]]] | None, model_classes: list[ClassKey] | None) -> None:
        """Take :meth:`registered` of a scan of the same files (no plugin: nothing displaced)."""
        self._registry = [(c, list(archs)) for c, archs in registry] if registry is not None else None
        self._model_classes = list(model_classes) if model_classes is not None else None

    def registry(self) -> list[tuple[ClassKey, list[str]]]:
        """Draft model classes from the registry tables, with their architecture names."""
        if self._registry is None:
            by_class: dict[ClassKey, list[str]] = {}
            for path, facts in list(self.index.loaded()):
                for tname, table in sorted(facts.tables.items()):
                    if tname not in self.config.registry_tables:
                        continue
                    for arch, entry in sorted(table.items()):
                        mpath = self.index.resolve_module_path(entry.module, path)
                        if mpath is None:
                            continue
                        for sym in self.index.resolve(mpath, entry.cls):
                            if sym.kind is SymbolKind.CLASS:
                                by_class.setdefault((sym.path, sym.name), []).append(arch)
            # A plugin's registration replaces the entry for its architecture.
            registered = self.plugins.registrations()
            if registered:
                self._displaced_from = sorted(by_class)
                taken = {r.arch for r in registered}
                by_class = {c: kept for c, archs in by_class.items() if (kept := [a for a in archs if a not in taken])}
                for r in registered:
                    by_class.setdefault(r.cls, []).append(r.arch)
            self._registry = sorted(by_class.items())
        return self._registry

    def displaced(self) -> frozenset[FuncKey]:
        """Methods of draft model classes that a plugin's registrations took every
        architecture from, which no registered class still runs (each overrides them):
        under the plugin their code no longer runs as a draft model."""
        if self._displaced is None:
            current = self.registry()
            out: set[FuncKey] = set()
            kept = {c for c, _ in current}
            for cls in self._displaced_from:
                if cls in kept:
                    continue
                heirs = [other for other, _ in current if cls in self.index.mro(other)]
                for name in sorted(self.index.methods(cls)):
                    key = self.index.method_key(cls, name)
                    still = False
                    for other in heirs:
                        found = self.index.method(other, name)
                        if found is None:
                            continue
                        # Still run: inherited as is, or called from the override
                        # (``super().name(...)``, ``VllmClass.name(self, ...)``).
                        if self.index.method_key(found[0], name) == key or any(
                            c.func is not None and c.func[-1] == name and c.func[0] in ("super()", cls[1])
                            for c in found[1].calls
                        ):
                            still = True
                            break
                    if not still:
                        out.add(key)
            self._displaced = frozenset(out)
        return self._displaced

    def architectures(self, cls: ClassKey) -> list[str]:
        for c, archs in self.registry():
            if c == cls:
                return archs
        return []

    def declares_step(self, cls: ClassKey) -> bool:
        """A method of the class itself takes a threaded parameter."""
        return any(p in m.param_names for m in self.index.methods(cls).values() for p in self.params)

    def step_aware(self, cls: ClassKey, depth: int = 0) -> bool:
        """A class, or a module it holds, has a method taking or reading a threaded parameter."""
        for c in self.index.mro(cls):
            for m in self.index.methods(c).values():
                if any(p in m.param_names or ("self." + p) in m.live for p in self.params):
                    return True
        held = [t for t in self.types.held_types(cls) if t != REGISTRY]
        if depth >= limit(self.config.search_limits, "held-module depth"):
            if held:
                self.limits.hit("held-module depth")
            return False
        return any(self.step_aware(t, depth + 1) for t in held)

    def model_classes(self) -> list[ClassKey]:
        """Draft model classes that take part in step threading (MTP models)."""
        if self._model_classes is None:
            reg = [c for c, _ in self.registry() if self.step_aware(c)]
            if not reg:
                # No registry in this tree (a fixture, a vendored subset): every
                # step-aware class that no other step-aware class holds is a model.
                aware = [c for c in self.index.all_classes() if self.declares_step(c)]
                held: set[ClassKey] = set()
                for c in aware:
                    for t in self.types.held_types(c):
                        if t != REGISTRY:
                            held.update(self.index.mro(t))
                reg = [c for c in aware if c not in held]
            self._model_classes = sorted(set(reg))
        return self._model_classes

    def model_parts(self, cls: ClassKey) -> frozenset[ClassKey]:
        """Every class whose code runs as part of a model: its MRO and held modules, recursively."""
        found = self._parts.get(cls)
        if found is not None:
            return found
        parts: set[ClassKey] = set()
        todo = [cls]
        while todo:
            if len(parts) >= limit(self.config.search_limits, "model parts"):
                self.limits.hit("model parts")
                break
            c = todo.pop()
            for m in self.index.mro(c):
                if m in parts:
                    continue
                parts.add(m)
                todo.extend(t for t in self.types.held_types(m) if t != REGISTRY)
        found = frozenset(parts)
        self._parts[cls] = found
        return found

    def affected_models(self, func: FuncKey) -> list[ClassRef]:
        owner = self.types.defining_class(func)
        if owner is None:
            return []
        name = func[1].rpartition(".")[2]

        def runs(c: ClassKey) -> bool:
            # A base of the class runs it only where the class's MRO resolves the name to it (a
            # subclass's override runs instead); a part it holds runs its own.
            if owner not in self.index.mro(c):
                return True
            hit = self.index.method(c, name)
            return hit is not None and hit[0] == owner

        return [ClassRef(*c) for c in self.model_classes() if owner in self.model_parts(c) and runs(c)]
