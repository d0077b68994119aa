"""MTP004: a method declares the step and ignores it while its class has several layers."""

from __future__ import annotations

from typing import Iterable

from auditor.analysis import MODULE_CONTAINERS, Analysis
from auditor.model import Finding, Severity

from ._examples import PREDICTOR
from .base import Rule

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
        {"vllm/models/m_mtp.py": _PER_LAYER_HEADS.format(body="return self.layers[spec_step_idx].head(hidden_states)")},
        {"vllm/models/m_mtp.py": '''
import torch.nn as nn


class SharedHeadMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.lm_head = nn.Linear(4, 4)

    def compute_logits(self, hidden_states, spec_step_idx: int = 0):
        return self.lm_head(hidden_states)
'''},
    ]
    VALID.append(
        # A stack: every layer runs on every step, so there is nothing to select.
        {"vllm/models/m_mtp.py": _PER_LAYER_HEADS.format(
            body="for layer in self.layers:\n            hidden_states = layer(hidden_states)\n        return hidden_states")},
    )
    INVALID = [
        {"vllm/models/m_mtp.py": _PER_LAYER_HEADS.format(body="return self.layers[0].head(hidden_states)")},
        {"vllm/models/m_mtp.py": _PER_LAYER_HEADS.format(body="del spec_step_idx\n        return self.layers[0].head(hidden_states)")},
    ]

    def check(self, analysis: Analysis) -> Iterable[Finding]:
        for fkey, fn in analysis.relevant_functions():
            owner = analysis.defining_class(fkey)
            if owner is None:
                continue
            containers = _layer_containers(analysis, owner)
            if not containers:
                continue
            names = analysis.param_names(fn)
            for param in analysis.params:
                if param not in names or param in fn["live"]:
                    continue
                if _calls_selector(analysis, fkey, fn, owner, param):
                    continue  # dropping it on a call is MTP001's finding
                yield Finding(
                    rule=self.code,
                    severity=self.severity,
                    path=fkey[0],
                    line=fn["line"],
                    column=fn["col"],
                    function=fkey[1],
                    callee="",
                    message=(
                        f"{fkey[1]} declares {param} but never uses it, while {owner[1]} holds "
                        f"{', '.join('self.' + c for c in containers)}: every step uses the same part"
                    ),
                    trace=[analysis.hop(fkey, fn["line"], f"declares {param}, never reads it")],
                    affected_classes=analysis.affected_models(fkey),
                    fingerprint_key=param,
                )


def _layer_containers(analysis: Analysis, cls) -> list[str]:
    """Module containers of the class that hold alternatives, not a stack.

    A container the class iterates over (``for layer in self.layers``) runs every
    member on every step — a stack of layers — so ignoring the step there is correct.
    """
    found, iterated = set(), set()
    for c in analysis.index.mro(cls):
        for m in analysis.index.class_facts(c).get("methods", {}).values():
            for s in m["attr_sets"]:
                call = s["value"].get("call")
                if len(s["target"]) == 2 and s["target"][0] == "self" and call and call[-1] in MODULE_CONTAINERS:
                    found.add(s["target"][1])
            for loop in m["loops"]:
                iterated.update(n[5:] for n in loop["iter"].get("n", ()) if n.startswith("self."))
    return sorted(found - iterated)


def _calls_selector(analysis: Analysis, fkey, fn, ctx, param) -> bool:
    for ci in range(len(fn["calls"])):
        for tgt in analysis.targets(fkey, fn, ctx, ci):
            if analysis.selects(tgt.func, tgt.ctx, param):
                return True
    return False
