"""A platform plugin's own dispatch: plugin runner classes, the factories they reach, and
the entry methods of the drafters they build."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from ...index.index import ClassKey, FuncKey, SymbolKind
from .part import DispatchPart

if TYPE_CHECKING:
    from .provider import DispatchProvider


class PluginDispatch(DispatchPart):
    def __init__(self, provider: DispatchProvider) -> None:
        super().__init__(provider)
        # Plugin runner classes that reach a factory of their own: (class, vLLM classes it
        # subclasses, its factories).
        self._plugin_runners: list[tuple[ClassKey, tuple[ClassKey, ...], tuple[FuncKey, ...]]] = []

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
        in_plugin = self.in_plugin
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

    def in_plugin(self, path: str) -> bool:
        root_of = getattr(self.index.tree, "root_of", None)
        return bool(root_of is not None and root_of(path).plugin)

    def plugin_entries(self, drafter: ClassKey) -> list[str]:
        """The draft entry methods of a drafter a plugin's factory builds: where vLLM's
        runner class calls a configured entry (``self.drafter.propose(...)`` in some
        method M), the plugin runner's own M calls the drafter through the same attribute;
        the methods it calls there that the plugin defines for this drafter (``_propose``)
        are the entries — the plugin's own draft loop, not vLLM's."""
        self.provider.location.factories()
        entries = set(self.config.proposer_entries)
        out: list[str] = []
        for runner_cls, owners, factories in self._plugin_runners:
            if not any(drafter in self.provider.location.built_classes(f) for f in factories):
                continue
            for owner in owners:
                for name, fn in sorted(self.index.methods(owner).items()):
                    attrs = {c.func[1] for c in fn.calls if c.func and len(c.func) == 3 and c.func[0] == "self"
                             and c.func[2] in entries}
                    mine = self.index.method(runner_cls, name)
                    if not attrs or mine is None or not self.in_plugin(mine[0][0]):
                        continue
                    for c in mine[1].calls:
                        if c.func and len(c.func) == 3 and c.func[0] == "self" and c.func[1] in attrs:
                            hit = self.index.method(drafter, c.func[2])
                            if hit is not None and self.in_plugin(hit[0][0]):
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
            if in_plugin(fkey[0]) and self.provider.location.built_classes(fkey):
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
