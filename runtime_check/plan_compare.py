"""`runtime check --plan plan.json`: does the static plan (`mtp-audit layers --format json`)
agree with what the engine ran?

Per run (one per runner and mode) the plan of the same runner is compared: the drafter class,
the draft model class, and per draft step the forward layer and the head layer. A shipped eager
run is compared with the plan's `steps`, a shipped compiled run (`--engine-mode compiled`) with
the plan's `compiled` view (`layers --engine-mode`: steps a compiled forward or captured graph
freezes at step 0's layer), a forced run (`--force-step-idx`) with the plan's `forced` view
(what the static side selects when the loop hands the model step i). Every draft call of
the run must show the predicted layer at that step. A predicted head of `null` (one shared
head) agrees with a run where no per-layer head ran.

Pure Python, no torch: it reads the run's JSON and the plan's JSON.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any


class PlanError(Exception):
    """Bad plan file or a plan that does not describe this run: one line, exit 2."""


class Agreement(str, Enum):
    AGREE = "agree"
    DISAGREE = "disagree"
    NO_PLAN = "no plan"  # the plan has no view for this runner/mode (e.g. no `forced` key)


@dataclass(frozen=True)
class StepComparison:
    step: int
    planned_forward: int | None
    observed_forward: list[list[int]]  # per draft call: the layers that ran at this step
    planned_head: int | None
    observed_head: list[list[int]]  # per draft call: the per-layer heads that ran (distinct)
    forward: Agreement
    head: Agreement
    # the layers the planned forward runs, in order (a stack it iterates: all of them; [] unknown)
    planned_forward_layers: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class RunComparison:
    runner: str
    mode: str
    agreement: Agreement
    planned_drafter: str | None
    observed_drafter: str
    drafter: Agreement
    planned_model_class: str | None
    observed_model_class: str
    model_class: Agreement
    steps: list[StepComparison] = field(default_factory=list)
    why: str = ""
    planned_outcome: str = "ran"
    observed_outcome: str = "ran"
    outcome: Agreement = Agreement.AGREE
    observed_exception: str | None = None  # e.g. "AssertionError: ... (vllm/x.py:12)"


OUTCOMES = ("ran", "rejected", "raises")
# `mtp-audit layers` says "plan" where the engine says "ran" (the steps are its plan).
_PLAN_OUTCOMES = {"plan": "ran"}


def planned_outcome(plan: dict[str, Any]) -> tuple[str, str | None]:
    """What the plan says the engine does with this configuration: ``outcome`` ("plan"/"ran",
    "rejected", "raises", or an object with ``outcome`` and ``exception``) where the plan
    says; a plan without one predicts that the engine runs its steps."""
    o = plan.get("outcome")
    if isinstance(o, dict):
        o, exc = str(o.get("outcome") or o.get("kind") or "ran"), o.get("exception")
    else:
        exc = None
    o = _PLAN_OUTCOMES.get(o, o) if isinstance(o, str) else o
    if isinstance(o, str) and o in OUTCOMES:
        return o, exc
    return "ran", None


def weight_sites(plan: dict[str, Any]) -> list[tuple[str, int]] | None:
    """Where the plan says vLLM rejects the model while loading its weights (rejections with
    ``when: "weights"``, each a check of the tree with file:line), or None when its rejection
    is of another kind: an engine rejected elsewhere did not reject for that reason."""
    rej = plan.get("rejections") or []
    if not rej or any(r.get("when") != "weights" for r in rej):
        return None
    return [(str(r.get("path")), int(r.get("line") or 0)) for r in rej]


def _at_site(sites: list[tuple[str, int]], run: dict[str, Any]) -> bool:
    """The run's exception was raised at one of ``sites`` (its path ends with the site's)."""
    site = run.get("site") or {}
    path, line = str(site.get("path") or ""), site.get("line")
    return any(line == ln and (path.endswith(p) or p.endswith(path)) and path for p, ln in sites)


def planned_raise_step(plan: dict[str, Any]) -> int | None:
    """The draft step at which the plan says the engine raises (`raises_at_step`), if it says."""
    step = plan.get("raises_at_step")
    if step is None:
        step = (plan.get("raise") or {}).get("step")
    return step if isinstance(step, int) else None


def expects_head(plan: dict[str, Any], view: list[dict[str, Any]], step: int, p_step: int | None) -> bool:
    """Whether the plan says draft ``step`` ends in a per-layer head: its head layer in the
    ``view`` compared, or, for a step at or after the plan's raise (``p_step``: the plan keeps
    no layer there), in its ``forced`` view (the route's head reading with the step handed;
    whether a head is selected at all does not depend on the value handed). Without either:
    no (the raising step is then the number of steps with a forward)."""
    planned = next((s for s in view if s.get("step") == step), None)
    if planned is not None and planned.get("head_layer") is not None:
        return True
    if p_step is None or step < p_step:
        return False
    forced = next((s for s in (plan.get("forced") or {}).get("steps") or [] if s.get("step") == step), None)
    return forced is not None and forced.get("head_layer") is not None


def engine_view(plan: dict[str, Any], run: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, str]:
    """The plan's steps this run is compared with, or None and why the plan has no such view."""
    if run["mode"] != "shipped":
        steps = (plan.get("forced") or {}).get("steps")
        return steps, "the plan has no `forced` view (made by an older `mtp-audit layers`)"
    if run.get("engine_mode", "eager") == "compiled":
        if "compiled" not in plan:
            return None, "the plan has no `compiled` view (made by an older `mtp-audit layers`, or --engine-mode eager)"
        steps = (plan.get("compiled") or {}).get("steps")
        return steps, "the plan's `compiled` view is empty (no drafter, model class or loop to compile)"
    return plan["steps"], ""


