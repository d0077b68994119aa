"""Precision for the scan: which drafters a factory can build for an MTP method over any
configuration (routes), and how a drafter's code is paired with MTP draft models."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...index.index import ClassKey, FuncKey
from ...model.findings import ClassReachability, LoopReach, ReachVerdict
from ..loops import LoopResult, StepKind
from ..partial_eval import Obj
from .model import (DecisionRow, Route, Pairing, route_cuts, cut_condition, paired_when, route_alternatives,
                    route_condition)
from .outcomes import REACH_STEPS
from .part import DispatchPart

if TYPE_CHECKING:
    from .provider import DispatchProvider


class ScanPrecision(DispatchPart):
    def __init__(self, provider: DispatchProvider) -> None:
        super().__init__(provider)
        self._routes: list[Route] | None = None
        self._pairing: dict[tuple[FuncKey, ClassKey | None], Pairing] = {}

    def routes(self) -> list[Route]:
        """Every drafter the factories can build for an MTP method (``mtp-methods``), over
        any draft config and K (both unknown: their guards fork)."""
        if self._routes is not None:
            return self._routes
        out: list[Route] = []
        r = self.roles
        for method in self.config.mtp_methods:
            world = self.provider.route_worlds.open_world(method, Obj(r["hf"]))  # open: every field unknown
            for runner, factories in self.provider.location.factories().items():
                for fkey in factories:
                    built = self.provider.factory_runs.run_factory(fkey, world)
                    for cls, site, chain in built:
                        conds = tuple(DecisionRow.of(d) for d in chain if route_condition(d))
                        out.append(Route(runner, cls, site, conds))
                    if not built:
                        # A factory that builds a class it computes from the draft's architecture
                        # tells nothing for an unknown one: its routes are the architectures' own.
                        out += [Route(mr.runner, mr.drafter, mr.site, mr.conditions)
                                for mr in self.provider.route_map.model_routes()
                                if (mr.site.path, mr.site.function) == fkey]
        self._routes = list(dict.fromkeys(out))
        return self._routes

    def pairing(self, fkey: FuncKey) -> Pairing:
        """Whether function ``fkey`` (a method of a drafter class) runs in a drafter built
        for MTP, and when: a route runs it when its drafter's class hierarchy resolves the
        method to this very function (a subclass may override it).

        Trees without dispatch factories (fixtures, vendored subsets) pair everything."""
        cls = self.types.defining_class(fkey)
        key = (fkey, cls)
        found = self._pairing.get(key)
        if found is not None:
            return found
        routes = self.routes()
        name = fkey[1].rpartition(".")[2]

        def runs(drafter: ClassKey) -> bool:
            hit = self.index.method(drafter, name)
            return hit is not None and hit[0] == cls

        if not routes or cls is None:
            found = Pairing(True, "")
        else:
            mine = [rt for rt in routes if runs(rt.drafter)]
            runners = {rt.runner for rt in routes}
            everywhere = any(all(runs(rt.drafter) for rt in routes if rt.runner == r) for r in runners)
            built = {c for keys in self.provider.location.factories().values() for f in keys for c in self.provider.location.built_classes(f)}
            if not mine:
                # Built by a factory, never for MTP: not paired. Code of a drafter no factory
                # builds while every runner's factory was found (a speculator left in the tree
                # with no branch that builds it): dead, not paired. Unknown to every factory
                # otherwise (a runner whose dispatch is not configured): paired, as without dispatch.
                factories = self.provider.location.factories()
                every_runner = all(factories.get(r) for r in self.config.dispatch_factories)
                dead = every_runner and self.provider.location.is_drafter(cls)
                found = Pairing(not any(runs(b) for b in built) and not dead, "")
            elif everywhere or any(not rt.conditions for rt in mine):
                # Every drafter one runner can build for MTP runs this code: no gate decides.
                found = paired_when("", mine)
            else:
                found = paired_when(route_alternatives(mine), mine)
        self._pairing[key] = found
        return found

    def refine_reachability(self, rows: list[ClassReachability]) -> list[ClassReachability]:
        """The reachability table with dispatch: loops of drafters no MTP dispatch builds
        are left out, loops behind a gate say when they run, and the loops MTP drafters
        run with ``self`` of a subclass (the V2 default MTP speculator) are added. Each
        row's verdict is the route's outcome, as ``layers`` gives it (:meth:`_judged`)."""
        by_label = {f"{lr.func[0]}:{lr.loop.line} {lr.func[1]}": lr for lr in self.loops.loop_results()}
        if not self.routes():
            return [replace(row, loops=[self._judged(reach, by_label.get(reach.loop),
                                                     (row.model_class.path, row.model_class.name), ())
                                        for reach in row.loops]) for row in rows]
        known = {(lr.func, lr.loop.id) for lr in self.loops.loop_results()}
        extra: dict[tuple[FuncKey, int], list[tuple[Route, LoopResult]]] = {}
        for rt, res in self.dispatched_loops():
            if (res.func, res.loop.id) not in known:
                extra.setdefault((res.func, res.loop.id), []).append((rt, res))
        out: list[ClassReachability] = []
        for row in rows:
            cls = (row.model_class.path, row.model_class.name)
            loops: list[LoopReach] = []
            for reach in row.loops:
                lr = by_label.get(reach.loop)
                pairing = self.provider.route_map.pairing(lr.func, cls) if lr is not None else Pairing(True, "")
                if not pairing.paired:
                    continue
                reach = self._judged(reach, lr, cls, pairing.cuts)
                if pairing.condition and pairing.condition != cut_condition(pairing.cuts):  # a cut is named once
                    reach = replace(reach, detail=f"{reach.detail}; reached only when {pairing.condition}")
                loops.append(reach)
            for (fkey, _lid), all_routes in sorted(extra.items()):
                # Only the routes whose drafter dispatch builds for this model's architecture.
                paired = set(self.provider.route_map.drafters_for(cls)) if self.provider.route_map.model_routes() else None
                group = [(rt, res) for rt, res in all_routes
                         if paired is None or rt.drafter in paired or cls not in self._route_models()]
                if not group:
                    continue
                drafters = sorted({rt.drafter[1] for rt, _ in group})
                label = f"{fkey[0]}:{group[0][1].loop.line} {fkey[1]} (as {', '.join(drafters)})"
                # The route's leg: the drafter's way into the class through that loop.
                path = self.provider.route_values.leg(group[0][0].drafter, cls).path_of(group[0][1])
                if path is None:
                    continue
                added = self.reach.path_reach(path, label)
                conds = [rt for rt, _ in group]
                mine = [mr for mr in self.provider.route_map.model_routes()
                        if cls in mr.models and mr.drafter in {rt.drafter for rt in conds}]
                reach = self._judged(added, group[0][1], cls, route_cuts(mine) if mine else route_cuts(conds))
                if all(rt.conditions for rt in conds):
                    when = " or ".join(f"{rt.describe()} ({rt.runner.upper()} builds {rt.drafter[1]})" for rt in conds[:2])
                    reach = replace(reach, detail=f"{reach.detail}; reached only when {when}")
                loops.append(reach)
            out.append(replace(row, loops=loops))
        return out

    def _judged(self, reach: LoopReach, res: LoopResult | None, cls: ClassKey, cuts: tuple[str, ...]) -> LoopReach:
        """A row's verdict from its route's outcome, the facts ``layers`` plans from: a route
        that runs the loop for the class decided past a cut of the evaluator makes it
        ``unknown``, the cut named (issue 18: a route decided by an unknown gets the verdict
        unknown, as a plan with one option past a cut does); an assert on the step that
        fails at a draft step ``raises`` there."""
        if cuts:
            return replace(reach, steps_reach_layers=False, verdict=ReachVerdict.UNKNOWN, raises=None, lost=None,
                           detail=f"unknown: the drafter is decided past a cut of the evaluator ({'; '.join(cuts)}); "
                                  f"{reach.detail}")
        if res is None or reach.verdict is ReachVerdict.UNKNOWN:
            return reach
        hit = self.provider.outcomes.result_step_raise(res, cls, REACH_STEPS)
        if hit is None:
            return reach
        return replace(reach, steps_reach_layers=False, verdict=ReachVerdict.RAISES, raises=hit,
                       detail=f"{reach.detail}; raises at step {hit.step}: {hit.path}:{hit.line} {hit.function}: "
                              f"{hit.message}")

    def _route_models(self) -> set[ClassKey]:
        return {m for mr in self.provider.route_map.model_routes() for m in mr.models}

    def routes_running(self, fkey: FuncKey) -> list[Route]:
        """The routes whose drafter runs function ``fkey``: its class hierarchy resolves the
        method's name to this very function."""
        cls = self.types.defining_class(fkey)
        name = fkey[1].rpartition(".")[2]
        out = []
        for rt in self.routes():
            hit = self.index.method(rt.drafter, name)
            if cls is not None and hit is not None and hit[0] == cls:
                out.append(rt)
        return out

    def threading_overrides(self, fkey: FuncKey) -> list[ClassKey]:
        """The drafters of routes that inherit from ``fkey``'s class, override the method
        and thread the step per draft step: where ``fkey`` drops the step by design, the
        drafter that threads it runs its own version instead."""
        cls = self.types.defining_class(fkey)
        name = fkey[1].rpartition(".")[2]
        out: set[ClassKey] = set()
        for rt in self.routes():
            if cls is None or rt.drafter == cls or cls not in self.index.mro(rt.drafter):
                continue
            if self.index.frozen and not self.provider.drafting.explored(rt.drafter):
                continue
            hit = self.index.method(rt.drafter, name)
            if hit is not None and hit[0] != cls and self.provider.drafting.threads_per_step(rt.drafter):
                out.add(rt.drafter)
        return sorted(out)

    def dropped_by_design(self, fkey: FuncKey, param: str) -> list[ClassKey]:
        """The threading drafters that override ``fkey`` when its dropping ``param`` is the
        eagle-style routes' design: every drafter built for MTP that inherits it threads the
        step in its own override, and on every route that runs it the draft loops hand it
        no per-step value (nothing, its default, or the same constant at every step, so the
        drop changes no step's layer from another). Empty otherwise — also when no draft
        loop reaches it, or a loop hands it a varying or unknown value (that would be lost)."""
        overrides = self.threading_overrides(fkey)
        running = self.routes_running(fkey)
        if not overrides or not running:
            return []
        kinds: set[StepKind] = set()
        for rt in running:
            if self.index.frozen and not self.provider.drafting.explored(rt.drafter):
                return []
            for res in self.provider.drafting.drafter_loops(rt.drafter):
                kinds |= res.arrivals.get((fkey, param), set())
        return overrides if kinds and kinds <= {StepKind.ABSENT, StepKind.CONSTANT} else []

    def dispatched_loops(self) -> list[tuple[Route, LoopResult]]:
        """Draft loops of MTP drafters run with ``self`` of the drafter where the loop's own
        class is a base (the V2 MTP speculator runs its base class's loop): loops the
        loop provider, exploring each loop with its defining class, does not pair with
        draft models. Only drafters the index has already explored are used once frozen."""
        out: list[tuple[Route, LoopResult]] = []
        for rt in self.routes():
            if self.index.frozen and not self.provider.drafting.explored(rt.drafter):
                continue
            for res in self.provider.drafting.drafter_loops(rt.drafter):
                if self.types.defining_class(res.func) != rt.drafter and res.entries:
                    out.append((rt, res))
        return out
