"""A per-step read of an attribute the draft model's per-layer module lacks (issue 18): the
forward of the module a draft step runs reads ``self.<sub>.<attr>`` (or calls
``self.<sub>.<attr>(...)``), the object its construction stores in ``self.<sub>`` is of a
class that never has ``attr``, and torch's ``nn.Module.__getattr__`` raises ``AttributeError:
'C' object has no attribute 'attr'`` the first time the step runs it (a subclass that
inherits a forward and builds another sub-module than the base did).

The way in is the route's own: the plan's step 0 runs a forward layer (a threaded, constant or
lost step with a layer), every forward selection of the route's loop (``self.<container>[i]``
in a function of the draft model, the selecting object's class as the loop explored it) is
called where it is selected (``self.<container>[i](...)``), outside loops and ``if`` arms the
evaluator cannot decide, and the container holds one known class E: every assignment of
``self.<container>`` that runs for the selecting class builds a module container
(``ModuleList``/``ModuleDict``) from a collection whose every element is a call of E. Then E's
``__call__``/``forward`` (resolved in E, an override winning) runs, and the methods it calls
on ``self`` (resolved in E, up to 2 calls deep).

An assignment *runs for* a class when its method is the one the class resolves (the
subclass's ``__init__`` winning), or a shadowed method a method of the hierarchy calls
other than on ``self`` (``super().__init__()``, ``Base.__init__(self)``; a call on a base
that ``head-free-bases`` names, ``nn.Module.__init__(self)``, is torch's). ``self.<sub>``
holds one known class C when every such assignment is a call of C (a class of the tree,
resolved from the assigning file), one of them unconditional in an ``__init__``; the
hierarchy holding ``self.<sub>`` has no method, class attribute or field named ``sub``, no
``__getattr__``/``__getattribute__``/``__setattr__``, no ``setattr(self, ...)``, no store into
or mutating call on the container, and every base outside the tree is one of
``head-free-bases``. C lacks ``attr`` by :meth:`.draft_calls.DraftCalls.class_may_have`
(methods, class attributes, properties, fields, ``self.attr = ...`` anywhere, ``setattr``,
``__getattr__``), and the holding hierarchy never assigns ``self.<sub>.attr`` nor calls
``setattr(self.<sub>, ...)``. An assignment from outside these classes (``layer.sub = ...``
elsewhere) is not seen.

A read is reached when it is in no loop, in no code that may not run though its arms are
taken (``AttrReadFact.skippable``: also a ``with`` or ``try`` body), and every ``if`` arm
around it is taken whatever the tests the evaluator cannot decide are (parameters, locals and
``self`` unknown). A lacking read reached for sure at every forward selection puts the
plan's outcome at ``raises at step 0``; one reached only under undecided tests, or at some of
the selections only, leaves the plan as it is, with a note. The calls and reads before it are
taken to return (as everywhere in the plan). The rule is one function of a loop's selections
(:meth:`ForwardReads.selections_raise`, configuration-free): the planner asks it of its
route's leg, the reachability table and lint of each loop they read
(:meth:`.outcomes.Outcomes.result_step_raise`), so a row's ``raise`` is the plan's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ...facts.extract import AttrAssignFact, AttrReadFact, CallFact, FunctionFact
from ...index.index import ClassKey, FuncKey, SymbolKind
from ...model.findings import StepRaise
from ..loops import FORWARD_METHODS, LoopSelection
from ..partial_eval import Evaluator, Path, Unknown
from ..types import MODULE_CONTAINERS
from .draft_calls import any_arm, unknown_locals
from .syntax import sets_attrs
from .model import Plan, Verdict
from .part import DispatchPart

_DEPTH = 2  # self-calls followed from the per-layer module's forward
# Methods that answer or intercept any attribute: a class with one may hold anything in ``self.<sub>``.
_ATTR_HOOKS = frozenset({"__getattr__", "__getattribute__", "__setattr__"})
# Calls on a container that change what it holds.
_MUTATORS = frozenset({"append", "extend", "insert", "update", "add_module", "register_module", "setdefault",
                       "__setitem__", "__delitem__", "pop", "popitem", "clear", "__init__"})


@dataclass(frozen=True)
class LackingRead:
    """``self.<sub>.<attr>`` at ``path:line`` in ``function``; ``sub`` holds a ``cls``."""

    path: str
    line: int
    function: str
    sub: str
    attr: str
    cls: ClassKey

    def message(self) -> str:
        return f"AttributeError(\"'{self.cls[1]}' object has no attribute '{self.attr}'\")"


class ForwardReads(DispatchPart):
    def __init__(self, provider: Any) -> None:
        super().__init__(provider)
        # (selection, model) -> (files the index held, its sure and possible lacking reads)
        self._memo: dict[tuple[LoopSelection, ClassKey], tuple[int, tuple[list[LackingRead], list[LackingRead]]]] = {}

    def step_raise(self, plan: Plan) -> tuple[StepRaise | None, list[str]]:
        """The raise at step 0 of a read the per-layer module's forward surely makes of an
        attribute its sub-module lacks, and notes for such reads that may run."""
        model, proposer = plan.model_class, plan.proposer
        if model is None or proposer is None or not plan.steps:
            return None, []
        first = plan.steps[0]
        if first.forward_layer is None or not (first.verdict in (Verdict.THREADED.value, Verdict.CONSTANT.value)
                                               or first.verdict.startswith(Verdict.LOST.value)):
            return None, []
        return self.selections_raise(model, self.provider.route_values.leg(proposer, model).forward)

    def load(self) -> None:
        """The loading phase's share: ask :meth:`selections_raise` of every explored draft loop
        and class it selects in (the reachability table's and lint's loops), so the classes its
        reads resolve are parsed before the index is frozen (after, a lookup parses nothing and
        a class it never loaded is unknown: no raise)."""
        results = [*self.loops.loop_results(), *(res for _, res in self.provider.precision.dispatched_loops())]
        for res in results:
            for model in dict.fromkeys(s.model_class for s in res.selections):
                self.selections_raise(model, res.selections)

    def selections_raise(self, model: ClassKey, selections: Iterable[LoopSelection]) -> tuple[StepRaise | None, list[str]]:
        """The raise at step 0 of a lacking read reached for sure at every forward selection
        of ``model`` among one loop's ``selections`` (none: no raise), and notes for those
        that may run. Configuration-free: the plan asks it of its route's leg once its step 0
        runs a forward layer, the reachability table and lint of each loop they read
        (:meth:`.outcomes.Outcomes.result_step_raise`)."""
        found: list[LackingRead | None] = []
        notes: list[str] = []
        for sel in (s for s in selections if s.model_class == model and s.method in FORWARD_METHODS):
            sure, maybe = self._selection(sel, model)
            found.append(sure[0] if sure else None)
            notes += [_note(m, "runs under tests the analysis cannot decide") for m in maybe if m not in sure]
        if found and all(f is not None for f in found):
            hit = min((f for f in found if f is not None), key=lambda f: (f.path, f.line))
            return (StepRaise(0, hit.path, hit.line, hit.function, hit.message(), any_call=True),
                    list(dict.fromkeys(notes)))
        notes += [_note(f, "runs on some of the route's forward selections only") for f in found if f is not None]
        return None, list(dict.fromkeys(notes))

    # -- the way in -------------------------------------------------------------------
    def _selection(self, sel: LoopSelection, model: ClassKey) -> tuple[list[LackingRead], list[LackingRead]]:
        """The lacking reads the forward of the module ``sel`` selects and calls makes for sure
        (in order), and those it may make. Kept per selection while the index holds the same
        files: the loading phase asks it of every loop (:meth:`load`), the reachability rows
        and lint of the same loops again."""
        held = len(self.index.facts)
        hit = self._memo.get((sel, model))
        if hit is not None and hit[0] == held:
            return hit[1]
        answer = self._reads_at(sel, model)
        self._memo[(sel, model)] = (held, answer)
        return answer

    def _reads_at(self, sel: LoopSelection, model: ClassKey) -> tuple[list[LackingRead], list[LackingRead]]:
        hop, ctx = sel.hops[-1], sel.ctx
        key: FuncKey = (hop.path, hop.function)
        fn = self.index.function(key)
        container = tuple(sel.container.split("."))
        if ctx is None or fn is None or len(container) != 2 or container[0] != "self":
            return [], []
        sub = next((s for s in fn.subscripts if s.container == container and s.line == hop.line), None)
        call = next((c for c in fn.calls if sub is not None and c.func is None and c.attr is None
                     and (c.line, c.col) == (sub.line, sub.col)), None)
        if call is None or not _surely_runs(fn, call, self.evaluator(), key, _unknown(fn), {}):
            return [], []
        element = self._held_class(ctx, container[1], elements=True)
        if element is None:
            return [], []
        targets = self.loops.calls.call_object(element, model)
        target = self.index.function(targets[0].func) if len(targets) == 1 else None
        if target is None:
            return [], []
        return self._reads(element, targets[0].func, target, 0, frozenset())

    # -- the per-layer module's forward ---------------------------------------------------
    def _reads(self, cls: ClassKey, key: FuncKey, fn: FunctionFact, depth: int,
               seen: frozenset[str]) -> tuple[list[LackingRead], list[LackingRead]]:
        ev = self.evaluator()
        p = _unknown(fn)
        memo: dict[bytes, bool | None] = {}
        sites: list[AttrReadFact | CallFact] = [*fn.attr_reads, *fn.calls]
        sure: list[LackingRead] = []
        maybe: list[LackingRead] = []
        for site in sorted(sites, key=lambda s: (s.line, s.col)):
            chain = site.chain if isinstance(site, AttrReadFact) else site.func
            if not chain or chain[0] != "self":
                continue
            if isinstance(site, CallFact):  # a helper of the module: followed where it surely runs
                # (a call of ``self.<sub>.<m>`` is a read of it too: among the reads)
                found = self.index.method(cls, chain[1]) if len(chain) == 2 and depth < _DEPTH \
                    and chain[1] not in seen else None
                if found is None:
                    continue
                s2, m2 = self._reads(cls, self.index.method_key(found[0], chain[1]), found[1], depth + 1,
                                     seen | {chain[1]})
                (sure if _surely_runs(fn, site, ev, key, p, memo) else maybe).extend(s2)
                maybe.extend(m2)
                continue
            lack = self._lacking(cls, chain[1], chain[2])
            if lack is None:
                continue
            read = LackingRead(key[0], site.line, key[1], chain[1], chain[2], lack)
            (sure if _surely_runs(fn, site, ev, key, p, memo) else maybe).append(read)
        return sure, maybe

    def _lacking(self, holder: ClassKey, sub: str, attr: str) -> ClassKey | None:
        """The class ``self.<sub>`` of a ``holder`` surely is, when it surely lacks ``attr``."""
        cls = self._held_class(holder, sub, elements=False)
        if cls is None or self.provider.draft_calls.class_may_have(cls, attr):
            return None
        mine = [m for c in self.index.mro(holder) for m in self.index.methods(c).values()]
        if any(s.target == ("self", sub, attr) for m in mine for s in m.attr_assigns) or sets_attrs(mine, ("self", sub)):
            return None
        return cls

    # -- what the construction stores ------------------------------------------------------
    def _held_class(self, holder: ClassKey, attr: str, elements: bool) -> ClassKey | None:
        """The one class of ``self.<attr>`` of a ``holder`` (``elements``: of the elements of
        the module container it holds), None when it may be anything else."""
        found = self.assignments(holder, attr)
        if not found or not any(not s.conditional and key[1].endswith(".__init__") for key, s in found):
            return None
        classes: set[ClassKey] = set()
        for key, s in found:
            called = s.value.called
            if elements:
                if not called or called[-1] not in MODULE_CONTAINERS or s.items is None:
                    return None
                chains: tuple[tuple[str, ...], ...] = s.items
            else:
                chains = (called,) if called else ()
            if not chains:
                return None
            for ch in chains:
                syms = self.index.resolve_chain(key[0], ch)
                if len(syms) != 1 or syms[0].kind is not SymbolKind.CLASS or syms[0].name in MODULE_CONTAINERS:
                    return None
                classes.add((syms[0].path, syms[0].name))
        return next(iter(classes)) if len(classes) == 1 else None

    def assignments(self, holder: ClassKey, attr: str) -> list[tuple[FuncKey, AttrAssignFact]] | None:
        """Every ``self.<attr> = ...`` that may run for a ``holder`` (see the module docstring),
        None when ``self.<attr>`` may be set or changed another way."""
        mro = self.index.mro(holder)
        loaders = self.provider.load_checks
        runs, anyone = self._run_methods(holder, mro)
        out: list[tuple[FuncKey, AttrAssignFact]] = []
        for c in mro:
            methods = self.index.methods(c)
            if not loaders.bases_known(c) or self.provider.draft_calls.may_define(c, attr, _ATTR_HOOKS) \
                    or sets_attrs(list(methods.values()), ("self", attr)):
                return None
            for name, m in sorted(methods.items()):
                if ("self", attr) in m.stores or any(k.func and len(k.func) == 3 and k.func[:2] == ("self", attr)
                                                     and k.func[2] in _MUTATORS for k in m.calls):
                    return None
                key = (c[0], f"{c[1]}.{name}")
                if key not in runs and name not in anyone:
                    continue  # shadowed and never called: it does not run for the holder
                out += [(key, s) for s in m.attr_assigns if s.target == ("self", attr)]
        return out

    def _run_methods(self, holder: ClassKey, mro: list[ClassKey]) -> tuple[set[FuncKey], set[str]]:
        """The methods that may run for a ``holder``: those it resolves, and those a method
        of its hierarchy calls by ``super()`` or on a class of the tree; and the names called
        on something else the tree does not resolve (any method of that name may run)."""
        runs: set[FuncKey] = set()
        anyone: set[str] = set()

        def add(found: tuple[ClassKey, FunctionFact] | None, name: str) -> None:
            if found is not None:
                runs.add(self.index.method_key(found[0], name))

        for c in mro:
            for name, m in self.index.methods(c).items():
                add(self.index.method(holder, name), name)
                for call in m.calls:
                    f = call.func
                    if not f or len(f) < 2 or f[0] == "self" or ".".join(f[:-1]) in self.config.head_free_bases:
                        continue
                    if f[0] == "super()":
                        add(self.index.method(holder, f[-1], after=c), f[-1])
                        continue
                    syms = self.index.resolve_chain(c[0], f[:-1])
                    if syms and all(sym.kind is SymbolKind.CLASS for sym in syms):
                        for sym in syms:
                            add(self.index.method((sym.path, sym.name), f[-1]), f[-1])
                    else:
                        anyone.add(f[-1])
        return runs, anyone


def _surely_runs(fn: FunctionFact, site: CallFact | AttrReadFact, ev: Evaluator, key: FuncKey, p: Path,
                 memo: dict[bytes, bool | None]) -> bool:
    """``site`` runs whenever ``fn`` does: in no loop, in no code that may not run though
    its arms are taken, and in arms taken whatever the undecided tests are."""
    return not site.skippable and not site.loops and any_arm(fn, [site], ev, key, p, memo) is True


def _unknown(fn: FunctionFact) -> Path:
    """``fn``'s parameters, locals and ``self``, all unknown."""
    env = unknown_locals(fn)
    env["self"] = Unknown("self")
    return Path(env)


def _note(r: LackingRead, how: str) -> str:
    return (f"a per-step forward read {r.function}: self.{r.sub}.{r.attr} at {r.path}:{r.line}, which "
            f"{r.cls[1]} lacks, {how}")
