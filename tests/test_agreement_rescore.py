"""`bench/runtime_agreement.py --rescore`: a recorded engine row is judged again against a
new plan through plan_compare (no engine). Rows written before the raw engine steps were
recorded keep only the distinct observations per step; these tests use that old shape."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("runtime_agreement", REPO / "bench" / "runtime_agreement.py")
agreement = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(agreement)


def _plan(runner: str, fwd: list, head: list, outcome: str = "plan", raises_at: int | None = None,
          compiled: list | None = None) -> dict:
    steps = [{"step": i, "forward_layer": f, "head_layer": h} for i, (f, h) in enumerate(zip(fwd, head))]
    p = {"runner": runner, "k": len(fwd), "num_mtp_layers": 2, "outcome": outcome, "raises_at_step": raises_at,
         "proposer": {"class": "MultiModuleMTPSpeculator"}, "model_class": {"class": "MiMoMTP"}, "steps": steps}
    if compiled is not None:
        p["compiled"] = {"mode": "compiled", "steps": [{"step": i, "forward_layer": f, "head_layer": h}
                                                       for i, (f, h) in enumerate(compiled)]}
    return p


# The mimo V2 K=2 N=2 eager row as recorded before the routes work (engine raised at step 1).
RAISED = {"arch": "mimo", "k": 2, "layers": 2, "runner": "v2", "engine_mode": "eager", "agreement": "disagree",
          "outcome": "raises", "planned_outcome": "ran",
          "observed_exception": "AssertionError: mimo_mtp only support predict one token now (vllm/x.py:200)",
          "planned_layers": [0], "engine_layers": [["0"]], "planned_heads": [0], "engine_heads": [[""]],
          "drafter": "MultiModuleMTPSpeculator", "drafter_agrees": "agree", "model_class_agrees": "agree", "why": ""}


def test_a_row_is_rejudged_against_the_new_plan_and_keeps_its_before_verdict():
    new = agreement.rejudge(RAISED, [_plan("v2", [0, None], [None, None], "raises", 1)])
    assert new["agreement"] == "agree" and new["planned_outcome"] == "raises"
    assert new["before"]["agreement"] == "disagree" and new["before"]["planned_heads"] == [0]
    # The old plan (runs both steps, per-layer head) still disagrees with the same row.
    assert agreement.rejudge(RAISED, [_plan("v2", [0, 1], [0, 1])])["agreement"] == "disagree"


def test_a_compiled_row_is_judged_by_the_compiled_view():
    row = {**RAISED, "arch": "exaone_moe", "engine_mode": "compiled", "outcome": "ran", "observed_exception": None,
           "engine_layers": [["0"], ["0"]], "engine_heads": [[""], [""]]}
    plan = _plan("v2", [0, 1], [None, None], compiled=[(0, None), (0, None)])
    plan["model_class"] = {"class": "ExaoneMoeMTP"}
    assert agreement.rejudge(row, [plan])["agreement"] == "agree"
    eager = {**row, "engine_mode": "eager"}
    assert agreement.rejudge(eager, [plan])["agreement"] == "disagree"


def test_calls_that_differed_stay_a_disagreement():
    row = {**RAISED, "outcome": "ran", "observed_exception": None, "engine_layers": [["0"], ["0", "1"]],
           "engine_heads": [[""], [""]]}
    assert agreement.rejudge(row, [_plan("v2", [0, 1], [None, None])])["agreement"] == "disagree"
    assert agreement.rejudge(row, [_plan("v2", [0, 0], [None, None])])["agreement"] == "disagree"


def test_a_rerun_cell_replaces_its_row_and_keeps_the_before_verdict():
    old = {**RAISED, "agreement": "agree", "before": {"agreement": "disagree"}}
    rerun = {**RAISED, "agreement": "agree", "wall_s": 19.4}
    other = {**RAISED, "arch": "ernie"}
    rows = agreement._latest_per_cell([old, other, rerun])
    assert len(rows) == 2 and rows[0]["wall_s"] == 19.4 and rows[0]["rerun"]
    assert rows[0]["before"] == {"agreement": "disagree"}
    assert rows[1]["before"] == {"agreement": "not run"}  # a row new to a rescored file counts "after" only
