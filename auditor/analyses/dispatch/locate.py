"""Where the dispatch code is: the configured factory and override functions in the tree,
the drafters a factory builds, the speculative-config class that holds the predicates."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...facts.extract import PCall, PExpr, PName, SAssign, SReturn
from ...index.index import ClassKey, FuncKey, SymbolKind
from .syntax import name_chain, walk
from .part import DispatchPart

if TYPE_CHECKING:
    from .provider import DispatchProvider


class FactoryLocation(DispatchPart):
    def __init__(self, provider: DispatchProvider) -> None:
        super().__init__(provider)
        self._located: dict[str, list[FuncKey]] | None = None
        self._factories: dict[str, list[FuncKey]] | None = None
        self._drafter: dict[ClassKey, bool] = {}
        self._built: dict[FuncKey, list[ClassKey]] = {}  # once the index is frozen (the rules ask often)
        self._overrides: tuple[dict[str, list[FuncKey]], list[FuncKey]] | None = None  # per located functions

    def located(self) -> dict[str, list[FuncKey]] | None:
        """The functions under the configured factory and override names, if looked for
        already (among the files loaded then): kept per tree by :mod:`auditor.engine.prepared`."""
        return self._located

    def restore_located(self, located: dict[str, list[FuncKey]]) -> None:
        self._located = {n: list(v) for n, v in located.items()}

    def _locate_all(self) -> dict[str, list[FuncKey]]:
        if self._located is not None:
            return self._located
        names = sorted({n for ns in self.config.dispatch_factories.values() for n in ns} | set(self.config.config_overrides)
                       | {n for ns in self.config.runner_validations.values() for n in ns} | set(self.config.weight_load_checks)
                       | {n for ns in self.config.runner_selectors.values() for n in ns}
                       | set(self.config.env_validations))
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
            r: [k for n in ns for k in located.get(n, []) if self.builds_computed_class(k) or self.built_classes(k)]
            for r, ns in sorted(self.config.dispatch_factories.items())
        }
        for r, keys in self.provider.plugin_dispatch.plugin_factories(out).items():
            out[r] = keys
        self._factories = out
        return out

    def builds_computed_class(self, fkey: FuncKey) -> bool:
        """The function returns an object of a class it computes (``cls = resolve(name)``, then
        ``return cls(...)``): a call of a local it assigns, where no class or function of the
        module has that name. Which class is built is what running it says."""
        fn = self.provider.bodies.function(fkey)
        if fn is None:
            return False
        assigned = {t.id for s in walk(fn.body) if isinstance(s, SAssign) for t in s.targets if isinstance(t, PName)}
        for s in walk(fn.body):
            value = s.value if isinstance(s, SReturn) else None
            if isinstance(value, PCall) and isinstance(value.func, PName) and value.func.id in assigned \
                    and not self.index.resolve(fkey[0], value.func.id):
                return True
        return False

    def overrides(self) -> list[FuncKey]:
        located = self._locate_all()
        if self._overrides is not None and self._overrides[0] is located:
            return list(self._overrides[1])
        out = []
        found_all = True
        for n in self.config.config_overrides:
            for k in located.get(n, []):
                fn = self.index.function(k)
                found_all &= fn is not None
                if fn is not None and self.provider.family_facts.writes_override_field(fn.body):
                    out.append(k)
        if found_all:  # the same located functions give the same answer (routes ask per architecture)
            self._overrides = (located, out)
        return list(out)

    def runner_validations(self, runner: str) -> list[FuncKey]:
        """The runner's own validation functions (``runner-validations``) in the tree."""
        located = self._locate_all()
        return [k for n in self.config.runner_validations.get(runner, []) for k in located.get(n, [])]

    def runner_selectors(self) -> dict[str, list[FuncKey]]:
        """Per runner, the engine config's property that is true when vLLM uses it
        (``runner-selectors``), in the tree."""
        located = self._locate_all()
        return {r: [k for n in ns for k in located.get(n, [])] for r, ns in sorted(self.config.runner_selectors.items())}

    def env_validations(self) -> list[FuncKey]:
        """The engine's checks of the process environment (``env-validations``) in the tree."""
        located = self._locate_all()
        # (two names may locate one function: ``validate_environ`` also names the method)
        return list(dict.fromkeys(k for n in self.config.env_validations for k in located.get(n, [])))

    def weight_load_checks(self) -> list[FuncKey]:
        """vLLM's load-time checks of the weights (``weight-load-checks``) in the tree, in order."""
        located = self._locate_all()
        return [k for n in self.config.weight_load_checks for k in located.get(n, [])]

    def spec_config_class(self) -> ClassKey | None:
        """The class holding the override function: its methods are the predicates."""
        for k in self.overrides():
            cls = self.types.defining_class(k)
            if cls is not None:
                return cls
        return None

    def is_drafter(self, cls: ClassKey) -> bool:
        found = self._drafter.get(cls)
        if found is None:
            found = any(self.loops.loops_in(m) for c in self.index.mro(cls) for m in self.index.methods(c).values())
            self._drafter[cls] = found
        return found

    def resolve_class(self, path: str, func: PExpr) -> ClassKey | None:
        ch = name_chain(func)
        if ch is None:
            return None
        for sym in self.index.resolve_chain(path, ch):
            if sym.kind is SymbolKind.CLASS:
                return (sym.path, sym.name)
        return None

    def built_classes(self, fkey: FuncKey) -> list[ClassKey]:
        memo = self._built.get(fkey) if self.index.frozen else None
        if memo is not None:
            return memo
        fn = self.index.function(fkey)
        out: list[ClassKey] = []
        for stmt in walk(fn.body if fn else ()):
            value = stmt.value if isinstance(stmt, (SReturn, SAssign)) else None
            if isinstance(value, PCall):
                cls = self.resolve_class(fkey[0], value.func)
                if cls is not None and self.is_drafter(cls):
                    out.append(cls)
        if not out and self.builds_computed_class(fkey):
            # The class is computed: the drafters its runs build, for every method and
            # architecture the load routes run it for (MTP's and the draft-model methods').
            out = [rt.drafter for rt in self.provider.load_routes.load_routes()
                   if (rt.site.path, rt.site.function) == fkey]
        built = list(dict.fromkeys(out))
        if self.index.frozen:  # while the index loads, a later call may resolve more
            self._built[fkey] = built
        return built
