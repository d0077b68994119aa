"""The rule interface: one small class per rule code; its docstring is its documentation.

A rule queries the engine's :class:`auditor.analysis.Analysis` facade (index, providers)
and yields :class:`auditor.model.Finding` objects. The command line builds the list of
rules (:func:`rules.all_rules`) and hands it to the engine; the engine never imports this
package.

``VALID`` and ``INVALID`` hold example trees that the test suite scans (as Fixit runs a
rule's examples): no VALID example may produce a finding of the rule, and every INVALID
example must produce one — at the ``line`` (and in the ``path``) it pins, with a message
containing ``message`` when it pins one.

A rule that can repair what it finds sets ``autofix`` to an :class:`auditor.fix.Autofix`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Iterable, Sequence

from auditor.model.findings import Finding, Meaning, Severity

if TYPE_CHECKING:
    from auditor.analyses.analysis import Analysis
    from auditor.fix.autofix import Autofix
    from auditor.facts.suppressions import SuppressionProblem

Files = dict[str, str]


@dataclass(frozen=True)
class Valid:
    """A tree on which the rule must stay silent."""

    files: Files


@dataclass(frozen=True)
class Invalid:
    """A tree on which the rule must report; optionally pinned to a place and a message."""

    files: Files
    line: int | None = None  # the finding's line
    path: str | None = None  # the finding's file (default: the only file, or any)
    message: str | None = None  # a fragment the message must contain
    count: int | None = None  # how many findings of the rule (default: at least one)


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, stable
    severity: ClassVar[Severity]
    summary: ClassVar[str]  # one line, shown in SARIF shortDescription and `mtp-audit rules`
    VALID: ClassVar[Sequence[Valid]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()
    autofix: ClassVar["Autofix | None"] = None
    # What the findings of this rule mean for the step (analyses read this, never codes); a
    # finding that sets its own ``meaning`` (one kind of a rule's findings) keeps it.
    meaning: ClassVar[Meaning | None] = None
    # severities a finding of the rule may have besides ``severity`` (its usual one)
    ALSO: ClassVar[tuple[Severity, ...]] = ()

    @classmethod
    def severities(cls) -> tuple[Severity, ...]:
        return (cls.severity, *cls.ALSO)

    @classmethod
    def doc(cls) -> str:
        return inspect.getdoc(cls) or cls.summary

    def check(self, analysis: "Analysis") -> Iterable[Finding]:
        raise NotImplementedError


class SuppressionRule(Rule):
    """A rule about suppression comments: it runs after every other rule, on the problems
    the engine found while applying the comments to their findings."""

    def check(self, analysis: "Analysis") -> Iterable[Finding]:
        return ()

    def check_suppressions(self, problems: Sequence["SuppressionProblem"]) -> Iterable[Finding]:
        raise NotImplementedError
