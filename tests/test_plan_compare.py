"""`runtime check --plan`: the comparison of a static plan with recorded runs (pure Python,
no engine), and the plan errors the CLI reports before any engine starts. The comparison
against real engine runs is tests/runtime/test_plan_agreement.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime_check import plan_compare
from runtime_check.plan_compare import Agreement

REPO = Path(__file__).resolve().parents[1]


def run(mode: str, layers: list[int], heads: list[list[int]] | None = None, runner: str = "v2",
        proposer: str = "MultiModuleMTPSpeculator", wrapper: str = "Glm4MoeMTP", calls: int = 2) -> dict:
    """A recorded run: ``calls`` draft calls, each with the same layers per step."""
    steps = [{"propose": c, "step": i, "layers": [layer], "head_layers": (heads or [[]] * len(layers))[i]}
             for c in range(calls) for i, layer in enumerate(layers)]
    return {"runner": runner, "mode": mode, "k": len(layers), "num_mtp_layers": 3, "steps": steps,
            "proposer": f"vllm.x.{proposer}", "wrapper_class": f"vllm.models.glm.{wrapper}"}


def plan(runner: str = "v2", fwd: list[int | None] = [0, 1, 2], head: list[int | None] = [0, 1, 2],
         forced: tuple[list[int | None], list[int | None]] | None = None,
         proposer: str = "MultiModuleMTPSpeculator", model: str = "Glm4MoeMTP") -> dict:
    doc = {"runner": runner, "k": len(fwd), "num_mtp_layers": 3, "proposer": {"class": proposer, "path": "p.py"},
           "model_class": {"class": model, "path": "m.py"},
           "steps": [{"step": i, "forward_layer": f, "head_layer": h} for i, (f, h) in enumerate(zip(fwd, head))]}
    if forced is not None:
        doc["forced"] = {"why": "", "steps": [{"step": i, "forward_layer": f, "head_layer": h}
                                              for i, (f, h) in enumerate(zip(*forced))]}
    return doc


def test_agree_per_step_with_shared_head_and_repeated_head():
    c = plan_compare.compare_run([plan()], run("shipped", [0, 1, 2], heads=[[0, 0], [1, 1], [2]]))
    assert c.agreement is Agreement.AGREE
    assert [(s.forward, s.head) for s in c.steps] == [(Agreement.AGREE, Agreement.AGREE)] * 3
    # A null head (one shared head) agrees with a run where no per-layer head ran.
    c = plan_compare.compare_run([plan(fwd=[0, 0, 0], head=[None] * 3, model="Q")],
                                 run("shipped", [0, 0, 0], wrapper="Q"))
    assert c.agreement is Agreement.AGREE


def test_disagreement_names_the_step_and_what():
    c = plan_compare.compare_run([plan(fwd=[0, 0, 0], head=[None] * 3)], run("shipped", [0, 1, 2], heads=[[0], [1], [2]]))
    assert c.agreement is Agreement.DISAGREE
    assert [s.forward for s in c.steps] == [Agreement.AGREE, Agreement.DISAGREE, Agreement.DISAGREE]
    assert [s.head for s in c.steps] == [Agreement.DISAGREE] * 3
    text = plan_compare.render_text(plan_compare.to_json([c]))
    assert "v2 shipped: DISAGREE" in text and "step 1  forward planned 0 ran 1: disagree" in text


def test_one_draft_call_that_differs_is_a_disagreement():
    r = run("shipped", [0, 1, 2], heads=[[0], [1], [2]])
    r["steps"][-1]["layers"] = [0]  # the second call's step 2 ran layer 0
    c = plan_compare.compare_run([plan()], r)
    assert c.steps[2].forward is Agreement.DISAGREE and c.steps[2].observed_forward == [[2], [0]]


def test_drafter_and_model_class_are_compared():
    c = plan_compare.compare_run([plan(proposer="MTPSpeculator")], run("shipped", [0, 1, 2], heads=[[0], [1], [2]]))
    assert c.drafter is Agreement.DISAGREE and c.model_class is Agreement.AGREE
    assert c.agreement is Agreement.DISAGREE


def test_forced_run_uses_the_forced_view():
    p = plan(fwd=[0, 0, 0], head=[0, 0, 0], runner="v1", proposer="EagleProposer",
             forced=([0, 1, 2], [0, 1, 2]))
    r = run("forced", [0, 1, 2], heads=[[0], [1], [2]], runner="v1", proposer="EagleProposer")
    assert plan_compare.compare_run([p], r).agreement is Agreement.AGREE
    shipped = run("shipped", [0, 0, 0], heads=[[0], [0], [0]], runner="v1", proposer="EagleProposer")
    assert plan_compare.compare_run([p], shipped).agreement is Agreement.AGREE
    # A plan without the forced view (an older `layers`) cannot judge a forced run.
    c = plan_compare.compare_run([plan(runner="v1", proposer="EagleProposer")], r)
    assert c.agreement is Agreement.NO_PLAN and "forced" in c.why


def test_compiled_run_uses_the_compiled_view():
    # `layers --engine-mode`: the compiled view freezes step 1 at step 0's layer.
    p = plan(fwd=[0, 1], head=[0, 1])
    p["compiled"] = {"mode": "compiled", "frozen_steps": [1], "steps": [
        {"step": 0, "forward_layer": 0, "head_layer": 0}, {"step": 1, "forward_layer": 0, "head_layer": 0}]}
    frozen = {**run("shipped", [0, 0], heads=[[0], [0]]), "engine_mode": "compiled"}
    assert plan_compare.compare_run([p], frozen).agreement is Agreement.AGREE
    # The eager steps would have said 0,1: the same run compared as eager disagrees.
    assert plan_compare.compare_run([p], {**frozen, "engine_mode": "eager"}).agreement is Agreement.DISAGREE
    threaded = {**run("shipped", [0, 1], heads=[[0], [1]]), "engine_mode": "compiled"}
    c = plan_compare.compare_run([p], threaded)
    assert c.agreement is Agreement.DISAGREE and c.steps[1].forward is Agreement.DISAGREE
    # A plan made without the compiled view cannot judge a compiled run.
    c = plan_compare.compare_run([plan(fwd=[0, 1], head=[0, 1])], threaded)
    assert c.agreement is Agreement.NO_PLAN and "compiled" in c.why


def test_layers_outcome_plan_is_the_engines_ran():
    p = {**plan(), "outcome": "plan", "raises_at_step": None, "rejections": []}
    assert plan_compare.planned_outcome(p) == ("ran", None)
    assert plan_compare.compare_run([p], run("shipped", [0, 1, 2], heads=[[0], [1], [2]])).agreement is Agreement.AGREE


def test_a_rejection_at_load_agrees_only_with_a_rejection_at_one_of_its_checks():
    checks = [{"path": "vllm/model_executor/model_loader/default_loader.py", "line": 564, "when": "weights",
               "function": "DefaultModelLoader.track_weights_loading", "message": "ValueError(...)",
               "condition": "when the checkpoint names its MTP layers as the mapper's source prefixes"},
              {"path": "vllm/model_executor/models/utils.py", "line": 448, "when": "weights",
               "function": "AutoWeightsLoader._load_module", "message": "ValueError(msg)", "condition": "..."}]
    p = {**plan(fwd=[None] * 3, head=[None] * 3), "outcome": "rejected", "rejections": checks}
    r = {**run("shipped", []), "outcome": "rejected", "exception": "ValueError", "message": "Following weights ...",
         "site": {"path": "vllm/model_executor/model_loader/default_loader.py", "line": 564}}
    assert plan_compare.compare_run([p], r).agreement is Agreement.AGREE
    other = plan_compare.compare_run([p], {**r, "site": {"path": "vllm/config/speculative.py", "line": 1498}})
    assert other.agreement is Agreement.DISAGREE and "rejected elsewhere" in other.why
    assert plan_compare.compare_run([p], {**r, "site": None}).agreement is Agreement.DISAGREE
    # A rejection of another kind (validation) is compared by outcome, as before.
    v = {**p, "rejections": [{**checks[0], "when": "validation"}]}
    assert plan_compare.compare_run([v], {**r, "site": None}).agreement is Agreement.AGREE


def test_a_planned_raise_at_step_is_compared_with_the_step_the_engine_raised_at():
    p = {**plan(fwd=[0, None, None], head=[None] * 3), "outcome": "raises", "raises_at_step": 1}
    r = {**run("shipped", [0], heads=[[]]), "outcome": "raises", "exception": "AssertionError", "message": "one token"}
    c = plan_compare.compare_run([p], r)
    assert c.agreement is Agreement.AGREE and [s.step for s in c.steps] == [0]
    # Step 0 ran another layer than planned: disagree although both raise.
    r0 = {**r, "steps": [{**x, "layers": [1]} for x in r["steps"]]}
    assert plan_compare.compare_run([p], r0).agreement is Agreement.DISAGREE
    # The engine raised at step 0 (no step ran), the plan says step 1.
    c = plan_compare.compare_run([p], {**r, "steps": []})
    assert c.agreement is Agreement.DISAGREE and "raised at step 0" in c.why
    # The plan says raises, the engine ran every step.
    ran = run("shipped", [0, 1, 2], heads=[[], [], []])
    assert plan_compare.compare_run([p], ran).agreement is Agreement.DISAGREE


def test_a_raise_inside_a_steps_forward_is_at_that_step():
    # The plan raises at step 0 (a read in the layer's forward): it keeps no layer from step 0
    # on; its forced view says the route's steps end in a per-layer head.
    p = {**plan(fwd=[None] * 3, head=[None] * 3, forced=([0, 1, 2], [0, 1, 2])), "outcome": "raises",
         "raises_at_step": 0}
    exc = {"outcome": "raises", "exception": "AttributeError", "message": "no attribute 'x'"}
    # The engine entered step 0's layer, its head never ran: step 0 raised.
    r = {**run("shipped", [0], heads=[[]]), **exc}
    c = plan_compare.compare_run([p], r)
    assert c.agreement is Agreement.AGREE and c.outcome is Agreement.AGREE, c.why
    # Step 0 ran its head: it completed, the raise came at step 1.
    done = {**run("shipped", [0, 1], heads=[[0], []]), **exc}
    done["steps"] = [x for x in done["steps"] if x["step"] == 0]
    c = plan_compare.compare_run([p], done)
    assert c.agreement is Agreement.DISAGREE and "raised at step 1" in c.why
    # A plan without the forced view (an older `layers`) says nothing of a head: as before.
    old = {**p}
    del old["forced"]
    c = plan_compare.compare_run([old], r)
    assert c.agreement is Agreement.DISAGREE and "raised at step 1" in c.why
    # A raise inside step 1's forward, the plan's head at step 0 kept: step 0 compared, raised at 1.
    p1 = {**plan(fwd=[0, None, None], head=[0, None, None], forced=([0, 1, 2], [0, 1, 2])),
          "outcome": "raises", "raises_at_step": 1}
    r1 = {**run("shipped", [0, 1], heads=[[0], []]), **exc}
    c = plan_compare.compare_run([p1], r1)
    assert c.agreement is Agreement.AGREE and [s.step for s in c.steps] == [0], c.why


def test_a_raise_between_steps_with_no_per_layer_head_keeps_the_count():
    # One shared head (no per-layer head at any step, in any view): a step whose forward ran
    # completed; an assert between steps raises at the next one (mimo, V2).
    p = {**plan(fwd=[0, None, None], head=[None] * 3, forced=([0, 1, 2], [None] * 3)), "outcome": "raises",
         "raises_at_step": 1}
    r = {**run("shipped", [0], heads=[[]]), "outcome": "raises", "exception": "AssertionError", "message": "one token"}
    c = plan_compare.compare_run([p], r)
    assert c.agreement is Agreement.AGREE and [s.step for s in c.steps] == [0], c.why
    # The same run against a plan that raises at step 0: the engine raised at step 1.
    p0 = {**p, "steps": [{**st, "forward_layer": None} for st in p["steps"]], "raises_at_step": 0}
    c = plan_compare.compare_run([p0], r)
    assert c.agreement is Agreement.DISAGREE and "raised at step 1" in c.why


def test_runs_are_matched_to_the_plan_of_their_runner():
    plans = [plan(runner="v1", fwd=[0, 0, 0], head=[0, 0, 0], proposer="EagleProposer"), plan()]
    cs = plan_compare.compare(plans, [run("shipped", [0, 0, 0], heads=[[0]] * 3, runner="v1", proposer="EagleProposer"),
                                      run("shipped", [0, 1, 2], heads=[[0], [1], [2]])])
    assert [c.agreement for c in cs] == [Agreement.AGREE, Agreement.AGREE]
    assert not plan_compare.disagrees(cs)
    only_v2 = plan_compare.compare([plan()], [run("shipped", [0, 0, 0], runner="v1")])
    assert only_v2[0].agreement is Agreement.NO_PLAN and not plan_compare.disagrees(only_v2)


def test_check_fits():
    plan_compare.check_fits([plan()], 3, 3, ["v2"])
    with pytest.raises(plan_compare.PlanError, match="K=3.*K=2"):
        plan_compare.check_fits([plan()], 2, 3, ["v2"])
    with pytest.raises(plan_compare.PlanError, match="3 MTP layers.*has 4"):
        plan_compare.check_fits([plan()], 3, 4, ["v2"])
    with pytest.raises(plan_compare.PlanError, match="runner v2.*uses v1"):
        plan_compare.check_fits([plan()], 3, 3, ["v1"])


def _cli(*args: str) -> subprocess.CompletedProcess:
    # No runtime environment needed: plan errors are reported before any engine starts.
    env = dict(os.environ, MTP_AUDIT_RUNTIME_PYTHON="/nonexistent/python")
    return subprocess.run([sys.executable, "-m", "runtime_check.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("content,k,fragment", [
    ("not json", "3", "is not JSON"),
    (json.dumps({"findings": []}), "3", "is not the JSON of `mtp-audit layers`"),
    (json.dumps({"plans": [plan()]}), "2", "the plan is for K=3 (v2), the run for K=2"),
    (json.dumps(plan(runner="v1")), "3", "the plan is for runner v1, the run uses v2"),
])
def test_plan_errors_are_one_line_exit_2(tmp_path, content, k, fragment):
    p = tmp_path / "plan.json"
    p.write_text(content)
    r = _cli("check", "--arch", "glm4_moe", "--k", k, "--runner", "v2", "--plan", str(p))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith("mtp-audit: error: ") and fragment in lines[0], lines[0]


def test_missing_plan_file_is_one_line_exit_2(tmp_path):
    r = _cli("check", "--arch", "glm4_moe", "--k", "3", "--plan", str(tmp_path / "nope.json"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "cannot read" in r.stderr
