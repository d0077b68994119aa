"""Expressions and calls of the partial evaluator: names, attributes, literals,
boolean operators, comparisons, subscripts, arithmetic and calls (the modelled builtins,
methods of builtin values, functions and methods of the scanned tree, run on every path
and joined into the caller; a call it cannot run makes what it is handed unknown).
Statements and paths are in :mod:`.evaluator`.
"""

from __future__ import annotations

from typing import Any, Callable

from ...facts.extract import (
    FunctionFact,
    PAttr,
    PBinOp,
    PBool,
    PCall,
    PCompare,
    PConst,
    PDict,
    PExpr,
    PFormat,
    PIfExp,
    PName,
    PNamed,
    PNot,
    PSeq,
    PSubscript,
)
from .builtins import NOT_BUILTIN, call_builtin, call_method
from .objects import TreeValues, _bound_to, _chain_of, _is_super, _options
from .state import fork, havoc, join, restore
from .values import (
    ORDERING,
    one_of,
    ClassRef,
    FuncRef,
    Instance,
    ModuleRef,
    Obj,
    Path,
    Unknown,
    Value,
    _Absent,
    _compare_values,
    _same,
    _text,
    truth,
)

MAX_CALL_DEPTH = 8
#: The set operators, on sets modelled as frozensets (``A.options - {"x"}``).
_SET_OPS: dict[str, Callable[[frozenset[Any], frozenset[Any]], frozenset[Any]]] = {
    "|": frozenset.union, "&": frozenset.intersection, "-": frozenset.difference, "^": frozenset.symmetric_difference,
}

#: The words of the note a callee that raises on some paths leaves (a cut: on the rest, it returned).
MAY_RAISE = " raises on some paths for this configuration "
#: The words of the note a joined run leaves when some of its paths raise (the rest are joined).
SOME_PATHS_RAISE = " on some paths for this config; the rest assumes it does not"


def only_partial_raises(notes: list[str]) -> bool:
    """Every note says only that some paths raise (a callee's, :data:`MAY_RAISE`, or a joined
    run's, :data:`SOME_PATHS_RAISE`): the paths that return were run whole, no cut on them."""
    return all(MAY_RAISE in n or SOME_PATHS_RAISE in n for n in notes)
_MAX_REPEAT = 4096  # ``[x] * n`` is built only up to this many elements


