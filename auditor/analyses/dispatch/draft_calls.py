"""A draft-time call of a method the draft model lacks (issue 18): the drafter's per-step
code calls ``self.<model>.<m>(...)`` on the model a registry loader built, the draft model
class does not define ``m``, and torch's ``nn.Module.__getattr__`` raises ``AttributeError:
'Cls' object has no attribute 'm'`` the first time that call runs.

The per-step code is the function holding the route's draft loop and the drafter's methods
it calls on ``self`` (resolved in the drafter, an override winning), up to 4 calls deep. A
call is reached when every if-arm around it is taken, for each function on the way: the arms'
tests are evaluated over the configuration by the partial evaluator (the drafter's attributes
from the constructors that run, as :mod:`.load_checks` reads them; an attribute assigned
outside those constructors, a parameter or a local is unknown); a call in several arms is
reached when one of them is taken whatever the undecided tests are. A call in a loop other
than the draft loop, or in code that may not run though its arms are taken
(``CallFact.skippable``), is never reached for sure. Only calls that run before the draft
loop are placed, at step 0 (the draft's first step, or before it); a call only in the loop
or after it, or reached under tests the evaluator cannot decide, leaves the plan as it is,
with a note saying so.

The model lacks ``m`` only when no class of its hierarchy in the tree defines it (method,
class attribute, ``__getattr__``/``__getattribute__``, ``self.m = ...`` anywhere, or
``setattr`` on ``self``), the drafter never assigns ``self.<model>.m`` nor calls ``setattr``
on it, and every base outside the tree is one of ``head-free-bases``, taken to define only
:data:`BASE_ATTRIBUTES`. The attribute must hold only the registry-loaded model: every
``self.<model> = ...`` in the drafter's classes is typed ``REGISTRY``.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from typing import Sequence

import msgspec

from ...facts.extract import AttrAssignFact, AttrReadFact, CallFact, FunctionFact, PExpr
from ...index.index import ClassKey, FuncKey
from ...index.self_calls import self_callee
from ...model.findings import StepRaise
from ..loops import LoopResult
from ..partial_eval import Evaluator, Obj, Path, Unknown, Value, truth
from ..types import REGISTRY
from .part import DispatchPart
from .syntax import BASE_ATTRIBUTES, self_reads, sets_attrs

_DEPTH = 4  # self-calls followed from the loop's function
_SELF_CALLS = ("self", "super()")  # calls of a method of the drafter's own hierarchy
_GETATTR_HOOKS = frozenset({"__getattr__", "__getattribute__"})  # methods that answer any attribute
_MAX_UNDECIDED = 8  # undecided tests enumerated per function


@dataclass(frozen=True)
class MissingCall:
    """A call of ``self.<attr>.<method>(...)`` at ``path:line`` in ``function``."""

    path: str
    line: int
    function: str
    attr: str
    method: str


class DraftCalls(DispatchPart):
    def step_raise(self, drafter: ClassKey, model: ClassKey, loop: LoopResult, root: Obj,
                   k: int | None = None) -> tuple[StepRaise | None, list[str], dict[str, StepRaise]]:
        """The step the first surely-reached call of a method ``model`` lacks (or of a head
        method that raises, :mod:`.head_reads`) raises at, notes for those reached only under
        tests the evaluator cannot decide (``k``: the plan's K, what a drafter attribute named
        as a draft-loop count holds at draft time when it is set outside its constructors), and
        the head methods the per-step code calls whose every call raises, placed or not."""
        attrs = self._model_attrs(drafter)
        fn = self.index.function(loop.func)
        if not attrs or fn is None:
            return None, [], {}
        calls = [c.func for c in self._per_step_calls(drafter, loop.func, fn, 0, set())
                 if c.func and len(c.func) == 3 and c.func[1] in attrs]
        lacks = {f[2] for f in calls if not self._present(model, drafter, f[1], f[2])}
        # Head methods the model defines whose body uses an attribute its constructors set to
        # None for this configuration (:mod:`.head_reads`): calling one raises too.
        holders = tuple((drafter, a) for a in sorted(attrs))
        heads: dict[str, StepRaise] = {}
        head_notes: list[str] = []
        for name in dict.fromkeys(f[2] for f in calls if f[2] not in lacks and f[2] in self.config.head_methods):
            hit, more = self.provider.head_reads.head_raise(model, name, root, holders)
            head_notes += [n for n in more if n not in head_notes]
            if hit is not None:
                heads[name] = hit
        if not lacks and not heads:
            return None, head_notes, heads
        lacks |= set(heads)
        ev = self.evaluator()
        root = self._with_defaults(root)
        before = [c for c in fn.calls if loop.loop.id not in c.loops and c.line < loop.loop.line]
        sure, maybe = self._reached(ev, drafter, model, loop.func, fn, before, attrs, lacks, root, 0, set(), k=k)
        notes = [n for n in head_notes if any(m.method in heads for m in sure + maybe)]
        notes += [f"a draft-time call {m.function}: self.{m.attr}.{m.method}(...) at {m.path}:{m.line}, which "
                  + (f"raises ({heads[m.method].message} at {heads[m.method].path}:{heads[m.method].line})"
                     if m.method in heads else f"{model[1]} lacks")
                  + ", runs under tests the analysis cannot decide" for m in maybe if m not in sure]
        inside = [c for c in fn.calls if loop.loop.id in c.loops]
        in_sure, in_maybe = self._reached(ev, drafter, model, loop.func, fn, inside, attrs, lacks, root, 0, set(),
                                          loop.loop.id, k)
        later = sorted({(m.attr, m.method) for m in in_sure + in_maybe})
        lacking = [(a, m) for a, m in later if m not in heads]
        raising = [(a, m) for a, m in later if m in heads]
        if not sure and lacking:
            notes.append(f"the draft loop may call {', '.join(f'self.{a}.{m}' for a, m in lacking)}, which "
                         f"{model[1]} lacks: the step it first runs at is not placed")
        if not sure and raising:
            notes.append(f"the draft loop may call {', '.join(f'self.{a}.{m}' for a, m in raising)}, which "
                         f"raises ({'; '.join(f'{heads[m].message} at {heads[m].path}:{heads[m].line}' for _, m in raising)})"
                         ": the step it first runs at is not placed")
        if not sure:
            return None, notes, heads
        first = sure[0]
        if first.method in heads:  # the head method's own use of a None attribute, at step 0
            return heads[first.method], notes, heads
        return StepRaise(0, first.path, first.line, first.function,
                         f"AttributeError(\"'{model[1]}' object has no attribute '{first.method}'\")"), notes, heads

    def model_attrs(self, drafter: ClassKey) -> set[str]:
        return self._model_attrs(drafter)

    def assigned_outside_constructors(self, drafter: ClassKey) -> set[str]:
        """The drafter's ``self.<a>`` that a method other than its constructors assigns."""
        return self._assigned_outside_constructors(drafter)

    def after_load(self, drafter: ClassKey, attr: str, root: Obj) -> Value:
        """``self.<attr>`` of a drafter built with ``root`` once it is loaded, for an attribute
        its other methods assign too (:meth:`_after_load`: the constructors' value when no
        call of those writers may run; else unknown)."""
        return self._after_load(self.evaluator(), drafter, None, attr, (), root)

    # -- the per-step code ------------------------------------------------------------
    def _per_step_calls(self, drafter: ClassKey, key: FuncKey, fn: FunctionFact, depth: int,
                        seen: set[str]) -> list[CallFact]:
        """Every call in ``fn`` and in the drafter's methods it calls on ``self`` or
        ``super()``, transitively."""
        out: list[CallFact] = []
        for c in fn.calls:
            out.append(c)
            if c.func and len(c.func) == 2 and c.func[0] in _SELF_CALLS and depth < _DEPTH:
                found = self_callee(self.index, drafter, key, c.func)
                if found is not None and found[0][1] not in seen:
                    seen.add(found[0][1])
                    out += self._per_step_calls(drafter, found[0], found[1], depth + 1, seen)
        return out

    def _reached(self, ev: Evaluator, drafter: ClassKey, model: ClassKey, key: FuncKey, fn: FunctionFact,
                 calls: list[CallFact], attrs: set[str], lacks: set[str], root: Obj, depth: int,
                 seen: set[str], loop_id: int | None = None,
                 k: int | None = None) -> tuple[list[MissingCall], list[MissingCall]]:
        """The calls of a lacking method among ``calls`` of ``fn`` (and in the methods they
        call on ``self``) reached for sure, and those that may be reached, in call order
        (``loop_id``: the draft loop of ``fn``, whose body counts as reached)."""
        sure: list[MissingCall] = []
        maybe: list[MissingCall] = []
        targets: dict[tuple[str, ...], list[CallFact]] = {}
        for c in calls:
            if not c.func or c.func[0] != "self":
                continue
            if len(c.func) == 3 and c.func[1] in attrs and c.func[2] in lacks:
                targets.setdefault(c.func, []).append(c)
            elif len(c.func) == 2 and depth < _DEPTH and c.func[1] not in seen:
                targets.setdefault(c.func, []).append(c)
        for c in calls:  # ``super().<m>(...)``: the base's method, run for this drafter
            if c.func and len(c.func) == 2 and c.func[0] == "super()" and depth < _DEPTH \
                    and f"super:{key[1]}" not in seen:
                targets.setdefault(c.func, []).append(c)
        p = self._path(ev, drafter, model, key, fn, root, k)
        memo: dict[bytes, bool | None] = {}
        def looped(c: CallFact) -> bool:
            return any(lp != loop_id for lp in c.loops)

        for target, sites in targets.items():
            held = any_arm(fn, [s for s in sites if not s.skippable and not looped(s)], ev, key, p, memo)
            # A site that may not run though its arms are taken runs only where they are.
            possible = held is not False or any((s.skippable or looped(s)) and any_arm(fn, [s], ev, key, p, memo)
                                                is not False for s in sites)
            if len(target) == 3:
                m = MissingCall(key[0], sites[0].line, key[1], target[1], target[2])
                (sure if held else maybe if possible else []).append(m)
                continue
            found = self_callee(self.index, drafter, key, target)
            if found is None or not possible:
                continue
            mark = target[1] if target[0] == "self" else f"super:{key[1]}"
            s2, m2 = self._reached(ev, drafter, model, found[0], found[1], list(found[1].calls), attrs, lacks, root,
                                   depth + 1, seen | {mark}, k=k)
            (sure if held else maybe).extend(s2)
            maybe.extend(m2)
        return sure, maybe

    def _path(self, ev: Evaluator, drafter: ClassKey, model: ClassKey, key: FuncKey, fn: FunctionFact, root: Obj,
              k: int | None = None) -> Path:
        """``self`` with the attributes ``fn``'s tests read; parameters and locals unknown. An
        attribute assigned outside the constructors is the constructors' value when no call
        of its writers may run (:meth:`_after_load`); one named as a draft-loop count
        (``draft-loop-counts``) holds the plan's K."""
        guards = tuple(b.guard for b in fn.branches if b.guard is not None)
        reads = dict.fromkeys(a for g in guards for a in self_reads(g))
        assigned = self._assigned_outside_constructors(drafter)
        load = self.provider.load_checks
        fields: dict[str, Value] = {}
        for a in reads:
            if a in assigned and k is not None and a in self.config.draft_loop_counts:
                fields[a] = k
            elif a in assigned:
                fields[a] = self._after_load(ev, drafter, model, a, guards, root)
            else:
                fields[a] = load.attr_value(ev, drafter, a, guards, model, root)
        env = unknown_locals(fn)
        env["self"] = Obj("self", fields)
        return Path(env)

    def _after_load(self, ev: Evaluator, drafter: ClassKey, model: ClassKey | None, attr: str,
                    guards: tuple[PExpr, ...], root: Obj) -> Value:
        """``self.<attr>`` of a drafter that also assigns it outside its constructors: its value
        once built (:meth:`.load_checks.LoadChecks.built_value`) when every method that assigns
        it, other than the constructors and the methods they call, is private (``_name``, by
        Python's convention called only inside its class hierarchy) and every call of it in
        the hierarchy is ``self.<name>(...)`` in the drafter's load method (``drafter-load-methods``,
        the one the drafter resolves, or a base's it runs by ``super().<load>(...)``) under an
        ``if`` arm this configuration decides not taken (:mod:`.load_checks`' tests, after the
        load); else unknown."""
        unknown = Unknown(f"self.{attr}")
        load = self.provider.load_checks
        ctors = load.ran_methods(drafter)
        mro = self.index.mro(drafter)
        writers: set[str] = set()
        for key in load.writers(drafter, attr) - ctors:  # (the ones that may run on this drafter)
            name = key[1].rpartition(".")[2]
            if not name.startswith("_") or name.startswith("__"):
                return unknown
            writers.add(name)
        loads = self._load_chain(drafter)
        for c in mro:
            for name, m in self.index.methods(c).items():
                key = (c[0], f"{c[1]}.{name}")
                sites = [k for k in m.calls if k.func and k.func[-1] in writers]
                if not sites:
                    continue
                if key not in loads or any(k.func is None or len(k.func) != 2 or k.func[0] != "self" for k in sites):
                    return unknown
                for site in sites:
                    if not site.branches:
                        return unknown
                    decided_off = False
                    for b in site.branches:
                        br = m.branches[b]
                        if br.guard is None:
                            return unknown
                        p = load._path(ev, drafter, model, root, [], None, key, m, br.guard, site.line)
                        t = truth(ev.eval(br.guard, p, key))
                        decided_off = decided_off or (t is not None and t == br.negated)
                    if not decided_off:
                        return unknown
        return load.built_value(ev, drafter, attr, root)

    def _load_chain(self, drafter: ClassKey) -> set[FuncKey]:
        """The load methods the drafter resolves (``drafter-load-methods``), and the shadowed
        ones each runs by ``super().<load>(...)``, transitively."""
        out: set[FuncKey] = set()
        for n in dict.fromkeys(self.config.drafter_load_methods):
            found = self.index.method(drafter, n)
            while found is not None:
                owner, fn = found
                out.add(self.index.method_key(owner, n))
                found = self.index.method(drafter, n, owner) \
                    if any(c.func == ("super()", n) for c in fn.calls) else None
        return out

    def _assigned_outside_constructors(self, drafter: ClassKey) -> set[str]:
        ctors = {k for k, _ in self.provider.load_checks.constructors(drafter)}
        out: set[str] = set()
        for c in self.index.mro(drafter):
            for name, m in self.index.methods(c).items():
                if (c[0], f"{c[1]}.{name}") not in ctors:
                    out.update(s.target[1] for s in m.attr_assigns if len(s.target) == 2 and s.target[0] == "self")
        return out

    def _with_defaults(self, root: Obj) -> Obj:
        """``root`` whose speculative config has, for each field the configuration leaves
        unset, its class's literal default (``draft_sample_method: str = "greedy"``) when no
        method of the class assigns the field (``__post_init__`` may derive it otherwise)."""
        root = copy.deepcopy(root)
        spec = root.roles.get(self.roles["speculative"])
        if spec is None or spec.cls is None:
            return root
        mro = self.index.mro(spec.cls)
        assigned = {s.target[1] for c in mro for m in self.index.methods(c).values() for s in m.attr_assigns
                    if len(s.target) == 2 and s.target[0] == "self"}
        for c in mro:
            cf = self.index.class_fact(c)
            for name, e in (cf.field_defaults.items() if cf is not None else ()):
                if e.has_literal and name not in assigned and name not in spec.fields:
                    spec.fields[name] = e.literal
        return root

    # -- the draft model ---------------------------------------------------------------
    def _model_attrs(self, drafter: ClassKey) -> set[str]:
        """The drafter's attributes that hold only the model a registry loader built."""
        out: set[str] = set()
        for a in self.types.self_attributes(drafter):
            if REGISTRY not in self.types.attr_types(drafter, a):
                continue
            values = [(c, name, m, s) for c in self.index.mro(drafter) for name, m in self.index.methods(c).items()
                      for s in m.attr_assigns if s.target == ("self", a)]
            if values and all(self.types.value_types(drafter, (c[0], f"{c[1]}.{name}"), m, s.value, 0) == [REGISTRY]
                              for c, name, m, s in values):
                out.add(a)
        return out

    def _present(self, model: ClassKey, drafter: ClassKey, attr: str, name: str) -> bool:
        """Whether ``model`` may have ``name`` (True unless it surely lacks it)."""
        if self.class_may_have(model, name):
            return True
        for c in self.index.mro(drafter):
            mine = list(self.index.methods(c).values())
            if any(s.target == ("self", attr, name) for m in mine for s in m.attr_assigns) \
                    or sets_attrs(mine, ("self", attr)):
                return True
        return False

    def class_may_have(self, cls: ClassKey, name: str) -> bool:
        """Whether an instance of ``cls`` may have ``name`` (True unless the class surely
        lacks it: the rules of the module docstring, the class side)."""
        if name.startswith("__") or name in BASE_ATTRIBUTES:
            return True
        mro = self.index.mro(cls)
        if name in self.types.self_attributes(cls):
            return True
        for c in mro:
            if self.may_define(c, name, _GETATTR_HOOKS):
                return True
        return not all(self.provider.load_checks.bases_known(c) for c in mro)

    def may_define(self, c: ClassKey, name: str, hooks: frozenset[str]) -> bool:
        """Whether class ``c`` itself (one class of a hierarchy) may give its instances
        ``name``: no facts for it, a method, class attribute or field of that name, one of
        ``hooks`` among its methods, or a ``setattr(self, ...)`` in one of them."""
        methods = self.index.methods(c)
        cf = self.index.class_fact(c)
        return cf is None or name in methods or name in cf.class_attrs or name in cf.field_defaults \
            or bool(hooks & set(methods)) or sets_attrs(list(methods.values()), ("self",))


