"""Per-file facts: everything the engine needs to know about one module, as typed records.

Extraction uses the standard library's ``ast`` (see docs/design: libcst with position
metadata costs ~30x more per file and is kept for the autofix codemod, where concrete
syntax matters). A file's facts depend only on its bytes and its path, so they are
cached by content hash (:mod:`auditor.cache`).

The records are ``msgspec`` structs: immutable, with readable field names, and the one
schema of the cache — :mod:`auditor.cache` decodes an entry *into these types*, so an
entry of another shape is rejected by the decoder itself (there is no second,
hand-written validator to keep in step). Fields at their default value are left out
of the encoded form, which keeps cached facts small.

Names read by an expression include ``self.attr`` chains written as ``"self.attr"``,
so side-channel attributes (``self.spec_step_idx``) flow like locals.
"""

from __future__ import annotations

import ast
import re
from enum import Enum
from typing import Union

import msgspec

from .bindings import binding_counts, class_body_names, top_defs
from .statements import (  # re-exported: the statement records are facts of this module too
    _TEXT_LIMIT as _TEXT_LIMIT,
    Chain as Chain,
    Literal as Literal,
    Struct as Struct,
    PExprBase as PExprBase,
    PConst as PConst,
    LiteralAlias as LiteralAlias,
    literal_alias as _literal_alias,
    str_table as _str_table,
    call_fields as call_fields,
    str_pair_table as _str_pair_table,
    TableEntry as TableEntry,
    FieldType as FieldType,
    union_names as union_names,
    PName as PName,
    PAttr as PAttr,
    PKeyword as PKeyword,
    PCall as PCall,
    PCompare as PCompare,
    PBool as PBool,
    PNot as PNot,
    PSeq as PSeq,
    PDict as PDict,
    PSubscript as PSubscript,
    PIfExp as PIfExp,
    PBinOp as PBinOp,
    PNamed as PNamed,
    PFormat as PFormat,
    POpaque as POpaque,
    UNPACK as UNPACK,
    PExpr as PExpr,
    StmtBase as StmtBase,
    SLoopExit as SLoopExit,
    SIf as SIf,
    SReturn as SReturn,
    SRaise as SRaise,
    SAssign as SAssign,
    SExpr as SExpr,
    SOpaque as SOpaque,
    Stmt as Stmt,
    _CMP_OPS as _CMP_OPS,
    _BIN_OPS as _BIN_OPS,
    _MAX_PEXPR_DEPTH as _MAX_PEXPR_DEPTH,
    pexpr as pexpr,
    parse_pexpr as parse_pexpr,
    _writes as _writes,
    stmt_tree as stmt_tree,
    _keeps_body as _keeps_body,
    _builds_object as _builds_object,
    chain_of as chain_of,
    _names as _names,
    _is_const as _is_const,
    _Source as _Source,
    NodeVisitor,
    walk,
    walk_statements,
    _BLOCK_NODES,
    has_node,
    element_calls as _element_calls,
    literal_entries,
)

FACTS_VERSION = 30  # bump on a change of what is extracted; a change of the records' shape
# alone is caught by the cache key, which hashes this module's source (auditor.facts.cache.extractor_digest)



class ExprFact(Struct, frozen=True):
    """A summary of one expression."""

    text: str  # source text, whitespace-normalised and shortened (part of fingerprints)
    names: tuple[str, ...] = ()  # names and self.attr chains read, in source order, unique
    constant: bool = False  # no name, attribute, call or subscript inside
    chain: Chain | None = None  # the expression is itself a dotted chain
    called: Chain | None = None  # the expression is a call of this chain
    first_arg: Chain | None = None  # ... whose first positional argument is this chain
    literal: Literal = None  # the value of a literal constant (see has_literal)
    has_literal: bool = False
    config_fields: tuple[str, ...] = ()  # config fields read (only for attribute assignments)
    loop: int | None = None  # set for the pseudo-value of a for-loop target: the loop's id


class ParamKind(str, Enum):
    POSITIONAL_ONLY = "posonly"
    POSITIONAL = "pos"
    VAR_POSITIONAL = "vararg"
    KEYWORD_ONLY = "kwonly"
    VAR_KEYWORD = "kwarg"


class ParamFact(Struct, frozen=True):
    name: str
    kind: ParamKind
    default: str | None = None  # source text of the default value


class KeywordArg(Struct, frozen=True):
    name: str
    value: ExprFact


class CallFact(Struct, frozen=True):
    line: int
    col: int
    func: Chain | None  # the called chain; None for calls of computed callables
    args: tuple[ExprFact, ...] = ()  # positional arguments (not starred)
    keywords: tuple[KeywordArg, ...] = ()  # name=value arguments
    star_args: tuple[ExprFact, ...] = ()  # *x
    star_kwargs: tuple[ExprFact, ...] = ()  # **x
    loops: tuple[int, ...] = ()  # ids of the enclosing for-loops, outermost first
    # -- issue 12 (capture/compile) --
    branches: tuple[int, ...] = ()  # ids of the enclosing if-branches (FunctionFact.branches), outermost first
    # The call may not run though every enclosing if-arm is taken and every enclosing for-loop
    # iterates: it is in a conditional expression's arm, a later operand of ``and``/``or``, a
    # comprehension, a ``while`` loop, a ``try``'s handlers or ``else``, a ``match`` case, or it
    # follows a statement that may return, raise, break or continue (other than ``if c: ...
    # return``/``raise`` without ``else``, whose rest is the branch ``not c``).
    skippable: bool = False
    # The called attribute when ``func`` is no chain (``self.graphs[k].replay()``: ``replay``).
    attr: str | None = None


class DictEntry(Struct, frozen=True):
    """One key of a dict built in a function (``{...}``, ``dict(...)``, ``d[k] = v``,
    ``d.update(k=v)``); ``key`` is None for a ``**other`` expansion."""

    key: str | None
    value: ExprFact


class SubscriptFact(Struct, frozen=True):
    """``self.<container>[index]``: a candidate layer selection."""

    container: Chain
    index: ExprFact
    line: int
    col: int
    loops: tuple[int, ...] = ()


