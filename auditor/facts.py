"""Per-file facts: everything the engine needs to know about one module, as plain JSON data.

Extraction uses the standard library's ``ast`` (see README, "Design": libcst with
position metadata costs ~30x more per file and is kept for the autofix codemod,
where concrete syntax matters). A file's facts depend only on its bytes, so they
are cached by content hash (:mod:`auditor.cache`).

Expressions are summarised as :data:`Expr` dicts::

    {"t": source text (shortened), "n": [names read], "c": is-constant,
     "ch": dotted chain or None, "call": chain of a called function or None,
     "a0": chain of the first argument of that call or None}

Names read include ``self.attr`` chains written as ``"self.attr"`` so side-channel
attributes (``self.spec_step_idx``) flow like locals.
"""

from __future__ import annotations

import ast
import re
from typing import Any

FACTS_VERSION = 7

Expr = dict[str, Any]

_TEXT_LIMIT = 100


def _chain(node: ast.AST) -> list[str] | None:
    """``self.model.compute_logits`` -> ["self", "model", "compute_logits"]; super().f -> ["super()", "f"]."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "super"
    ):
        parts.append("super()")
    else:
        return None
    return parts[::-1]


def _names(node: ast.AST | None) -> list[str]:
    """Names (and self.x chains) read anywhere inside an expression, in source order, unique."""
    if node is None:
        return []
    out: list[str] = []
    seen: set[str] = set()

    def add(name: str) -> None:
        if name not in seen:
            seen.add(name)
            out.append(name)

    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            add(sub.id)
        elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
            add("self." + sub.attr)
    return out


def _is_const(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Starred)):
            return False
    return True


class _Source:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def segment(self, node: ast.AST) -> str:
        try:
            start, end = node.lineno - 1, node.end_lineno - 1  # type: ignore[attr-defined]
            if start == end:
                s = self.lines[start][node.col_offset : node.end_col_offset]  # type: ignore[attr-defined]
            else:
                # Joining the source lines would keep comments and whatever follows the
                # node on its last line (`):  # note`), so the text (part of fingerprints)
                # would change with layout: use the normalised form instead.
                s = ast.unparse(node)
        except (AttributeError, IndexError, TypeError):
            s = ast.unparse(node) if hasattr(ast, "unparse") else ""
        s = " ".join(s.split())
        return s if len(s) <= _TEXT_LIMIT else s[: _TEXT_LIMIT - 1] + "…"


def _expr(node: ast.AST, src: _Source) -> Expr:
    # Keys with empty values are left out to keep cached facts small.
    e: Expr = {"t": src.segment(node), "n": _names(node)}
    if _is_const(node):
        e["c"] = True
    ch = _chain(node)
    if ch is not None:
        e["ch"] = ch
    if isinstance(node, ast.Call):
        e["call"] = _chain(node.func)
        if node.args:
            e["a0"] = _chain(node.args[0])
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, str, bool, float)) or (
        isinstance(node, ast.Constant) and node.value is None
    ):
        e["v"] = node.value
    return e


def _params(args: ast.arguments, src: _Source) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    posonly = list(getattr(args, "posonlyargs", []))
    normal = list(args.args)
    positional = posonly + normal
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for i, a in enumerate(positional):
        d = defaults[i]
        out.append(
            {"name": a.arg, "kind": "posonly" if i < len(posonly) else "pos", "default": None if d is None else src.segment(d)}
        )
    if args.vararg:
        out.append({"name": args.vararg.arg, "kind": "vararg", "default": None})
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        out.append({"name": a.arg, "kind": "kwonly", "default": None if d is None else src.segment(d)})
    if args.kwarg:
        out.append({"name": args.kwarg.arg, "kind": "kwarg", "default": None})
    return out


class _FunctionExtractor(ast.NodeVisitor):
    """Collects the body facts of one function, not descending into nested defs/classes."""

    def __init__(self, src: _Source) -> None:
        self.src = src
        self.calls: list[dict[str, Any]] = []
        self.assigns: dict[str, list[Expr]] = {}
        self.dicts: dict[str, list[list[Any]]] = {}
        self.subscripts: list[dict[str, Any]] = []
        self.attr_sets: list[dict[str, Any]] = []
        self.returns: list[Expr] = []
        self.loops: list[dict[str, Any]] = []
        self.live: set[str] = set()
        self.dead: set[str] = set()
        self.asserts: list[Expr] = []
        self._loop_stack: list[int] = []

    # -- helpers -------------------------------------------------------
    def _bind(self, target: ast.AST, value: ast.AST | None, line: int) -> None:
        if isinstance(target, ast.Name):
            if value is not None:
                for alt in _alternatives(value):
                    self.assigns.setdefault(target.id, []).append(_expr(alt, self.src))
                    self._maybe_dict(target.id, alt)
            else:
                self.assigns.setdefault(target.id, [])
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                inner = elt.value if isinstance(elt, ast.Starred) else elt
                # Unpacking: each element depends on the whole value.
                self._bind(inner, value, line)
        elif isinstance(target, ast.Attribute):
            ch = _chain(target)
            if ch and value is not None:
                for alt in _alternatives(value):
                    e = _expr(alt, self.src)
                    fields = _config_fields(alt, self.src)
                    if fields:
                        e["cfg"] = fields
                    self.attr_sets.append({"target": ch, "value": e, "line": line})
        elif isinstance(target, ast.Subscript):
            # d["key"] = value  -> dict build
            if isinstance(target.value, ast.Name) and isinstance(target.slice, ast.Constant) and isinstance(
                target.slice.value, str
            ):
                if value is not None:
                    self.dicts.setdefault(target.value.id, []).append([target.slice.value, _expr(value, self.src)])

    def _maybe_dict(self, name: str, value: ast.AST) -> None:
        entries: list[list[Any]] | None = None
        if isinstance(value, ast.Dict):
            entries = []
            for k, v in zip(value.keys, value.values):
                if k is None:
                    entries.append(["**", _expr(v, self.src)])
                elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                    entries.append([k.value, _expr(v, self.src)])
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
            entries = []
            for arg in value.args:
                entries.append(["**", _expr(arg, self.src)])
            for kw in value.keywords:
                entries.append([kw.arg if kw.arg else "**", _expr(kw.value, self.src)])
        if entries is not None:
            self.dicts.setdefault(name, []).extend(entries)

    # -- statements ----------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:  # nested def: its body is its own
        for d in node.decorator_list:
            self.visit(d)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        return

    def visit_Lambda(self, node: ast.Lambda) -> None:
        # A lambda's body runs elsewhere; its reads still count as uses.
        self.live.update(_names(node.body))

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for t in node.targets:
            self._bind(t, node.value, node.lineno)
            self._visit_target(t)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self._bind(node.target, node.value, node.lineno)
        self._visit_target(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self.assigns.setdefault(node.target.id, []).append(_expr(node.value, self.src))
            self.live.add(node.target.id)
        self._visit_target(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind(node.target, node.value, node.lineno)

    def _visit_target(self, t: ast.AST) -> None:
        # Reads inside a store target (x[i] = ..., self.a.b = ...) are live reads.
        if isinstance(t, ast.Subscript):
            self.visit(t.value)
            self.visit(t.slice)
        elif isinstance(t, ast.Attribute):
            self.visit(t.value)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._visit_target(e)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        loop_id = len(self.loops)
        targets = [n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)]
        self.loops.append(
            {
                "id": loop_id,
                "line": node.lineno,
                "col": node.col_offset,
                "targets": targets,
                "iter": _expr(node.iter, self.src),
                "parents": list(self._loop_stack),
            }
        )
        for t in targets:
            self.assigns.setdefault(t, []).append({"t": "<loop>", "n": [], "c": False, "ch": None, "loop": loop_id})
        self._loop_stack.append(loop_id)
        for stmt in node.body:
            self.visit(stmt)
        self._loop_stack.pop()
        for stmt in node.orelse:
            self.visit(stmt)

    visit_AsyncFor = visit_For  # type: ignore[assignment]

    def visit_While(self, node: ast.While) -> None:
        self.generic_visit(node)

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._bind(item.optional_vars, item.context_expr, node.lineno)
        for stmt in node.body:
            self.visit(stmt)

    visit_AsyncWith = visit_With  # type: ignore[assignment]

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.visit(node.value)
            for alt in _alternatives(node.value):
                self.returns.append(_expr(alt, self.src))

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            if isinstance(t, ast.Name):
                self.dead.add(t.id)
            else:
                self._visit_target(t)

    def visit_Expr(self, node: ast.Expr) -> None:
        # A bare expression statement without calls (`spec_step_idx`, `x + 1`) is a dead use.
        if not any(isinstance(n, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)) for n in ast.walk(node.value)):
            self.dead.update(_names(node.value))
            return
        self.visit(node.value)

    def visit_Assert(self, node: ast.Assert) -> None:
        self.asserts.append(_expr(node.test, self.src))
        self.generic_visit(node)

    # -- expressions ---------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.live.add(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.value.id == "self" and isinstance(node.ctx, ast.Load):
            self.live.add("self." + node.attr)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        base = node.value
        ch = _chain(base)
        if ch is None and isinstance(base, ast.Call):
            # getattr(self, "layers")[i] and the like: keep the call chain
            ch = None
        if ch is not None and ch[0] == "self" and len(ch) >= 2:
            self.subscripts.append(
                {
                    "container": ch,
                    "index": _expr(node.slice, self.src),
                    "line": node.lineno,
                    "col": node.col_offset,
                    "loops": list(self._loop_stack),
                }
            )
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func_chain = _chain(node.func)
        args, star = [], []
        for a in node.args:
            if isinstance(a, ast.Starred):
                star.append(_expr(a.value, self.src))
            else:
                args.append(_expr(a, self.src))
        kwargs, dstar = [], []
        for kw in node.keywords:
            if kw.arg is None:
                dstar.append(_expr(kw.value, self.src))
            else:
                kwargs.append([kw.arg, _expr(kw.value, self.src)])
        self.calls.append(
            {
                "line": node.lineno,
                "col": node.col_offset,
                "func": func_chain,
                "args": args,
                "kwargs": kwargs,
                "star": star,
                "dstar": dstar,
                "loops": list(self._loop_stack),
            }
        )
        # dict-building calls on a local: d.update(k=v)
        if (
            func_chain
            and len(func_chain) == 2
            and func_chain[1] == "update"
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
        ):
            for kw in node.keywords:
                self.dicts.setdefault(func_chain[0], []).append([kw.arg or "**", _expr(kw.value, self.src)])
        self.generic_visit(node)


_CFG_ATTR = re.compile(r"\b\w*config\w*\.(\w+)")
_CFG_GETATTR = re.compile(r"getattr\(\s*[\w.]*config\w*\s*,\s*[\"'](\w+)[\"']")


def _config_fields(node: ast.AST, src: _Source) -> list[str]:
    """Config fields an attribute's value reads (``config.x``, ``getattr(config, "x", d)``)."""
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse of odd nodes
        return []
    found = _CFG_ATTR.findall(text) + _CFG_GETATTR.findall(text)
    return sorted(set(f for f in found if not f.startswith("_")))