def planned_forward_layers(step: dict[str, Any]) -> list[int]:
    """The layers a planned step's forward runs, in order: ``forward_layers`` (a stack the
    forward iterates runs all of its layers), else the one ``forward_layer`` (a plan made
    before ``forward_layers`` existed); [] when unknown."""
    layers = step.get("forward_layers")
    if isinstance(layers, list):
        return [int(x) for x in layers]
    pf = step.get("forward_layer")
    return [] if pf is None else [pf]


def observed_exception(run: dict[str, Any]) -> str | None:
    if run.get("outcome", "ran") == "ran":
        return None
    site = run.get("site") or {}
    where = f" ({site['path']}:{site['line']})" if site else ""
    return f"{run.get('exception')}: {run.get('message')}{where}"


def load_plans(path: Path) -> list[dict[str, Any]]:
    """The plans in a `layers --format json` document (one plan, or {"plans": [...]})."""
    try:
        doc = json.loads(path.read_text())
    except OSError as e:
        raise PlanError(f"cannot read {path}: {e.strerror or e}")
    except ValueError as e:
        raise PlanError(f"{path} is not JSON: {e}")
    try:
        return load_plans_doc(doc)
    except PlanError as e:
        raise PlanError(f"{path} {e}")


def load_plans_doc(doc: Any) -> list[dict[str, Any]]:
    plans = doc.get("plans") if isinstance(doc, dict) and "plans" in doc else [doc]
    if not isinstance(plans, list) or not plans or not all(
            isinstance(p, dict) and isinstance(p.get("runner"), str) and isinstance(p.get("steps"), list)
            for p in plans):
        raise PlanError("is not the JSON of `mtp-audit layers` (a plan with `runner` and `steps`, "
                        "or {\"plans\": [...]})")
    return plans


def _short(name: str | None) -> str | None:
    return None if name is None else name.rsplit(".", 1)[-1]


def check_fits(plans: list[dict[str, Any]], k: int, num_mtp_layers: int | None, runners: list[str]) -> None:
    """A plan for another K, layer count or runner cannot be compared: say so before running."""
    if not any(p["runner"] in runners for p in plans):
        have = ", ".join(sorted({p["runner"] for p in plans}))
        raise PlanError(f"the plan is for runner {have}, the run uses {', '.join(runners)}")
    for p in plans:
        if p.get("k") not in (None, k):
            raise PlanError(f"the plan is for K={p['k']} ({p['runner']}), the run for K={k}")
        n = p.get("num_mtp_layers")
        if num_mtp_layers is not None and isinstance(n, int) and n != num_mtp_layers:
            raise PlanError(f"the plan is for {n} MTP layers ({p['runner']}), the run has {num_mtp_layers}")


