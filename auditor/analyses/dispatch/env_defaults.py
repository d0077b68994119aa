"""The values of environment variables a module reads lazily from a table of lambdas (vLLM's
``envs``: ``environment_variables = {"VLLM_X": lambda: bool(int(os.getenv("VLLM_X", "0")))}``,
read as ``envs.VLLM_X``), for a process whose environment is known: every variable unset (config
``env-modules``; issue 18, start-up passes), or exactly the variables a question gives
(``layers --env``; every other one unset).

The module's source is parsed (never run); each lambda's body is computed over that
environment: ``os.getenv(N, d)`` / ``os.environ.get(N, d)`` is the variable's text when it is
set, else ``d`` (``None`` without one); ``N in os.environ`` is whether it is set; ``bool``/
``int``/``float``/``str``, ``.lower()``/``.upper()``/``.strip()``, comparisons, ``not``/``and``/
``or`` and ``a if c else b`` of known values are computed; and a call of a function the module
defines whose body is only ``if <test>: return <value>`` and ``return <value>`` statements (vLLM's
``maybe_convert_bool``) is computed with its parameters bound to the arguments. Anything else
leaves the variable out (unknown). A cast of a known value that raises in Python
(``int("true")`` for ``VLLM_USE_V2_MODEL_RUNNER=true``) is :class:`Raises`: reading the variable
raises that exception, as vLLM's lazy read does.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from ..partial_eval import Obj, Unknown

if TYPE_CHECKING:
    from ...index.index import Index

_UNKNOWN = object()
_CASTS = {"bool": bool, "int": int, "float": float, "str": str}
_STR_METHODS = {"lower", "upper", "strip"}
_MAX_DEPTH = 8  # nested helper calls followed


@dataclass(frozen=True)
class Raises:
    """Reading the variable raises this (``ValueError: invalid literal for int() ...``)."""

    message: str


class _Raised(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def env_defaults(source: bytes) -> dict[str, Any]:
    """Variable name -> its value with every variable unset, for the table entries computed."""
    return env_values(source, {})


def env_values(source: bytes, environ: Mapping[str, str]) -> dict[str, Any]:
    """Variable name -> its value when the process environment is exactly ``environ``, for the
    table entries computed."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    computer = _Computer(dict(environ), helpers)
    out: dict[str, Any] = {}
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if not isinstance(value, ast.Dict):
            continue
        for k, v in zip(value.keys, value.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Lambda):
                try:
                    got = computer.value(v.body, {}, 0)
                except _Raised as raised:
                    out.setdefault(k.value, Raises(raised.message))
                    continue
                if got is not _UNKNOWN and (got is None or isinstance(got, (bool, int, float, str))):
                    out.setdefault(k.value, got)
    return out


def module_env_values(index: "Index", path: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """:func:`env_values` of the tree's module at ``path``; empty when it cannot be read."""
    try:  # the source, read (never run): the facts keep no lambda bodies
        src = index.tree.read(path) if path in index.files else None
    except OSError:  # unreadable or too large: every variable unknown
        src = None
    return env_values(src, environ) if src is not None else {}


class EnvTables:
    """:func:`module_env_values` per (module, environment), each module parsed once per
    environment however many evaluators read it."""

    def __init__(self, index: "Index") -> None:
        self.index = index
        self._tables: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, Any]] = {}

    def values(self, path: str, environ: Mapping[str, str]) -> dict[str, Any]:
        key = (path, tuple(sorted(environ.items())))
        if key not in self._tables:
            self._tables[key] = module_env_values(self.index, path, environ)
        return self._tables[key]


def env_object(module: str, values: Mapping[str, Any]) -> Obj:
    """The environment module as the evaluator reads it: an open object whose fields are the
    variables computed (one whose read raises: an :class:`Unknown` that raises it)."""
    return Obj(module, {k: Unknown(f"{module}.{k}", raises=v.message) if isinstance(v, Raises) else v
                        for k, v in values.items()})


def _is_environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name) \
        and node.value.id == "os"


