"""``--format text``: the human report, rendered with rich into a string.

Layout (stable order, no timestamps):

1. findings grouped by file (files sorted; findings by line, column, rule), each
   with rule code and name, severity, ``path:line:col``, the enclosing function and
   the callee, its id (the fingerprint ``explain`` takes), the message, the call chain
   (one hop per line, ``path:line function — note``) and the affected MTP classes;
2. ``Skipped files``: the problems (parse errors and the like);
3. only with ``reachability=True`` (``scan --reachability``): ``Layer reachability``,
   per MTP model class its architectures and layer-count config fields, and per draft
   loop the route's outcome (``✓ step i → layer i`` / ``✗ layer 0 every step`` /
   ``✗ raises at step N`` / ``? unknown``);
4. only in a lint result: ``Fixed by the change`` and ``Behaviour changes`` (see
   :mod:`auditor.output.lint_text`);
5. one summary line.

Columns are shown 1-based (``path:line:col`` as editors expect); ``Finding.column`` is
0-based.
"""

from __future__ import annotations

import io
from itertools import groupby
from typing import TYPE_CHECKING

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from auditor.model.findings import Finding, Hop, ReachVerdict, ScanResult, Severity
from auditor.common.search_limits import advice

from .lint_text import render_changes
from ._common import (
    rule_index,
    rule_title,
    sorted_findings,
    sorted_problems,
    sorted_reachability,
    summary_line,
)

if TYPE_CHECKING:
    from rules.base import Rule

DEFAULT_WIDTH = 100

SEVERITY_STYLE = {
    Severity.ERROR: "bold red",
    Severity.WARNING: "bold yellow",
    Severity.NOTE: "cyan",
}

REACHES = "✓ step i → layer i"
STUCK = "✗ layer 0 every step"
UNKNOWN_REACH = "? unknown"
RAISES = "✗ raises at step {step}"
LOST_REACH = "✗ step lost"  # the detail names where (``lost at path:line``), as ``layers`` does


_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)] if c not in (0x09, 0x0A)}


def _clean(value: object) -> str:
    """Text from the scanned tree with control characters shown as ``\\xNN``.

    Messages and names come from scanned source; an ESC or CR in them must not reach
    the user's terminal as a control sequence.
    """
    return str(value).translate(_CONTROL)


def _console(width: int | None, color: bool) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=width or DEFAULT_WIDTH,
        force_terminal=color,
        force_jupyter=False,
        force_interactive=False,
        color_system="standard" if color else None,
        no_color=not color,
        highlight=False,
        emoji=False,
        markup=False,
        legacy_windows=False,
        # An empty environment: COLUMNS, NO_COLOR, FORCE_COLOR, TTY_* and friends of
        # whoever runs the tool must not change the bytes of the report.
        _environ={},
    )
    return console, buf


def _location(path: str, line: int, column: int | None = None) -> str:
    path = _clean(path)
    if line < 1:  # unknown line: the file itself
        return path
    if column is None or column < 0:
        return f"{path}:{line}"
    return f"{path}:{line}:{column + 1}"


def _hop_text(hop: Hop) -> Text:
    t = Text("      ")
    t.append(_location(hop.path, hop.line), style="blue")
    t.append(f" {_clean(hop.function)}")
    if hop.note:
        t.append(f" — {_clean(hop.note)}", style="dim")
    return t


