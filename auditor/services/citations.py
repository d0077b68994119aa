"""Plans that name the findings explaining them (issue 18: "a verdict names the finding that
explains it").

The dispatch analysis says *where* a plan's answer comes from, as typed facts: the functions
on which a step is lost (:class:`~auditor.analyses.dispatch.StepLoss`), the gate conditions a
configuration closed (:class:`~auditor.analyses.dispatch.ClosedGates`), and where a compiled
forward or a captured graph freezes the step (``EngineView.frozen``). It never reads rule
output. Here, above both, each such fact is joined with the scan's findings by what the
finding means (:class:`~auditor.model.findings.Meaning`) and where it is, and the verdict
names it: ``lost at <id>``, ``constant — gate never opens (MTP006 <id>)``,
``frozen at step 0's layer (MTP007 <id>)``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ..analyses.capture import FreezeKind, FrozenStep
from ..analyses.dispatch import FROZEN_VERDICT, Plan, StepPlan, Verdict
from ..model.findings import Finding, Meaning

# The meanings of the findings a plan names (here and in :mod:`.forced_plan`): a plan reads
# no other finding, so ``layers`` runs only the rules that declare one of these.
CITED_MEANINGS = frozenset({Meaning.STEP_LOST, Meaning.GATE_CLOSED, Meaning.STEP_FROZEN})


def cite(plan: Plan, findings: Sequence[Finding]) -> Plan:
    """``plan`` with its lost, gate-closed and frozen verdicts naming their findings."""
    gate = _gate_finding(plan, findings)
    steps = tuple(_cite_step(s, findings, gate) for s in plan.steps)
    compiled = plan.compiled
    if compiled is not None:
        ids = tuple(dict.fromkeys(f"{f.rule} {f.fingerprint}" for fs in compiled.frozen for f in findings
                                  if _explains(f, fs)))
        mark = f" ({', '.join(ids)})" if ids else ""
        cited = tuple(replace(s, verdict=FROZEN_VERDICT + mark) if s.verdict == FROZEN_VERDICT
                      else _cite_step(s, findings, gate) for s in compiled.steps)
        compiled = replace(compiled, steps=cited, findings=ids)
    return replace(plan, steps=steps, compiled=compiled)


def _cite_step(s: StepPlan, findings: Sequence[Finding], gate: Finding | None) -> StepPlan:
    if s.lost is not None:
        f = s.lost.explained_by(list(findings))
        return replace(s, verdict=f"lost at {f.fingerprint}", why=_said(f)) if f is not None else s
    if gate is not None and s.verdict == Verdict.CONSTANT.value:
        return replace(s, verdict=f"constant — gate never opens ({gate.rule} {gate.fingerprint})",
                       why=f"{s.why}; {_said(gate)}")
    return s


def _gate_finding(plan: Plan, findings: Sequence[Finding]) -> Finding | None:
    """A finding that a gate never opens (``Meaning.GATE_CLOSED``: the gate reads a field the
    model's override never sets, and the per-step drafter it guards was not built here) for
    this plan's model, on a condition this configuration closed, guarding another drafter."""
    closed, model, proposer = plan.closed_gates, plan.model_class, plan.proposer
    if closed is None or model is None or proposer is None:
        return None
    for f in sorted(findings, key=lambda f: f.fingerprint):
        if f.meaning is not Meaning.GATE_CLOSED or f.callee == proposer[1]:
            continue
        if not any((c.path, c.name) == model for c in f.affected_classes):
            continue
        predicate = f.function.rpartition(".")[2]
        if any(f"{predicate}(" in c for c in closed.conditions):
            return f
    return None


def _explains(f: Finding, fs: FrozenStep) -> bool:
    if f.meaning is not Meaning.STEP_FROZEN:
        return False
    if fs.kind is FreezeKind.COMPILE and fs.compiled is not None:
        return (f.path, f.function) == fs.compiled.cls
    inst = fs.installation
    return inst is not None and (f.path, f.line) == (inst.site[0], inst.line)


def _said(f: Finding) -> str:
    return f"{f.rule} at {f.path}:{f.line} {f.function}: {f.message}"
