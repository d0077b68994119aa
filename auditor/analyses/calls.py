"""Call resolution and argument binding.

* :meth:`CallProvider.resolve_call` — the functions a call site can reach
  (``self.m()``, ``super().m()``, MRO, ``self.attr(...)`` -> ``__call__``/``forward``,
  ``self.a.b.m()``, local aliases, module functions, callables passed as arguments,
  and the registry fan-out over draft model classes).
* :meth:`CallProvider.bind` — which callee parameter each argument lands in (keyword,
  positional through the signature, ``**kwargs`` forwarding, ``**d`` for dicts built in
  the caller).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable

from ..facts.extract import CallFact, Chain, ExprFact, FunctionFact, ParamKind
from ..index.index import ClassKey, FuncKey, SymbolKind
from .base import Analyses, Provider
from .registry import RegistryProvider
from .types import REGISTRY, TypeProvider
from ..common.search_limits import limit


# An object a chain can denote: its class, and the draft model class whose code it is
# part of when it was reached through the registry fan-out.
Obj = tuple[ClassKey, ClassKey | None]
Callables = dict[str, list[Obj]]


@dataclass(frozen=True)
class Target:
    func: FuncKey
    ctx: ClassKey | None  # the receiver's class (``self`` inside the callee)
    bound: bool  # first parameter is self/cls and is not in the argument list
    model_class: ClassKey | None = None  # the draft model class a registry fan-out entered


class PassKind(str, Enum):
    POSITIONAL = "positional"
    KEYWORD = "keyword"
    DICT = "dict"  # a key of a dict built in the caller and expanded with **
    PARAM_DICT = "param-dict"  # a key of a dict the caller itself received as a parameter


@dataclass(frozen=True)
class ArgSource:
    """What lands in one callee parameter, and how it got there."""

    expr: ExprFact
    how: PassKind
    dict_name: str | None = None  # for the dict kinds: the expanded dict's name in the caller
    dict_key: str | None = None  # ... and the key

    def describe(self) -> str:
        return f"**{self.dict_name}" if self.dict_name is not None else self.how.value


@dataclass
class Binding:
    """Where each argument of one call lands in one callee's signature."""

    params: dict[str, ArgSource] = field(default_factory=dict)  # callee param -> source
    unknown_keywords: list[str] = field(default_factory=list)
    forwards_kwargs: bool = False
    opaque_dicts: list[str] = field(default_factory=list)  # **d whose keys are not known here
    # positional arguments (their indexes) beyond the callee's positional parameters, when
    # it has no ``*args``: Python raises TypeError (too many positional arguments)
    extra_positional: list[int] = field(default_factory=list)
    # the callee parameter each positional argument binds to, by argument index (those
    # that land in ``*args`` or beyond have none; none at all when the call has ``*x``)
    slots: list[str] = field(default_factory=list)
    # keywords naming a parameter a positional argument already fills -> that argument's
    # index: Python raises TypeError (multiple values for the argument)
    duplicates: dict[str, int] = field(default_factory=dict)


