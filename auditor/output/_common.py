"""Helpers shared by the output formats (ordering, rule look-up, counting)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from auditor.model.findings import ClassReachability, Finding, Problem, ScanResult, Severity

if TYPE_CHECKING:
    from rules.base import Rule


def sorted_findings(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=Finding.sort_key)


def sorted_problems(problems: Iterable[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p.path, p.kind, p.message))


def sorted_reachability(items: Iterable[ClassReachability]) -> list[ClassReachability]:
    return sorted(items, key=lambda r: (r.model_class.path, r.model_class.name))


def rule_index(rules: Iterable[type["Rule"]]) -> dict[str, type["Rule"]]:
    return {r.code: r for r in rules}


def rule_title(code: str, rules: dict[str, type["Rule"]]) -> str:
    """``"MTP001 wrapper-drops-step"``, or just the code for an unknown rule."""
    rule = rules.get(code)
    name = getattr(rule, "name", "") if rule is not None else ""
    return f"{code} {name}" if name else code


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@dataclass(frozen=True)
class Counts:
    findings: int
    errors: int
    warnings: int
    notes: int
    files: int
    skipped: int
    suppressed: int


def count(result: ScanResult) -> Counts:
    active = [f for f in result.findings if not f.suppressed]
    return Counts(
        findings=len(active),
        errors=sum(1 for f in active if f.severity is Severity.ERROR),
        warnings=sum(1 for f in active if f.severity is Severity.WARNING),
        notes=sum(1 for f in active if f.severity is Severity.NOTE),
        files=len({f.path for f in active}),
        skipped=len({p.path for p in result.problems}),
        suppressed=len(result.findings) - len(active),
    )


def summary_line(result: ScanResult) -> str:
    """``N findings (E errors, W warnings) in F files; P files skipped``.

    Suppressed findings are not counted as findings; when there are any, the line
    ends with ``; S suppressed``. Notes are listed only when there are some.
    """
    c = count(result)
    parts = [plural(c.errors, "error"), plural(c.warnings, "warning")]
    if c.notes:
        parts.append(plural(c.notes, "note"))
    line = (
        f"{plural(c.findings, 'finding')} ({', '.join(parts)}) in {plural(c.files, 'file')}; "
        f"{plural(c.skipped, 'file')} skipped"
    )
    if c.suppressed:
        line += f"; {c.suppressed} suppressed"
    return line