def _finding(console: Console, f: Finding, rules: "dict[str, type[Rule]]", verbose: bool = True,
             folded: "list[Finding] | None" = None) -> None:
    head = Text("  ")
    head.append(_clean(rule_title(f.rule, rules)), style="bold")
    head.append(" ")
    head.append(f.severity.value, style=SEVERITY_STYLE.get(f.severity, ""))
    if f.suppressed:
        head.append(" (suppressed)", style="dim")
    head.append("  ")
    head.append(_location(f.path, f.line, f.column), style="blue")
    if f.function:
        head.append(f"  {_clean(f.function)}", style="bold")
    if f.callee:
        head.append(f" → {_clean(f.callee)}")
    if f.fingerprint:
        head.append(f"  [id {f.fingerprint}]", style="dim")
    console.print(head, soft_wrap=True)
    console.print(Padding(Text(_clean(f.message)), (0, 0, 0, 4), expand=False))
    for other in folded or ():
        # the same loop shape elsewhere in the class (a warm-up or dummy run): one line here
        t = Text("    also ")
        t.append(_location(other.path, other.line, other.column), style="blue")
        beyond = sorted({c.name for c in other.affected_classes} - {c.name for c in f.affected_classes})
        t.append(f"  {_clean(other.function)} → {_clean(other.callee)}, {len(other.affected_classes)} MTP class(es)")
        if beyond:
            t.append(_clean(f", beyond the above: {', '.join(beyond[:3])}" + (f" and {len(beyond) - 3} more" if len(beyond) > 3 else "")))
        t.append(f"  [id {other.fingerprint}]", style="dim")
        console.print(t, soft_wrap=True)
    if not verbose:
        _compact_details(console, f)
        return
    if f.trace:
        console.print(Text("    call chain:", style="dim"))
        for hop in f.trace:
            console.print(_hop_text(hop), soft_wrap=True)
    if f.affected_classes:
        console.print(Text("    affected MTP classes:", style="dim"))
        for ref in f.affected_classes:
            console.print(Text(f"      {_clean(ref.name)}  ({_clean(ref.path)})"), soft_wrap=True)


#: affected classes named in full in the compact report (more: a count, --verbose for all)
COMPACT_CLASSES = 4


def _compact_details(console: Console, f: Finding) -> None:
    """The call chain's two ends and the affected classes by name, one line each."""
    if f.trace:
        first, last = f.trace[0], f.trace[-1]
        t = Text("    call chain: ", style="dim")
        t.append(_location(first.path, first.line), style="blue")
        t.append(f" {_clean(first.function)}")
        if len(f.trace) > 1:
            t.append(f" … {len(f.trace) - 2} hop(s) … " if len(f.trace) > 2 else " → ")
            t.append(_location(last.path, last.line), style="blue")
            t.append(f" {_clean(last.function)}")
        t.append(f"  (mtp-audit explain {f.fingerprint[:8]})" if f.fingerprint else "", style="dim")
        console.print(t, soft_wrap=True)
    if f.affected_classes:
        names = list(dict.fromkeys(_clean(ref.name) for ref in f.affected_classes))
        if len(f.affected_classes) == 1 and names[0] == _clean(f.function).split(".")[0]:
            return  # the finding is on that class itself: its head already names it
        shown = ", ".join(names[:COMPACT_CLASSES])
        more = len(names) - COMPACT_CLASSES
        copies = len(f.affected_classes) - len(names)
        t = Text(f"    affected: {len(f.affected_classes)} MTP class(es): ", style="dim")
        t.append(shown + (f" and {more} more" if more > 0 else ""))
        if copies:
            t.append(f" ({copies} per-platform cop{'y' if copies == 1 else 'ies'})", style="dim")
        if more > 0 or copies:
            t.append("; --verbose lists them", style="dim")
        console.print(t, soft_wrap=True)


def _fold_same_loops(findings: list[Finding]) -> tuple[list[Finding], dict[str, list[Finding]]]:
    """Findings to print, and per printed finding the ones folded into it.

    The MTP002s of one class (its draft loop and the same loop shape run elsewhere in the
    class: a warm-up or dummy run, a fused variant) read as duplicates when printed as
    findings of their own: each is folded into the class's MTP002 that reaches the most
    classes, as an "also" line that names the classes it reaches beyond that finding's."""
    loops = [f for f in findings if f.rule == "MTP002" and not f.suppressed]
    folded: dict[str, list[Finding]] = {}
    gone: set[str] = set()

    def owner(f: Finding) -> str:
        return f.function.rpartition(".")[0]

    for f in loops:
        if not owner(f):
            continue
        family = [g for g in loops if owner(g) == owner(f)]
        host = max(family, key=lambda g: (len(g.affected_classes), g.fingerprint))
        if host is not f:
            folded.setdefault(host.fingerprint, []).append(f)
            gone.add(f.fingerprint)
    return [f for f in findings if f.fingerprint not in gone], folded


def _findings(console: Console, result: ScanResult, rules: "dict[str, type[Rule]]", verbose: bool = True) -> None:
    findings = sorted_findings(result.findings)
    if not findings:
        return  # the summary line says "0 findings"; nothing else is printed
    folded: dict[str, list[Finding]] = {}
    if not verbose:
        findings, folded = _fold_same_loops(findings)
    console.print(Text("Findings", style="bold underline"))
    for n, (path, group) in enumerate(groupby(findings, key=lambda f: f.path)):
        if n or verbose:  # compact: the first file right under the heading
            console.print()
        if verbose:  # compact: each finding's location already names its file
            console.print(Text(_clean(path), style="bold magenta"), soft_wrap=True)
        for f in group:
            _finding(console, f, rules, verbose, folded.get(f.fingerprint))


