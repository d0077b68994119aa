"""A head method that uses an attribute the draft model's constructors set to None for the
configuration (issue 18): the drafter's per-step code surely calls ``self.<model>.<m>(...)``
where ``m`` is a head method (``head-methods``) the draft model defines, and ``m``'s own body
asserts ``self.<a> is not None`` (or ``self.<a>``) or uses ``self.<a>.<x>``, while every
assignment of ``self.<a>`` that may run for the model class is in a constructor that runs
(:meth:`.load_checks.LoadChecks.constructors`) and stores None for this configuration: the
first use raises (``AssertionError``; ``AttributeError: 'NoneType' object has no attribute
'x'``) at step 0, vLLM's file:line the use's. Where the drafter calls the head method is
:mod:`.draft_calls`' business (calls before the draft loop, reached for sure); this module
answers what calling it does.

*The constructors store None* when every ``self.<a> = v`` of the model's hierarchy that may
run (:meth:`.forward_reads.ForwardReads.assignments`: the methods the class resolves and the
shadowed ones called by ``super()``, none other than the constructors, no
``__getattr__``/``__setattr__``, no ``setattr(self, ...)``, no store into or mutating call
on ``self.<a>``) is in a constructor, in no loop nor code that may not run, and either its
``if`` arms are decided not taken, or its value is None: the literal, or a conditional
expression (``X if c else None``) the partial evaluator decides to the None side; and one of
them runs for sure (its arms are taken whatever the undecided tests are). The tests are
evaluated over the configuration as the model's constructor asserts are
(:meth:`.outcomes.Outcomes` ``_build_rejections``: the constructor's ``vllm_config`` is the
build root, its ``config``/``hf_config`` the draft config; its locals their single
definitions, :func:`.constructors.constructor_path`). Any other value (a call, a name) that
may run makes it not None for sure as far as the plan goes (no raise, no note); an undecided
test around a None, or of a conditional value, leaves it undecided: no raise, a note. A
drafter that assigns ``self.<model>.<a>`` or calls ``setattr`` on it makes it undecided.

*A use is reached* in the head method's body when it is in no loop, no code that may not run
(``skippable``) and every ``if`` arm around it is taken whatever the undecided tests are
(parameters, locals and ``self`` unknown); an assert only in a body without ``if``, loop or
``with``, where no call before it may be the last one run (no skippable call at or after it).
The calls before a use are taken to return, as everywhere in the plan.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from ...facts.extract import AttrAssignFact, AttrReadFact, CallFact, FunctionFact
from ...facts.statements import PAttr, PCompare, PConst, PExpr, PName, PSeq
from ...index.index import ClassKey, FuncKey
from ...model.findings import StepRaise
from ..partial_eval import Evaluator, Obj, Path, Unknown, expr_text
from .constructors import constructor_env, constructor_path
from .draft_calls import any_arm
from .forward_reads import _unknown
from .outcomes import assert_text
from .part import DispatchPart
from .syntax import expr_nodes


@dataclass(frozen=True)
class NoneUse:
    """A use of ``self.<attr>`` at ``path:line`` in ``function`` that fails when it is None:
    an assert (``attr`` only) or a read or call of ``self.<attr>.<name>``."""

    path: str
    line: int
    function: str
    attr: str
    name: str | None  # None: ``assert self.<attr> [is not None]``
    test: str = ""

    def message(self) -> str:
        if self.name is None:  # as an assert on the route reads (:mod:`.outcomes`)
            return self.test
        return f"AttributeError(\"'NoneType' object has no attribute '{self.name}'\")"


class HeadReads(DispatchPart):
    def head_raise(self, model: ClassKey, head: str, root: Obj,
                   holders: tuple[tuple[ClassKey, str], ...] = ()) -> tuple[StepRaise | None, list[str]]:
        """The raise a call of ``model``'s head method ``head`` makes for this configuration
        (``root``: the build root, the draft config its model config's; ``holders``: as
        :meth:`is_none`), at step 0; notes for uses of an attribute whose value is undecided."""
        if head not in self.config.head_methods:
            return None, []
        hf = self._draft_hf(root)
        found = self.index.method(model, head)
        if found is None:
            return None, []
        owner, fn = found
        key = self.index.method_key(owner, head)
        notes: list[str] = []
        for use in self.uses(key, fn):
            none = self.is_none(model, use.attr, root, hf, holders)
            if none is True:
                return StepRaise(0, use.path, use.line, use.function, use.message()), notes
            if none is None:
                notes.append(f"the head method {use.function} uses self.{use.attr} at {use.path}:{use.line}, "
                             f"which {model[1]}'s constructors may set to None for this configuration "
                             f"(undecided)")
        return None, notes

    def model_attr_is_none(self, model: ClassKey, attr: str, root: Obj,
                           holders: tuple[tuple[ClassKey, str], ...] = ()) -> bool:
        """Whether ``self.<attr>`` of the draft model built with ``root`` is surely None."""
        return self.is_none(model, attr, root, self._draft_hf(root), holders) is True

    def _draft_hf(self, root: Obj) -> Obj | None:
        """The draft config of the build root (its model config's hf config)."""
        draft = root.roles.get(self.roles.get("model", "model_config"))
        hf = draft.fields.get(self.roles["hf"]) if isinstance(draft, Obj) else None
        return hf if isinstance(hf, Obj) else None

    # -- the head method's body -------------------------------------------------------
    def uses(self, key: FuncKey, fn: FunctionFact) -> list[NoneUse]:
        """The uses of a ``self.<a>`` that fail when it is None, reached for sure in ``fn``,
        in line order."""
        ev = self.evaluator()
        p = _unknown(fn)
        memo: dict[bytes, bool | None] = {}
        out: list[NoneUse] = []
        plain = not fn.branches and not fn.loops and not fn.withs
        for c in fn.checks:
            attr = _none_test(c.test)
            later = [x for x in fn.calls if x.line >= c.line]
            if attr is not None and plain and not any(x.skippable for x in later):
                out.append(NoneUse(key[0], c.line, key[1], attr, None, assert_text(c)))
        seen: set[tuple[int, int]] = set()
        sites: list[AttrReadFact | CallFact] = [*fn.attr_reads, *fn.calls]
        for site in sorted(sites, key=lambda s: (s.line, s.col)):
            chain = site.chain if isinstance(site, AttrReadFact) else site.func
            if not chain or len(chain) != 3 or chain[0] != "self" or (site.line, site.col) in seen:
                continue
            seen.add((site.line, site.col))
            if site.skippable or site.loops or any_arm(fn, [site], ev, key, p, memo) is not True:
                continue
            out.append(NoneUse(key[0], site.line, key[1], chain[1], chain[2]))
        return sorted(out, key=lambda u: (u.line, u.name is not None))

    # -- what the constructors store ----------------------------------------------------
    def is_none(self, cls: ClassKey, attr: str, root: Obj, hf: Obj | None,
                holders: tuple[tuple[ClassKey, str], ...] = ()) -> bool | None:
        """Whether ``self.<attr>`` of a ``cls`` is None for this configuration once it is
        built (True), surely not (False), or undecided (None): see the module docstring.
        ``holders``: (class, attribute) pairs that hold the object elsewhere (a drafter's
        ``self.model``): one of them assigning ``<attr>`` on it, or ``setattr`` on it, leaves
        it undecided."""
        found = self.provider.forward_reads.assignments(cls, attr)
        if not found:
            return None
        for holder, a in holders:
            for c in self.index.mro(holder):
                mine = list(self.index.methods(c).values())
                if any(s.target == ("self", a, attr) for m in mine for s in m.attr_assigns) \
                        or any(k.func == ("setattr",) and k.args and k.args[0].chain == ("self", a)
                               for m in mine for k in m.calls):
                    return None
        ctors = {k: f for k, f in self.provider.load_checks.constructors(cls)}
        ev = self.evaluator()
        sure = undecided = none_may = False
        for key, s in found:
            fn = ctors.get(key)
            if fn is None or s.loops or s.skippable:
                return None if _stores_none(s) else False
            p = self._path(ev, key, fn, s, root, hf)
            taken = any_arm(fn, [s], ev, key, p, {})
            if taken is False:
                continue
            value = self._value(ev, key, s, p)
            if value is False and taken is True:
                return False  # another value is stored for sure: not None as far as the plan goes
            sure = sure or (value is True and taken is True)
            undecided = undecided or value is None or taken is None
            none_may = none_may or value is not False
        return True if sure and not undecided else None if none_may else False

    def _path(self, ev: Evaluator, key: FuncKey, fn: FunctionFact, s: AttrAssignFact, root: Obj,
              hf: Obj | None) -> Path:
        """The constructor's path for the tests around ``s`` and its conditional value."""
        env = constructor_env(fn, self.roles, root, hf)
        exprs: list[PExpr] = [g for b in s.branches if (g := fn.branches[b].guard) is not None]
        if s.choice is not None:
            exprs.append(s.choice)
        return constructor_path(ev, key, fn, copy.deepcopy(env), PSeq("tuple", tuple(exprs)), s.line)

    def _value(self, ev: Evaluator, key: FuncKey, s: AttrAssignFact, p: Path) -> bool | None:
        """Whether the value ``s`` stores is None (True), may be another one (False: any
        value but the literal None and a conditional expression with a None side), or
        undecided (a conditional expression whose test the evaluator cannot decide)."""
        if s.choice is not None:
            v = ev.eval(s.choice, Path(copy.deepcopy(p.env)), key)
            if isinstance(v, Unknown):
                return None if _stores_none(s) else False
            return v is None
        return s.value.has_literal and s.value.literal is None


def _stores_none(s: AttrAssignFact) -> bool:
    """``s`` may store None: the literal, or a conditional expression with a None side."""
    if s.choice is not None:
        return any(isinstance(e, PConst) and e.value is None for e in expr_nodes(s.choice))
    return s.value.has_literal and s.value.literal is None


def _none_test(test: PExpr) -> str | None:
    """``a`` of ``assert self.a is not None`` or ``assert self.a``."""
    if isinstance(test, PCompare) and len(test.ops) == 1 and test.ops[0] == "is not" \
            and isinstance(test.comparators[0], PConst) and test.comparators[0].value is None:
        test = test.left
    if isinstance(test, PAttr) and isinstance(test.value, PName) and test.value.id == "self":
        return test.attr
    return None


__all__ = ["HeadReads", "NoneUse"]
