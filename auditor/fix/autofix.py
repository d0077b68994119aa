"""What a rule declares to repair its findings (``Rule.autofix``), as Fixit rules do.

Kept free of libcst so that declaring a fix costs nothing at scan time; the codemods
themselves live in :mod:`auditor.fix.codemod` and are imported when a fix is applied.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Sequence

from ..model.findings import Finding

if TYPE_CHECKING:
    from ..analyses.analysis import Analysis


class Autofix(ABC):
    """Repairs findings of one rule in one file's source text."""

    @abstractmethod
    def refusal(self, analysis: "Analysis", finding: Finding) -> str | None:
        """Why this finding must not be fixed automatically (None: it may be)."""

    @abstractmethod
    def rewrite(self, source: str, findings: Sequence[Finding], line_limit: int = 88) -> str:
        """The file's new text with every given finding fixed (all in this file), keeping
        lines within ``line_limit`` where it can."""


class ThreadStepFix(Autofix):
    """Thread the finding's parameter through a call that drops it: the function accepts
    it (a ``name: int = 0`` parameter is added when it only arrived through ``**kwargs``)
    and passes it on by keyword (or replaces the constant it passed)."""

    def refusal(self, analysis: "Analysis", finding: Finding) -> str | None:
        key = (finding.path, finding.function)
        fn = analysis.index.function(key)
        if fn is None:
            return "the function is no longer in the analysed tree"
        param = finding.parameter or analysis.params[0]
        ctx = analysis.types.defining_class(key)
        for ci, call in enumerate(fn.calls):
            if call.line != finding.line or call.col != finding.column:
                continue
            targets = analysis.calls.targets(key, fn, ctx, ci)
            bad = sorted({t.func[1] for t in targets if not analysis.calls.accepts(t.func, param)})
            if bad:
                return f"{', '.join(bad)} cannot accept {param}: the fix would raise TypeError there (MTP005)"
            return None
        return "the call site could not be located"

    def rewrite(self, source: str, findings: Sequence[Finding], line_limit: int = 88) -> str:
        from .codemod import thread_step

        by_param: dict[str, dict[str, list[tuple[int, int]]]] = {}
        for f in findings:
            param = f.parameter or "spec_step_idx"
            by_param.setdefault(param, {}).setdefault(f.function, []).append((f.line, f.column))
        for param, targets in sorted(by_param.items()):
            source = thread_step(source, param, targets, line_limit)
        return source
