"""What Python finds for the names the partial evaluator meets that are no config fields: a
module-level name (a class, function or constant of the tree, or the expression its module
binds it to), an attribute of a class, an object or a module of the tree (properties run,
class attributes through the MRO, ``super()``), a call of a class or function value (one of
several: each on its own fork), an f-string, and the standard-library calls it models
(``importlib.import_module``, ``typing.cast``). Mixed into the evaluator
(:class:`~.expressions.ExpressionEvaluator`); nothing here runs scanned code."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Callable, cast

from ...facts.extract import FunctionFact, PAttr, PCall, PConst, PExpr, PFormat, PName
from .builtins import NOT_BUILTIN
from .state import fork, havoc, join
from .values import (
    ClassRef,
    FuncRef,
    Instance,
    ModuleRef,
    Obj,
    Path,
    Unknown,
    Value,
    _Absent,
    describe,
    one_of,
)

if TYPE_CHECKING:
    from .expressions import World

_EVALUATING = object()  # a module-level value being evaluated (a cycle reads it as unknown)


class TreeValues:
    """Attributes, module names and calls of the tree's classes, objects and modules."""

    world: "World"
    _module_values: dict[tuple[str, str], Value | object]
    _object_writes: set[tuple[tuple[str, str], str]]
    _escaped: set[tuple[str, str]]

    # -- the evaluator's own (ExpressionEvaluator) ----------------------------------------
    def eval(self, e: PExpr, p: Path, key: tuple[str, str], depth: int = 0) -> Value:
        raise NotImplementedError

    def _invoke(self, fkey: tuple[str, str], fn: FunctionFact, e: PCall, p: Path, key: tuple[str, str], depth: int,
                self_value: Value | None) -> Value:
        raise NotImplementedError

    def _run_bound(self, fkey: tuple[str, str], fn: FunctionFact, args: dict[str, Value], p: Path,
                   key: tuple[str, str], depth: int, text: str) -> Value:
        raise NotImplementedError

    def _opaque_call(self, e: PCall, p: Path, key: tuple[str, str], depth: int, receivers: list[Value], text: str,
                     fn: FunctionFact | None = None) -> Value:
        raise NotImplementedError

    def _record(self, cls: tuple[str, str], e: PCall, p: Path, key: tuple[str, str], depth: int) -> Obj | None:
        """``C(f=v, ...)`` of a data record (:meth:`World.record_fields`: a ``@dataclass``
        that writes no ``__init__``/``__post_init__`` and compares, hashes and tests true as
        a dataclass does): an object of ``C`` holding what the call's keywords bind, and the
        literal defaults of the fields it leaves out when every argument is a keyword.
        Anything else of it (a field bound positionally, a base's field) is unknown."""
        defaults = self.world.record_fields(cls)
        if defaults is None or any(kw.name is None for kw in e.keywords):
            return None
        fields: dict[str, Value] = {}
        for a in e.args:  # which field a positional argument binds is not modelled
            self.eval(a, p, key, depth)
        if not e.args:
            fields.update(defaults)
        for kw in e.keywords:
            assert kw.name is not None
            fields[kw.name] = self.eval(kw.value, p, key, depth)
        return Obj(f"{cls[1]}(...)", fields, cls=cls)

    def _escape(self, p: Path, values: list[Value], why: str, fn: FunctionFact | None = None) -> None:
        """``values`` are handed to code the evaluator does not run: it may change them (unless
        its facts show it writes none of them); objects and classes of the tree among them
        may have attributes set from then on."""
        if fn is not None and not _may_write(fn, self.world.pure_methods):
            return
        havoc(p, values, why)
        stack = list(values)
        while stack:
            v = stack.pop()
            if isinstance(v, (Instance, ClassRef)):
                self._escaped.add(v.cls)
            elif isinstance(v, (list, tuple)):
                stack.extend(v)
            elif isinstance(v, dict):
                stack.extend(v.values())

    # -- names and attributes ---------------------------------------------------------------
    def _attr(self, owner: Value, attr: str, p: Path, key: tuple[str, str], depth: int) -> Value:
        got = self.attribute(owner, attr, p, key, depth)
        if isinstance(got, _Absent):
            if isinstance(owner, Obj):
                return Unknown(f"{owner.label}.{attr} (not set)", raises=owner.missing(attr))
            return Unknown(f"{describe(owner)}.{attr} (no such attribute)")
        return got

    def attribute(self, owner: Value, attr: str, p: Path, key: tuple[str, str], depth: int) -> Value | _Absent:
        """``owner.attr`` as Python finds it: a config object's field (one it lacks: its class's
        property, run on it); a class's attribute through its MRO; an object's (an
        :class:`Instance`) property, run on it, or class attribute; a module's name.
        :data:`ABSENT` where it surely has none (``getattr``'s default then applies).

        An object of the tree carries no state of its own (:class:`Instance`): a class
        attribute read through it is unknown once the evaluator saw code set that attribute
        on an object of its class, or hand such an object to code it does not run."""
        if isinstance(owner, Obj):
            v = owner.get(attr)
            if owner.cls is not None and attr not in owner.fields and attr not in owner.roles:
                prop = self._property(owner.cls, attr, owner, p, key, depth)
                if prop is not None:
                    return prop
            if not isinstance(v, Obj):  # a config field, not a hop to another config object
                p.reads.append(f"{owner.label}.{attr}")
            return v
        if isinstance(owner, Unknown):
            if owner.options:
                return self._each(owner, p, lambda o, side: self._attr(o, attr, side, key, depth), f"{owner.reason}.{attr}")
            return Unknown(f"{owner.reason}.{attr}")
        if isinstance(owner, ClassRef):
            if (owner.cls, attr) not in self._object_writes and owner.cls not in self._escaped:
                known = self._class_attr(owner.cls, attr, False)
                if known is not None:
                    return known
        if isinstance(owner, Instance):
            prop = self._property(owner.cls, attr, owner, p, key, depth)
            if prop is not None:
                return prop
            if (owner.cls, attr) not in self._object_writes and owner.cls not in self._escaped:
                known = self._class_attr(owner.cls, attr, True)
                if known is not None:
                    return known
        if isinstance(owner, ModuleRef):
            return self._global(owner.path, attr)
        return Unknown(f"{describe(owner)}.{attr}")

    def _class_attr(self, cls: tuple[str, str], attr: str, instance: bool) -> Value | _Absent | None:
        """A class attribute read through ``cls`` (``instance``: through an object of it): what
        the world reads off the class bodies, else the expression the deciding class binds it
        to once, evaluated in its module on a path of its own (memoised as a module-level value:
        while nothing the evaluator saw set or hand away a class of the tree; a name met again
        while evaluated is unknown); None: not known."""
        known = self.world.class_attr(cls, attr, instance=instance)
        if known is not None:
            return known
        found = self.world.class_value(cls, attr, instance)
        if found is None:
            return None
        memo: dict[tuple[str, str], Value | object] = \
            self._module_values if not (self._object_writes or self._escaped) else {}
        memo_key = (found[0], f"{cls[1]}.{attr}")
        if memo_key in memo:
            held = memo[memo_key]
            return Unknown(f"{cls[1]}.{attr} (defined in terms of itself)") if held is _EVALUATING \
                else copy.deepcopy(cast(Value, held))
        memo[memo_key] = _EVALUATING
        value = self.eval(found[1], Path({}), (found[0], "<module>"), 0)
        memo[memo_key] = value
        return copy.deepcopy(value)

    def _property(self, cls: tuple[str, str], attr: str, this: Value, p: Path, key: tuple[str, str],
                  depth: int) -> Value | None:
        """``this.attr`` when ``attr`` is a property of ``cls`` (a data descriptor: it wins over
        anything the object holds): its getter run on ``this``; None when it is no property."""
        prop = self.world.property_method(cls, attr)
        if prop is None:
            return None
        (ckey, fn) = prop
        args: dict[str, Value] = {fn.params[0].name: this} if fn.params else {}
        return self._run_bound((ckey[0], f"{ckey[1]}.{attr}"), fn, args, p, key, depth, f"{describe(this)}.{attr}")

    def _global(self, path: str, name: str) -> Value:
        """A module-level name of the module at ``path``: a class, function or literal constant
        the world resolves, else the expression the module binds it to once, evaluated in its
        module on a path of its own (memoised; a name met again while evaluated is unknown)."""
        got = self.world.resolve_name(path, name)
        if not isinstance(got, Unknown):
            return got
        found = self.world.module_value(path, name)
        if found is None:
            return got
        memo_key = (found[0], name)
        if memo_key in self._module_values:
            held = self._module_values[memo_key]
            if held is _EVALUATING:
                return Unknown(f"{name} (defined in terms of itself)")
            return copy.deepcopy(cast(Value, held))
        self._module_values[memo_key] = _EVALUATING
        value = self.eval(found[1], Path({}), (found[0], "<module>"), 0)
        self._module_values[memo_key] = value
        return copy.deepcopy(value)

    def _each(self, v: Unknown, p: Path, f: Callable[[Value, Path], Value], why: str) -> Value:
        """``f`` applied to each of ``v``'s options, each on its own fork of ``p``, the forks
        joined (what one of them writes is unknown; the results are the new options)."""
        assert v.options is not None
        sides = [p] + [fork(p) for _ in v.options[1:]]
        slot = "\0each"
        for side, option in zip(sides, v.options):
            side.env[slot] = f(option, side)
        join(sides, f"(depends on {v.reason})")
        got = p.env.pop(slot)
        return got if not (isinstance(got, Unknown) and not got.options) else Unknown(why)

    def _format(self, e: PFormat, p: Path, key: tuple[str, str], depth: int) -> Value:
        """An f-string: its text when every replacement field is a string, number or None (whose
        ``format(v, "")`` is ``str(v)``); unknown otherwise."""
        out: list[str] = []
        for part in e.parts:
            v = self.eval(part, p, key, depth)
            if isinstance(v, Unknown) and v.raises:
                return v
            if not (v is None or isinstance(v, (str, int, float, bool))):
                return Unknown(e.text)
            out.append(str(v))
        return "".join(out)

    def _mapping_get(self, owner: Obj, e: PCall, p: Path, key: tuple[str, str], depth: int) -> Value | object:
        """``d.get("k"[, default])`` on a config object of no class of the tree: a nested mapping
        of a config (``mtp_config`` in a config.json), which code reads with ``.get`` only when
        it is a plain dict at run time (``dict.get`` changes nothing). A field it has is its
        value; one a closed object lacks is the default; otherwise unknown. A key that is not
        a string literal is not modelled (nothing evaluated: the generic call path runs)."""
        first = e.args[0]
        if not (isinstance(first, PConst) and isinstance(first.value, str)):
            return NOT_BUILTIN
        name = first.value
        default = self.eval(e.args[1], p, key, depth) if len(e.args) == 2 else None
        p.reads.append(f"{owner.label}.{name}")
        if name in owner.fields:
            return owner.fields[name]
        if owner.closed and name not in owner.roles:
            return default
        return Unknown(f"{owner.label}.get({name!r})")

    # -- calls -----------------------------------------------------------------------------
    def _call_value(self, callee: Value, e: PCall, p: Path, key: tuple[str, str], depth: int, text: str) -> Value:
        """Call ``callee``, a value: a class of the tree (an object of it is built: its
        ``__init__`` run on a new object), a function of the tree, one of several of those (each
        called on its own fork), or anything else (opaque)."""
        if isinstance(callee, Unknown) and callee.options and all(isinstance(o, (ClassRef, FuncRef)) for o in callee.options):
            return self._each(callee, p, lambda o, side: self._call_value(o, e, side, key, depth, text), text)
        if isinstance(callee, ClassRef):
            record = self._record(callee.cls, e, p, key, depth)
            if record is not None:
                return record
            init = self.world.method(callee.cls, "__init__") if self.world.runs_constructor(callee.cls) else None
            if init is not None and init[1].body:
                (ckey, fn) = init
                this = Obj(f"{callee.cls[1]}(...)", cls=callee.cls)
                self._invoke((ckey[0], f"{ckey[1]}.__init__"), fn, e, p, key, depth, this)
            else:
                self._opaque_call(e, p, key, depth, [], text, init[1] if init is not None else None)
            return Instance(callee.cls, 0)
        if isinstance(callee, FuncRef):
            target_fn = self.world.function(callee.key)
            if target_fn is not None:
                return self._invoke(callee.key, target_fn, e, p, key, depth, callee.self_obj)
        return self._opaque_call(e, p, key, depth, [callee], text)

    def _super_call(self, e: PCall, name: str, p: Path, key: tuple[str, str], depth: int, text: str) -> Value:
        """``super().name(...)`` in a method of the tree: ``name`` looked up in the MRO of the
        class of the method's ``self``/``cls`` past the method's own class; opaque when that
        class is not known (another MRO may put another class next)."""
        own = (key[0], key[1].rpartition(".")[0])
        this = p.env.get("self", p.env.get("cls"))
        cls = this.cls if isinstance(this, (Obj, ClassRef, Instance)) else None
        found = self.world.method_after(cls, name, own) if cls is not None and own[1] else None
        if found is None:
            return self._opaque_call(e, p, key, depth, [this] if isinstance(this, (Obj, Instance)) else [], text)
        (ckey, fn) = found
        assert this is not None
        return self._invoke((ckey[0], f"{ckey[1]}.{name}"), fn, e, p, key, depth, _bound_to(this, fn))

    def _stdlib(self, which: str, e: PCall, p: Path, key: tuple[str, str], depth: int, text: str) -> Value:
        """A modelled standard-library call: ``importlib.import_module("a.b")`` is the tree's
        module ``a.b`` (a relative name, a ``package`` argument or a module the tree lacks:
        unknown); ``typing.cast(T, v)`` is ``v``."""
        args = [self.eval(a, p, key, depth) for a in e.args]
        for kw in e.keywords:
            self.eval(kw.value, p, key, depth)
        if which == "typing.cast" and len(args) == 2 and not e.keywords:
            return args[1]
        if which == "importlib.import_module" and len(args) == 1 and not e.keywords:
            found = [self.world.module(n) if isinstance(n, str) and not n.startswith(".") else None
                     for n in _options(args[0])]
            if all(m is not None for m in found):
                return one_of(found, text)
            return args[0] if isinstance(args[0], Unknown) and not args[0].options else Unknown(text)
        return Unknown(text)


