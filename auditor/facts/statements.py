"""The statement and expression trees of a function that the partial evaluator runs
(guards, returns, config writes in order; what it cannot evaluate is kept as text), the
base record type, and the small syntax helpers extraction shares. Split from
:mod:`auditor.facts.extract` (which re-exports these names); the facts cache key covers
both modules' code."""

from __future__ import annotations

import ast
from typing import Union

import msgspec

_TEXT_LIMIT = 100

Chain = tuple[str, ...]
"""A dotted access path: ``self.model.compute_logits`` -> ("self", "model", "compute_logits");
``super().f`` -> ("super()", "f")."""

Literal = Union[int, str, bool, float, None]


class Struct(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """Base of every fact record: immutable, compact when encoded, strict when decoded."""


# The partial evaluator (auditor/analyses/partial_eval/) runs factories, predicates
# and config-override code over a concrete configuration. It needs the branch guards,
# returns and config writes of a function in order, with their expressions as small
# trees; anything it cannot evaluate is kept as its text only (``POpaque``).


#: The callee name of an unpacking's value (``a, b = v``: ``a`` is ``<unpack>(v, 2)[0]``), which
#: no source can call: the evaluator takes the elements of a list or tuple of that length only.
UNPACK = "<unpack>"


class PExprBase(Struct, tag_field="k", frozen=True):
    """Base of the expression tree nodes (tagged so a union decodes unambiguously)."""


class PConst(PExprBase, frozen=True, tag="c"):
    value: Literal = None


class PName(PExprBase, frozen=True, tag="n"):
    id: str


class PAttr(PExprBase, frozen=True, tag="a"):
    value: "PExpr"
    attr: str


class PKeyword(Struct, frozen=True):
    name: str | None  # None for **x
    value: "PExpr"


class PCall(PExprBase, frozen=True, tag="call"):
    func: "PExpr"
    args: tuple["PExpr", ...] = ()
    keywords: tuple[PKeyword, ...] = ()
    text: str = ""


class PCompare(PExprBase, frozen=True, tag="cmp"):
    left: "PExpr"
    ops: tuple[str, ...]
    comparators: tuple["PExpr", ...]


class PBool(PExprBase, frozen=True, tag="b"):
    op: str  # "and" | "or"
    values: tuple["PExpr", ...]


class PNot(PExprBase, frozen=True, tag="not"):
    operand: "PExpr"


class PSeq(PExprBase, frozen=True, tag="seq"):
    kind: str  # "tuple" | "list" | "set"
    elts: tuple["PExpr", ...] = ()


class PDict(PExprBase, frozen=True, tag="d"):
    keys: tuple["PExpr | None", ...] = ()  # None for **x
    values: tuple["PExpr", ...] = ()


class PSubscript(PExprBase, frozen=True, tag="sub"):
    value: "PExpr"
    index: "PExpr"


class PIfExp(PExprBase, frozen=True, tag="if"):
    test: "PExpr"
    body: "PExpr"
    orelse: "PExpr"


class PBinOp(PExprBase, frozen=True, tag="bin"):
    op: str
    left: "PExpr"
    right: "PExpr"


class PNamed(PExprBase, frozen=True, tag="walrus"):
    target: str
    value: "PExpr"


class PFormat(PExprBase, frozen=True, tag="fmt"):
    """An f-string whose replacement fields have no conversion and no format spec
    (``f"{a}.{b}"``): its parts in order, the literal ones as :class:`PConst` strings."""

    parts: tuple["PExpr", ...]
    text: str  # as written (what :class:`POpaque` would keep)


class POpaque(PExprBase, frozen=True, tag="o"):
    text: str


PExpr = Union[PConst, PName, PAttr, PCall, PCompare, PBool, PNot, PSeq, PDict, PSubscript, PIfExp, PBinOp, PNamed,
              PFormat, POpaque]


class StmtBase(Struct, tag_field="k", frozen=True):
    line: int


class SIf(StmtBase, tag="if", frozen=True):
    test: PExpr
    text: str
    body: tuple["Stmt", ...] = ()
    orelse: tuple["Stmt", ...] = ()


class SReturn(StmtBase, tag="ret", frozen=True):
    value: PExpr | None = None


class SRaise(StmtBase, tag="raise", frozen=True):
    text: str = ""


class SLoopExit(StmtBase, tag="loopexit", frozen=True):
    """``break`` or ``continue`` in the body of a plain ``for`` loop (:class:`SOpaque`)."""

    kind: str  # "break" or "continue"


class SAssign(StmtBase, tag="set", frozen=True):
    targets: tuple[PExpr, ...]  # names, attribute chains and subscripts; anything else is POpaque
    value: PExpr
    aug: bool = False  # ``t op= v``: ``value`` is ``t op v``, and a list/dict target is updated in place


class SExpr(StmtBase, tag="expr", frozen=True):
    value: PExpr


class SOpaque(StmtBase, tag="opaque", frozen=True):
    """A loop, try or match statement: not run; what it may write becomes unknown. A plain
    ``for`` loop (a name or names as its target, no ``else``) also keeps its target, iterable
    and body (its own ``break``/``continue``: :class:`SLoopExit`): the evaluator runs it once
    per element when it knows the iterable (a list or tuple of a few elements)."""

    writes: tuple[PExpr, ...] = ()
    returns: bool = False  # it holds a return or raise
    # Values it may change in place: receivers and arguments of its calls, containers it
    # stores into or deletes from (the evaluator makes everything reachable from them unknown).
    mutated: tuple[PExpr, ...] = ()
    loop_target: "PExpr | None" = None
    loop_iter: "PExpr | None" = None
    body: tuple["Stmt", ...] = ()


Stmt = Union[SIf, SReturn, SRaise, SAssign, SExpr, SOpaque, SLoopExit]

_CMP_OPS: dict[type[ast.cmpop], str] = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
}
_BIN_OPS: dict[type[ast.operator], str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%", ast.BitOr: "|", ast.BitAnd: "&",
}
_MAX_PEXPR_DEPTH = 12


