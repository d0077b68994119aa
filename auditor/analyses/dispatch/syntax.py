"""Reading the dispatch code's statement and expression facts (nothing is run), and the
partial evaluator's view of the tree."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import msgspec

from ...facts.extract import Chain, ExprFact, FunctionFact, PAttr, PBool, PCall, PCompare, PConst, PDict, PExpr, PFormat, PIfExp, PName, PNot, PSeq, PSubscript, SAssign, SExpr, SIf, SReturn, Stmt
from ...index.bodies import FunctionBodies
from ...index.index import Index, SymbolKind
from ..partial_eval import ABSENT, ClassRef, EnumMember, FuncRef, ModuleRef, Obj, Unknown, Value, World, module_constant
from ..partial_eval.values import _Absent
from .env_defaults import env_object, module_env_values


class TreeWorld(World):
    def __init__(self, index: Index, pure_methods: Iterable[str] = (),
                 sub_config_getters: dict[str, list[str]] | None = None, free_bases: Iterable[str] = ()) -> None:
        self.index = index
        self.pure_methods = frozenset(pure_methods)
        self.sub_config_getters = {k: tuple(v) for k, v in (sub_config_getters or {}).items()}
        # Bases outside the tree taken to define none of the attributes the evaluator reads
        # (``head-free-bases``: ``nn.Module``, ``Protocol``, ``object``, ...).
        self.free_bases = frozenset(free_bases)
        self.bodies: FunctionBodies | None = None  # statement trees extracted on demand (BodiesWorld)
        # The process environment a question gives (``layers --env``): None, not given.
        self.environ_vars: dict[str, str] | None = None
        # Modules that serve environment variables from a table of lambdas (``env-modules``:
        # ``vllm.envs``): with the environment given, a read of one is its value there.
        self.env_modules: frozenset[str] = frozenset()
        # Module-level names taken as given (a question's stated assumptions: ``HAS_TRITON``),
        # and the ones a run read.
        self.assumed_names: dict[str, Any] = {}
        self.assumed_read: set[str] = set()
        # Where the values of an envs module are read (the dispatch provider's shared cache);
        # None: read by the world itself.
        self.env_table: Callable[[str, Mapping[str, str]], dict[str, Any]] | None = None
        # Calls pinned by the question: (module-level function names, what a call returns),
        # the configured loaders returning the draft model a load check runs with.
        self.pinned: tuple[frozenset[str], Value] | None = None
        # Library functions outside the tree that return an object, never None
        # (``object-factories``: ``torch.empty``, ...), as ``module.name``.
        self.object_factories: frozenset[str] = frozenset()

    def resolve_name(self, path: str, name: str) -> Value:
        if name in self.assumed_names:
            self.assumed_read.add(name)
            return self.assumed_names[name]  # type: ignore[no-any-return]
        for sym in self.index.resolve(path, name):
            if sym.kind is SymbolKind.CLASS:
                return ClassRef((sym.path, sym.name))
            if sym.kind is SymbolKind.FUNCTION:
                return FuncRef((sym.path, sym.name))
            if sym.kind is SymbolKind.MODULE and self.environ_vars is not None and sym.name in self.env_modules \
                    and sym.path:
                # The variables' values in the environment given (those not computed: unknown).
                return env_object(sym.name, self._env_module(sym.path))
        return module_constant(self.index, path, name)

    def _env_module(self, path: str) -> dict[str, Any]:
        environ = self.environ_vars or {}
        return self.env_table(path, environ) if self.env_table is not None else module_env_values(self.index, path, environ)

    def method(self, cls: tuple[str, str], name: str) -> tuple[tuple[str, str], FunctionFact] | None:
        return self.index.method(cls, name)

    def function(self, key: tuple[str, str]) -> FunctionFact | None:
        return self.index.function(key)

    def class_attr(self, cls: tuple[str, str], name: str, instance: bool = False) -> Value | _Absent | None:
        """``name`` read through the class ``cls`` (``instance``: through an object of it).

        A member of a plain ``enum.Enum`` class (its only base, imported from ``enum``) is an
        :class:`EnumMember` (a private or dunder name is no member). Otherwise the first class
        of the MRO that assigns ``name`` in its body decides: a literal is its value, a name
        of a class of the tree a :class:`ClassRef`; :data:`ABSENT` when no class of a whole
        MRO (:meth:`whole_mro`) defines it. None (unknown) for anything else: a method or a
        computed value, a dunder, an attribute of ``free_bases``, a class answering reads
        itself (``__getattr__``/``__getattribute__``), and, through an object, one its methods
        may set (``self.<name> = ...``, ``setattr(self, ...)``)."""
        cf = self.index.class_fact(cls)
        if cf is None:
            return None
        if _plain_enum(self.index, cls[0], cf.bases):
            if name.startswith("_") or name not in cf.class_attrs:
                return None
            e = cf.class_attrs[name]
            value: Value = e.literal if e.has_literal and isinstance(e.literal, (int, str, float, bool)) else Unknown(f"{cls[1]}.{name}")
            return EnumMember(cls, name, value)
        found = self._deciding(cls, name, instance)
        if found is None or isinstance(found, _Absent):
            return found
        c, held = found
        if held.has_literal:
            return held.literal
        if held.chain is not None:
            for sym in self.index.resolve_chain(c[0], held.chain):
                if sym.kind is SymbolKind.CLASS:
                    return ClassRef((sym.path, sym.name))
        return None

    def class_value(self, cls: tuple[str, str], name: str, instance: bool = False) -> tuple[str, PExpr] | None:
        """A class attribute :meth:`class_attr` cannot read as a literal or a class: the
        expression the deciding class of the MRO binds it to once in its body
        (``options = Base.options - {"x"}``), with the module it is evaluated in; None when
        there is none, or the name is no plain class attribute (:meth:`class_attr`'s cases)."""
        cf = self.index.class_fact(cls)
        if self.bodies is None or cf is None or _plain_enum(self.index, cls[0], cf.bases) \
                or self.class_attr(cls, name, instance) is not None:
            return None
        found = self._deciding(cls, name, instance)
        if found is None or isinstance(found, _Absent):
            return None
        c, _held = found
        value = self.bodies.class_value(c[0], c[1], name)
        return (c[0], value) if value is not None else None

    def _deciding(self, cls: tuple[str, str], name: str, instance: bool) -> tuple[tuple[str, str], ExprFact] | _Absent | None:
        """The class of ``cls``'s MRO whose body binds ``name`` first, with what it binds;
        :data:`ABSENT` when no class of a whole MRO does; None: not a plain class attribute (a
        method, a dunder, a hook class, a field an object's constructor or method sets)."""
        if name.startswith("__") or name in BASE_ATTRIBUTES:
            return None
        mro = self.whole_mro(cls)
        if mro is None:
            return None
        facts = [(c, self.index.class_fact(c)) for c in mro]
        if any(f is None or _HOOKS & set(f.methods) for _c, f in facts):
            return None
        if instance and any(_sets_on_self(m, name) for _c, f in facts if f is not None for m in f.methods.values()):
            return None
        # Through an object of a decorated class (a dataclass, a pydantic or attrs class), an
        # annotated class-level name is a field the constructor sets: not the class's value.
        fields_are_set = instance and any(f is not None and f.decorators for _c, f in facts)
        for c, f in facts:
            assert f is not None
            if name in f.methods:
                return None
            if fields_are_set and name in f.field_defaults:
                return None
            held = f.class_attrs.get(name) or f.field_defaults.get(name)
            if held is not None:
                return c, held
        return ABSENT

    def method_after(self, cls: tuple[str, str], name: str, after: tuple[str, str]) -> tuple[tuple[str, str], FunctionFact] | None:
        if after not in self.index.mro(cls):
            return None
        return self.index.method(cls, name, after=after)

    def module_value(self, path: str, name: str, hops: int = 0) -> tuple[str, PExpr] | None:
        """The expression a module-level ``name`` is bound to by its module's one assignment (the
        module's own, or that of the module it is imported from, followed as
        :func:`module_constant` follows them), extracted from the file on demand; None when the
        module binds it otherwise (twice, under a branch, by ``global`` in a function) or the
        expression is not one the evaluator reads."""
        facts = self.index.lookup(path)
        if facts is None or hops > 8 or name in facts.rebound_globals:
            return None
        assigns = facts.module_assigns.get(name, ())
        if len(assigns) == 1 and name not in self.index.imports_of(path):
            value = self.bodies.module_value(path, name) if self.bodies is not None else None
            return (path, value) if value is not None else None
        if assigns:
            return None
        found = [(self.index.path_of_module.get(m), a) for m, a in self.index.imports_of(path).get(name, [])]
        if len(found) != 1 or found[0][0] is None or found[0][1] is None:
            return None
        target, attr = found[0]
        assert target is not None and attr is not None
        return self.module_value(target, attr, hops + 1)

    def whole_mro(self, cls: tuple[str, str]) -> list[tuple[str, str]] | None:
        """The MRO of ``cls`` when every base of every class in it is a class of the tree or
        one of ``free_bases``; None otherwise (a base the tree does not hold may define anything)."""
        mro = self.index.mro(cls)
        for c in mro:
            f = self.index.class_fact(c)
            if f is None:
                return None
            resolved = self.index.bases(c)
            outside = [b for b in f.bases if ".".join(b) not in self.free_bases]
            if len(outside) != len(resolved):
                return None
        return mro

    def property_method(self, cls: tuple[str, str], name: str) -> tuple[tuple[str, str], FunctionFact] | None:
        """The getter of ``name`` when the first class of ``cls``'s MRO that defines it defines a
        ``property`` there; None otherwise."""
        for c in self.index.mro(cls):
            f = self.index.class_fact(c)
            if f is None:
                return None
            if name in f.methods:
                fn = f.methods[name]
                return (c, fn) if any(d in _PROPERTY_DECORATORS for d in fn.decorators) else None
            if name in f.class_attrs or name in f.field_defaults:
                return None
        return None

    def is_subclass(self, cls: tuple[str, str], base: tuple[str, str]) -> bool | None:
        """``issubclass(cls, base)`` for two classes of the tree: True when ``base`` is in the
        MRO; False when it is not and the MRO is whole (:meth:`whole_mro`); None otherwise."""
        if base in self.index.mro(cls):
            return True
        return False if self.whole_mro(cls) is not None else None

    def module(self, name: str) -> ModuleRef | None:
        """The module ``name`` (dotted) of the tree, as ``importlib.import_module`` finds it."""
        path = self.index.path_of_module.get(name)
        return ModuleRef(name, path) if path else None

    def pinned_call(self, path: str, chain: tuple[str, ...]) -> Value | None:
        if self.pinned is None or chain[-1] not in self.pinned[0]:
            return None
        # (the name as the module binds it: a function of the tree, or an import of one)
        found = [s for s in (self.index.resolve_chain(path, chain) or ()) if s.kind is SymbolKind.FUNCTION]
        return self.pinned[1] if found else None

    def object_factory(self, path: str, chain: tuple[str, ...]) -> bool:
        return any(_names(self.index, path, chain, *dotted.rsplit(".", 1)) for dotted in self.object_factories)

    def stdlib_function(self, path: str, chain: tuple[str, ...]) -> str | None:
        """Which of the standard-library functions the evaluator models (``module.name``)
        ``chain`` names through the imports of the module at ``path``; None: none of them."""
        for dotted in _STDLIB_FUNCTIONS:
            module, _, fname = dotted.rpartition(".")
            if _names(self.index, path, chain, module, fname):
                return dotted
        return None

    def record_fields(self, cls: tuple[str, str]) -> dict[str, Value] | None:
        return _record_fields(self.index, cls)

    def environ(self, path: str, chain: tuple[str, ...]) -> dict[str, str] | None:
        if self.environ_vars is None or not _names(self.index, path, chain, "os", "environ"):
            return None
        return dict(self.environ_vars)

    def literal_args(self, path: str, func: str, alias: str) -> tuple[Value, ...] | None:
        if not _names(self.index, path, (func,), "typing", "get_args"):
            return None
        return literal_alias_args(self.index, path, alias)


class BodiesWorld(TreeWorld):
    """A :class:`TreeWorld` that gives a callee the facts keep no statement tree of its tree,
    extracted on demand (:class:`~auditor.index.bodies.FunctionBodies`): for one question about
    a few calls."""

    def __init__(self, bodies: FunctionBodies, pure_methods: Iterable[str] = (),
                 sub_config_getters: dict[str, list[str]] | None = None, free_bases: Iterable[str] = (),
                 opaque_classes: Callable[[tuple[str, str]], bool] | None = None) -> None:
        super().__init__(bodies.index, pure_methods, sub_config_getters, free_bases)
        self.bodies = bodies
        self.opaque_classes = opaque_classes

    def runs_constructor(self, cls: tuple[str, str]) -> bool:
        return self.opaque_classes is None or not self.opaque_classes(cls)

    def module_values(self) -> dict[tuple[str, str], object] | None:
        assert self.bodies is not None
        # (with a given environment, a module-level value may read it: kept per evaluator)
        return self.bodies.evaluated if self.environ_vars is None else None

    def function(self, key: tuple[str, str]) -> FunctionFact | None:
        assert self.bodies is not None
        return self.bodies.function(key)

    def _with_body(self, found: tuple[tuple[str, str], FunctionFact] | None,
                   name: str) -> tuple[tuple[str, str], FunctionFact] | None:
        if found is None or found[1].body:
            return found
        fn = self.function((found[0][0], f"{found[0][1]}.{name}"))
        return (found[0], fn) if fn is not None else found

    def method(self, cls: tuple[str, str], name: str) -> tuple[tuple[str, str], FunctionFact] | None:
        return self._with_body(super().method(cls, name), name)

    def method_after(self, cls: tuple[str, str], name: str, after: tuple[str, str]) -> tuple[tuple[str, str], FunctionFact] | None:
        return self._with_body(super().method_after(cls, name, after), name)

    def property_method(self, cls: tuple[str, str], name: str) -> tuple[tuple[str, str], FunctionFact] | None:
        return self._with_body(super().property_method(cls, name), name)


#: The non-dunder attributes of the bases ``head-free-bases`` names (torch 2.13's
#: ``nn.Module``: its class and what ``Module.__init__`` sets; ``object``, ``typing.Protocol``
#: and ``typing.Generic``): a name among them, or any dunder, is never absent.
BASE_ATTRIBUTES = frozenset("""
T_destination _abc_impl _apply _backward_hooks _backward_pre_hooks _buffers _call_impl _compiled_call_impl
_forward_hooks _forward_hooks_always_called _forward_hooks_with_kwargs _forward_pre_hooks
_forward_pre_hooks_with_kwargs _get_backward_hooks _get_backward_pre_hooks _get_name _is_full_backward_hook
_is_protocol _is_runtime_protocol _load_from_state_dict _load_state_dict_post_hooks _load_state_dict_pre_hooks
_maybe_warn_non_full_backward_hook _modules _named_members _non_persistent_buffers_set _parameters
_register_load_state_dict_pre_hook _register_state_dict_hook _replicate_for_data_parallel _save_to_state_dict
_slow_forward _state_dict_hooks _state_dict_pre_hooks _version _wrapped_call_impl add_module apply bfloat16 buffers
call_super_init children compile cpu cuda double dump_patches eval extra_repr float forward get_buffer
get_extra_state get_parameter get_submodule half ipu load_state_dict modules mtia named_buffers named_children
named_modules named_parameters parameters register_backward_hook register_buffer register_forward_hook
register_forward_pre_hook register_full_backward_hook register_full_backward_pre_hook
register_load_state_dict_post_hook register_load_state_dict_pre_hook register_module register_parameter
register_state_dict_post_hook register_state_dict_pre_hook requires_grad_ set_extra_state set_submodule
share_memory state_dict to to_empty train training type xpu zero_grad
""".split())

#: Standard-library functions the evaluator models by their documented meaning.
_STDLIB_FUNCTIONS = ("importlib.import_module", "typing.cast")
_PROPERTY_DECORATORS = frozenset({"property"})  # a data descriptor: the object cannot shadow it
_HOOKS = frozenset({"__getattr__", "__getattribute__"})


def sets_attrs(methods: list[FunctionFact], chain: tuple[str, ...]) -> bool:
    """A ``setattr(<chain>, ...)`` call in one of ``methods``."""
    return any(c.func == ("setattr",) and c.args and c.args[0].chain == chain for m in methods for c in m.calls)


#: ``nn.Module``'s methods that make their first argument an attribute of the module (a
#: buffer, a parameter, a sub-module): ``self.register_buffer("mask_hidden", ...)``.
_REGISTERING = frozenset({"register_buffer", "register_parameter", "register_module", "add_module"})


def _sets_on_self(fn: FunctionFact, name: str) -> bool:
    """A method that may set ``self.<name>`` (an assignment, ``setattr`` on ``self``, or one of
    ``nn.Module``'s registering methods called on ``self`` with that name or a name not written
    as a literal)."""
    return any(a.target == ("self", name) for a in fn.attr_assigns) or sets_attrs([fn], ("self",)) or any(
        c.func is not None and len(c.func) == 2 and c.func[0] == "self" and c.func[1] in _REGISTERING
        and (not c.args or not c.args[0].has_literal or c.args[0].literal == name) for c in fn.calls)


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
    elif isinstance(e, PFormat):
        kids = list(e.parts)
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
