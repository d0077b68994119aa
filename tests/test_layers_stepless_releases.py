"""A draft model class that selects no layer by the step, on a real release (0.32.0's
NemotronH MTP: ``forward(..., **kwargs)`` never reads the step; its predictor's constructor
asserts one MTP layer, ``nemotron_h_mtp.py:247``), and ``layers --all`` planning it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from test_layers_releases import _plan

pytestmark = pytest.mark.release

CONSTANT = "constant — eagle-style by design"
NEMOTRON = "NemotronHMTPModel"


@pytest.mark.parametrize("runner, drafter", [("v1", "EagleProposer"), ("v2", "MTPSpeculator")])
def test_0_32_nemotron_h_one_layer_runs_layer_0_every_step(runner, drafter):
    plan = _plan("0.32.0", runner, NEMOTRON, (("num_nextn_predict_layers", 1),), k=2)
    assert plan.proposer is not None and plan.proposer[1] == drafter
    assert plan.model_class == ("vllm/model_executor/models/nemotron_h_mtp.py", "NemotronHMTP")
    assert plan.loop is not None
    assert (plan.num_mtp_layers, plan.layer_field) == (1, "num_nextn_predict_layers")
    assert plan.outcome == "plan"
    assert [(s.forward_layer, s.head_layer, s.verdict) for s in plan.steps] == [(0, None, CONSTANT)] * 2
    assert "NemotronHMTP takes no per-step selection" in plan.steps[0].why
    assert plan.compiled is not None and [s.forward_layer for s in plan.compiled.steps] == [0, 0]


@pytest.mark.parametrize("runner, k", [("v1", 2), ("v2", 2), ("v1", 1)])
def test_0_32_nemotron_h_two_layers_are_rejected_when_the_draft_model_is_built(runner, k):
    plan = _plan("0.32.0", runner, NEMOTRON, (("num_nextn_predict_layers", 2),), k=k)
    assert plan.outcome == "rejected"
    r = plan.rejections[0]
    assert (r.path, r.line, r.function, r.when) == (
        "vllm/model_executor/models/nemotron_h_mtp.py", 247, "NemotronHMultiTokenPredictor.__init__", "build")
    assert "Only one MTP layer is supported for NemotronH-MTP" in r.message
    assert all(s.verdict == "rejected" for s in plan.steps)


def test_0_32_layers_all_has_a_plan_for_nemotron_h():
    out = subprocess.run([sys.executable, "-m", "auditor.cli", "layers", "--release", "0.32.0", "--all", "--k", "2",
                          "--layers", "1", "--format", "json", "--engine-mode", "eager"],
                         capture_output=True, text=True, env=dict(os.environ), timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    plans = [p for p in json.loads(out.stdout)["plans"] if p["architecture"] == NEMOTRON]
    assert sorted(p["runner"] for p in plans) == ["v1", "v2"]
    for p in plans:
        assert p["outcome"] == "plan" and p["num_mtp_layers"] == 1
        assert [s["forward_layer"] for s in p["steps"]] == [0, 0]
