"""MTP900: a suppression comment without a reason, or one that suppresses nothing."""

from __future__ import annotations

from typing import Iterable, Sequence

from auditor.model.findings import Finding, Hop, Severity
from auditor.facts.suppressions import ProblemKind, SuppressionProblem

from rules._examples import wrapper
from rules.base import Invalid, SuppressionRule, Valid

_DROP = "return self.model(input_ids, positions, hidden_states)"
_MESSAGES = {
    ProblemKind.MISSING_REASON: (
        "suppression without a reason: write why after the bracket, e.g. `# mtp-audit: ignore[MTP002] EAGLE-style by design`"
    ),
}


class SuppressionHygiene(SuppressionRule):
    """``# mtp-audit: ignore[MTP00x] <reason>`` on a finding's line, or on the ``def``
    line of the function it is in, suppresses it. The reason is required: a
    suppression without one suppresses nothing and is reported here. A suppression
    that no longer matches any finding is reported too, so stale ones get removed,
    and so is one naming a rule code that does not exist (a typo would otherwise
    silently suppress nothing).

    It runs after every other rule: the engine applies the comments to their findings
    and hands this rule the comments that were wrong.
    """

    code = "MTP900"
    name = "suppression-hygiene"
    severity = Severity.NOTE
    summary = "Suppression comment without a reason, or one that no longer suppresses anything"

    VALID = [
        Valid({"vllm/models/m_mtp.py": wrapper(_DROP + "  # mtp-audit: ignore[MTP001] single-layer checkpoints only")}),
    ]
    INVALID = [
        Invalid({"vllm/models/m_mtp.py": wrapper(_DROP + "  # mtp-audit: ignore[MTP001]")},
                line=22, message="suppression without a reason"),
        Invalid({"vllm/models/m_mtp.py": wrapper("return self.model(input_ids, positions, hidden_states, **kwargs)"
                                                 "  # mtp-audit: ignore[MTP001] stale")},
                line=22, message="unused suppression: no MTP001 here any more"),
        Invalid({"vllm/models/m_mtp.py": wrapper(_DROP + "  # mtp-audit: ignore[MTP0001] typo")},
                line=22, message="unknown rule code MTP0001 in suppression (known: MTP001,"),
    ]

    def check_suppressions(self, problems: Sequence[SuppressionProblem]) -> Iterable[Finding]:
        for problem in problems:
            s = problem.suppression
            if problem.kind is ProblemKind.UNKNOWN_CODE:
                plural = "s" if len(problem.unknown_codes) > 1 else ""
                message = (
                    f"unknown rule code{plural} {', '.join(problem.unknown_codes)} in suppression "
                    f"(known: {', '.join(problem.known_codes)})"
                )
            elif problem.kind is ProblemKind.UNUSED:
                message = f"unused suppression: no {', '.join(s.codes) or 'finding'} here any more; remove it"
            else:
                message = _MESSAGES[problem.kind]
            yield Finding(
                rule=self.code,
                severity=self.severity,
                path=s.path,
                line=s.line,
                column=0,
                function="",
                callee="",
                message=message,
                trace=[Hop(s.path, s.line, "", "suppression comment")],
                fingerprint_key=f"{','.join(s.codes)}|{s.reason}|{problem.kind.value}",
            )
