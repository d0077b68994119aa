"""Turn runtime observations into verdicts on static findings (pure Python).

A finding is judged against the runs of the architectures whose draft model classes it
names (``affected_classes`` first, then the class in ``function``):

- MTP001 (a wrapper drops the step): CONFIRMED if, with the step forced into the draft
  loop (``--force-step-idx``), the affected class still runs physical layer 0 on every
  draft step although the model has more than one MTP layer; REFUTED if the forced run
  reaches layer i on step i. Needs a forced run.
- MTP002 (a draft loop passes a constant step): CONFIRMED if the as-shipped run executes
  only layer 0 on every step (with > 1 layers and K > 1); REFUTED if it reaches other
  layers. Needs an as-shipped run.
- Any other rule: NOT EXERCISED, with the reason (the runtime run has no observable that
  decides it).
"""

from __future__ import annotations

from typing import Any

from . import archs

CONFIRMED = "CONFIRMED"
REFUTED = "REFUTED"
NOT_EXERCISED = "NOT EXERCISED"


def _classes_of(finding: dict) -> list[str]:
    names = [c.get("name", "") for c in finding.get("affected_classes") or []]
    fn = finding.get("function") or ""
    if "." in fn:
        names.append(fn.split(".", 1)[0])
    return [n for n in names if n]


def _evidence(run: dict) -> list[dict]:
    return [
        {"propose": r["propose"], "step": r["step"], "wrapper_spec_step_idx": r["wrapper_spec_step_idx"],
         "wrapper_received": r["wrapper_received"], "inner_spec_step_idx": r["inner_spec_step_idx"],
         "inner_received": r["inner_received"], "layers": r["layers"]}
        for r in run.get("steps", [])
    ]


def _steps_reach_layers(run: dict) -> bool | None:
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


def _run_matches(run: dict, cls: str) -> bool:
    short = {run.get("wrapper_class", "").rsplit(".", 1)[-1], run.get("inner_class", "").rsplit(".", 1)[-1]}
    short |= {r.get("wrapper") for r in run.get("steps", [])} | {r.get("inner") for r in run.get("steps", [])}
    return cls in short


def _loop_owner_ran(finding: dict, run: dict) -> bool | None:
    """Whether the draft loop a finding is about belongs to the proposer this run used.

    ``None`` when the run did not record its proposer classes (older driver output).
    """
    mro = run.get("proposer_mro")
    if not mro:
        return None
    owner = (finding.get("function") or "").split(".", 1)[0]
    module = (finding.get("path") or "").removesuffix(".py").replace("/", ".")
    return f"{module}.{owner}" in mro


def judge(findings_doc: dict, runs: list[dict]) -> list[dict]:
    out = []
    for f in findings_doc.get("findings", []):
        classes = _classes_of(f)
        matching = [r for r in runs if any(_run_matches(r, c) for c in classes)]
        # A class not exercised by name may still belong to a known arch (e.g. a base class).
        base: dict[str, Any] = {
            "rule": f.get("rule"), "fingerprint": f.get("fingerprint"), "path": f.get("path"),
            "line": f.get("line"), "function": f.get("function"), "classes": classes,
        }
        if not matching:
            known = [a.key for c in classes if (a := archs.arch_for_class(c))]
            ran = sorted({r.get("arch") or r.get("architecture") for r in runs})
            reason = (f"no run exercised {', '.join(classes) or 'the finding'}"
                      + (f" (would need --arch {known[0]})" if known else "")
                      + f"; runs: {', '.join(map(str, ran)) or 'none'}")
            out.append(base | {"verdict": NOT_EXERCISED, "reason": reason, "evidence": []})
            continue
        rule = f.get("rule")
        if rule == "MTP001":
            want = [r for r in matching if r.get("mode") == "forced"]
            what = "forced step (--force-step-idx)"
        elif rule == "MTP002":
            want = [r for r in matching if r.get("mode") == "shipped"]
            what = "as-shipped"
            # The loop must be the one that ran: a CPU run drafts with the V1 proposer,
            # so a V2 speculator's loop is not exercised by it.
            ran_loop = [r for r in want if _loop_owner_ran(f, r) is not False]
            if want and not ran_loop:
                used = sorted({r.get("proposer", "?").rsplit(".", 1)[-1] for r in want})
                out.append(base | {"verdict": NOT_EXERCISED,
                                   "reason": f"the runs drafted with {', '.join(used)}; this loop belongs to "
                                             f"{(f.get('function') or '').split('.', 1)[0]}",
                                   "evidence": []})
                continue
            want = ran_loop
        else:
            out.append(base | {"verdict": NOT_EXERCISED,
                               "reason": f"{rule}: no runtime observable decides this rule",
                               "evidence": []})
            continue
        want = [r for r in want if r.get("num_mtp_layers", 0) > 1 and r.get("k", 0) > 1]
        if not want:
            out.append(base | {"verdict": NOT_EXERCISED,
                               "reason": f"{rule} needs a {what} run with > 1 MTP layers and K > 1",
                               "evidence": []})
            continue
        run = want[0]
        reach = _steps_reach_layers(run)
        label = f"{run.get('arch')} {run['mode']} K={run['k']} layers={run['num_mtp_layers']}"
        seq = run.get("layer_sequence")
        if reach is False:
            verdict, reason = CONFIRMED, f"{label}: layer 0 ran on every draft step {seq}"
        elif reach is True:
            verdict, reason = REFUTED, f"{label}: step i ran layer i {seq}"
        else:
            verdict, reason = NOT_EXERCISED, f"{label}: inconclusive layer sequence {seq}"
        out.append(base | {"verdict": verdict, "reason": reason, "run": label, "evidence": _evidence(run)})
    return out
