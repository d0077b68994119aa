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

import ast
import copy
import functools
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from ...facts.extract import ExprFact, FunctionFact, PAttr, PCall, PName, SAssign, SIf, SOpaque, Stmt
from ...index.index import ClassKey, SymbolKind
from ..partial_eval import MAX_CALL_DEPTH, Decision, Obj, Path, Unknown, Value
from ..partial_eval.state import fork, join
from ..partial_eval.expressions import MAY_RAISE, only_partial_raises
from ..partial_eval.values import structural_key
from .constructors import self_assignments
from .model import Setting
from .part import DispatchPart
from .outcomes import ANY_FIELD, Rejection, self_writes
from .syntax import _names, expr_nodes, literal_alias_args, stmt_exprs, walk

if TYPE_CHECKING:
    from .provider import DispatchProvider


class SpecFields(DispatchPart):
    def __init__(self, provider: "DispatchProvider") -> None:
        super().__init__(provider)
        self._spec_memo: dict[ClassKey, tuple[int, dict[str, Value]]] = {}
        self._method_memo: dict[Any, tuple[int, Construction, tuple[str, ...]]] = {}

    def type_rejections(self, setting: Setting) -> list[Rejection]:
        """The fields the user gives (the method and the options) that the speculative config's
        field types reject when it is built (pydantic, before any validation method runs)."""
        cls = self.provider.location.spec_config_class()
        if cls is None or not self._pydantic(cls):
            return []
        mro = list(self.index.mro(cls))
        facts = [(c, cf) for c in mro if (cf := self.index.class_fact(c)) is not None]
        decorators = [d.replace('"', "'").replace(" ", "") for _, cf in facts for m in cf.methods.values() for d in m.decorators]
        if any(d.startswith(("model_validator(mode='before'", "model_validator(mode='wrap'")) for d in decorators):
            return []  # a validator that sees (and may rewrite) the input before the field types
        given: list[tuple[str, Any]] = [(self.roles["method"], setting.method), *setting.options]
        out: list[Rejection] = []
        for name, value in given:
            if not isinstance(value, (str, int, bool)) or _validated(name, decorators):
                continue
            # The first class that annotates the field decides its type (a subclass re-annotating it
            # in another form is no Literal the tool reads).
            c, cf = next(((c, cf) for c, cf in facts if name in cf.field_types), (None, None))
            ft = cf.field_types[name] if cf is not None else None
            aliases = [n for n in ft.names if n != "None"] if ft is not None else []
            args = literal_alias_args(self.index, c[0], aliases[0]) if c is not None and len(aliases) == 1 else None
            # pydantic-core also accepts a value equal to a member of another type (True for 1),
            # depending on its version: only a value equal to none is rejected.
            if args and not any(a == value for a in args):
                out.append(Rejection(c[0], ft.line, f"{c[1]}.{name}",  # type: ignore[index,union-attr]
                                     f"pydantic ValidationError: {name}: Input should be {_expected(args)} "
                                     f"[type=literal_error, input_value={value!r}, input_type={type(value).__name__}]",
                                     "validation"))
        return out

    def _pydantic(self, cls: ClassKey) -> bool:
        """``cls`` is a pydantic dataclass: a decorator that is pydantic's ``dataclass``, or a
        function of a module that imports it which calls it, or calls a function of its own (the
        nested ``def decorator(cls): return dataclass(cls, ...)`` of vLLM's ``@config``)."""
        cf = self.index.class_fact(cls)
        for deco in (cf.decorators if cf is not None else ()):
            head = tuple(deco.partition("(")[0].strip().split("."))
            if _names(self.index, cls[0], head, "pydantic.dataclasses", "dataclass"):
                return True
            for sym in self.index.resolve(cls[0], head[-1]) if len(head) == 1 else ():
                fn = self.index.function((sym.path, sym.name))
                bound = [local for local, v in self.index.imports_of(sym.path).items()
                         if ("pydantic.dataclasses", "dataclass") in v]
                if fn is None or not bound:
                    continue
                for call in fn.calls:
                    head_name = call.func[0] if call.func else ""
                    if call.func is not None and len(call.func) == 1 and (head_name in bound or (
                            head_name not in fn.param_names and head_name not in fn.assigns
                            and not self.index.resolve(sym.path, head_name))):
                        return True
        return False

    def constructed(self, spec: Obj, given_method: Value) -> Obj:
        """A copy of ``spec`` as the class's construction starts from it: the method as given, and
        every literal field default of the class (its MRO) for a field not given. The draft's
        model config it holds is pinned: the construction builds it (``self.draft_model_config =
        ModelConfig(...)``), and it is the draft config this configuration derives."""
        built = copy.deepcopy(spec)
        built.fields[self.roles["method"]] = given_method
        if isinstance(built.fields.get(self.roles["draft"]), Obj):
            built.pinned = frozenset({self.roles["draft"]})
        for c in self.index.mro(spec.cls) if spec.cls is not None else ():
            cf = self.index.class_fact(c)
            for name, e in (cf.field_defaults.items() if cf is not None else ()):
                known, value = field_default(e)
                if known and name not in built.fields:
                    built.fields[name] = value
        return built

    def left_unset(self, spec: Obj, fields: set[str], upto: str, given_method: Value,
                   hit: Callable[[str], None] | None = None) -> set[str]:
        """Of ``fields`` (unset: None in ``spec``), those the validation methods run before ``upto``
        leave None on every path, run in order over the config as constructed: the method as
        given, and every literal field default of the class for a field not given. A method
        whose statements the facts do not keep, a run that raises or is cut (but for callees
        that raise on some paths: the paths that return are run whole), keeps them out."""
        cls = spec.cls
        if cls is None or not fields:
            return set()
        built = self.constructed(spec, given_method)
        ev = self.evaluator(hit)  # (the caller's count of cuts, replayed with its memo)
        for name in self.config.validation_methods:
            if name == upto:
                break
            found = self.index.method(cls, name)
            if found is None:
                continue
            owner, fn = found
            if not fn.body:
                return set()
            p = ev.run_joined((owner[0], f"{owner[1]}.{name}"), fn, {"self": built})
            # (a callee that raises on some paths: the paths it returns on are run whole)
            if p.raised or not only_partial_raises(ev.notes):
                return set()
        return {f for f in fields if f in built.fields and built.fields[f] is None}

    def field_class(self, cls: ClassKey | None, name: str) -> ClassKey | None:
        """The class of the tree a field of the speculative config's class is annotated with
        (``target_model_config: SkipValidation[ModelConfig] = None``: ``ModelConfig``), by the
        first class of its MRO that annotates it; None when that is no one class of the tree
        (besides None)."""
        for c in self.index.mro(cls) if cls is not None else ():
            cf = self.index.class_fact(c)
            if cf is None or name not in cf.field_types:
                continue
            names = [n for n in cf.field_types[name].names if n != "None"]
            found = [s for s in self.index.resolve(c[0], names[0]) if s.kind is SymbolKind.CLASS] if len(names) == 1 else []
            return (found[0].path, found[0].name) if len(found) == 1 else None
        return None

    def init_fields(self, cls: ClassKey | None) -> frozenset[str]:
        """The fields the speculative config's class (its MRO) declares by annotation."""
        out: set[str] = set()
        for c in self.index.mro(cls) if cls is not None else ():
            cf = self.index.class_fact(c)
            if cf is not None:
                out |= set(cf.field_defaults) | set(cf.field_types)
        return frozenset(out)

    def internal_fields(self, cls: ClassKey | None) -> frozenset[str]:
        """The fields of the speculative config's class a user cannot give: declared with
        ``field(..., init=False)``."""
        out: set[str] = set()
        for c in self.index.mro(cls) if cls is not None else ():
            cf = self.index.class_fact(c)
            for name, e in (cf.field_defaults.items() if cf is not None else ()):
                if e.called in _FIELD_FUNCTIONS and "init=False" in e.text.replace(" ", ""):
                    out.add(name)
        return frozenset(out)

    def preload(self, cls: ClassKey | None) -> None:
        """Load (while the index loads) the modules the construction run may reach: the names its
        validation methods and the functions they call read, followed as deep as the run follows
        calls (config-independent, so a later question loads nothing new: the recorded loading
        phase serves it, :mod:`auditor.engine.prepared`)."""
        if cls is None or self.index.frozen:
            return
        todo: list[tuple[tuple[str, str], ClassKey | None, int]] = []
        for name in self.config.validation_methods:
            found = self.index.method(cls, name)
            if found is not None:
                todo.append(((found[0][0], f"{found[0][1]}.{name}"), cls, 0))
        seen: set[tuple[str, str]] = set()
        while todo:
            fkey, owner, depth = todo.pop()
            if fkey in seen or depth > MAX_CALL_DEPTH:
                continue
            seen.add(fkey)
            fn = self.provider.bodies.function(fkey)
            if fn is None:
                continue
            for e in (x for st in _statements(fn.body) for root in stmt_exprs(st) for x in expr_nodes(root)):
                if isinstance(e, PName) and e.id not in fn.local_defs and e.id not in fn.param_names:
                    for sym in self.index.resolve(fkey[0], e.id):
                        if sym.kind is SymbolKind.FUNCTION:
                            todo.append(((sym.path, sym.name), None, depth + 1))
                elif isinstance(e, PAttr) and isinstance(e.value, PName) and e.value.id in ("self", "cls") and owner:
                    hit = self.index.method(owner, e.attr)
                    if hit is not None:
                        todo.append(((hit[0][0], f"{hit[0][1]}.{e.attr}"), owner, depth + 1))

    def construction(self, spec: Obj, given: Value, rejection: bool = True,
                     on_limit: Callable[[str], None] | None = None) -> "Construction":
        """The first validation method run once, statement by statement, over the config as
        constructed from ``spec`` (the method as given, the class's literal defaults; the draft's
        model config it builds is the one derived), and what it says:

        * the method as it leaves it, while the run decides it (a statement that may write it,
          by name or through a call handed ``self``, under a branch the run cannot decide, or
          past a cut, ends that: the value before it is kept, as a method vLLM goes on to detect
          from the draft checkpoint's name is not modelled either), with the decisions that
          rewrote it;
        * the fields those first statements decide (:meth:`_prefix_fields`);
        * its raise, when every path raises and no cut is on the way but callees that raise on
          some paths (those fail the construction earlier: rejected all the same); with
          ``rejection`` False, none: the run stops once the method is no longer decided;
        * K, when the config leaves it None and the run sets it (:meth:`_derives_k`; both through :class:`_FieldTrack`).

        Memoised on the config as constructed (the whole of it: what the run reads); the cuts a
        run made count again, as a run would count them (against the scan's limits, or
        ``on_limit``)."""
        cls = spec.cls
        if cls is None or not (given is None or isinstance(given, str)):
            return Construction(given, (), {}, None)
        built = self.constructed(spec, given)
        shape = structural_key(built)
        memo_key: Any = (cls, given, shape, rejection) if shape is not None else None
        held = len(self.index.facts)
        hit = self._method_memo.get(memo_key) if memo_key is not None else None
        if hit is not None and (hit[0] == held or self.index.frozen):
            for name in hit[2]:
                (on_limit or self.limits.hit)(name)
            return hit[1]
        cuts: list[str] = []

        def count(name: str) -> None:
            cuts.append(name)
            (on_limit or self.limits.hit)(name)

        out = self._construct(cls, built, spec, given, count, rejection)
        if memo_key is not None:
            # What the run needed is loaded by now (lookups load while the index loads): a later
            # ask, after the freeze too, has the same answer.
            self._method_memo[memo_key] = (len(self.index.facts), out, tuple(cuts))
        return out

    def _construct(self, cls: ClassKey, built: Obj, spec: Obj, given: str | None,
                   hit: Callable[[str], None], rejection: bool = True) -> "Construction":
        role = self.roles["method"]
        found = next((m for m in (self.index.method(cls, n) for n in self.config.validation_methods) if m), None)
        if found is None or not found[1].body:
            return Construction(given, (), {}, None)
        owner, fn = found
        key = (owner[0], f"{owner[1]}.{fn.name}")
        ev = self.evaluator(hit)
        paths = [Path({**{q.name: Unknown(q.name) for q in fn.params}, fn.params[0].name: built} if fn.params else {})]
        fields: dict[str, Value] = {}
        param = fn.params[0].name if fn.params else "self"
        method = _FieldTrack(role, given, str, reads_only=False)
        k = _FieldTrack(self.roles["k"], None, int, reads_only=True) if self._derives_k(cls, fn, built) else None
        for i, stmt in enumerate(fn.body):
            paths = ev._block(key, (stmt,), paths, 0)
            # (a path that raises rejects on its own; a callee that raises on some paths leaves
            # the paths it returns on run whole; the method may still be None, undetected yet)
            live = [q for q in paths if q.raised is None]
            if k is not None and k.deciding and _writes_self(stmt, k.role):
                k.after(stmt, live, param, ev.notes, key)
            if not method.deciding and not (rejection and _may_reject(paths)) and not (k is not None and k.deciding):
                break  # no raise can reject any more, the method and K are no longer decided
            if method.deciding and _writes_self(stmt, role) and method.after(stmt, live, param, ev.notes, key):
                ran = join([fork(q) for q in live], "(the construction's paths)").env[param]
                if isinstance(ran, Obj):
                    fields = self._prefix_fields(fn.body[: i + 1], ran, spec, role)
        derived = k.value if k is not None and k.deciding and any(q.raised is None for q in paths) else None
        return Construction(method.value, method.decisions, fields, raise_of(key, paths) if rejection else None,
                            derived if isinstance(derived, int) else None,
                            k.decisions if isinstance(derived, int) and k is not None else ())

    def _derives_k(self, cls: ClassKey, first: FunctionFact, built: Obj) -> bool:
        """Whether the construction run is to derive K: the config leaves it None, and no
        validation method after the first may set it (by name, or handed ``self``): what the
        first method leaves is what vLLM plans with."""
        role = self.roles["k"]
        if role not in built.fields or built.fields[role] is not None:
            return False
        for name in self.config.validation_methods:
            found = self.index.method(cls, name)
            if found is None or found[1] is first:
                continue
            if {role, ANY_FIELD} & self_writes(self.index, cls, found[1]):
                return False
        return True

    def _prefix_fields(self, prefix: tuple[Stmt, ...], ran: Obj, spec: Obj, role: str) -> dict[str, Value]:
        """The fields the statements ``prefix`` (run, leaving ``ran``) assign on ``self``, other
        than the method and those given, that end the run holding a literal value and that no
        other method of the class's hierarchy assigns (as :meth:`defaults` reads a field's
        default: code outside the class that sets the field is not looked for)."""
        count: dict[str, int] = {}
        for sub in walk(prefix):
            for t in sub.targets if isinstance(sub, SAssign) else ():
                if isinstance(t, PAttr) and isinstance(t.value, PName) and t.value.id == "self":
                    count[t.attr] = count.get(t.attr, 0) + 1
        written = self_assignments(self.index, spec.cls) if spec.cls is not None else {}
        out: dict[str, Value] = {}
        for name in sorted(set(count) - {role} - set(spec.fields)):
            value = ran.fields.get(name)
            if name in ran.fields and (value is None or isinstance(value, (bool, int, float, str))) \
                    and written.get(name, 0) == count[name]:
                out[name] = value
        return out

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
                known, value = field_default(e)
                if name not in written and known and name not in out:
                    out[name] = value
        self._spec_memo[cls] = (held, out)
        return out


