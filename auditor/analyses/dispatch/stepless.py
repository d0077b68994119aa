"""Draft model classes that select no layer by the step (issue 18, Deliver 1: the route goes
on to the model class even when nothing there reads the step).

The loop analysis follows a draft loop's call into a draft model a registry loader built
(``self.model(...)``) into the classes that take part in step threading: a method of the
class, or of a module it holds, takes or reads a threaded parameter. A registered class that
takes no part — its ``forward`` takes the step into ``**kwargs`` and never reads it, or
declares none — is loaded at that same call site, so the loop reaches it there. Nothing in
it selects a layer by the step: every draft step runs the same layer(s), layer 0 of a
container the step never indexes, whatever the loop hands (nn.Module semantics: the model
computes from its arguments only).

The architectures such classes are registered for, among those an MTP route loads (an
override branch writes the architecture after fixing the draft's model type as a literal),
are planned by ``layers --all`` as well (:meth:`StepFree.architectures`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...index.index import ClassKey
from ..loops import FORWARD_METHODS, LoopEntry, LoopResult, StepKind
from .part import DispatchPart


@dataclass(frozen=True)
class StepFreeEntry:
    """A draft loop's call into a registry-loaded draft model, made with ``model`` loaded."""

    loop: LoopResult
    entry: LoopEntry  # the loop's entry at that call site (into another class the fan-out follows)
    method: str  # the model's method the call runs (``__call__`` if it has one, else ``forward``)
    takes: str | None  # the model's parameter that takes the step: its own name, or ``**kwargs``


class StepFree(DispatchPart):
    def is_step_free(self, model: ClassKey) -> bool:
        """No method of the model's classes, or of the modules it holds, takes or reads a
        threaded parameter (so the loop analysis never enters it)."""
        return model not in self.registry.model_classes() and not self.registry.step_aware(model)

    def entry(self, proposer: ClassKey, model: ClassKey) -> StepFreeEntry | None:
        """The first draft loop of ``proposer`` that calls a registry-loaded draft model's
        ``forward``, for a step-free ``model`` (None: not step-free, or no such call)."""
        if not self.is_step_free(model):
            return None
        param = self.params[0]
        method = next((m for m in FORWARD_METHODS[::-1] if self.index.method(model, m) is not None), None)
        if method is None:
            return None
        found = self.index.method(model, method)
        assert found is not None
        fn = found[1]
        takes = param if param in fn.param_names else (f"**{fn.kwargs_param}" if fn.kwargs_param else None)
        for r in self.provider.drafting.drafter_loops(proposer):
            for e in r.entries:
                if e.param == param and e.method in FORWARD_METHODS:
                    return StepFreeEntry(r, e, method, takes)
        return None

    def why(self, free: StepFreeEntry, model: ClassKey) -> tuple[bool, str]:
        """Whether the call runs (False: it passes the step to a method that cannot take it,
        a TypeError), and what the steps' ``why`` says."""
        param, e = self.params[0], free.entry
        label = f"{free.loop.func[1]} ({free.loop.func[0]}:{free.loop.loop.line})"
        call = f"{e.call_hop.path}:{e.call_hop.line}"
        passes = e.kind is not StepKind.ABSENT
        if passes and free.takes is None:
            return False, (f"{label} passes {param} ({e.kind.value}) at {call} to {model[1]}.{free.method}, which takes "
                           f"no {param} and no **kwargs: a TypeError, not a plan")
        handed = (f"passes {param} ({e.kind.value}) at {call}; {model[1]}.{free.method} takes it into {free.takes} and "
                  f"never reads it" if passes else f"hands {model[1]}.{free.method} no {param} at {call}")
        return True, (f"{label} {handed}: {model[1]} takes no per-step selection (no method of its classes or of the "
                      f"modules it holds takes or reads {param}), so every step runs the same layer(s): layer 0")

    def planned_architectures(self) -> list[tuple[str, ClassKey | None]]:
        """``layers --all``: the MTP architectures, and those :meth:`architectures` adds."""
        found: dict[str, ClassKey | None] = dict(self.provider.registry_lookup.mtp_architectures())
        for arch in self.architectures():
            found.setdefault(arch, None)
        return sorted(found.items())

    def architectures(self) -> list[str]:
        """Architectures an MTP route loads whose registered classes are all step-free: an
        override branch writes them after fixing a field as a literal (the draft's model type)."""
        lookup, families = self.provider.registry_lookup, self.provider.family_facts
        registered = set(lookup.architectures())
        mtp = {a for a, _ in lookup.mtp_architectures()}
        written = {a for fam in self.provider.families() for a in fam.architectures} & registered
        return sorted(a for a in written - mtp
                      if any(fixed for fixed in families.arch_literals(a))
                      and all(self.is_step_free(c) for c in lookup.classes_for(a)))
