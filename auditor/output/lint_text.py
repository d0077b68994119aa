"""``lint --format text``: the sections after the new findings (issue 18 item 10).

``Fixed by the change (N)``: one line per defect the change removes — rule, name, where the
base had it, function → callee, and its id. ``Behaviour changes (N): by design, not fixes``:
per by-design report the change removed (or added), the kind (``eagle-style -> threaded``),
the loop and the report's id, then which layer each step selects per MTP class before and
after, grouped by the pair (every class on its own line with ``--verbose``), and the
change's new findings about those classes. ``Masked by the change (N): not fixed, a new
finding hides them``: one line per defect that went only because a new finding sits on its
route before it, with the ids of those findings. Nothing is printed when all are empty.
"""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING, Callable

from rich.console import Console
from rich.text import Text

from auditor.model.findings import BehaviourChange, Finding, LintChanges, Masked, ScanResult, StepChange

from ._common import rule_title

if TYPE_CHECKING:
    from rules.base import Rule

#: classes named per (before, after) group in the compact report
COMPACT_CLASSES = 4

Clean = Callable[[object], str]
Location = Callable[[str, int], str]


def render_changes(console: Console, result: ScanResult, rules: "dict[str, type[Rule]]", clean: Clean,
                   location: Location, verbose: bool) -> bool:
    """Print the sections; whether anything was printed."""
    changes: LintChanges | None = result.lint
    if changes is None or not (changes.fixed or changes.behaviour_changes or changes.masked):
        return False
    new_rules = {f.fingerprint: f.rule for f in result.findings}
    if changes.fixed:
        console.print(Text(f"Fixed by the change ({len(changes.fixed)})", style="bold underline"))
        for f in sorted(changes.fixed, key=Finding.sort_key):
            console.print(_fixed_line(f, rules, clean, location), soft_wrap=True)
    if changes.behaviour_changes:
        if changes.fixed:
            console.print()
        console.print(Text(f"Behaviour changes ({len(changes.behaviour_changes)}): by design, not fixes",
                           style="bold underline"))
        for change in sorted(changes.behaviour_changes, key=BehaviourChange.sort_key):
            _change(console, change, rules, new_rules, clean, location, verbose)
    if changes.masked:
        if changes.fixed or changes.behaviour_changes:
            console.print()
        console.print(Text(f"Masked by the change ({len(changes.masked)}): not fixed, a new finding hides them",
                           style="bold underline"))
        for m in sorted(changes.masked, key=Masked.sort_key):
            line = _fixed_line(m.finding, rules, clean, location)
            line.append(f"  masked by {', '.join(clean(str(b)) for b in m.by)}")
            console.print(line, soft_wrap=True)
    return True


def _fixed_line(f: Finding, rules: "dict[str, type[Rule]]", clean: Clean, location: Location) -> Text:
    t = Text("  ")
    t.append(clean(rule_title(f.rule, rules)), style="bold")
    t.append("  ")
    t.append(location(f.path, f.line), style="blue")
    if f.function:
        t.append(f"  {clean(f.function)}")
    if f.callee:
        t.append(f" → {clean(f.callee)}")
    t.append(f"  [id {f.fingerprint}]", style="dim")
    return t


def _change(console: Console, change: BehaviourChange, rules: "dict[str, type[Rule]]", new_rules: dict[str, str],
            clean: Clean, location: Location, verbose: bool) -> None:
    f = change.finding
    head = Text("  ")
    head.append(change.change, style="bold")
    head.append("  ")
    head.append(location(f.path, f.line), style="blue")
    head.append(f"  {clean(f.function)}")
    head.append(f"  ({'was' if _removed(change) else 'now'} {clean(rule_title(f.rule, rules))} ", style="dim")
    head.append(f"[id {f.fingerprint}])", style="dim")
    console.print(head, soft_wrap=True)
    if verbose:
        console.print(Text(f"    {clean(f.message)}", style="dim"), soft_wrap=True)
        for s in change.steps:
            t = Text(f"    {clean(s.model_class.name)} ({clean(s.model_class.path)}): {s.before} -> {s.after}")
            if s.detail:
                t.append(f"; {clean(s.detail)}", style="dim")
            if s.related:
                t.append(f"; new: {', '.join(_ids(s.related, new_rules))}")
            console.print(t, soft_wrap=True)
        return
    for (before, after), group in groupby(sorted(change.steps, key=_pair), key=_pair):
        names = list(dict.fromkeys(clean(s.model_class.name) for s in group))
        shown = ", ".join(names[:COMPACT_CLASSES]) + (f" and {len(names) - COMPACT_CLASSES} more" if len(names) > COMPACT_CLASSES else "")
        console.print(Text(f"    {before} -> {after}: {len(names)} MTP class(es): {shown}"), soft_wrap=True)
    related: dict[str, list[str]] = {}
    for s in change.steps:
        for fp in s.related:
            related.setdefault(fp, []).append(clean(s.model_class.name))
    if related:
        listed = "; ".join(f"{rid} ({', '.join(dict.fromkeys(names))})" for rid, names in
                           zip(_ids(sorted(related), new_rules), (related[k] for k in sorted(related))))
        console.print(Text(f"    the change's new findings about these classes: {listed}", style="dim"), soft_wrap=True)


def _removed(change: BehaviourChange) -> bool:
    return change.removed


def _pair(s: StepChange) -> tuple[str, str]:
    return (s.before, s.after)


def _ids(fingerprints: "tuple[str, ...] | list[str]", new_rules: dict[str, str]) -> list[str]:
    return [f"{new_rules.get(fp, '?')} {fp[:8]}" for fp in fingerprints]
