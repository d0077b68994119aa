"""Inline suppressions (``# mtp-audit: ignore[MTP002] reason``) applied to a scan's findings.

A suppression comment applies to a finding when it stands on the finding's line or
on the ``def`` line of the function the finding is in. A reason is required: a
suppression without one suppresses nothing and is reported. A suppression that
matches no finding is reported too, so stale ones get cleaned up, and so is one
naming a rule code the tool does not know (a typo would silently suppress nothing).
All three reports use rule code MTP900.
"""

from __future__ import annotations

from typing import Collection, Iterable, Optional

from ..facts.suppressions import ProblemKind, Suppression, SuppressionProblem
from ..model.findings import Finding

__all__ = ["apply_suppressions"]


def apply_suppressions(
    findings: list[Finding],
    suppressions: Iterable[Suppression],
    def_lines: dict[tuple[str, str], int],
    known_codes: Optional[Collection[str]] = None,
) -> list[SuppressionProblem]:
    """Mark suppressed findings; return the suppressions that are wrong (unknown code, no
    reason, unused). ``known_codes``: the rule codes of the tool (None: not checked)."""
    by_line: dict[tuple[str, int], list[Suppression]] = {}
    sups = list(suppressions)
    for s in sups:
        by_line.setdefault((s.path, s.line), []).append(s)
    for f in findings:
        lines = [f.line]
        def_line = def_lines.get((f.path, f.function))
        if def_line:
            lines.append(def_line)
        for ln in lines:
            for s in by_line.get((f.path, ln), []):
                if f.rule in s.codes or not s.codes:
                    if s.reason:
                        f.suppressed = True
                    s.used = True
    problems = []
    for s in sups:
        unknown = tuple(c for c in s.codes if known_codes is not None and c not in known_codes)
        if unknown:
            problems.append(SuppressionProblem(s, ProblemKind.UNKNOWN_CODE, unknown, tuple(sorted(known_codes or ()))))
        elif not s.reason:
            problems.append(SuppressionProblem(s, ProblemKind.MISSING_REASON))
        elif not s.used:
            problems.append(SuppressionProblem(s, ProblemKind.UNUSED))
    return problems
