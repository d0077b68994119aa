"""What an attribute or a call can hold: classes of ``self.<attr>``, of a function's
return value, and the module containers (``ModuleList``/``ModuleDict``) a class builds.

``REGISTRY`` stands for "a draft model built by a registry loader" (``get_model``): the
calls provider fans it out over every draft model class.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..facts.extract import ExprFact, FunctionFact
from ..index.index import ClassKey, FuncKey, SymbolKind
from .base import Analyses, FixpointMemo, FixpointStack, Provider
from ..common.search_limits import limit

REGISTRY: ClassKey = ("<registry>", "<draft models>")
# torch.nn containers whose members a model selects by index (nn.Module semantics).
MODULE_CONTAINERS = frozenset({"ModuleList", "ModuleDict"})

Types = tuple[ClassKey, ...]


@dataclass(frozen=True)
class Container:
    """``self.<attr> = nn.ModuleList(...)`` in a method of ``owner``."""

    owner: ClassKey
    attr: str
    line: int
    config_fields: tuple[str, ...]  # config fields read by the value (its size, usually)
    size_attrs: tuple[str, ...]  # self attributes the value reads (self.num_mtp_layers)
    iterated: bool  # the class iterates over it (a stack of layers, not alternatives)


class TypeProvider(Provider):
    def __init__(self, analyses: Analyses) -> None:
        super().__init__(analyses)
        # attr_types and returned_types ask each other: one stack, one fixpoint.
        stack = FixpointStack()
        self._attrs: FixpointMemo[tuple[ClassKey, str], Types] = FixpointMemo(
            tuple, self.limits, "attribute types", stack=stack)
        self._returns: FixpointMemo[tuple[FuncKey, ClassKey | None], Types] = FixpointMemo(
            tuple, self.limits, "return types", stack=stack
        )
        self._held: dict[ClassKey, Types] = {}
        self._containers: dict[ClassKey, tuple[Container, ...]] = {}

    def memos(self) -> tuple[dict[tuple[ClassKey, str], Types], dict[tuple[FuncKey, ClassKey | None], Types]]:
        """The attribute-type and return-type answers found so far (mutable: a scan restored
        from :mod:`auditor.engine.prepared` gives back the loading phase's)."""
        return self._attrs.finished(), self._returns.finished()

    def defining_class(self, key: FuncKey) -> ClassKey | None:
        cls, _, _ = key[1].rpartition(".")
        if not cls:
            return self.index.patched_owner(key)  # a plugin's function patched onto a class
        facts = self.index.load(key[0])
        if facts is not None and cls in facts.classes:
            return (key[0], cls)
        return None

    def self_attributes(self, cls: ClassKey) -> list[str]:
        """Attributes ``self.<a> = ...`` assigned anywhere in the class or its bases."""
        attrs: set[str] = set()
        for c in self.index.mro(cls):
            for m in self.index.methods(c).values():
                for s in m.attr_assigns:
                    if len(s.target) == 2 and s.target[0] == "self":
                        attrs.add(s.target[1])
        return sorted(attrs)

    def held_types(self, cls: ClassKey) -> Types:
        """Classes of every ``self.<attr>`` of the class."""
        found = self._held.get(cls)
        if found is None:
            out: list[ClassKey] = []
            for a in self.self_attributes(cls):
                out.extend(self.attr_types(cls, a))
            found = tuple(dict.fromkeys(out))
            if not self._attrs_unfinished():
                self._held[cls] = found
        return found

    def _attrs_unfinished(self) -> bool:
        return bool(self._attrs.stack)

    def attr_types(self, cls: ClassKey, attr: str) -> Types:
        return self._attrs.query((cls, attr), lambda: self._attr_types(cls, attr))

    def _attr_types(self, cls: ClassKey, attr: str) -> Types:
        out: list[ClassKey] = []
        for c in self.index.mro(cls):
            found = False
            for mname, m in sorted(self.index.methods(c).items()):
                for s in m.attr_assigns:
                    if s.target == ("self", attr):
                        found = True
                        out.extend(self.value_types(cls, (c[0], f"{c[1]}.{mname}"), m, s.value, 0))
            if found:
                break  # the most derived class that assigns the attribute wins
        return tuple(dict.fromkeys(out))

    def value_types(self, ctx: ClassKey | None, fkey: FuncKey, fn: FunctionFact, e: ExprFact, depth: int) -> list[ClassKey]:
        """Classes an expression evaluated in ``fn`` (of class ``ctx``) can be an instance of."""
        if depth > limit(self.config.search_limits, "value type depth"):
            self.limits.hit("value type depth")
            return []
        call, ch = e.called, e.chain
        if call:
            if call[0] == "self" and len(call) == 2 and ctx is not None:
                found = self.index.method(ctx, call[1])
                if found:
                    return list(self.returned_types(self.index.method_key(found[0], call[1]), ctx))
                return []
            if call[0] in ("self", "super()"):
                return []
            if call[-1] in self.config.loaders:
                return [REGISTRY]
            if len(call) == 1 and fn.assigns.get(call[0]):
                return []
            out: list[ClassKey] = []
            for sym in self.index.resolve_chain(fkey[0], call):
                if sym.kind is SymbolKind.CLASS:
                    cf = self.index.class_fact((sym.path, sym.name))
                    if cf is not None and cf.name in MODULE_CONTAINERS:
                        continue
                    out.append((sym.path, sym.name))
                elif sym.kind is SymbolKind.FUNCTION:
                    key = (sym.path, sym.name)
                    out.extend(self.returned_types(key, self.defining_class(key)))
            return out
        if ch:
            if ch[0] == "self" and len(ch) == 2 and ctx is not None:
                return list(self.attr_types(ctx, ch[1]))
            if len(ch) == 1 and ch[0] in fn.assigns:
                out = []
                for alt in fn.assigns[ch[0]]:
                    if alt.chain != ch:
                        out.extend(self.value_types(ctx, fkey, fn, alt, depth + 1))
                return out
        return []

    def returned_types(self, fkey: FuncKey, ctx: ClassKey | None) -> Types:
        return self._returns.query((fkey, ctx), lambda: self._returned_types(fkey, ctx))

    def _returned_types(self, fkey: FuncKey, ctx: ClassKey | None) -> Types:
        fn = self.index.function(fkey)
        if fn is None:
            return ()
        if fkey[1].rpartition(".")[2] in self.config.loaders:
            return (REGISTRY,)
        out: list[ClassKey] = []
        for r in fn.returns:
            out.extend(self.value_types(ctx, fkey, fn, r, 1))
        return tuple(dict.fromkeys(out))

    def containers(self, cls: ClassKey) -> tuple[Container, ...]:
        """Module containers the class (or a base) builds, with the config fields that size them."""
        found = self._containers.get(cls)
        if found is not None:
            return found
        sets = []
        iterated: set[str] = set()
        by_attr: dict[str, list[ExprFact]] = {}
        # A container built empty is sized by the loops that fill it (``for i in
        # range(n): self.layers[str(i)] = ...``): what their counts read, per attribute.
        fills: dict[str, list[str]] = {}
        for c in self.index.mro(cls):
            for m in self.index.methods(c).values():
                for s in m.attr_assigns:
                    if len(s.target) == 2 and s.target[0] == "self":
                        by_attr.setdefault(s.target[1], []).append(s.value)
                        if s.value.called and s.value.called[-1] in MODULE_CONTAINERS:
                            sets.append((c, s))
                for loop in m.loops:
                    iterated.update(n[5:] for n in loop.iter.names if n.startswith("self."))
                    for st in loop.stores:
                        if len(st) == 2 and st[0] == "self":
                            fills.setdefault(st[1], []).extend(_count_reads(m, loop.iter))
        out: list[Container] = []
        for owner, s in sets:
            attr = s.target[1]
            reads = list(s.value.names)
            if not s.value.config_fields and not any(n.startswith("self.") for n in reads):
                reads += fills.get(attr, [])
            size_attrs = tuple(dict.fromkeys(n[5:] for n in reads if n.startswith("self.")))
            fields = set(s.value.config_fields)
            for a in size_attrs:
                for v in by_attr.get(a, []):
                    fields.update(v.config_fields)
            out.append(Container(owner, attr, s.line, tuple(sorted(fields)), size_attrs, attr in iterated))
        found = tuple(out)
        self._containers[cls] = found
        return found


def _count_reads(fn: FunctionFact, count: ExprFact) -> list[str]:
    """The names a loop's count reads, with a local it reads replaced by what the local's
    values read (``total = self.n * self.m`` then ``range(total)``: ``self.n``, ``self.m``)."""
    out: list[str] = []
    for n in count.names:
        out.append(n)
        for v in fn.assigns.get(n, ()):
            out.extend(v.names)
    return out
