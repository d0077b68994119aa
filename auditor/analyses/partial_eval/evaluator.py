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

from typing import Any, Callable

from ...facts.extract import (
    FunctionFact,
    PAttr,
    PBinOp,
    PCall,
    PExpr,
    PName,
    PSeq,
    PSubscript,
    SAssign,
    SExpr,
    SIf,
    SLoopExit,
    SOpaque,
    SRaise,
    SReturn,
    Stmt,
)
from .expressions import MAX_CALL_DEPTH, SOME_PATHS_RAISE, ExpressionEvaluator, World, _is_chain
from .state import fork, havoc, join, restore
from .values import ClassRef, Decision, Instance, Obj, Path, Unknown, Value, _literal_text, _text, describe, truth

MAX_PATHS = 32
MAX_UNROLL = 16  # elements of a known list or tuple a loop is run for, one by one
__all__ = ["MAX_CALL_DEPTH", "MAX_PATHS", "Evaluator", "World"]


class Evaluator(ExpressionEvaluator):
    def run(self, key: tuple[str, str], fn: FunctionFact, args: dict[str, Value], depth: int = 0,
            roots: list[Any] | None = None) -> list[Path]:
        """Every path through ``fn`` with parameters bound to ``args`` (missing ones: their
        literal default, else unknown). ``roots``: the callers' frames (for a callee)."""
        env: dict[str, Value] = {}
        for p in fn.params:
            if p.name in args:
                env[p.name] = args[p.name]
            elif p.default is not None:
                env[p.name] = _literal_text(p.default)
            else:
                env[p.name] = Unknown(p.name)
        paths = self._block(key, fn.body, [Path(env, roots=list(roots or []))], depth)
        return paths

    def run_joined(self, key: tuple[str, str], fn: FunctionFact, args: dict[str, Value]) -> Path:
        """All paths through ``fn`` as one: the objects in ``args`` end in the joined state
        of every path that does not raise (a field they set differently is unknown),
        ``returned`` is the join of what they return, and ``decisions`` are those every
        path took, then one per fork with value None. When every path raises, the first
        raising path (``raised`` set); when only some do, the join of the others and a note
        in :attr:`notes` naming the raise (the fork deciding it is among the decisions).
        ``args`` itself ends holding the joined values (a list or dict the paths left
        different is :class:`Unknown` there)."""
        frame = args
        paths = self.run(key, fn, args, 0, [frame])
        if len(paths) == 1:
            return paths[0]
        returning = [q for q in paths if q.raised is None]
        if not returning:
            return paths[0]
        for q in paths:
            if q.raised is not None:
                note = f"{key[1]} raises {q.raised}{SOME_PATHS_RAISE}"
                if note not in self.notes:
                    self.notes.append(note)
        forks = [d for q in paths for d in q.decisions if d.value is None]
        for q in returning:
            q.done = True
        joined = join(returning, f"(depends on a branch of {key[1]})")
        if joined.roots and joined.roots[0] is not frame:
            restore(frame, joined.roots[0])
        seen: set[tuple[str, int]] = {(d.path, d.line) for d in joined.decisions}
        for d in forks:
            if (d.path, d.line) not in seen:
                seen.add((d.path, d.line))
                joined.decisions.append(Decision(d.path, d.line, d.function, d.condition, None, d.fields, d.depends_on, None))
        return joined

    def _block(self, key: tuple[str, str], stmts: tuple[Stmt, ...], paths: list[Path], depth: int) -> list[Path]:
        for stmt in stmts:
            nxt: list[Path] = []
            for p in paths:
                if p.done:
                    nxt.append(p)
                else:
                    nxt.extend(self._stmt(key, stmt, p, depth))
            if len(nxt) > MAX_PATHS:
                nxt = self._merge_excess(key, stmt.line, nxt)
            paths = nxt
        return paths

    def _merge_excess(self, key: tuple[str, str], line: int, paths: list[Path]) -> list[Path]:
        """Paths beyond the cap are joined (never dropped): those still running, those
        that returned and those that raised, each into one path whose values that differ
        are unknown, with a decision of unknown value saying so."""
        keep, rest = paths[: MAX_PATHS - 3], paths[MAX_PATHS - 3:]
        note = (f"{key[1]} ({key[0]}:{line}): {len(paths)} paths, more than the {MAX_PATHS} the evaluator follows; "
                f"{len(rest)} were joined, and what they decide is unknown")
        groups: dict[tuple[bool, bool, str | None], list[Path]] = {}
        for q in rest:
            groups.setdefault((q.done, q.raised is not None, q.loop_exit), []).append(q)
        out = list(keep)
        for group in groups.values():
            cut = Decision(key[0], line, key[1], f"<{len(rest)} paths beyond the cap of {MAX_PATHS} joined>", None, (),
                           f"cut: more than {MAX_PATHS} paths", None)
            merged = join(group, f"(one of {len(rest)} joined paths)", cut)
            self._cut(merged, "partial evaluation paths", note)
            out.append(merged)
        return out

    def _stmt(self, key: tuple[str, str], stmt: Stmt, p: Path, depth: int) -> list[Path]:
        if isinstance(stmt, SIf):
            p.reads = []
            value = self.eval(stmt.test, p, key, depth)
            if isinstance(value, Unknown) and value.raises:  # the test itself raises
                p.raised, p.raised_at, p.done = f"{value.raises} (in the test {stmt.text})", stmt.line, True
                p.raised_in = value.raised_in or (key[0], key[1], stmt.line)
                return [p]
            t = truth(value)
            fields = tuple(dict.fromkeys(p.reads))
            dep = value.reason if isinstance(value, Unknown) else ""
            decision = Decision(key[0], stmt.line, key[1], stmt.text, t, fields, dep, t)
            if t is not None:
                p.decisions.append(decision)
                return self._block(key, stmt.body if t else stmt.orelse, [p], depth)
            # Both outcomes are possible: fork (each side on its own copy of every object).
            q = fork(p)
            p.decisions.append(Decision(key[0], stmt.line, key[1], stmt.text, None, fields, dep, True))
            q.decisions.append(Decision(key[0], stmt.line, key[1], stmt.text, None, fields, dep, False))
            both = self._block(key, stmt.body, [p], depth) + self._block(key, stmt.orelse, [q], depth)
            if _has_exit(stmt.body) or _has_exit(stmt.orelse) or _builds(stmt.body) or _builds(stmt.orelse):
                return both
            # Neither side returns: one path again, where whatever the sides left different is unknown.
            running = [r for r in both if not r.done]
            done = [r for r in both if r.done]
            if not running:
                return both
            merged = join(running, f"(depends on {stmt.text}, line {stmt.line})",
                          Decision(key[0], stmt.line, key[1], stmt.text, None, fields, dep, None))
            return [merged, *done]
        if isinstance(stmt, SReturn):
            p.returned = None if stmt.value is None else self.eval(stmt.value, p, key, depth)
            if _raising(p, p.returned, key, stmt.line):
                return [p]
            if isinstance(p.returned, Instance) and p.returned.line == 0:
                p.returned = Instance(p.returned.cls, stmt.line)
            elif isinstance(p.returned, Unknown) and p.returned.options:
                # One of several objects built here: each carries this line.
                p.returned = Unknown(p.returned.reason, known_truth=p.returned.known_truth, options=tuple(
                    Instance(o.cls, stmt.line) if isinstance(o, Instance) and o.line == 0 else o for o in p.returned.options))
            p.done = True
            return [p]
        if isinstance(stmt, SLoopExit):  # (only in the body of a loop run element by element)
            p.done, p.loop_exit = True, stmt.kind
            return [p]
        if isinstance(stmt, SRaise):
            p.raised, p.raised_at, p.raised_in = stmt.text or "raise", stmt.line, (key[0], key[1], stmt.line)
            p.done = True
            return [p]
        if isinstance(stmt, SAssign):
            if stmt.aug and len(stmt.targets) == 1 and isinstance(stmt.value, PBinOp):
                self._aug_assign(stmt.targets[0], stmt.value, p, key, depth, stmt.line)
                return [p]
            if len(stmt.targets) == 1 and self._pinned_target(stmt.targets[0], p, key, depth):
                return [p]  # the field already holds what the assignment builds
            assigned = self.eval(stmt.value, p, key, depth)
            if _raising(p, assigned, key, stmt.line):
                return [p]
            if len(stmt.targets) == 1 and isinstance(stmt.targets[0], PName):
                # A local one of several values: a path each, so what is derived from it later
                # stays paired with it (``cls = f(); name = cls.name``).
                return self._split(key, stmt.line, _text(stmt.value), p, assigned,
                                   lambda q, v: self._assign(stmt.targets[0], v, q, key, depth, stmt.line))
            for target in stmt.targets:
                self._assign(target, assigned, p, key, depth, stmt.line)
            return [p]
        if isinstance(stmt, SExpr):
            _raising(p, self.eval(stmt.value, p, key, depth), key, stmt.line)
            return [p]
        if isinstance(stmt, SOpaque):
            unrolled = self._unrolled(key, stmt, p, depth)
            if unrolled is not None:
                return unrolled
            why = f"code at line {stmt.line} not evaluated"
            changed = [self.eval(m, p, key, depth) for m in stmt.mutated if _is_chain(m)]
            havoc(p, changed, why)
            for written in stmt.writes:
                self._assign(written, Unknown(f"code at line {stmt.line}"), p, key, depth, stmt.line)
            if stmt.returns:
                # It may return or raise: a path where it did (what it returned is unknown),
                # and one where it did not.
                q = fork(p)
                q.decisions.append(Decision(key[0], stmt.line, key[1], "<loop/try not evaluated>", None, (),
                                            "a statement the evaluator does not run", True))
                q.returned = Unknown(f"what code at line {stmt.line} returns")
                q.done = True
                p.decisions.append(Decision(key[0], stmt.line, key[1], "<loop/try not evaluated>", None, (),
                                            "a statement the evaluator does not run", False))
                return [p, q]
            return [p]
        return [p]

    def _pinned_target(self, target: PExpr, p: Path, key: tuple[str, str], depth: int) -> bool:
        """``obj.f = ...`` where ``f`` is pinned on ``obj``: the value it holds stands for what the
        assignment builds (its expression is not run either)."""
        if not isinstance(target, PAttr) or not _is_chain(target.value):
            return False
        owner = self.eval(target.value, p, key, depth)
        return isinstance(owner, Obj) and target.attr in owner.pinned

    def _unrolled(self, key: tuple[str, str], stmt: SOpaque, p: Path, depth: int) -> list[Path] | None:
        """A plain ``for`` loop over a list or tuple the path knows (at most
        :data:`MAX_UNROLL` elements): its body run once per element, in order; None when it
        is no such loop (then it is not run)."""
        if stmt.loop_iter is None or stmt.loop_target is None or not stmt.body:
            return None
        items = self.eval(stmt.loop_iter, p, key, depth)
        if isinstance(items, dict) and not any(isinstance(k, Unknown) for k in items):
            items = list(items)  # a dict iterates over its keys, in insertion order
        if not isinstance(items, (list, tuple)) or len(items) > MAX_UNROLL:
            return None
        paths = [p]
        left: list[Path] = []  # paths that left the loop by ``break``
        for item in list(items):
            for q in paths:
                if not q.done:
                    self._assign(stmt.loop_target, item, q, key, depth, stmt.line)
            paths = self._block(key, stmt.body, paths, depth)
            for q in [q for q in paths if q.loop_exit is not None]:
                if q.loop_exit == "break":
                    paths.remove(q)
                    left.append(q)
                q.done, q.loop_exit = False, None  # ``continue``: on with the next element
        return paths + left

    def _split(self, key: tuple[str, str], line: int, text: str, p: Path, value: Value,
               put: "Callable[[Path, Value], object]") -> list[Path]:
        """``put`` ``value`` on ``p``; when it is one of several values (:attr:`Unknown.options`),
        one path per value instead, each with a decision of unknown value saying which."""
        if not (isinstance(value, Unknown) and value.options):
            put(p, value)
            return [p]
        out: list[Path] = []
        options = value.options
        for i, option in enumerate(options):
            q = p if i == len(options) - 1 else fork(p)
            q.decisions.append(Decision(key[0], line, key[1], f"{text} gives {describe(option)}", None, tuple(p.reads),
                                        value.reason, True))
            put(q, option)
            out.append(q)
        return out

    def _aug_assign(self, target: PExpr, e: PBinOp, p: Path, key: tuple[str, str], depth: int, line: int) -> None:
        """``t op= v``: a list or dict target is changed in place (every alias sees it)."""
        old = self.eval(target, p, key, depth)
        if isinstance(old, (list, dict)):
            rhs = self.eval(e.right, p, key, depth)
            if isinstance(old, list) and e.op == "+" and isinstance(rhs, (list, tuple)):
                old.extend(rhs)
                return
            if isinstance(old, dict) and e.op == "|" and isinstance(rhs, dict):
                old.update(rhs)
                return
            havoc(p, [old, rhs], f"{_text(target)} {e.op}= … at line {line}")
            self._assign(target, Unknown(f"{_text(target)} {e.op}= … (line {line})"), p, key, depth, line)
            return
        self._assign(target, self._binop(e, p, key, depth), p, key, depth, line)

    def _assign(self, target: PExpr, value: Value, p: Path, key: tuple[str, str], depth: int, line: int) -> None:
        if isinstance(value, Instance) and value.line == 0:
            value = Instance(value.cls, line)
        if isinstance(target, PName):
            p.env[target.id] = value
        elif isinstance(target, PAttr):
            owner = self.eval(target.value, p, key, depth)
            if isinstance(owner, Obj) and target.attr in owner.pinned:
                pass  # what the assignment builds is the value the field already holds
            elif isinstance(owner, Obj):
                owner.fields[target.attr] = value
            elif isinstance(owner, (Instance, ClassRef)):
                # An object or class of the tree keeps no state here: what is read through it
                # from now on is unknown (see ExpressionEvaluator.attribute).
                self._object_writes.add((owner.cls, target.attr))
        elif isinstance(target, PSubscript):
            self._store(target, value, p, key, depth, line)
            return
        elif isinstance(target, PSeq):
            # a, b = value: element by element, or every target unknown.
            items = list(value) if isinstance(value, (list, tuple)) and len(value) == len(target.elts) else None
            for i, t in enumerate(target.elts):
                self._assign(t, items[i] if items is not None else Unknown(f"{_text(t)} (line {line})"),
                             p, key, depth, line)
            return
        p.built.append((target, value, line))

    def _store(self, target: PSubscript, value: Value, p: Path, key: tuple[str, str], depth: int, line: int) -> None:
        """``c[i] = value`` on a known list or dict; a store the evaluator cannot place
        makes the container unknown."""
        container = self.eval(target.value, p, key, depth)
        index = self.eval(target.index, p, key, depth)
        if isinstance(container, dict) and not isinstance(index, (Unknown, Obj, list, dict)):
            container[index] = value
            return
        if (isinstance(container, list) and isinstance(index, int) and not isinstance(index, bool)
                and -len(container) <= index < len(container)):
            container[index] = value
            return
        havoc(p, [container, value], f"{_text(target)} = … at line {line}")

    # -- expressions -----------------------------------------------------------

def _raising(p: Path, value: Value, key: tuple[str, str], line: int) -> bool:
    """The statement's expression raises (a callee that raises on every path, ``k % 0``): the
    path ends raising there, as Python's does."""
    if not (isinstance(value, Unknown) and value.raises):
        return False
    p.raised, p.raised_at, p.done = value.raises, line, True
    p.raised_in = value.raised_in or (key[0], key[1], line)
    return True


def _has_exit(stmts: tuple[Stmt, ...]) -> bool:
    for s in stmts:
        if isinstance(s, (SReturn, SRaise, SLoopExit)):
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
