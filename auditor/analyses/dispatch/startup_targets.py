"""What a start-up pass (:mod:`.startup`) must reach for a raise to reject at start-up.

* The draft loop (``loop``): the pass runs the loop function, the loop then runs steps
  0..K-1 as while serving (an assert that fails at step *i*).
* A head method of the draft model (``head:<m>``) every call of which raises for the
  configuration (:mod:`.head_reads`): the pass makes a call ``self.<attr>.<m>(...)`` of the
  attribute holding the model in a method of the drafter.
* The draft model's forward (``forward``), for a raise every call of the forward makes
  whatever it is handed (:attr:`StepRaise.any_call`, a read of an attribute the per-layer
  module lacks): the pass reaches

  - a drafter function through which the route's forward entries enter the draft model
    (the last function of the drafter's own on an entry's hops: the plan's own way into
    the forward; its branches are taken as while serving, as the loop body's are), or
  - a call in a method of the drafter of the attribute such an entry calls the draft model
    through (``self.<attr>(...)``, ``self.<attr>.forward(...)``: the drafter's dummy run),
    judged as the calls on the way are (its arms and loops).

A call inside a ``for`` loop is made when the loop surely iterates: ``range(n)`` (or
``range(c, n)`` with a literal ``c``) whose count is at least one more than its start, read
by the partial evaluator, a conditional expression by the smaller of its arms when its test
is undecided, and a ``draft-loop-counts`` field of ``self`` (K) as at least 1 (a plan whose
step raises has a draft step).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...facts.extract import CallFact, FunctionFact, LoopFact, parse_pexpr
from ...facts.statements import PAttr, PCall, PConst, PExpr, PIfExp, PName
from ...index.index import ClassKey, FuncKey
from ..loops import FORWARD_METHODS
from ..partial_eval import Evaluator, Path, Unknown, Value, truth

if TYPE_CHECKING:
    from .startup import StartupPasses

CallSite = tuple[FuncKey, int, int]  # (function, line, col)


@dataclass(frozen=True)
class StartupTarget:
    """The functions a pass reaching is a hit (each with the line the route's hop names
    there: the loop's, or the entry's call), and the call sites a pass making is a hit."""

    kind: str  # "loop", "forward" or "head:<method>"
    functions: frozenset[tuple[FuncKey, int]]
    calls: frozenset[CallSite] = frozenset()

    def function_line(self, key: FuncKey) -> int | None:
        return next((line for k, line in self.functions if k == key), None)

    def is_call(self, key: FuncKey, c: CallFact) -> bool:
        return (key, c.line, c.col) in self.calls


def forward_target(part: "StartupPasses", proposer: ClassKey, model: ClassKey) -> StartupTarget | None:
    """The drafter functions and calls through which ``proposer`` calls ``model``'s forward
    (see the module docstring); None when the route's leg has no forward entry in the
    drafter's own code."""
    index = part.index
    leg = part.provider.route_values.leg(proposer, model)
    functions: dict[FuncKey, int] = {}
    attrs: set[tuple[str, ...]] = set()
    for path in leg.loops:
        for entry in path.entries:
            if entry.method not in FORWARD_METHODS:
                continue
            own = [h for h in entry.hops[1:] if _runs_for(part, proposer, (h.path, h.function))]
            if not own:
                continue
            last = own[-1]
            functions.setdefault((last.path, last.function), last.line)
            fn = index.function((last.path, last.function))
            if last == entry.call_hop and fn is not None:
                attrs |= {c.func[:2] for c in fn.calls if c.func and c.line == last.line and _model_call(c.func)}
    if not functions:
        return None
    calls: set[CallSite] = set()
    for key, fn in _methods(part, proposer):
        calls |= {(key, c.line, c.col) for c in fn.calls if c.func and _model_call(c.func) and c.func[:2] in attrs}
    return StartupTarget("forward", frozenset(functions.items()), frozenset(calls))


def head_target(part: "StartupPasses", proposer: ClassKey, attrs: set[str], head: str) -> StartupTarget | None:
    """The calls ``self.<attr>.<head>(...)`` in the methods ``proposer`` resolves, for the
    attributes that hold the draft model (a head method every call of which raises: a pass
    making one rejects at start-up); None when there is none."""
    calls = {(key, c.line, c.col) for key, fn in _methods(part, proposer) for c in fn.calls
             if c.func and len(c.func) == 3 and c.func[0] == "self" and c.func[1] in attrs and c.func[2] == head}
    return StartupTarget(f"head:{head}", frozenset(), frozenset(calls)) if calls else None


def _model_call(func: tuple[str, ...]) -> bool:
    """``self.<attr>(...)`` or ``self.<attr>.forward(...)``."""
    return func[0] == "self" and (len(func) == 2 or (len(func) == 3 and func[2] in FORWARD_METHODS))


def _runs_for(part: "StartupPasses", proposer: ClassKey, key: FuncKey) -> bool:
    """``key`` is the method ``proposer`` resolves by its name."""
    name = key[1].rpartition(".")[2]
    found = part.index.method(proposer, name)
    return found is not None and part.index.method_key(found[0], name) == key


def _methods(part: "StartupPasses", proposer: ClassKey) -> list[tuple[FuncKey, FunctionFact]]:
    """The methods ``proposer`` resolves (each once)."""
    out: dict[FuncKey, FunctionFact] = {}
    for cls in part.index.mro(proposer):
        for name in part.index.methods(cls):
            found = part.index.method(proposer, name)
            if found is not None:
                out.setdefault(part.index.method_key(found[0], name), found[1])
    return sorted(out.items())


def iterates(part: "StartupPasses", ev: Evaluator, fn: FunctionFact, key: FuncKey, loop_id: int,
             env: dict[str, Value]) -> bool:
    """The ``for`` loop ``loop_id`` of ``fn`` surely runs its body at least once."""
    lp: LoopFact | None = next((x for x in fn.loops if x.id == loop_id), None)
    pe = parse_pexpr(lp.iter.text) if lp is not None else None
    if not (isinstance(pe, PCall) and isinstance(pe.func, PName) and pe.func.id == "range" and not pe.keywords
            and 1 <= len(pe.args) <= 2):
        return False
    start = 0
    if len(pe.args) == 2:
        first = pe.args[0]
        if not (isinstance(first, PConst) and isinstance(first.value, int) and not isinstance(first.value, bool)):
            return False
        start = first.value
    least = _least(part, ev, pe.args[-1], key, env)
    return least is not None and least >= start + 1


def _least(part: "StartupPasses", ev: Evaluator, pe: PExpr, key: FuncKey, env: dict[str, Value]) -> int | None:
    """The least integer ``pe`` may be (None: no bound known)."""
    if isinstance(pe, PIfExp):
        t = truth(ev.eval(pe.test, Path(copy.deepcopy(env)), key))
        if t is not None:
            return _least(part, ev, pe.body if t else pe.orelse, key, env)
        a, b = _least(part, ev, pe.body, key, env), _least(part, ev, pe.orelse, key, env)
        return min(a, b) if a is not None and b is not None else None
    v = ev.eval(pe, Path(copy.deepcopy(env)), key)
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, Unknown) and isinstance(v.lower, int) and not isinstance(v.lower, bool):
        return v.lower
    if isinstance(pe, PAttr) and isinstance(pe.value, PName) and pe.value.id == "self" \
            and pe.attr in part.config.draft_loop_counts:
        return 1  # K: a plan whose step raises has a draft step
    return None
