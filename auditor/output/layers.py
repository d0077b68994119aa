"""Reports of ``mtp-audit layers``: one plan or the ``--all`` matrix of plans as ``text``,
``markdown``, ``json`` (versioned, documented in ``docs/layers.md``) or a self-contained
``html`` heat map. Renders the dispatch analysis's plans; computes nothing."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..analyses.dispatch import ForcedPlan, Plan, Setting, StepPlan

LAYERS_FORMAT_VERSION = 1
FORMATS = ("text", "json", "markdown", "html")


ENGINE_MODES = ("eager", "compiled", "both")


def plan_json(plan: Plan, tree_label: str, forced: ForcedPlan | None = None, engine_mode: str = "both") -> dict[str, Any]:
    s = plan.setting
    doc: dict[str, Any] = {
        "version": LAYERS_FORMAT_VERSION,
        "root": tree_label,
        "runner": s.runner,
        "method": s.method,
        "k": s.k,
        **({"k_derived": s.k_derived} if s.k is None and s.k_derived is not None else {}),
        "platform": s.platform,
        "architecture": plan.architecture,
        "proposer": None if plan.proposer is None else {"class": plan.proposer[1], "path": plan.proposer[0]},
        "proposer_site": None if plan.proposer_site is None else {"path": plan.proposer_site.path, "line": plan.proposer_site.line,
                                                                   "function": plan.proposer_site.function},
        "loop": None if plan.loop is None else {"path": plan.loop.path, "line": plan.loop.line, "function": plan.loop.function},
        "model_class": None if plan.model_class is None else {"class": plan.model_class[1], "path": plan.model_class[0]},
        "num_mtp_layers": plan.num_mtp_layers,
        "layer_count_field": plan.layer_field,
        "steps": [
            {"step": st.step, "forward_layer": st.forward_layer, "forward_layers": _list(st.forward_layers),
             "head_layer": st.head_layer, "verdict": st.verdict, "why": st.why}
            for st in plan.steps
        ],
        "decisions": [
            {"path": d.path, "line": d.line, "function": d.function, "condition": d.condition, "value": d.value,
             "fields": list(d.fields), "depends_on": d.depends_on}
            for d in plan.decisions
        ],
        "alternatives": [{"class": c[1], "path": c[0]} for c in plan.alternatives],
        "notes": list(plan.notes),
    }
    if s.env or s.env_given:  # the process environment, when the question gives it (``--env``, ``--clean-env``)
        doc["env"] = dict(s.env)
    # Issue 18: whether vLLM uses this runner for the configuration and environment.
    doc["runner_choice"] = None if plan.runner_choice is None else plan.runner_choice.as_json()
    # Issue 18: the outcome (plan, rejected, raises at step i) and the compiled view.
    doc.update(plan.outcome_json())
    if engine_mode in ("compiled", "both"):
        c = plan.compiled
        view: dict[str, Any] | None = None if c is None else {
            "mode": c.mode, "frozen_steps": list(c.frozen_steps), "findings": list(c.findings), "why": c.why,
            "steps": [{"step": st.step, "forward_layer": st.forward_layer, "forward_layers": _list(st.forward_layers),
                       "head_layer": st.head_layer, "verdict": st.verdict}
                      for st in c.steps],
        }
        if c is not None and view is not None and c.outcome is not None:  # rejected at start-up under this mode
            view["outcome"] = c.outcome
            view["rejections"] = [x.as_json() for x in c.rejections]
        doc["compiled"] = view
    # The forced view (auditor/services/forced_plan.py): what runs when the loop hands the model step i.
    doc["forced"] = None if forced is None else {
        "why": forced.why,
        "steps": [{"step": f.step, "forward_layer": f.forward_layer, "forward_layers": _list(f.forward_layers),
                   "head_layer": f.head_layer} for f in forced.steps],
    }
    return doc


def _value(v: bool | None) -> str:
    return "unknown" if v is None else str(v)


def _layer(v: int | None) -> str:
    return "-" if v is None else str(v)


def _list(layers: tuple[int, ...] | None) -> list[int] | None:
    return None if layers is None else list(layers)


def _forward(st: StepPlan) -> str:
    """A step's forward layer; a stack it runs whole as its layers joined (``0+1+2``)."""
    if st.forward_layer is None and st.stack:
        return "+".join(str(i) for i in st.stack)
    return _layer(st.forward_layer)


