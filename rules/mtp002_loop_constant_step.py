"""MTP002: a draft loop reaches the MTP model with no per-step value."""

from __future__ import annotations

from typing import Any, Iterable

from auditor.analyses import StepKind
from auditor.analyses.analysis import Analysis
from auditor.analyses.dispatch import route_alternatives
from auditor.model.findings import ClassRef, Finding, Meaning, Severity

from rules._examples import draft_tree
from rules.base import Invalid, Rule, Valid


class LoopPassesConstantStep(Rule):
    """A loop over draft steps (``range`` over ``num_speculative_tokens`` /
    ``num_speculative_steps``) reaches a step-selecting draft-model entry
    (``forward``, ``compute_logits``, ``get_top_tokens``; directly or through helper
    methods such as ``_sample_draft_tokens`` → ``_greedy_sample``) without a value
    that changes per step.

    Every draft step then selects MTP layer 0. vLLM's maintainers call this
    EAGLE-style reuse intentional for the V1 proposer; it still means that layers
    1..N-1 of a checkpoint trained with N distinct MTP layers are never used, which
    is what this warning records. The first draft step runs before the loop, where a
    constant 0 is correct, so only calls inside the loop count.
    """

    code = "MTP002"
    name = "loop-constant-step"
    severity = Severity.WARNING
    summary = "Draft loop reaches the MTP model without a per-step spec_step_idx (layers 1..N-1 unused)"
    # lint: a change that removes this report changes the behaviour (eagle-style -> threaded), it fixes nothing
    meaning = Meaning.BY_DESIGN

    VALID = [
        Valid(draft_tree("out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=token_index + 1))")),
        Valid(draft_tree("out.append(self._run(token_index + 1, hidden_states))",
                         helpers="\n    def _run(self, step, h):\n        kw = dict(hidden_states=h, input_ids=None, positions=None)\n"
                                 "        kw['spec_step_idx'] = step\n        return self.model(**kw)\n")),
    ]
    INVALID = [
        Invalid(draft_tree("out.append(self.model(input_ids, positions, hidden_states))"),
                path="vllm/spec_decode/proposer.py", line=14, message="draft loop reaches forward of 1 MTP model class(es) without a per-step spec_step_idx (absent)"),
        Invalid(draft_tree("out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=0))"),
                path="vllm/spec_decode/proposer.py", line=14, message="(constant)"),
        Invalid(draft_tree("out.append(self._run(hidden_states))",
                           helpers="\n    def _run(self, h):\n        return self.model(None, None, h)\n"),
                path="vllm/spec_decode/proposer.py", line=14, message="every draft step selects layer 0"),
    ]

    def check(self, analysis: Analysis) -> Iterable[Finding]:
        seen: set[tuple[tuple[str, str], int]] = set()
        for result in analysis.loops.loop_results():
            # Dispatch (issue 11): a loop of a drafter no MTP dispatch builds is not reported
            # against MTP classes; one behind a gate says when it runs.
            pairing = analysis.dispatch.pairing(result.func)
            if not pairing.paired:
                continue
            seen.add((result.func, result.loop.id))
            when = f"; reached only when {pairing.condition}" if pairing.condition else ""
            yield from self._findings(analysis, result, when)
        # Issue 18: loops MTP drafters run with ``self`` of a subclass (the V2 runner's default
        # eagle-style MTP speculator runs its base class's loops): once per loop, with the
        # routes it covers.
        groups: dict[tuple[tuple[str, str], int], list[tuple[Any, Any]]] = {}
        for rt, res in analysis.dispatch.dispatched_loops():
            if (res.func, res.loop.id) not in seen:
                groups.setdefault((res.func, res.loop.id), []).append((rt, res))
        for _key, group in sorted(groups.items()):
            routes = list(dict.fromkeys(rt for rt, _ in group))
            if any(not rt.conditions for rt in routes):
                when = ""
            else:
                when = "; reached only when " + route_alternatives(routes)
            as_ = ", ".join(sorted({rt.drafter[1] for rt in routes}))
            yield from self._findings(analysis, group[0][1], when + f" (run as {as_})")

    def _findings(self, analysis: Analysis, result: Any, when: str) -> Iterable[Finding]:
        for param in analysis.params:
            groups = analysis.loops.entry_groups(result, param)
            # Only a loop whose every entry is known to hand over a constant (or nothing):
            # one that varies, or that the analysis cannot classify, is not reported.
            if not groups or any(k in (StepKind.VARYING, StepKind.UNKNOWN) for g in groups for k in g.kinds):
                continue
            methods = sorted({g.entry.method for g in groups})
            classes = sorted({c for g in groups for c in g.classes if analysis.dispatch.pairing(result.func, c).paired})
            if not classes:
                continue  # no route runs this loop against these model classes
            first = groups[0].entry
            sel = next(
                (s for s in result.selections if s.model_class == first.model_class and s.method == first.method),
                None,
            )
            trace = list(sel.hops) if sel else list(first.hops)
            yield Finding(
                rule=self.code,
                severity=self.severity,
                path=result.func[0],
                line=result.loop.line,
                column=result.loop.col,
                function=result.func[1],
                callee=", ".join(methods),
                callee_key="",  # the loop is the identity; the entry methods grow with the classes
                message=(
                    f"draft loop reaches {', '.join(methods)} of {len(classes)} MTP model class(es) without a per-step "
                    f"{param} ({'/'.join(sorted({g.kind.value for g in groups}))}): every draft step selects layer 0, "
                    f"so layers 1..N-1 are never used (EAGLE-style reuse, intentional per vLLM maintainers)" + when
                ),
                trace=trace,
                affected_classes=[ClassRef(*c) for c in classes],
                fingerprint_key=f"{param}|loop:{result.loop.iter.text}",
                parameter=param,
            )
