"""The values of the partial evaluator: what an expression evaluates to (a literal, a
configuration object, an instance or reference of a class of the scanned tree, or
:class:`Unknown`), and the record of one way through the code (:class:`Path`, its
:class:`Decision` s). Pure data and the value-level helpers (truthiness, equality,
comparison, display); no evaluation.
"""

from __future__ import annotations

import copy
import itertools
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Union

from ...facts.extract import (
    PAttr,
    PBinOp,
    PBool,
    PCall,
    PCompare,
    PConst,
    PExpr,
    PFormat,
    PName,
    PNot,
    POpaque,
    PSeq,
    PSubscript,
)


@dataclass(frozen=True)
class Unknown:
    """A value the evaluator cannot know; ``reason`` says what it depends on."""

    reason: str
    maybe_absent: bool = False  # a field set on some paths only: ``hasattr`` is unknown too
    known_truth: bool | None = None  # its truthiness, when that is known (``x and False``)
    # Bounds, when the value is a number: ``min(1, x)`` is at most 1, ``max(2, x)`` at least 2.
    # (A NaN among the arguments breaks ordering: see :func:`_compare_bounded`.)
    upper: int | float | None = None
    lower: int | float | None = None
    # The expression raises (its operands known: ``k % 0``): the exception, as Python words it.
    # Every other use of the value is unknown; a test or guard that evaluates it raises.
    raises: str | None = None
    # The value is one of these (paths joined where they held different values: each a
    # literal, a class, a module, a function or an object of the tree, or a tuple of such);
    # which one depends on ``reason``. None: nothing is known of it.
    options: tuple[Any, ...] | None = None
    # Where the raise ``raises`` names is (file, function, line), when a callee raised it.
    raised_in: tuple[str, str, int] | None = None
    # It is surely not None (an object a configured library factory returns, ``torch.empty(...)``,
    # or paths joined that each held one): ``is None`` is decided, nothing else.
    not_none: bool = False

    def __repr__(self) -> str:
        return f"Unknown({self.reason!r})" if self.options is None else f"Unknown({self.reason!r}, options={self.options!r})"

    # A fork (state.fork, copy.deepcopy) copies every value a path holds. These copy
    # methods make the copies the generic protocol made (a new object with equal fields,
    # mutable parts copied through the memo), without its reduce/reconstruct round trip:
    # the fork of a runner's state dominated planning ``layers --all``.
    def __deepcopy__(self, memo: dict[int, Any]) -> "Unknown":
        return self  # immutable: its fields are literals and tuples of immutable values


_UIDS = itertools.count(1)


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
    # Fields whose value stands for what code assigns them (the draft's model config the tool
    # derived, which the speculative config's construction builds): an assignment keeps it.
    pinned: frozenset[str] = frozenset()
    # A config read from a config.json into a config class of the tree whose every base is known:
    # (the class's name, every name an object of it may have beyond ``fields``). A plain read of
    # a name neither holds raises AttributeError.
    lacks: tuple[str, frozenset[str]] | None = None
    # The same object on every path: a fork copies it with its uid, so the copies on two
    # paths can be told to be one object when the paths are joined.
    uid: int = field(default_factory=lambda: next(_UIDS))

    def __deepcopy__(self, memo: dict[int, Any]) -> "Obj":
        new = Obj.__new__(Obj)
        memo[id(self)] = new  # before the fields: they may lead back here
        new.label = self.label
        new.fields = {k: v if type(v) in _IMMUTABLE else copy.deepcopy(v, memo) for k, v in self.fields.items()}
        new.closed = self.closed
        new.cls = self.cls
        new.roles = copy.deepcopy(self.roles, memo)
        new.uid = self.uid
        new.pinned = self.pinned
        new.lacks = self.lacks
        return new

    def missing(self, name: str) -> str | None:
        """The AttributeError (as CPython words it) a plain read of ``name`` raises, for a
        name the object surely lacks (:attr:`lacks`); None: not known to raise."""
        if self.lacks is None or not self.closed or name in self.fields or name in self.roles \
                or name.startswith("_") or name in self.lacks[1]:
            return None
        return f"AttributeError: '{self.lacks[0]}' object has no attribute '{name}'"

    def get(self, name: str) -> "Value | _Absent":
        if name in self.fields:
            return self.fields[name]
        if name in self.roles:
            return self.roles[name]
        return ABSENT if self.closed else Unknown(f"{self.label}.{name}")


#: Value types a copy may share (immutable); anything else is copied (the copy per path of a fork).
_IMMUTABLE: frozenset[type] = frozenset()


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()


@dataclass(frozen=True)
class Instance:
    """An object constructed from a class of the scanned tree: ``Cls(...)``."""

    cls: tuple[str, str]
    line: int

    def __deepcopy__(self, memo: dict[int, Any]) -> "Instance":
        return self  # immutable