#: A dataclass field's default given through the field function (``field(default=None)``).
_FIELD_FUNCTIONS = frozenset({("field",), ("dataclasses", "field"), ("Field",), ("pydantic", "Field")})


def field_default(e: ExprFact) -> tuple[bool, Value]:
    """The literal default of an annotated field: ``f: T = 1``, or ``f: T = field(default=1,
    ...)`` (``default`` a plain literal; a ``default_factory`` or a call the text cannot show
    whole is no literal default). (False, None) when there is none."""
    if e.has_literal:
        return True, e.literal
    if e.called not in _FIELD_FUNCTIONS:
        return False, None
    return _field_call_default(e.text)


@functools.lru_cache(maxsize=1024)
def _field_call_default(text: str) -> tuple[bool, Value]:
    """``field(default=<literal>, ...)``'s default, read from its text (parsed, never run)."""
    try:
        call = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return False, None
    if not isinstance(call, ast.Call):
        return False, None
    for kw in call.keywords:
        if kw.arg == "default" and isinstance(kw.value, ast.Constant) and (
                kw.value.value is None or isinstance(kw.value.value, (bool, int, float, str))):
            return True, kw.value.value
    return False, None


class Construction(NamedTuple):
    """What the speculative config's construction run says (:meth:`SpecFields.construction`)."""

    method: Value
    decisions: tuple[Decision, ...]
    fields: dict[str, Value]
    rejection: Rejection | None
    # K (``num_speculative_tokens``) as the run leaves it when the config leaves it None: an
    # int every path that does not raise agrees on (None: not derived), and the
    # decisions of the run that read it.
    k: int | None = None
    k_decisions: tuple[Decision, ...] = ()


