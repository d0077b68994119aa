"""Statement trees extracted on demand (issue 18): the facts keep the tree of a function only
when the dispatch analysis evaluates functions of its shape (:func:`auditor.facts.statements.
_keeps_body`); a question about a few calls of another (a small helper a draft model's
constructor sizes its layers with) has its tree extracted from the file when asked. The file is
parsed, never run; the trees are kept per function."""

from __future__ import annotations

import ast
from collections import OrderedDict

import msgspec

from ..facts.bindings import binding_counts, node_bindings
from ..facts.extract import FunctionFact
from ..facts.statements import (
    PExpr,
    POpaque,
    Stmt,
    _Source,
    class_node,
    function_node,
    function_statements_in,
    pexpr,
)
from ..source.trees import FileTooLarge
from .index import FuncKey, Index

_PARSED = 8  # files whose syntax trees are kept while their functions are asked for


class FunctionBodies:
    def __init__(self, index: Index) -> None:
        self.index = index
        self._trees: dict[FuncKey, tuple[Stmt, ...] | None] = {}
        self._rebinds: dict[FuncKey, dict[str, tuple[Rebinding, ...]] | None] = {}
        self._values: dict[tuple[str, str], PExpr | None] = {}
        # (module, name) -> what the partial evaluator found for a module-level value: it does
        # not depend on a configuration, so every evaluator of the scan shares it.
        self.evaluated: dict[tuple[str, str], object] = {}
        self._parsed: OrderedDict[str, tuple[ast.Module, str] | None] = OrderedDict()

    def _module(self, path: str) -> tuple[ast.Module, str] | None:
        """The file at ``path`` parsed (never run); None when it cannot be read or parsed."""
        if path in self._parsed:
            self._parsed.move_to_end(path)
            return self._parsed[path]
        found: tuple[ast.Module, str] | None = None
        try:
            data: bytes | None = self.index.tree.read(path)
        except (FileTooLarge, OSError):
            data = None
        if data is not None:
            text = data.decode("utf-8", "surrogateescape")
            try:
                found = (ast.parse(text), text)
            except (SyntaxError, ValueError, RecursionError):
                found = None
        self._parsed[path] = found
        if len(self._parsed) > _PARSED:
            self._parsed.popitem(last=False)
        return found

    def module_value(self, path: str, name: str) -> PExpr | None:
        """The expression of the one module-level assignment of ``name`` in the file at
        ``path`` (``N = expr`` or ``N: T = expr``, not under a branch), as the partial
        evaluator reads it; None: no such assignment, or one it cannot read at all."""
        key = (path, name)
        if key not in self._values:
            parsed = self._module(path)
            found: PExpr | None = None
            if parsed is not None:
                tree, text = parsed
                values = [n.value for n in tree.body
                          if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
                          or isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == name]
                if len(values) == 1 and values[0] is not None and not isinstance(values[0], ast.Call):
                    # (a table, a tuple, an f-string...; a bare call, ``logger = init_logger(...)``,
                    # would run another module's code for a value nothing decides by)
                    found = pexpr(values[0], _Source(text))
                    found = None if isinstance(found, POpaque) else found
            self._values[key] = found
        return self._values[key]

    def class_value(self, path: str, qualname: str, name: str) -> PExpr | None:
        """The expression of the one binding of ``name`` in the body of the class ``qualname``
        of the file at ``path`` (``name = expr`` or ``name: T = expr`` among its statements, and
        no other binding of the name anywhere in the class body: not under a branch, not a
        method), as the partial evaluator reads it; None otherwise, or when the expression
        reads a name the class body binds (class scope: not the module's name)."""
        key = (path, f"{qualname}.{name}")
        if key not in self._values:
            parsed = self._module(path)
            cls = class_node(parsed[0], qualname) if parsed is not None else None
            found: PExpr | None = None
            if cls is not None and parsed is not None:
                bound = binding_counts(cls)  # (its methods' own bindings count too: only more cautious)
                values = [n.value for n in cls.body
                          if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                          and n.targets[0].id == name
                          or isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == name]
                if len(values) == 1 and values[0] is not None and bound.get(name) == 1 and not (
                        {x.id for x in ast.walk(values[0]) if isinstance(x, ast.Name)} & set(bound)):
                    found = pexpr(values[0], _Source(parsed[1]))
                    found = None if isinstance(found, POpaque) else found
            self._values[key] = found
        return self._values[key]

    def function(self, key: FuncKey) -> FunctionFact | None:
        """:meth:`Index.function`, with its statement tree when the facts keep none."""
        fn = self.index.function(key)
        if fn is None or fn.body:
            return fn
        if key not in self._trees:
            parsed = self._module(key[0])
            self._trees[key] = function_statements_in(parsed[0], parsed[1], key[1]) if parsed is not None else None
        body = self._trees[key]
        return msgspec.structs.replace(fn, body=body) if body else fn

    def rebindings(self, key: FuncKey) -> dict[str, tuple[Rebinding, ...]] | None:
        """Per parameter of the function ``key`` that its body binds again, the top-level
        statements of the body that bind it (:class:`Rebinding`), in order; None when the
        function's source cannot be read or found."""
        if key not in self._rebinds:
            parsed = self._module(key[0])
            fn = self.index.function(key)
            node = function_node(parsed[0], key[1], fn.line) if parsed is not None and fn is not None else None
            self._rebinds[key] = _rebindings(node, _Source(parsed[1])) if node is not None and parsed is not None \
                else None
        return self._rebinds[key]


class Rebinding(msgspec.Struct, frozen=True):
    """A top-level statement of a function body (lines ``start``..``end``) that binds one of
    its parameters again. ``default``: the statement is ``if p is None: p = v`` (no ``else``,
    its one statement that assignment, the parameter's one binding in it), ``v``; None for
    any other binding (an assignment, a loop target, ``with ... as``, an import, a nested
    ``def``, a walrus, ``del``...)."""

    start: int
    end: int
    default: PExpr | None = None


def _rebindings(node: ast.FunctionDef | ast.AsyncFunctionDef, src: _Source) -> dict[str, tuple[Rebinding, ...]]:
    args = node.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    params.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    out: dict[str, list[Rebinding]] = {}
    for stmt in node.body:
        count = node_bindings(stmt)
        for name in sorted(params & set(count)):
            value = _default_value(stmt, name) if count[name] == 1 else None
            out.setdefault(name, []).append(Rebinding(stmt.lineno, stmt.end_lineno or stmt.lineno,
                                                      pexpr(value, src) if value is not None else None))
    return {k: tuple(v) for k, v in out.items()}


def _default_value(stmt: ast.stmt, name: str) -> ast.expr | None:
    """``v`` of ``if <name> is None: <name> = v`` (no ``else``, one statement)."""
    if not (isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1):
        return None
    test = stmt.test
    if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == name
            and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is) and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None):
        return None
    body = stmt.body[0]
    if isinstance(body, ast.Assign) and len(body.targets) == 1 and isinstance(body.targets[0], ast.Name) \
            and body.targets[0].id == name:
        return body.value
    if isinstance(body, ast.AnnAssign) and isinstance(body.target, ast.Name) and body.target.id == name \
            and body.value is not None:
        return body.value
    return None