def _alternatives(value: ast.AST) -> list[ast.AST]:
    """`a if c else b` gives two alternatives; `a or b` too. Everything else is itself."""
    if isinstance(value, ast.IfExp):
        return _alternatives(value.body) + _alternatives(value.orelse)
    if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or):
        out: list[ast.AST] = []
        for v in value.values:
            out.extend(_alternatives(v))
        return out
    return [value]


def _function(node: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str, src: _Source) -> dict[str, Any]:
    ex = _FunctionExtractor(src)
    for stmt in node.body:
        ex.visit(stmt)
    for dflt in list(node.args.defaults) + [d for d in node.args.kw_defaults if d is not None]:
        ex.live.update(_names(dflt))
    own = {a.arg for a in [*getattr(node.args, "posonlyargs", []), *node.args.args, *node.args.kwonlyargs]}
    own.update(a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None)
    return {
        "name": node.name,
        "qualname": qualname,
        "line": node.lineno,
        "col": node.col_offset,
        "end_line": getattr(node, "end_lineno", node.lineno),
        "params": _params(node.args, src),
        "decorators": [src.segment(d) for d in node.decorator_list],
        "calls": ex.calls,
        "assigns": ex.assigns,
        "dicts": ex.dicts,
        "subscripts": ex.subscripts,
        "attr_sets": ex.attr_sets,
        "returns": ex.returns,
        "loops": ex.loops,
        # Only reads of the function's own parameters and of self attributes are ever
        # asked about (is a declared parameter used? is self.<param> read?).
        "live": sorted(n for n in ex.live if n in own or n.startswith("self.")),
        "dead": sorted(n for n in ex.dead - ex.live if n in own or n.startswith("self.")),
        "asserts": ex.asserts,
    }


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    base = ".".join(parts)
    if target:
        return f"{base}.{target}" if base else target
    return base


