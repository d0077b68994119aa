"""The speculative config as its class makes it from what a user gives: the literal
defaults of the fields left unset, the method as the construction's first statements
rewrite it (a family's own method name is vLLM's alias of ``mtp``), and the values its
field types reject.

A pydantic dataclass (its decorator is pydantic's ``dataclass``, or a function of a module
that imports it: vLLM's ``@config``) checks every field it is given against the field's type
before ``__post_init__`` runs: a value outside a ``Literal[...]`` alias is a
``ValidationError`` (``literal_error``). Only a field typed by such an alias (or it
``| None``) and given a literal is judged, and only when no ``field_validator`` of the class
names the field (a validator may rewrite the value first)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import msgspec

from ...facts.extract import PAttr, PName, SAssign, SOpaque, Stmt
from ...index.index import ClassKey
from ..partial_eval import Decision, Obj, Value
from .constructors import self_assignments
from .model import Setting
from .part import DispatchPart
from .outcomes import Rejection
from .syntax import _names, literal_alias_args, walk

if TYPE_CHECKING:
    from .provider import DispatchProvider


class SpecFields(DispatchPart):
    def __init__(self, provider: "DispatchProvider") -> None:
        super().__init__(provider)
        self._spec_memo: dict[ClassKey, tuple[int, dict[str, Value]]] = {}
        self._method_memo: dict[Any, tuple[int, Value, tuple[Decision, ...]]] = {}

    def type_rejections(self, setting: Setting) -> list[Rejection]:
        """The fields the user gives (the method and the options) that the speculative config's
        field types reject when it is built (pydantic, before any validation method runs)."""
        cls = self.provider.location.spec_config_class()
        if cls is None or not self._pydantic(cls):
            return []
        given: list[tuple[str, Any]] = [(self.roles["method"], setting.method), *setting.options]
        out: list[Rejection] = []
        for name, value in given:
            if not isinstance(value, (str, int, bool)):
                continue
            for c in self.index.mro(cls):
                cf = self.index.class_fact(c)
                ft = cf.field_types.get(name) if cf is not None else None
                if cf is None or ft is None:
                    continue
                aliases = [n for n in ft.names if n != "None"]
                validated = any("field_validator" in d and f"{name!r}" in d.replace('"', "'") for m in cf.methods.values()
                                for d in m.decorators)
                args = literal_alias_args(self.index, c[0], aliases[0]) if len(aliases) == 1 and not validated else None
                if args is not None and not any(type(a) is type(value) and a == value for a in args):
                    out.append(Rejection(c[0], ft.line, f"{c[1]}.{name}",
                                         f"pydantic ValidationError: {name}: Input should be {_expected(args)} "
                                         f"[type=literal_error, input_value={value!r}, input_type={type(value).__name__}]",
                                         "validation"))
                break
        return out

    def _pydantic(self, cls: ClassKey) -> bool:
        """``cls`` is a pydantic dataclass: a decorator that is pydantic's ``dataclass``, or a
        function whose module imports it."""
        cf = self.index.class_fact(cls)
        for deco in (cf.decorators if cf is not None else ()):
            head = tuple(deco.partition("(")[0].strip().split("."))
            if _names(self.index, cls[0], head, "pydantic.dataclasses", "dataclass"):
                return True
            for sym in self.index.resolve(cls[0], head[-1]) if len(head) == 1 else ():
                if any(("pydantic.dataclasses", "dataclass") in v for v in self.index.imports_of(sym.path).values()):
                    return True
        return False

    def left_unset(self, spec: Obj, fields: set[str]) -> set[str]:
        """Of ``fields`` (unset: None in ``spec``), those the first validation method leaves None on
        every path, run over the config as constructed (every literal field default of the class
        for a field not given); a run that raises, is cut or leaves one undecided keeps it out."""
        cls = spec.cls
        found = next((m for m in (self.index.method(cls, n) for n in self.config.validation_methods) if m), None) \
            if cls is not None else None
        if found is None or not fields:
            return set()
        owner, fn = found
        built = copy.deepcopy(spec)
        for c in self.index.mro(owner):
            cf = self.index.class_fact(c)
            for name, e in (cf.field_defaults.items() if cf is not None else ()):
                if e.has_literal and name not in built.fields:
                    built.fields[name] = e.literal
        ev = self.evaluator()
        p = ev.run_joined((owner[0], f"{owner[1]}.{fn.name}"), fn, {"self": built})
        if p.raised or ev.notes:
            return set()
        return {f for f in fields if f in built.fields and built.fields[f] is None}

    def validated_method(self, setting: Setting, spec: Obj) -> tuple[Value, list[Decision]]:
        """The method as the speculative config's construction leaves it, and the decisions that
        rewrote it (``if self.method in get_args(MTPModelTypes) and self.method != "mtp":
        self.method = "mtp"``: a family's own name is vLLM's alias of ``mtp``).

        The first validation method's top-level statements run in order, over the given
        config, through each one that may write the method; the value stands as long as the
        run decides it (a statement that may write it under a branch the run cannot decide,
        or past a cut, ends the prefix: the value before it is kept, as a method vLLM goes on
        to detect from the draft checkpoint's name is not modelled either)."""
        role = self.roles["method"]
        given = setting.method
        cls = spec.cls
        if cls is None or not isinstance(given, str):
            return given, []
        try:
            memo_key: Any = (cls, given, setting.k, setting.options)
            hash(memo_key)
        except TypeError:
            memo_key = None
        held = len(self.index.facts)
        hit = self._method_memo.get(memo_key) if memo_key is not None else None
        if hit is not None and hit[0] == held:
            return hit[1], list(hit[2])
        out = self._validated_method(cls, spec, role, given)
        if memo_key is not None:
            self._method_memo[memo_key] = (held, out[0], tuple(out[1]))
        return out

    def _validated_method(self, cls: ClassKey, spec: Obj, role: str, given: str) -> tuple[Value, list[Decision]]:
        value: Value = given
        found = next((m for m in (self.index.method(cls, n) for n in self.config.validation_methods) if m), None)
        if found is None:
            return value, []
        owner, fn = found
        key = (owner[0], f"{owner[1]}.{fn.name}")
        decisions: list[Decision] = []
        ev = self.evaluator()
        for i, stmt in enumerate(fn.body):
            if not _writes_self(stmt, role):
                continue
            ran = copy.deepcopy(spec)
            ran.fields[role] = given
            p = ev.run_joined(key, msgspec.structs.replace(fn, body=fn.body[: i + 1]), {"self": ran})
            now = ran.fields.get(role)
            if p.raised or ev.notes or not isinstance(now, str):
                break
            if now != value:
                decisions = [d for d in p.decisions if d.line >= stmt.line and d.value is not None]
                value = now
        return value, decisions

    def defaults(self, cls: ClassKey | None) -> dict[str, Value]:
        """The speculative config's fields a user leaves unset, as its class declares them: the
        literal default of an annotated field (``draft_sample_method: ... = "greedy"``) that
        no method of the class's hierarchy assigns (its validation never rewrites it)."""
        if cls is None:
            return {}
        held = len(self.index.facts)
        hit = self._spec_memo.get(cls)
        if hit is not None and hit[0] == held:  # (asked by every world: once per class while the files stay)
            return hit[1]
        written = self_assignments(self.index, cls)
        out: dict[str, Value] = {}
        for c in self.index.mro(cls):
            cf = self.index.class_fact(c)
            for name, e in (cf.field_defaults.items() if cf is not None else ()):
                if name not in written and e.has_literal and name not in out:
                    out[name] = e.literal
        self._spec_memo[cls] = (held, out)
        return out


def _writes_self(stmt: Stmt, attr: str) -> bool:
    """``stmt`` (or a statement under it) may assign ``self.<attr>``."""
    for sub in walk([stmt]):
        targets = sub.targets if isinstance(sub, SAssign) else sub.writes if isinstance(sub, SOpaque) else ()
        if any(isinstance(t, PAttr) and t.attr == attr and isinstance(t.value, PName) and t.value.id == "self"
               for t in targets):
            return True
    return False


def _expected(args: tuple[Value, ...]) -> str:
    """The values as pydantic lists them: ``'a', 'b' or 'c'``."""
    shown = [repr(a) for a in args]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