class World:
    """What the evaluator asks the scanned tree: names of a module, methods of a class,
    and the names of methods known to only read their object (``pure_methods``).

    ``sub_config_getters``: getters that return the sub-config held under one of the listed
    fields, else the config itself (transformers' ``get_text_config()``); on a config whose
    fields are known they are evaluated, on any other they are opaque."""

    pure_methods: frozenset[str] = frozenset()
    sub_config_getters: dict[str, tuple[str, ...]] = {}

    def resolve_name(self, path: str, name: str) -> Value:
        return Unknown(name)

    def method(self, cls: tuple[str, str], name: str) -> tuple[tuple[str, str], FunctionFact] | None:
        return None

    def function(self, key: tuple[str, str]) -> FunctionFact | None:
        return None

    def class_attr(self, cls: tuple[str, str], name: str, instance: bool = False) -> "Value | _Absent | None":
        """The value of a class's attribute read through the class (``Mode.NONE``), or through
        an object of it (``instance``), when the world knows it (:data:`~.values.ABSENT`: the
        class surely has none); None: unknown."""
        return None

    def property_method(self, cls: tuple[str, str], name: str) -> tuple[tuple[str, str], FunctionFact] | None:
        """The getter when ``name`` is a property of ``cls``; None otherwise."""
        return None

    def method_after(self, cls: tuple[str, str], name: str, after: tuple[str, str]) -> tuple[tuple[str, str], FunctionFact] | None:
        """``super()``'s lookup: ``name`` in the MRO of ``cls`` past the class ``after``."""
        return None

    def is_subclass(self, cls: tuple[str, str], base: tuple[str, str]) -> bool | None:
        return None

    def runs_constructor(self, cls: tuple[str, str]) -> bool:
        """Whether building an object of ``cls`` runs its ``__init__`` (the dispatch analysis
        builds a drafter without running its constructor: the build is what it asks)."""
        return True

    def module(self, name: str) -> "ModuleRef | None":
        """The module ``name`` of the tree (``importlib.import_module``); None: not in the tree."""
        return None

    def stdlib_function(self, path: str, chain: tuple[str, ...]) -> str | None:
        """The modelled standard-library function (``importlib.import_module``, ``typing.cast``)
        that ``chain`` names in the module at ``path``; None: none."""
        return None

    def pinned_call(self, path: str, chain: tuple[str, ...]) -> "Value | None":
        """What a call of the function ``chain`` names in the module at ``path`` returns when the
        question pins it (a configured loader's call returns the draft model the plan loads);
        None: not pinned (evaluated as any call)."""
        return None

    def object_factory(self, path: str, chain: tuple[str, ...]) -> bool:
        """Whether ``chain`` in the module at ``path`` names a library function outside the tree
        that returns an object, never None (``object-factories``: ``torch.empty``, ...)."""
        return False

    def environ(self, path: str, chain: tuple[str, ...]) -> "dict[str, str] | None":
        """The process environment when ``chain`` in the module at ``path`` names ``os.environ``
        and the question gives the environment (the variables given, no other); None: not that,
        or not given (unknown)."""
        return None

    def module_values(self) -> "dict[tuple[str, str], object] | None":
        """Where evaluated module-level values are kept across evaluators (None: in each)."""
        return None

    def module_value(self, path: str, name: str) -> "tuple[str, PExpr] | None":
        """The expression a module-level ``name`` of the module at ``path`` is bound to once (in
        that module or the one it is imported from), with the module it is evaluated in; None:
        not such a name."""
        return None

    def class_value(self, cls: tuple[str, str], name: str, instance: bool = False) -> "tuple[str, PExpr] | None":
        """The expression a class attribute that is no literal is bound to once in the body of
        the class of ``cls``'s MRO that decides it, with the module it is evaluated in; None:
        not such an attribute."""
        return None

    def record_fields(self, cls: tuple[str, str]) -> dict[str, Value] | None:
        """When ``cls`` is a data record whose construction the evaluator models (a plain
        ``@dataclass``), its fields' literal defaults; None: any other class."""
        return None

    def literal_args(self, path: str, func: str, alias: str) -> tuple[Value, ...] | None:
        """``func(alias)`` in the module at ``path``, when ``func`` is ``typing.get_args`` and
        ``alias`` a ``Literal[...]`` type alias the world can read whole: its values, flattened
        as ``Literal`` flattens nested ones; None: anything else (the call stays unknown)."""
        return None

