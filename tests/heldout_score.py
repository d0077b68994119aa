"""Score `layers` against the held-out, hand-traced cases in ``tests/data/heldout/``.

An independent reader derived each case from vLLM's source (see the README next to the
cases): the outcome (``plan``, ``rejected``, ``raises``), the drafter, the draft model class
and per draft step the forward and head layer. This module runs the analysis the way
``layers`` does (:func:`auditor.layers_cli.plan_tree`, one scan per release with every case
of that release planned before the freeze) and compares field by field.

``python tests/heldout_score.py [--cases FILE] [--json OUT]`` prints the per-case table and the score; it
runs against whatever ``auditor`` is importable, so the same script scores another checkout
(``PYTHONPATH=/path/to/checkout``).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES = HERE / "data" / "heldout" / "heldout_cases.json"
#: The fourth reader's cases (session 5: releases 0.25.0, 0.26.0, 0.27.0; README beside it).
CASES_S5 = HERE / "data" / "heldout" / "heldout_cases_s5.json"
#: The fifth reader's cases (session 11: releases 0.24.0-0.32.0; README beside it).
CASES_S11 = HERE / "data" / "heldout" / "heldout_cases_s11.json"
#: The sixth reader's cases (session 12: releases 0.23.0-0.32.0; README beside it).
CASES_S12 = HERE / "data" / "heldout" / "heldout_cases_s12.json"
#: The seventh reader's cases (session 13: releases 0.24.0-0.32.0, family method names, K
#: omitted; README beside it).
CASES_S13 = HERE / "data" / "heldout" / "heldout_cases_s13.json"
#: The eighth reader's cases (session 14: vLLM 0.34.0, a release nobody developed against).
CASES_S14 = HERE / "data" / "heldout" / "heldout_cases_s14.json"
#: The ninth reader's cases (session 15: 0.34.0 speculator config classes and options, 0.33.0/0.32.0 both runners).
CASES_S15 = HERE / "data" / "heldout" / "heldout_cases_s15.json"
#: The tenth reader's cases (session 16: K and the method left out, 0.24.0-0.34.0; README beside it).
CASES_S16 = HERE / "data" / "heldout" / "heldout_cases_s16.json"
#: The eleventh reader's cases (session 16: what happens while the drafter loads the draft model, 0.30.0-0.34.0).
CASES_S17 = HERE / "data" / "heldout" / "heldout_cases_s17.json"
CASES_S18 = HERE / "data" / "heldout" / "heldout_cases_s18.json"
CASES_S19 = HERE / "data" / "heldout" / "heldout_cases_s19.json"
CASES_S20 = HERE / "data" / "heldout" / "heldout_cases_s20.json"
# The speculative-config keys a Setting takes directly; others go to its options when it has them.
_DIRECT = {"method", "num_speculative_tokens"}


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text(encoding="utf-8"))["cases"])


def setting_of(case: dict[str, Any], runner: str | None = None) -> Any:
    """The question a case asks; ``runner``: the runner to ask, for a case that pins none
    (``"runner": null``: which runner vLLM uses is part of the answer)."""
    from auditor.analyses.dispatch import Setting

    spec = case["speculative_config"]
    inp = case["input"]
    # A case that leaves num_speculative_tokens out is asked with no K, as vLLM is given none.
    k = spec.get("num_speculative_tokens")
    kwargs: dict[str, Any] = {"runner": runner or case["runner"], "k": None if k is None else int(k),
                              # (a speculative config without a method is asked with none, as `layers` asks it)
                              "method": spec.get("method")}
    if "target_config" in inp and "draft_config" not in inp:
        kwargs["target_config"] = json.dumps(inp["target_config"])
    elif "draft_config" in inp and "arch" not in inp:
        # A draft checkpoint's own config (the speculative config's ``model``): the config vLLM's
        # override runs over, as ``layers --hf-config`` takes it (the target's, beside it, is not read).
        kwargs["target_config"] = json.dumps(inp["draft_config"])
    else:
        kwargs["architecture"] = inp["arch"]
        kwargs["fields"] = tuple(sorted(inp.get("draft_config", {}).items()))
    options = tuple(sorted((k, v) for k, v in spec.items() if k not in _DIRECT))
    if options and "options" in getattr(Setting, "__dataclass_fields__", {}):
        kwargs["options"] = options
    # The environment the case gives (the server's variables), where the tool takes one.
    env = tuple(sorted((str(k), str(v)) for k, v in inp.get("env", {}).items()))
    if env and "env" in getattr(Setting, "__dataclass_fields__", {}):
        kwargs["env"] = env
    # A case that gives the environment (``input.env``, even empty: no variable set) gives all of it.
    if "env" in inp and "env_given" in getattr(Setting, "__dataclass_fields__", {}):
        kwargs["env_given"] = True
    return Setting(**kwargs)


def answer_of(plan: Any) -> dict[str, Any]:
    """The tool's answer in the cases' vocabulary (``"shared"``: one head for every step)."""
    outcome = getattr(plan, "outcome", None) or ("plan" if plan.proposer is not None else "none")
    at = getattr(plan, "raises_at_step", None)
    # A raising case lists the steps that completed before the failure.
    steps = [s for s in plan.steps if s.step < at] if outcome == "raises" and at is not None else list(plan.steps)
    return {
        "outcome": outcome,
        "drafter": plan.proposer[1] if plan.proposer else None,
        # Other drafters an unknown branch could build: the tool then claims none of them.
        "alternatives": [c[1] for c in getattr(plan, "alternatives", ())],
        "draft_model_class": plan.model_class[1] if plan.model_class else None,
        "forward_layers": [s.forward_layer for s in steps],
        # Per step every layer the forward runs, in order (a stack it iterates: all of them),
        # for a case that lists them; a checkout without ``StepPlan.forward_layers`` gives its
        # one forward layer.
        "forward_runs": [_runs(s) for s in steps],
        "head_layers": ["shared" if s.head_layer is None else s.head_layer for s in steps],
        "raises_at_step": getattr(plan, "raises_at_step", None),
        "verdicts": [s.verdict for s in plan.steps],
        # Whether vLLM uses the plan's runner for this configuration, where the tool derives it
        # (None: not derived, or a checkout that does not say).
        "runner_used": getattr(plan, "runner_used", None),
    }


def _runs(step: Any) -> list[int] | None:
    layers = getattr(step, "forward_layers", None)
    if layers is None and not hasattr(step, "forward_layers"):
        layers = None if step.forward_layer is None else (step.forward_layer,)
    return None if layers is None else list(layers)


def forward_agrees(expected: list[Any] | None, got: dict[str, Any]) -> bool:
    """The forward layers per step: a step the case gives as one layer (an int, or null for
    none) is the tool's ``forward_layer``; a step given as a list (every layer the forward
    runs: Gemma-4 runs its whole container) is the tool's ``forward_runs``, exactly. A saved
    answer without ``forward_runs`` has only its one layer per step."""
    fwd = got["forward_layers"]
    runs = got.get("forward_runs") or [None if f is None else [f] for f in fwd]
    if expected is None or len(expected) != len(fwd) or len(runs) != len(fwd):
        return expected == fwd
    return all(r == e if isinstance(e, list) else f == e for e, f, r in zip(expected, fwd, runs))


RUNNERS = ("v1", "v2")


def compare(expected: dict[str, Any], got: dict[str, Any]) -> dict[str, bool]:
    """Field -> agrees. A rejected case is compared on its outcome only (no step runs); a
    raising one also on the step that raises and the steps before it.

    A case that pins no runner (``got["by_runner"]``: the tool's answer asked with each) is
    answered by the runner the tool says vLLM uses (``runner_used``), which must be the one
    the case expects; the other fields are compared on the answer for the expected runner. A
    case rejected before any runner is chosen (``expected["runner"]`` null) agrees when the
    answer for every runner is that rejection."""
    by_runner = got.get("by_runner")
    if by_runner is not None:
        want = expected.get("runner")
        if want is None:
            return {"outcome": all(a["outcome"] == expected["outcome"] for a in by_runner.values())}
        used = [r for r, a in sorted(by_runner.items()) if a.get("runner_used") is True]
        return {"runner": used == [want], **compare(expected, by_runner[want])}
    out = {"outcome": got["outcome"] == expected["outcome"]}
    if expected["outcome"] == "rejected":
        return out
    out["drafter"] = got["drafter"] == expected["drafter"] and not got.get("alternatives")
    out["draft_model_class"] = got["draft_model_class"] == expected["draft_model_class"]
    out["forward_layers"] = forward_agrees(expected["forward_layers"], got)
    heads = expected["head_layers"]
    if isinstance(heads, str):  # "shared": one head whatever the step
        heads = [heads] * len(expected["forward_layers"] or [])
    out["head_layers"] = got["head_layers"] == heads
    if expected["outcome"] == "raises":
        out["raises_at_step"] = got["raises_at_step"] == expected["raises_at_step"]
    return out


def answers(cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Case id -> the tool's answer, one scan per release."""
    from auditor.facts.cache import FactsCache
    from auditor.common.config import Config
    from auditor.services.layers import plan_tree
    from auditor.source.trees import DirectoryTree
    from release_cache import first_scan, release_cache_dir, release_root
    from rules import all_rules

    by_release: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in cases:
        by_release[c["release"]].append(c)
    out: dict[str, dict[str, Any]] = {}
    for release, group in sorted(by_release.items()):
        # (a case that pins no runner is asked once per runner)
        asked = [(c, r) for c in group for r in ((None,) if c["runner"] is not None else RUNNERS)]
        settings = [setting_of(c, r) for c, r in asked]
        root = Path(release_root(release))

        def planned(chosen: list[Any]) -> list[Any]:
            with first_scan(release):
                return plan_tree(DirectoryTree(root), Config(), all_rules(),
                                 FactsCache(release_cache_dir()), lambda _d, s=chosen: list(s), 2)

        try:
            plans = planned(settings)
        except Exception:  # a checkout that cannot plan one of them (no K given): each on its own
            plans = []
            for s in settings:
                try:
                    plans += planned([s])
                except Exception as exc:  # that case's answer is the failure: it agrees with nothing
                    plans.append(exc)
        for (c, r), p in zip(asked, plans):
            answer = answer_of(p) if not isinstance(p, Exception) else _failed(p)
            if r is None:
                out[c["id"]] = answer
            else:
                out.setdefault(c["id"], {"by_runner": {}})["by_runner"][r] = answer
    return out


def _failed(exc: Exception) -> dict[str, Any]:
    return {"outcome": f"error: {type(exc).__name__}", "drafter": None, "draft_model_class": None, "forward_layers": [],
            "forward_runs": [], "head_layers": [], "raises_at_step": None, "verdicts": []}


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(HERE))
    cases = load_cases(Path(argv[argv.index("--cases") + 1]) if "--cases" in argv else CASES)
    if "--rescore" in argv:  # compare a saved run again (its answers), without analysing
        saved = json.loads(Path(argv[argv.index("--rescore") + 1]).read_text(encoding="utf-8"))
        got = {r["id"]: r["got"] for r in saved["rows"]}
    else:
        got = answers(cases)
    rows = []
    agree = 0
    for c in cases:
        cmp = compare(c["expected"], got[c["id"]])
        if "--given-runner" in argv:
            # For information: each answer judged as if the case had pinned the runner vLLM uses.
            cmp.pop("runner", None)
        ok = all(cmp.values())
        agree += ok
        rows.append({"id": c["id"], "agrees": ok, "fields": cmp, "got": got[c["id"]],
                     "expected": {k: c["expected"].get(k) for k in ("outcome", "drafter", "draft_model_class",
                                                                    "forward_layers", "head_layers", "raises_at_step",
                                                                    "runner")}})
        bad = [k for k, v in cmp.items() if not v]
        print(f"{'ok ' if ok else 'BAD'} {c['id']}" + (f"  wrong: {', '.join(bad)}" if bad else ""))
    print(f"\n{agree}/{len(cases)} cases agree")
    if "--json" in argv:
        Path(argv[argv.index("--json") + 1]).write_text(json.dumps({"agree": agree, "cases": len(cases), "rows": rows},
                                                                   indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
