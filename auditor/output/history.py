"""Reports for :class:`~auditor.model.history.History`: ``text``, ``markdown``, ``html``, ``json``.

* ``json`` — the documented document (``auditor/output/HISTORY_FORMAT.md``).
* ``markdown`` — GitHub-flavoured: tables and lists only, no HTML.
* ``html`` — ONE self-contained file: inline CSS, a few lines of inline JS and an inline
  SVG chart generated here; nothing is fetched (no URL appears in the file).
* ``text`` — a terminal summary.

A ``diff`` report shows only what changed between its two revisions (introduced, fixed,
behaviour changes, and how many persist); a ``history`` report also lists what the first
release had. A by-design report (``eagle-style``) that goes away is a *behaviour change*
(``eagle-style -> threaded``), never counted as fixed: the same classification as ``lint``.
:func:`render_bisect` renders a ``bisect`` result (``text`` or ``json``).

Every format is deterministic (no timestamps, no timings) and never mutates the history.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any, Optional

from .. import __version__
from ..model.history import BEHAVIOUR_CHANGED, FIXED, INTRODUCED, MASKED, BisectResult, Delta, History, Release, by_rule
from ..model.findings import THREADED_TO_EAGLE, BehaviourChange, Finding, Masked
from .dispatch import render_as

HISTORY_FORMAT_VERSION = 1
FORMATS = ("text", "markdown", "html", "json")

YES, NO = "✓", "✗"


def render(hist: History, fmt: str) -> str:
    return render_as({"json": lambda h: json.dumps(to_json(h), indent=2, ensure_ascii=False) + "\n",
                      "markdown": to_markdown, "html": to_html, "text": to_text}, hist, fmt, "history")


# --------------------------------------------------------------------------- shared views


def rules_seen(hist: History) -> list[str]:
    return sorted({f.rule for r in hist.scanned() for f in r.result.findings})  # type: ignore[union-attr]


def matrix(hist: History) -> tuple[list[str], dict[str, dict[str, Optional[bool]]], dict[str, dict[str, str]]]:
    """MTP model class × release: True (some loop delivers step i to layer i), False, or absent.

    Rows are class names; copies of a class in several files (platform variants) share
    a row and count as reaching when any copy does. Also returns a tooltip per cell.
    """
    cells: dict[str, dict[str, Optional[bool]]] = {}
    notes: dict[str, dict[str, str]] = {}
    for rel in hist.scanned():
        for rc in rel.result.reachability:  # type: ignore[union-attr]
            name = rc.model_class.name
            reach = any(lp.steps_reach_layers for lp in rc.loops)
            row = cells.setdefault(name, {})
            row[rel.ref] = bool(row.get(rel.ref)) or reach
            lines = [f"{rc.model_class.path}"] + [
                f"{'yes' if lp.steps_reach_layers else (f'no ({lp.lost_at})' if lp.lost_at else 'no')}: {lp.loop}"
                for lp in rc.loops
            ] or []
            if not rc.loops:
                lines.append("no draft loop reaches this class")
            prev = notes.setdefault(name, {}).get(rel.ref)
            notes[name][rel.ref] = ((prev + "\n") if prev else "") + "\n".join(lines)
    names = sorted(cells, key=lambda n: (n.lower(), n))
    return names, cells, notes


def _counts(rel: Release, delta: Optional[Delta]) -> dict[str, Any]:
    if rel.result is None or delta is None:
        return {}
    return {
        "findings": len(rel.result.findings),
        "by_rule": by_rule(rel.result.findings),
        "introduced": len(delta.introduced),
        "fixed": len(delta.fixed),
        "behaviour_changes": len(delta.behaviour_changes),
        "masked": len(delta.masked),
        "persisted": len(delta.persisted),
        "moved": len(delta.moved),
    }


def _change_cells(hist: History, delta: Delta, c: dict[str, Any]) -> list[str]:
    """Introduced, fixed, behaviour changes, persisting; a diff's base revision changed nothing ("—")."""
    if hist.kind == "diff" and delta.base is None:
        return ["—", "—", "—", "—"]
    return [str(c["introduced"]), str(c["fixed"]), str(c["behaviour_changes"]), str(c["persisted"])]