def _str_pair_table(value: ast.AST) -> dict[str, list[str]] | None:
    """A dict literal mapping str -> (str, str): vLLM's registry tables."""
    if not isinstance(value, ast.Dict) or not value.keys:
        return None
    table: dict[str, list[str]] = {}
    for k, v in zip(value.keys, value.values):
        if (
            isinstance(k, ast.Constant)
            and isinstance(k.value, str)
            and isinstance(v, ast.Tuple)
            and len(v.elts) == 2
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in v.elts)
        ):
            table[k.value] = [v.elts[0].value, v.elts[1].value]  # type: ignore[attr-defined]
    return table or None


def extract(text: str, path: str, module: str, is_package: bool) -> dict[str, Any]:
    """Parse one module and return its facts. Raises SyntaxError/ValueError/RecursionError on bad input."""
    tree = ast.parse(text, filename=path, type_comments=False)
    src = _Source(text)
    imports: list[list[Any]] = []
    classes: dict[str, Any] = {}
    functions: dict[str, Any] = {}
    tables: dict[str, Any] = {}
    module_assigns: dict[str, list[Expr]] = {}

    # Imports anywhere in the module (if/else platform branches, try/except, and
    # lazy `__getattr__` bodies) are alternatives for the bound name.
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                target = alias.name if alias.asname else alias.name.split(".")[0]
                imports.append([local, target, None])
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_relative(module, is_package, node.level or 0, node.module)
            for alias in node.names:
                if alias.name == "*":
                    imports.append(["*", base, "*"])
                else:
                    imports.append([alias.asname or alias.name, base, alias.name])

    def visit_class(node: ast.ClassDef, prefix: str) -> None:
        qual = f"{prefix}{node.name}"
        methods: dict[str, Any] = {}
        class_attrs: dict[str, Expr] = {}
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods[stmt.name] = _function(stmt, f"{qual}.{stmt.name}", src)
            elif isinstance(stmt, ast.ClassDef):
                visit_class(stmt, qual + ".")
            elif isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        class_attrs[t.id] = _expr(stmt.value, src)
        classes[qual] = {
            "name": node.name,
            "qualname": qual,
            "line": node.lineno,
            "col": node.col_offset,
            "bases": [_chain(b) or [src.segment(b)] for b in node.bases],
            "decorators": [src.segment(d) for d in node.decorator_list],
            "methods": methods,
            "class_attrs": class_attrs,
        }

    for node in tree.body:
        _toplevel(node, visit_class, functions, tables, module_assigns, src)

    return {
        "v": FACTS_VERSION,
        "path": path,
        "module": module,
        "is_package": is_package,
        "imports": imports,
        "classes": classes,
        "functions": functions,
        "tables": tables,
        "module_assigns": module_assigns,
    }


def _toplevel(node, visit_class, functions, tables, module_assigns, src) -> None:
    if isinstance(node, ast.ClassDef):
        visit_class(node, "")
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        functions[node.name] = _function(node, node.name, src)
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if value is None:
            return
        for t in targets:
            if isinstance(t, ast.Name):
                table = _str_pair_table(value)
                if table:
                    tables[t.id] = table
                module_assigns.setdefault(t.id, []).append(_expr(value, src))
    elif isinstance(node, (ast.If, ast.Try)) or node.__class__.__name__ == "TryStar":
        # Definitions under platform branches / try-import fallbacks are alternatives.
        bodies = [node.body, getattr(node, "orelse", [])]
        if isinstance(node, ast.Try) or node.__class__.__name__ == "TryStar":
            bodies += [h.body for h in node.handlers] + [node.finalbody]
        for body in bodies:
            for sub in body:
                _toplevel(sub, visit_class, functions, tables, module_assigns, src)