class CallProvider(Provider):
    dependencies = (TypeProvider, RegistryProvider)

    def __init__(self, analyses: Analyses) -> None:
        super().__init__(analyses)
        self.types = self.dep(TypeProvider)
        self.registry = self.dep(RegistryProvider)
        self._chains: dict[tuple[ClassKey | None, Chain, ClassKey | None], list[Obj]] = {}
        self._targets: dict[tuple[FuncKey, ClassKey | None, int], list[Target]] = {}
        self._registry_pairs: list[Obj] | None = None
        # resolve_site / bind_site: (files the index held, the answer[, what it was for])
        self._sites: dict[tuple[object, ...], tuple[int, list[Target]]] = {}
        self._bindings: dict[tuple[int, int, Target], tuple[int, Binding, CallFact, FunctionFact]] = {}

    # -- objects ---------------------------------------------------------
    def expand(self, objs: Iterable[ClassKey], model_class: ClassKey | None) -> list[Obj]:
        out: list[Obj] = []
        for o in objs:
            if o == REGISTRY:
                if self._registry_pairs is None:
                    self._registry_pairs = [(m, m) for m in self.registry.model_classes()]
                out.extend(self._registry_pairs)
            else:
                out.append((o, model_class))
        return out

    def objects_of_chain(self, ctx: ClassKey | None, parts: Chain, model_class: ClassKey | None) -> list[Obj]:
        """Types of ``self.parts[0].parts[1]...`` starting from ``ctx``."""
        key = (ctx, parts, model_class)
        cached = self._chains.get(key)
        if cached is not None:
            return cached
        objs: list[Obj] = [(ctx, model_class)] if ctx else []
        for part in parts:
            nxt: list[Obj] = []
            for o, mc in objs:
                nxt.extend(self.expand(self.types.attr_types(o, part), mc))
            objs = list(dict.fromkeys(nxt))
        self._chains[key] = objs
        return objs

    def call_object(self, obj: ClassKey, model_class: ClassKey | None) -> list[Target]:
        """Calling an instance: its own ``__call__`` if the tree defines one, else ``forward``."""
        for name in ("__call__", "forward"):
            found = self.index.method(obj, name)
            if found:
                return [Target(self.index.method_key(found[0], name), obj, True, model_class)]
        return []

    def _member_call(self, objs: list[Obj], name: str) -> list[Target]:
        out: list[Target] = []
        for o, mc in objs:
            found = self.index.method(o, name)
            if found:
                out.append(Target(self.index.method_key(found[0], name), o, True, mc))
                continue
            for t, mc2 in self.expand(self.types.attr_types(o, name), mc):
                out.extend(self.call_object(t, mc2))
        return list(dict.fromkeys(out))

    # -- resolution --------------------------------------------------------
    def resolve_call(
        self,
        fkey: FuncKey,
        fn: FunctionFact,
        ctx: ClassKey | None,
        chain: Chain | None,
        callables: Callables | None = None,
        model_class: ClassKey | None = None,
        _depth: int = 0,
    ) -> list[Target]:
        if not chain:
            return []
        if _depth > limit(self.config.search_limits, "local alias depth"):
            self.limits.hit("local alias depth")
            return []
        head = chain[0]
        if head == "super()":
            owner = self.types.defining_class(fkey)
            if ctx is None or owner is None or len(chain) != 2:
                return []
            found = self.index.method(ctx, chain[1], after=owner)
            if found:
                return [Target(self.index.method_key(found[0], chain[1]), ctx, True, model_class)]
            return []
        if head == "self" and ctx is not None:
            if len(chain) == 1:
                return self.call_object(ctx, model_class)
            return self._member_call(self.objects_of_chain(ctx, chain[1:-1], model_class), chain[-1])
        if callables and head in callables:
            objs = list(callables[head])
            if len(chain) == 1:
                out: list[Target] = []
                for o, mc in objs:
                    out.extend(self.call_object(o, mc))
                return out
            for part in chain[1:-1]:
                nxt: list[Obj] = []
                for o, mc in objs:
                    nxt.extend(self.expand(self.types.attr_types(o, part), mc))
                objs = nxt
            return self._member_call(objs, chain[-1])
        if head in fn.assigns:
            # A local alias of an attribute chain (model = self.model).
            out = []
            for alt in fn.assigns[head]:
                ach = alt.chain
                if ach and ach[0] == "self" and len(ach) >= 2:
                    out.extend(self.resolve_call(fkey, fn, ctx, ach + chain[1:], callables, model_class, _depth + 1))
            return out
        if head in fn.param_names:
            return []
        out = []
        for sym in self.index.resolve_chain(fkey[0], chain):
            if sym.kind is SymbolKind.FUNCTION:
                key = self.index.replacement((sym.path, sym.name))  # a plugin may have patched it
                out.append(Target(key, self.types.defining_class(key), False, model_class))
        return out

    def targets(self, fkey: FuncKey, fn: FunctionFact, ctx: ClassKey | None, ci: int) -> list[Target]:
        """Context-free resolution of call number ``ci`` of ``fkey`` (memoised)."""
        key = (fkey, ctx, ci)
        found = self._targets.get(key)
        if found is None:
            found = self.resolve_call(fkey, fn, ctx, fn.calls[ci].func)
            self._targets[key] = found
        return found

    def resolve_site(self, fkey: FuncKey, fn: FunctionFact, ctx: ClassKey | None, ci: int,
                     callables: Callables, model_class: ClassKey | None) -> list[Target]:
        """:meth:`resolve_call` of call number ``ci`` of ``fkey`` in one context, memoised while
        the index holds the same files (a draft loop's walk asks the same site in the same
        context many times). A resolution that cut a search short is never kept, so every ask
        counts its limits as it did before. The list is shared: callers must not change it."""
        ck = tuple(sorted((k, tuple(v)) for k, v in callables.items())) if callables else ()
        key = (fkey, ctx, ci, ck, model_class)
        held = len(self.index.facts)
        hit = self._sites.get(key)
        if hit is not None and hit[0] == held:
            return hit[1]
        before = sum(self.limits.hits.values())
        found = self.resolve_call(fkey, fn, ctx, fn.calls[ci].func, callables, model_class)
        if sum(self.limits.hits.values()) == before:
            self._sites[key] = (held, found)
        return found

    def bind_site(self, call: CallFact, caller: FunctionFact, target: Target) -> Binding:
        """:meth:`bind`, memoised while the index holds the same files. The binding is shared:
        callers must not change it (copy ``params`` first)."""
        key = (id(call), id(caller), target)
        held = len(self.index.facts)
        hit = self._bindings.get(key)
        if hit is not None and hit[0] == held:
            return hit[1]
        b = self.bind(call, caller, target)
        self._bindings[key] = (held, b, call, caller)  # call and caller kept: their ids stay theirs
        return b

    # -- binding -----------------------------------------------------------
    def bind(self, call: CallFact, caller: FunctionFact, target: Target) -> Binding:
        callee = self.index.function(target.func)
        b = Binding()
        if callee is None:
            return b
        params = list(callee.params)
        positional_kinds = (ParamKind.POSITIONAL, ParamKind.POSITIONAL_ONLY)
        if target.bound and not callee.is_static and params and params[0].kind in positional_kinds:
            params = params[1:]
        positional = [p for p in params if p.kind in positional_kinds]
        by_name = {p.name: p for p in params if p.kind in (ParamKind.POSITIONAL, ParamKind.KEYWORD_ONLY)}
        has_kwargs = any(p.kind is ParamKind.VAR_KEYWORD for p in params)
        has_varargs = any(p.kind is ParamKind.VAR_POSITIONAL for p in params)
        for i, arg in enumerate(call.args):
            if i < len(positional):
                b.params[positional[i].name] = ArgSource(arg, PassKind.POSITIONAL)
                if not call.star_args:  # with ``*x`` among them an argument's slot is unknown
                    b.slots.append(positional[i].name)
            elif not has_varargs and not call.star_args:
                b.extra_positional.append(i)

        def keyword(name: str, src: ArgSource) -> None:
            if name in b.slots and name in by_name:
                b.duplicates.setdefault(name, b.slots.index(name))
            if name in by_name or has_kwargs:
                b.params[name] = src  # a name landing in **kwargs is a virtual parameter
            else:
                b.unknown_keywords.append(name)

        for kw in call.keywords:
            keyword(kw.name, ArgSource(kw.value, PassKind.KEYWORD))
        caller_kwargs = caller.kwargs_param
        for d in call.star_kwargs:
            ch = d.chain
            if ch and len(ch) == 1 and ch[0] == caller_kwargs:
                b.forwards_kwargs = True
            elif ch and len(ch) == 1 and ch[0] in caller.dicts:
                for entry in caller.dicts[ch[0]]:
                    if entry.key is not None:
                        keyword(entry.key, ArgSource(entry.value, PassKind.DICT, ch[0], entry.key))
            elif ch and len(ch) == 1:
                b.opaque_dicts.append(ch[0])
        return b

    def accepts(self, func: FuncKey, param: str) -> bool:
        fn = self.index.function(func)
        if fn is None:
            return False
        return param in fn.param_names or fn.kwargs_param is not None

    @staticmethod
    def passes_keyword(call: CallFact, caller: FunctionFact, param: str) -> bool:
        """Syntactically, the call names ``param`` as a keyword (directly or as a key of a
        ``**dict`` built in the caller): a cheap test before resolving and binding."""
        if any(kw.name == param for kw in call.keywords):
            return True
        for d in call.star_kwargs:
            if d.chain and len(d.chain) == 1 and any(e.key == param for e in caller.dicts.get(d.chain[0], ())):
                return True
        return False
