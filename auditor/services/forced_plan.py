"""The static side of a *forced* run: which layer is selected when the draft loop hands the
draft model step ``i`` (what `mtp-audit runtime check --force-step-idx` does at run time).

The plan's own steps answer "what runs as shipped". Forcing changes one thing: the loop's
call into the draft model's entry method (``forward``; the head methods) now carries the step.
From there the path to the layer selection is the same one the shipped plan explored, so the
forced layer at step ``i`` is ``i mod N`` when no finding that loses the step
(``Meaning.STEP_LOST``) lies on that path from the model class's entry on, else 0 (the callee's default). The head
follows the same rule on the head-method path; a model with one shared head has none (null).
Nothing here special-cases a model: it reuses the dispatch provider's explored loops.

A services module, not an analysis: it joins the dispatch analysis's paths with the scan's
findings (rule output), which analyses never read.
"""

from __future__ import annotations

from typing import Sequence

from ..analyses.dispatch import DispatchProvider, ForcedPlan, ForcedStep, Plan
from ..analyses.loops import LoopSelection
from ..analyses.step_loss import constant_layer
from ..model.findings import Finding, Meaning

__all__ = ["ForcedPlan", "ForcedStep", "forced_plan"]


def _model_hops_lose(sels: list[LoopSelection], mro: list[tuple[str, str]], findings: Sequence[Finding]) -> Finding | None:
    """A step-losing finding on a selection path, from the model class's entry method on
    (hops before it belong to the drafter, which forcing bypasses). The entry method may be
    inherited: any class of the model's MRO starts the model's part of the path."""
    on_path: set[tuple[str, str]] = set()
    for s in sels:
        hops = list(s.hops)
        start = next((i for i, h in enumerate(hops)
                      if any(h.path == c[0] and h.function.startswith(f"{c[1]}.") for c in mro)), None)
        if start is None:
            continue
        on_path |= {(h.path, h.function) for h in hops[start:]}
    for f in sorted(findings, key=lambda f: (f.rule, f.path, f.line)):
        if f.meaning is Meaning.STEP_LOST and (f.path, f.function) in on_path:
            return f
    return None


def forced_plan(dispatch: DispatchProvider, plan: Plan, findings: Sequence[Finding]) -> ForcedPlan | None:
    """None when the shipped plan has no drafter, model class or loop reaching it."""
    model, proposer = plan.model_class, plan.proposer
    if model is None or proposer is None:
        return None
    # The route's leg the shipped plan read (memoised by the dispatch provider).
    leg = dispatch.route_values.leg(proposer, model)
    if leg.path is None:
        if plan.loop is not None and dispatch.step_free.entry(proposer, model) is not None:
            # Forcing changes what the loop hands; the model reads none of it.
            return ForcedPlan(tuple(ForcedStep(i, 0, None) for i in range(plan.setting.draft_steps)),
                              "forward: the draft model selects no layer by the step -> layer 0; head: one shared head")
        return None
    fwd, heads = list(leg.forward), list(leg.heads)
    n = plan.num_mtp_layers
    if plan.steps and all(s.stack is not None for s in plan.steps) and not leg.path.selections \
            and dispatch.reach.step_inert.is_inert(model, leg.path.entered):
        # The model only hands the step on (analyses/step_inert) and iterates a stack: forcing
        # the step changes nothing, each step runs every layer of it, as shipped.
        return ForcedPlan(tuple(ForcedStep(s.step, s.forward_layer, s.head_layer, s.stack) for s in plan.steps),
                          "forward: the draft model only hands the step on, it selects no layer by it -> as shipped; "
                          "head: one shared head")
    mro = list(dispatch.index.mro(model))
    fwd_lost = _model_hops_lose(fwd, mro, findings)
    head_lost = _model_hops_lose(heads, mro, findings)

    # Reads at a constant key of a literal container select no layer by the step: forcing the
    # step leaves them as they are (that entry, or unknown where they name different ones).
    fixed = {"forward": all(s.position is not None for s in fwd), "head": all(s.position is not None for s in heads)}

    def layer(sels: list[LoopSelection], lost: Finding | None, i: int) -> int | None:
        if not sels:
            return None
        if all(s.position is not None for s in sels):
            return constant_layer(sels)
        if lost is not None:
            return 0
        return i % n if n else i

    steps = tuple(ForcedStep(i, layer(fwd, fwd_lost, i), layer(heads, head_lost, i))
                  for i in range(plan.setting.draft_steps))
    whys = []
    for what, sel, lost in (("forward", fwd, fwd_lost), ("head", heads, head_lost)):
        if not sel:
            whys.append(f"{what}: no selection ({'one shared head' if what == 'head' else 'unknown'})")
        elif fixed[what]:
            at = constant_layer(sel)
            whys.append(f"{what}: {sel[0].hops[-1].note} at a constant key, an entry of a container built from a "
                        f"literal -> {'layer ' + str(at) if at is not None else 'different layers (unknown)'}, "
                        f"whatever the step")
        elif lost is not None:
            whys.append(f"{what}: step lost at {lost.rule} {lost.path}:{lost.line} {lost.function} -> layer 0")
        else:
            whys.append(f"{what}: the step reaches {sel[0].container} -> layer i mod {n}")
    return ForcedPlan(steps, "; ".join(whys))
