"""Score ``layers`` and ``scan --reachability`` against a third independent reader.

``tests/data/heldout/reachability_answers.json`` is the reader's file, unchanged: a helper
that read only vLLM 0.23.0, 0.25.1 and 0.28.0 source (never this tool's code or output)
answered, per registered MTP draft class and runner (V1, V2), for K=3 and a checkpoint with
3 MTP layers: which drafter and draft loop vLLM uses, the MTP layer whose forward and whose
head run at draft steps 0-2, and whether the draft raises (and at which step), with
file:line evidence. It also lists loops vLLM would NOT use for a class with that
configuration (``paired: false``).

Each paired answer is judged against what a user would ask: ``mtp-audit layers --release R
--all --layers 3 --k 3 --runner RUNNER --format json`` and the reachability table of
``mtp-audit scan --release R --reachability --format json``. Fields, fixed before scoring:

* ``drafter``: the plan's proposer class is the reader's ``driver_class``;
* ``outcome``: the reader's ``runs`` is a plan, ``raises`` with a step is ``raises`` at that
  step, ``raises`` with no step (an assert while the draft model is built, before any step)
  is ``rejected``;
* ``forward`` / ``heads``: the per-step layers (``null`` heads: one shared head, no
  per-layer head selected: the plan names no head layer). Where the reader's note says the
  model runs all its (decoder) layers every step (Gemma4MTP: "[0,0,0] means 'the one
  module'"), the reader's 0 per step is that whole module: the plan must say each step runs
  every layer of the checkpoint's 3, in order (its ``forward_layers``); a plan that selects
  one layer disagrees;
* ``loop``: the reader's loop (``Class.method``) is one the reachability row lists for the
  class (vLLM may run one of several loops of a drafter, e.g. fused or not).

An unpaired answer is judged by ``not-built``: the plan for that class and runner does not
use the drafter the reader says vLLM does not build for it.

``python tests/reachability_reader_score.py`` prints one line per answer and the score.
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ANSWERS = HERE / "data" / "heldout" / "reachability_answers.json"
#: the reader's checkpoint: 3 MTP layers in each model's own layer-count field
LAYERS = 3
#: how the reader's note says a step runs the model's whole layer container
_WHOLE_STACK = re.compile(r"runs all its (?:decoder )?layers every step")


def load_answers() -> list[dict[str, Any]]:
    """Every pair the reader wrote, with its release and a stable id."""
    data = json.loads(ANSWERS.read_text(encoding="utf-8"))
    out = []
    for release, body in sorted(data["releases"].items()):
        for p in body["pairs"]:
            pid = f"{release}-{p['runner']}-{p['model_class']}-{p['driver_class']}-{p['loop']}"
            out.append({**p, "release": release, "id": pid})
    return out


@lru_cache(maxsize=None)
def _cli_json(*args: str) -> Any:
    sys.path.insert(0, str(HERE))
    from cli_runner import invoke

    r = invoke(*args)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"mtp-audit {' '.join(args)} exited {r.returncode}: {r.stderr[-500:]}")
    return json.loads(r.stdout)


def plans(release: str, runner: str) -> dict[str, dict[str, Any]]:
    doc = _cli_json("layers", "--release", release, "--all", "--layers", str(LAYERS), "--k", "3", "--runner", runner,
                    "--format", "json", "-q")
    return {p["architecture"]: p for p in doc["plans"]}


def rows(release: str) -> dict[str, dict[str, Any]]:
    doc = _cli_json("scan", "--release", release, "--reachability", "--format", "json", "-q", "--exit-zero")
    return {r["class"]["name"]: r for r in doc["reachability"]}


def _loop_name(label: str) -> set[str]:
    # "path:line Class.method" or "path:line Class.method (as Drafter)"
    parts = label.split(" ")
    names = {parts[1]}
    if "(as" in parts:
        names.add(f"{parts[parts.index('(as') + 1].rstrip(')')}.{parts[1].split('.')[-1]}")
    return names


def judge(ans: dict[str, Any]) -> tuple[bool, dict[str, str]]:
    """(agrees, per field what differs) for one answer."""
    plan = plans(ans["release"], ans["runner"]).get(ans["registry_key"])
    if plan is None:
        return False, {"plan": f"no plan for {ans['registry_key']}"}
    drafter = (plan.get("proposer") or {}).get("class")
    if not ans.get("paired", True):
        ok = drafter != ans["driver_class"] or (plan.get("loop") or {}).get("function") != ans["loop"]
        return ok, {} if ok else {"not-built": f"the plan uses {drafter} {plan['loop']['function']}"}
    diff: dict[str, str] = {}
    if drafter != ans["driver_class"]:
        diff["drafter"] = f"{drafter} (reader {ans['driver_class']})"
    step = ans.get("raises_at_step")
    want = {"runs": "plan", "raises": "raises" if step is not None else "rejected"}.get(ans["outcome"], ans["outcome"])
    if plan["outcome"] != want or (want == "raises" and plan.get("raises_at_step") != step):
        diff["outcome"] = f"{plan['outcome']} at {plan.get('raises_at_step')} (reader {want} at {step})"
    if want != "rejected":
        fwd = [s["forward_layer"] for s in plan["steps"]]
        if _WHOLE_STACK.search(ans.get("note", "")) and all(f == 0 for f in ans["forward_layers"]):
            runs = [s.get("forward_layers") for s in plan["steps"]]
            if runs != [list(range(LAYERS))] * len(ans["forward_layers"]):
                diff["forward"] = f"{runs} (reader: every one of its {LAYERS} layers at each step, {ans['forward_layers']})"
        elif fwd != ans["forward_layers"]:
            diff["forward"] = f"{fwd} (reader {ans['forward_layers']})"
        heads = [s["head_layer"] for s in plan["steps"]]
        expected_heads = ans["head_layers"] if ans["head_layers"] is not None else [None] * len(heads)
        if want == "raises":
            expected_heads = [h if i < step else None for i, h in enumerate(expected_heads)]
        if heads != expected_heads:
            diff["heads"] = f"{heads} (reader {ans['head_layers']})"
        row = rows(ans["release"]).get(ans["model_class"])
        listed = set().union(*(_loop_name(lp["loop"]) for lp in row["loops"])) if row else set()
        if ans["loop"] not in listed:
            diff["loop"] = f"{ans['loop']} not among the row's loops {sorted(listed)}"
    return not diff, diff


def main() -> int:
    answers = load_answers()
    ok = 0
    for a in answers:
        agrees, diff = judge(a)
        ok += agrees
        print(f"{'agree   ' if agrees else 'DISAGREE'} {a['id']}" + ("" if agrees else f": {diff}"))
    print(f"score: {ok}/{len(answers)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