# --------------------------------------------------------------------------- json


def to_json(hist: History) -> dict[str, Any]:
    releases = []
    for rel, delta in zip(hist.releases, hist.deltas):
        entry: dict[str, Any] = {
            "ref": rel.ref,
            "commit": rel.commit,
            "tree": rel.tree or None,
            "date": rel.date,
            "subject": rel.subject,
            "status": "scanned" if rel.scanned else "skipped",
            "skip_reason": rel.skipped or None,
        }
        if rel.result is not None and delta is not None:
            entry.update(
                {
                    "base": delta.base,
                    "counts": _counts(rel, delta),
                    "findings": [f.to_json() for f in rel.result.findings],
                    "introduced": [f.fingerprint for f in delta.introduced],
                    "persisted": [f.fingerprint for f in delta.persisted],
                    "fixed": [f.to_json() for f in delta.fixed],
                    "behaviour_changes": [c.to_json() for c in delta.behaviour_changes],
                    "masked": [m.to_json() for m in delta.masked],
                    "moved": [{"from": old, "to": new} for new, old in sorted(delta.moved.items())],
                    "reachability": [r.to_json() for r in rel.result.reachability],
                    "problems": [p.to_json() for p in rel.result.problems],
                    "stats": rel.result.stats,
                }
            )
        releases.append(entry)
    names, cells, _ = matrix(hist)
    return {
        "version": HISTORY_FORMAT_VERSION,
        "kind": hist.kind,
        "tool": {"name": "mtp-audit", "version": __version__},
        "repository": hist.repository,
        "rules": rules_seen(hist),
        "releases": releases,
        "layer_matrix": {
            "releases": [r.ref for r in hist.scanned()],
            "classes": [{"name": n, "cells": {ref: cells[n].get(ref) for ref in (r.ref for r in hist.scanned())}} for n in names],
        },
    }


# --------------------------------------------------------------------------- text


def _one_line(s: str) -> str:
    return re.sub(r"[\x00-\x1f\x7f]+", " ", s)


def _finding_line(f: Finding) -> str:
    return _one_line(f"{f.rule} {f.path}:{f.line} {f.function} -> {f.callee} [{f.fingerprint}]")


def _change_line(c: BehaviourChange) -> str:
    """``changed`` row: the kind, then the by-design report it concerns."""
    return _one_line(f"{c.change}: {_finding_line(c.finding)}")


def _changes_said(delta: Delta) -> str:
    n, m = len(delta.behaviour_changes), len(delta.masked)
    said = f", {n} behaviour change{'s' if n != 1 else ''} (by design, not fixes)" if n else ""
    return said + (f", {m} masked (not fixed: a new finding hides {'them' if m != 1 else 'it'})" if m else "")


def _masked_line(m: Masked) -> str:
    """``masked`` row: the base's defect, then the new findings that hide it."""
    return _one_line(f"{_finding_line(m.finding)} masked by {', '.join(str(b) for b in m.by)}")