class ExpressionEvaluator(TreeValues):
    """Evaluates expressions on one path; :class:`~.evaluator.Evaluator` adds statements."""

    def __init__(self, world: World, on_limit: Callable[[str], None] | None = None) -> None:
        self.world = world
        self.on_limit = on_limit or (lambda _name: None)
        # Every cut of every run of this evaluator, in order (a plan shows them).
        self.notes: list[str] = []
        # (module, name) -> the value of a module-level name bound to an expression (``_global``),
        # shared with the world's other evaluators where it keeps them.
        shared = world.module_values()
        self._module_values: dict[tuple[str, str], Value | object] = shared if shared is not None else {}
        # Objects of the tree carry no state (:class:`Instance`): (class, attribute) set through
        # an object or the class, and classes whose objects were handed to code not run; a class
        # attribute read through them is unknown from then on.
        self._object_writes: set[tuple[tuple[str, str], str]] = set()
        self._escaped: set[tuple[str, str]] = set()

    def _cut(self, p: Path, kind: str, note: str) -> None:
        self.on_limit(kind)
        if note not in p.cuts:
            p.cuts.append(note)
        if note not in self.notes:
            self.notes.append(note)

    # -- running functions ------------------------------------------------------
    def run(self, key: tuple[str, str], fn: FunctionFact, args: dict[str, Value], depth: int = 0,
            roots: list[Any] | None = None) -> list[Path]:
        raise NotImplementedError  # statements: Evaluator.run

    def eval(self, e: PExpr, p: Path, key: tuple[str, str], depth: int = 0) -> Value:
        if isinstance(e, PConst):
            return e.value
        if isinstance(e, PName):
            if e.id in p.env:
                return p.env[e.id]
            if e.id in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[e.id]
            return self._global(key[0], e.id)
        if isinstance(e, PAttr):
            if isinstance(e.value, PName) and e.value.id not in p.env:
                environ = self.world.environ(key[0], (e.value.id, e.attr))
                if environ is not None:
                    return dict(environ)
            owner = self.eval(e.value, p, key, depth)
            return self._attr(owner, e.attr, p, key, depth)
        if isinstance(e, PFormat):
            return self._format(e, p, key, depth)
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
            bad: Unknown | None = None
            for k, v in zip(e.keys, e.values):
                kv = self.eval(k, p, key, depth) if k is not None else None
                vv = self.eval(v, p, key, depth)
                if k is None:
                    bad = bad or Unknown("**" + _text(v))
                elif isinstance(kv, (Unknown, Obj, list, dict)):
                    bad = bad or Unknown(_text(k))
                else:
                    out[kv] = vv
            return bad if bad is not None else out
        if isinstance(e, PNot):
            operand = self.eval(e.operand, p, key, depth)
            if isinstance(operand, Unknown) and operand.raises:
                return operand
            t = truth(operand)
            return Unknown(f"not {_text(e.operand)}") if t is None else not t
        if isinstance(e, PBool):
            return self._boolop(e, p, key, depth)
        if isinstance(e, PIfExp):
            test = self.eval(e.test, p, key, depth)
            t = truth(test)
            if t is not None:
                return self.eval(e.body if t else e.orelse, p, key, depth)
            return self._either(p, key, depth, [e.body, e.orelse], f"(depends on {_text(e.test)})")
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

    def _boolop(self, e: PBool, p: Path, key: tuple[str, str], depth: int) -> Value:
        """``a and b`` / ``a or b``: Python's value while the operands are known; after an
        unknown one, an unknown whose truth may still be known (``x and False`` is falsy),
        and the later operands' code run on one side of a fork only."""
        for i, sub in enumerate(e.values):
            v = self.eval(sub, p, key, depth)
            if isinstance(v, Unknown) and v.raises:
                return v  # it raises: the later operands never run
            t = truth(v)
            if t is None:
                rest = e.values[i + 1:]
                reason = v.reason if isinstance(v, Unknown) else _text(sub)
                if not rest:
                    return v
                decisive = False if e.op == "and" else True
                # Any later operand may be the value; its truth decides when it is decisive.
                tail_truth = self._tail_truth(p, key, depth, rest, e.op)
                known = decisive if tail_truth is decisive else None
                return Unknown(reason, known_truth=known)
            if e.op == "and" and not t or e.op == "or" and t or i == len(e.values) - 1:
                return v
        return None

    def _tail_truth(self, p: Path, key: tuple[str, str], depth: int, rest: tuple[PExpr, ...], op: str) -> bool | None:
        """The operands after an unknown one run only on some executions: evaluate them
        on a fork per prefix and join, so their effects are kept as maybe-effects. Returns
        the decisive truth if the tail surely reaches it (``False`` for ``and``)."""
        decisive = op == "or"
        snapshots: list[Path] = []
        runs_code = any(_has_call(x) for x in rest)
        result: bool | None = None
        for x in rest:
            if runs_code:
                snapshots.append(fork(p))
            t = truth(self.eval(x, p, key, depth))
            if t is decisive:
                result = decisive
                break
        if snapshots:
            join([p, *snapshots], f"(depends on {' and '.join(_text(x) for x in rest)})")
        return result

    def _either(self, p: Path, key: tuple[str, str], depth: int, options: list[PExpr], why: str) -> Value:
        """One of ``options`` is evaluated (which one is unknown): each on its own fork,
        then joined; the value is known only where all agree."""
        if not any(_has_call(x) for x in options):
            vals = [self.eval(x, p, key, depth) for x in options]
            if all(not isinstance(v, (Unknown, Obj, list, dict)) and _same(v, vals[0]) for v in vals):
                return vals[0]
            ts = {truth(v) for v in vals}
            return Unknown(why.strip("()"), known_truth=ts.pop() if len(ts) == 1 else None)
        sides = [p] + [fork(p) for _ in options[1:]]
        slot = "\0either"
        for side, x in zip(sides, options):
            side.env[slot] = self.eval(x, side, key, depth)
        join(sides, why)
        return p.env.pop(slot)

    def _compare(self, e: PCompare, p: Path, key: tuple[str, str], depth: int) -> Value:
        left = self.eval(e.left, p, key, depth)
        result: Value = True
        for op, comp in zip(e.ops, e.comparators):
            right = self.eval(comp, p, key, depth)
            refused = _unorderable(op, left, right)
            if refused is not None:  # Python raises: ``None > 1``
                return Unknown(f"{_text(e.left)} {op} {_text(comp)}", raises=refused)
            r = _compare_values(op, left, right)
            if r is None and any(isinstance(v, Unknown) and v.options for v in (left, right)):
                # One of several values on one side or both: decided when every pairing agrees.
                found = {_compare_values(op, a, b) for a in _options(left) for b in _options(right)}
                r = found.pop() if len(found) == 1 else None
            if r is None:
                result = Unknown(f"{_text(e.left)} {op} {_text(comp)}") if not isinstance(left, Unknown) else left
                if isinstance(right, Unknown) and not isinstance(left, Unknown):
                    result = right
            elif r is False:
                return False
            left = right
        return result

    def _subscript(self, value: Value, index: Value, e: PSubscript) -> Value:
        if isinstance(value, Unknown) and value.options and not isinstance(index, Unknown):
            return one_of([self._subscript(o, index, e) for o in value.options], _text(e))
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
            if e.op == "*" and (isinstance(a, (list, tuple, str)) and type(b) is int
                                or type(a) is int and isinstance(b, (list, tuple, str))):
                seq, times = (a, b) if type(b) is int else (b, a)
                if len(seq) * max(times, 0) <= _MAX_REPEAT:  # type: ignore[arg-type, operator]
                    return a * b  # type: ignore[operator]
                return Unknown(_text(e))
            if e.op in _SET_OPS and isinstance(a, frozenset) and isinstance(b, frozenset):
                return _SET_OPS[e.op](a, b)
        except ZeroDivisionError as exc:  # (our arithmetic on the known operands, never scanned code)
            return Unknown(_text(e), raises=f"ZeroDivisionError: {exc}")
        return Unknown(_text(e))

    def _call(self, e: PCall, p: Path, key: tuple[str, str], depth: int) -> Value:
        f = e.func
        text = e.text or _text(e)
        chain = _chain_of(f)
        if chain is not None and chain[0] not in p.env:
            named = _named_call(self, chain, e, p, key, depth, text)
            if named is not NOT_BUILTIN:
                return named  # type: ignore[return-value]
        if isinstance(f, PName) and f.id not in p.env:
            builtin = call_builtin(self, f.id, e, p, key, depth)
            if builtin is not NOT_BUILTIN:
                return builtin  # type: ignore[return-value]
        if isinstance(f, PAttr):
            if _is_super(f.value) and "super" not in p.env:
                return self._super_call(e, f.attr, p, key, depth, text)
            owner = self.eval(f.value, p, key, depth)
            if isinstance(owner, Unknown) and owner.options:
                return _call_on_options(self, owner, e, p, key, depth, text)
            return self._call_on(owner, f.attr, e, p, key, depth, text)
        return self._call_value(self.eval(f, p, key, depth), e, p, key, depth, text)

    def _call_on(self, owner: Value, attr: str, e: PCall, p: Path, key: tuple[str, str], depth: int, text: str) -> Value:
        """``owner.attr(...)``: a method of a config object, a class or an object of the tree, a
        module's function, a method of a builtin value, or opaque."""
        f = e.func
        assert isinstance(f, PAttr)
        if isinstance(owner, Obj) and f.attr == "update" and len(e.args) <= 1:
            return self._update(owner, e, p, key, depth, text)
        if isinstance(owner, Obj) and f.attr == "get" and owner.cls is None and 1 <= len(e.args) <= 2 and not e.keywords:
            got = self._mapping_get(owner, e, p, key, depth)
            if got is not NOT_BUILTIN:
                return got  # type: ignore[return-value]
        if isinstance(owner, (Obj, ClassRef, Instance)):
            cls = owner.cls
            found = self.world.method(cls, f.attr) if cls is not None else None
            if found is not None:
                (ckey, fn) = found
                return self._invoke((ckey[0], f"{ckey[1]}.{f.attr}"), fn, e, p, key, depth, _bound_to(owner, fn))
            sub = sub_config(owner, self.world.sub_config_getters.get(f.attr)) \
                if isinstance(owner, Obj) and not e.args and not e.keywords else None
            if sub is not None:
                return sub
            if isinstance(owner, (ClassRef, Instance)):
                # An attribute holding something callable (``cls.factory(...)``), or unknown.
                held = self.attribute(owner, f.attr, p, key, depth)
                if isinstance(held, (ClassRef, FuncRef)):
                    return self._call_value(held, e, p, key, depth, text)
            pure = f.attr in self.world.pure_methods and not e.args and not e.keywords
            return self._opaque_call(e, p, key, depth, [owner] if isinstance(owner, (Obj, Instance)) and not pure else [],
                                     text)
        if isinstance(owner, ModuleRef):
            return self._call_value(self._global(owner.path, f.attr), e, p, key, depth, text)
        if isinstance(owner, (list, dict, tuple, frozenset, str, int, float, bool)) or owner is None:
            args = [self.eval(a, p, key, depth) for a in e.args]
            kwargs = {kw.name: self.eval(kw.value, p, key, depth) for kw in e.keywords if kw.name is not None}
            if len(kwargs) == len(e.keywords):
                done = call_method(owner, f.attr, args, kwargs)
                if done is not NOT_BUILTIN:
                    return done  # type: ignore[return-value]
            # A method of a builtin type the evaluator does not model: it may change its
            # receiver (a list or dict) and, for all we know, its arguments.
            havoc(p, [owner, *args, *kwargs.values()], f"{text} not evaluated")
            if isinstance(owner, frozenset) and _is_chain(f.value):
                # A set is modelled as a frozenset: a method that may change it makes
                # the name or field holding it unknown (another alias is not found).
                self._forget(f.value, p, key, depth, text)
            return Unknown(text)
        return self._opaque_call(e, p, key, depth, [owner], text)

    def _forget(self, target: PExpr, p: Path, key: tuple[str, str], depth: int, text: str) -> None:
        if isinstance(target, PName):
            p.env[target.id] = Unknown(f"{target.id} ({text} not evaluated)")
        elif isinstance(target, PAttr):
            owner = self.eval(target.value, p, key, depth)
            if isinstance(owner, Obj):
                owner.fields[target.attr] = Unknown(f"{_text(target)} ({text} not evaluated)")

    def _update(self, owner: Obj, e: PCall, p: Path, key: tuple[str, str], depth: int, text: str) -> Value:
        """``config.update(d)`` / ``config.update(k=v)``: sets those fields; an update the
        evaluator cannot read may set any field."""
        d = self.eval(e.args[0], p, key, depth) if e.args else {}
        kwargs = {kw.name: self.eval(kw.value, p, key, depth) for kw in e.keywords}
        if isinstance(d, dict) and all(isinstance(k, str) for k in d) and None not in kwargs:
            for k, v in [*d.items(), *kwargs.items()]:
                owner.fields[str(k)] = v
            return None
        havoc(p, [owner], f"{text} with contents not known")
        return None

    def _opaque_call(self, e: PCall, p: Path, key: tuple[str, str], depth: int, receivers: list[Value], text: str,
                     fn: FunctionFact | None = None) -> Value:
        """A call the evaluator does not run: unknown, and everything it is handed (its
        receiver and arguments) may have been changed by it, unless the callee's facts
        show it writes none of them."""
        args = [self.eval(a, p, key, depth) for a in e.args]
        kwargs = [self.eval(kw.value, p, key, depth) for kw in e.keywords]
        self._escape(p, [*receivers, *args, *kwargs], f"{text} not evaluated", fn)
        return Unknown(text)

    def _invoke(self, fkey: tuple[str, str], fn: FunctionFact, e: PCall, p: Path, key: tuple[str, str], depth: int,
                self_value: Value | None) -> Value:
        """Evaluate a callee whose body the facts keep: every path through it, joined
        into the caller's state (a write on one of its paths only is unknown). ``self_value``:
        what its first parameter is bound to (the object of a method, the class of a
        classmethod); None: the arguments bind from the first parameter on."""
        text = e.text or _text(e)
        receivers: list[Value] = [self_value] if isinstance(self_value, (Obj, Instance, ClassRef)) else []
        if depth >= MAX_CALL_DEPTH:
            self._cut(p, "partial evaluation call depth",
                      f"{fkey[1]} called from {key[1]} ({key[0]}) beyond the call depth of {MAX_CALL_DEPTH}: not evaluated, "
                      "its result and what it may write are unknown")
            return self._opaque_call(e, p, key, depth, receivers, text)
        if not fn.body or any(kw.name is None for kw in e.keywords):
            return self._opaque_call(e, p, key, depth, receivers, text, fn)
        params = [q.name for q in fn.params]
        args: dict[str, Value] = {}
        positional = list(e.args)
        if self_value is not None and params:
            args[params[0]] = self_value
            params = params[1:]
        for name, a in zip(params, positional):
            args[name] = self.eval(a, p, key, depth)
        for kw in e.keywords:
            assert kw.name is not None
            args[kw.name] = self.eval(kw.value, p, key, depth)
        if len(positional) > len(params):
            extra = [self.eval(a, p, key, depth) for a in positional[len(params):]]
            havoc(p, extra, f"{text}: *args not modelled")
        return self._run_bound(fkey, fn, args, p, key, depth, text)

    def _run_bound(self, fkey: tuple[str, str], fn: FunctionFact, args: dict[str, Value], p: Path,
                   key: tuple[str, str], depth: int, text: str) -> Value:
        """Run ``fn`` with its parameters bound to ``args`` (the rest: their defaults) from the
        path ``p``, every path through it joined into the caller's state; what it returns."""
        if depth >= MAX_CALL_DEPTH or not fn.body:
            if depth >= MAX_CALL_DEPTH:
                self._cut(p, "partial evaluation call depth",
                          f"{fkey[1]} called from {key[1]} ({key[0]}) beyond the call depth of {MAX_CALL_DEPTH}: not "
                          "evaluated, its result and what it may write are unknown")
            self._escape(p, list(args.values()), f"{text} not evaluated", fn)
            return Unknown(text)
        saved = p.reads
        paths = self.run(fkey, fn, args, depth + 1, [p.env, *p.roots])
        reads = list(saved)
        for q in paths:
            reads.extend(q.reads)
            for d in q.decisions:
                reads.extend(d.fields)
            for c in q.cuts:
                if c not in p.cuts:
                    p.cuts.append(c)
        p.reads = reads
        paths, raising = _returning(fkey, paths, p, self.notes, text)
        if raising is not None:
            return raising
        slot = "\0returned"
        for q in paths:
            q.env[slot] = q.returned if q.raised is None else Unknown(f"{text} raises")
        if len(paths) == 1:
            return paths[0].env.pop(slot)
        deps = [d.depends_on for q in paths for d in q.decisions if d.value is None and d.depends_on]
        why = f"(depends on {deps[0] if deps else 'a branch of ' + fkey[1]})"
        joined = join(paths, why)
        frames = [p.env, *p.roots]
        for original, now in zip(frames, joined.roots):
            if original is not now:
                restore(original, now)
        result = joined.env.pop(slot)
        if isinstance(result, Unknown) and not deps:
            return result
        if isinstance(result, Unknown):
            return Unknown(deps[0] if deps else text, known_truth=result.known_truth, options=result.options,
                           not_none=result.not_none)
        return result