class _Computer:
    def __init__(self, environ: dict[str, str], helpers: dict[str, ast.FunctionDef]) -> None:
        self.environ = environ
        self.helpers = helpers

    def value(self, node: ast.expr, local: dict[str, Any], depth: int) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return local.get(node.id, _UNKNOWN)
        if isinstance(node, ast.Call):
            return self._call(node, local, depth)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self._compare(node, local, depth)
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.value(e, local, depth) for e in node.elts]
            return _UNKNOWN if any(i is _UNKNOWN for i in items) else tuple(items)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            v = self.value(node.operand, local, depth)
            return _UNKNOWN if v is _UNKNOWN else not v
        if isinstance(node, ast.IfExp):
            t = self.value(node.test, local, depth)
            return _UNKNOWN if t is _UNKNOWN else self.value(node.body if t else node.orelse, local, depth)
        if isinstance(node, ast.BoolOp):
            result: Any = None
            for e in node.values:
                result = self.value(e, local, depth)
                if result is _UNKNOWN:
                    return _UNKNOWN
                if isinstance(node.op, ast.And) and not result or isinstance(node.op, ast.Or) and result:
                    return result
            return result
        return _UNKNOWN

    def _compare(self, node: ast.Compare, local: dict[str, Any], depth: int) -> Any:
        op = node.ops[0]
        if isinstance(op, (ast.In, ast.NotIn)) and _is_environ(node.comparators[0]):
            name = self.value(node.left, local, depth)
            if not isinstance(name, str):
                return _UNKNOWN
            return (name in self.environ) == isinstance(op, ast.In)
        a, b = self.value(node.left, local, depth), self.value(node.comparators[0], local, depth)
        if a is _UNKNOWN or b is _UNKNOWN:
            return _UNKNOWN
        try:
            if isinstance(op, ast.Eq):
                return a == b
            if isinstance(op, ast.NotEq):
                return a != b
            if isinstance(op, ast.Is):
                return a is b if a is None or b is None or isinstance(a, bool) else _UNKNOWN
            if isinstance(op, ast.IsNot):
                return a is not b if a is None or b is None or isinstance(a, bool) else _UNKNOWN
            if isinstance(op, (ast.In, ast.NotIn)) and isinstance(b, (tuple, list, str)):
                return (a in b) == isinstance(op, ast.In)
        except TypeError:
            return _UNKNOWN
        return _UNKNOWN

    def _call(self, node: ast.Call, local: dict[str, Any], depth: int) -> Any:
        f = node.func
        if node.keywords:
            return _UNKNOWN
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "os" and f.attr == "getenv" \
                or isinstance(f, ast.Attribute) and f.attr == "get" and _is_environ(f.value):
            if not 1 <= len(node.args) <= 2:
                return _UNKNOWN
            name = self.value(node.args[0], local, depth)
            if not isinstance(name, str):
                return _UNKNOWN
            if name in self.environ:
                return self.environ[name]
            return self.value(node.args[1], local, depth) if len(node.args) == 2 else None
        if isinstance(f, ast.Name) and f.id in _CASTS and f.id not in self.helpers and len(node.args) == 1:
            v = self.value(node.args[0], local, depth)
            if v is _UNKNOWN:
                return _UNKNOWN
            try:
                return _CASTS[f.id](v)
            except (TypeError, ValueError) as e:
                if isinstance(v, (str, int, float, bool)) or v is None:
                    raise _Raised(f"{type(e).__name__}: {e}") from None  # as the read raises in vLLM
                return _UNKNOWN
        if isinstance(f, ast.Attribute) and f.attr in _STR_METHODS and not node.args:
            v = self.value(f.value, local, depth)
            return getattr(v, f.attr)() if isinstance(v, str) else _UNKNOWN
        if isinstance(f, ast.Name) and f.id in self.helpers and depth < _MAX_DEPTH:
            return self._helper(self.helpers[f.id], node.args, local, depth)
        return _UNKNOWN

    def _helper(self, fn: ast.FunctionDef, args: list[ast.expr], local: dict[str, Any], depth: int) -> Any:
        """A module function made only of ``if <test>: return <value>`` (no ``else``) and
        ``return <value>`` statements (a docstring aside), its positional parameters bound."""
        a = fn.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults or len(a.args) != len(args) \
                or any(isinstance(x, ast.Starred) for x in args):
            return _UNKNOWN
        bound = {}
        for p, x in zip(a.args, args):
            v = self.value(x, local, depth)
            if v is _UNKNOWN:
                return _UNKNOWN
            bound[p.arg] = v
        body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) \
            and isinstance(fn.body[0].value, ast.Constant) and isinstance(fn.body[0].value.value, str) else fn.body
        for stmt in body:
            if isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1 \
                    and isinstance(stmt.body[0], ast.Return) and stmt.body[0].value is not None:
                t = self.value(stmt.test, bound, depth + 1)
                if t is _UNKNOWN:
                    return _UNKNOWN
                if t:
                    return self.value(stmt.body[0].value, bound, depth + 1)
            elif isinstance(stmt, ast.Return) and stmt.value is not None:
                return self.value(stmt.value, bound, depth + 1)
            else:
                return _UNKNOWN
        return _UNKNOWN  # (falls off the end: not a shape this reads)
