"""The route as one value (issue 18, deliver 1): per runner, factory branch -> drafter ->
its draft loops -> draft model class -> the config fields its layer container is built from
-> the forward and head selections each draft step reaches, and where compilation or graph
capture freezes the step, with the route's condition on the configuration.

One analysis builds them (:class:`RouteValues`): a :class:`RouteLeg` per (drafter, draft
model class), memoised, and a :class:`DispatchRoute` per model route (:mod:`.routes`) holding
one leg per class it loads. The views read the legs instead of assembling the same pieces
from the drafter's loops, the reachability provider and the capture analysis each on its
own: the per-step plan (:mod:`.planner`: loop, layer-count field, per-step verdicts, the
step an assert fails at), its compiled view (:mod:`.engine_modes`) and the forced view
(:mod:`auditor.services.forced_plan`); ``history --layers`` and ``layers --all`` summarise
those plans.

A leg depends on no configuration: the layer count is the value the configuration gives
the leg's ``layer_count_fields`` (the planner evaluates it over the draft config), K the
number of steps the reading is applied to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...index.index import ClassKey
from ...model.findings import Hop
from ..capture import FrozenStep
from ..loops import LoopResult, LoopSelection
from ..step_loss import ClassPath, PathReading, class_path
from .model import DecisionRow, ModelRoute
from .part import DispatchPart

if TYPE_CHECKING:
    from .provider import DispatchProvider


@dataclass(frozen=True)
class RouteLeg:
    """What one drafter's draft loops do with one draft model class.

    ``loops``: every draft loop of the drafter (explored with ``self`` of the drafter) that
    enters the class, each with the selections it reaches through forward and through the
    heads and how the threaded step arrives there per draft step (:class:`ClassPath`, the
    reading the reachability table makes of a loop too); ``path`` is the first, the one a
    plan reports. ``frozen``: where torch.compile or a captured graph stops the step
    mattering on that loop (the compiled engine mode). No loop: ``path`` is None."""

    drafter: ClassKey
    model_class: ClassKey
    loops: tuple[ClassPath, ...]
    layer_count_fields: tuple[str, ...]  # the config fields that size the class's layer container(s)
    frozen: tuple[FrozenStep, ...] = ()

    @property
    def path(self) -> ClassPath | None:
        return self.loops[0] if self.loops else None

    @property
    def reading(self) -> PathReading | None:
        return self.loops[0].reading if self.loops else None

    @property
    def loop(self) -> Hop | None:
        return self.loops[0].loop.hop if self.loops else None

    @property
    def forward(self) -> tuple[LoopSelection, ...]:
        return self.loops[0].forward if self.loops else ()

    @property
    def heads(self) -> tuple[LoopSelection, ...]:
        return self.loops[0].heads if self.loops else ()

    @property
    def loop_label(self) -> str:
        """How a plan names the loop: ``func (path:line)``."""
        if not self.loops:
            return ""
        r = self.loops[0].loop
        return f"{r.func[1]} ({r.func[0]}:{r.loop.line})"

    def path_of(self, loop: LoopResult) -> ClassPath | None:
        """The leg's way into the class through ``loop`` (one of the drafter's explored loops)."""
        return next((p for p in self.loops if p.loop is loop), None)


@dataclass(frozen=True)
class DispatchRoute:
    """One route dispatch can take: the factory branch (``site``, under ``conditions``, the
    guards left unknown with the side taken) that builds ``drafter`` on ``runner`` for a
    draft of ``architecture``, and per draft model class it can load, its leg."""

    runner: str
    architecture: str
    drafter: ClassKey
    site: Hop
    conditions: tuple[DecisionRow, ...]
    legs: tuple[RouteLeg, ...]

    @property
    def models(self) -> tuple[ClassKey, ...]:
        return tuple(leg.model_class for leg in self.legs)

    def leg(self, model: ClassKey) -> RouteLeg | None:
        return next((lg for lg in self.legs if lg.model_class == model), None)

    def describe(self) -> str:
        return " and ".join(d.describe() for d in self.conditions)


class RouteValues(DispatchPart):
    def __init__(self, provider: DispatchProvider) -> None:
        super().__init__(provider)
        self._legs: dict[tuple[ClassKey, ClassKey], RouteLeg] = {}
        self._routes: dict[ModelRoute, DispatchRoute] = {}

    def leg(self, drafter: ClassKey, model: ClassKey) -> RouteLeg:
        """The leg of ``drafter`` into ``model`` (memoised: the drafter's loops are)."""
        key = (drafter, model)
        found = self._legs.get(key)
        if found is not None:
            return found
        fields = tuple(self.reach.layer_count_fields(model))
        param, heads = self.params[0], self.config.head_methods
        paths = tuple(p for r in self.provider.drafting.drafter_loops(drafter)
                      if (p := class_path(r, model, param, heads)) is not None)
        frozen = tuple(fs for fs in self.capture.frozen_in(paths[0].loop, drafter) if fs.model_class == model) \
            if paths else ()
        found = RouteLeg(drafter, model, paths, fields, frozen)
        self._legs[key] = found
        return found

    def route(self, mr: ModelRoute) -> DispatchRoute:
        found = self._routes.get(mr)
        if found is None:
            found = DispatchRoute(mr.runner, mr.architecture, mr.drafter, mr.site, mr.conditions,
                                  tuple(self.leg(mr.drafter, m) for m in mr.models))
            self._routes[mr] = found
        return found

    def routes(self) -> list[DispatchRoute]:
        """Every model route (:meth:`.routes.RouteMap.model_routes`) as one value."""
        return [self.route(mr) for mr in self.provider.route_map.model_routes()]
