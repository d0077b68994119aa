"""Per draft model class: which draft loops reach it, and whether step *i* selects
layer *i* there (the reachability table of a scan report)."""

from __future__ import annotations

from ..index.index import ClassKey
from ..model.findings import ClassRef, ClassReachability, LoopReach, ReachVerdict
from .base import Analyses, Provider
from .loops import LoopProvider, LoopResult, StepKind
from .registry import RegistryProvider
from .step_inert import StepInert
from .step_loss import ClassPath, class_path, constant_layer
from .types import TypeProvider

# A config field whose name carries one of these sizes the MTP layers (when a container
# reads several fields, these are the ones that count).
_COUNT_HINT = ("mtp", "nextn", "predict", "spec", "draft")
COUNT_HINTS = _COUNT_HINT  # issue 11: MTP006 asks whether a field names an MTP layer count


class ReachabilityProvider(Provider):
    dependencies = (TypeProvider, RegistryProvider, LoopProvider)

    def __init__(self, analyses: Analyses) -> None:
        super().__init__(analyses)
        self.types = self.dep(TypeProvider)
        self.registry = self.dep(RegistryProvider)
        self.loops = self.dep(LoopProvider)
        self.step_inert = StepInert(self.registry, self.loops.calls, self.config.threaded_params)

    def layer_count_fields(self, cls: ClassKey) -> list[str]:
        """Config fields that size the model's MTP layer container(s)."""
        fields: set[str] = set()
        for part in sorted(self.registry.model_parts(cls)):
            for container in self.types.containers(part):
                found = set(container.config_fields)
                hinted = {f for f in found if any(h in f.lower() for h in _COUNT_HINT)}
                fields.update(hinted or found)
        return sorted(fields)

    def loop_reach(self, lr: LoopResult, cls: ClassKey, label: str | None = None) -> LoopReach | None:
        """How one draft loop reaches one model class (None: it does not)."""
        path = class_path(lr, cls, self.config.threaded_params[0], self.config.head_methods)
        return self.path_reach(path, label) if path is not None else None

    def path_reach(self, path: ClassPath, label: str | None = None) -> LoopReach:
        """The row a loop's way into a class makes (a route's leg reads the same path)."""
        lr, entries, fwd, heads = path.loop, path.entries, path.forward, path.heads
        sels = path.selections
        # The plan's reading of the same path (``layers``): a step handed on that a layer
        # selection never gets is lost there, in the forward or in a head.
        reading = path.reading
        varying = [s for s in fwd if s.kind is StepKind.VARYING]
        loop_label = label or f"{lr.func[0]}:{lr.loop.line} {lr.func[1]}"
        if any(s.kind is StepKind.UNKNOWN for s in fwd) and not varying or reading.heads is StepKind.UNKNOWN:
            unknown = next(s for s in (*fwd, *heads) if s.kind is StepKind.UNKNOWN)
            detail = f"the step that selects {unknown.container} cannot be classified per step (unknown)"
            return LoopReach(loop_label, False, detail, list(unknown.hops), ReachVerdict.UNKNOWN)
        loss = reading.loss
        if loss is not None:
            held = "/".join(sorted({s.kind.value for s in reading.lost}))
            detail = f"{loss.lost_at}: {loss.reason} (via {loss.method}, {held})"
            if varying:
                detail += f"; step i selects {varying[0].container}[i] in the forward"
            return LoopReach(loop_label, False, detail, list(reading.lost[0].hops), ReachVerdict.LOST, lost=loss)
        if varying:
            via = ", ".join(sorted({s.method for s in sels if s.kind is StepKind.VARYING}))
            detail = f"step i selects {varying[0].container}[i] (via {via})"
            others = sorted({s.method for s in sels if s.kind is not StepKind.VARYING and s.position is None})
            if others:
                detail += f"; {', '.join(others)} still use(s) step 0"
            return LoopReach(loop_label, True, detail, list(varying[0].hops))
        if fwd and all(s.position is not None for s in fwd):
            fixed = fwd[0]
            layer = constant_layer(fwd)
            runs = f"layer {layer}" if layer is not None else "different layers (unknown)"
            detail = (f"every step {fixed.hops[-1].note} at a constant key, an entry of a container built from a "
                      f"literal, whatever the step: {runs}")
            return LoopReach(loop_label, False, detail, list(fixed.hops),
                             ReachVerdict.UNKNOWN if layer is None else None)
        if fwd:
            kinds = "/".join(sorted({s.kind.value for s in fwd}))
            detail = f"every step selects {fwd[0].container} with the default/constant step ({kinds}): layer 0"
            return LoopReach(loop_label, False, detail, list(fwd[0].hops))
        if not sels and self.step_inert.is_inert(path.model_class, path.entered):
            stack = self.step_inert.stack(path.model_class)
            detail = inert_detail(path.model_class[1], self.config.threaded_params[0], stack)
            return LoopReach(loop_label, False, detail, list(entries[0].hops), stack=stack)
        # As a plan: no selection through forward is no answer, whatever a head selects.
        only = f" through forward (only in {', '.join(sorted({s.method for s in sels}))})" if sels else ""
        return LoopReach(loop_label, False, f"reached, but no layer selection found on the path{only}",
                         list(entries[0].hops), ReachVerdict.UNKNOWN)

    def reachability(self) -> list[ClassReachability]:
        loops = self.loops.loop_results()
        out = []
        for cls in self.registry.model_classes():
            rep = ClassReachability(ClassRef(*cls), self.registry.architectures(cls), self.layer_count_fields(cls))
            for lr in loops:
                reach = self.loop_reach(lr, cls)
                if reach is not None:
                    rep.loops.append(reach)
            out.append(rep)
        return out


def inert_detail(model: str, param: str, stack: str | None) -> str:
    """What a reachability row and a plan's step say of a step-inert model (:mod:`.step_inert`):
    with a layer container it iterates (``stack``), every step runs all of its layers."""
    runs = (f"every step runs every layer of {stack} (it iterates them), whatever the step" if stack
            else "every step runs the same layer(s): layer 0")
    return f"{model} takes {param} and only hands it on to methods that never read it: no layer is selected by the step, {runs}"