class _FieldTrack:
    """A field of the config through the construction run (the method, or K), statement by
    statement: decided while every statement that may write it leaves one value (None, or one
    of ``kind``) on every live path, with no cut on the way but callees that raise on some
    paths; with the decisions of the statement that last changed it (``reads_only``: only
    those that read the field)."""

    def __init__(self, role: str, value: Value, kind: type, reads_only: bool) -> None:
        self.role = role
        self.value = value
        self.kind = kind
        self.reads_only = reads_only
        self.deciding = True
        self.decisions: tuple[Decision, ...] = ()

    def after(self, stmt: Stmt, live: list[Path], param: str, notes: list[str], key: tuple[str, str]) -> bool:
        """The field after ``stmt`` (run, leaving ``live``): whether the run still decides it."""
        selves = [q.env.get(param) for q in live]
        nows = [o.fields.get(self.role) for o in selves if isinstance(o, Obj)]
        if not live or len(nows) < len(live) or not only_partial_raises(notes) or not all(
                n is None or (isinstance(n, self.kind) and not isinstance(n, bool)) for n in nows) \
                or any(n != nows[0] for n in nows):
            self.deciding = False
            return False
        if nows[0] != self.value:
            self.decisions = tuple(d for d in live[0].decisions if d.path == key[0] and d.line >= stmt.line
                                   and d.value is not None and (not self.reads_only or any(
                                       r.split(" ")[0].endswith("." + self.role) for r in d.fields)))
            self.value = nows[0]
        return True