@dataclass(frozen=True)
class EnumMember:
    """A member of a plain ``enum.Enum`` class of the scanned tree, read through its class
    (``Mode.FULL``). ``value`` is the member's literal value, or :class:`Unknown` when it is
    not a literal. Two members of one class are one member when their names agree, or when
    both values are known and equal (an alias); anything else about them is unknown."""

    cls: tuple[str, str]
    name: str
    value: "Value"

    def __deepcopy__(self, memo: dict[int, Any]) -> "EnumMember":
        return self  # immutable: a literal or an Unknown

    def same_member(self, other: "EnumMember") -> bool | None:
        if self.cls != other.cls:
            return None  # another class (a mixin's ``__eq__`` may decide): not modelled
        if self.name == other.name:
            return True
        if isinstance(self.value, Unknown) or isinstance(other.value, Unknown):
            return None
        return type(self.value) is type(other.value) and self.value == other.value


@dataclass(frozen=True)
class FuncRef:
    key: tuple[str, str]  # (path, qualname) of a function or method of the tree
    self_obj: "Obj | None" = None

    def __deepcopy__(self, memo: dict[int, Any]) -> "FuncRef":
        return FuncRef(self.key, copy.deepcopy(self.self_obj, memo))


@dataclass(frozen=True)
class ClassRef:
    cls: tuple[str, str]

    def __deepcopy__(self, memo: dict[int, Any]) -> "ClassRef":
        return self  # immutable


@dataclass(frozen=True)
class ModuleRef:
    """A module of the scanned tree as a value (``importlib.import_module("a.b")``): its
    attributes are the names the module defines or imports. ``path`` is its file."""

    name: str
    path: str

    def __deepcopy__(self, memo: dict[int, Any]) -> "ModuleRef":
        return self


_IMMUTABLE = frozenset({type(None), bool, int, float, str, Unknown, Instance, ClassRef, ModuleRef, EnumMember})

Value = Union[
    None, bool, int, float, str, "tuple[Any, ...]", "list[Any]", "frozenset[Any]", "dict[Any, Any]",
    Obj, Instance, EnumMember, FuncRef, ClassRef, ModuleRef, Unknown,
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
    # What the evaluator cut short on this path (paths merged beyond the cap, calls beyond
    # the depth limit, callees it could not run); whatever they decide is unknown.
    cuts: list[str] = field(default_factory=list)
    # The callers' frames (their environments): a fork copies them with the path, so a
    # callee's writes on one path never reach the caller's objects on another.
    roots: list[Any] = field(default_factory=list)
    raised_at: int | None = None  # the line of the statement that raised (``raise``, or a test that raises)
    raised_in: tuple[str, str, int] | None = None  # the raise itself (file, function, line), a callee's included
    loop_exit: str | None = None  # "break"/"continue": done with this run of a loop body, not with the function


def structural_key(v: Value) -> Hashable | None:
    """A hashable key equal for two values the evaluator cannot tell apart: the same
    labels, fields, classes and literals, objects shared the same way (which object is
    which is kept by position, never by ``uid``). None where a part has no such key."""
    try:
        key = _structural(v, {})
        hash(key)
    except (TypeError, _NoKey):
        return None
    return key


class _NoKey(Exception):
    pass


def _structural(v: Any, seen: dict[int, int]) -> Hashable:
    if isinstance(v, Obj):
        if id(v) in seen:
            return ("shared", seen[id(v)])
        seen[id(v)] = len(seen)
        return ("obj", v.label, v.closed, v.cls, v.pinned, v.lacks,
                tuple((k, _structural(x, seen)) for k, x in v.fields.items()),
                tuple((k, _structural(x, seen)) for k, x in v.roles.items()))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_structural(x, seen) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple((_structural(k, seen), _structural(x, seen)) for k, x in v.items()))
    if isinstance(v, FuncRef):
        return ("funcref", v.key, _structural(v.self_obj, seen))
    if v is None or isinstance(v, (bool, int, float, str, frozenset, Unknown, Instance, EnumMember, ClassRef, ModuleRef, _Absent)):
        return (type(v).__name__, v)
    raise _NoKey(type(v).__name__)


#: How many values an :attr:`Unknown.options` holds at most (more: nothing is known).
MAX_OPTIONS = 8


def is_atom(v: Any) -> bool:
    """A value an :attr:`Unknown.options` may hold: immutable, and known whole."""
    if v is None or isinstance(v, (bool, int, float, str, ClassRef, ModuleRef, Instance, EnumMember)):
        return True
    if isinstance(v, FuncRef):
        return v.self_obj is None
    return isinstance(v, tuple) and all(is_atom(x) for x in v)


def never_none(v: Any) -> bool:
    """``v`` is surely not None: a known value other than None, an :class:`Unknown` marked
    :attr:`~Unknown.not_none`, or one whose options hold no None."""
    if isinstance(v, Unknown):
        return v.not_none or v.options is not None and bool(v.options) and all(o is not None for o in v.options)
    return v is not None