def _named_call(ev: ExpressionEvaluator, chain: tuple[str, ...], e: PCall, p: Path, key: tuple[str, str],
                depth: int, text: str) -> Value | object:
    """A call of a function the world names by its chain: a modelled standard-library
    function, or one the question pins (its value; what it is handed, it may change: it is
    not run). :data:`NOT_BUILTIN` for any other."""
    which = ev.world.stdlib_function(key[0], chain)
    if which is not None:
        return ev._stdlib(which, e, p, key, depth, text)
    pinned = ev.world.pinned_call(key[0], chain)
    if pinned is not None:
        ev._opaque_call(e, p, key, depth, [], text)
        return pinned
    if ev.world.object_factory(key[0], chain):
        got = ev._opaque_call(e, p, key, depth, [], text)
        return Unknown(got.reason if isinstance(got, Unknown) else text, not_none=True)
    return NOT_BUILTIN


def _unorderable(op: str, a: Value, b: Value) -> str | None:
    """The TypeError Python raises ordering two known values of builtin scalar types it cannot
    order (``None > 1``, ``"a" < 1``), as Python words it; None when it can, or when either is
    not such a value (computed on the two values themselves, never scanned code)."""
    if op not in ORDERING or not all(v is None or type(v) in (bool, int, float, str) for v in (a, b)):
        return None
    try:
        ORDERING[op](a, b)
    except TypeError as exc:
        return f"TypeError: {exc}"
    return None