def _options(v: Value) -> tuple[Value, ...]:
    """The values ``v`` may be: its options, or ``v`` itself."""
    return v.options if isinstance(v, Unknown) and v.options else (v,)


def _chain_of(e: PExpr) -> tuple[str, ...] | None:
    """``a.b.c`` as ("a", "b", "c"); None for anything but names and attributes."""
    parts: list[str] = []
    while isinstance(e, PAttr):
        parts.append(e.attr)
        e = e.value
    return (e.id, *reversed(parts)) if isinstance(e, PName) else None


def _is_super(e: PExpr) -> bool:
    """``super()`` without arguments."""
    return isinstance(e, PCall) and isinstance(e.func, PName) and e.func.id == "super" and not e.args and not e.keywords


def _bound_to(owner: Value, fn: FunctionFact) -> Value | None:
    """What a method found through ``owner`` binds its first parameter to: the class for a
    ``classmethod``, nothing for a ``staticmethod``, the object for a method called on one
    (a config object or an object of the tree), nothing for a method read off its class
    (``Cls.m(obj, ...)``: the first argument is ``self``)."""
    if any(d.endswith("staticmethod") for d in fn.decorators):
        return None
    if any(d.endswith("classmethod") for d in fn.decorators):
        cls = owner.cls if isinstance(owner, (Obj, ClassRef, Instance)) else None
        return ClassRef(cls) if cls is not None else None
    return owner if isinstance(owner, (Obj, Instance)) else None