def render_text(plans: list[Plan], tree_label: str, engine_mode: str = "both") -> str:
    out: list[str] = []
    for plan in plans:
        s = plan.setting
        out.append(f"{tree_label} · runner {s.runner} · method {_given(s.method)} · K={_k(s)} · {plan.architecture or '?'} · platform {s.platform}"
                   + "".join(f" · {n}={v}" for n, v in s.env) + (" · no vLLM variable set" if s.env_given and not s.env else ""))
        if plan.proposer is None and any(st.verdict == "unknown" for st in plan.steps):
            out.append("  drafter:     not known (the steps say why)")
        elif plan.proposer is None:
            out.append("  drafter:     none built for this configuration")
        else:
            site = f", built at {plan.proposer_site.path}:{plan.proposer_site.line}" if plan.proposer_site else ""
            out.append(f"  drafter:     {plan.proposer[1]} ({plan.proposer[0]}{site})")
            for c in plan.alternatives:
                out.append(f"               or {c[1]} ({c[0]}) — an unknown branch decides")
        choice = plan.runner_choice
        if choice is not None and (choice.used is not None or choice.selector is not None):
            out.append(f"  runner:      {choice.why}")
            if choice.used is None and choice.rejection is None and not s.env and not s.env_given:
                out.append("               (--env NAME=VALUE or --clean-env gives your server's environment)")
        if plan.loop is not None:
            out.append(f"  loop:        {plan.loop.function} ({plan.loop.path}:{plan.loop.line})")
        if plan.model_class is not None:
            n = "unknown number of" if plan.num_mtp_layers is None else str(plan.num_mtp_layers)
            via = f" ({plan.layer_field})" if plan.layer_field else ""
            out.append(f"  model class: {plan.model_class[1]} ({plan.model_class[0]}); {n} MTP layers{via}")
        if plan.outcome == "rejected":
            for rej in plan.rejections:
                out.append(f"  rejected:    {rej.path}:{rej.line} {rej.function} ({rej.when}): {rej.message}"
                           + (f" — {rej.condition}" if rej.condition else ""))
        if plan.step_raise is not None:
            sr = plan.step_raise
            out.append(f"  raises:      at step {sr.step}: {sr.path}:{sr.line} {sr.function}: {sr.message}")
        if plan.steps and engine_mode in ("eager", "both"):
            if engine_mode == "both":
                out.append("  eager:")
            out.append("  step  forward  head  verdict")
            for st in plan.steps:
                out.append(f"  {st.step:<5} {_forward(st):<8} {_layer(st.head_layer):<5} {st.verdict}")
            whys = list(dict.fromkeys(st.why for st in plan.steps))
            if len(whys) == 1:
                out.append(f"  why: {whys[0]}")
            else:
                out += [f"  why (step {st.step}): {st.why}" for st in plan.steps]
        view = plan.compiled
        if view is not None and engine_mode in ("compiled", "both"):
            frozen = ", ".join(str(i) for i in view.frozen_steps) or "none"
            out.append("  compiled (torch.compile + CUDA graphs, vLLM's default): "
                       + (f"{view.outcome} at start-up" if view.outcome else f"frozen steps: {frozen}"))
            if engine_mode == "compiled" or view.frozen_steps:
                out.append("  step  forward  head  verdict")
                for st in view.steps:
                    out.append(f"  {st.step:<5} {_forward(st):<8} {_layer(st.head_layer):<5} {st.verdict}")
            out.append(f"  why (compiled): {view.why}")
        if plan.decisions:
            out.append("  decisions:")
            for d in plan.decisions:
                reads = f"  [reads {', '.join(d.fields)}]" if d.fields else ""
                dep = f" (depends on {d.depends_on})" if d.value is None and d.depends_on else ""
                out.append(f"    {d.path}:{d.line} {d.function}: {d.condition} -> {_value(d.value)}{dep}{reads}")
        for note in plan.notes:
            out.append(f"  note: {note}")
        out.append("")
    return "\n".join(out)


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(plans: list[Plan], tree_label: str) -> str:
    out: list[str] = []
    for plan in plans:
        s = plan.setting
        out.append(f"### {tree_label}, runner {s.runner}: {plan.architecture or '?'}, K={_k(s)}, method {_given(s.method)}, platform {s.platform}"
                   + "".join(f", {n}={v}" for n, v in s.env))
        out.append("")
        drafter = f"`{plan.proposer[1]}` (`{plan.proposer[0]}`)" if plan.proposer else "none"
        out.append(f"- drafter: {drafter}")
        if plan.loop is not None:
            out.append(f"- loop: `{plan.loop.function}` (`{plan.loop.path}:{plan.loop.line}`)")
        if plan.model_class is not None:
            out.append(f"- model class: `{plan.model_class[1]}` (`{plan.model_class[0]}`), "
                       f"{_layer(plan.num_mtp_layers)} MTP layers ({plan.layer_field or '?'})")
        out.append("")
        out.append("| step | forward layer | head layer | verdict | why |")
        out.append("|---:|---:|---:|---|---|")
        for st in plan.steps:
            out.append(f"| {st.step} | {_forward(st)} | {_layer(st.head_layer)} | {_md(st.verdict)} | {_md(st.why)} |")
        if plan.decisions:
            out.append("")
            out.append("| where | condition | value | reads |")
            out.append("|---|---|---|---|")
            for d in plan.decisions:
                out.append(f"| `{d.path}:{d.line}` | `{_md(d.condition)}` | {_value(d.value)} | {_md(', '.join(d.fields))} |")
        out.append("")
    return "\n".join(out)


