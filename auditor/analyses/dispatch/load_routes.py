"""Load routes (issue 18, MTP005): every draft model class a route can load, step-aware
or not, with the drafter that loads it and the route's condition.

The model routes (:mod:`.routes`) pair drafters with the MTP classes that take part in
step threading. A call that *passes* the step must also be checked against the classes
that cannot take it: a registered class of an MTP architecture whose ``compute_logits``
has no step parameter, or an EAGLE head loaded by a drafter that MTP shares with the
``draft-model-methods`` (``eagle``, ``eagle3``). Load routes are

* the model routes, with every registered class of their architecture;
* for each MTP method, the architectures with no step-aware class that an override
  branch writes after fixing a field as a literal (``model_type = "x_mtp"``);
* for each of ``draft-model-methods``, the other registered architectures (a draft
  checkpoint names them itself, or an override branch only renames them).

Every guard the run cannot decide stays in the route's condition.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...index.index import ClassKey, FuncKey
from .model import ModelRoute, Pairing, paired_when, route_alternatives
from .part import DispatchPart

if TYPE_CHECKING:
    from .provider import DispatchProvider


class LoadRoutes(DispatchPart):
    def __init__(self, provider: DispatchProvider) -> None:
        super().__init__(provider)
        self._routes: list[ModelRoute] | None = None
        self._methods: dict[ModelRoute, tuple[str, ...]] = {}
        self._running: dict[tuple[FuncKey, ClassKey | None, ClassKey | None], list[ModelRoute] | None] = {}
        self._running_any: dict[FuncKey, list[ModelRoute] | None] = {}  # per fkey, whatever model and drafter
        self._drafters: list[ClassKey] | None = None  # the distinct drafters of the load routes
        self._runs: dict[tuple[ClassKey, FuncKey], bool] = {}  # kept once the index is frozen
        self._built: set[ClassKey] | None = None  # the classes the factories build (idem)

    def load_routes(self) -> list[ModelRoute]:
        if self._routes is not None:
            return self._routes
        lookup = self.provider.registry_lookup
        route_map = self.provider.route_map
        out: list[ModelRoute] = []

        def add(routes: list[ModelRoute], methods: tuple[str, ...]) -> None:
            for rt in routes:
                self._methods[rt] = tuple(dict.fromkeys(self._methods.get(rt, ()) + methods))
                out.append(rt)

        add([replace(rt, models=tuple(sorted(lookup.classes_for(rt.architecture))))
             for rt in route_map.model_routes()], tuple(self.config.mtp_methods))
        mtp_archs = {a for a, _ in lookup.mtp_architectures()}
        registered = set(lookup.architectures())
        written = {a for fam in self.provider.families() for a in fam.architectures} & registered
        # An override branch that fixes a field as a literal on the way to the architecture
        # (the draft's model type) makes an MTP draft of it; one that only renames the
        # architecture leaves a head whose checkpoint picks its method.
        families = self.provider.family_facts
        mtp_written = {a for a in written if any(fixed for fixed in families.arch_literals(a))}
        for method in self.config.mtp_methods:
            for arch in sorted(mtp_written - mtp_archs):
                add(route_map.routes_for(method, arch, tuple(sorted(lookup.classes_for(arch)))), (method,))
        for method in self.config.draft_model_methods:
            for arch in sorted(registered - mtp_written - mtp_archs):
                add(route_map.routes_for(method, arch, tuple(sorted(lookup.classes_for(arch)))), (method,))
        self._routes = list(dict.fromkeys(out))
        return self._routes

    def methods(self, route: ModelRoute) -> tuple[str, ...]:
        """The speculative methods the load route was run for."""
        return self._methods.get(route, ())

    def runs(self, drafter: ClassKey, fkey: FuncKey) -> bool:
        """An instance of ``drafter`` runs method ``fkey`` when it calls it on ``self``
        (the method resolves to ``fkey`` through its MRO)."""
        found = self._runs.get((drafter, fkey))
        if found is not None:
            return found
        owner = self.types.defining_class(fkey)
        if self.index.frozen:  # nothing loads now: the MRO's answer stands, and is kept
            # the method found is one of the drafter's MRO: a class outside it is never that
            found = owner is not None and owner in self.index.mro(drafter) and self._runs_now(drafter, fkey, owner)
            self._runs[(drafter, fkey)] = found
            return found
        return self._runs_now(drafter, fkey, owner)

    def _runs_now(self, drafter: ClassKey, fkey: FuncKey, owner: ClassKey | None) -> bool:
        hit = self.index.method(drafter, fkey[1].rpartition(".")[2])
        return owner is not None and hit is not None and hit[0] == owner

    def drafters_running(self, fkey: FuncKey) -> list[ClassKey]:
        """The drafters some load route builds that run method ``fkey`` (``self`` of a
        subclass: the overrides its ``self.m()`` calls reach are that subclass's)."""
        if self._drafters is None:  # many routes share a drafter: each is asked once
            self._drafters = list(dict.fromkeys(rt.drafter for rt in self.load_routes()))
        return sorted(d for d in self._drafters if self.runs(d, fkey))

    def routes_running(self, fkey: FuncKey, model: ClassKey | None = None,
                       drafter: ClassKey | None = None) -> list[ModelRoute] | None:
        """The load routes on which drafter code ``fkey`` runs (as ``drafter``, when given;
        with ``model`` loaded, when given). None when no drafter the factories build runs
        it (a model's own code, a helper, a tree without dispatch factories): then dispatch
        does not decide, and the drafter-level pairing says."""
        key = (fkey, model, drafter)
        if key in self._running:
            return self._running[key]
        running = self._running_any.get(fkey) if fkey in self._running_any else self._routes_running_any(fkey)
        found = None if running is None else [rt for rt in running if (model is None or model in rt.models)
                                               and (drafter is None or rt.drafter == drafter)]
        self._running[key] = found
        return found

    def _routes_running_any(self, fkey: FuncKey) -> list[ModelRoute] | None:
        """:meth:`routes_running` for any model and drafter (kept once the index is frozen:
        the rules ask it per call site and class)."""
        built = self._built
        if built is None:
            location = self.provider.location
            built = {c for keys in location.factories().values() for f in keys for c in location.built_classes(f)}
            if self.index.frozen:
                self._built = built
        found: list[ModelRoute] | None = None
        if any(self.runs(b, fkey) for b in built):
            found = [rt for rt in self.load_routes() if self.runs(rt.drafter, fkey)]
        if self.index.frozen:
            self._running_any[fkey] = found
        return found

    def pairing(self, fkey: FuncKey, model: ClassKey, drafter: ClassKey | None = None) -> Pairing:
        """Whether drafter code ``fkey`` (run as ``drafter``, when given) runs with draft
        model ``model`` loaded on some load route, and when."""
        mine = self.routes_running(fkey, model, drafter)
        if mine is None:
            return self.provider.precision.pairing(fkey)
        return condition_of(mine)


def condition_of(routes: list[ModelRoute]) -> Pairing:
    """Paired when there is a route; unconditionally when one of them has no condition."""
    if not routes:
        return Pairing(False, "")
    if any(not rt.conditions for rt in routes):
        return paired_when("", routes)
    return paired_when(route_alternatives(_distinct(routes)), routes)


def _distinct(routes: list[ModelRoute]) -> list[ModelRoute]:
    """One route per (runner, drafter, condition), and none whose condition only adds
    guards to another's for the same drafter (``A and B`` or ``B`` is ``B``): architectures
    that take the same branch say the same thing once."""
    seen: dict[tuple[str, ClassKey, frozenset[tuple[str, bool | None]]], ModelRoute] = {}
    for rt in routes:
        seen.setdefault((rt.runner, rt.drafter, frozenset((d.condition, d.taken) for d in rt.conditions)), rt)
    return [rt for (runner, drafter, conds), rt in seen.items()
            if not any(r == runner and d == drafter and other < conds for r, d, other in seen)]