def pexpr(node: ast.AST, src: "_Source", depth: int = 0) -> PExpr:
    """The expression as a tree the partial evaluator understands (the rest is opaque)."""
    if depth > _MAX_PEXPR_DEPTH:
        return POpaque(src.segment(node))
    d = depth + 1
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, (int, str, bool, float)):
            return PConst(node.value)
    elif isinstance(node, ast.Name):
        return PName(node.id)
    elif isinstance(node, ast.Attribute):
        return PAttr(pexpr(node.value, src, d), node.attr)
    elif isinstance(node, ast.Call):
        if not any(isinstance(a, ast.Starred) for a in node.args):
            return PCall(
                pexpr(node.func, src, d),
                tuple(pexpr(a, src, d) for a in node.args),
                tuple(PKeyword(k.arg, pexpr(k.value, src, d)) for k in node.keywords),
                src.segment(node),
            )
    elif isinstance(node, ast.Compare):
        ops = [_CMP_OPS.get(type(o)) for o in node.ops]
        if all(ops):
            return PCompare(pexpr(node.left, src, d), tuple(o for o in ops if o), tuple(pexpr(c, src, d) for c in node.comparators))
    elif isinstance(node, ast.BoolOp):
        return PBool("and" if isinstance(node.op, ast.And) else "or", tuple(pexpr(v, src, d) for v in node.values))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return PNot(pexpr(node.operand, src, d))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        if isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
            return PConst(-node.operand.value)
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        if not any(isinstance(e, ast.Starred) for e in node.elts):
            kind = {ast.Tuple: "tuple", ast.List: "list", ast.Set: "set"}[type(node)]
            return PSeq(kind, tuple(pexpr(e, src, d) for e in node.elts))
    elif isinstance(node, ast.Dict):
        return PDict(tuple(None if k is None else pexpr(k, src, d) for k in node.keys), tuple(pexpr(v, src, d) for v in node.values))
    elif isinstance(node, ast.Subscript):
        return PSubscript(pexpr(node.value, src, d), pexpr(node.slice, src, d))
    elif isinstance(node, ast.IfExp):
        return PIfExp(pexpr(node.test, src, d), pexpr(node.body, src, d), pexpr(node.orelse, src, d))
    elif isinstance(node, ast.BinOp) and type(node.op) in _BIN_OPS:
        return PBinOp(_BIN_OPS[type(node.op)], pexpr(node.left, src, d), pexpr(node.right, src, d))
    elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
        return PNamed(node.target.id, pexpr(node.value, src, d))
    elif isinstance(node, ast.JoinedStr):
        parts: list[PExpr] = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                parts.append(PConst(v.value))
            elif isinstance(v, ast.FormattedValue) and v.conversion == -1 and v.format_spec is None:
                parts.append(pexpr(v.value, src, d))
            else:
                return POpaque(src.segment(node))
        return PFormat(tuple(parts), src.segment(node))
    return POpaque(src.segment(node))


