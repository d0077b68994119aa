"""Every view summarises the same routes (issue 18): on every release of the sweep, the
reachability table (``scan --reachability``), the history matrix, ``history --layers``
and ``layers --all`` agree with the dispatch routes and with each other.

One scan per release plans every registered MTP architecture x runner (K=3, 3 layers on
each model's own layer-count field, as ``layers --all``) before the index is frozen, then
checks:

1. a plan's (runner, model class, drafter) is a route;
2. every loop the reachability table lists for a model class runs in a drafter some route
   builds for that class (no pairing dispatch cannot make);
3. a plan names a loop the reachability table lists for its model class, and the table's
   JSON says what the plan says: threaded, constant, ``raises at step i`` (an assert on the
   step, for K above i) or unknown (the step cannot be classified, or the drafter is decided
   past a cut of the evaluator) or ``lost at <finding id>`` / ``lost at path:line`` (the loop
   hands the step on, a head or the forward never gets it: a ✓ row whose logits stay at
   layer 0 would fail); a
   rejected plan, or one whose drafter an unknown branch of its configuration decides, has
   nothing to compare; a plan whose steps run every layer of a stack the model iterates is a
   row naming that stack (``forward_stack``), and the other way round;
4. a ``history --layers`` cell whose forward and head layers reach layer i (or whose heads
   are one shared head) is a ✓ in the history matrix; a ✓ in the matrix is a threaded plan, or a route whose condition the table
   states ("reached only when ...": a guard no architecture's override fixes).

The check runs in ``tests/test_release_sweep.py`` (``test_views_agree_with_the_routes``), on
the same scan of each release as the sweep's own check: one scan with the plans asked before
the freeze serves both (two scans of each of the 36 releases cost one of them again).
"""

from __future__ import annotations

from auditor.analyses.dispatch import DispatchProvider, Plan
from auditor.engine.scan import Scan
from auditor.model.history import History, Release
from auditor.output.history import matrix
from auditor.services.citations import cite
from auditor.services.history.layers import plan_cell
from auditor.services.layers import PlanQuery, matrix_settings


def plan_query() -> PlanQuery:
    """The plans the check compares: every registered MTP architecture x runner, K=3, 3 layers
    on each model's own layer-count field (as ``layers --all``), asked before the freeze."""
    return PlanQuery(lambda dispatch: matrix_settings(dispatch, ["v1", "v2"], 3, 3))


def _loop_label(plan: Plan) -> str | None:
    return f"{plan.loop.path}:{plan.loop.line} {plan.loop.function}" if plan.loop else None


def _plan_view(plan: Plan) -> str | None:
    """What a plan says in the terms of a reachability row (None: nothing a row can say
    for every configuration: a rejection, or a drafter an unknown branch of this one
    configuration decides)."""
    verdicts = {s.verdict for s in plan.steps}
    if not plan.steps or plan.outcome == "rejected":
        return None
    if plan.outcome == "raises":
        return f"raises at step {plan.raises_at_step}"
    if verdicts == {"unknown"}:
        why = " ".join(s.why for s in plan.steps)
        return "unknown" if ("past a cut" in why or "cannot classify" in why or "no layer selection" in why) \
            and not plan.alternatives else None
    if verdicts == {"threaded"}:
        return "threaded"
    if all(v.startswith("constant") for v in verdicts):
        return "constant"
    if len(verdicts) == 1 and next(iter(verdicts)).startswith("lost at"):
        return next(iter(verdicts))  # where, as ``layers`` says it (the finding's id, else path:line)
    return None


def _reach_view(loop: dict, k: int) -> str:
    """A reachability row (JSON) as a plan with K draft steps would say it: a raise at a step
    K does not reach is no raise for that K."""
    raised = loop.get("raise")
    if raised is not None and raised["step"] < k:
        return f"raises at step {raised['step']}"
    if loop.get("verdict") == "unknown":
        return "unknown"
    if loop.get("verdict") == "lost":
        lost = loop["lost"]  # the finding that loses the step there, else the selection's site
        return f"lost at {lost['finding'] or str(lost['path']) + ':' + str(lost['line'])}"
    return "threaded" if loop["step_i_reaches_layer_i"] or raised is not None else "constant"


