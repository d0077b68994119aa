"""MTP004: a method declares the step and ignores it while its class has several layers."""

from __future__ import annotations

from typing import Iterable

from auditor.analyses.analysis import Analysis
from auditor.facts.extract import FunctionFact
from auditor.index.index import ClassKey, FuncKey
from auditor.model.findings import Finding, Severity

from rules._examples import PREDICTOR
from rules.base import Invalid, Rule, Valid

_PER_LAYER_HEADS = PREDICTOR + '''

    def compute_logits(self, hidden_states, spec_step_idx: int = 0):
        {body}
'''


class StepIgnored(Rule):
    """A method declares ``spec_step_idx`` and never uses it, while its class holds
    several step-selectable parts (a ``ModuleList``/``ModuleDict`` of MTP layers,
    per-layer heads or norms).

    Typical case: ``compute_logits(hidden_states, spec_step_idx=0)`` of a predictor
    whose layers each carry their own ``shared_head``, computing logits with
    ``self.layers[0]``'s head for every step. Uses in ``del spec_step_idx`` or in an
    expression whose value is thrown away do not count as uses. A class with one
    shared head (``self.lm_head``) ignoring the step is correct and not reported.
    """

    code = "MTP004"
    name = "step-ignored"
    severity = Severity.WARNING
    summary = "Method declares spec_step_idx but ignores it while its class holds several MTP layers"

    VALID = [
        Valid({"vllm/models/m_mtp.py": _PER_LAYER_HEADS.format(body="return self.layers[spec_step_idx].head(hidden_states)")}),
        Valid({"vllm/models/m_mtp.py": '''
import torch.nn as nn


class SharedHeadMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.lm_head = nn.Linear(4, 4)

    def compute_logits(self, hidden_states, spec_step_idx: int = 0):
        return self.lm_head(hidden_states)
'''}),
        # A stack: every layer runs on every step, so there is nothing to select.
        Valid({"vllm/models/m_mtp.py": _PER_LAYER_HEADS.format(
            body="for layer in self.layers:\n            hidden_states = layer(hidden_states)\n        return hidden_states")}),
    ]
    INVALID = [
        Invalid({"vllm/models/m_mtp.py": _PER_LAYER_HEADS.format(body="return self.layers[0].head(hidden_states)")},
                line=16, message="Predictor.compute_logits declares spec_step_idx but never uses it, while Predictor holds self.layers"),
        Invalid({"vllm/models/m_mtp.py": _PER_LAYER_HEADS.format(body="del spec_step_idx\n        return self.layers[0].head(hidden_states)")},
                line=16, message="never uses it"),
    ]

    def check(self, analysis: Analysis) -> Iterable[Finding]:
        for fkey, fn in analysis.scope.relevant_functions():
            owner = analysis.types.defining_class(fkey)
            if owner is None:
                continue
            # Containers the class iterates are stacks (every layer runs every step).
            containers = sorted({c.attr for c in analysis.types.containers(owner) if not c.iterated})
            if not containers:
                continue
            for param in analysis.params:
                if param not in fn.param_names or param in fn.live:
                    continue
                if _calls_selector(analysis, fkey, fn, owner, param):
                    continue  # dropping it on a call is MTP001's finding
                yield Finding(
                    rule=self.code,
                    severity=self.severity,
                    path=fkey[0],
                    line=fn.line,
                    column=fn.col,
                    function=fkey[1],
                    callee="",
                    message=(
                        f"{fkey[1]} declares {param} but never uses it, while {owner[1]} holds "
                        f"{', '.join('self.' + c for c in containers)}: every step uses the same part"
                    ),
                    trace=[analysis.hop(fkey, fn.line, f"declares {param}, never reads it")],
                    affected_classes=analysis.registry.affected_models(fkey),
                    fingerprint_key=param,
                    parameter=param,
                )


def _calls_selector(analysis: Analysis, fkey: FuncKey, fn: FunctionFact, ctx: ClassKey, param: str) -> bool:
    return any(
        analysis.flow.selects(tgt.func, tgt.ctx, param)
        for ci in range(len(fn.calls))
        for tgt in analysis.calls.targets(fkey, fn, ctx, ci)
    )