def _writes(stmts: list[ast.stmt], src: "_Source") -> tuple[tuple[PExpr, ...], bool, tuple[PExpr, ...]]:
    """Targets a statement list may assign, whether it can return or raise, and the
    values it may change in place (call receivers and arguments, containers stored into)."""
    out: list[PExpr] = []
    mutated: list[PExpr] = []
    returns = False
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Return, ast.Raise)):
                returns = True
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for t in targets:
                    for sub in ast.walk(t):
                        if isinstance(sub, (ast.Name, ast.Attribute)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                            out.append(pexpr(sub, src))
                        elif isinstance(sub, ast.Subscript) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                            mutated.append(pexpr(sub.value, src))
                    if isinstance(node, ast.AugAssign) and isinstance(t, (ast.Name, ast.Attribute)):
                        mutated.append(pexpr(t, src))  # xs += [...] extends the list in place
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                out.extend(pexpr(n, src) for n in ast.walk(node.target) if isinstance(n, ast.Name))
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                out.extend(pexpr(n, src) for n in ast.walk(node.optional_vars) if isinstance(n, ast.Name))
            elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
                out.append(PName(node.target.id))
            elif isinstance(node, ast.Call):
                if isinstance(node.func, ast.Attribute):
                    mutated.append(pexpr(node.func.value, src))
                mutated.extend(pexpr(a.value if isinstance(a, ast.Starred) else a, src) for a in node.args)
                mutated.extend(pexpr(k.value, src) for k in node.keywords)
    return tuple(out), returns, tuple(mutated)


def stmt_tree(stmts: list[ast.stmt], src: "_Source") -> tuple[Stmt, ...]:
    out: list[Stmt] = []
    for stmt in stmts:
        if isinstance(stmt, ast.If):
            out.append(SIf(stmt.lineno, pexpr(stmt.test, src), src.segment(stmt.test), stmt_tree(stmt.body, src), stmt_tree(stmt.orelse, src)))
        elif isinstance(stmt, ast.Return):
            out.append(SReturn(stmt.lineno, None if stmt.value is None else pexpr(stmt.value, src)))
        elif isinstance(stmt, (ast.Break, ast.Continue)):
            out.append(SLoopExit(stmt.lineno, "break" if isinstance(stmt, ast.Break) else "continue"))
        elif isinstance(stmt, ast.Raise):
            out.append(SRaise(stmt.lineno, src.segment(stmt.exc) if stmt.exc is not None else ""))
        elif isinstance(stmt, ast.Assign):
            out.append(SAssign(stmt.lineno, tuple(pexpr(t, src) for t in stmt.targets), pexpr(stmt.value, src)))
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            out.append(SAssign(stmt.lineno, (pexpr(stmt.target, src),), pexpr(stmt.value, src)))
        elif isinstance(stmt, ast.AugAssign):
            target = pexpr(stmt.target, src)
            op = _BIN_OPS.get(type(stmt.op))
            value: PExpr = PBinOp(op, target, pexpr(stmt.value, src)) if op else POpaque(src.segment(stmt))
            out.append(SAssign(stmt.lineno, (target,), value, aug=True))
        elif isinstance(stmt, ast.Expr):
            if not (isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)):  # docstrings
                out.append(SExpr(stmt.lineno, pexpr(stmt.value, src)))
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            out.extend(stmt_tree(stmt.body, src))  # the body runs (the context manager is not modelled)
        elif isinstance(stmt, (ast.Pass, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Assert)):
            continue
        else:
            writes, returns, mutated = _writes([stmt], src)
            if _plain_for(stmt):
                assert isinstance(stmt, ast.For)
                out.append(SOpaque(stmt.lineno, writes, returns, mutated, pexpr(stmt.target, src), pexpr(stmt.iter, src),
                                   stmt_tree(stmt.body, src)))
            else:
                out.append(SOpaque(stmt.lineno, writes, returns, mutated))
    return tuple(out)


