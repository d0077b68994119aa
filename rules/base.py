"""The rule interface: one small class per rule code, its docstring is its documentation.

A rule queries the engine's :class:`auditor.analysis.Analysis` (index, call graph,
argument flow) and yields :class:`auditor.model.Finding` objects. ``VALID`` and
``INVALID`` hold example trees (``{relative path: source}``) that the test suite
scans: every INVALID example must produce at least one finding of the rule and no
VALID example may produce one.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, ClassVar, Iterable

from auditor.model import Finding, Severity

if TYPE_CHECKING:
    from auditor.analysis import Analysis

Example = dict[str, str]


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, stable
    severity: ClassVar[Severity]
    summary: ClassVar[str]  # one line, shown in SARIF shortDescription and `mtp-audit rules`
    VALID: ClassVar[list[Example]] = []
    INVALID: ClassVar[list[Example]] = []

    @classmethod
    def doc(cls) -> str:
        return inspect.getdoc(cls) or cls.summary

    def check(self, analysis: "Analysis") -> Iterable[Finding]:
        raise NotImplementedError