class AttrAssignFact(Struct, frozen=True):
    """``<target chain> = value`` where the target is an attribute (``self.model = ...``)."""

    target: Chain
    value: ExprFact
    line: int
    # Inside an ``if`` arm or a loop body of its function: it may not run.
    conditional: bool = False
    # The value is a call with one collection argument whose every element is a call of a
    # chain (``nn.ModuleList([X(...) for ...])``, ``nn.ModuleDict({k: X(...)})``): those
    # chains (issue 18: the class of a container's elements). None: any other value.
    items: tuple[Chain, ...] | None = None
    # Its if-arms, loops and ``skippable`` as ``CallFact``'s; ``choice``: the whole value when it
    # is a conditional expression (issue 18: a constructor storing None for a configuration).
    branches: tuple[int, ...] = ()
    loops: tuple[int, ...] = ()
    skippable: bool = False
    choice: "PExpr | None" = None
    # The value is a call of one literal collection (statements.literal_entries): its entries, a dict's keys.
    entries: int | None = None
    keys: tuple[str, ...] | None = None


class AttrReadFact(Struct, frozen=True):
    """A read of ``self.<a>.<b>`` (issue 18: an attribute the object ``self.<a>`` holds may
    lack): the first one of each chain in the same place (enclosing loops and if-arms)."""

    line: int
    col: int
    chain: Chain  # ("self", a, b)
    loops: tuple[int, ...] = ()
    branches: tuple[int, ...] = ()
    # As ``CallFact.skippable``, and also inside a ``with`` body (its context manager may
    # swallow the error) or a ``try`` body with handlers.
    skippable: bool = False


class LoopFact(Struct, frozen=True):
    id: int
    line: int
    col: int
    targets: tuple[str, ...]
    iter: ExprFact
    parents: tuple[int, ...] = ()
    # Names and ``self.<attr>`` chains assigned in the loop's body (nested loops included),
    # and those of them carried from one iteration to the next (``step += 1``,
    # ``i = i + 1``: the value read is the previous iteration's).
    assigned: tuple[str, ...] = ()
    carried: tuple[str, ...] = ()
    # Containers the loop's body stores into (``self.layers[str(i)] = ...`` -> ``("self",
    # "layers")``): a container built empty and filled here is sized by the loop's count.
    stores: tuple[Chain, ...] = ()


# -- issue 12 (capture/compile): with-blocks, if-branches, decorator arguments --------


class WithFact(Struct, frozen=True):
    """``with a(...), b(...):`` — its context expressions and the calls of its body
    (``FunctionFact.calls[first_call:end_call]``; the context expressions' own calls
    come before ``first_call``)."""

    line: int
    items: tuple[ExprFact, ...]
    first_call: int
    end_call: int


class BranchFact(Struct, frozen=True):
    """One arm of an ``if``: the test's ``and``-conjuncts; ``negated`` for the ``else``
    arm (which runs when the whole conjunction is false)."""

    id: int
    line: int
    tests: tuple[ExprFact, ...]
    negated: bool = False
    guard: "PExpr | None" = None  # the whole test, for the partial evaluator (issue 18)

    @property
    def text(self) -> str:
        joined = " and ".join(t.text for t in self.tests)
        return f"not ({joined})" if self.negated else joined


class DecoratorFact(Struct, frozen=True):
    """A decorator: its chain, and for a call its keyword arguments, with the string
    keys of keyword values that are dict literals (``dynamic_arg_dims={"x": 0}``)."""

    func: Chain | None
    line: int
    called: bool = False
    keywords: tuple[KeywordArg, ...] = ()
    dict_keys: dict[str, tuple[str, ...]] = {}


# ---------------------------------------------------------------------------------


class CheckFact(Struct, frozen=True):
    """``assert test, msg`` (issue 18: an assert on a route that fails for a step or a config)."""

    line: int
    test: "PExpr"
    message: str = ""


class GuardedRaise(Struct, frozen=True):
    """``raise X(...)`` and the tests of the ``if`` arms around it, outermost first
    (issue 18: validation that rejects a configuration)."""

    line: int
    exc: str  # the raised expression, as written (shortened)
    guards: tuple["PExpr", ...] = ()
    negated: tuple[bool, ...] = ()  # per guard: the ``else`` arm (the test is false there)


class GuardedAppend(Struct, frozen=True):
    """``name.append(value)`` on a local, with the tests of the ``if`` arms around it,
    outermost first, and whether a loop holds it (issue 18: validation that collects what
    it rejects, then raises when the list is not empty). ``many``: ``name.extend(value)``,
    which adds every item of ``value`` (none, one or several)."""

    line: int
    target: str
    value: "PExpr"
    guards: tuple["PExpr", ...] = ()
    negated: tuple[bool, ...] = ()
    in_loop: bool = False
    many: bool = False


