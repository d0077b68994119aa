"""MTP001: a wrapper receives the step and calls a step-selecting callee without it."""

from __future__ import annotations

from typing import Iterable

from auditor.analyses import ArgSource, Selection, Target
from auditor.analyses.analysis import Analysis
from auditor.fix.autofix import ThreadStepFix
from auditor.model.findings import ClassRef, Finding, Meaning, Severity

from rules._examples import by_design_tree, wrapper
from rules.base import Invalid, Rule, Valid


class WrapperDropsStep(Rule):
    """A function receives ``spec_step_idx`` — as a parameter or inside ``**kwargs`` — and
    calls a callee that selects an MTP layer with it, without passing it on.

    The callee then runs with its default (``spec_step_idx=0``), so every draft step
    uses layer 0 and layers 1..N-1 of a multi-layer MTP checkpoint are dead weight,
    even when the draft loop above passes the right step (as vLLM's multi-module MTP
    speculator does). Passing a constant in place of the received value is the same
    defect.

    Arguments are bound to the callee's signature, so positional passing counts;
    forwarding ``**kwargs`` counts; a dict built in the function and expanded with
    ``**d`` counts when it holds the key. A callee that has no step parameter, or
    never uses it to pick a layer, is not a drop. Each dropping call is its own
    finding, also when one function calls the same callee twice.

    A drafter method that drops the step by design is left to MTP002: one that a drafter
    built for MTP overrides to thread the step, and that every route running it hands no
    per-step value (see MTP002).

    Fix: pass it on by keyword, ``self.model(..., spec_step_idx=spec_step_idx)``
    (``mtp-audit fix`` does this).
    """

    code = "MTP001"
    name = "wrapper-drops-step"
    severity = Severity.ERROR
    meaning = Meaning.STEP_LOST
    summary = "Wrapper receives spec_step_idx but calls a layer-selecting callee without it"
    autofix = ThreadStepFix()

    VALID = [
        Valid({"vllm/models/m_mtp.py": wrapper("return self.model(input_ids, positions, hidden_states, spec_step_idx)",
                                               "self, input_ids, positions, hidden_states, spec_step_idx=0")}),
        Valid({"vllm/models/m_mtp.py": wrapper("return self.model(input_ids, positions, hidden_states, **kwargs)")}),
        Valid({"vllm/models/m_mtp.py": wrapper(
            "kw = {'spec_step_idx': kwargs.get('spec_step_idx', 0)}\n        return self.model(input_ids, positions, hidden_states, **kw)")}),
    ]
    VALID += [
        # Issue 18: a base speculator's head helper takes the step and drops it, but the
        # eagle-style loop that runs it hands it none, and the drafter that threads the
        # step overrides it: by design, named by MTP002 on that loop, not a drop.
        Valid(by_design_tree("return self.model.compute_logits(x)")),
    ]
    INVALID = [
        # ... while a loop that hands it the varying step loses it there.
        Invalid(by_design_tree("return self.model.compute_logits(x)", "self.head(x, step)"),
                path="vllm/spec_decode/speculators.py", line=13,
                message="BaseSpeculator.head receives spec_step_idx (parameter) but calls DeepMTP.compute_logits without it"),
        Invalid({"vllm/models/m_mtp.py": wrapper("return self.model(input_ids, positions, hidden_states)")},
                line=22, message="WrapperMTP.forward receives spec_step_idx (**kwargs) but calls Predictor.forward without it"),
        Invalid({"vllm/models/m_mtp.py": wrapper("return self.model(input_ids, positions, hidden_states)",
                                                 "self, input_ids, positions, hidden_states, spec_step_idx=0")},
                line=22, message="receives spec_step_idx (parameter)"),
        Invalid({"vllm/models/m_mtp.py": wrapper("return self.model(input_ids, positions, hidden_states, spec_step_idx=0)",
                                                 "self, input_ids, positions, hidden_states, spec_step_idx=0")},
                line=22, message="with the constant 0"),
        # Two dropping calls in one function are two defects, two findings.
        Invalid({"vllm/models/m_mtp.py": wrapper("h = self.model(input_ids, positions, hidden_states)\n"
                                                 "        return self.model(input_ids, positions, h)")},
                count=2, message="calls Predictor.forward without it"),
    ]

    def check(self, analysis: Analysis) -> Iterable[Finding]:
        calls, flow, types = analysis.calls, analysis.flow, analysis.types
        for fkey, fn in analysis.scope.relevant_functions():
            names = fn.param_names
            kwargs = fn.kwargs_param
            ctx = types.defining_class(fkey)
            for param in analysis.params:
                named = param in names
                if not named and kwargs is None:
                    continue
                received = "parameter" if named else f"**{kwargs}"
                if named and analysis.dispatch.dropped_by_design(fkey, param):
                    continue  # eagle-style by design, named in the loop's MTP002 (issue 18)
                for ci, call in enumerate(fn.calls):
                    # One finding per call site, whatever the registry fan-out behind it.
                    dropped: dict[str, tuple[Target, ArgSource | None, Selection]] = {}
                    for tgt in calls.targets(fkey, fn, ctx, ci):
                        if tgt.model_class is not None and not analysis.dispatch.pairing(fkey, tgt.model_class).paired:
                            continue  # dispatch never builds this drafter for that model (no route)
                        b = calls.bind(call, fn, tgt)
                        if b.forwards_kwargs and not named:
                            continue
                        if b.opaque_dicts or param in b.unknown_keywords:
                            continue
                        src = b.params.get(param)
                        if src is not None and (not named or not src.expr.constant or param in src.expr.names):
                            continue
                        sel = flow.selects(tgt.func, tgt.ctx, param)
                        if sel is not None and tgt.func[1] not in dropped:
                            dropped[tgt.func[1]] = (tgt, src, sel)
                    if not dropped:
                        continue
                    callees = sorted(dropped)
                    _, src, sel = dropped[callees[0]]
                    how = "without it" if src is None else f"with the constant {src.expr.text}"
                    classes = {c for c in analysis.registry.affected_models(fkey)
                               if analysis.dispatch.pairing(fkey, (c.path, c.name)).paired}
                    classes.update(ClassRef(*t.model_class) for t, _, _ in dropped.values() if t.model_class is not None)
                    shown = callees[0] + (f" (and {len(callees) - 1} more)" if len(callees) > 1 else "")
                    yield Finding(
                        rule=self.code,
                        severity=self.severity,
                        path=fkey[0],
                        line=call.line,
                        column=call.col,
                        function=fkey[1],
                        callee=", ".join(callees),
                        callee_key="",  # the call is in fingerprint_key; the targets it reaches may grow
                        message=(
                            f"{fkey[1]} receives {param} ({received}) but calls {shown} {how}; "
                            f"{callees[0]} selects {sel.container} by {param}, so every draft step uses layer 0"
                        ),
                        trace=[
                            analysis.hop(fkey, fn.line, f"receives {param} ({received})"),
                            analysis.hop(fkey, call.line, f"calls {callees[0]} {how}"),
                            *sel.hops,
                        ],
                        affected_classes=sorted(classes, key=lambda c: (c.path, c.name)),
                        fingerprint_key=f"{param}|{call.func and '.'.join(call.func)}",
                        parameter=param,
                    )
