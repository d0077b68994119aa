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
    # Built from a literal (``nn.ModuleDict({"0": X(...)})``, ``nn.ModuleList([a, b])``), the
    # one assignment of the attribute in the class's hierarchy, and never
    # changed there (see :func:`_changed`): its keys in order (a ModuleList's: 0..n-1), so
    # its layer count. None: any other container.
    keys: tuple[str | int, ...] | None = None

    @property
    def count(self) -> int | None:
        """The number of layers a literal container holds (None: not known from the source)."""
        return len(self.keys) if self.keys is not None else None

    def position(self, key: object) -> int | None:
        """The position of the entry ``self.<attr>[key]`` reads, ``key`` a constant: a literal
        key of a ModuleDict, an int index of a ModuleList within its entries (negative from
        the end, as ``nn.ModuleList.__getitem__``); None otherwise (a KeyError, an IndexError,
        a TypeError, or keys not known)."""
        if self.keys is None or isinstance(key, bool):
            return None
        if all(isinstance(k, int) for k in self.keys):
            if type(key) is int and -len(self.keys) <= key < len(self.keys):
                return key % len(self.keys)
            return None
        if type(key) is str and key in self.keys:
            return self.keys.index(key)
        return None


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
        methods = [m for c in self.index.mro(cls) for m in self.index.methods(c).values()]
        out: list[Container] = []
        for owner, s in sets:
            attr = s.target[1]
            keys: tuple[str | int, ...] | None = None
            # The one assignment of the attribute (in an ``if`` arm or not: whenever the
            # attribute exists, it holds this container).
            if len(by_attr[attr]) == 1 and not _changed(methods, attr):
                kind = s.value.called[-1] if s.value.called else None
                if kind == "ModuleList" and s.entries is not None and s.keys is None:
                    keys = tuple(range(s.entries))
                elif kind == "ModuleDict" and s.keys is not None:
                    keys = s.keys
            reads = list(s.value.names)
            if not s.value.config_fields and not any(n.startswith("self.") for n in reads):
                reads += fills.get(attr, [])
            size_attrs = tuple(dict.fromkeys(n[5:] for n in reads if n.startswith("self.")))
            fields = set(s.value.config_fields)
            for a in size_attrs:
                for v in by_attr.get(a, []):
                    fields.update(v.config_fields)
            out.append(Container(owner, attr, s.line, tuple(sorted(fields)), size_attrs, attr in iterated, keys))
        found = tuple(out)
        self._containers[cls] = found
        return found

    def literal_container(self, cls: ClassKey, attr: str) -> Container | None:
        """The container ``self.<attr>`` of ``cls`` when it is built from a literal (its keys
        known: :attr:`Container.keys`); None otherwise."""
        found = [c for c in self.containers(cls) if c.attr == attr]
        return found[0] if len(found) == 1 and found[0].keys is not None else None


def _count_reads(fn: FunctionFact, count: ExprFact) -> list[str]:
    """The names a loop's count reads, with a local it reads replaced by what the local's
    values read (``total = self.n * self.m`` then ``range(total)``: ``self.n``, ``self.m``)."""
    out: list[str] = []
    for n in count.names:
        out.append(n)
        for v in fn.assigns.get(n, ()):
            out.extend(v.names)
    return out


# Methods of ``list``/``dict`` and of ``nn.ModuleList``/``nn.ModuleDict``/``nn.Module`` that
# add, remove or replace a container's entries.
_MUTATORS = frozenset({"append", "extend", "insert", "pop", "popitem", "clear", "update", "setdefault", "remove",
                       "add_module", "register_module", "__setitem__", "__delitem__", "__iadd__", "__init__"})
# Builtins that only read what they are handed (a container passed to any other call may be changed there).
_READERS = frozenset({"len", "enumerate", "zip", "iter", "reversed", "list", "tuple", "sorted", "isinstance",
                      "hasattr", "id", "type", "repr", "str", "print"})


def _changed(methods: list[FunctionFact], attr: str) -> bool:
    """Whether a method may change the entries of ``self.<attr>`` after it is built: a store
    into it or a ``del`` (``self.layers["1"] = ...``), an augmented assignment, a call of a
    method that adds or removes entries, the container handed to any call but a reading
    builtin (``setattr(self.layers, ...)``, a helper), each also through a local that holds it."""
    for m in methods:
        aliases = {n: vals for n, vals in m.assigns.items() if any(v.chain == ("self", attr) for v in vals)}
        if any(len(vals) > 1 for vals in aliases.values()):
            return True  # a local that also holds another value (``layers += [...]`` among them)
        names = {("self", attr)} | {(n,) for n in aliases}
        if names.intersection(m.stores) or names.intersection(m.aug_attrs):
            return True
        for call in m.calls:
            f = call.func
            if f is not None and len(f) >= 2 and f[:-1] in names and f[-1] in _MUTATORS:
                return True
            if f is not None and f in names:
                continue  # calling the container (an nn.Module's forward) changes no entry
            handed = [*call.args, *(k.value for k in call.keywords), *call.star_args, *call.star_kwargs]
            if any(a.chain in names for a in handed) and not (f is not None and len(f) == 1 and f[0] in _READERS):
                return True
    return False
