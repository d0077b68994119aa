"""One draft loop's way into one model class (:class:`ClassPath`: its entries, the layer
selections it reaches through forward and through the heads, and how the step arrives there
per draft step) and where the step is lost on it: the one reading both the per-step plan
(``layers``, through the routes' legs) and the reachability table make of a loop, so the two
views cannot disagree on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..index.index import ClassKey, FuncKey
from ..model.findings import StepLoss
from .loops import FORWARD_METHODS, KIND_ORDER, LoopEntry, LoopResult, LoopSelection, StepKind


def first_kind(sels: list[LoopSelection] | tuple[LoopSelection, ...]) -> StepKind | None:
    """The selections' kind: the first of :data:`KIND_ORDER` among theirs (None: no selection)."""
    kinds = {s.kind for s in sels}
    return next((k for k in KIND_ORDER if k in kinds), None)


def constant_layer(sels: list[LoopSelection] | tuple[LoopSelection, ...]) -> int | None:
    """The one layer selections that take no per-step step run: step 0's (layer 0) for a
    selection by the step, the entry's position for a read at a constant key of a literal
    container; None when they name different layers (or there are none)."""
    found = {s.position if s.position is not None else 0 for s in sels
             if s.kind in (StepKind.CONSTANT, StepKind.ABSENT)}
    return found.pop() if len(found) == 1 else None


@dataclass(frozen=True)
class PathReading:
    """What a loop hands one model class's layer selections, per draft step."""

    forward: StepKind | None  # the forward's selections (None: no selection through forward)
    heads: StepKind | None  # the per-layer heads' (compute_logits / get_top_tokens)
    lost: tuple[LoopSelection, ...]  # the selections the step does not reach although it is handed on

    @property
    def unknown(self) -> bool:
        return StepKind.UNKNOWN in (self.forward, self.heads)

    @property
    def loss(self) -> StepLoss | None:
        """Where the step is lost (None: it is not): the first selection that loses it,
        and every function on the paths of those that do."""
        if not self.lost:
            return None
        first = self.lost[0]
        h = first.hops[-1]
        return StepLoss(frozenset((hop.path, hop.function) for s in self.lost for hop in s.hops), h.path, h.line,
                        h.function, first.container, first.method)


def read_path(entries: list[LoopEntry], forward: list[LoopSelection], heads: list[LoopSelection]) -> PathReading:
    """The step is lost in the forward when the loop hands forward a varying step and the
    forward selects with another; in the heads when the forward selects by the step and
    the heads select with step 0 or a constant (step i runs layer i, its logits layer 0's).
    A read at a constant key of a literal container (``LoopSelection.position``) selects no
    layer by the step, in the forward or a head: like a module no step selects (a shared
    head), it loses nothing."""
    fkind, hkind = first_kind(forward), first_kind(heads)
    entry_varies = any(e.kind is StepKind.VARYING for e in entries if e.method in FORWARD_METHODS)
    lost: list[LoopSelection] = []
    if fkind is not StepKind.VARYING and entry_varies:
        # A read at a constant key of a literal container selects no layer by the step: the
        # same entry whatever the loop hands (as a model that never reads the step).
        lost = [s for s in forward if s.kind is not StepKind.VARYING and s.position is None]
    elif fkind is StepKind.VARYING and hkind not in (None, StepKind.VARYING):
        lost = [s for s in heads if s.kind is not StepKind.VARYING and s.position is None]
    return PathReading(fkind, hkind, tuple(lost))


@dataclass(frozen=True, eq=False)  # one per explored loop and class: identity is equality
class ClassPath:
    """One draft loop's way into one model class: its entries into the class (every
    threaded parameter), the selections reached through forward (``forward``, ``__call__``)
    and through the head methods, and the reading of the threaded step over them."""

    loop: LoopResult
    model_class: ClassKey
    entries: tuple[LoopEntry, ...]
    forward: tuple[LoopSelection, ...]
    heads: tuple[LoopSelection, ...]
    reading: PathReading

    @property
    def selections(self) -> tuple[LoopSelection, ...]:
        """Every selection of the class the loop reaches (any entry method)."""
        return tuple(s for s in self.loop.selections if s.model_class == self.model_class)

    @property
    def entered(self) -> tuple[FuncKey, ...]:
        """The methods of the class the loop calls (each once, in order)."""
        return tuple(dict.fromkeys(e.callee for e in self.entries))


def class_path(lr: LoopResult, cls: ClassKey, param: str, head_methods: Sequence[str]) -> ClassPath | None:
    """How loop ``lr`` reaches class ``cls`` (None: it does not enter it), the step read as
    ``param`` (the first threaded parameter)."""
    entries = tuple(e for e in lr.entries if e.model_class == cls)
    if not entries:
        return None
    sels = [s for s in lr.selections if s.model_class == cls]
    fwd = tuple(s for s in sels if s.method in FORWARD_METHODS)
    heads = tuple(s for s in sels if s.method in head_methods)
    reading = read_path([e for e in entries if e.param == param], list(fwd), list(heads))
    return ClassPath(lr, cls, entries, fwd, heads, reading)
