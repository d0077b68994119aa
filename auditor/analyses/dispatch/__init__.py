"""Dispatch: for a concrete configuration, which drafter a runner builds, which draft
model class it loads, which loop runs the draft steps, and — per draft step — which
MTP layer ``forward`` and the head select; plus the static facts rule MTP006 needs
(the gates that decide whether the per-step drafter is built, and the config-override
families that choose a draft architecture).

Dispatch points are found in the code under the names ``[tool.mtp-audit]`` gives
(``dispatch-factories``, ``config-overrides``; vLLM's names are only the defaults):
a factory is a function whose if/elif chain builds drafter objects (``return
XSpeculator(...)``, ``self.drafter = XProposer(...)``), a drafter being a class whose
methods hold a draft loop; an override function is one that writes ``override-field``
(``architectures``). The chains are run by the partial evaluator
(:mod:`auditor.analyses.partial_eval`), never imported or executed.

One module per concern: ``locate`` (where the factories and overrides are), ``plugins``
(a platform plugin's own dispatch), ``drafters`` (a drafter's loops), ``gates`` (gates and
override families), ``lookup`` (registry), ``factory_runs`` (one configuration through
the factories), ``planner`` (the per-step plan), ``precision`` (routes and pairing for
the scan); ``provider`` holds them.
"""

from ...facts.extract import chain_of
from ...model.findings import StepLoss  # a result model since the reachability rows carry it too
from ..partial_eval import describe
from .engine_modes import FROZEN_VERDICT
from .model import (ClosedGates, DecisionRow, EngineView, Family, ForcedPlan, ForcedStep, Gate, Pairing, Plan,
                    Route, Setting, StepPlan, Verdict, paired_when, route_alternatives)
from .provider import DispatchProvider

__all__ = ["FROZEN_VERDICT", "ClosedGates", "DecisionRow", "DispatchProvider", "EngineView", "Family", "ForcedPlan",
           "ForcedStep", "Gate", "Pairing", "Plan", "Route", "Setting", "StepLoss", "StepPlan", "Verdict",
           "chain_of", "describe", "paired_when", "route_alternatives"]