class FunctionFact(Struct, frozen=True):
    name: str
    qualname: str
    line: int
    col: int
    end_line: int
    params: tuple[ParamFact, ...] = ()
    decorators: tuple[str, ...] = ()
    calls: tuple[CallFact, ...] = ()
    assigns: dict[str, tuple[ExprFact, ...]] = {}  # local name -> every value assigned to it
    dicts: dict[str, tuple[DictEntry, ...]] = {}  # local name -> keys of the dict built in it
    subscripts: tuple[SubscriptFact, ...] = ()
    attr_assigns: tuple[AttrAssignFact, ...] = ()
    returns: tuple[ExprFact, ...] = ()
    loops: tuple[LoopFact, ...] = ()
    # Only reads of the function's own parameters and of self attributes are ever asked
    # about (is a declared parameter used? is self.<param> read?).
    live: tuple[str, ...] = ()
    dead: tuple[str, ...] = ()  # read only in `del x` or a value thrown away
    asserts: tuple[ExprFact, ...] = ()
    # -- issue 12 (capture/compile) --
    withs: tuple[WithFact, ...] = ()
    branches: tuple[BranchFact, ...] = ()
    body: tuple["Stmt", ...] = ()  # statement tree, only for branching functions and predicates
    checks: tuple[CheckFact, ...] = ()  # issue 18: asserts with line, test and message
    raises: tuple[GuardedRaise, ...] = ()  # issue 18: raises inside ``if`` arms, with their guards
    # issue 18: locals assigned exactly once (outside loops) and never otherwise bound (no loop
    # target, ``+=``, unpacking, ``with``/``except``/import, not a parameter), their value
    local_defs: dict[str, "PExpr"] = {}
    # The locals bound exactly once in the function, by one of its own top-level statements
    # (``x = v``, ``x: T = v``; no other binding of the name anywhere in it: no unpacking,
    # loop, ``with``, ``except``, import, walrus or ``global``), and that statement's line:
    # below it, ``x`` is ``local_defs[x]`` (the start-up judgement's guards, issue 18).
    top_defs: dict[str, int] = {}
    # Containers the function stores into or deletes from (``x.y[k] = v`` -> ``("x", "y")``):
    # with ``attr_assigns`` and ``calls``, what a call of it may change in its arguments.
    stores: tuple[Chain, ...] = ()
    # Attribute chains augmented-assigned (``self.layers += [...]``: changed in place).
    aug_attrs: tuple[Chain, ...] = ()
    # ``self.<attr>`` assigned exactly once, outside loops and ``if`` arms, and its value
    # (a constructor's assert on a field it derived from the config: ``self.n = getattr(
    # config, "f", 1)`` then ``assert self.n == 1``).
    attr_defs: dict[str, "PExpr"] = {}
    # Own parameters that are read only as whole call arguments (``f(x)``, ``f(k=x)``,
    # ``f(*x)``, ``f(**x)``), anywhere in the body, nested functions and lambdas included;
    # a parameter never read is one too (issue 18: a model that only hands the step on).
    arg_only: tuple[str, ...] = ()
    appends: tuple[GuardedAppend, ...] = ()  # issue 18: appends to a local list, with their guards
    attr_reads: tuple[AttrReadFact, ...] = ()  # issue 18: reads of ``self.<a>.<b>``

    @property
    def param_names(self) -> list[str]:
        return [p.name for p in self.params]

    @property
    def kwargs_param(self) -> str | None:
        for p in self.params:
            if p.kind is ParamKind.VAR_KEYWORD:
                return p.name
        return None

    @property
    def is_static(self) -> bool:
        return any(d.endswith("staticmethod") for d in self.decorators)


class ClassFact(Struct, frozen=True):
    name: str
    qualname: str
    line: int
    col: int
    bases: tuple[Chain, ...] = ()  # a base that is not a chain is kept as its source text
    decorators: tuple[str, ...] = ()
    methods: dict[str, FunctionFact] = {}
    class_attrs: dict[str, ExprFact] = {}
    # Annotated class-level assignments (``f: int = 1``: a dataclass field's default).
    field_defaults: dict[str, ExprFact] = {}
    # Annotated class-level fields whose type is a name or a union of names (``f: A | None``,
    # ``Optional[A]``): the names, with their line (issue 18: a pydantic field's Literal type).
    field_types: dict[str, FieldType] = {}
    # Every name the class body binds (assignments of any target shape, annotations with or
    # without a value, nested defs and classes, imports, loop and ``with`` targets).
    body_names: tuple[str, ...] = ()
    # -- issue 12 (capture/compile) --
    decorator_facts: tuple[DecoratorFact, ...] = ()


class ImportFact(Struct, frozen=True):
    """``local`` is bound to ``module`` (``name`` None) or to ``module.name``; local ``*``
    with name ``*`` is a star import."""

    local: str
    module: str
    name: str | None = None


class ModuleFacts(Struct, frozen=True):
    version: int
    path: str
    module: str
    is_package: bool
    imports: tuple[ImportFact, ...] = ()
    classes: dict[str, ClassFact] = {}
    functions: dict[str, FunctionFact] = {}
    tables: dict[str, dict[str, TableEntry]] = {}
    # Module-level tables of strings (issue 18: vLLM's config registry, model type -> config
    # class name, and a lazy package's class name -> module).
    name_tables: dict[str, dict[str, str]] = {}
    # Module-level ``X = Literal[...]`` type aliases (issue 18: the values a config field's
    # type admits, read through ``typing.get_args``).
    literal_aliases: dict[str, LiteralAlias] = {}
    module_assigns: dict[str, tuple[ExprFact, ...]] = {}
    # --- issue 13 (platform plugins): what runs at import time -----------------------
    # ``Owner.attr = value`` statements at module level (also under if/try), and the
    # calls of module-level expression statements (``setattr(...)``,
    # ``ModelRegistry.register_model(...)``): a plugin's monkeypatches and registrations.
    module_attr_assigns: tuple[AttrAssignFact, ...] = ()
    module_calls: tuple[CallFact, ...] = ()
    # Issue 18: module-level names a function rebinds at run time (``global X`` in it): their
    # import-time value is no constant.
    rebound_globals: tuple[str, ...] = ()


# --- issue 11 (dispatch): statement trees of branching functions -------------------


def _expr(node: ast.AST, src: _Source, config_fields: tuple[str, ...] = ()) -> ExprFact:
    called = first_arg = None
    if isinstance(node, ast.Call):
        called = chain_of(node.func)
        if node.args:
            first_arg = chain_of(node.args[0])
    literal: Literal = None
    has_literal = False
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (int, str, bool, float))):
        literal, has_literal = node.value, True
    return ExprFact(
        text=src.segment(node),
        names=_names(node),
        constant=_is_const(node),
        chain=chain_of(node),
        called=called,
        first_arg=first_arg,
        literal=literal,
        has_literal=has_literal,
        config_fields=config_fields,
    )