def _same(a: object, b: object) -> Agreement:
    return Agreement.AGREE if a == b else Agreement.DISAGREE


def compare_run(plans: list[dict[str, Any]], run: dict[str, Any]) -> RunComparison:
    runner, mode = run["runner"], run["mode"]
    observed_drafter = _short(run.get("proposer")) or "?"
    observed_model = _short(run.get("wrapper_class")) or "?"
    plan = next((p for p in plans if p["runner"] == runner), None)
    if plan is None:
        return RunComparison(runner, mode, Agreement.NO_PLAN, None, observed_drafter, Agreement.NO_PLAN, None,
                             observed_model, Agreement.NO_PLAN, why=f"the plan file has no {runner} plan")
    planned_drafter = (plan.get("proposer") or {}).get("class")
    planned_model = (plan.get("model_class") or {}).get("class")
    p_out, p_exc = planned_outcome(plan)
    view_outcome = (plan.get("compiled") or {}).get("outcome") if run.get("engine_mode", "eager") == "compiled" else None
    if view_outcome in OUTCOMES:  # the compiled engine's own outcome (rejected at start-up)
        p_out, p_exc = view_outcome, None
    o_out = run.get("outcome", "ran")
    out_agree = (Agreement.AGREE if p_out == o_out and (p_exc is None or p_exc == run.get("exception"))
                 else Agreement.DISAGREE)
    sites = weight_sites(plan) if p_out == "rejected" and view_outcome is None else None
    if sites is not None and o_out == "rejected" and not _at_site(sites, run):
        out_agree = Agreement.DISAGREE  # rejected, but not by the load-time check the plan names
    p_step = planned_raise_step(plan) if p_out == "raises" else None
    outcome_fields = {"planned_outcome": p_out, "observed_outcome": o_out, "outcome": out_agree,
                      "observed_exception": observed_exception(run)}
    if o_out == "rejected" or (p_out != "ran" and out_agree is Agreement.AGREE and p_step is None):
        # No draft step to compare: the engine refused (or raised as planned, at no planned step).
        why = "" if out_agree is Agreement.AGREE else f"the plan expects the engine to run; it {o_out}"
        if sites is not None and o_out == "rejected" and out_agree is Agreement.DISAGREE:
            why = ("the plan expects a rejection at load (" + ", ".join(f"{p}:{ln}" for p, ln in sites)
                   + f"); the engine rejected elsewhere: {observed_exception(run)}")
        if p_out != "ran" and o_out == "ran":
            why = f"the plan expects `{p_out}`; the engine ran"
        return RunComparison(runner, mode, out_agree, planned_drafter, observed_drafter,
                             Agreement.NO_PLAN if o_out == "rejected" else _same(planned_drafter, observed_drafter),
                             planned_model, observed_model or "?",
                             Agreement.NO_PLAN if o_out == "rejected" else _same(planned_model, observed_model),
                             why=why, **outcome_fields)
    drafter = _same(planned_drafter, observed_drafter)
    model = _same(planned_model, observed_model)
    view, no_view = engine_view(plan, run)
    if view is None:
        return RunComparison(runner, mode, Agreement.NO_PLAN, planned_drafter, observed_drafter, drafter,
                             planned_model, observed_model, model, why=no_view, **outcome_fields)
    calls = sorted({r["propose"] for r in run["steps"]})
    steps = []
    for planned in view:
        i = planned["step"]
        rows = {r["propose"]: r for r in run["steps"] if r["step"] == i}
        fwd = [rows[c]["layers"] if c in rows else [] for c in calls]
        heads = [sorted(set(rows[c].get("head_layers") or [])) if c in rows else [] for c in calls]
        pf, ph = planned["forward_layer"], planned["head_layer"]
        want_f = planned_forward_layers(planned)
        want_h = [] if ph is None else [ph]
        steps.append(StepComparison(
            i, pf, fwd, ph, heads,
            Agreement.AGREE if fwd and all(f == want_f for f in fwd) else Agreement.DISAGREE,
            Agreement.AGREE if heads and all(h == want_h for h in heads) else Agreement.DISAGREE, want_f))
    raised_at = None
    if o_out == "raises":
        # Steps from the one that raised on never ran: compare those that did.
        ran = [s for s in steps if any(s.observed_forward)]
        raised_at = len(ran)
        if ran and not any(ran[-1].observed_head) and expects_head(plan, view, ran[-1].step, p_step):
            # The last step's forward was entered, its head never ran: that step did not
            # complete, the raise came from inside it (e.g. a read in the layer's forward).
            raised_at -= 1
        if p_step is not None:
            ran = [s for s in steps if s.step < p_step]
        steps = ran or ([] if p_step == 0 else steps)
    if p_step is not None and raised_at is not None and raised_at != p_step:
        out_agree = Agreement.DISAGREE
        outcome_fields["outcome"] = out_agree
    ok = (drafter is Agreement.AGREE and model is Agreement.AGREE and (bool(steps) or p_step == 0)
          and out_agree is Agreement.AGREE
          and all(s.forward is Agreement.AGREE and s.head is Agreement.AGREE for s in steps))
    if out_agree is Agreement.AGREE:
        why = ""
    elif p_step is not None and raised_at is not None:
        why = f"the plan expects a raise at step {p_step}; the engine raised at step {raised_at}"
    else:
        why = f"the plan expects `{p_out}`; the engine {o_out}" + (
            f": {outcome_fields['observed_exception']}" if o_out != "ran" else "")
    return RunComparison(runner, mode, Agreement.AGREE if ok else Agreement.DISAGREE, planned_drafter,
                         observed_drafter, drafter, planned_model, observed_model, model, steps, why,
                         **outcome_fields)