def one_of(values: list[Any], why: str) -> "Value":
    """The value of joined paths that held ``values``: the one value when they agree, an
    :class:`Unknown` holding the options when each is an atom (lists as tuples; an
    :class:`Unknown` with options contributes its own), else a plain :class:`Unknown` (surely
    not None when none of ``values`` may be None)."""
    out: list[Any] = []
    for v in values:
        for x in (v.options or ()) if isinstance(v, Unknown) else (v,):
            x = tuple(x) if type(x) is list else x
            if not is_atom(x):
                return Unknown(why, not_none=all(never_none(y) for y in values))
            if not any(_same(x, o) for o in out):
                out.append(x)
        if isinstance(v, Unknown) and not v.options:
            return Unknown(why, not_none=all(never_none(y) for y in values))
    if len(out) == 1:
        return out[0]  # type: ignore[no-any-return]
    if len(out) > MAX_OPTIONS:
        return Unknown(why)
    truths = {truth(x) for x in out}
    return Unknown(why, known_truth=truths.pop() if len(truths) == 1 else None, options=tuple(out))


def truth(v: Value) -> bool | None:
    """Python truthiness, three-valued."""
    if isinstance(v, Unknown):
        return v.known_truth
    if isinstance(v, EnumMember):
        return None  # truthy unless its class defines ``__bool__``: not modelled
    if isinstance(v, (Obj, Instance, FuncRef, ClassRef, ModuleRef)):
        return True
    return bool(v)


def describe(v: Value) -> str:
    if isinstance(v, Unknown):
        return f"unknown ({v.reason})"
    if isinstance(v, Obj):
        return v.label
    if isinstance(v, Instance):
        return f"{v.cls[1]}(...)"
    if isinstance(v, EnumMember):
        return f"{v.cls[1]}.{v.name}"
    if isinstance(v, ClassRef):
        return v.cls[1]
    if isinstance(v, ModuleRef):
        return f"module {v.name}"
    return repr(v)



def _same(a: Value, b: Value) -> bool:
    if isinstance(a, Unknown) or isinstance(b, Unknown):
        return False
    return a is b if isinstance(a, Obj) else bool(type(a) is type(b) and a == b)


def _compare_values(op: str, a: Value, b: Value) -> bool | None:
    if isinstance(a, EnumMember) or isinstance(b, EnumMember):
        # Members are singletons: ``==`` and ``is`` agree for two members of one class.
        same = a.same_member(b) if isinstance(a, EnumMember) and isinstance(b, EnumMember) else None
        if same is None or op not in ("==", "!=", "is", "is not"):
            return None
        return same if op in ("==", "is") else not same
    if op in ("is", "is not"):
        if isinstance(a, Unknown) and b is None and (a.known_truth or never_none(a)) \
                or isinstance(b, Unknown) and a is None and (b.known_truth or never_none(b)):
            return op == "is not"  # a value known to be truthy, or to be an object, is not None
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
    if isinstance(a, Unknown) or isinstance(b, Unknown):
        return _compare_bounded(op, a, b)
    if isinstance(a, (Obj, Instance)) or isinstance(b, (Obj, Instance)):
        return None  # its class's ``__eq__`` decides: not modelled
    try:
        if op == "==":
            return bool(a == b)
        if op == "!=":
            return bool(a != b)
        if a is None or b is None:
            return None
        return ORDERING[op](a, b)
    except TypeError:
        return None


#: Python's ordering operators, by their source text.
ORDERING: dict[str, Callable[[Any, Any], bool]] = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


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
    if isinstance(e, (POpaque, PFormat)):
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


_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "==": "==", "!=": "!="}


def _compare_bounded(op: str, a: Value, b: Value) -> bool | None:
    """``x OP c`` for an unknown number ``x`` with a known bound and a known number ``c``.

    Only answers that hold when ``x`` is NaN too are given (``min(nan, 1)`` is NaN, and
    every ordering with NaN is False, ``!=`` True): so a bound decides an ordering that is
    False, or ``!=`` that is True, never an ordering that is True."""
    if isinstance(b, Unknown) and not isinstance(a, Unknown):
        return _compare_bounded(_FLIP[op], b, a) if op in _FLIP else None
    if not isinstance(a, Unknown) or not isinstance(b, (int, float)) or isinstance(b, bool):
        return None
    c: int | float = b
    hi, lo = a.upper, a.lower
    if hi is not None:
        if op == ">" and hi <= c or op in (">=", "==") and hi < c:
            return False
        if op == "!=" and hi < c:
            return True
    if lo is not None:
        if op == "<" and lo >= c or op in ("<=", "==") and lo > c:
            return False
        if op == "!=" and lo > c:
            return True
    return None
