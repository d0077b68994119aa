"""How often a function binds each name, and the locals it binds exactly once at its top
level (:attr:`~auditor.facts.extract.FunctionFact.local_defs` and ``top_defs``): a local has
one value only when nothing else binds it."""

from __future__ import annotations

import ast


def top_defs(node: ast.FunctionDef | ast.AsyncFunctionDef, params: set[str],
              count: dict[str, int] | None = None) -> dict[str, int]:
    """:attr:`FunctionFact.top_defs`: a name bound once (:func:`binding_counts`), by a
    top-level ``x = v`` or ``x: T = v``, and no parameter, is kept with its line."""
    count = binding_counts(node) if count is None else count
    out: dict[str, int] = {}
    for stmt in node.body:
        target = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target = stmt.target
        if isinstance(target, ast.Name) and count.get(target.id) == 1 and target.id not in params:
            out[target.id] = stmt.lineno
    return out


def binding_counts(node: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, int]:
    """How many times each name is bound anywhere in the function (nested scopes included,
    which only over-counts): a store (an assignment, an unpacking's element, a loop target,
    ``x += 1``, ``with ... as x``, a walrus) or ``del`` once; an ``except ... as``, import,
    nested ``def``/``class``, ``global``/``nonlocal`` or ``match`` capture twice (never one
    plain assignment)."""
    count: dict[str, int] = {}

    def bind(name: str, times: int = 1) -> None:
        count[name] = count.get(name, 0) + times

    for sub in ast.walk(node):
        if sub is node:
            continue
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
    return count
