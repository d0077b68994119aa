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
from typing import Callable

from ...facts import (
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
from .builtins import NOT_BUILTIN, call_builtin
from .values import (
    ClassRef,
    Decision,
    FuncRef,
    Instance,
    Obj,
    Path,
    Unknown,
    Value,
    _Absent,
    _compare_values,
    _literal_text,
    _same,
    _text,
    describe,
    truth,
)

MAX_PATHS = 32
MAX_CALL_DEPTH = 4


class World:
    """What the evaluator asks the scanned tree: names of a module, methods of a class."""

    def resolve_name(self, path: str, name: str) -> Value:
        return Unknown(name)

    def method(self, cls: tuple[str, str], name: str) -> tuple[tuple[str, str], FunctionFact] | None:
        return None

    def function(self, key: tuple[str, str]) -> FunctionFact | None:
        return None


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
            builtin = call_builtin(self, f.id, e, p, key, depth)
            if builtin is not NOT_BUILTIN:
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