def _problems(console: Console, result: ScanResult, first: bool) -> None:
    problems = sorted_problems(result.problems)
    if not problems:
        return
    if not first:  # a blank line after the findings
        console.print()
    console.print(Text(f"Skipped files ({len(problems)})", style="bold underline"))
    for p in problems:
        t = Text("  ")
        t.append(_clean(p.path), style="blue")
        t.append(f"  [{_clean(p.kind)}] ", style="yellow")
        t.append(_clean(p.message))
        console.print(t, soft_wrap=True)


def _reachability(console: Console, result: ScanResult) -> None:
    """One record per MTP model class, loops aligned under a verdict column.

    Laid out as aligned lines rather than a boxed rich ``Table``: its cells would fold
    the long repo paths and ``path:line`` loop names at any usual width, and those must
    stay intact to be clicked, copied and grepped.
    """
    items = sorted_reachability(result.reachability)
    if not items:
        return
    console.print()
    classes = f"{len(items)} MTP model class" + ("" if len(items) == 1 else "es")
    console.print(Text(f"Layer reachability ({classes})", style="bold underline"))
    pad = max(len(REACHES), len(STUCK)) + 2
    for item in items:
        head = Text("  ")
        head.append(_clean(item.model_class.name), style="bold")
        head.append(f"  {_clean(item.model_class.path)}", style="dim")
        console.print(head, soft_wrap=True)
        console.print(Text(f"    architectures: {_clean(', '.join(item.architectures)) or '—'}"), soft_wrap=True)
        console.print(
            Text(f"    layer-count fields: {_clean(', '.join(item.layer_count_fields)) or '—'}"), soft_wrap=True
        )
        if not item.loops:
            console.print(Text("    — no draft loop reaches it", style="dim"))
        for loop in item.loops:
            line = Text("    ")
            if loop.verdict is ReachVerdict.RAISES and loop.raises is not None:
                line.append(RAISES.format(step=loop.raises.step).ljust(pad), style="red")
            elif loop.verdict is ReachVerdict.UNKNOWN:
                line.append(UNKNOWN_REACH.ljust(pad), style="yellow")
            elif loop.verdict is ReachVerdict.LOST:
                line.append(LOST_REACH.ljust(pad), style="red")
            elif loop.steps_reach_layers:
                line.append(REACHES.ljust(pad), style="green")
            else:
                line.append(STUCK.ljust(pad), style="red")
            line.append(_clean(loop.loop))
            console.print(line, soft_wrap=True)
            if loop.detail:
                console.print(Text(" " * (4 + pad) + _clean(loop.detail), style="dim"), soft_wrap=True)


def render(
    result: ScanResult, rules: "list[type[Rule]]", *, width: int | None = None, color: bool = False, reachability: bool = False,
    verbose: bool = False,
) -> str:
    """``verbose``: every hop of every call chain and every affected class, and no finding
    folded into another; else one line for each (``explain`` shows a finding in full)."""
    console, buf = _console(width, color)
    by_code = rule_index(rules)
    _findings(console, result, by_code, verbose)
    _problems(console, result, first=not buf.getvalue())
    if result.lint is not None:  # lint: what the change fixed and what it changed by design
        if buf.getvalue() and (result.lint.fixed or result.lint.behaviour_changes or result.lint.masked):
            console.print()
        render_changes(console, result, by_code, _clean, _location, verbose)
    if reachability:
        _reachability(console, result)
    if buf.getvalue():
        console.print()
    console.print(Text(summary_line(result), style="bold"), soft_wrap=True)
    limits = result.stats.get("limits_hit")
    if limits:
        cuts = ", ".join(f"{name} ×{n}" for name, n in sorted(limits.items()))
        console.print(
            Text(f"note: the search stopped at its limits ({cuts}); a path longer than those limits is not followed, "
                 f"so a finding beyond them may be missing{'; ' + advice(limits) if advice(limits) else ''}", style="dim"),
            soft_wrap=True,
        )
    # split on "\n" only: str.splitlines would also break at \u2028 and friends in messages
    lines = [line.rstrip() for line in buf.getvalue().split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"
