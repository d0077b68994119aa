"""Reports of ``history --layers`` (:class:`~auditor.model.layer_history.LayerHistory`):
``text``, ``markdown``, ``html`` (in the style of ``layers --all --format html``) and ``json``
(``{"kind": "layer-history", ...}``, documented in ``docs/history.md``)."""

from __future__ import annotations

import html
import json
from typing import Any, Optional

from ..model.layer_history import LAYER_HISTORY_FORMAT_VERSION, LayerHistory, PlanCell
from .dispatch import render_as
from .layers import HEATMAP_CSS


def _layers(values: tuple[Optional[int], ...]) -> str:
    return ",".join("-" if v is None else str(v) for v in values)


def _forward(cell: PlanCell) -> str:
    """The forward layer per step; a stack a step runs whole as its layers joined (``0+1+2``)."""
    return ",".join("+".join(map(str, st)) if v is None and st else "-" if v is None else str(v)
                    for v, st in zip(cell.forward, cell.step_stacks()))


def cell_text(cell: Optional[PlanCell]) -> str:
    """``forward layers / head layers`` per step; ``?`` when an unknown branch picks the
    drafter, ``—`` when the architecture is not registered in that release, ``no drafter``
    when the runner builds none for it."""
    if cell is None:
        return "—"
    if cell.drafter is None:
        return "no drafter"
    return f"{_forward(cell)} / {_layers(cell.head)}" + ("" if cell.known else " ?")


def _since_text(since: Optional[str], lost: tuple[str, ...], shared_head: bool = False) -> str:
    if since is None:
        return "shared head" if shared_head else "never"
    return since + (f" (not in {', '.join(lost)})" if lost else "")


def _title(hist: LayerHistory) -> str:
    return (f"Since when does draft step i reach MTP layer i? K={hist.k}, {hist.layers} layers per model, "
            f"method {hist.method}, platform {hist.platform}")


def to_json(hist: LayerHistory) -> dict[str, Any]:
    refs = [r.ref for r in hist.scanned()]
    return {
        "version": LAYER_HISTORY_FORMAT_VERSION,
        "kind": "layer-history",
        "repository": hist.repository,
        "k": hist.k,
        "layers": hist.layers,
        "runners": list(hist.runners),
        "platform": hist.platform,
        "method": hist.method,
        "releases": [{"ref": r.ref, "commit": r.commit, "tree": r.tree or None,
                      "status": "skipped" if r.skipped else "scanned", "skip_reason": r.skipped or None}
                     for r in hist.releases],
        "rows": [
            {
                "architecture": row.architecture,
                "runner": row.runner,
                "forward_since": row.forward_since,
                "head_since": row.head_since,
                "forward_lost": list(row.forward_lost),
                "head_lost": list(row.head_lost),
                "shared_head": row.shared_head,
                "cells": {
                    ref: None if (c := row.cells[ref]) is None else {
                        **c.to_json(), "forward_reaches": c.forward_reaches(hist.layers), "head_reaches": c.head_reaches(hist.layers)}
                    for ref in refs
                },
            }
            for row in hist.rows()
        ],
    }


def to_text(hist: LayerHistory) -> str:
    refs = [r.ref for r in hist.scanned()]
    head = ["architecture", "runner", "forward since", "head since", *refs]
    body = [[row.architecture, row.runner.upper(), _since_text(row.forward_since, row.forward_lost),
             _since_text(row.head_since, row.head_lost, row.shared_head), *(cell_text(row.cells[r]) for r in refs)] for row in hist.rows()]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    out = [_title(hist), hist.repository]
    out += [f"skipped {r.ref}: {r.skipped}" for r in hist.releases if r.skipped]
    out.append("cells: forward layer per step / head layer per step ('-': one shared head, '?': an unknown branch "
               "picks the drafter, '—': not registered)")
    out.append("")
    for line in [head, *body]:
        out.append("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip())
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(hist: LayerHistory) -> str:
    refs = [r.ref for r in hist.scanned()]
    out = [f"## {_title(hist)}", "", f"Repository `{hist.repository}`.", ""]
    out += [f"- skipped `{r.ref}`: {r.skipped}" for r in hist.releases if r.skipped]
    out.append("Cells: forward layer per step / head layer per step (`-`: one shared head, `?`: an unknown branch "
               "picks the drafter, `—`: not registered).")
    out.append("")
    out.append("| architecture | runner | forward since | head since | " + " | ".join(refs) + " |")
    out.append("|---|---|---|---|" + "---|" * len(refs))
    for row in hist.rows():
        cells = " | ".join(_md(cell_text(row.cells[r])) for r in refs)
        out.append(f"| `{row.architecture}` | {row.runner.upper()} | {_md(_since_text(row.forward_since, row.forward_lost))} "
                   f"| {_md(_since_text(row.head_since, row.head_lost, row.shared_head))} | {cells} |")
    return "\n".join(out) + "\n"


def to_html(hist: LayerHistory) -> str:
    """One self-contained page in the style of ``layers --all --format html``: a row per
    architecture x runner, a cell per release, green when forward and head layers follow
    the step, yellow when only the forward layer does."""
    def e(text: object) -> str:
        return html.escape(str(text), quote=True)

    refs = [r.ref for r in hist.scanned()]
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>mtp-audit history --layers: {e(hist.repository)}</title>", f"<style>{HEATMAP_CSS}</style>", "</head><body>",
           f"<h1>{e(_title(hist))}</h1>",
           f'<p class="muted">{e(hist.repository)} · each cell: forward layers per step, head layers below · hover for the drafter</p>',
           '<p class="legend"><span class="threaded">forward and head follow the step</span>'
           '<span class="unknown">forward only</span><span class="constant">neither</span></p>']
    out += [f'<p class="muted">skipped {e(r.ref)}: {e(r.skipped)}</p>' for r in hist.releases if r.skipped]
    out.append('<table id="layer-history"><thead><tr><th>architecture</th><th>runner</th><th>forward since</th>'
               "<th>head since</th>" + "".join(f"<th>{e(r)}</th>" for r in refs) + "</tr></thead><tbody>")
    for row in hist.rows():
        cells = [f"<td><code>{e(row.architecture)}</code></td><td>{e(row.runner.upper())}</td>",
                 f"<td>{e(_since_text(row.forward_since, row.forward_lost))}</td>",
                 f"<td>{e(_since_text(row.head_since, row.head_lost, row.shared_head))}</td>"]
        for ref in refs:
            c = row.cells[ref]
            if c is None:
                cells.append('<td class="cell none">—</td>')
                continue
            cls = ("threaded" if c.head_reaches(hist.layers) else "unknown") if c.forward_reaches(hist.layers) else "constant"
            title = f"{c.drafter or 'no drafter'} -> {c.model_class or '?'}: {'; '.join(dict.fromkeys(c.verdicts))}"
            cells.append(f'<td class="cell {cls}" title="{e(title)}">{e(_forward(c))}'
                         f"<br><small>{e(_layers(c.head))}{'' if c.known else ' ?'}</small></td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></body></html>")
    return "\n".join(out) + "\n"


def render(hist: LayerHistory, fmt: str) -> str:
    return render_as({"json": lambda h: json.dumps(to_json(h), indent=2, ensure_ascii=False) + "\n",
                      "markdown": to_markdown, "html": to_html, "text": to_text}, hist, fmt, "history")
