"""``--format github``: GitHub Actions workflow commands, one line per item.

Findings become annotations::

    ::error file=vllm/x.py,line=12,col=9,title=MTP001 wrapper-drops-step::message%0A...

(``warning`` and ``notice`` for the other severities; ``col`` is 1-based, ``Finding.column``
is 0-based). The message carries the call chain and the affected MTP classes on further
lines (encoded as ``%0A``). Skipped files become ``::warning`` annotations. Suppressed
findings are not emitted.

``lint`` (issue 18 item 10) adds one ``::notice`` per finding the change fixed (at the
base's location, titled ``fixed: MTP001 …``) and per behaviour change (titled
``behaviour change eagle-style -> threaded: MTP002 …``, with the layer each step selects
per MTP class before and after). Notices never fail a job; errors and warnings remain the
change's new findings only.

Escaping follows ``@actions/core`` (``toCommandValue``/``escapeData``/``escapeProperty``):
in the message ``%``, ``\\r`` and ``\\n`` become ``%25``, ``%0D``, ``%0A``; in property
values additionally ``:`` and ``,`` become ``%3A`` and ``%2C``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from auditor.model.findings import BehaviourChange, Finding, LintChanges, Masked, Problem, ScanResult, Severity

from ._common import rule_index, rule_title, sorted_findings, sorted_problems

if TYPE_CHECKING:
    from rules.base import Rule

COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}


def escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def command(name: str, properties: dict[str, object], message: str) -> str:
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def _finding_message(f: Finding) -> str:
    lines = [f.message]
    if f.function:
        lines.append(f"in {f.function}" + (f" → {f.callee}" if f.callee else ""))
    if f.trace:
        lines.append("call chain:")
        lines.extend(
            f"  {h.path}:{h.line} {h.function}" + (f" — {h.note}" if h.note else "") for h in f.trace
        )
    if f.affected_classes:
        lines.append("affected MTP classes: " + ", ".join(f"{c.name} ({c.path})" for c in f.affected_classes))
    return "\n".join(lines)


def _where(f: Finding, title: str) -> dict[str, object]:
    props: dict[str, object] = {"file": f.path}
    if f.line >= 1:
        props["line"] = f.line
        if f.column >= 0:
            props["col"] = f.column + 1
    props["title"] = title
    return props


def _finding(f: Finding, rules: "dict[str, type[Rule]]") -> str:
    return command(COMMAND.get(f.severity, "warning"), _where(f, rule_title(f.rule, rules)), _finding_message(f))


def _lint_notices(changes: LintChanges, rules: "dict[str, type[Rule]]") -> list[str]:
    out = [command("notice", _where(f, f"fixed: {rule_title(f.rule, rules)}"),
                   f"fixed by the change (present at {changes.base}) [id {f.fingerprint}]\n{_finding_message(f)}")
           for f in sorted_findings(changes.fixed)]
    for c in sorted(changes.behaviour_changes, key=BehaviourChange.sort_key):
        f = c.finding
        steps = [f"  {s.model_class.name} ({s.model_class.path}): {s.before} -> {s.after}" for s in c.steps]
        said = "was" if c.removed else "now"
        out.append(command("notice", _where(f, f"behaviour change {c.change}: {rule_title(f.rule, rules)}"),
                           "\n".join([f"by design, not a fix ({said} {f.rule} [id {f.fingerprint}]): {f.message}",
                                      "which layer each draft step selects, before -> after:", *steps])))
    for m in sorted(changes.masked, key=Masked.sort_key):
        f, by = m.finding, ", ".join(f"{b.rule} [id {b.fingerprint}]" for b in m.by)
        out.append(command("notice", _where(f, f"masked: {rule_title(f.rule, rules)}"),
                           f"not fixed (present at {changes.base} [id {f.fingerprint}]): masked by {by}, a new finding "
                           f"on its route, so the step still does not reach its layer\n{_finding_message(f)}"))
    return out


def _problem(p: Problem) -> str:
    return command(
        "warning",
        {"file": p.path, "title": f"mtp-audit skipped file ({p.kind})"},
        p.message,
    )


def render(result: ScanResult, rules: "list[type[Rule]]") -> str:
    by_code = rule_index(rules)
    lines = [_finding(f, by_code) for f in sorted_findings(result.findings) if not f.suppressed]
    if result.lint is not None:
        lines += _lint_notices(result.lint, by_code)
    lines += [_problem(p) for p in sorted_problems(result.problems)]
    return "".join(line + "\n" for line in lines)