def unknown_locals(fn: FunctionFact) -> dict[str, Value]:
    """``fn``'s parameters and locals, each unknown."""
    return {n: Unknown(n) for n in [*fn.param_names, *fn.assigns]}


def any_arm(fn: FunctionFact, sites: Sequence[CallFact | AttrReadFact | AttrAssignFact], ev: Evaluator, key: FuncKey, p: Path,
             memo: dict[bytes, bool | None]) -> bool | None:
    """Whether one of ``sites`` runs whatever the tests the evaluator cannot decide are (True),
    none can (False), or it depends (None). The tests are taken as independent."""
    if not sites:
        return False
    arms: list[list[tuple[bytes, bool]]] = []
    tests: dict[bytes, PExpr] = {}
    for s in sites:
        arm = []
        for b in s.branches:
            g = fn.branches[b].guard
            if g is None:
                return None
            k = msgspec.json.encode(g)
            tests[k] = g
            arm.append((k, fn.branches[b].negated))
        arms.append(arm)
    for k, g in tests.items():
        if k not in memo:
            memo[k] = truth(ev.eval(g, Path(copy.deepcopy(p.env)), key))
    open_tests = [k for k in tests if memo[k] is None]
    if len(open_tests) > _MAX_UNDECIDED:
        return None
    outcomes = set()
    for bits in itertools.product((False, True), repeat=len(open_tests)):
        value = dict(zip(open_tests, bits))
        outcomes.add(any(all((value[k] if memo[k] is None else memo[k]) != neg for k, neg in arm) for arm in arms))
    return True if outcomes == {True} else False if outcomes == {False} else None