HEATMAP_CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --soft:#f6f8fa; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg);
       margin: 0 auto; padding: 24px; max-width: 1320px; }
h1 { font-size: 22px; margin: 0 0 4px; } .muted { color: var(--muted); }
code { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid var(--line); padding: 3px 7px; text-align: left; vertical-align: middle; }
th { background: var(--soft); font-weight: 600; }
td.cell { text-align: center; min-width: 44px; font-variant-numeric: tabular-nums; }
td.cell small { color: #444; }
.threaded { background: #aceebb; } .constant { background: #eaeef2; } .lost { background: #ffcecb; }
.unknown { background: #fff8c5; } .none { background: #ffffff; color: var(--muted); }
.legend span { display: inline-block; padding: 1px 8px; margin-right: 6px; border: 1px solid var(--line); }
"""


def _verdict_class(verdict: str) -> str:
    for name in ("threaded", "constant", "lost", "unknown"):
        if verdict.startswith(name):
            return name
    return "none"


def render_html(plans: list[Plan], tree_label: str, k: int, layers: int | None) -> str:
    """A self-contained heat map: one row per architecture, per runner one cell per draft
    step (forward layer, head layer below), coloured by verdict; the why is the cell's title."""
    import html

    def e(text: object) -> str:
        return html.escape(str(text), quote=True)

    runners = list(dict.fromkeys(p.setting.runner for p in plans))
    by_arch: dict[str, dict[str, Plan]] = {}
    for p in plans:
        by_arch.setdefault(p.architecture or "?", {})[p.setting.runner] = p
    count = f", {layers} layers" if layers is not None else ""
    out = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>mtp-audit layers: {e(tree_label)}</title>", f"<style>{HEATMAP_CSS}</style>", "</head><body>",
        f"<h1>Which MTP layer runs at each draft step — {e(tree_label)}</h1>",
        f'<p class="muted">K={k}{e(count)} · each cell: forward layer, head layer below ("-": one shared head) · '
        "hover a cell for why</p>",
        '<p class="legend"><span class="threaded">threaded</span><span class="constant">constant — eagle-style</span>'
        '<span class="lost">lost at a finding</span><span class="unknown">unknown</span></p>',
        '<table id="layers"><thead><tr><th rowspan="2">architecture</th><th rowspan="2">model class</th>',
    ]
    out += [f'<th colspan="{k + 1}">{e(r.upper())}</th>' for r in runners]
    out.append("</tr><tr>")
    for _r in runners:
        out.append("<th>drafter</th>" + "".join(f"<th>step {i}</th>" for i in range(k)))
    out.append("</tr></thead><tbody>")
    for arch in sorted(by_arch):
        row = by_arch[arch]
        first = next(iter(row.values()))
        model = first.model_class[1] if first.model_class else "?"
        cells = [f"<td><code>{e(arch)}</code></td><td><code>{e(model)}</code></td>"]
        for r in runners:
            plan = row.get(r)
            if plan is None:
                cells.append(f'<td class="none" colspan="{k + 1}">—</td>')
                continue
            cells.append(f"<td><code>{e(plan.proposer[1] if plan.proposer else 'none')}</code></td>")
            for i in range(k):
                st = plan.steps[i] if i < len(plan.steps) else None
                if st is None:
                    cells.append('<td class="cell none">—</td>')
                    continue
                cells.append(
                    f'<td class="cell {_verdict_class(st.verdict)}" title="{e(st.verdict + ": " + st.why)}">'
                    f"{_forward(st)}<br><small>{_layer(st.head_layer)}</small></td>"
                )
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></body></html>")
    return "\n".join(out) + "\n"


def render(plans: list[Plan], fmt: str, tree_label: str, forced: list[ForcedPlan | None] | None = None,
           engine_mode: str = "both") -> str:
    if fmt == "html":
        return render_html(plans, tree_label, plans[0].setting.draft_steps if plans else 0, None)
    if fmt == "json":
        fs = forced or [None] * len(plans)
        docs = [plan_json(p, tree_label, f, engine_mode) for p, f in zip(plans, fs)]
        doc: dict[str, Any] = docs[0] if len(docs) == 1 else {"version": LAYERS_FORMAT_VERSION, "plans": docs}
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if fmt == "markdown":
        return render_markdown(plans, tree_label)
    return render_text(plans, tree_label, engine_mode)


def _short(plan: Plan) -> tuple[str, str, str, str]:
    fw = ",".join(_forward(st) for st in plan.steps)
    hd = ",".join(_layer(st.head_layer) for st in plan.steps)
    verdicts = list(dict.fromkeys(st.verdict for st in plan.steps))
    return (plan.proposer[1] if plan.proposer else "none"), fw, hd, "; ".join(verdicts)


def render_matrix(plans: list[Plan], fmt: str, tree_label: str, k: int, layers: int,
                  forced: list[ForcedPlan | None] | None = None) -> str:
    """Every registered MTP architecture x runner, one row each."""
    if fmt == "html":
        return render_html(plans, tree_label, k, layers)
    if fmt == "json":
        doc = {"version": LAYERS_FORMAT_VERSION, "root": tree_label, "k": k, "layers": layers,
               "plans": [plan_json(p, tree_label, f) for p, f in zip(plans, forced or [None] * len(plans))]}
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    out = [f"{tree_label}: every registered MTP architecture, K={k}, {layers} layers (set on each model's layer-count field)", ""]
    out.append("| architecture | model class | runner | drafter | forward layer per step | head layer per step | verdict |")
    out.append("|---|---|---|---|---|---|---|")
    for p in plans:
        drafter, fw, hd, verdict = _short(p)
        cls = f"`{p.model_class[1]}`" if p.model_class else "?"
        out.append(f"| `{p.architecture}` | {cls} | {p.setting.runner.upper()} | `{drafter}` | {fw} | {hd} | {_md(verdict)} |")
    return "\n".join(out) + "\n"


def _k(s: Setting) -> str:
    """K as the header shows it: given, derived by the construction, or not given."""
    if s.k is None and s.k_derived is not None:
        return f"{s.k_derived} (not given: derived)"
    return _given(s.k)


def _given(v: int | str | None) -> str:
    return "(not given)" if v is None else str(v)
