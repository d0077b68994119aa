"""Outcomes, not only plans (issue 18): a configuration vLLM rejects before any draft step
runs, and an assert on the route that fails at a draft step.

* **Rejected.** The guarded raises of the speculative-config class's validation methods
  (``validation-methods``) are evaluated over the configuration by the partial evaluator:
  a raise whose every enclosing test is decided the way that reaches it rejects the
  configuration (vLLM's message as written, and file:line). So are the asserts of the draft
  model class's constructors (the class and the parts it builds) that read the draft
  config: they fail while the drafter loads the model, before a step runs.
* **Raises at step i.** An assert on the route's forward or head path (the model class's
  entry method and the functions the selection hops through) that reads the threaded
  parameter is evaluated with the value the loop hands at step i; the first step it fails
  at is where the draft raises. A loop's rows and lint also take the raise at step 0 of a
  per-step forward read of an attribute the per-layer module's sub-module lacks
  (:mod:`.forward_reads`, the rule the planner applies to a plan).

A test the evaluator cannot decide leaves the outcome a plan, with a note that says what the
validation depends on (never defaulted to a rejection).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from typing import TYPE_CHECKING, Any, Hashable, Iterable

from ...facts.extract import CheckFact, FunctionFact, GuardedRaise, PAttr, PExpr, PName
from ...index.index import ClassKey, FuncKey, Index
from ...model.findings import StepRaise
from ..loops import LoopResult, LoopSelection, StepKind
from ..partial_eval import Evaluator, Obj, Path, Unknown, Value, expr_text, truth
from ..partial_eval.values import structural_key
from .constructors import constructor_env, constructor_path
from .part import DispatchPart
from .syntax import expr_names as _names, expr_nodes as _walk

if TYPE_CHECKING:
    from .provider import DispatchProvider


#: draft steps 0..REACH_STEPS-1 are checked for an assert that fails on the step where no
#: K is given (a reachability row holds for any K: "raises at step i" when K > i)
REACH_STEPS = 8


@dataclass(frozen=True)
class Rejection:
    """A validation that raises for this configuration."""

    path: str
    line: int
    function: str
    message: str  # the raised exception (or the failing assert and its message), as written
    # "validation" (config checks), "build" (the draft model's or the drafter's constructor), "load", "startup" or "weights"
    when: str
    condition: str = ""  # what the rejection depends on beyond the configuration ("weights": the checkpoint's names)

    def as_json(self) -> dict[str, Any]:
        """One entry of a layers JSON ``rejections`` list (docs/layers.md)."""
        out: dict[str, Any] = {"path": self.path, "line": self.line, "function": self.function,
                               "message": self.message, "when": self.when}
        if self.condition:
            out["condition"] = self.condition
        return out


class Outcomes(DispatchPart):
    def __init__(self, provider: DispatchProvider) -> None:
        super().__init__(provider)
        self._rejections: dict[Hashable, tuple[int, tuple[Rejection, ...], int, tuple[str, ...]]] = {}
        self._schedules: dict[tuple[int, frozenset[str], tuple[int, ...]], tuple[FunctionFact, list[str]]] = {}

    def _env(self, ev: Evaluator, key: FuncKey, fn: FunctionFact, env: dict[str, Value],
             exprs: tuple[PExpr, ...]) -> Path:
        """A path whose locals are those ``exprs`` read that the function assigns exactly once,
        each evaluated over its own copy of ``env`` (an unknown callee in one definition
        makes what it is handed unknown; that must not reach the others), two levels deep."""
        p = Path(dict(env))
        for name in self._schedule(fn, frozenset(env), exprs):
            p.env[name] = ev.eval(fn.local_defs[name], Path(copy.deepcopy(p.env)), key)
        return p

    def _schedule(self, fn: FunctionFact, given: frozenset[str], exprs: tuple[PExpr, ...]) -> list[str]:
        """The local definitions :meth:`_env` evaluates, in order: those ``exprs`` read, then
        (a second round) what those read, then the first ones again over them. It depends on
        the facts and the given names only, never on values, so it is made once per site."""
        memo_key = (id(fn), given, tuple(map(id, exprs)))
        hit = self._schedules.get(memo_key)
        if hit is not None and hit[0] is fn:
            return hit[1]
        order: list[str] = []
        known = set(given)
        todo = [n for e in exprs for n in _names(e) if n not in known and n in fn.local_defs]
        for _ in range(2):
            later: list[str] = []
            for name in dict.fromkeys(todo):
                order.append(name)
                known.add(name)
                later += [n for n in _names(fn.local_defs[name]) if n not in known and n in fn.local_defs]
            if not later:
                break
            todo = later + todo
        self._schedules[memo_key] = (fn, order)  # ``fn`` kept alive, so its id is not reused
        return order

    def _holds(self, ev: Evaluator, key: FuncKey, p: Path, guards: tuple[PExpr, ...],
               negated: tuple[bool, ...]) -> bool | None | tuple[PExpr, str]:
        """Whether every guard is decided the way that reaches the raise (None: unknown), or
        the guard whose own test raises, with the exception, when every guard before it holds."""
        unknown = False
        for g, neg in zip(guards, negated):
            v = ev.eval(g, p, key)
            if isinstance(v, Unknown) and v.raises:
                return None if unknown else (g, v.raises)
            t = truth(v)
            if t is None:
                unknown = True
                continue
            if t == neg:
                return False
        return None if unknown else True

    def rejections(self, spec: Obj, root: Obj, hf: Obj, model: ClassKey | None,
                   given_method: Value = None, as_given: tuple[tuple[str, Value], ...] = ()
                   ) -> tuple[list[Rejection], int]:
        """The validations that raise for this configuration, and how many could raise
        depending on what is unknown. ``as_given``: fields ``spec`` holds as the construction
        derived them (K), with the value the question gave: the first validation method, whose
        run derives them, is judged with those.

        Settings that differ only where validation cannot see (the runner, most often) hand
        it configurations the evaluator cannot tell apart (:func:`structural_key`): those are
        judged once, and the cuts the judging made are counted again for each, so the answer
        and the limit notes are what judging each would give. Kept only while the index holds
        the same files (a load may decide what was unknown)."""
        held = len(self.index.facts)
        memo_key = None
        parts = (structural_key(spec), structural_key(root), structural_key(hf))
        if None not in parts:
            memo_key = (*parts, model, given_method, as_given)
            hit = self._rejections.get(memo_key)
            if hit is not None and hit[0] == held:
                for name in hit[3]:
                    self.limits.hit(name)
                return list(hit[1]), hit[2]
        cuts: list[str] = []

        def count(name: str) -> None:
            cuts.append(name)
            self.limits.hit(name)

        out, undecided = self._judge(self.evaluator(count), spec, root, hf, model, given_method, as_given)
        if memo_key is not None and len(self.index.facts) == held:
            self._rejections[memo_key] = (held, tuple(out), undecided, tuple(cuts))
        return out, undecided

    def _judge(self, ev: Evaluator, derived: Obj, root: Obj, hf: Obj, model: ClassKey | None,
               given_method: Value = None, as_given: tuple[tuple[str, Value], ...] = ()
               ) -> tuple[list[Rejection], int]:
        """``given_method``: the method as the user gives it (``spec`` holds it as the class's first
        statements rewrite it); None: as ``spec`` holds it. ``as_given``: see :meth:`rejections`."""
        out: list[Rejection] = []
        undecided = 0
        spec_cls = self.provider.location.spec_config_class()
        if spec_cls is not None:
            earlier: set[str] = set()  # the fields the validation methods run before this one assign
            first = True
            for name in self.config.validation_methods:
                found = self.index.method(spec_cls, name)
                if found is None:
                    continue
                owner, fn = found
                spec = derived
                if first and as_given:  # the method that derives them sees them as given
                    spec = copy.deepcopy(derived)
                    spec.fields.update(dict(as_given))
                first = False
                key = (owner[0], f"{owner[1]}.{name}")
                before = set(earlier)
                earlier |= self_writes(self.index, spec_cls, fn)
                unset = {k for k, v in spec.fields.items() if v is None}
                if ANY_FIELD in before:  # an earlier method hands the config to other code: any field
                    before = (before - {ANY_FIELD}) | unset
                if unset and before:  # what the earlier methods leave unset on every path stays so
                    before -= self.provider.spec_fields.left_unset(
                        spec, unset & before, name, spec.fields.get(self.roles["method"]) if given_method is None else given_method,
                        ev.on_limit)
                for r in fn.raises:
                    if _rewritten_before(self.index, spec_cls, fn, r.line, r.guards, unset, before):
                        undecided += 1  # the config's own statements change what the guards read first
                        continue
                    p = self._env(ev, key, fn, {"self": copy.deepcopy(spec)}, r.guards)
                    held = self._holds(ev, key, p, r.guards, r.negated)
                    if isinstance(held, tuple):  # a test on the way raises first
                        guard, exc = held
                        line = next((b.line for b in fn.branches if b.guard == guard), r.line)
                        found_at = Rejection(key[0], line, key[1], exc, "validation")
                        if found_at not in out:
                            out.append(found_at)
                    elif held:
                        out.append(Rejection(key[0], r.line, key[1], r.exc, "validation"))
                    elif held is None:
                        undecided += 1
        if model is not None:
            out += self._build_rejections(ev, root, hf, model)
        return out, undecided

    def _build_rejections(self, ev: Evaluator, root: Obj, hf: Obj, model: ClassKey) -> list[Rejection]:
        """Asserts of the draft model's constructors (its class and the parts it builds)
        that fail for the draft config."""
        out: list[Rejection] = []
        parts = sorted({model, *self.registry.model_parts(model)})
        for part in parts:
            found = self.index.method(part, "__init__")
            if found is None:
                continue
            owner, fn = found
            key = (owner[0], f"{owner[1]}.__init__")
            env = constructor_env(fn, self.roles, root, hf)
            for c in fn.checks:
                p = constructor_path(ev, key, fn, copy.deepcopy(env), c.test, c.line)
                if truth(ev.eval(c.test, p, key)) is False:
                    out.append(Rejection(key[0], c.line, key[1], assert_text(c), "build"))
        return out

    def step_raise(self, functions: list[FuncKey], k: int, value_at: list[int | None]) -> StepRaise | None:
        """The first draft step at which an assert of ``functions`` on the threaded
        parameter fails, given the value the loop hands at each step (None: unknown)."""
        ev = self.evaluator()
        for i in range(k):
            v = value_at[i] if i < len(value_at) else None
            if v is None:
                continue
            for key in functions:
                fn = self.index.function(key)
                if fn is None:
                    continue
                for c in fn.checks:
                    if not _reads(c.test, self.params):
                        continue
                    env: dict[str, Value] = {prm: v for prm in self.params}
                    p = self._env(ev, key, fn, env, (c.test,))
                    if truth(ev.eval(c.test, p, key)) is False:
                        return StepRaise(i, key[0], c.line, key[1], assert_text(c))
        return None

    def loop_step_raise(self, loop: FuncKey, model: ClassKey, k: int) -> StepRaise | None:
        """The first draft step below ``k`` at which an assert on the threaded parameter fails
        on the way from the draft loop ``loop`` (as explored with its own class, or run by a
        drafter subclass) to ``model``'s layer selection; what the planner asks of one route,
        asked of one loop (lint: a loop that starts threading the step, into a model that
        asserts step 0). Reads what the loading phase explored; parses nothing."""
        results = [lr for lr in self.loops.loop_results() if lr.func == loop]
        results += [res for _, res in self.provider.precision.dispatched_loops() if res.func == loop]
        found = [hit for res in results if (hit := self.result_step_raise(res, model, k)) is not None]
        return min(found, key=lambda r: (r.step, r.path, r.line)) if found else None

    def result_step_raise(self, res: LoopResult, model: ClassKey, k: int) -> StepRaise | None:
        """:meth:`loop_step_raise` for one explored loop (the reachability table asks it of
        each loop it lists, so a row says what ``layers`` says of the route): an assert on the
        step, or a per-step forward read of an attribute the per-layer module's sub-module
        lacks (:meth:`.forward_reads.ForwardReads.selections_raise`, step 0)."""
        sels = [sel for sel in res.selections if sel.model_class == model]
        found = [self.selections_raise(model, sels, k)]
        if k > 0:
            found.append(self.provider.forward_reads.selections_raise(model, sels)[0])
        hits = [r for r in found if r is not None]
        return min(hits, key=lambda r: (r.step, r.path, r.line)) if hits else None

    def selections_raise(self, model: ClassKey, selections: Iterable[LoopSelection], k: int) -> StepRaise | None:
        """The first draft step below ``k`` at which an assert on the threaded parameter fails
        in ``model``'s own code (its class and parts, with their bases) on the way to one of
        ``selections``, the loop handing the step (a varying selection) or an unknown value."""
        owners = {c for part in {model, *self.registry.model_parts(model)} for c in self.index.mro(part)}
        found: list[StepRaise] = []
        for sel in selections:
            # A read at a constant key of a literal container: the step the selecting function gets.
            varying = StepKind.VARYING in (sel.kind, sel.step)
            values: list[int | None] = list(range(k)) if varying else [None] * k
            funcs = list(dict.fromkeys((h.path, h.function) for h in sel.hops
                                       if self.types.defining_class((h.path, h.function)) in owners))
            hit = self.step_raise(funcs, k, values)
            if hit is not None:
                found.append(hit)
        return min(found, key=lambda r: (r.step, r.path, r.line)) if found else None


def assert_text(c: CheckFact) -> str:
    """An assert as Python reports it: its test and its message."""
    test = expr_text(c.test)
    return f"assert {test}" + (f", {c.message!r}" if c.message else "")


def _reads(e: PExpr, names: list[str]) -> bool:
    return any(isinstance(s, PName) and s.id in names for s in _walk(e))


__all__ = ["REACH_STEPS", "GuardedRaise", "Outcomes", "Rejection", "StepRaise"]


def _rewritten_before(index: Index, cls: ClassKey, fn: FunctionFact, line: int, guards: tuple[PExpr, ...],
                      unset: set[str], earlier: set[str]) -> bool:
    """A guard of the raise at ``line`` reads a field the configuration leaves unset (None),
    directly or through the locals it reads, and the method assigns it on an earlier line
    (itself or through a method it calls on ``self`` there), or a validation method run before it
    does (vLLM defaults ``num_speculative_tokens`` from the draft's ``n_predict`` when it is not
    given, before it checks it): None is not what the guard sees. (A field given a value is
    taken as the guards see it: a default written only when it is None leaves it alone.)"""
    read: set[str] = set()
    todo = [n for g in guards for n in _walk(g)]
    seen_locals: set[str] = set()
    while todo:
        e = todo.pop()
        if isinstance(e, PAttr) and isinstance(e.value, PName) and e.value.id == "self":
            read.add(e.attr)
        elif isinstance(e, PName) and e.id in fn.assigns and e.id not in seen_locals:
            seen_locals.add(e.id)  # a local the guard reads: what its definitions read
            for n in (n for x in fn.assigns[e.id] for n in x.names):
                if n.startswith("self."):
                    read.add(n[len("self."):].split(".")[0])
                elif n in fn.assigns:
                    todo.append(PName(id=n))
    read &= unset
    writes = self_writes(index, cls, fn, line)
    return bool(read & earlier) or bool(read & writes) or (ANY_FIELD in writes and bool(read))


#: :func:`self_writes`' word for "any field": ``self`` is handed to other code, which may set any.
ANY_FIELD = "*"


def self_writes(index: Index, cls: ClassKey, fn: FunctionFact, before: int | None = None, depth: int = 0) -> set[str]:
    """The fields ``fn`` assigns on ``self`` (before line ``before``, when given), itself or in the
    methods of ``cls`` it calls on ``self`` (transitively, 4 deep); :data:`ANY_FIELD` among them
    when it hands ``self`` itself to another call (vLLM 0.34.0: ``config_cls.configure(self)``,
    whose config class sets ``num_speculative_tokens`` when it is not given)."""
    out = {a.target[1] for a in fn.attr_assigns if len(a.target) == 2 and a.target[0] == "self"
           and (before is None or a.line < before)}
    for c in fn.calls:
        if (before is None or c.line < before) and any(
                x.chain == ("self",) for x in (*c.args, *(k.value for k in c.keywords), *c.star_args, *c.star_kwargs)):
            out.add(ANY_FIELD)
    if depth >= 4:
        return out
    for c in fn.calls:
        if c.func is not None and len(c.func) == 2 and c.func[0] == "self" and (before is None or c.line < before):
            found = index.method(cls, c.func[1])
            if found is not None and found[1] is not fn:
                out |= self_writes(index, cls, found[1], None, depth + 1)
    return out
