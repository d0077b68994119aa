"""MTP005: the step is passed to a callee that cannot accept it."""

from __future__ import annotations

from typing import Iterable

from auditor.analyses.analysis import Analysis
from auditor.index.index import ClassKey
from auditor.model.findings import ClassRef, Finding, Meaning, Severity

from rules._examples import draft_tree, wrapper
from rules.base import Invalid, Rule, Valid

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
    meaning = Meaning.CANNOT_TAKE
    summary = "spec_step_idx passed to a callee that cannot accept it (TypeError at run time)"

    VALID = [
        Valid(draft_tree("out.append(self.model.compute_logits(hidden_states))", model=_NO_STEP_HEAD)),
    ]
    INVALID = [
        Invalid(draft_tree("out.append(self.model.compute_logits(hidden_states, spec_step_idx=token_index))",
                           model=_NO_STEP_HEAD),
                path="vllm/spec_decode/proposer.py", line=15,
                message="passes spec_step_idx to WrapperMTP.compute_logits, which take(s) no spec_step_idx and no **kwargs"),
    ]

    def check(self, analysis: Analysis) -> Iterable[Finding]:
        calls = analysis.calls
        for fkey, fn in analysis.scope.relevant_functions():
            ctx = analysis.types.defining_class(fkey)
            for ci, call in enumerate(fn.calls):
                for param in analysis.params:
                    if not calls.passes_keyword(call, fn, param):
                        continue
                    rejecting: dict[str, set[ClassKey]] = {}
                    for tgt in calls.targets(fkey, fn, ctx, ci):
                        if tgt.model_class is not None and not analysis.dispatch.pairing(fkey, tgt.model_class).paired:
                            continue  # dispatch never builds this drafter for that model (no route)
                        if param in calls.bind(call, fn, tgt).unknown_keywords:
                            classes = rejecting.setdefault(tgt.func[1], set())
                            if tgt.model_class:
                                classes.add(tgt.model_class)
                            classes.update((ref.path, ref.name) for ref in analysis.registry.affected_models(tgt.func)
                                           if analysis.dispatch.pairing(fkey, (ref.path, ref.name)).paired)
                    if not rejecting:
                        continue
                    callees = sorted(rejecting)
                    rejected_by = sorted({c for cs in rejecting.values() for c in cs})
                    # Dispatch: code of a drafter behind a gate says when it runs.
                    pairing = analysis.dispatch.pairing(fkey)
                    when = f"; reached only when {pairing.condition}" if pairing.condition else ""
                    yield Finding(
                        rule=self.code,
                        severity=self.severity,
                        path=fkey[0],
                        line=call.line,
                        column=call.col,
                        function=fkey[1],
                        callee=", ".join(callees),
                        message=(
                            f"passes {param} to {', '.join(callees)}, which take(s) no {param} and no **kwargs: "
                            f"TypeError at run time"
                            + (f" for {len(rejected_by)} draft model class(es)" if rejected_by else "")
                            + when
                        ),
                        trace=[analysis.hop(fkey, call.line, f"passes {param} to {c}") for c in callees],
                        affected_classes=[ClassRef(*c) for c in rejected_by],
                        fingerprint_key=f"{param}|{'.'.join(call.func or ())}",
                        parameter=param,
                    )