def _statements(stmts: tuple[Stmt, ...]) -> list[Stmt]:
    """Every statement under ``stmts``: ``if`` arms and the bodies of loops the facts keep."""
    out: list[Stmt] = []
    for st in stmts:
        out.append(st)
        if isinstance(st, SIf):
            out += _statements(st.body) + _statements(st.orelse)
        elif isinstance(st, SOpaque):
            out += _statements(st.body)
    return out


def _may_reject(paths: list[Path]) -> bool:
    """The run may still end rejecting: no path returned without raising, and every path can
    still raise with no cut on it but callees that raise on some paths (:func:`raise_of`)."""
    return all(not (q.done and q.raised is None) and all(MAY_RAISE in c for c in q.cuts) for q in paths)


def raise_of(key: tuple[str, str], paths: list[Path]) -> Rejection | None:
    """The construction's raise: every path raises, and no cut is on the way but callees that
    raise on some paths (there, it fails earlier: rejected all the same, maybe with their message:
    the rejection's condition names them). Paths that raise differently (a guard the
    configuration leaves unknown decides which raise comes first) reject all the same: the
    raise of the paths that take the fewest such guards' true side is named, the others are
    its condition."""
    if not paths or any(q.raised is None for q in paths):
        return None
    groups: dict[tuple[Any, ...], list[Path]] = {}
    for q in paths:
        groups.setdefault((q.raised, q.raised_at, q.raised_in), []).append(q)
    ranked = sorted(groups.values(), key=lambda g: (min(_unknown_taken(q) for q in g), -len(g), g[0].raised_at or 0))
    found = [_group_raise(key, g) for g in ranked]
    first = found[0]
    if first is None or any(r is None for r in found):
        return None
    others = [r for r in found[1:] if r is not None]
    if not others:
        return first
    alt = "; ".join(f"{r.message} at {r.path}:{r.line}" for r in others)
    return replace(first, condition=(f"{first.condition}; " if first.condition else "")
                   + f"or, as a guard this configuration leaves unknown decides: {alt}")