def _diff_text(hist: History) -> str:
    """A diff: what B introduced and fixed compared with A; persisting findings are counted."""
    out = [f"mtp-audit diff: {_one_line(hist.repository)}"]
    base, head = hist.releases[0], hist.releases[-1]
    delta = hist.deltas[-1]
    assert delta is not None and head.result is not None
    out.append(
        _one_line(
            f"{base.ref} ({base.commit[:12]}) -> {head.ref} ({head.commit[:12]}): "
            f"{len(delta.introduced)} introduced, {len(delta.fixed)} fixed, {len(delta.persisted)} unchanged"
            + _changes_said(delta)
        )
    )
    for label, items in (("introduced", delta.introduced), ("fixed", delta.fixed)):
        for f in items:
            out.append(f"  {label:<10} {_finding_line(f)}")
    for change in delta.behaviour_changes:
        out.append(f"  {'changed':<10} {_change_line(change)}")
    for m in delta.masked:
        out.append(f"  {'masked':<10} {_masked_line(m)}")
    moved = [f for f in delta.persisted if f.fingerprint in delta.moved]
    for f in moved:
        out.append(f"  {'moved':<10} {_finding_line(f)} (was {delta.moved[f.fingerprint]})")
    return "\n".join(out) + "\n"


def to_text(hist: History) -> str:
    if hist.kind == "diff" and len(hist.releases) == 2 and hist.deltas[-1] is not None:
        return _diff_text(hist)
    out = [f"mtp-audit {hist.kind}: {_one_line(hist.repository)}", ""]
    rules = rules_seen(hist)
    header = ["release", "findings", "new", "fixed", "changed", "kept", *rules]
    rows = []
    for rel, delta in zip(hist.releases, hist.deltas):
        if rel.result is None or delta is None:
            rows.append([rel.ref, "skipped", "", "", "", "", *["" for _ in rules]])
            continue
        c = _counts(rel, delta)
        rows.append(
            [rel.ref, str(c["findings"]), str(c["introduced"]), str(c["fixed"]), str(c["behaviour_changes"]),
             str(c["persisted"]),
             *[str(c["by_rule"].get(r, 0)) for r in rules]]
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    out.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    for row in rows:
        out.append("  ".join(_one_line(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    for rel, delta in zip(hist.releases, hist.deltas):
        out.append("")
        if rel.result is None or delta is None:
            out.append(_one_line(f"{rel.ref} ({rel.commit[:12]}): SKIPPED — {rel.skipped}"))
            continue
        base = f" vs {delta.base}" if delta.base else " (first scanned)"
        out.append(_one_line(f"{rel.ref} ({rel.commit[:12]}){base}: {len(rel.result.findings)} findings"))
        for label, items in (("introduced", delta.introduced), ("fixed", delta.fixed), ("persisted", delta.persisted)):
            if delta.base is None and label != "introduced":
                continue
            for f in items:
                moved = f" (moved from {delta.moved[f.fingerprint]})" if f.fingerprint in delta.moved else ""
                out.append(f"  {label:<10} {_finding_line(f)}{moved}")
        for change in delta.behaviour_changes:
            out.append(f"  {'changed':<10} {_change_line(change)}")
        for m in delta.masked:
            out.append(f"  {'masked':<10} {_masked_line(m)}")
    names, cells, _ = matrix(hist)
    if names:
        refs = [r.ref for r in hist.scanned()]
        out += ["", "step i reaches layer i (✓ yes, ✗ no, blank: class absent)"]
        w = max(len(n) for n in names)
        out.append(" " * w + "  " + "  ".join(refs))
        for n in names:
            out.append(
                n.ljust(w) + "  " + "  ".join(_mark(cells[n].get(ref)).center(len(ref)) for ref in refs).rstrip()
            )
    return "\n".join(out) + "\n"


def _mark(v: Optional[bool]) -> str:
    return "" if v is None else (YES if v else NO)


# --------------------------------------------------------------------------- markdown


def _md(s: str) -> str:
    """Table-cell safe text: pipes escaped, no newlines, markdown specials neutralised."""
    s = _one_line(s).replace("\\", "\\\\").replace("|", "\\|")
    for ch in "`*_[]<>#":
        s = s.replace(ch, "\\" + ch)
    return s


def _code(s: str) -> str:
    s = _one_line(s).replace("|", "\\|")
    return f"`` {s} ``" if "`" in s else f"`{s}`"


def to_markdown(hist: History) -> str:
    rules = rules_seen(hist)
    title = "spec_step_idx audit: release history" if hist.kind == "history" else "spec_step_idx audit: diff"
    out = [f"# {title}", "", f"Repository: {_code(hist.repository)} — mtp-audit {__version__}", ""]
    out += ["## Summary", ""]
    out.append("| release | commit | findings | introduced | fixed | behaviour changes | persisted | "
               + " | ".join(rules) + (" |" if rules else "|"))
    out.append("|---" * (7 + len(rules)) + "|")
    for rel, delta in zip(hist.releases, hist.deltas):
        if rel.result is None or delta is None:
            out.append(f"| {_md(rel.ref)} | {_code(rel.commit[:12])} | **skipped**: {_md(rel.skipped)} | | | | |" + " |" * len(rules))
            continue
        c = _counts(rel, delta)
        cells = [str(c["findings"]), *_change_cells(hist, delta, c)]
        cells += [str(c["by_rule"].get(r, 0)) for r in rules]
        out.append(f"| {_md(rel.ref)} | {_code(rel.commit[:12])} | " + " | ".join(cells) + " |")
    names, cells_m, _ = matrix(hist)
    refs = [r.ref for r in hist.scanned()]
    if names:
        out += ["", "## Does draft step i reach MTP layer i?", "",
                f"{YES}: some draft loop delivers step *i* to layer *i*; {NO}: every loop reaching the class uses layer 0; blank: class absent.", ""]
        out.append("| class | " + " | ".join(_md(r) for r in refs) + " |")
        out.append("|---" * (1 + len(refs)) + "|")
        for n in names:
            out.append(f"| {_md(n)} | " + " | ".join(_mark(cells_m[n].get(ref)) for ref in refs) + " |")
    for rel, delta in zip(hist.releases, hist.deltas):
        if hist.kind == "diff" and delta is not None and delta.base is None:
            continue  # a diff shows what changed from A to B, not what A had
        out += ["", f"## {_md(rel.ref)}", ""]
        if rel.result is None or delta is None:
            out.append(f"**Skipped** ({_code(rel.commit[:12])}): {_md(rel.skipped)}.")
            continue
        out.append(f"Commit {_code(rel.commit[:12])} — {_md(rel.subject)}" + (f" — compared with {_md(delta.base)}" if delta.base else " — first scanned release"))
        groups = [("Introduced", delta.introduced)]
        if delta.base is not None:
            groups += [("Fixed", delta.fixed)]
            if hist.kind != "diff":
                groups += [("Persisting", delta.persisted)]
        for label, items in groups:
            out += ["", f"### {label} ({len(items)})", ""]
            if not items:
                out.append("None.")
                continue
            out.append("| rule | location | function | callee | fingerprint |")
            out.append("|---|---|---|---|---|")
            for f in items:
                fp = f.fingerprint + (f" (moved from {delta.moved[f.fingerprint]})" if f.fingerprint in delta.moved else "")
                out.append(f"| {f.rule} | {_code(f'{f.path}:{f.line}')} | {_code(f.function)} | {_code(f.callee)} | {_md(fp)} |")
        if delta.base is not None:
            out += _md_changes(delta.behaviour_changes)
            out += _md_masked(delta.masked)
        if delta.introduced or (delta.base is None and rel.result.findings):
            out += ["", "#### Call chains of introduced findings", ""]
            for f in delta.introduced:
                out.append(f"- **{f.rule}** {_code(f.function)} [{f.fingerprint}]: {_md(f.message)}")
                for i, hop in enumerate(f.trace, 1):
                    out.append(f"  {i}. {_code(f'{hop.path}:{hop.line}')} {_code(hop.function)} — {_md(hop.note)}")
    return "\n".join(out) + "\n"


def _md_changes(changes: list[BehaviourChange]) -> list[str]:
    out = ["", f"### Behaviour changes: by design, not fixes ({len(changes)})", ""]
    if not changes:
        return out + ["None."]
    out += ["| change | rule | location | function | classes (before -> after) | fingerprint |", "|---|---|---|---|---|---|"]
    for c in changes:
        f = c.finding
        steps = "; ".join(f"{s.model_class.name}: {s.before} -> {s.after}" for s in c.steps)
        out.append(f"| {_md(c.change)} | {f.rule} | {_code(f'{f.path}:{f.line}')} | {_code(f.function)} | {_md(steps)} | {_md(f.fingerprint)} |")
    return out


def _md_masked(masked: list[Masked]) -> list[str]:
    if not masked:
        return []
    out = ["", f"### Masked: not fixed, a new finding hides them ({len(masked)})", "",
           "| rule | location | function | callee | fingerprint | masked by |", "|---|---|---|---|---|---|"]
    for m in masked:
        f = m.finding
        out.append(f"| {f.rule} | {_code(f'{f.path}:{f.line}')} | {_code(f.function)} | {_code(f.callee)} | "
                   f"{_md(f.fingerprint)} | {_md(', '.join(str(b) for b in m.by))} |")
    return out


# --------------------------------------------------------------------------- html

_CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --bg:#ffffff; --soft:#f6f8fa;
        --new:#cf222e; --fixed:#1a7f37; --kept:#9a6700; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0 auto; padding: 24px; max-width: 1320px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 28px 0 8px;
     border-bottom: 1px solid var(--line); padding-bottom: 4px; } h3 { font-size: 15px; margin: 16px 0 6px; }
.muted { color: var(--muted); }
code, .mono { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
table { border-collapse: collapse; margin: 6px 0 12px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.skipped td { color: var(--muted); font-style: italic; background: #fff8c5; }
.matrix td.cell { text-align: center; font-size: 16px; min-width: 56px; }
.matrix td.yes { color: var(--fixed); background: #dafbe1; }
.matrix td.no { color: var(--new); background: #ffebe9; }
.tag { display: inline-block; padding: 0 6px; border-radius: 10px; font-size: 12px; font-weight: 600; color: #fff; }
.tag.introduced { background: var(--new); } .tag.fixed { background: var(--fixed); } .tag.persisted { background: var(--kept); }
.tag.changed { background: var(--muted); }
.tag.skipped { background: #8c959f; }
details { margin: 2px 0; } summary { cursor: pointer; }
ol.chain { margin: 4px 0 8px 18px; padding: 0; } ol.chain li { margin: 2px 0; }
.chart { border: 1px solid var(--line); border-radius: 6px; background: #fff; }
.toolbar button { font: inherit; margin-right: 6px; padding: 2px 10px; border: 1px solid var(--line);
                  border-radius: 6px; background: var(--soft); cursor: pointer; }
section.release { margin-bottom: 18px; }
"""

_JS = """
function setAll(open) {
  document.querySelectorAll('details.chain').forEach(function (d) { d.open = open; });
}
document.addEventListener('DOMContentLoaded', function () {
  var e = document.getElementById('expand'), c = document.getElementById('collapse');
  if (e) e.addEventListener('click', function () { setAll(true); });
  if (c) c.addEventListener('click', function () { setAll(false); });
});
"""

_PALETTE = ["#cf222e", "#0969da", "#9a6700", "#1a7f37", "#8250df", "#bc4c00", "#57606a", "#bf3989"]


def _e(s: Any) -> str:
    return html.escape(_one_line(str(s)), quote=True)


def chart_svg(hist: History, width: int = 960, height: int = 340) -> str:
    """Findings per rule across scanned releases, as an inline SVG line chart."""
    scanned = hist.scanned()
    rules = rules_seen(hist)
    left, right, top, bottom = 56, 150, 20, 64
    pw, ph = width - left - right, height - top - bottom
    series = {r: [by_rule(rel.result.findings).get(r, 0) for rel in scanned] for r in rules}  # type: ignore[union-attr]
    totals = [len(rel.result.findings) for rel in scanned]  # type: ignore[union-attr]
    ymax = max([1, *totals, *(v for s in series.values() for v in s)])
    step = max(1, -(-ymax // 5))
    ymax = step * -(-ymax // step)
    n = len(scanned)

    def x(i: int) -> float:
        return left + (pw / 2 if n == 1 else pw * i / (n - 1))

    def y(v: float) -> float:
        return top + ph - ph * v / ymax

    parts = [
        f'<svg id="chart" class="chart" role="img" aria-label="Findings per rule across releases" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        "<title>Findings per rule across releases</title>",
    ]
    for v in range(0, ymax + 1, step):
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eaeef2"/>')
        parts.append(f'<text x="{left - 8}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="11" fill="#59636e">{v}</text>')
    parts.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}" stroke="#8c959f"/>')
    parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}" stroke="#8c959f"/>')
    for i, rel in enumerate(scanned):
        parts.append(
            f'<text x="{x(i):.1f}" y="{top + ph + 16}" text-anchor="end" font-size="11" fill="#1f2328" '
            f'transform="rotate(-35 {x(i):.1f} {top + ph + 16})">{_e(rel.ref)}</text>'
        )
    lines = [("total", totals, "#1f2328", "4 3")] + [
        (r, series[r], _PALETTE[k % len(_PALETTE)], "") for k, r in enumerate(rules)
    ]
    for k, (name, values, color, dash) in enumerate(lines):
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(f'<g class="series" data-rule="{_e(name)}">')
        if n > 1:
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash_attr} points="{pts}"/>')
        for i, v in enumerate(values):
            parts.append(
                f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3.5" fill="{color}">'
                f"<title>{_e(name)} in {_e(scanned[i].ref)}: {v}</title></circle>"
            )
        parts.append("</g>")
        ly = top + 8 + 18 * k
        parts.append(f'<line x1="{left + pw + 16}" x2="{left + pw + 40}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="2"{dash_attr}/>')
        parts.append(f'<text x="{left + pw + 46}" y="{ly + 4}" font-size="12" fill="#1f2328">{_e(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _finding_rows(items: list[Finding], kind: str, delta: Delta) -> str:
    if not items:
        return '<p class="muted">None.</p>'
    rows = [
        f'<table class="findings {kind}"><thead><tr><th>rule</th><th>severity</th><th>location</th>'
        "<th>function → callee</th><th>finding and call chain</th><th>fingerprint</th></tr></thead><tbody>"
    ]
    for f in items:
        moved = (
            f'<br><span class="muted">moved from {_e(delta.moved[f.fingerprint])}</span>'
            if f.fingerprint in delta.moved
            else ""
        )
        hops = "".join(
            f'<li><code>{_e(h.path)}:{h.line}</code> <code>{_e(h.function)}</code> — {_e(h.note)}</li>' for h in f.trace
        )
        rows.append(
            f'<tr data-fingerprint="{_e(f.fingerprint)}"><td>{_e(f.rule)}</td><td>{_e(f.severity.value)}</td>'
            f"<td><code>{_e(f.path)}:{f.line}</code></td>"
            f"<td><code>{_e(f.function)}</code> → <code>{_e(f.callee)}</code></td>"
            f'<td><details class="chain"><summary>{_e(f.message)}</summary><ol class="chain">{hops}</ol></details></td>'
            f'<td class="mono">{_e(f.fingerprint)}{moved}</td></tr>'
        )
    rows.append("</tbody></table>")
    return "".join(rows)


def _html_changes(changes: list[BehaviourChange]) -> str:
    """By-design reports gone (or added where the step was threaded): not fixes."""
    head = f'<h4><span class="tag changed">Behaviour changes</span> {len(changes)} <span class="muted">by design, not fixes</span></h4>'
    if not changes:
        return head + '<p class="muted">None.</p>'
    rows = [head, '<table class="findings changed"><thead><tr><th>change</th><th>rule</th><th>location</th>'
            "<th>function</th><th>which layer each step selects, before → after</th><th>fingerprint</th></tr></thead><tbody>"]
    for c in changes:
        f = c.finding
        steps = "".join(f"<li><code>{_e(s.model_class.name)}</code>: {_e(s.before)} → {_e(s.after)}</li>" for s in c.steps)
        rows.append(f'<tr data-fingerprint="{_e(f.fingerprint)}"><td>{_e(c.change)}</td><td>{_e(f.rule)}</td>'
                    f"<td><code>{_e(f.path)}:{f.line}</code></td><td><code>{_e(f.function)}</code></td>"
                    f'<td><ul class="chain">{steps}</ul></td><td class="mono">{_e(f.fingerprint)}</td></tr>')
    rows.append("</tbody></table>")
    return "".join(rows)


def to_html(hist: History) -> str:
    rules = rules_seen(hist)
    title = "mtp-audit: spec_step_idx across releases" if hist.kind == "history" else "mtp-audit: diff"
    b: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style>",
        f"<script>{_JS}</script>",
        "</head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="muted">Repository <code>{_e(hist.repository)}</code> · mtp-audit {_e(__version__)} · '
        f"{len(hist.scanned())} scanned, {len(hist.releases) - len(hist.scanned())} skipped</p>",
        '<h2 id="chart-title">Findings per rule</h2>',
        chart_svg(hist),
        '<h2>Summary</h2><table id="summary" class="summary"><thead><tr><th>release</th><th>commit</th>'
        "<th>findings</th><th>introduced</th><th>fixed</th><th>behaviour changes</th><th>persisting</th>"
        + "".join(f"<th>{_e(r)}</th>" for r in rules)
        + "</tr></thead><tbody>",
    ]
    for rel, delta in zip(hist.releases, hist.deltas):
        if rel.result is None or delta is None:
            b.append(
                f'<tr class="skipped"><td><a href="#rel-{_e(rel.ref)}">{_e(rel.ref)}</a></td><td class="mono">{_e(rel.commit[:12])}</td>'
                f'<td colspan="{5 + len(rules)}"><span class="tag skipped">skipped</span> {_e(rel.skipped)}</td></tr>'
            )
            continue
        c = _counts(rel, delta)
        b.append(
            f'<tr><td><a href="#rel-{_e(rel.ref)}">{_e(rel.ref)}</a></td><td class="mono">{_e(rel.commit[:12])}</td>'
            f'<td class="num">{c["findings"]}</td>'
            + "".join(f'<td class="num">{cell}</td>' for cell in _change_cells(hist, delta, c))
            + "".join(f'<td class="num">{c["by_rule"].get(r, 0)}</td>' for r in rules)
            + "</tr>"
        )
    b.append("</tbody></table>")
    names, cells, notes = matrix(hist)
    refs = [r.ref for r in hist.scanned()]
    b.append("<h2>Does draft step <i>i</i> reach MTP layer <i>i</i>?</h2>")
    b.append(
        f'<p class="muted">{YES}: some draft loop delivers step <i>i</i> to layer <i>i</i>; {NO}: every draft loop reaching '
        "the class selects layer 0; blank: the class does not exist in that release. Hover a cell for the loops.</p>"
    )
    if names:
        b.append('<table id="matrix" class="matrix"><thead><tr><th>MTP model class</th>')
        b.append("".join(f"<th>{_e(r)}</th>" for r in refs) + "</tr></thead><tbody>")
        for n in names:
            b.append(f"<tr><th>{_e(n)}</th>")
            for ref in refs:
                v = cells[n].get(ref)
                cls = "" if v is None else ("yes" if v else "no")
                tip = html.escape(notes.get(n, {}).get(ref, ""), quote=True)
                b.append(f'<td class="cell {cls}" title="{tip}">{_mark(v)}</td>')
            b.append("</tr>")
        b.append("</tbody></table>")
    else:
        b.append('<p class="muted">No MTP model classes found.</p>')
    b.append('<h2>Releases</h2><p class="toolbar"><button id="expand" type="button">Expand all call chains</button>'
             '<button id="collapse" type="button">Collapse all</button></p>')
    for rel, delta in zip(hist.releases, hist.deltas):
        if hist.kind == "diff" and delta is not None and delta.base is None:
            continue  # a diff shows what changed from A to B, not what A had
        b.append(f'<section class="release" id="rel-{_e(rel.ref)}"><h3>{_e(rel.ref)} '
                 f'<span class="muted mono">{_e(rel.commit[:12])}</span></h3>')
        if rel.result is None or delta is None:
            b.append(f'<p><span class="tag skipped">skipped</span> {_e(rel.skipped)}</p></section>')
            continue
        base = f"compared with {_e(delta.base)}" if delta.base else "first scanned release"
        b.append(f'<p class="muted">{_e(rel.subject)} · {_e(rel.date)} · {base}</p>')
        groups = [("introduced", "Introduced", delta.introduced)]
        if delta.base is not None:
            groups += [("fixed", "Fixed", delta.fixed)]
            if hist.kind != "diff":
                groups += [("persisted", "Persisting", delta.persisted)]
        for kind, label, items in groups:
            b.append(f'<h4><span class="tag {kind}">{label}</span> {len(items)}</h4>')
            b.append(_finding_rows(items, kind, delta))
        if delta.base is not None:
            b.append(_html_changes(delta.behaviour_changes))
            if delta.masked:  # not fixed: the new findings named hide them
                b.append(f'<h4><span class="tag masked">Masked</span> {len(delta.masked)} '
                         f'<span class="muted">not fixed: hidden by {_e(", ".join(sorted({str(x) for m in delta.masked for x in m.by})))}</span></h4>')
                b.append(_finding_rows([m.finding for m in delta.masked], "masked", delta))
        b.append("</section>")
    b.append("</body></html>")
    return "\n".join(b) + "\n"


# --------------------------------------------------------------------------- bisect


_BISECT_SAYS = {
    INTRODUCED: "is introduced",
    FIXED: "is fixed",
    BEHAVIOUR_CHANGED: "is gone: the behaviour changed (by design, not a fix)",
}


def _bisect_says(res: BisectResult) -> str:
    if res.direction == BEHAVIOUR_CHANGED and res.change == THREADED_TO_EAGLE:  # a by-design report that appears
        return f"appears: the behaviour changed ({res.change}; by design, not a new defect)"
    if res.direction == MASKED:
        return (f"is gone, masked by {', '.join(str(b) for b in res.masked_by)}: the step still does not reach "
                "its layer (not a fix)")
    return _BISECT_SAYS[res.direction]


def render_bisect(res: BisectResult, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(res.to_json(), indent=2, sort_keys=False) + "\n"
    f = res.finding
    lines = [
        f"{res.commit} is the first commit where finding {res.fingerprint} {_bisect_says(res)}",
        f"subject: {res.subject}",
        f"date:    {res.date}",
        *([f"change:  {res.change}"] if res.change else []),
        f"searched {res.candidates} commits between {res.good} and {res.bad} with {res.scans} scans",
        "",
        f"{f.rule} {f.severity.value} {f.path}:{f.line}:{f.column + 1} {f.function}",
        f"  {f.message}",
    ]
    for i, hop in enumerate(f.trace, 1):
        lines.append(f"  {i}. {hop.path}:{hop.line} {hop.function} — {hop.note}")
    return "\n".join(_bisect_clean(line) for line in lines) + "\n"


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _bisect_clean(s: str) -> str:
    return _CONTROL.sub("?", s)
