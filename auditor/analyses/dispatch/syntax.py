"""Reading the dispatch code's statement and expression facts (nothing is run), and the
partial evaluator's view of the tree."""

from __future__ import annotations

from typing import Any, Iterable

import msgspec

from ...facts.extract import Chain, FunctionFact, PAttr, PBool, PCall, PCompare, PConst, PDict, PExpr, PIfExp, PName, PNot, PSeq, PSubscript, SAssign, SExpr, SIf, SReturn, Stmt
from ...index.bodies import FunctionBodies
from ...index.index import Index, SymbolKind
from ..partial_eval import ClassRef, EnumMember, FuncRef, Obj, Unknown, Value, World, module_constant


class TreeWorld(World):
    def __init__(self, index: Index, pure_methods: Iterable[str] = (),
                 sub_config_getters: dict[str, list[str]] | None = None) -> None:
        self.index = index
        self.pure_methods = frozenset(pure_methods)
        self.sub_config_getters = {k: tuple(v) for k, v in (sub_config_getters or {}).items()}

    def resolve_name(self, path: str, name: str) -> Value:
        for sym in self.index.resolve(path, name):
            if sym.kind is SymbolKind.CLASS:
                return ClassRef((sym.path, sym.name))
            if sym.kind is SymbolKind.FUNCTION:
                return FuncRef((sym.path, sym.name))
        return module_constant(self.index, path, name)

    def method(self, cls: tuple[str, str], name: str) -> tuple[tuple[str, str], FunctionFact] | None:
        return self.index.method(cls, name)

    def function(self, key: tuple[str, str]) -> FunctionFact | None:
        return self.index.function(key)

    def class_attr(self, cls: tuple[str, str], name: str) -> Value | None:
        """A member of a plain ``enum.Enum`` class (its only base, imported from ``enum``),
        read through the class: an :class:`EnumMember` (a private or dunder name is no member)."""
        cf = self.index.class_fact(cls)
        if cf is None or name.startswith("_") or name not in cf.class_attrs or not _plain_enum(self.index, cls[0], cf.bases):
            return None
        e = cf.class_attrs[name]
        value: Value = e.literal if e.has_literal and isinstance(e.literal, (int, str, float, bool)) else Unknown(f"{cls[1]}.{name}")
        return EnumMember(cls, name, value)

    def record_fields(self, cls: tuple[str, str]) -> dict[str, Value] | None:
        return _record_fields(self.index, cls)

    def literal_args(self, path: str, func: str, alias: str) -> tuple[Value, ...] | None:
        if not _names(self.index, path, (func,), "typing", "get_args"):
            return None
        return literal_alias_args(self.index, path, alias)


class BodiesWorld(TreeWorld):
    """A :class:`TreeWorld` that gives a callee the facts keep no statement tree of its tree,
    extracted on demand (:class:`~auditor.index.bodies.FunctionBodies`): for one question about
    a few calls."""

    def __init__(self, bodies: FunctionBodies, pure_methods: Iterable[str] = (),
                 sub_config_getters: dict[str, list[str]] | None = None) -> None:
        super().__init__(bodies.index, pure_methods, sub_config_getters)
        self.bodies = bodies

    def function(self, key: tuple[str, str]) -> FunctionFact | None:
        return self.bodies.function(key)


def literal_alias_args(index: Index, path: str, name: str, hops: int = 0) -> tuple[Value, ...] | None:
    """The values of the ``Literal[...]`` alias ``name`` of the module at ``path`` (or the module
    it is imported from), nested aliases flattened and repeats dropped as ``Literal`` drops
    them; None when it is not such an alias, or a member is not one."""
    facts = index.lookup(path)
    if facts is None or hops > 8:
        return None
    alias = facts.literal_aliases.get(name)
    if alias is None and name in facts.module_assigns:
        return None  # the module binds the name to something else (``M = M | None``)
    if alias is not None and name in index.imports_of(path):
        return None  # bound both by an import and an assignment: which holds is not read
    if alias is None:
        found = [(index.path_of_module.get(m), a) for m, a in index.imports_of(path).get(name, [])]
        if len(found) != 1 or found[0][0] is None or found[0][1] is None:
            return None  # alternative imports, or a module not read: not one known alias
        return literal_alias_args(index, found[0][0], found[0][1], hops + 1)
    if len(facts.module_assigns.get(name, ())) != 1 or not _names(index, path, alias.head, "typing", "Literal"):
        return None
    out: list[Value] = []
    for m in alias.members:
        inner = (m.value,) if isinstance(m, PConst) else literal_alias_args(index, path, m.id, hops + 1)
        if inner is None:
            return None
        out += [v for v in inner if not any(type(v) is type(o) and v == o for o in out)]
    return tuple(out)


# Methods that would change what a plain dataclass's construction, truth or attribute reads are.
_RECORD_OVERRIDES = frozenset({"__init__", "__post_init__", "__new__", "__bool__", "__len__", "__getattr__",
                               "__getattribute__", "__setattr__", "__init_subclass__"})