def _returning(fkey: tuple[str, str], paths: list[Path], p: Path, notes: list[str],
               text: str) -> tuple[list[Path], Unknown | None]:
    """A callee's paths the caller goes on from: those that return, as Python does (that it may
    raise instead is a note and a cut on the caller's path: when in doubt, unknown); when every
    path raises, the call's value is that raise (its statement ends the caller's path raising)."""
    returning = [q for q in paths if q.raised is None]
    if not returning and paths:
        sites = {q.raised_in for q in paths}
        raised = paths[0].raised or "raise"
        return paths, Unknown(f"{text} raises", raises=raised.removeprefix("raise "),
                              raised_in=sites.pop() if len(sites) == 1 else None)
    if len(returning) < len(paths):
        raised = next(q.raised for q in paths if q.raised is not None)
        note = f"{fkey[1]}{MAY_RAISE}({raised}): what follows assumes it returns"
        for held in (p.cuts, notes):
            if note not in held:
                held.append(note)
    return returning, None


def _call_on_options(ev: "ExpressionEvaluator", owner: Unknown, e: PCall, p: Path, key: tuple[str, str], depth: int,
                     text: str) -> Value:
    """``owner.attr(...)`` on a value that is one of ``owner.options``: called on each, joined."""
    f = e.func
    assert isinstance(f, PAttr) and owner.options is not None
    got = ev._each(owner, p, lambda o, side: ev._call_on(o, f.attr, e, side, key, depth, text), text)
    if f.attr in _MUTATORS and _is_chain(f.value) \
            and all(isinstance(o, (tuple, list, dict, frozenset)) for o in owner.options):
        # Options of a container joined from paths (a list as tuples): a method that may change
        # it changes what the name holds, which the options no longer say.
        ev._forget(f.value, p, key, depth, text)
    return got