def view_problems(version: str, scan: Scan, query: PlanQuery) -> list[str]:
    """Where the views of ``scan`` (of release ``version``, made with ``query``) disagree with
    the routes or with each other (empty: they agree)."""
    assert scan.analysis is not None
    dispatch = scan.analysis.get(DispatchProvider)
    plans = [cite(dispatch.plan(s), scan.result.findings) for s in query.settings]
    routes = dispatch.dispatch_routes()  # one value per route: condition, drafter, a leg per class
    rows = {(r.model_class.path, r.model_class.name): r for r in scan.result.reachability}
    problems: list[str] = []

    # 1. plans are routes (a class that selects no layer by the step is on no model route,
    # which pairs drafters with the classes that take part in step threading: its route is a
    # load route run for the plan's method)
    loads = dispatch.load_routes
    for p in plans:
        if p.proposer is None or p.model_class is None:
            continue
        if p.outcome == "rejected" and any(r.when == "validation" for r in p.rejections):
            continue  # vLLM rejects the configuration before any drafter is built: no route needed
        mine = routes + [rt for rt in loads.load_routes() if p.setting.method in loads.methods(rt)]
        if routes and not any(rt.runner == p.setting.runner and rt.drafter == p.proposer and p.model_class in rt.models
                              for rt in mine):
            problems.append(f"plan {p.architecture}/{p.setting.runner}: {p.proposer[1]} for {p.model_class[1]} is no route")

    # 2. reachability rows list only loops a route runs for that class
    for cls, row in rows.items():
        drafters = {rt.drafter for rt in routes if cls in rt.models}
        if not routes or not any(cls in rt.models for rt in routes):
            continue
        for lp in row.loops:
            label = lp.loop.split(" (as ")[0]
            path_line, _, func = label.partition(" ")
            name = func.rpartition(".")[2]
            owner_file = path_line.rpartition(":")[0]
            if not any((hit := dispatch.index.method(d, name)) is not None and hit[0][0] == owner_file
                       and hit[0][1] == func.rpartition(".")[0] for d in drafters):
                # A loop of code no built drafter runs (e.g. a plugin's) is outside dispatch's say.
                built = {c for keys in dispatch.factories().values() for f in keys
                         for c in dispatch.location.built_classes(f)}
                if any((hit := dispatch.index.method(b, name)) is not None and hit[0][0] == owner_file
                       and hit[0][1] == func.rpartition(".")[0] for b in built):
                    problems.append(f"reachability {cls[1]}: {lp.loop} runs in no drafter a route builds for it")

    # 1b. a route's leg into a class is a loop the reachability table lists for that class
    for rt in routes:
        for leg in rt.legs:
            if leg.path is None or leg.model_class not in rows:
                continue
            label = f"{leg.path.loop.func[0]}:{leg.path.loop.loop.line} {leg.path.loop.func[1]}"
            if not any(lp.loop.split(" (as ")[0] == label for lp in rows[leg.model_class].loops):
                problems.append(f"route {rt.runner} {rt.drafter[1]}: its loop {label} into {leg.model_class[1]} "
                                f"is not in the reachability table")

    # 3. plans and reachability rows give the same verdict for the same loop and class,
    # read from the JSON document users get (``scan --format json``)
    doc_rows = {(r["class"]["path"], r["class"]["name"]): r for r in scan.result.to_json()["reachability"]}
    for p in plans:
        label = _loop_label(p)
        want = _plan_view(p)
        if label is None or p.model_class is None or want is None:
            continue
        row_doc = doc_rows.get(p.model_class)
        listed = [lp for lp in (row_doc["loops"] if row_doc else []) if lp["loop"].split(" (as ")[0] == label
                  or lp["loop"].startswith(label + " (as ")]
        if not listed:
            problems.append(f"plan {p.architecture}/{p.setting.runner}: loop {label} not in the reachability of "
                            f"{p.model_class[1]}")
            continue
        shown = {_reach_view(lp, p.setting.k) for lp in listed}
        if shown != {want}:
            problems.append(f"plan {p.architecture}/{p.setting.runner}: layers says {want}, reachability says "
                            f"{sorted(shown)} for {p.model_class[1]} in {label}")
        # 3b. a plan whose steps run a whole stack (every layer of a container the model
        # iterates) is a row naming that stack, and a row naming one is such a plan (once the
        # layer count is known)
        stacked = p.outcome == "plan" and bool(p.steps) and all(s.stack is not None for s in p.steps)
        rows_stacked = {lp.get("forward_stack") is not None for lp in listed}
        if stacked and rows_stacked != {True}:
            problems.append(f"plan {p.architecture}/{p.setting.runner}: layers runs a whole stack at each step, "
                            f"the reachability rows of {p.model_class[1]} in {label} name none")
        if not stacked and True in rows_stacked and p.outcome == "plan" and p.num_mtp_layers:
            problems.append(f"plan {p.architecture}/{p.setting.runner}: the reachability of {p.model_class[1]} in "
                            f"{label} runs a whole stack, layers says {[s.forward_layers for s in p.steps]}")

    # 4. history --layers and the history matrix
    hist = History("sweep", "history", [Release(ref=version, result=scan.result)], [None])
    _names, cells, _notes = matrix(hist)
    for p in plans:
        if p.model_class is None:
            continue
        cell = plan_cell(p)
        heads_reach = cell.head_reaches(3) or all(h is None for h in cell.head)  # None: one shared head
        if cell.forward_reaches(3) and heads_reach and not cells.get(p.model_class[1], {}).get(version):
            problems.append(f"history --layers: {p.architecture}/{p.setting.runner} reaches layer i, "
                            f"the matrix says no for {p.model_class[1]}")
    threaded = {p.model_class[1] for p in plans if p.model_class and {s.verdict for s in p.steps} == {"threaded"}}
    for name, by_ref in cells.items():
        if not by_ref.get(version) or name in threaded:
            continue
        ticks = [lp for r in scan.result.reachability if r.model_class.name == name for lp in r.loops
                 if lp.steps_reach_layers]
        if not all("reached only when" in lp.detail for lp in ticks):
            problems.append(f"history matrix: {name} ✓ with no threaded plan and an unconditional loop: "
                            f"{[lp.loop for lp in ticks if 'reached only when' not in lp.detail]}")
    return problems