def _record_fields(index: Index, cls: tuple[str, str]) -> dict[str, Value] | None:
    """The literal defaults of a plain ``@dataclass`` (its one decorator, imported from
    ``dataclasses``, without arguments that change ``__init__``), which has no base and
    writes none of :data:`_RECORD_OVERRIDES`; None: any other class."""
    cf = index.class_fact(cls)
    if cf is None or cf.bases or len(cf.decorators) != 1 or _RECORD_OVERRIDES & set(cf.methods):
        return None
    deco = cf.decorators[0].replace(" ", "")
    head, _, args = deco.partition("(")
    if args and any(flag in args for flag in ("init=False", "kw_only")):
        return None
    if not _names(index, cls[0], tuple(head.split(".")), "dataclasses", "dataclass"):
        return None
    return {k: e.literal for k, e in cf.field_defaults.items()
            if e.has_literal and (e.literal is None or isinstance(e.literal, (bool, int, float, str)))}


def _plain_enum(index: Index, path: str, bases: tuple[Chain, ...]) -> bool:
    """The class's one base is ``enum.Enum`` (``import enum`` or ``from enum import Enum``)."""
    return len(bases) == 1 and _names(index, path, bases[0], "enum", "Enum")


def _names(index: Index, path: str, chain: Chain, module: str, name: str) -> bool:
    """``chain`` in the file at ``path`` names ``module.name`` by its imports: ``name`` imported
    from ``module`` (``from enum import Enum``: ``("Enum",)``) or the module itself
    (``import enum``: ``("enum", "Enum")``)."""
    imported = index.imports_of(path).get(chain[0], []) if chain else []
    if len(chain) == 1:
        return (module, name) in imported
    return len(chain) == 2 and chain[1] == name and (module, None) in imported


def to_obj(label: str, data: dict[str, Any]) -> Obj:
    fields: dict[str, Value] = {}
    for k, v in data.items():
        fields[k] = to_obj(f"{label}.{k}", v) if isinstance(v, dict) else v
    return Obj(label, fields, closed=True)


def name_chain(e: PExpr) -> Chain | None:
    parts: list[str] = []
    while isinstance(e, PAttr):
        parts.append(e.attr)
        e = e.value
    if isinstance(e, PName):
        parts.append(e.id)
        return tuple(reversed(parts))
    return None


def walk(stmts: Iterable[Stmt]) -> Iterable[Stmt]:
    for s in stmts:
        yield s
        if isinstance(s, SIf):
            yield from walk(s.body)
            yield from walk(s.orelse)


def self_reads(e: PExpr) -> list[str]:
    """The ``self.<attr>`` attributes ``e`` reads."""
    return [s.attr for s in expr_nodes(e) if isinstance(s, PAttr) and isinstance(s.value, PName) and s.value.id == "self"]


def expr_names(e: PExpr) -> list[str]:
    return [s.id for s in expr_nodes(e) if isinstance(s, PName)]


def expr_nodes(e: object) -> Iterable[object]:
    """Every expression node under ``e`` (any kind: the fact structs' fields, recursively)."""
    yield e
    if isinstance(e, msgspec.Struct):
        for f in e.__struct_fields__:
            v = getattr(e, f)
            for x in (v if isinstance(v, tuple) else (v,)):
                if isinstance(x, msgspec.Struct):
                    yield from expr_nodes(x)


def stmt_exprs(s: Stmt) -> list[PExpr]:
    if isinstance(s, SIf):
        return [s.test]
    if isinstance(s, SReturn):
        return [s.value] if s.value is not None else []
    if isinstance(s, SAssign):
        return [s.value, *s.targets]
    if isinstance(s, SExpr):
        return [s.value]
    return []


def subexprs(e: PExpr) -> Iterable[PExpr]:
    yield e
    kids: list[PExpr | None] = []
    if isinstance(e, PAttr):
        kids = [e.value]
    elif isinstance(e, PCall):
        kids = [e.func, *e.args, *(k.value for k in e.keywords)]
    elif isinstance(e, PCompare):
        kids = [e.left, *e.comparators]
    elif isinstance(e, PBool):
        kids = list(e.values)
    elif isinstance(e, PNot):
        kids = [e.operand]
    elif isinstance(e, PSeq):
        kids = list(e.elts)
    elif isinstance(e, PDict):
        kids = [*e.keys, *e.values]
    elif isinstance(e, PSubscript):
        kids = [e.value, e.index]
    elif isinstance(e, PIfExp):
        kids = [e.test, e.body, e.orelse]
    for k in kids:
        if k is not None:
            yield from subexprs(k)


def calls_in(e: PExpr) -> list[PCall]:
    return [s for s in subexprs(e) if isinstance(s, PCall)]


def strings(e: PExpr) -> list[str]:
    """String literals a value can be: ``["A"]``, ``["A" if c else "B"]``."""
    return [s.value for s in subexprs(e) if isinstance(s, PConst) and isinstance(s.value, str)
            and not in_test(e, s)]


def in_test(root: PExpr, node: PExpr) -> bool:
    for s in subexprs(root):
        if isinstance(s, PIfExp) and any(x is node for x in subexprs(s.test)):
            return True
    return False
