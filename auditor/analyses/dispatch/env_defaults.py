"""The defaults of environment variables a module reads lazily from a table of lambdas
(vLLM's ``envs``: ``environment_variables = {"VLLM_X": lambda: bool(int(os.getenv("VLLM_X",
"0")))}``, read as ``envs.VLLM_X``), for a run with every variable unset (config
``env-modules``; issue 18, start-up passes).

The module's source is parsed (never run); each lambda's body is computed with the variable
unset: ``os.getenv(N, d)`` / ``os.environ.get(N, d)`` is ``d`` (``None`` without one),
``N in os.environ`` is False, and ``bool``/``int``/``float``/``str``, ``.lower()``/
``.upper()``/``.strip()``, comparisons, ``not``/``and``/``or`` and ``a if c else b`` of known
values are computed. Anything else leaves the variable out (unknown).
"""

from __future__ import annotations

import ast
from typing import Any

_UNKNOWN = object()
_CASTS = {"bool": bool, "int": int, "float": float, "str": str}
_STR_METHODS = {"lower", "upper", "strip"}


def env_defaults(source: bytes) -> dict[str, Any]:
    """Variable name -> its default, for the table entries whose default is computed."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    out: dict[str, Any] = {}
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if not isinstance(value, ast.Dict):
            continue
        for k, v in zip(value.keys, value.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Lambda):
                got = _value(v.body)
                if got is not _UNKNOWN and (got is None or isinstance(got, (bool, int, float, str))):
                    out.setdefault(k.value, got)
    return out


def _is_environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name) \
        and node.value.id == "os"


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Call):
        return _call(node)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        if isinstance(node.ops[0], (ast.In, ast.NotIn)) and _is_environ(node.comparators[0]):
            return isinstance(node.ops[0], ast.NotIn)  # unset: not in os.environ
        a, b = _value(node.left), _value(node.comparators[0])
        if a is _UNKNOWN or b is _UNKNOWN:
            return _UNKNOWN
        try:
            op = node.ops[0]
            if isinstance(op, ast.Eq):
                return a == b
            if isinstance(op, ast.NotEq):
                return a != b
            if isinstance(op, (ast.In, ast.NotIn)) and isinstance(b, (tuple, list, str)):
                return (a in b) == isinstance(op, ast.In)
        except TypeError:
            return _UNKNOWN
        return _UNKNOWN
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_value(e) for e in node.elts]
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else tuple(items)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        v = _value(node.operand)
        return _UNKNOWN if v is _UNKNOWN else not v
    if isinstance(node, ast.IfExp):
        t = _value(node.test)
        return _UNKNOWN if t is _UNKNOWN else _value(node.body if t else node.orelse)
    if isinstance(node, ast.BoolOp):
        result: Any = None
        for e in node.values:
            result = _value(e)
            if result is _UNKNOWN:
                return _UNKNOWN
            if isinstance(node.op, ast.And) and not result or isinstance(node.op, ast.Or) and result:
                return result
        return result
    return _UNKNOWN


def _call(node: ast.Call) -> Any:
    f = node.func
    if node.keywords:
        return _UNKNOWN
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "os" and f.attr == "getenv" \
            or isinstance(f, ast.Attribute) and f.attr == "get" and _is_environ(f.value):
        if not 1 <= len(node.args) <= 2:
            return _UNKNOWN
        return _value(node.args[1]) if len(node.args) == 2 else None
    if isinstance(f, ast.Name) and f.id in _CASTS and len(node.args) == 1:
        v = _value(node.args[0])
        if v is _UNKNOWN:
            return _UNKNOWN
        try:
            return _CASTS[f.id](v)
        except (TypeError, ValueError):
            return _UNKNOWN  # int("x") raises at run time: not a default
    if isinstance(f, ast.Attribute) and f.attr in _STR_METHODS and not node.args:
        v = _value(f.value)
        return getattr(v, f.attr)() if isinstance(v, str) else _UNKNOWN
    return _UNKNOWN
