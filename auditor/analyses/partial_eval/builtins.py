"""The Python builtins the partial evaluator models: ``getattr``/``hasattr`` with
defaults, ``min``/``max``/``len``/``int``/``str``/``bool``/``set``/``frozenset``, and
``isinstance``-like predicates (always unknown). Modelled over our value types, never
called on scanned values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...facts.extract import UNPACK, PCall, PName
from .state import havoc
from .values import ABSENT, ClassRef, Instance, ModuleRef, Obj, Path, Unknown, Value, _Absent, describe, truth

if TYPE_CHECKING:
    from .expressions import ExpressionEvaluator

NOT_BUILTIN = object()


def call_builtin(ev: "ExpressionEvaluator", name: str, e: PCall, p: Path, key: tuple[str, str], depth: int) -> Value | object:
    """A call of a Python builtin the evaluator models (never the real one), or
    :data:`NOT_BUILTIN` for any other name."""
    args = e.args
    if name == UNPACK and len(args) == 2:
        # ``a, b = v`` (facts: ``<unpack>(v, 2)[i]``): only a list or tuple of that length unpacks
        # as its elements here (a dict unpacks its keys, a string its characters).
        whole, count = ev.eval(args[0], p, key, depth), ev.eval(args[1], p, key, depth)
        if isinstance(whole, (list, tuple)) and isinstance(count, int) and len(whole) == count:
            return whole
        if isinstance(whole, Unknown) and whole.options and isinstance(count, int) and all(
                isinstance(o, (list, tuple)) and len(o) == count for o in whole.options):
            return whole  # one of several sequences of that length: its elements are read per option
        return whole if isinstance(whole, Unknown) else Unknown(f"{e.text} (unpacked)")
    if name == "getattr" and len(args) in (2, 3):
        owner = ev.eval(args[0], p, key, depth)
        attr = ev.eval(args[1], p, key, depth)
        default: Value | _Absent = ev.eval(args[2], p, key, depth) if len(args) == 3 else ABSENT
        if isinstance(owner, Unknown) and owner.options and isinstance(attr, str) and isinstance(default, _Absent):
            read: str = attr
            return ev._each(owner, p, lambda o, side: ev._attr(o, read, side, key, depth), e.text)
        if not isinstance(attr, str):
            return Unknown(e.text)
        if isinstance(owner, (ClassRef, Instance, ModuleRef)):
            got = ev.attribute(owner, attr, p, key, depth)
            if isinstance(got, _Absent):
                return default if not isinstance(default, _Absent) else Unknown(f"{e.text} (no such attribute)")
            return got
        if isinstance(owner, Obj) and owner.cls is not None and attr not in owner.fields and attr not in owner.roles:
            prop = ev._property(owner.cls, attr, owner, p, key, depth)
            if prop is not None:
                return prop
        if isinstance(owner, Obj):
            v = owner.get(attr)
            if not isinstance(v, Obj):
                shown = f" (default {describe(default)})" if not isinstance(default, _Absent) else ""
                p.reads.append(f"{owner.label}.{attr}{shown}")
            if isinstance(v, _Absent):
                return Unknown(f"{owner.label}.{attr} (not set)") if isinstance(default, _Absent) else default
            return v
        if owner is None and not isinstance(default, _Absent):
            return default
        return Unknown(e.text)
    if name == "hasattr" and len(args) == 2:
        owner = ev.eval(args[0], p, key, depth)
        attr = ev.eval(args[1], p, key, depth)
        if isinstance(owner, Obj) and isinstance(attr, str):
            p.reads.append(f"{owner.label}.{attr} (present?)")
            v = owner.get(attr)
            if isinstance(v, _Absent):
                return False
            return Unknown(e.text) if isinstance(v, Unknown) and (not owner.closed or v.maybe_absent) else True
        if owner is None and isinstance(attr, str):
            return False
        if isinstance(owner, (ClassRef, Instance, ModuleRef)) and isinstance(attr, str):
            got = ev.attribute(owner, attr, p, key, depth)
            return False if isinstance(got, _Absent) else Unknown(e.text) if isinstance(got, Unknown) else True
        return Unknown(e.text)
    if name == "setattr" and len(args) == 3:
        owner = ev.eval(args[0], p, key, depth)
        attr = ev.eval(args[1], p, key, depth)
        value = ev.eval(args[2], p, key, depth)
        if isinstance(owner, Obj) and isinstance(attr, str):
            owner.fields[attr] = value
            return None
        if isinstance(owner, Obj):
            havoc(p, [owner], f"{e.text} (attribute not known)")
        return None
    if name in ("min", "max") and args and not e.keywords:
        vals = [ev.eval(a, p, key, depth) for a in args]
        if len(vals) == 1 and isinstance(vals[0], (list, tuple, frozenset)):
            vals = list(vals[0])
        unknown = [v for v in vals if isinstance(v, Unknown)]
        if unknown:
            return _bounded(name, unknown[0], vals)
        if vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) or v is True or v is False for v in vals):
            return min(vals) if name == "min" else max(vals)  # type: ignore[type-var]
        return Unknown(e.text)
    if name == "len" and len(args) == 1:
        v = ev.eval(args[0], p, key, depth)
        if isinstance(v, (list, tuple, frozenset, dict, str)):
            return len(v)
        return v if isinstance(v, Unknown) else Unknown(e.text)
    if name in ("int", "str", "bool") and len(args) == 1:
        v = ev.eval(args[0], p, key, depth)
        if isinstance(v, Unknown):
            return v
        try:
            if name == "int" and isinstance(v, (int, float, str)):
                return int(v)
            if name == "str" and isinstance(v, (int, float, str, bool)) or v is None and name == "str":
                return str(v)
            if name == "bool":
                t = truth(v)
                return Unknown(e.text) if t is None else t
        except ValueError:
            return Unknown(e.text)
        return Unknown(e.text)
    if name in ("set", "frozenset") and len(args) <= 1 and not e.keywords:
        v = ev.eval(args[0], p, key, depth) if args else ()
        if isinstance(v, (list, tuple, frozenset)) and not any(isinstance(x, (Unknown, Obj, list, dict)) for x in v):
            return frozenset(v)
        return v if isinstance(v, Unknown) else Unknown(e.text)
    if name == "get_args" and len(args) == 1 and isinstance(args[0], PName) and args[0].id not in p.env \
            and not e.keywords:
        # ``typing.get_args(Alias)`` of a module's ``Alias = Literal[...]``: the values it admits.
        values = ev.world.literal_args(key[0], name, args[0].id)
        if values is not None:
            return values
    if name in ("issubclass", "isinstance") and len(args) == 2 and not e.keywords:
        decided = _class_test(ev, name, e, p, key, depth)
        if decided is not None:
            return decided
        return Unknown(e.text)
    if name in ("isinstance", "callable", "any", "all", "type", "issubclass"):
        for a in args:
            ev.eval(a, p, key, depth)
        return Unknown(e.text)
    return NOT_BUILTIN


def _class_test(ev: "ExpressionEvaluator", name: str, e: PCall, p: Path, key: tuple[str, str], depth: int) -> bool | None:
    """``issubclass(C, B)`` for classes of the tree (B or a tuple of them), decided through
    C's MRO (:meth:`World.is_subclass`); ``isinstance(x, B)`` for an object of the tree likewise,
    and ``isinstance(x, type)`` (the builtin, not shadowed) for a class, an object or a literal
    of the tree. None: not decided."""
    subject = ev.eval(e.args[0], p, key, depth)
    kind = e.args[1]
    if name == "isinstance" and isinstance(kind, PName) and kind.id == "type" and kind.id not in p.env \
            and isinstance(ev.world.resolve_name(key[0], "type"), Unknown):
        if isinstance(subject, ClassRef):
            return True
        if isinstance(subject, (Instance, str, int, float, bool)) or subject is None:
            return False
        return None
    bases = ev.eval(kind, p, key, depth)
    candidates = [b for b in (bases if isinstance(bases, tuple) else (bases,)) if isinstance(b, ClassRef)]
    if not candidates or len(candidates) != (len(bases) if isinstance(bases, tuple) else 1):
        return None
    if name == "issubclass" and isinstance(subject, ClassRef) or name == "isinstance" and isinstance(subject, Instance):
        assert isinstance(subject, (ClassRef, Instance))
        answers = [ev.world.is_subclass(subject.cls, b.cls) for b in candidates]
        if any(a is True for a in answers):
            return True
        return False if all(a is False for a in answers) else None
    return None


_PLAIN = (str, int, float, bool, type(None))


def _plain(v: Value) -> bool:
    """A value of a builtin type the evaluator knows whole (no unknown or object inside)."""
    if isinstance(v, _PLAIN):
        return True
    if isinstance(v, (tuple, list, frozenset)):
        return all(_plain(x) for x in v)
    if isinstance(v, dict):
        return all(_plain(k) and _plain(x) for k, x in v.items())
    return False


def call_method(owner: Value, name: str, args: list[Value], kwargs: dict[str, Value]) -> Value | object:
    """A method of a builtin value (list, dict, tuple, frozenset, str, number), modelled
    on our values: the list and dict mutations change the value in place (every alias sees
    it); :data:`NOT_BUILTIN` for a method or arguments not modelled."""
    if kwargs:
        return NOT_BUILTIN
    n = len(args)
    if isinstance(owner, list):
        if name == "append" and n == 1:
            owner.append(args[0])
            return None
        if name == "extend" and n == 1 and isinstance(args[0], (list, tuple)):
            owner.extend(args[0])
            return None
        if name == "insert" and n == 2 and type(args[0]) is int:
            owner.insert(args[0], args[1])
            return None
        if name == "pop" and n <= 1 and owner and (n == 0 or type(args[0]) is int and -len(owner) <= args[0] < len(owner)):
            popped: Value = owner.pop(*args)  # type: ignore[arg-type]
            return popped
        if name == "clear" and n == 0:
            owner.clear()
            return None
        if name == "reverse" and n == 0:
            owner.reverse()
            return None
        if name == "copy" and n == 0:
            return list(owner)
        if name in ("index", "count", "remove") and n == 1 and _plain(owner) and _plain(args[0]):
            if name == "count":
                return owner.count(args[0])
            if args[0] not in owner:
                return NOT_BUILTIN  # ValueError in Python: not modelled
            if name == "index":
                return owner.index(args[0])
            owner.remove(args[0])
            return None
        return NOT_BUILTIN
    if isinstance(owner, dict):
        hashable = n >= 1 and _plain(args[0]) and not isinstance(args[0], (list, dict))
        if name == "get" and 1 <= n <= 2 and hashable:
            return owner.get(args[0], args[1] if n == 2 else None)
        if name == "setdefault" and 1 <= n <= 2 and hashable:
            return owner.setdefault(args[0], args[1] if n == 2 else None)
        if name == "pop" and 1 <= n <= 2 and hashable and (args[0] in owner or n == 2):
            value: Value = owner.pop(args[0], *args[1:])
            return value
        if name == "update" and n == 1 and isinstance(args[0], dict):
            owner.update(args[0])
            return None
        if name == "clear" and n == 0:
            owner.clear()
            return None
        if name == "copy" and n == 0:
            return dict(owner)
        if name in ("keys", "values", "items") and n == 0:
            # Views, modelled as snapshots (a view read after a later change is not modelled).
            return list(owner.keys()) if name == "keys" else list(owner.values()) if name == "values" else [
                (k, v) for k, v in owner.items()]
        return NOT_BUILTIN
    if isinstance(owner, frozenset):
        if name in ("intersection", "union", "difference", "issubset", "issuperset") and n == 1:
            other = args[0]
            if isinstance(other, (list, tuple, frozenset)) and _plain(other):
                o = frozenset(other)
                return {"intersection": owner & o, "union": owner | o, "difference": owner - o,
                        "issubset": owner <= o, "issuperset": owner >= o}[name]
        return NOT_BUILTIN
    if isinstance(owner, str):
        if name in ("lower", "upper", "strip", "lstrip", "rstrip") and n == 0:
            return getattr(owner, name)()  # type: ignore[no-any-return]
        if name in ("startswith", "endswith") and n == 1 and (
                isinstance(args[0], str) or isinstance(args[0], tuple) and all(isinstance(x, str) for x in args[0])):
            return bool(getattr(owner, name)(args[0]))
        if name in ("split", "rsplit") and (n == 0 or n == 1 and isinstance(args[0], str) and args[0]
                                            or n == 2 and isinstance(args[0], str) and args[0]
                                            and type(args[1]) is int):
            return list(getattr(owner, name)(*args))
        if name == "replace" and n == 2 and all(isinstance(a, str) for a in args):
            return owner.replace(str(args[0]), str(args[1]))
        if name == "join" and n == 1 and isinstance(args[0], (list, tuple)) and all(isinstance(x, str) for x in args[0]):
            return owner.join(args[0])
        return NOT_BUILTIN
    return NOT_BUILTIN


def _bounded(name: str, first: Unknown, vals: list[Value]) -> Unknown:
    """``min``/``max`` of values some of which are unknown: unknown, at most (``min``) or at
    least (``max``) every known number and every bound of the unknown ones (when each has one)."""
    known = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
    unknown = [v for v in vals if isinstance(v, Unknown)]
    if name == "min":
        ups = [u.upper for u in unknown if u.upper is not None]
        cands = known + ups
        return Unknown(first.reason, upper=min(cands) if cands else None)
    lows = [u.lower for u in unknown if u.lower is not None]
    cands = known + lows
    return Unknown(first.reason, lower=max(cands) if cands else None)
