"""Draft models that take the step and never use it (issue 18: a model that runs its
block(s) without selecting a layer by the step).

Some draft models declare the threaded parameter (so the loop analysis enters them) and
only hand it on, to methods that never read it: ``Gemma4MTP.forward(..., spec_step_idx)``
calls ``self.model(..., spec_step_idx)``, whose ``forward`` runs ``for layer in
self.layers`` and never reads its ``spec_step_idx``. Nothing there selects a layer by the
step: every draft step runs the same modules, whatever the loop hands (nn.Module semantics:
the model computes from its arguments only). When the model iterates a layer container
(:meth:`StepInert.stack`) every step runs all of its layers: the plan names no single forward
layer (layer 0 only when the model builds one); else the one module it runs, layer 0, as for
a class that takes no step at all (dispatch/stepless).

A model is *step-inert*, as a draft loop enters it, when every method the loop calls in it
that can receive the step (declares it, or takes ``**kwargs``) reads it only as a whole
argument of calls (``FunctionFact.arg_only``: a
parameter read anywhere else, a nested function or lambda included, is a use), each call
resolves, and each callee's parameter that receives it is step-inert in the same sense; and
no method of a class whose code runs as part of the model (``RegistryProvider.model_parts``)
reads ``self.<step>``. A call the analysis cannot resolve, a ``*args`` the step
may sit in, a dict of keyword arguments passed as a value, or a search past its depth is a
use: the model is then not step-inert and its plan stays unknown.
"""

from __future__ import annotations

from ..facts.extract import FunctionFact
from ..index.index import ClassKey, FuncKey
from .calls import CallProvider
from .registry import RegistryProvider

#: how deep the step may be handed on through calls before the search gives up (a use)
HAND_ON_DEPTH = 8

# (function, receiver class, the slot receiving the step: a parameter, or the key under
# which it sits in the function's **kwargs)
_Slot = tuple[FuncKey, ClassKey | None, str, str | None]


class StepInert:
    def __init__(self, registry: RegistryProvider, calls: CallProvider, params: list[str]) -> None:
        self.registry = registry
        self.calls = calls
        self.index = registry.index
        self.params = params
        self._memo: dict[tuple[ClassKey, tuple[FuncKey, ...]], bool] = {}

    def is_inert(self, model: ClassKey, entered: tuple[FuncKey, ...]) -> bool:
        """Whether ``model``, entered by a draft loop through the methods ``entered``, only
        hands the step on (see the module's docstring)."""
        key = (model, entered)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = bool(entered) and self._inert(model, entered)
        return found

    def _inert(self, model: ClassKey, entered: tuple[FuncKey, ...]) -> bool:
        for part in sorted(self.registry.model_parts(model)):
            for method in self.index.methods(part).values():
                if any("self." + p in method.live for p in self.params):
                    return False
        for fkey in entered:
            fn = self.index.function(fkey)
            if fn is None:
                return False
            for p in self.params:
                slot = self._slot(fn, p)
                if slot is not None and not self._hands_on_only((fkey, model, *slot), 0, set()):
                    return False
        return True

    def stack(self, model: ClassKey) -> str | None:
        """A layer container of the model that its code iterates over (``for layer in
        self.layers``): a step-inert model runs every layer of it at every step (None: none)."""
        for part in sorted(self.registry.model_parts(model)):
            for c in self.registry.types.containers(part):
                if c.iterated:
                    return f"{c.owner[1]}.{c.attr}"
        return None

    @staticmethod
    def _slot(fn: FunctionFact, p: str) -> tuple[str, str | None] | None:
        """Where ``fn`` receives a step passed to it by name: its parameter, else under key
        ``p`` of its ``**kwargs`` (None: it cannot take it)."""
        if p in fn.param_names:
            return p, None
        kw = fn.kwargs_param
        return (kw, p) if kw is not None else None

    def _hands_on_only(self, slot: _Slot, depth: int, seen: set[_Slot]) -> bool:
        if slot in seen:
            return True
        seen.add(slot)
        fkey, ctx, name, key = slot
        fn = self.index.function(fkey)
        if fn is None or depth > HAND_ON_DEPTH:
            return False
        if name not in fn.arg_only:
            return False
        for call in fn.calls:
            positional = [i for i, a in enumerate(call.args) if a.chain == (name,)]
            keywords = [k.name for k in call.keywords if k.value.chain == (name,)]
            expanded = any(d.chain == (name,) for d in call.star_kwargs)
            if any(d.chain == (name,) for d in call.star_args):
                return False  # its slot in the callee is unknown
            if not (positional or keywords or expanded):
                continue
            if key is not None and (positional or keywords):
                return False  # the kwargs dict itself handed on as a value
            targets = self.calls.resolve_call(fkey, fn, ctx, call.func)
            if not targets:
                return False
            for tgt in targets:
                callee = self.index.function(tgt.func)
                if callee is None:
                    return False
                b = self.calls.bind(call, fn, tgt)
                receiving = [p for p, src in b.params.items() if src.expr.chain == (name,)]
                nexts: list[tuple[str, str | None]] = []
                for r in receiving:
                    # a keyword landing in **kwargs is a virtual parameter of the callee
                    nexts.append((r, None) if r in callee.param_names else (callee.kwargs_param or r, r))
                if expanded:
                    if key is None:
                        return False  # ``**name`` of a non-dict parameter: not modelled
                    s = self._slot(callee, key)
                    if s is None:
                        return False  # the callee cannot take it (a TypeError, not a plan)
                    nexts.append(s)
                if not nexts:
                    return False
                for r, k in nexts:
                    if not self._hands_on_only((tgt.func, tgt.ctx, r, k), depth + 1, seen):
                        return False
        return True
