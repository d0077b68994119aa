"""MTP002: a draft loop reaches the MTP model with no per-step value."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from auditor.analyses import StepKind
from auditor.analyses.analysis import Analysis
from auditor.analyses.dispatch import paired_when, route_alternatives
from auditor.model.findings import ClassRef, Finding, Meaning, Severity

from rules._examples import by_design_tree, draft_tree, tree_proposer_tree
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

    Every loop shape counts, once per loop, whichever runner or drafter runs it: V1's
    proposer loop, the V2 speculators' fused and unfused multi-step loops, and a tree
    drafter's loop over the levels of its token tree — any ``range`` loop in the code a
    drafter's proposer entry (``proposer-entries``) reaches through ``self.m()`` calls
    that runs the draft model, whatever its count is called. With dispatch, the finding
    says which drafters run the loop (``run as …``) and, when a gate decides, under which
    condition; a loop a drafter runs with ``self`` of a subclass is reported once, with
    every such drafter.

    Base-class code that drops the step by design is reported as such, here: when a
    drafter built for MTP inherits the loop's method but overrides it and threads the
    step, the message names it; and a method on the way that takes ``spec_step_idx``, is
    handed no per-step value by the loop, calls the draft model without it, and is
    overridden by the threading drafters (vLLM's V2 ``compute_draft_logits``) is named
    here "by design" — MTP001 does not report that method, since on every route that
    runs it there is no per-step value to lose. A method that gets a varying step and
    drops it is not by design: MTP001 reports it. A base-class method no MTP route runs
    (every drafter built for MTP overrides it) is not reported at all: nothing runs it.
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
    VALID += [
        # A tree drafter's loop over its levels that threads the level as the step.
        Valid(tree_proposer_tree("out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=level + 1))")),
        # A range loop outside the proposing code (not reached from ``propose``) is no draft loop.
        Valid(tree_proposer_tree("out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=level + 1))",
                                 extra="\n    def warm_up(self, h):\n        for i in range(4):\n"
                                       "            self.model(None, None, h)\n")),
    ]
    INVALID = [
        Invalid(draft_tree("out.append(self.model(input_ids, positions, hidden_states))"),
                path="vllm/spec_decode/proposer.py", line=14, message="draft loop reaches forward of 1 MTP model class(es) without a per-step spec_step_idx (absent)"),
        Invalid(draft_tree("out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=0))"),
                path="vllm/spec_decode/proposer.py", line=14, message="(constant)"),
        Invalid(draft_tree("out.append(self._run(hidden_states))",
                           helpers="\n    def _run(self, h):\n        return self.model(None, None, h)\n"),
                path="vllm/spec_decode/proposer.py", line=14, message="every draft step selects layer 0"),
        # The tree loop: ``range(tree_depth - 1)`` in ``propose_tree``, reached from ``propose``.
        Invalid(tree_proposer_tree("out.append(self.model(input_ids, positions, hidden_states))"),
                path="vllm/spec_decode/proposer.py", line=24, count=1, message="without a per-step spec_step_idx (absent)"),
        # The eagle-style speculator runs its base's loop and head helper; the multi-module
        # speculator overrides both and threads the step: one finding, naming both by design.
        Invalid(by_design_tree("return self.model.compute_logits(x)"),
                path="vllm/spec_decode/speculators.py", line=16, count=1,
                message="(run as EagleStyleSpeculator); BaseSpeculator.propose is overridden by MultiModuleSpeculator, "
                        "which thread(s) the step; by design, BaseSpeculator.head take(s) spec_step_idx"),
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
            yield from self._findings(analysis, result, pairing.when() + _run_as(analysis.dispatch.runners_of(result.func)[0]))
        # Issue 18: loops MTP drafters run with ``self`` of a subclass (the V2 runner's default
        # eagle-style MTP speculator runs its base class's loops): once per loop, with the
        # routes it covers.
        groups: dict[tuple[tuple[str, str], int], list[tuple[Any, Any]]] = {}
        for rt, res in analysis.dispatch.dispatched_loops():
            if (res.func, res.loop.id) not in seen:
                groups.setdefault((res.func, res.loop.id), []).append((rt, res))
        for _key, group in sorted(groups.items()):
            routes = list(dict.fromkeys(rt for rt, _ in group))
            when = paired_when("" if any(not rt.conditions for rt in routes) else route_alternatives(routes), routes).when()
            yield from self._findings(analysis, group[0][1], when + _run_as(routes))

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
            design = _by_design(analysis, result, groups, param)
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
                    + design
                ),
                trace=trace,
                affected_classes=[ClassRef(*c) for c in classes],
                fingerprint_key=f"{param}|loop:{result.loop.iter.text}",
                parameter=param,
            )


def _run_as(routes: Sequence[Any]) -> str:
    """`` (run as A, B)``: the drafters of the routes that run the loop ("" without dispatch)."""
    names = sorted({rt.drafter[1] for rt in routes})
    return f" (run as {', '.join(names)})" if names else ""


def _by_design(analysis: Analysis, result: Any, groups: Sequence[Any], param: str) -> str:
    """Where the step is dropped by design: the loop's own method when a drafter built for
    MTP overrides it and threads the step, and every method on the way that takes ``param``,
    is handed no per-step value, calls the draft model without it, and is overridden by the threading
    drafters (``DispatchProvider.dropped_by_design``; MTP001 leaves those to this rule)."""
    parts: list[str] = []
    overrides = analysis.dispatch.runners_of(result.func)[1]
    if overrides:
        parts.append(f"{result.func[1]} is overridden by {_names(overrides)}, which thread(s) the step")
    dropping = sorted({(g.entry.call_hop.path, g.entry.call_hop.function) for g in groups if g.kinds == {StepKind.ABSENT}})
    by_drafters: dict[tuple[Any, ...], list[str]] = {}
    for fkey in dropping:
        drafters = analysis.dispatch.dropped_by_design(fkey, param) if fkey != result.func else []
        if drafters:
            by_drafters.setdefault(tuple(drafters), []).append(fkey[1])
    for shared, names in sorted(by_drafters.items()):
        parts.append(f"by design, {', '.join(names)} take(s) {param}, get(s) no per-step value and call(s) the draft model "
                     f"without it (overridden by {_names(shared)}, which thread(s) the step)")
    return "".join(f"; {p}" for p in parts)


def _names(classes: Iterable[Any]) -> str:
    return ", ".join(c[1] for c in classes)
