"""The Python builtins the partial evaluator models: ``getattr``/``hasattr`` with
defaults, ``min``/``max``/``len``/``int``/``str``/``bool``/``set``/``frozenset``, and
``isinstance``-like predicates (always unknown). Modelled over our value types, never
called on scanned values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...facts import PCall
from .values import ABSENT, Obj, Path, Unknown, Value, _Absent, describe, truth

if TYPE_CHECKING:
    from .evaluator import Evaluator

NOT_BUILTIN = object()


def call_builtin(ev: "Evaluator", name: str, e: PCall, p: Path, key: tuple[str, str], depth: int) -> Value | object:
    """A call of a Python builtin the evaluator models (never the real one), or
    :data:`NOT_BUILTIN` for any other name."""
    args = e.args
    if name == "getattr" and len(args) in (2, 3):
        owner = ev.eval(args[0], p, key, depth)
        attr = ev.eval(args[1], p, key, depth)
        if not isinstance(attr, str):
            return Unknown(e.text)
        default: Value | _Absent = ev.eval(args[2], p, key, depth) if len(args) == 3 else ABSENT
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
            return Unknown(e.text) if isinstance(v, Unknown) and not owner.closed else True
        if owner is None and isinstance(attr, str):
            return False
        return Unknown(e.text)
    if name in ("min", "max") and args and not e.keywords:
        vals = [ev.eval(a, p, key, depth) for a in args]
        if len(vals) == 1 and isinstance(vals[0], (list, tuple, frozenset)):
            vals = list(vals[0])
        for v in vals:
            if isinstance(v, Unknown):
                return v
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
    if name in ("isinstance", "callable", "any", "all", "type", "issubclass"):
        for a in args:
            ev.eval(a, p, key, depth)
        return Unknown(e.text)
    return NOT_BUILTIN
