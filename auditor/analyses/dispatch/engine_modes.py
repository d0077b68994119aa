"""The compiled view of a plan (issue 18, ``layers --engine-mode``): vLLM's default engine
compiles the draft model (torch.compile) and replays CUDA graphs. The capture/compile
analysis (:mod:`auditor.analyses.capture`) says where a per-step value stops mattering on the
plan's own loop (explored with ``self`` of the plan's drafter): a compiled ``forward`` that
does not mark the step dynamic, or a graph whose key leaves it out. Then every step gets
the layer of the first traced (captured) step — step 0's — on the frozen methods. The view
keeps where each freeze is (``EngineView.frozen``); the services layer names the finding
that says so (MTP007)."""

from __future__ import annotations

from dataclasses import replace

from ..capture import FreezeKind, FrozenStep
from ..loops import FORWARD_METHODS
from .model import EngineView, Plan, StepPlan, Verdict
from .part import DispatchPart


class EngineModes(DispatchPart):
    def compiled(self, plan: Plan) -> EngineView | None:
        """None when the plan has no drafter, model class or loop (nothing to compile). A plan
        that raises at a step a compiled engine's start-up pass runs first is rejected at
        start-up (:mod:`.startup`); one whose start-up pass is undecided says so in ``why``."""
        view = self._compiled(plan)
        sr = plan.step_raise
        if view is None or plan.outcome != "raises" or sr is None:
            return view
        start = self.provider.planner.startup_reach(plan, sr, "compiled")
        if start is not None and start.reached:
            why = start.rejected_why(sr)
            return EngineView("compiled", plan.rejected_steps(why), (), (), why, (), "rejected", (start.rejection(sr),))
        if start is not None and start.reached is None:
            return replace(view, why=f"{view.why}; {start.note(sr)}")
        return view

    def _compiled(self, plan: Plan) -> EngineView | None:
        model, proposer = plan.model_class, plan.proposer
        if model is None or proposer is None or not plan.steps or plan.outcome == "rejected":
            return None
        leg = self.provider.route_values.leg(proposer, model)  # the route's compiled mode: where the step freezes
        if leg.path is None:
            if plan.loop is not None and self.provider.step_free.entry(proposer, model) is not None:
                return EngineView("compiled", plan.steps, (), (), "the draft model selects no layer by the step: "
                                                                  "compiling or capturing it changes no step's layer (as eager)")
            return None
        frozen = list(leg.frozen)
        if not frozen:
            return EngineView("compiled", plan.steps, (), (), "no compiled forward or captured graph on this route "
                                                                "leaves the step out: as eager")
        platform = plan.setting.platform
        graphs = self.captures_graphs(platform)
        if graphs is False:
            # The platform captures no CUDA graph: only torch.compile's freezes apply.
            frozen = [fs for fs in frozen if fs.kind is FreezeKind.COMPILE]
            if not frozen:
                return EngineView("compiled", plan.steps, (), (), f"platform {platform} captures no CUDA graph and no "
                                                                    "compiled forward on this route leaves the step out: "
                                                                    "as eager")
        sure = [fs for fs in frozen if graphs or fs.kind is FreezeKind.COMPILE]
        maybe = [fs for fs in frozen if fs not in sure]
        fwd = any(fs.method in FORWARD_METHODS for fs in sure)
        head = any(fs.method in self.config.head_methods for fs in sure)
        fwd_maybe = any(fs.method in FORWARD_METHODS for fs in maybe)
        head_maybe = any(fs.method in self.config.head_methods for fs in maybe)
        first = plan.steps[0]
        undecided = (f"depends on whether platform {platform} captures CUDA graphs (its platform module does not "
                     f"say): {_why(maybe[0])}" if maybe else "")
        steps: list[StepPlan] = []
        changed: list[int] = []
        for s in plan.steps:
            # A threaded step whose eager layer the unknown layer count leaves open still runs
            # step 0's kernels where the forward is frozen.
            open_layer = s.forward_layer is None and s.verdict == Verdict.THREADED.value
            fl = first.forward_layer if fwd and (s.forward_layer is not None or open_layer) else s.forward_layer
            hl = first.head_layer if head and s.head_layer is not None else s.head_layer
            # A graph freeze that may or may not apply: a layer it would change is unknown.
            unknown = ((fwd_maybe and fl is not None and fl != first.forward_layer)
                       or (head_maybe and hl is not None and hl != first.head_layer))
            if unknown:  # not among the frozen steps: it may run its own layer
                steps.append(StepPlan(s.step, None if fwd_maybe and fl != first.forward_layer else fl,
                                      None if head_maybe and hl != first.head_layer else hl,
                                      Verdict.UNKNOWN.value, undecided, stack=s.stack))
            elif (fl, hl) != (s.forward_layer, s.head_layer):
                changed.append(s.step)
                steps.append(StepPlan(s.step, fl, hl, FROZEN_VERDICT, _why(sure[0]), stack=s.stack))
            else:
                steps.append(s)
        return EngineView("compiled", tuple(steps), tuple(changed), (), _why(sure[0]) if sure else undecided,
                          tuple(frozen))

    # -- does the platform capture CUDA graphs? -------------------------------------
    def load_platforms(self) -> None:
        """Parse the platform modules (before the index is frozen)."""
        for path in self.config.platform_modules.values():
            if path in self.index.files:
                self.index.load(path)

    def captures_graphs(self, platform: str) -> bool | None:
        """Whether vLLM captures CUDA graphs on ``platform``, read from its platform module:
        False when the module sets a capture-sizes field to an empty list unconditionally
        (no batch size is captured), True when it never sets one (the default sizes), None
        (undecided) when it sets one otherwise, under a condition, or there is no module."""
        path = self.config.platform_modules.get(platform)
        facts = self.index.facts.get(path) if path is not None and path in self.index.files else None
        if facts is None:
            return None
        fields = set(self.config.graph_capture_sizes)
        functions = list(facts.functions.values()) + [m for c in facts.classes.values() for m in c.methods.values()]
        writes = [a for fn in functions for a in fn.attr_assigns if a.target and a.target[-1] in fields]
        if any(a.target and a.target[-1] in fields for a in facts.module_attr_assigns):
            return None  # set at import time, perhaps under a condition the facts do not keep
        if not writes:
            return True
        if all(not a.conditional and a.value.text in _EMPTY for a in writes):
            return False
        return None


_EMPTY = {"[]", "()", "list()", "tuple()"}
FROZEN_VERDICT = "frozen at step 0's layer"


def _why(fs: FrozenStep) -> str:
    if fs.kind is FreezeKind.COMPILE and fs.compiled is not None:
        return (f"{fs.compiled.cls[1]} is compiled by {fs.compiled.decorator} and {fs.param} is not a dynamic argument: "
                f"the first traced step's layer runs at every step")
    inst = fs.installation
    where = f"{inst.wrapper.name} at {inst.site[0]}:{inst.line}" if inst is not None else "a captured graph"
    return f"{where} replays the kernels captured at the first step: {fs.param} is not in its key"
