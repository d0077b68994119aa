"""How often a function binds each name, the locals it binds exactly once at its top
level (:attr:`~auditor.facts.extract.FunctionFact.local_defs` and ``top_defs``): a local has
one value only when nothing else binds it; and every name a class body binds
(:attr:`~auditor.facts.extract.ClassFact.body_names`)."""

from __future__ import annotations

import ast
from typing import Callable


def top_defs(node: ast.FunctionDef | ast.AsyncFunctionDef, params: set[str],
              count: dict[str, int] | None = None) -> dict[str, int]:
    """:attr:`FunctionFact.top_defs`: a name bound once (:func:`binding_counts`), by a
    top-level ``x = v``, ``x: T = v`` or flat unpacking ``x, y = v``, and no parameter, is
    kept with its line."""
    count = binding_counts(node) if count is None else count
    out: dict[str, int] = {}
    for stmt in node.body:
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            flat = isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in target.elts)
            targets = list(target.elts) if flat else [target]  # type: ignore[attr-defined]
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets = [stmt.target]
        for target in targets:
            if isinstance(target, ast.Name) and count.get(target.id) == 1 and target.id not in params:
                out[target.id] = stmt.lineno
    return out


def binding_counts(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, walrus: bool = True) -> dict[str, int]:
    """How many times each name is bound anywhere in the function (or class body; nested scopes included,
    which only over-counts): a store (an assignment, an unpacking's element, a loop target,
    ``x += 1``, ``with ... as x``, a walrus) or ``del`` once; an ``except ... as``, import,
    nested ``def``/``class``, ``global``/``nonlocal`` or ``match`` capture twice (never one
    plain assignment). ``walrus`` False: the function's text has no ``:=``, so only statements
    bind and its expressions need not be walked (most of its nodes: a tenth of extraction)."""
    count: dict[str, int] = {}

    def bind(name: str, times: int = 1) -> None:
        count[name] = count.get(name, 0) + times

    if walrus:
        for sub in ast.walk(node):
            if sub is not node:
                _count_node(sub, bind)
        return count
    stack: list[ast.AST] = list(node.body)
    while stack:
        stmt = stack.pop()
        for target in _targets(stmt):
            for sub in ast.walk(target):
                if type(sub) is ast.Name and type(sub.ctx) is not ast.Load:
                    bind(sub.id)
        if isinstance(stmt, (ast.Try, ast.TryStar)):
            for h in stmt.handlers:
                if h.name:
                    bind(h.name, 2)
                stack.extend(h.body)
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                for sub in ast.walk(case.pattern):
                    _count_node(sub, bind)
                stack.extend(case.body)
        else:
            _count_node(stmt, bind)
        for name in ("body", "orelse", "finalbody"):
            stack.extend(getattr(stmt, name, ()))
    return count


def node_bindings(node: ast.AST) -> dict[str, int]:
    """How many times ``node`` (a statement, say) binds each name, itself and what it holds, as
    :func:`binding_counts` counts them."""
    count: dict[str, int] = {}

    def bind(name: str, times: int = 1) -> None:
        count[name] = count.get(name, 0) + times

    for sub in ast.walk(node):
        _count_node(sub, bind)
    return count


def _targets(stmt: ast.AST) -> tuple[ast.AST, ...]:
    """What a statement stores into or deletes (its names are bindings)."""
    if isinstance(stmt, (ast.Assign, ast.Delete)):
        return tuple(stmt.targets)
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        return (stmt.target,)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return tuple(i.optional_vars for i in stmt.items if i.optional_vars is not None)
    return ()


def _count_node(sub: ast.AST, bind: Callable[..., None]) -> None:
    if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
        bind(sub.id)
    elif isinstance(sub, ast.ExceptHandler) and sub.name:
        bind(sub.name, 2)
    elif isinstance(sub, (ast.Import, ast.ImportFrom)):
        for a in sub.names:
            bind((a.asname or a.name).split(".")[0], 2)
    elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        bind(sub.name, 2)
    elif isinstance(sub, (ast.Global, ast.Nonlocal)):
        for n in sub.names:
            bind(n, 2)
    elif isinstance(sub, (ast.MatchAs, ast.MatchStar)) and sub.name:
        bind(sub.name, 2)
    elif isinstance(sub, ast.MatchMapping) and sub.rest:
        bind(sub.rest, 2)


def class_body_names(node: ast.ClassDef) -> tuple[str, ...]:
    """The names a class body binds, in its own scope (not inside its methods or nested classes)."""
    out: list[str] = []
    todo: list[ast.AST] = list(node.body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(n.name)
            continue
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            out.extend((a.asname or a.name).split(".")[0] for a in n.names)
            continue
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.append(n.id)
        todo.extend(ast.iter_child_nodes(n))
    return tuple(sorted(set(out)))