# Methods of the builtin containers that change their receiver.
_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort", "update",
                       "setdefault", "popitem", "add", "discard", "__setitem__", "__delitem__"})


def sub_config(owner: Obj, fields: tuple[str, ...] | None) -> Obj | None:
    """What a sub-config getter returns for ``owner`` (None: the evaluator cannot tell):
    the one sub-config present under ``fields``, or ``owner`` itself when none is."""
    if fields is None:
        return None
    held = [owner.get(f) for f in fields]
    if any(isinstance(v, Unknown) for v in held):
        return None
    present = [v for v in held if not isinstance(v, _Absent) and v is not None]
    if not present:
        return owner
    return present[0] if len(present) == 1 and isinstance(present[0], Obj) else None


def _is_chain(e: PExpr) -> bool:
    """A name, or attributes and subscripts of one: evaluating it runs no code."""
    while isinstance(e, (PAttr, PSubscript)):
        e = e.value
    return isinstance(e, PName)


def _has_call(e: PExpr) -> bool:
    """The expression may run code (a call or a walrus)."""
    return any(isinstance(x, (PCall, PNamed)) for x in _subexprs(e))


def _subexprs(e: PExpr) -> list[PExpr]:
    out: list[PExpr] = []
    stack: list[PExpr | None] = [e]
    while stack:
        x = stack.pop()
        if x is None:
            continue
        out.append(x)
        if isinstance(x, PAttr):
            stack.append(x.value)
        elif isinstance(x, PCall):
            stack += [x.func, *x.args, *(k.value for k in x.keywords)]
        elif isinstance(x, PCompare):
            stack += [x.left, *x.comparators]
        elif isinstance(x, PBool):
            stack += list(x.values)
        elif isinstance(x, PNot):
            stack.append(x.operand)
        elif isinstance(x, PSeq):
            stack += list(x.elts)
        elif isinstance(x, PDict):
            stack += [*x.keys, *x.values]
        elif isinstance(x, PSubscript):
            stack += [x.value, x.index]
        elif isinstance(x, PIfExp):
            stack += [x.test, x.body, x.orelse]
        elif isinstance(x, PBinOp):
            stack += [x.left, x.right]
        elif isinstance(x, PNamed):
            stack.append(x.value)
        elif isinstance(x, PFormat):
            stack += list(x.parts)
    return out