def compare(plans: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[RunComparison]:
    return [compare_run(plans, r) for r in runs]


def disagrees(comparisons: list[RunComparison]) -> bool:
    return any(c.agreement is Agreement.DISAGREE for c in comparisons)


def to_json(comparisons: list[RunComparison]) -> list[dict[str, Any]]:
    def enc(v: Any) -> Any:
        if isinstance(v, Enum):
            return v.value
        if isinstance(v, dict):
            return {k: enc(x) for k, x in v.items()}
        if isinstance(v, list):
            return [enc(x) for x in v]
        return v

    return [enc(asdict(c)) for c in comparisons]


def _cell(v: int | None) -> str:
    return "-" if v is None else str(v)


def _planned_forward(st: dict[str, Any]) -> str:
    layers = st.get("planned_forward_layers") or []
    return "+".join(map(str, layers)) if st["planned_forward"] is None and len(layers) > 1 else _cell(st["planned_forward"])


def _seen(xs: list[list[int]]) -> str:
    # Distinct observations over the draft calls, e.g. "0" or "0|1" (calls differed).
    distinct = list(dict.fromkeys(",".join(map(str, x)) or "-" for x in xs))
    return "|".join(distinct) or "?"


def render_text(comparisons: list[dict[str, Any]]) -> str:
    """The `plan_comparison` JSON (see to_json) as text, one line per step."""
    lines = ["Plan vs engine:"]
    for c in comparisons:
        lines.append(f"   {c['runner']} {c['mode']}: {c['agreement'].upper()}" + (f" ({c['why']})" if c["why"] else ""))
        if c["agreement"] == Agreement.NO_PLAN.value and not c["steps"]:
            continue
        lines.append(f"      outcome      planned {c.get('planned_outcome', 'ran')}, engine "
                     f"{c.get('observed_exception') and c['observed_outcome'] + ' ' + c['observed_exception'] or c.get('observed_outcome', 'ran')}: "
                     f"{c.get('outcome', 'agree')}")
        lines.append(f"      drafter      planned {c['planned_drafter'] or '?'}, ran {c['observed_drafter']}: "
                     f"{c['drafter']}")
        lines.append(f"      model class  planned {c['planned_model_class'] or '?'}, ran "
                     f"{c['observed_model_class']}: {c['model_class']}")
        for st in c["steps"]:
            lines.append(f"      step {st['step']}  forward planned {_planned_forward(st)} ran "
                         f"{_seen(st['observed_forward'])}: {st['forward']};  head planned "
                         f"{_cell(st['planned_head'])} ran {_seen(st['observed_head'])}: {st['head']}")
    return "\n".join(lines) + "\n"