# Python builtins that never change their arguments.
_PURE_BUILTINS = frozenset({"getattr", "hasattr", "isinstance", "issubclass", "len", "type", "id", "repr", "str", "int",
                            "float", "bool", "min", "max", "any", "all", "sorted", "tuple", "callable", "print"})


def _may_write(fn: FunctionFact, pure_methods: frozenset[str] = frozenset()) -> bool:
    """From a function's facts (its body is not kept): whether it may change an object it
    is handed — it assigns an attribute or stores into a container of a parameter, or
    hands a parameter (or calls a method of one) to code it calls, other than the pure
    builtins and ``pure_methods`` without arguments."""
    params = set(fn.param_names)
    if any(a.target[0] in params for a in fn.attr_assigns) or any(s[0] in params for s in fn.stores):
        return True
    for c in fn.calls:
        if c.func and len(c.func) == 1 and c.func[0] in _PURE_BUILTINS and not c.star_args and not c.star_kwargs:
            continue
        if c.func and c.func[0] in params and len(c.func) > 1:
            if c.func[-1] in pure_methods and len(c.func) == 2 and not c.args and not c.keywords:
                continue
            return True
        for x in [*c.args, *(k.value for k in c.keywords), *c.star_args, *c.star_kwargs]:
            if any(n.split(".")[0] in params for n in x.names):
                return True
    return False
