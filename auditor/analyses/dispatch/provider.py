"""The dispatch provider: one object per scan that holds the dispatch analysis's parts and
answers for them (rules, ``layers`` and the history views ask it)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...index.bodies import FunctionBodies
from ...index.index import ClassKey, FuncKey
from ...model.findings import ClassReachability, Hop
from ..base import Analyses, Provider
from ..loops import LoopProvider, LoopResult
from ..partial_eval import Decision
from ..reachability import ReachabilityProvider
from ..registry import RegistryProvider
from ..capture import CaptureProvider
from ..types import TypeProvider
from .drafters import DrafterLoops
from .factory_runs import FactoryRuns
from .gates import GateFacts, OverrideFamilies
from .locate import FactoryLocation
from .lookup import RegistryLookup
from .model import Family, Gate, ModelRoute, Pairing, Plan, Route, Setting
from .planner import Planner
from .plugins import PluginDispatch
from .precision import ScanPrecision
from .routes import RouteMap
from .load_routes import LoadRoutes
from .outcomes import Outcomes, StepRaise
from .engine_modes import EngineModes
from .env_defaults import EnvTables
from .startup import StartupPasses
from .stepless import StepFree
from .count_holder import CountHolder
from .config_classes import ConfigClasses
from .spec_fields import SpecFields
from .load_checks import LoadChecks
from .weight_names import WeightNames
from .draft_calls import DraftCalls
from .forward_reads import ForwardReads
from .head_reads import HeadReads
from .runner_checks import RunnerChecks
from .runner_choice import RunnerChoices
from .env_checks import EnvChecks
from .route_worlds import RouteWorlds
from .route_values import DispatchRoute, RouteValues


class DispatchProvider(Provider):
    dependencies = (TypeProvider, RegistryProvider, LoopProvider, ReachabilityProvider, CaptureProvider)

    def __init__(self, analyses: Analyses) -> None:
        super().__init__(analyses)
        self.types = self.dep(TypeProvider)
        self.registry = self.dep(RegistryProvider)
        self.loops = self.dep(LoopProvider)
        self.reach = self.dep(ReachabilityProvider)
        self.capture = self.dep(CaptureProvider)
        self.roles = dict(self.config.dispatch_roles)
        self.location = FactoryLocation(self)
        self.plugin_dispatch = PluginDispatch(self)
        self.drafting = DrafterLoops(self)
        self.gate_facts = GateFacts(self)
        self.family_facts = OverrideFamilies(self)
        self.registry_lookup = RegistryLookup(self)
        self.factory_runs = FactoryRuns(self)
        self.spec_fields = SpecFields(self)
        self.planner = Planner(self)
        self.precision = ScanPrecision(self)
        self.route_map = RouteMap(self)
        self.load_routes = LoadRoutes(self)
        self.outcomes = Outcomes(self)
        self.engine_modes = EngineModes(self)
        self.startup = StartupPasses(self)
        self.step_free = StepFree(self)
        self.count_holder = CountHolder(self)
        self.config_classes = ConfigClasses(self)
        self.load_checks = LoadChecks(self)
        self.weight_names = WeightNames(self)
        self.draft_calls = DraftCalls(self)
        self.forward_reads = ForwardReads(self)
        self.head_reads = HeadReads(self)
        self.runner_checks = RunnerChecks(self)
        self.runner_choices = RunnerChoices(self)
        self.env_checks = EnvChecks(self)
        self.route_worlds = RouteWorlds(self)
        self.route_values = RouteValues(self)
        # setting -> (files the index held, plan): see plan()
        self._plan_memo: dict[Setting, tuple[int, Plan]] = {}
        # The statement trees of functions the facts keep none of, extracted when the partial
        # evaluator runs one (shared by every evaluator of this scan).
        self.bodies = FunctionBodies(self.index)
        # The envs modules' values per environment, parsed once for every evaluator of this scan.
        self.env_tables = EnvTables(self.index)

    # -- loading (before the index is frozen) --------------------------------------
    def prepare(self) -> None:
        """Load the dispatch code and explore the drafters the gates build (the engine
        calls this in its loading phase, after the draft loops were explored). Plans for
        other drafters must be asked before the index is frozen too (a query ``run_scan``
        takes): exploring a drafter's loops may parse more files."""
        for gate in self.count_gates():
            self.threads_per_step(gate.proposer)
        self.families()
        for rt in self.routes():  # the drafters MTP can run: their loops feed the reachability table
            self.drafter_loops(rt.drafter)
        for mr in self.model_routes():
            self.drafter_loops(mr.drafter)
        self.load_routes.load_routes()  # MTP005: every class a route can load (may parse files)
        # The modules the speculative config's construction run may reach: loaded here, not by
        # a later question.
        self.spec_fields.preload(self.location.spec_config_class())
        self.engine_modes.load_platforms()
        self.startup.load()  # the platforms' workers and the runners they hold
        self.forward_reads.load()  # the sub-module classes a loop's per-step forward reads resolve

    # -- what the rules, `layers` and the history views ask ----------------------------
    def factories(self) -> dict[str, list[FuncKey]]:
        return self.location.factories()

    def drafter_loops(self, cls: ClassKey) -> list[LoopResult]:
        return self.drafting.drafter_loops(cls)

    def loop_step_raise(self, loop: FuncKey, model: ClassKey, k: int) -> StepRaise | None:
        return self.outcomes.loop_step_raise(loop, model, k)

    def threads_per_step(self, cls: ClassKey) -> bool:
        return self.drafting.threads_per_step(cls)

    def selects_per_step(self, drafter: ClassKey, model: ClassKey) -> bool:
        return self.drafting.selects_per_step(drafter, model)

    def gates(self) -> list[Gate]:
        return self.gate_facts.gates()

    def count_gates(self) -> list[Gate]:
        return self.gate_facts.count_gates()

    def families(self) -> list[Family]:
        return self.family_facts.families()

    def family_fields(self, arch: str) -> dict[str, Any]:
        return self.family_facts.family_fields(arch)

    def architectures(self) -> list[str]:
        return self.registry_lookup.architectures()

    def mtp_architectures(self) -> list[tuple[str, ClassKey]]:
        return self.registry_lookup.mtp_architectures()

    def layer_count_field(self, arch: str, platform: str) -> str | None:
        return self.registry_lookup.layer_count_field(arch, platform)

    def model_class_for(self, arch: str, platform: str) -> ClassKey | None:
        return self.registry_lookup.model_class_for(arch, platform)

    def dispatch(self, setting: Setting) -> tuple[list[tuple[ClassKey, Hop, list[Decision]]], list[str]]:
        return self.factory_runs.dispatch(setting)

    def plan(self, setting: Setting) -> Plan:
        """The plan under the eager engine, and its compiled view.

        A command plans its settings while the index loads (so that every file a plan needs
        is parsed) and again after the freeze. The second is the first one again when the index
        held the same files through both (the first loaded nothing, nothing was loaded since)
        and the drafter was explored (else a plan made after the freeze notes that files may
        be missing): the same computation over the same files. Otherwise it is planned again."""
        held = len(self.index.facts)
        try:
            memo = self._plan_memo.get(setting)
        except TypeError:  # a --set value that is a list or an object: not hashable, not kept
            memo, held = None, -1
        if memo is not None and memo[0] == held and (memo[1].proposer is None or self.drafting.explored(memo[1].proposer)):
            return memo[1]
        plan = self.planner.plan(setting)
        choice = self.runner_choices.choice(setting)
        if choice.rejection is not None and plan.outcome != "rejected":
            # The runner choice fails before any runner is built: nothing of the plan runs.
            r = choice.rejection
            why = f"rejected at {r.path}:{r.line} {r.function}: {r.message} (the runner choice)"
            plan = replace(plan, steps=plan.rejected_steps(why), outcome="rejected", rejections=(r,), step_raise=None)
        plan = replace(plan, compiled=self.engine_modes.compiled(plan), runner_choice=choice)
        if held >= 0 and len(self.index.facts) == held:
            self._plan_memo[setting] = (held, plan)
        return plan

    def routes(self) -> list[Route]:
        return self.precision.routes()

    def model_routes(self) -> list[ModelRoute]:
        return self.route_map.model_routes()

    def dispatch_routes(self) -> list[DispatchRoute]:
        """The model routes as one value each: condition, drafter, and per class its leg."""
        return self.route_values.routes()

    def pairing(self, fkey: FuncKey, model: ClassKey | None = None) -> Pairing:
        """Whether drafter code ``fkey`` runs for MTP (against draft model ``model``, when
        given: on a route that builds its drafter for that model's architecture), and when."""
        return self.precision.pairing(fkey) if model is None else self.route_map.pairing(fkey, model)

    def dispatched_loops(self) -> list[tuple[Route, LoopResult]]:
        """Loops MTP drafters run with ``self`` of a subclass, with the route that builds it."""
        return self.precision.dispatched_loops()

    def runners_of(self, fkey: FuncKey) -> tuple[list[Route], list[ClassKey]]:
        """Who runs drafter code ``fkey``: the routes whose drafter runs it, and the drafters
        built for MTP that inherit it but override it and thread the step per draft step."""
        return self.precision.routes_running(fkey), self.precision.threading_overrides(fkey)

    def dropped_by_design(self, fkey: FuncKey, param: str) -> list[ClassKey]:
        """Threading drafters overriding ``fkey`` when its drop of ``param`` is by design."""
        return self.precision.dropped_by_design(fkey, param)

    def refine_reachability(self, rows: list[ClassReachability]) -> list[ClassReachability]:
        return self.precision.refine_reachability(rows)
