"""MTP003: one draft loop threads the step into some model entries and not others."""

from __future__ import annotations

from typing import Iterable

from auditor.analyses import StepKind
from auditor.analyses.analysis import Analysis
from auditor.model.findings import ClassRef, Finding, Meaning, Severity

from rules._examples import draft_tree, wrapper
from rules.base import Invalid, Rule, Valid

_HEADS = wrapper(
    "return self.model(input_ids, positions, hidden_states, spec_step_idx)",
    "self, input_ids, positions, hidden_states, spec_step_idx=0",
) + '''
    def compute_logits(self, hidden_states, spec_step_idx=0):
        return self.heads[spec_step_idx](hidden_states)

    def get_top_tokens(self, hidden_states, spec_step_idx=0):
        return self.heads[spec_step_idx](hidden_states).argmax(-1)
'''


class InconsistentThreading(Rule):
    """The same draft loop passes the per-step ``spec_step_idx`` to some draft-model
    entries and not to others that take it — for example ``forward`` gets the step
    while the ``get_top_tokens`` path (local argmax reduction) does not.

    The entries that miss it run with the default step: the hidden state comes from
    layer *i* but the logits from layer 0's head, or the other way round. This is the
    defect the public fix attempt (vLLM PR #36910) was reviewed for.

    Only loops an MTP route runs are reported, with the condition of the routes that run
    them: a drafter that no dispatch factory builds (its code left in a release with no
    branch that constructs it) reports nothing.
    """

    code = "MTP003"
    name = "inconsistent-threading"
    severity = Severity.ERROR
    meaning = Meaning.STEP_LOST
    summary = "Draft loop passes spec_step_idx to some draft-model entries but not to others"

    VALID = [
        Valid(draft_tree(
            "h = self.model(input_ids, positions, hidden_states, spec_step_idx=token_index)\n"
            "            out.append(self.model.get_top_tokens(h, spec_step_idx=token_index))",
            model=_HEADS,
        )),
    ]
    INVALID = [
        Invalid(draft_tree(
            "h = self.model(input_ids, positions, hidden_states, spec_step_idx=token_index)\n"
            "            out.append(self.model.get_top_tokens(h))",
            model=_HEADS,
        ), path="vllm/spec_decode/proposer.py", line=16,
            message="passes the per-step spec_step_idx to forward but reaches get_top_tokens with it absent"),
    ]

    def check(self, analysis: Analysis) -> Iterable[Finding]:
        for result in analysis.loops.loop_results():
            pairing = analysis.dispatch.pairing(result.func)
            if not pairing.paired:
                continue  # no MTP route runs this loop (a drafter no factory builds, or never for MTP)
            when = pairing.when()
            for param in analysis.params:
                groups = analysis.loops.entry_groups(result, param)
                threaded = [g for g in groups if g.kind is StepKind.VARYING]
                if not threaded:
                    continue
                good = sorted({g.entry.method for g in threaded})
                for g in groups:
                    if g.kind in (StepKind.VARYING, StepKind.UNKNOWN):
                        continue
                    e = g.entry
                    caller = analysis.index.function((e.call_hop.path, e.call_hop.function))
                    if caller is not None and param in caller.param_names:
                        continue  # the helper had the step and dropped it: MTP001 reports that call
                    yield Finding(
                        rule=self.code,
                        severity=self.severity,
                        path=e.call_hop.path,
                        line=e.call_hop.line,
                        column=0,
                        function=e.call_hop.function,
                        callee=e.method,
                        message=(
                            f"the draft loop in {result.func[1]} passes the per-step {param} to {', '.join(good)} "
                            f"but reaches {e.method} with it {g.kind.value}: that entry always uses step 0{when}"
                        ),
                        trace=[result.hop, *e.hops[1:]],
                        affected_classes=[ClassRef(*c) for c in sorted(g.classes)
                                          if analysis.dispatch.pairing(result.func, c).paired],
                        fingerprint_key=f"{param}|{result.func[1]}|{e.method}",
                        parameter=param,
                    )
