"""Call resolution over every class a route can load (issue 18, MTP005).

:class:`CallProvider` fans ``self.model(...)`` out over the MTP model classes (those that
take part in step threading). A call that passes the step must also be bound against the
classes that cannot take it — a registered draft model with no step parameter, an EAGLE
head — so this provider resolves the same calls with the registry fan-out over every
class the registry tables name. Which of them a route really loads with the calling
drafter is the dispatch's answer (:mod:`auditor.analyses.dispatch.load_routes`).

:func:`step_arguments` and :func:`misbound_slot` say where a step passed *by position*
lands in each callee's signature: in its step parameter, or silently in another one.
"""

from __future__ import annotations

from typing import Iterable

from ..facts.extract import CallFact, FunctionFact, ParamKind
from ..index.index import ClassKey
from .calls import Binding, CallProvider, Obj
from .types import REGISTRY


class LoadCallProvider(CallProvider):
    def expand(self, objs: Iterable[ClassKey], model_class: ClassKey | None) -> list[Obj]:
        out: list[Obj] = []
        for o in objs:
            if o == REGISTRY:
                if self._registry_pairs is None:
                    # No registry in the tree (a fixture): the model classes the registry provider infers.
                    loadable = [m for m, _ in self.registry.registry()] or self.registry.model_classes()
                    self._registry_pairs = [(m, m) for m in loadable]
                out.extend(self._registry_pairs)
            else:
                out.append((o, model_class))
        return out


def step_arguments(call: CallFact, bindings: Iterable[Binding], param: str) -> tuple[set[int], set[int]]:
    """The positional arguments of ``call`` that are the step — one named as the step
    parameter, or one that some callee binds to its step parameter — and, of those, the
    ones some callee binds to it."""
    named = {i for i, a in enumerate(call.args) if a.chain == (param,)}
    to_step = {i for b in bindings for i, slot in enumerate(b.slots) if slot == param}
    return named | to_step, to_step


def misbound_slot(binding: Binding, callee: FunctionFact | None, index: int, to_step: set[int],
                  param: str) -> str | None:
    """The other parameter of ``callee`` that positional step argument ``index`` binds to,
    when that is a mistake: the callee has the step parameter (which keeps its default)
    or another callee of the same call binds the argument to it. None when it binds to
    the step parameter, to nothing known (``*args``, a ``*x`` in the call), when a
    keyword names the slot too (a TypeError), or when neither holds (a helper may take
    the step under its own name)."""
    if index >= len(binding.slots) or callee is None:
        return None
    slot = binding.slots[index]
    if slot == param or slot in binding.duplicates:
        return None
    return slot if param in callee.param_names or index in to_step else None


def keyword_only(callee: FunctionFact | None, param: str) -> bool:
    """``callee`` takes ``param`` only by keyword (after ``*`` or ``*args``)."""
    return callee is not None and any(p.name == param and p.kind is ParamKind.KEYWORD_ONLY for p in callee.params)