def _decorator(node: ast.expr, src: _Source) -> DecoratorFact:
    """Issue 12: a decorator's chain and keyword arguments (texts are shortened, so the
    keys of dict-literal arguments are kept separately)."""
    if not isinstance(node, ast.Call):
        return DecoratorFact(chain_of(node), node.lineno)
    keywords = tuple(KeywordArg(kw.arg, _expr(kw.value, src)) for kw in node.keywords if kw.arg is not None)
    dict_keys = {
        kw.arg: tuple(k.value for k in kw.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
        for kw in node.keywords
        if kw.arg is not None and isinstance(kw.value, ast.Dict)
    }
    return DecoratorFact(chain_of(node.func), node.lineno, True, keywords, dict_keys)


def _params(args: ast.arguments, src: _Source) -> tuple[ParamFact, ...]:
    out: list[ParamFact] = []
    posonly = list(args.posonlyargs)
    positional = posonly + list(args.args)
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    for i, a in enumerate(positional):
        d = defaults[i]
        kind = ParamKind.POSITIONAL_ONLY if i < len(posonly) else ParamKind.POSITIONAL
        out.append(ParamFact(a.arg, kind, None if d is None else src.segment(d)))
    if args.vararg:
        out.append(ParamFact(args.vararg.arg, ParamKind.VAR_POSITIONAL))
    for a, kd in zip(args.kwonlyargs, args.kw_defaults):
        out.append(ParamFact(a.arg, ParamKind.KEYWORD_ONLY, None if kd is None else src.segment(kd)))
    if args.kwarg:
        out.append(ParamFact(args.kwarg.arg, ParamKind.VAR_KEYWORD))
    return tuple(out)


_CFG_ATTR = re.compile(r"\b\w*config\w*\.(\w+)")
_CFG_GETATTR = re.compile(r"getattr\(\s*[\w.]*config\w*\s*,\s*[\"'](\w+)[\"']")


def _config_fields(node: ast.AST) -> tuple[str, ...]:
    """Config fields an attribute's value reads (``config.x``, ``getattr(config, "x", d)``)."""
    text = ast.unparse(node)
    found = _CFG_ATTR.findall(text) + _CFG_GETATTR.findall(text)
    return tuple(sorted({f for f in found if not f.startswith("_")}))


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


def _subscript_container(base: ast.AST) -> Chain | None:
    """The container a subscript selects from: ``self.layers[i]`` and also
    ``getattr(self, "layers")[i]`` (a constant attribute name) are ``self.layers``."""
    ch = chain_of(base)
    if ch is not None:
        return ch
    if (
        isinstance(base, ast.Call)
        and isinstance(base.func, ast.Name)
        and base.func.id == "getattr"
        and len(base.args) >= 2
        and isinstance(base.args[1], ast.Constant)
        and isinstance(base.args[1].value, str)
    ):
        owner = chain_of(base.args[0])
        if owner is not None:
            return owner + (base.args[1].value,)
    return None


def _guard_tests(src: _Source, test: ast.expr) -> tuple[ExprFact, ...]:
    conjuncts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    # Only what a guard is shown and explained by (text, called or read chain): every
    # `if` of every file gets one, so the facts stay small.
    return tuple(ExprFact(text=src.segment(c), chain=chain_of(c),
                          called=chain_of(c.func) if isinstance(c, ast.Call) else None) for c in conjuncts)


class _SkippableVisits(NodeVisitor):
    """Code that may not run though its if-arms are taken (``CallFact.skippable``): the
    extractor counts how deep inside such code it is."""

    _skippable = 0
    _guarded = 0  # inside a ``try`` body with handlers (and, for the function extractor, a ``with`` body)

    def _skipping(self, nodes: list[ast.AST]) -> None:
        self._skippable += 1
        for n in nodes:
            self.visit(n)
        self._skippable -= 1

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self.visit(node.test)
        self._skipping([node.body, node.orelse])

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        self.visit(node.values[0])
        self._skipping(list(node.values[1:]))

    def _comprehension(self, node: ast.AST) -> None:
        self._skipping(list(ast.iter_child_nodes(node)))

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_While(self, node: ast.While) -> None:
        self._skipping([node.test, *node.body, *node.orelse])

    def visit_Try(self, node: ast.Try) -> None:
        self._guarded += bool(node.handlers)
        self._statements(node.body)
        self._guarded -= bool(node.handlers)
        self._skipping([*node.handlers, *node.orelse])
        self._statements(node.finalbody)

    def _statements(self, stmts: list[ast.stmt]) -> None:
        """Statements visited in order, those after one that may escape skippable."""
        escaped = 0
        for stmt in stmts:
            self.visit(stmt)
            if not escaped and _may_escape(stmt):
                escaped = 1
                self._skippable += 1
        self._skippable -= escaped

    visit_TryStar = visit_Try  # type: ignore[assignment]  # ast.TryStar has the same fields

    def visit_Match(self, node: ast.Match) -> None:
        self.visit(node.subject)
        self._skipping(list(node.cases))


class _FunctionExtractor(_SkippableVisits):
    """Collects the body facts of one function, not descending into nested defs/classes."""

    def __init__(self, src: _Source) -> None:
        self.src = src
        self.calls: list[CallFact] = []
        self.assigns: dict[str, list[ExprFact]] = {}
        self._local_nodes: dict[str, list[ast.AST]] = {}  # the values locals are assigned, as written
        self.dicts: dict[str, list[DictEntry]] = {}
        self.subscripts: list[SubscriptFact] = []
        self.attr_assigns: list[AttrAssignFact] = []
        self.stores: list[Chain] = []
        self.aug_attrs: list[Chain] = []
        self._loop_writes: dict[int, dict[str, bool]] = {}  # loop id -> assigned name -> carried
        self.returns: list[ExprFact] = []
        self.loops: list[LoopFact] = []
        self.live: set[str] = set()
        self.dead: set[str] = set()
        self.asserts: list[ExprFact] = []
        self._loop_stack: list[int] = []
        # -- issue 12 (capture/compile) --
        self.withs: list[WithFact] = []
        self.branches: list[BranchFact] = []
        self._branch_stack: list[int] = []
        # -- issue 18 (outcomes) --
        self.checks: list[CheckFact] = []
        self.raises: list[GuardedRaise] = []
        self.appends: list[GuardedAppend] = []
        self._guards: list[tuple[PExpr, bool]] = []
        self._defs: dict[str, list[PExpr]] = {}
        self._attr_defs: dict[str, list[PExpr]] = {}
        self.top_level: set[int] = set()  # ids of the function body's own statements
        self._at_top = False  # visiting an assignment that is one of them
        self._loop_stores: dict[int, list[Chain]] = {}
        self._skippable = 0  # inside code that may not run though its if-arms are taken
        self.attr_reads: dict[tuple[Chain, tuple[int, ...], tuple[int, ...], bool], AttrReadFact] = {}
        self._guarded = 0  # inside a ``with`` body or a ``try`` body with handlers

    # -- helpers -------------------------------------------------------
    def _loop_write(self, name: str, carried: bool) -> None:
        for loop_id in self._loop_stack:
            writes = self._loop_writes.setdefault(loop_id, {})
            writes[name] = writes.get(name, False) or carried

    def _bind(self, target: ast.AST, value: ast.AST | None, line: int, opaque: bool = False,
              element: tuple[int, int] | None = None) -> None:
        """``opaque``: the name is bound to something other than ``value`` itself (an element of
        an unpacking, what a ``with`` item's ``__enter__`` returns). ``element``: the name is
        element ``i`` of a flat unpacking of ``value`` into ``n`` names (``(i, n)``; ``a, b = v``:
        ``<unpack>(v, 2)[i]``, :data:`UNPACK`)."""
        if isinstance(target, ast.Name) and self._loop_stack:
            self._loop_write(target.id, value is not None and target.id in _names(value))
        elif isinstance(target, ast.Attribute) and self._loop_stack:
            ch = chain_of(target)
            if ch and ch[0] == "self" and len(ch) == 2:
                self._loop_write("self." + ch[1], value is not None and "self." + ch[1] in _names(value))
        if isinstance(target, ast.Name):
            defs = self._defs.setdefault(target.id, [])
            known = value is not None and not self._loop_stack and (not opaque or element is not None)
            if known and value is not None:
                whole = pexpr(value, self.src)
                if element is not None:
                    of = PCall(func=PName(id=UNPACK), args=(whole, PConst(value=element[1])), text=self.src.segment(value))
                    whole = PSubscript(value=of, index=PConst(value=element[0]))
                defs.append(whole)
            else:
                defs.append(POpaque(""))
            values = self.assigns.setdefault(target.id, [])
            if value is not None:
                for alt in _alternatives(value):
                    values.append(_expr(alt, self.src))
                    self._local_nodes.setdefault(target.id, []).append(alt)
                    self._maybe_dict(target.id, alt)
        elif isinstance(target, (ast.Tuple, ast.List)):
            flat = not any(isinstance(elt, ast.Starred) for elt in target.elts)
            for i, elt in enumerate(target.elts):
                inner = elt.value if isinstance(elt, ast.Starred) else elt
                # Unpacking: each element depends on the whole value.
                _attr_def(self, inner, None)  # (not the whole value: it is one element of it)
                self._bind(inner, value, line, opaque=True, element=(i, len(target.elts)) if flat and isinstance(inner, ast.Name) else None)
        elif isinstance(target, ast.Attribute):
            ch = chain_of(target)
            _attr_def(self, target, value)
            if ch and value is not None:
                choice = pexpr(value, self.src) if isinstance(value, ast.IfExp) else None
                for alt in _alternatives(value):
                    entries, keys = literal_entries(alt)
                    self.attr_assigns.append(AttrAssignFact(ch, _expr(alt, self.src, tuple(sorted({*_config_fields(alt), *call_fields(alt, self._local_nodes)}))), line,
                                                            bool(self._branch_stack or self._loop_stack),
                                                            _element_calls(alt), tuple(self._branch_stack),
                                                            tuple(self._loop_stack), self._skippable > 0, choice,
                                                            entries, keys))
        elif isinstance(target, ast.Subscript):
            # d["key"] = value  -> dict build
            if (
                value is not None
                and isinstance(target.value, ast.Name)
                and isinstance(target.slice, ast.Constant)
                and isinstance(target.slice.value, str)
            ):
                self.dicts.setdefault(target.value.id, []).append(DictEntry(target.slice.value, _expr(value, self.src)))

    def _maybe_dict(self, name: str, value: ast.AST) -> None:
        entries: list[DictEntry] | None = None
        if isinstance(value, ast.Dict):
            entries = []
            for k, v in zip(value.keys, value.values):
                if k is None:
                    entries.append(DictEntry(None, _expr(v, self.src)))
                elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                    entries.append(DictEntry(k.value, _expr(v, self.src)))
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
            entries = [DictEntry(None, _expr(arg, self.src)) for arg in value.args]
            entries += [DictEntry(kw.arg, _expr(kw.value, self.src)) for kw in value.keywords]
        if entries is not None:
            self.dicts.setdefault(name, []).extend(entries)

    # -- statements ----------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:  # nested def: its body is its own
            self.visit(d)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        return

    def visit_Lambda(self, node: ast.Lambda) -> None:
        # A lambda's body runs elsewhere; its reads still count as uses.
        self.live.update(_names(node.body))

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        self._at_top = id(node) in self.top_level
        for t in node.targets:
            self._bind(t, node.value, node.lineno)
            self._visit_target(t)
        self._at_top = False

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self._at_top = id(node) in self.top_level
        self._bind(node.target, node.value, node.lineno)
        self._at_top = False
        self._visit_target(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        _attr_def(self, node.target, None)
        if self._loop_stack:
            ch = chain_of(node.target)
            if ch and (len(ch) == 1 or ch[0] == "self" and len(ch) == 2):
                self._loop_write(".".join(ch), True)
        if isinstance(node.target, ast.Name):
            self.assigns.setdefault(node.target.id, []).append(_expr(node.value, self.src))
            self.live.add(node.target.id)
        elif isinstance(node.target, ast.Attribute):
            self.aug_attrs.extend(c for c in [chain_of(node.target)] if c)
        self._visit_target(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind(node.target, node.value, node.lineno)

    def _visit_target(self, t: ast.AST) -> None:
        # Reads inside a store target (x[i] = ..., self.a.b = ...) are live reads.
        if isinstance(t, ast.Subscript):
            ch = chain_of(t.value)
            if ch:
                self.stores.append(ch)
                for loop_id in self._loop_stack:
                    self._loop_stores.setdefault(loop_id, []).append(ch)
            self.visit(t.value)
            self.visit(t.slice)
        elif isinstance(t, ast.Attribute):
            self.visit(t.value)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._visit_target(e)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        loop_id = len(self.loops)
        targets = tuple(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
        self.loops.append(
            LoopFact(loop_id, node.lineno, node.col_offset, targets, _expr(node.iter, self.src), tuple(self._loop_stack))
        )
        for t in targets:
            self.assigns.setdefault(t, []).append(ExprFact(text="<loop>", loop=loop_id))
            self._loop_write(t, False)  # an enclosing loop's body assigns the inner loop's target
        self._loop_stack.append(loop_id)
        self.visit_block(node.body)
        self._loop_stack.pop()
        writes = self._loop_writes.get(loop_id, {})
        self.loops[loop_id] = msgspec.structs.replace(
            self.loops[loop_id], assigned=tuple(sorted(writes)), carried=tuple(sorted(n for n, c in writes.items() if c)),
            stores=tuple(dict.fromkeys(self._loop_stores.get(loop_id, []))))
        for stmt in node.orelse:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._bind(item.optional_vars, item.context_expr, node.lineno, opaque=True)
        first = len(self.calls)
        self._guarded += 1
        self.visit_block(node.body)
        self._guarded -= 1
        items = tuple(_expr(item.context_expr, self.src) for item in node.items)
        self.withs.append(WithFact(node.lineno, items, first, len(self.calls)))

    def visit_block(self, stmts: list[ast.stmt]) -> None:
        """A statement list; after ``if c: ... return`` (or ``raise``) without ``else``,
        the rest of the block runs only when ``not c``: a branch of its own."""
        pushed = escaped = 0
        for stmt in stmts:
            self.visit(stmt)
            if (isinstance(stmt, ast.If) and not stmt.orelse and stmt.body
                    and isinstance(stmt.body[-1], (ast.Return, ast.Raise))):
                guard = pexpr(stmt.test, self.src)
                branch = BranchFact(len(self.branches), stmt.lineno, _guard_tests(self.src, stmt.test), True, guard)
                self.branches.append(branch)
                self._branch_stack.append(branch.id)
                self._guards.append((guard, True))
                pushed += 1
            elif not escaped and _may_escape(stmt):
                escaped = 1  # what follows may not run: skippable
                self._skippable += 1
        for _ in range(pushed):
            self._branch_stack.pop()
            self._guards.pop()
        self._skippable -= escaped

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        tests = _guard_tests(self.src, node.test)
        for negated, body in ((False, node.body), (True, node.orelse)):
            if not body:
                continue
            guard = pexpr(node.test, self.src)
            branch = BranchFact(len(self.branches), node.lineno, tests, negated, guard)
            self.branches.append(branch)
            self._branch_stack.append(branch.id)
            self._guards.append((guard, negated))
            self.visit_block(body)
            self._branch_stack.pop()
            self._guards.pop()

    visit_AsyncWith = visit_With

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.visit(node.value)
            self.returns.extend(_expr(alt, self.src) for alt in _alternatives(node.value))

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            if isinstance(t, ast.Name):
                self.dead.add(t.id)
            else:
                self._visit_target(t)

    def visit_Expr(self, node: ast.Expr) -> None:
        # A bare expression statement without calls (`spec_step_idx`, `x + 1`) is a dead use.
        if not has_node(node.value, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            self.dead.update(_names(node.value))
            return
        if isinstance(node.value, ast.Subscript):
            # `self.layers[str(i)]` as a statement: the element is looked up and thrown away,
            # so it selects nothing (the calls inside it still run).
            self.visit(node.value.value)
            self.visit(node.value.slice)
            return
        self.visit(node.value)

    def visit_Assert(self, node: ast.Assert) -> None:
        self.asserts.append(_expr(node.test, self.src))
        msg = node.msg.value if isinstance(node.msg, ast.Constant) and isinstance(node.msg.value, str) else (
            self.src.segment(node.msg) if node.msg is not None else "")
        self.checks.append(CheckFact(node.lineno, pexpr(node.test, self.src), msg))
        self.generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> None:
        if self._guards and node.exc is not None:
            self.raises.append(GuardedRaise(node.lineno, self.src.segment(node.exc),
                                            tuple(g for g, _ in self._guards), tuple(n for _, n in self._guards)))
        self.generic_visit(node)

    # -- expressions ---------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.live.add(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.value.id == "self" and isinstance(node.ctx, ast.Load):
            self.live.add("self." + node.attr)
        elif (isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Attribute)
              and isinstance(node.value.value, ast.Name) and node.value.value.id == "self"):
            chain = ("self", node.value.attr, node.attr)
            where = (chain, tuple(self._loop_stack), tuple(self._branch_stack), self._skippable > 0 or self._guarded > 0)
            if where not in self.attr_reads:
                self.attr_reads[where] = AttrReadFact(node.lineno, node.col_offset, *where)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        container = _subscript_container(node.value)
        if container is not None and container[0] == "self" and len(container) >= 2:
            self.subscripts.append(
                SubscriptFact(container, _expr(node.slice, self.src), node.lineno, node.col_offset, tuple(self._loop_stack))
            )
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func_chain = chain_of(node.func)
        args: list[ExprFact] = []
        star: list[ExprFact] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                star.append(_expr(a.value, self.src))
            else:
                args.append(_expr(a, self.src))
        keywords: list[KeywordArg] = []
        dstar: list[ExprFact] = []
        for kw in node.keywords:
            if kw.arg is None:
                dstar.append(_expr(kw.value, self.src))
            else:
                keywords.append(KeywordArg(kw.arg, _expr(kw.value, self.src)))
        self.calls.append(
            CallFact(
                node.lineno, node.col_offset, func_chain, tuple(args), tuple(keywords), tuple(star), tuple(dstar),
                tuple(self._loop_stack), tuple(self._branch_stack), self._skippable > 0,
                node.func.attr if func_chain is None and isinstance(node.func, ast.Attribute) else None,
            )
        )
        if (func_chain and len(func_chain) == 2 and func_chain[1] in ("append", "extend")
                and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                and len(node.args) == 1 and not node.keywords):
            self.appends.append(GuardedAppend(node.lineno, func_chain[0], pexpr(node.args[0], self.src),
                                              tuple(g for g, _ in self._guards), tuple(n for _, n in self._guards),
                                              bool(self._loop_stack), func_chain[1] == "extend"))
        # dict-building calls on a local: d.update(k=v)
        if func_chain and len(func_chain) == 2 and func_chain[1] == "update" and isinstance(node.func, ast.Attribute):
            if isinstance(node.func.value, ast.Name):
                self.dicts.setdefault(func_chain[0], []).extend(
                    DictEntry(kw.arg, _expr(kw.value, self.src)) for kw in node.keywords
                )
        self.generic_visit(node)


_OWN_SCOPE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _may_escape(stmt: ast.stmt) -> bool:
    """``stmt`` may leave the block before the next statement (a return or raise anywhere in
    it, a break or continue outside the loops it holds; nested functions and classes aside).

    Only statement lists are entered (a block's statements, except handlers and match cases:
    :data:`_BLOCK_NODES`): the four statements it looks for are never inside an expression
    (a lambda's body is one expression), so the expressions, most of a tree's nodes, are skipped."""
    todo: list[tuple[ast.AST, bool]] = [(stmt, False)]
    while todo:
        n, in_loop = todo.pop()
        if isinstance(n, (ast.Return, ast.Raise)) or (isinstance(n, (ast.Break, ast.Continue)) and not in_loop):
            return True
        inner = in_loop or isinstance(n, (ast.For, ast.AsyncFor, ast.While))
        for name in n._fields:
            v = getattr(n, name, None)
            if isinstance(v, list):
                todo.extend((c, inner) for c in v if isinstance(c, _BLOCK_NODES) and not isinstance(c, _OWN_SCOPE))
    return False


def _attr_def(ex: "_FunctionExtractor", target: ast.AST, value: ast.AST | None) -> None:
    """One more definition of ``self.<attr>`` in ``ex``'s function: its value when it surely
    runs (a statement of the function body itself), else opaque (inside a loop, an ``if``
    arm, ``try`` or ``with``; an unpacking or an augmented assignment)."""
    ch = chain_of(target) if isinstance(target, ast.Attribute) else None
    if ch and len(ch) == 2 and ch[0] == "self":
        sure = value is not None and ex._at_top and not ex._branch_stack
        ex._attr_defs.setdefault(ch[1], []).append(pexpr(value, ex.src) if sure and value is not None else POpaque(""))


def _function(node: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str, src: _Source) -> FunctionFact:
    ex = _FunctionExtractor(src)
    ex.top_level = {id(s) for s in node.body}
    ex.visit_block(node.body)
    for dflt in list(node.args.defaults) + [d for d in node.args.kw_defaults if d is not None]:
        ex.live.update(_names(dflt))
    own = {a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]}
    own.update(a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None)
    # A local with one value: assigned once, never otherwise bound (a loop target, ``+=``, a
    # starred unpacking, ``with``/``except``/import) and no parameter (its value before the
    # assignment). An element of a flat unpacking ``a, b = v`` is ``v[i]``.
    count = binding_counts(node, walrus=any(":=" in line for line in src.lines[node.lineno - 1:node.end_lineno]))
    local_defs: dict[str, PExpr] = {k: v[0] for k, v in ex._defs.items() if len(v) == 1 and not isinstance(v[0], POpaque)
                                    and count.get(k) == 1 and k not in own}
    return FunctionFact(
        name=node.name,
        qualname=qualname,
        line=node.lineno,
        col=node.col_offset,
        end_line=node.end_lineno or node.lineno,
        params=_params(node.args, src),
        decorators=tuple(src.segment(d) for d in node.decorator_list),
        calls=tuple(ex.calls),
        assigns={k: tuple(v) for k, v in ex.assigns.items()},
        dicts={k: tuple(v) for k, v in ex.dicts.items()},
        subscripts=tuple(ex.subscripts),
        attr_assigns=tuple(ex.attr_assigns),
        returns=tuple(ex.returns),
        loops=tuple(ex.loops),
        live=tuple(sorted(n for n in ex.live if n in own or n.startswith("self."))),
        dead=tuple(sorted(n for n in ex.dead - ex.live if n in own or n.startswith("self."))),
        asserts=tuple(ex.asserts),
        withs=tuple(ex.withs),
        branches=tuple(ex.branches),
        body=stmt_tree(node.body, src) if _keeps_body(node) else (),
        stores=tuple(dict.fromkeys(ex.stores)),
        aug_attrs=tuple(dict.fromkeys(ex.aug_attrs)),
        checks=tuple(ex.checks),
        raises=tuple(ex.raises),
        local_defs=local_defs,
        top_defs={k: v for k, v in top_defs(node, own, count).items() if k in local_defs},
        attr_defs={k: v[0] for k, v in ex._attr_defs.items() if len(v) == 1 and not isinstance(v[0], POpaque)},
        arg_only=_arg_only(node, own),
        appends=tuple(ex.appends),
        attr_reads=tuple(ex.attr_reads.values()),
    )


def _arg_only(node: ast.FunctionDef | ast.AsyncFunctionDef, own: set[str]) -> tuple[str, ...]:
    """The parameters in ``own`` every read of which is a whole argument of a call."""
    loads: dict[str, int] = {}
    whole: dict[str, int] = {}
    for stmt in node.body:
        for n in walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in own:
                loads[n.id] = loads.get(n.id, 0) + 1
            elif isinstance(n, ast.Call):
                for a in [*n.args, *(k.value for k in n.keywords)]:
                    a = a.value if isinstance(a, ast.Starred) else a
                    if isinstance(a, ast.Name) and a.id in own:
                        whole[a.id] = whole.get(a.id, 0) + 1
    return tuple(sorted(p for p in own if loads.get(p, 0) == whole.get(p, 0)))


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


class _ModuleExtractor:
    def __init__(self, src: _Source, module: str, is_package: bool) -> None:
        self.src = src
        self.module = module
        self.is_package = is_package
        self.imports: list[ImportFact] = []
        self.classes: dict[str, ClassFact] = {}
        self.functions: dict[str, FunctionFact] = {}
        self.tables: dict[str, dict[str, TableEntry]] = {}
        self.name_tables: dict[str, dict[str, str]] = {}
        self.literal_aliases: dict[str, LiteralAlias] = {}
        self.module_assigns: dict[str, list[ExprFact]] = {}
        self.module_attr_assigns: list[AttrAssignFact] = []  # issue 13
        self.module_calls: list[CallFact] = []  # issue 13

    def imports_of(self, tree: ast.Module) -> None:
        # Imports anywhere in the module (if/else platform branches, try/except, and
        # lazy `__getattr__` bodies) are alternatives for the bound name.
        for node in walk_statements(tree):  # in ast.walk's order: the order of the alternatives
            if isinstance(node, ast.Import):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".")[0]
                    target = alias.name if alias.asname else alias.name.split(".")[0]
                    self.imports.append(ImportFact(local, target))
            elif isinstance(node, ast.ImportFrom):
                base = _resolve_relative(self.module, self.is_package, node.level or 0, node.module)
                for alias in node.names:
                    if alias.name == "*":
                        self.imports.append(ImportFact("*", base, "*"))
                    else:
                        self.imports.append(ImportFact(alias.asname or alias.name, base, alias.name))

    def visit_class(self, node: ast.ClassDef, prefix: str) -> None:
        qual = f"{prefix}{node.name}"
        methods: dict[str, FunctionFact] = {}
        class_attrs: dict[str, ExprFact] = {}
        field_defaults: dict[str, ExprFact] = {}
        field_types: dict[str, FieldType] = {}
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods[stmt.name] = _function(stmt, f"{qual}.{stmt.name}", self.src)
            elif isinstance(stmt, ast.ClassDef):
                self.visit_class(stmt, qual + ".")
            elif isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        class_attrs[t.id] = _expr(stmt.value, self.src)
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                names = union_names(stmt.annotation)
                if names is not None:
                    field_types[stmt.target.id] = FieldType(names, stmt.lineno)
                if stmt.value is not None:
                    field_defaults[stmt.target.id] = _expr(stmt.value, self.src)
        self.classes[qual] = ClassFact(
            name=node.name,
            qualname=qual,
            line=node.lineno,
            col=node.col_offset,
            bases=tuple(chain_of(b) or (self.src.segment(b),) for b in node.bases),
            decorators=tuple(self.src.segment(d) for d in node.decorator_list),
            methods=methods,
            class_attrs=class_attrs,
            field_defaults=field_defaults,
            field_types=field_types,
            body_names=class_body_names(node),
            decorator_facts=tuple(_decorator(d, self.src) for d in node.decorator_list),
        )

    def toplevel(self, node: ast.stmt) -> None:
        if isinstance(node, ast.ClassDef):
            self.visit_class(node, "")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.functions[node.name] = _function(node, node.name, self.src)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is None:
                return
            for t in targets:
                if isinstance(t, ast.Name):
                    table = _str_pair_table(node.value)
                    if table:
                        self.tables[t.id] = table
                    names = _str_table(node.value)
                    if names:
                        self.name_tables[t.id] = names
                    alias = _literal_alias(node.value)
                    if alias is not None:
                        self.literal_aliases[t.id] = alias
                    self.module_assigns.setdefault(t.id, []).append(_expr(node.value, self.src))
                elif isinstance(t, ast.Attribute):  # issue 13: a monkeypatch at import
                    ch = chain_of(t)
                    if ch is not None:
                        self.module_attr_assigns.append(AttrAssignFact(ch, _expr(node.value, self.src), node.lineno))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):  # issue 13
            calls = _FunctionExtractor(self.src)
            calls.visit(node.value)
            self.module_calls.extend(calls.calls)
        elif isinstance(node, ast.If):
            # Definitions under platform branches are alternatives.
            for sub in [*node.body, *node.orelse]:
                self.toplevel(sub)
        elif isinstance(node, _TRY_NODES):
            # ... and so are try-import fallbacks.
            handler: ast.Try = node  # type: ignore[assignment]  # ast.TryStar has the same fields
            for body in [handler.body, handler.orelse, *(h.body for h in handler.handlers), handler.finalbody]:
                for sub in body:
                    self.toplevel(sub)


_TRY_NODES: tuple[type[ast.AST], ...] = (ast.Try,) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())


def extract(text: str, path: str, module: str, is_package: bool) -> ModuleFacts:
    """Parse one module and return its facts. Raises SyntaxError/ValueError/RecursionError on bad input."""
    tree = ast.parse(text, filename=path, type_comments=False)
    ex = _ModuleExtractor(_Source(text), module, is_package)
    ex.imports_of(tree)
    for node in tree.body:
        ex.toplevel(node)
    return ModuleFacts(
        version=FACTS_VERSION,
        path=path,
        module=module,
        is_package=is_package,
        imports=tuple(ex.imports),
        classes=ex.classes,
        functions=ex.functions,
        tables=ex.tables,
        name_tables=ex.name_tables,
        literal_aliases=ex.literal_aliases,
        module_assigns={k: tuple(v) for k, v in ex.module_assigns.items()},
        module_attr_assigns=tuple(ex.module_attr_assigns),
        module_calls=tuple(ex.module_calls),
        rebound_globals=_rebound_globals(tree) if "global " in text else (),
    )


def _rebound_globals(tree: ast.Module) -> tuple[str, ...]:
    """The names a ``global`` statement of the module declares (in a function it rebinds them)."""
    return tuple(sorted({n for node in ast.walk(tree) if isinstance(node, ast.Global) for n in node.names}))

