"""Model routes: per runner, which drafter the factories build for each registered MTP
draft architecture, over any K and any draft-config field the override code does not fix.

A route is factory branch -> drafter -> draft model class (the architecture's registered
classes, platform copies included). It is evaluated with the draft config the override
family writes for that architecture as literals (``model_type = "x_mtp"``, the field its
guard compares with a literal) and every other field unknown, so a guard that tests the
model type is decided, and a guard on a field no family fixes stays symbolic: it is the
route's condition. A method and architecture the speculative config's construction rejects
whatever else is given (a draft that declares another method's speculator) take no route. A
drafter no route pairs with a model class never runs that model: a finding or reachability
row pairing them describes a configuration vLLM cannot build.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...index.index import ClassKey, FuncKey
from ..partial_eval import Obj, Value
from .model import (
    DecisionRow,
    ModelRoute,
    Pairing,
    paired_when,
    route_alternatives,
    route_condition,
)
from .part import DispatchPart

if TYPE_CHECKING:
    from .provider import DispatchProvider


class RouteMap(DispatchPart):
    def __init__(self, provider: DispatchProvider) -> None:
        super().__init__(provider)
        self._routes: list[ModelRoute] | None = None
        self._pairing: dict[tuple[FuncKey, ClassKey | None, ClassKey], Pairing] = {}

    def model_routes(self) -> list[ModelRoute]:
        """Every (runner, architecture, drafter) dispatch can take for an MTP method."""
        if self._routes is not None:
            return self._routes
        archs = sorted({a for a, _ in self.provider.registry_lookup.mtp_architectures()})
        mtp = set(self.registry.model_classes())
        out: list[ModelRoute] = []
        for method in self.config.mtp_methods:
            for arch in archs:
                models = tuple(sorted(c for c in self.provider.registry_lookup.classes_for(arch) if c in mtp))
                out += self.routes_for(method, arch, models)
        self._routes = list(dict.fromkeys(out))
        return self._routes

    def routes_for(self, method: str, arch: str, models: tuple[ClassKey, ...]) -> list[ModelRoute]:
        """The routes the factories take for ``method`` with a draft of architecture ``arch``
        (loading ``models``): once per set of literals an override branch that picks it fixes."""
        r = self.roles
        field_name = self.config.override_field[0]
        out: list[ModelRoute] = []
        for fixed in self.provider.family_facts.arch_literals(arch) or [()]:
            fields: dict[str, Value] = dict(fixed)
            fields[field_name] = [arch]
            hf = Obj(r["hf"], fields)  # open: what the family does not fix is unknown
            world = self.provider.route_worlds.open_world(method, hf)
            if self.provider.route_worlds.route_rejection(method, world) is not None:
                continue  # no configuration of this method loads this draft: vLLM rejects them all
            for runner, factories in self.provider.location.factories().items():
                for fkey in factories:
                    for cls, site, chain in self.provider.factory_runs.run_factory(fkey, world):
                        conds = tuple(DecisionRow.of(d) for d in chain if route_condition(d))
                        out.append(ModelRoute(runner, arch, models, cls, site, conds))
        return out

    def pairing(self, fkey: FuncKey, model: ClassKey) -> Pairing:
        """Whether function ``fkey`` (drafter code) runs against draft model ``model`` on
        some route, and when. Code no built drafter runs (a model's own code, a helper) and
        model classes no route names (no dispatch in the tree, an unregistered class) are
        paired as the drafter-level pairing says."""
        cls = self.types.defining_class(fkey)
        key = (fkey, cls, model)
        found = self._pairing.get(key)
        if found is not None:
            return found
        base = self.provider.precision.pairing(fkey)
        routes = [rt for rt in self.model_routes() if model in rt.models]
        name = fkey[1].rpartition(".")[2]

        def runs(drafter: ClassKey) -> bool:
            hit = self.index.method(drafter, name)
            return hit is not None and hit[0] == cls

        built = {c for keys in self.provider.location.factories().values() for f in keys
                 for c in self.provider.location.built_classes(f)}
        if cls is None or not routes or not base.paired or not any(runs(b) for b in built):
            found = base
        else:
            mine = [rt for rt in routes if runs(rt.drafter)]
            if not mine:
                found = Pairing(False, "")
            elif any(not rt.conditions for rt in mine) or all(runs(rt.drafter) for rt in routes):
                found = paired_when("", mine)
            else:
                found = paired_when(route_alternatives(mine), mine)
        self._pairing[key] = found
        return found

    def drafters_for(self, model: ClassKey, runner: str | None = None) -> list[ClassKey]:
        """The drafters some route builds for ``model`` (on ``runner``, or any)."""
        return sorted({rt.drafter for rt in self.model_routes()
                       if model in rt.models and (runner is None or rt.runner == runner)})