def _unknown_taken(q: Path) -> int:
    """How many guards the configuration leaves unknown the path takes the true side of."""
    return sum(1 for d in q.decisions if d.value is None and d.taken)


def _group_raise(key: tuple[str, str], paths: list[Path]) -> Rejection | None:
    """The raise of paths that raise alike (:func:`raise_of`)."""
    p = fork(paths[0]) if len(paths) == 1 else join([fork(q) for q in paths], "(the construction's raising paths)")
    earlier = [c.split(MAY_RAISE)[0] for c in p.cuts if MAY_RAISE in c]
    if p.raised is None or p.raised_at is None or len(earlier) < len(p.cuts):
        return None
    path, function, line = p.raised_in or (key[0], key[1], p.raised_at)
    first = f"unless an earlier check raises first ({', '.join(dict.fromkeys(earlier))})" if earlier else ""
    return Rejection(path, line, function, p.raised.removeprefix("raise "), "validation", first)


def _writes_self(stmt: Stmt, attr: str) -> bool:
    """``stmt`` (or a statement under it) may assign ``self.<attr>``: by name, or through a call
    it makes on ``self`` or hands ``self`` to (a helper, ``setattr``, ``object.__setattr__``)."""
    for sub in walk([stmt]):
        targets = sub.targets if isinstance(sub, SAssign) else sub.writes if isinstance(sub, SOpaque) else ()
        if any(isinstance(t, PAttr) and t.attr == attr and isinstance(t.value, PName) and t.value.id == "self"
               for t in targets):
            return True
        if isinstance(sub, SOpaque) and any(isinstance(m, PName) and m.id == "self" for m in sub.mutated):
            return True
        for e in (x for root in stmt_exprs(sub) for x in expr_nodes(root)):
            if isinstance(e, PCall) and (_on_self(e.func) or any(isinstance(a, PName) and a.id == "self" for a in e.args)):
                return True
    return False


def _on_self(f: object) -> bool:
    while isinstance(f, PAttr):
        f = f.value
    return isinstance(f, PName) and f.id == "self"


def _validated(name: str, decorators: list[str]) -> bool:
    """A ``field_validator`` of the class may see the field first: one naming it, ``"*"``, or names
    that are not all literals."""
    for d in decorators:
        if not d.startswith("field_validator("):
            continue
        inner = d[len("field_validator("):].split("mode=")[0]
        names = [x for x in inner.rstrip(",)").split(",") if x]
        if any(x in (f"'{name}'", "'*'") or not (x.startswith("'") and x.endswith("'")) for x in names):
            return True
    return False


def _expected(args: tuple[Value, ...]) -> str:
    """The values as pydantic lists them: ``'a', 'b' or 'c'``."""
    shown = [repr(a) for a in args] or ["nothing"]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
