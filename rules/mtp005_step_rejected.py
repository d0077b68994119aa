"""MTP005: the step is passed to a callee that cannot accept it."""

from __future__ import annotations

from typing import Iterable

from auditor.analysis import Analysis
from auditor.model import ClassRef, Finding, Severity

from ._examples import draft_tree, wrapper
from .base import Rule

_NO_STEP_HEAD = wrapper(
    "return self.model(input_ids, positions, hidden_states, spec_step_idx)",
    "self, input_ids, positions, hidden_states, spec_step_idx=0",
) + '''
    def compute_logits(self, hidden_states):
        return hidden_states
'''


class StepRejected(Rule):
    """A call passes ``spec_step_idx`` by keyword (or inside a ``**dict`` built in the
    caller) to a callee that has no such parameter and no ``**kwargs``.

    Python raises ``TypeError: got an unexpected keyword argument`` at run time. This
    is what reviewers pointed out on the public fix attempt (vLLM PR #36910): the
    proposer's ``self.model`` can be a non-MTP draft model whose ``forward`` or
    ``compute_logits`` does not take the step. When ``self.model`` fans out over the
    draft-model registry, the finding lists every class that would fail.
    """

    code = "MTP005"
    name = "step-rejected"
    severity = Severity.ERROR
    summary = "spec_step_idx passed to a callee that cannot accept it (TypeError at run time)"

    VALID = [
        draft_tree("out.append(self.model.compute_logits(hidden_states))", model=_NO_STEP_HEAD),
    ]
    INVALID = [
        draft_tree("out.append(self.model.compute_logits(hidden_states, spec_step_idx=token_index))", model=_NO_STEP_HEAD),
    ]

    def check(self, analysis: Analysis) -> Iterable[Finding]:
        for fkey, fn in analysis.relevant_functions():
            ctx = analysis.defining_class(fkey)
            for ci, call in enumerate(fn["calls"]):
                for param in analysis.params:
                    if not _passes_by_name(call, fn, param):
                        continue
                    rejecting: dict[str, set] = {}
                    for tgt in analysis.targets(fkey, fn, ctx, ci):
                        b = analysis.bind(call, fn, tgt)
                        if param in b.unknown_keywords:
                            rejecting.setdefault(tgt.func[1], set())
                            if tgt.model_class:
                                rejecting[tgt.func[1]].add(tgt.model_class)
                            for ref in analysis.affected_models(tgt.func):
                                rejecting[tgt.func[1]].add((ref.path, ref.name))
                    if not rejecting:
                        continue
                    callees = sorted(rejecting)
                    classes = sorted({c for cs in rejecting.values() for c in cs})
                    yield Finding(
                        rule=self.code,
                        severity=self.severity,
                        path=fkey[0],
                        line=call["line"],
                        column=call["col"],
                        function=fkey[1],
                        callee=", ".join(callees),
                        message=(
                            f"passes {param} to {', '.join(callees)}, which take(s) no {param} and no **kwargs: "
                            f"TypeError at run time"
                            + (f" for {len(classes)} draft model class(es)" if classes else "")
                        ),
                        trace=[analysis.hop(fkey, call["line"], f"passes {param} to {c}") for c in callees],
                        affected_classes=[ClassRef(*c) for c in classes],
                        fingerprint_key=f"{param}|{'.'.join(call['func'] or [])}",
                    )


def _passes_by_name(call, fn, param: str) -> bool:
    """Cheap syntactic pre-check before resolving: the call names ``param`` as a keyword."""
    if any(name == param for name, _ in call["kwargs"]):
        return True
    for d in call["dstar"]:
        ch = d.get("ch")
        if ch and len(ch) == 1 and any(k == param for k, _ in fn["dicts"].get(ch[0], [])):
            return True
    return False
