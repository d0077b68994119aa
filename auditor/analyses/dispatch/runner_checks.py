"""A runner's own checks of what it supports (issue 18: V2 rejects ``parallel_drafting`` for an
MTP draft in ``VllmConfig._validate_v2_model_runner``, outside the speculative config's
methods).

The guarded raises of the runner's validation functions (``runner-validations``) are
evaluated over the configuration, ``self`` being the engine config (its speculative config
known, everything else unknown): a raise whose every enclosing test is decided the way that
reaches it rejects the configuration, with vLLM's message as written and file:line.

Two shapes of vLLM's validation are read besides plain tests:

* **Collect, then raise.** ``unsupported = self._collect()`` then ``if unsupported: raise``,
  where the collecting method builds a local list from ``[]`` with guarded ``append`` calls
  (``FunctionFact.appends``; an ``extend`` of it adds what another list holds, none or
  several items) and returns it: the list is non-empty when one append's tests all hold (not
  in a loop), empty when every append and extend has a test decided against it, else unknown.
  The message names what is known to be collected (an undecided item may come before them).
* **Both arms raise.** ``if not HAS_TRITON: raise ...`` before the raise: the later raise
  runs when the test is false, the earlier one when it is true, so an undecided test there
  does not keep the configuration from being rejected (by one of the two).
"""

from __future__ import annotations

import copy

from ...facts.extract import FunctionFact, GuardedAppend, GuardedRaise, PAttr, PCall, PConst, PExpr, PFormat, PName, POpaque
from ...index.index import ClassKey, FuncKey
from ..partial_eval import Evaluator, Obj, Value, truth
from .constructors import constructor_path
from .load_checks import other_arm_raises
from .outcomes import Rejection
from .part import DispatchPart


class RunnerChecks(DispatchPart):
    def rejections(self, runner: str, spec: Obj) -> list[Rejection]:
        out: list[Rejection] = []
        ev = self.evaluator()
        for key in self.provider.location.runner_validations(runner):
            fn = self.index.function(key)
            if fn is None:
                continue
            owner = self.types.defining_class(key)
            root = Obj(self.roles["root"], roles={self.roles["speculative"]: copy.deepcopy(spec)})
            env: dict[str, Value] = {"self": root}
            for r in fn.raises:
                held = self._raise_holds(ev, key, fn, env, r, owner)
                if held is not None:
                    out.append(Rejection(key[0], r.line, key[1], r.exc + held, "validation"))
        return out

    def _raise_holds(self, ev: Evaluator, key: FuncKey, fn: FunctionFact, env: dict[str, Value], r: GuardedRaise,
                     owner: ClassKey | None) -> str | None:
        """What completes the message when ``r`` is reached ('' or the collected items),
        None when it is not (or may not be)."""
        extra = ""
        for i, (g, neg) in enumerate(zip(r.guards, r.negated)):
            collected = self._collected(ev, key, fn, env, g, owner)
            if collected is not None:
                items, decided, complete = collected
                t: bool | None = bool(items) if decided else None
                if t and not neg and isinstance(g, PName):
                    extra = f" ({g.id}: {', '.join(items)}{'' if complete else '; an item not decided may come first'})"
            else:
                p = constructor_path(ev, key, fn, copy.deepcopy(env), g, r.line)
                t = truth(ev.eval(g, p, key))
            if t is None and neg and other_arm_raises(fn, r, i):
                continue  # the other arm raises too
            if t is None or t == neg:
                return None
        return extra

    def _collected(self, ev: Evaluator, key: FuncKey, fn: FunctionFact, env: dict[str, Value], g: PExpr,
                   owner: ClassKey | None) -> tuple[list[str], bool, bool] | None:
        """A test that is a local holding what a collecting method returns: (the items known
        to be collected, whether the list's emptiness is decided, whether no other item may be
        collected); None: not that shape."""
        if not isinstance(g, PName) or g.id not in fn.local_defs:
            return None
        call = fn.local_defs[g.id]
        if not (isinstance(call, PCall) and not call.args and not call.keywords and isinstance(call.func, PAttr)
                and isinstance(call.func.value, PName) and call.func.value.id == "self" and owner is not None):
            return None
        found = self.index.method(owner, call.func.attr)
        if found is None:
            return None
        cowner, cfn = found
        ckey = (cowner[0], f"{cowner[1]}.{call.func.attr}")
        appends = _collecting_list(cfn)
        if appends is None:
            return None
        items: list[str] = []
        undecided = False
        for a in appends:
            states: list[bool | None] = []
            for t_expr, neg in zip(a.guards, a.negated):
                q = constructor_path(ev, ckey, cfn, copy.deepcopy(env), t_expr, a.line)
                t = truth(ev.eval(t_expr, q, ckey))
                states.append(None if t is None else t != neg)
            if False in states:
                continue  # this append does not run
            if a.in_loop or a.many or None in states:
                undecided = True  # it may run, or (an extend) add nothing
                continue
            items.append(a.value.value if isinstance(a.value, PConst) and isinstance(a.value.value, str)
                         else a.value.text if isinstance(a.value, (POpaque, PFormat)) else f"the item appended at line {a.line}")
        return items, bool(items) or not undecided, not undecided


def _collecting_list(fn: FunctionFact) -> tuple[GuardedAppend, ...] | None:
    """The appends of the one local list ``fn`` builds from ``[]`` and returns, when nothing
    else changes it (no other call on it, not handed to a call, assigned once)."""
    if len(fn.returns) != 1 or fn.returns[0].chain is None or len(fn.returns[0].chain) != 1:
        return None
    name = fn.returns[0].chain[0]
    values = fn.assigns.get(name, ())
    if len(values) != 1 or values[0].text != "[]":
        return None
    for c in fn.calls:
        if c.func and c.func[0] == name and c.func not in ((name, "append"), (name, "extend")):
            return None
        if any(name in e.names for e in (*c.args, *(k.value for k in c.keywords), *c.star_args, *c.star_kwargs)):
            return None
    return tuple(a for a in fn.appends if a.target == name)