def _plain_for(stmt: ast.stmt) -> bool:
    """A ``for`` loop the evaluator may run element by element: its target a name or a tuple of
    names, and no ``else``."""
    if not isinstance(stmt, ast.For) or stmt.orelse:
        return False
    names = stmt.target.elts if isinstance(stmt.target, ast.Tuple) else [stmt.target]
    return all(isinstance(n, ast.Name) for n in names)


def _keeps_body(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Only the functions the dispatch analysis evaluates keep their statement tree
    (kept small: the tree of every branching function would triple the facts):

    * predicates — at most 8 statements, ending in a ``return`` of a comparison,
      boolean operation or call (``return min(n, k) > 1``);
    * factories — an ``if`` chain where two or more branches build an object
      (``return Cls(...)`` / ``self.x = Cls(...)``, a capitalised name), or one branch
      builds one and the function otherwise raises (``if c: return Cls(...)`` then
      ``raise NotImplementedError(...)``: a factory with one supported case);
    * config-override code — a branch that calls ``<x>.update({...})`` with a literal dict;
    * a dataclass's ``__post_init__`` — what its construction does to the fields it is given
      (issue 18: a speculative config's method rewritten from a family's own name).
    """
    if node.name == "__post_init__":
        return True
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if body and len(body) <= 8 and isinstance(body[-1], ast.Return) and isinstance(
        body[-1].value, (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Call)
    ):
        return True
    builds = 0
    for sub in walk_statements(node):
        if isinstance(sub, ast.If):
            for stmt in sub.body:
                if _builds_object(stmt):
                    builds += 1
                    break
                if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                        and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "update"
                        and stmt.value.args and isinstance(stmt.value.args[0], ast.Dict)):
                    return True
            if builds >= 2:
                return True
    # One building branch, and the function raises when it is not taken.
    return builds == 1 and any(isinstance(s, ast.Raise) for s in body)


def _builds_object(stmt: ast.stmt) -> bool:
    value = stmt.value if isinstance(stmt, (ast.Return, ast.Assign)) else None
    if isinstance(stmt, ast.Assign) and not any(isinstance(t, ast.Attribute) for t in stmt.targets):
        return False
    if not isinstance(value, ast.Call):
        return False
    ch = chain_of(value.func)
    return ch is not None and ch[-1][:1].isupper()


# --- end of issue 11 block -----------------------------------------------------------


# ---------------------------------------------------------------------------
# extraction


def chain_of(node: ast.AST) -> Chain | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super":
        parts.append("super()")
    else:
        return None
    return tuple(reversed(parts))


def _names(node: ast.AST | None) -> tuple[str, ...]:
    """Names (and self.x chains) read anywhere inside an expression, in source order, unique."""
    if node is None:
        return ()
    out: dict[str, None] = {}
    for sub in walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            out.setdefault(sub.id)
        elif isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
            out.setdefault("self." + sub.attr)
    return tuple(out)


def _is_const(node: ast.AST) -> bool:
    return not has_node(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Starred))


def walk(node: ast.AST) -> list[ast.AST]:
    """The nodes ``ast.walk`` yields, in its order (breadth first), as a list: the same
    answer without a generator per node (extraction walks every function several times)."""
    out = [node]
    for n in out:  # the list grows while it is read: every node added is visited
        for name in n._fields:
            v = getattr(n, name, None)
            if isinstance(v, ast.AST):
                out.append(v)
            elif isinstance(v, list):
                out.extend([x for x in v if isinstance(x, ast.AST)])
    return out


_BLOCK_NODES = (ast.stmt, ast.excepthandler, ast.match_case)


def walk_statements(node: ast.AST) -> list[ast.AST]:
    """``node`` and the statements under it (with the except handlers and match cases that
    hold some), in :func:`walk` order: expressions are not entered (no statement is inside
    one), so a search for statements (imports, ``if``s) reads a fraction of the nodes."""
    out = [node]
    for n in out:
        for name in n._fields:
            v = getattr(n, name, None)
            if isinstance(v, list):
                out.extend([x for x in v if isinstance(x, _BLOCK_NODES)])
    return out


class NodeVisitor(ast.NodeVisitor):
    """``ast.NodeVisitor``, visiting in its order, without its generators per node."""

    def generic_visit(self, node: ast.AST) -> None:
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def visit_Constant(self, node: ast.Constant) -> None:
        return  # nothing under it (ast.NodeVisitor's looks for the deprecated visit_Num & co.)


def has_node(node: ast.AST, types: tuple[type[ast.AST], ...]) -> bool:
    """Whether ``node`` or a node under it is of one of ``types`` (``any`` over ``ast.walk``)."""
    return any(isinstance(n, types) for n in walk(node))


class _Source:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        # id(node) -> (node, text): extraction asks for many a node's text more than once
        # (an argument's, then its own); the node is held so that its id is not reused.
        self._segments: dict[int, tuple[ast.AST, str]] = {}

    def segment(self, node: ast.AST) -> str:
        known = self._segments.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
        text = self._segment(node)
        self._segments[id(node)] = (node, text)
        return text

    def _segment(self, node: ast.AST) -> str:
        try:
            start, end = node.lineno - 1, (node.end_lineno or node.lineno) - 1  # type: ignore[attr-defined]
            if start == end:
                s = self.lines[start][node.col_offset : node.end_col_offset]  # type: ignore[attr-defined]
            else:
                # Joining the source lines would keep comments and whatever follows the
                # node on its last line (`):  # note`), so the text (part of fingerprints)
                # would change with layout: use the normalised form instead.
                s = ast.unparse(node)
        except (AttributeError, IndexError, TypeError):
            s = ast.unparse(node)
        s = " ".join(s.split())
        return s if len(s) <= _TEXT_LIMIT else s[: _TEXT_LIMIT - 1] + "…"


def parse_pexpr(text: str) -> PExpr | None:
    """The expression a fact's source text holds, as the evaluator's tree; None when the
    text was shortened (``…``) or is no expression (a guard's text, kept as text)."""
    if "\u2026" in text:
        return None
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return pexpr(tree.body, _Source(text))


# -- collections handed to a call (``AttrAssignFact.items``, ``entries`` and ``keys``) -----
# ``nn.ModuleDict({"0": X()})``, ``nn.ModuleList([a, b])``, ``nn.ModuleList([X() for ...])``.


def literal_entries(value: ast.AST) -> tuple[int | None, tuple[str, ...] | None]:
    """For a call whose one argument (no keywords) is a literal collection: a list or tuple
    without starred elements, its number of entries; a dict whose every key is a string
    constant (no ``**``), its number of keys and the keys in order, each once. (None, None):
    any other value."""
    if not isinstance(value, ast.Call) or len(value.args) != 1 or value.keywords:
        return None, None
    arg = value.args[0]
    if isinstance(arg, (ast.List, ast.Tuple)) and not any(isinstance(e, ast.Starred) for e in arg.elts):
        return len(arg.elts), None
    keys: list[str] = []
    if isinstance(arg, ast.Dict):
        for k in arg.keys:
            if not (isinstance(k, ast.Constant) and type(k.value) is str):
                return None, None
            keys.append(k.value)
        found = tuple(dict.fromkeys(keys))
        return len(found), found
    return None, None


def element_calls(value: ast.AST) -> tuple[Chain, ...] | None:
    """The called chains of the elements of ``value``'s one collection argument (see
    ``AttrAssignFact.items``)."""
    if not isinstance(value, ast.Call) or len(value.args) != 1 or value.keywords:
        return None
    arg = value.args[0]
    if isinstance(arg, (ast.List, ast.Tuple)):
        elts: list[ast.expr] = list(arg.elts)
    elif isinstance(arg, (ast.ListComp, ast.GeneratorExp)):
        elts = [arg.elt]
    elif isinstance(arg, ast.Dict) and all(k is not None for k in arg.keys):
        elts = list(arg.values)
    elif isinstance(arg, ast.DictComp):
        elts = [arg.value]
    else:
        return None
    out: list[Chain] = []
    for e in elts:
        ch = chain_of(e.func) if isinstance(e, ast.Call) else None
        if ch is None:
            return None
        out.append(ch)
    return tuple(dict.fromkeys(out))


# --- module-level tables (issue 18) ----------------------------------------------


class TableEntry(Struct, frozen=True):
    """One entry of a registry table: architecture -> (module, class name)."""

    module: str
    cls: str


class LiteralAlias(Struct, frozen=True):
    """``X = Literal["a", 1, Y]`` at module level: the subscripted name as written, and its
    members in order, each a literal or the name of another alias (``Literal`` flattens one
    nested in another)."""

    head: Chain
    members: tuple[PConst | PName, ...]


def str_pair_table(value: ast.AST) -> dict[str, TableEntry] | None:
    """A dict literal mapping str -> (str, str): vLLM's registry tables."""
    if not isinstance(value, ast.Dict) or not value.keys:
        return None
    table: dict[str, TableEntry] = {}
    for k, v in zip(value.keys, value.values):
        if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Tuple) and len(v.elts) == 2:
            first, second = v.elts
            if (
                isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and isinstance(second, ast.Constant)
                and isinstance(second.value, str)
            ):
                table[k.value] = TableEntry(first.value, second.value)
    return table or None


def str_table(value: ast.AST) -> dict[str, str] | None:
    """A table of strings: the ``str -> str`` entries of a dict literal, or the ``name="str"``
    keywords of a call without positional arguments (``LazyConfigDict(kimi_k3="KimiK3Config",
    ...)``); entries of any other value are not in it."""
    table: dict[str, str] = {}
    if isinstance(value, ast.Dict) and value.keys:
        for k, v in zip(value.keys, value.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Constant) \
                    and isinstance(v.value, str):
                table[k.value] = v.value
    elif isinstance(value, ast.Call) and value.keywords and not value.args:
        for kw in value.keywords:
            if kw.arg is not None and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                table[kw.arg] = kw.value.value
            elif kw.arg is None:  # ``**{"a-b": "C"}``: a name no keyword can spell
                table.update(str_table(kw.value) or {})
    return table or None


def literal_alias(value: ast.AST) -> LiteralAlias | None:
    """``Literal[...]`` (or ``typing.Literal[...]``) of literals and names; None: any other value."""
    if not isinstance(value, ast.Subscript):
        return None
    head = chain_of(value.value)
    if head is None or head[-1] != "Literal":
        return None
    items = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
    members: list[PConst | PName] = []
    for item in items:
        if isinstance(item, ast.Constant) and (item.value is None or isinstance(item.value, (str, int, bool))):
            members.append(PConst(item.value))
        elif isinstance(item, ast.Name):
            members.append(PName(item.id))
        else:
            return None
    return LiteralAlias(head, tuple(members))


class FieldType(Struct, frozen=True):
    """An annotated field's type as the names of a union (``A | None``: ``("A", "None")``)."""

    names: tuple[str, ...]
    line: int


#: Type wrappers that annotate the type they wrap (the value is of that type).
_ANNOTATING = frozenset({"Annotated", "SkipValidation"})


def union_names(node: ast.AST) -> tuple[str, ...] | None:
    """``A``, ``A | B | None`` or ``Optional[A]``/``Union[A, B]`` as names; None: any other type.
    A wrapper that only annotates its type is that type: ``Annotated[A, ...]`` (typing) and
    ``SkipValidation[A]`` (pydantic: ``Annotated[A, SkipValidation()]``)."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in _ANNOTATING:
        inner = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
        return union_names(inner)
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, ast.Constant) and node.value is None:
        return ("None",)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = union_names(node.left), union_names(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in ("Optional", "Union"):
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        out: tuple[str, ...] = ()
        for item in items:
            got = union_names(item)
            if got is None:
                return None
            out += got
        return out + (("None",) if node.value.id == "Optional" else ())
    return None


def function_statements_in(tree: ast.Module, text: str, qualname: str) -> tuple[Stmt, ...] | None:
    """The statement tree of the function ``qualname`` (``f`` or ``Cls.m``, at module level) in
    the module ``tree`` parsed from ``text``, extracted on demand for one the facts keep no tree
    of (parsed, never run); None: no such function."""
    fn = function_node(tree, qualname)
    return stmt_tree(fn.body, _Source(text)) if fn is not None else None


def function_node(tree: ast.Module, qualname: str, line: int | None = None) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function ``qualname`` (``f`` or ``Cls.m``, ``Outer.Inner.m``) defined at the top of
    ``tree`` or in its classes (by the ``def`` at ``line``, when given: the facts' function)."""
    owners, _, name = qualname.rpartition(".")
    owner = class_node(tree, owners) if owners else None
    if owners and owner is None:
        return None
    scope = owner.body if owner is not None else tree.body
    return next((n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
                 and (line is None or n.lineno == line)), None)


def class_node(tree: ast.Module, qualname: str) -> ast.ClassDef | None:
    """The class ``qualname`` (``Outer.Inner``) defined at the top of ``tree`` or nested in one."""
    body: list[ast.stmt] = tree.body
    node: ast.ClassDef | None = None
    for part in qualname.split("."):
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return node


def call_fields(value: ast.AST, local_nodes: dict[str, list[ast.AST]]) -> tuple[str, ...]:
    """For an attribute's value that is a call, the fields of a config the locals it hands the
    call read (``n = config.f`` then ``self.n = helper(n, k)``: ``f``; ``local_nodes``: the values
    assigned to each local before; a local holding a config itself, ``config = x.hf_config``,
    adds nothing)."""
    if not isinstance(value, ast.Call):
        return ()
    out: list[str] = []
    for arg in [*value.args, *(kw.value for kw in value.keywords)]:
        if isinstance(arg, ast.Name):
            for node in local_nodes.get(arg.id, ()):
                out += _field_of_config(node)
    return tuple(out)


def _field_of_config(node: ast.AST) -> tuple[str, ...]:
    """``<...config>.f`` or ``getattr(<...config>, "f", d)``: ``f``, when ``f`` names no config
    itself; else nothing."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) >= 2:
        owner, name = node.args[0], node.args[1]
        field = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None
    elif isinstance(node, ast.Attribute):
        owner, field = node.value, node.attr
    else:
        return ()
    held = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else ""
    if field is None or "config" in field or "config" not in held or field.startswith("_"):
        return ()
    return (field,)
