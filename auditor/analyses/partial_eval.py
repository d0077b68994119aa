"""A small three-valued partial evaluator over the statement trees of the facts
(:class:`auditor.facts.SIf`, :class:`auditor.facts.PCall`, ...).

It runs dispatch code — runner factories, predicate methods, config-override
functions — over a *concrete configuration* given as :class:`Obj` records, and
never imports or executes the scanned code. It understands: literals, names,
attribute chains on config objects, ``getattr``/``hasattr`` with defaults,
``min``/``max``/``len``/``int``/``str``/``bool``/``isinstance`` (unknown), comparisons,
``in`` on literal tuples/sets/lists/dicts, boolean operators, ``a if c else b``,
subscripts of known values, ``.get``/``.intersection``, calls of methods and
functions whose bodies are such code (depth-limited), assignments to names and
config attributes, ``obj.update({...})`` with a literal dict, ``return`` and ``raise``.

Everything else evaluates to :class:`Unknown`, carrying what it depends on. A branch
whose guard is unknown keeps *both* outcomes: when the branch holds a ``return`` or
``raise`` execution forks into two paths; otherwise everything the branch may write
becomes unknown on one path (no fork). Each path records the branches it took
(:class:`Decision`) with the condition's text, its value and the config fields read.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from ..facts.extract import (
    FunctionFact,
    PAttr,
    PBinOp,
    PBool,
    PCall,
    PCompare,
    PConst,
    PDict,
    PExpr,
    PIfExp,
    PName,
    PNamed,
    PNot,
    POpaque,
    PSeq,
    PSubscript,
    SAssign,
    SExpr,
    SIf,
    SOpaque,
    SRaise,
    SReturn,
    Stmt,
)

MAX_PATHS = 32
MAX_CALL_DEPTH = 4


@dataclass(frozen=True)
class Unknown:
    """A value the evaluator cannot know; ``reason`` says what it depends on."""

    reason: str

    def __repr__(self) -> str:
        return f"Unknown({self.reason!r})"


@dataclass(eq=False)
class Obj:
    """A configuration object (an hf config, the speculative config, a runner's ``self``).

    ``closed``: the fields are all there is (an attribute not in ``fields`` is absent,
    so ``getattr(o, "f", d)`` is ``d``); an open object answers unknown for fields it
    lacks. ``roles`` maps attribute names to shared objects (``self.speculative_config``
    and ``vllm_config.speculative_config`` are the same object). ``cls`` is the object's
    class in the scanned tree, so method calls on it can be evaluated.
    """

    label: str
    fields: dict[str, "Value"] = field(default_factory=dict)
    closed: bool = False
    cls: tuple[str, str] | None = None
    roles: dict[str, "Obj"] = field(default_factory=dict)

    def get(self, name: str) -> "Value | _Absent":
        if name in self.fields:
            return self.fields[name]
        if name in self.roles:
            return self.roles[name]
        return ABSENT if self.closed else Unknown(f"{self.label}.{name}")


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()


@dataclass(frozen=True)
class Instance:
    """An object constructed from a class of the scanned tree: ``Cls(...)``."""

    cls: tuple[str, str]
    line: int


@dataclass(frozen=True)
class FuncRef:
    key: tuple[str, str]  # (path, qualname) of a function or method of the tree
    self_obj: "Obj | None" = None


@dataclass(frozen=True)
class ClassRef:
    cls: tuple[str, str]


Value = Union[
    None, bool, int, float, str, "tuple[Any, ...]", "list[Any]", "frozenset[Any]", "dict[Any, Any]",
    Obj, Instance, FuncRef, ClassRef, Unknown,
]


@dataclass(frozen=True)
class Decision:
    """One branch taken: where, the condition, its value (None: unknown) and what it read."""

    path: str
    line: int
    function: str
    condition: str
    value: bool | None
    fields: tuple[str, ...]
    depends_on: str = ""  # for an unknown value: what it depends on
    taken: bool | None = None  # the side this path took (for an unknown value: the fork's side)


@dataclass
class Path:
    """One way through the code: its decisions, what it returned/raised, what it built."""

    env: dict[str, Value]
    decisions: list[Decision] = field(default_factory=list)
    returned: Value = None
    done: bool = False
    raised: str | None = None
    built: list[tuple[PExpr, Value, int]] = field(default_factory=list)  # (target, value, line) of assignments
    reads: list[str] = field(default_factory=list)  # config fields read while evaluating the current guard


class World:
    """What the evaluator asks the scanned tree: names of a module, methods of a class."""

    def resolve_name(self, path: str, name: str) -> Value:
        return Unknown(name)

    def method(self, cls: tuple[str, str], name: str) -> tuple[tuple[str, str], FunctionFact] | None:
        return None

    def function(self, key: tuple[str, str]) -> FunctionFact | None:
        return None


def truth(v: Value) -> bool | None:
    """Python truthiness, three-valued."""
    if isinstance(v, Unknown):
        return None
    if isinstance(v, (Obj, Instance, FuncRef, ClassRef)):
        return True
    return bool(v)


def describe(v: Value) -> str:
    if isinstance(v, Unknown):
        return f"unknown ({v.reason})"
    if isinstance(v, Obj):
        return v.label
    if isinstance(v, Instance):
        return f"{v.cls[1]}(...)"
    return repr(v)


class Evaluator:
    def __init__(self, world: World, on_limit: Callable[[str], None] | None = None) -> None:
        self.world = world
        self.on_limit = on_limit or (lambda _name: None)

    # -- running functions ------------------------------------------------------
    def run(self, key: tuple[str, str], fn: FunctionFact, args: dict[str, Value], depth: int = 0) -> list[Path]:
        """Every path through ``fn`` with parameters bound to ``args`` (missing ones: their
        literal default, else unknown)."""
        env: dict[str, Value] = {}
        for p in fn.params:
            if p.name in args:
                env[p.name] = args[p.name]
            elif p.default is not None:
                env[p.name] = _literal_text(p.default)
            else:
                env[p.name] = Unknown(p.name)
        paths = self._block(key, fn.body, [Path(env)], depth)
        return paths

    def _block(self, key: tuple[str, str], stmts: tuple[Stmt, ...], paths: list[Path], depth: int) -> list[Path]:
        for stmt in stmts:
            nxt: list[Path] = []
            for p in paths:
                if p.done:
                    nxt.append(p)
                else:
                    nxt.extend(self._stmt(key, stmt, p, depth))
            if len(nxt) > MAX_PATHS:
                self.on_limit("partial evaluation paths")
                nxt = nxt[:MAX_PATHS]
            paths = nxt
        return paths

    def _stmt(self, key: tuple[str, str], stmt: Stmt, p: Path, depth: int) -> list[Path]:
        if isinstance(stmt, SIf):
            p.reads = []
            value = self.eval(stmt.test, p, key, depth)
            t = truth(value)
            fields = tuple(dict.fromkeys(p.reads))
            dep = value.reason if isinstance(value, Unknown) else ""
            decision = Decision(key[0], stmt.line, key[1], stmt.text, t, fields, dep, t)
            if t is not None:
                p.decisions.append(decision)
                return self._block(key, stmt.body if t else stmt.orelse, [p], depth)
            if _has_exit(stmt.body) or _has_exit(stmt.orelse) or _builds(stmt.body) or _builds(stmt.orelse):
                # Both outcomes are possible: fork.
                q = _fork(p)
                p.decisions.append(Decision(key[0], stmt.line, key[1], stmt.text, None, fields, dep, True))
                q.decisions.append(Decision(key[0], stmt.line, key[1], stmt.text, None, fields, dep, False))
                return self._block(key, stmt.body, [p], depth) + self._block(key, stmt.orelse, [q], depth)
            p.decisions.append(decision)
            for target in _targets(stmt.body) + _targets(stmt.orelse):
                self._assign(target, Unknown(f"{stmt.text} (line {stmt.line})"), p, key, depth, stmt.line)
            return [p]
        if isinstance(stmt, SReturn):
            p.returned = None if stmt.value is None else self.eval(stmt.value, p, key, depth)
            if isinstance(p.returned, Instance) and p.returned.line == 0:
                p.returned = Instance(p.returned.cls, stmt.line)
            p.done = True
            return [p]
        if isinstance(stmt, SRaise):
            p.raised = stmt.text or "raise"
            p.done = True
            return [p]
        if isinstance(stmt, SAssign):
            assigned = self.eval(stmt.value, p, key, depth)
            for target in stmt.targets:
                self._assign(target, assigned, p, key, depth, stmt.line)
            return [p]
        if isinstance(stmt, SExpr):
            self.eval(stmt.value, p, key, depth)
            return [p]
        if isinstance(stmt, SOpaque):
            for written in stmt.writes:
                self._assign(written, Unknown(f"code at line {stmt.line}"), p, key, depth, stmt.line)
            if stmt.returns:
                # It may return or raise: keep a path where it did not, and say so.
                p.decisions.append(Decision(key[0], stmt.line, key[1], "<loop/try not evaluated>", None, (),
                                            "a statement the evaluator does not run"))
            return [p]
        return [p]

    def _assign(self, target: PExpr, value: Value, p: Path, key: tuple[str, str], depth: int, line: int) -> None:
        if isinstance(value, Instance) and value.line == 0:
            value = Instance(value.cls, line)
        if isinstance(target, PName):
            p.env[target.id] = value
        elif isinstance(target, PAttr):
            owner = self.eval(target.value, p, key, depth)
            if isinstance(owner, Obj):
                owner.fields[target.attr] = value
        elif isinstance(target, PCall) and isinstance(target.func, PAttr) and isinstance(value, Unknown):
            # `obj.update({...})` in a branch whose guard is unknown: those keys become unknown.
            owner = self.eval(target.func.value, p, key, depth)
            if isinstance(owner, Obj) and target.args and isinstance(target.args[0], PDict):
                for k in target.args[0].keys:
                    if isinstance(k, PConst) and isinstance(k.value, str):
                        owner.fields[k.value] = value
            return
        p.built.append((target, value, line))

    # -- expressions -----------------------------------------------------------
    def eval(self, e: PExpr, p: Path, key: tuple[str, str], depth: int = 0) -> Value:
        if isinstance(e, PConst):
            return e.value
        if isinstance(e, PName):
            if e.id in p.env:
                return p.env[e.id]
            if e.id in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[e.id]
            return self.world.resolve_name(key[0], e.id)
        if isinstance(e, PAttr):
            owner = self.eval(e.value, p, key, depth)
            return self._attr(owner, e.attr, p)
        if isinstance(e, PSeq):
            elts = [self.eval(x, p, key, depth) for x in e.elts]
            if e.kind == "list":
                return elts
            if e.kind == "set":
                if any(isinstance(x, (Unknown, Obj, list, dict)) for x in elts):
                    return Unknown(_text(e))
                return frozenset(elts)
            return tuple(elts)
        if isinstance(e, PDict):
            out: dict[object, Value] = {}
            for k, v in zip(e.keys, e.values):
                if k is None:
                    return Unknown("**" + _text(v))
                kv = self.eval(k, p, key, depth)
                if isinstance(kv, (Unknown, Obj, list, dict)):
                    return Unknown(_text(k))
                out[kv] = self.eval(v, p, key, depth)
            return out
        if isinstance(e, PNot):
            t = truth(self.eval(e.operand, p, key, depth))
            return Unknown(_text(e.operand)) if t is None else not t
        if isinstance(e, PBool):
            return self._boolop(e, p, key, depth)
        if isinstance(e, PIfExp):
            t = truth(self.eval(e.test, p, key, depth))
            if t is None:
                return Unknown(_text(e.test))
            return self.eval(e.body if t else e.orelse, p, key, depth)
        if isinstance(e, PCompare):
            return self._compare(e, p, key, depth)
        if isinstance(e, PSubscript):
            return self._subscript(self.eval(e.value, p, key, depth), self.eval(e.index, p, key, depth), e)
        if isinstance(e, PBinOp):
            return self._binop(e, p, key, depth)
        if isinstance(e, PNamed):
            named = self.eval(e.value, p, key, depth)
            p.env[e.target] = named
            return named
        if isinstance(e, PCall):
            return self._call(e, p, key, depth)
        return Unknown(_text(e))

    def _attr(self, owner: Value, attr: str, p: Path) -> Value:
        if isinstance(owner, Obj):
            v = owner.get(attr)
            if not isinstance(v, Obj):  # a config field, not a hop to another config object
                p.reads.append(f"{owner.label}.{attr}")
            if isinstance(v, _Absent):
                return Unknown(f"{owner.label}.{attr} (not set)")
            return v
        if isinstance(owner, Unknown):
            return Unknown(f"{owner.reason}.{attr}")
        return Unknown(f"{describe(owner)}.{attr}")

    def _boolop(self, e: PBool, p: Path, key: tuple[str, str], depth: int) -> Value:
        unknown: Unknown | None = None
        last: Value = None
        for sub in e.values:
            v = self.eval(sub, p, key, depth)
            t = truth(v)
            if t is None:
                unknown = unknown or (v if isinstance(v, Unknown) else Unknown(_text(sub)))
                continue
            if e.op == "and" and not t:
                return v  # False and <anything> is False, even after an unknown
            if e.op == "or" and t:
                return v
            last = v
        return unknown if unknown is not None else last

    def _compare(self, e: PCompare, p: Path, key: tuple[str, str], depth: int) -> Value:
        left = self.eval(e.left, p, key, depth)
        result: Value = True
        for op, comp in zip(e.ops, e.comparators):
            right = self.eval(comp, p, key, depth)
            r = _compare_values(op, left, right)
            if r is None:
                result = Unknown(f"{_text(e.left)} {op} {_text(comp)}") if not isinstance(left, Unknown) else left
                if isinstance(right, Unknown) and not isinstance(left, Unknown):
                    result = right
            elif r is False:
                return False
            left = right
        return result

    def _subscript(self, value: Value, index: Value, e: PSubscript) -> Value:
        if isinstance(value, Unknown):
            return value
        if isinstance(index, Unknown):
            return index
        try:
            if isinstance(value, (list, tuple)) and isinstance(index, int) and not isinstance(index, bool):
                item: Value = value[index]
                return item
            if isinstance(value, dict) and not isinstance(index, (list, dict, Obj)):
                return value[index] if index in value else Unknown(f"{_text(e)} (no such key)")
        except IndexError:
            return Unknown(f"{_text(e)} (index out of range)")
        return Unknown(_text(e))

    def _binop(self, e: PBinOp, p: Path, key: tuple[str, str], depth: int) -> Value:
        a, b = self.eval(e.left, p, key, depth), self.eval(e.right, p, key, depth)
        if isinstance(a, Unknown):
            return a
        if isinstance(b, Unknown):
            return b
        num = (int, float)
        try:
            if e.op == "+" and (isinstance(a, num) and isinstance(b, num) or isinstance(a, str) and isinstance(b, str)
                                or isinstance(a, list) and isinstance(b, list)):
                return a + b  # type: ignore[operator]
            if isinstance(a, num) and isinstance(b, num):
                ops: dict[str, Callable[[float, float], float]] = {
                    "-": lambda x, y: x - y, "*": lambda x, y: x * y, "//": lambda x, y: x // y, "%": lambda x, y: x % y,
                }
                if e.op in ops:
                    return ops[e.op](a, b)
            if e.op in ("|", "&") and isinstance(a, frozenset) and isinstance(b, frozenset):
                return a | b if e.op == "|" else a & b
        except ZeroDivisionError:
            pass
        return Unknown(_text(e))

    def _call(self, e: PCall, p: Path, key: tuple[str, str], depth: int) -> Value:
        f = e.func
        text = e.text or _text(e)
        if isinstance(f, PName) and f.id not in p.env:
            builtin = self._builtin(f.id, e, p, key, depth)
            if builtin is not _NOT_BUILTIN:
                return builtin  # type: ignore[return-value]
        if isinstance(f, PAttr):
            owner = self.eval(f.value, p, key, depth)
            if isinstance(owner, Obj) and f.attr == "update" and len(e.args) == 1 and not e.keywords:
                d = self.eval(e.args[0], p, key, depth)
                if isinstance(d, dict):
                    for k, v in d.items():
                        if isinstance(k, str):
                            owner.fields[k] = v
                    return None
                return Unknown(text)
            if isinstance(owner, Obj) and owner.cls is not None:
                found = self.world.method(owner.cls, f.attr)
                if found is not None:
                    (ckey, fn) = found
                    return self._invoke((ckey[0], f"{ckey[1]}.{f.attr}"), fn, e, p, key, depth, owner)
                return Unknown(text)
            if isinstance(owner, dict) and f.attr == "get" and e.args:
                k = self.eval(e.args[0], p, key, depth)
                default = self.eval(e.args[1], p, key, depth) if len(e.args) > 1 else None
                if isinstance(k, (Unknown, Obj, list, dict)):
                    return Unknown(text)
                return owner.get(k, default)
            if isinstance(owner, frozenset) and f.attr == "intersection" and len(e.args) == 1:
                other = self.eval(e.args[0], p, key, depth)
                if isinstance(other, (list, tuple, frozenset)) and not any(isinstance(x, (Unknown, Obj, list, dict)) for x in other):
                    return owner & frozenset(other)
                return Unknown(text)
            if isinstance(owner, ClassRef):
                found = self.world.method(owner.cls, f.attr)
                if found is not None:
                    (ckey, fn) = found
                    return self._invoke((ckey[0], f"{ckey[1]}.{f.attr}"), fn, e, p, key, depth, None)
            return Unknown(text)
        callee = self.eval(f, p, key, depth)
        if isinstance(callee, ClassRef):
            for a in e.args:
                self.eval(a, p, key, depth)
            return Instance(callee.cls, 0)
        if isinstance(callee, FuncRef):
            target_fn = self.world.function(callee.key)
            if target_fn is not None:
                return self._invoke(callee.key, target_fn, e, p, key, depth, callee.self_obj)
        return Unknown(text)

    def _invoke(self, fkey: tuple[str, str], fn: FunctionFact, e: PCall, p: Path, key: tuple[str, str], depth: int,
                self_obj: Obj | None) -> Value:
        """Evaluate a callee whose body the facts keep; one outcome or unknown."""
        text = e.text or _text(e)
        if depth >= MAX_CALL_DEPTH:
            self.on_limit("partial evaluation call depth")
            return Unknown(text)
        if not fn.body:
            return Unknown(text)
        params = [q.name for q in fn.params]
        args: dict[str, Value] = {}
        positional = list(e.args)
        if self_obj is not None and params and params[0] in ("self", "cls"):
            args[params[0]] = self_obj
            params = params[1:]
        elif params and params[0] in ("self", "cls") and "staticmethod" not in " ".join(fn.decorators):
            params = params[1:]
        for name, a in zip(params, positional):
            args[name] = self.eval(a, p, key, depth)
        for kw in e.keywords:
            if kw.name is None:
                return Unknown(text)
            args[kw.name] = self.eval(kw.value, p, key, depth)
        saved = p.reads
        paths = self.run(fkey, fn, args, depth + 1)
        reads = list(saved)
        for q in paths:
            reads.extend(q.reads)
            for d in q.decisions:
                reads.extend(d.fields)
        p.reads = reads
        results = [q.returned if q.raised is None else Unknown(f"{text} raises") for q in paths if q.done]
        if len(paths) == 1 and paths[0].done:
            return results[0]
        if results and all(_same(r, results[0]) for r in results) and all(q.done for q in paths):
            return results[0]
        deps = [d.depends_on for q in paths for d in q.decisions if d.value is None and d.depends_on]
        return Unknown(deps[0] if deps else text)

    def _builtin(self, name: str, e: PCall, p: Path, key: tuple[str, str], depth: int) -> Value | object:
        args = e.args
        if name == "getattr" and len(args) in (2, 3):
            owner = self.eval(args[0], p, key, depth)
            attr = self.eval(args[1], p, key, depth)
            if not isinstance(attr, str):
                return Unknown(e.text)
            default: Value | _Absent = self.eval(args[2], p, key, depth) if len(args) == 3 else ABSENT
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
            owner = self.eval(args[0], p, key, depth)
            attr = self.eval(args[1], p, key, depth)
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
            vals = [self.eval(a, p, key, depth) for a in args]
            if len(vals) == 1 and isinstance(vals[0], (list, tuple, frozenset)):
                vals = list(vals[0])
            for v in vals:
                if isinstance(v, Unknown):
                    return v
            if vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) or v is True or v is False for v in vals):
                return min(vals) if name == "min" else max(vals)  # type: ignore[type-var]
            return Unknown(e.text)
        if name == "len" and len(args) == 1:
            v = self.eval(args[0], p, key, depth)
            if isinstance(v, (list, tuple, frozenset, dict, str)):
                return len(v)
            return v if isinstance(v, Unknown) else Unknown(e.text)
        if name in ("int", "str", "bool") and len(args) == 1:
            v = self.eval(args[0], p, key, depth)
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
            v = self.eval(args[0], p, key, depth) if args else ()
            if isinstance(v, (list, tuple, frozenset)) and not any(isinstance(x, (Unknown, Obj, list, dict)) for x in v):
                return frozenset(v)
            return v if isinstance(v, Unknown) else Unknown(e.text)
        if name in ("isinstance", "callable", "any", "all", "type", "issubclass"):
            for a in args:
                self.eval(a, p, key, depth)
            return Unknown(e.text)
        return _NOT_BUILTIN


_NOT_BUILTIN = object()


def _same(a: Value, b: Value) -> bool:
    if isinstance(a, Unknown) or isinstance(b, Unknown):
        return False
    return a is b if isinstance(a, Obj) else bool(type(a) is type(b) and a == b)


def _compare_values(op: str, a: Value, b: Value) -> bool | None:
    if op in ("is", "is not"):
        if isinstance(a, Unknown) or isinstance(b, Unknown):
            return None
        if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
            same = a is b if not isinstance(a, Obj) else a is b
            return same if op == "is" else not same
        return None
    if op in ("in", "not in"):
        if isinstance(a, Unknown) or isinstance(b, Unknown) or isinstance(a, (Obj, list, dict)):
            return None
        if isinstance(b, (tuple, list, frozenset)):
            if any(isinstance(x, Unknown) for x in b):
                return None
            found = a in b
        elif isinstance(b, dict):
            found = a in b
        elif isinstance(b, str) and isinstance(a, str):
            found = a in b
        else:
            return None
        return found if op == "in" else not found
    if isinstance(a, Unknown) or isinstance(b, Unknown) or isinstance(a, Obj) or isinstance(b, Obj):
        return None
    try:
        if op == "==":
            return bool(a == b)
        if op == "!=":
            return bool(a != b)
        if a is None or b is None:
            return None
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]  # type: ignore[operator]
    except TypeError:
        return None


def _has_exit(stmts: tuple[Stmt, ...]) -> bool:
    for s in stmts:
        if isinstance(s, (SReturn, SRaise)):
            return True
        if isinstance(s, SIf) and (_has_exit(s.body) or _has_exit(s.orelse)):
            return True
        if isinstance(s, SOpaque) and s.returns:
            return True
    return False


def _builds(stmts: tuple[Stmt, ...]) -> bool:
    """An attribute of an object is assigned a constructed object (a factory's result)."""
    for s in stmts:
        if isinstance(s, SAssign) and any(isinstance(t, PAttr) for t in s.targets) and isinstance(s.value, PCall):
            return True
        if isinstance(s, SIf) and (_builds(s.body) or _builds(s.orelse)):
            return True
    return False


def _targets(stmts: tuple[Stmt, ...]) -> list[PExpr]:
    out: list[PExpr] = []
    for s in stmts:
        if isinstance(s, SAssign):
            out.extend(s.targets)
        elif isinstance(s, SIf):
            out += _targets(s.body) + _targets(s.orelse)
        elif isinstance(s, SOpaque):
            out.extend(s.writes)
        elif isinstance(s, SExpr) and isinstance(s.value, PCall) and isinstance(s.value.func, PAttr) and s.value.func.attr == "update":
            out.append(s.value)
    return out


def _fork(p: Path) -> Path:
    """An independent copy of a path: config objects are copied with it (they are mutated)."""
    memo: dict[int, object] = {}
    env = copy.deepcopy(p.env, memo)
    return Path(env, list(p.decisions), p.returned, p.done, p.raised, list(p.built), list(p.reads))


def _literal_text(text: str) -> Value:
    t = text.strip()
    simple: dict[str, Value] = {"None": None, "True": True, "False": False}
    if t in simple:
        return simple[t]
    try:
        return int(t)
    except ValueError:
        pass
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"" and t[0] not in t[1:-1] and "\\" not in t:
        return t[1:-1]
    return Unknown(f"default {t}")


def _text(e: PExpr | None) -> str:
    if e is None:
        return "?"
    if isinstance(e, PConst):
        return repr(e.value)
    if isinstance(e, PName):
        return e.id
    if isinstance(e, PAttr):
        return f"{_text(e.value)}.{e.attr}"
    if isinstance(e, PCall):
        return e.text or f"{_text(e.func)}(...)"
    if isinstance(e, POpaque):
        return e.text
    if isinstance(e, PCompare):
        parts = [_text(e.left)]
        for op, c in zip(e.ops, e.comparators):
            parts += [op, _text(c)]
        return " ".join(parts)
    if isinstance(e, PBool):
        return f" {e.op} ".join(_text(v) for v in e.values)
    if isinstance(e, PNot):
        return f"not {_text(e.operand)}"
    if isinstance(e, PSubscript):
        return f"{_text(e.value)}[{_text(e.index)}]"
    if isinstance(e, PSeq):
        inner = ", ".join(_text(x) for x in e.elts)
        return {"list": f"[{inner}]", "set": f"{{{inner}}}"}.get(e.kind, f"({inner})")
    if isinstance(e, PBinOp):
        return f"{_text(e.left)} {e.op} {_text(e.right)}"
    return type(e).__name__


expr_text = _text
