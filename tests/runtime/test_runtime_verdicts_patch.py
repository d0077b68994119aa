"""Verdicts on a scan's findings, --patch overlays, and the one-line errors."""

from __future__ import annotations

import difflib
import json
import subprocess
from pathlib import Path

import pytest

from runtime_check import verdicts

from .conftest import cli

pytestmark = pytest.mark.runtime


def _finding(rule, function, cls, path):
    return {"rule": rule, "severity": "error", "path": path, "line": 10, "column": 4,
            "function": function, "callee": "self.model", "message": "m", "trace": [],
            "affected_classes": [{"path": path, "name": cls}], "fingerprint": f"fp-{rule}-{cls}"}


FIXTURE = {
    "version": 1,
    "reachability": [],
    "findings": [
        _finding("MTP001", "Qwen3NextMTP.forward", "Qwen3NextMTP",
                 "vllm/model_executor/models/qwen3_next_mtp.py"),
        _finding("MTP002", "SpecDecodeBaseProposer.propose", "Qwen3NextMTP",
                 "vllm/v1/spec_decode/llm_base_proposer.py"),
        _finding("MTP001", "DeepSeekMTP.forward", "DeepSeekMTP",
                 "vllm/model_executor/models/deepseek_mtp.py"),
        _finding("MTP004", "Qwen3NextMTP.compute_logits", "Qwen3NextMTP",
                 "vllm/model_executor/models/qwen3_next_mtp.py"),
        _finding("MTP001", "Qwen3_5MTP.forward", "Qwen3_5MTP",
                 "vllm/model_executor/models/qwen3_5_mtp.py"),
        _finding("MTP002", "StandaloneARSpeculator._multi_step_decode", "Qwen3NextMTP",
                 "vllm/v1/worker/gpu/spec_decode/standalone_ar/speculator.py"),
    ],
}


def test_verdicts_from_engine_runs(run_check):
    runs = [run_check("qwen3_next")["runs"][0], run_check("qwen3_next", True)["runs"][0],
            run_check("deepseek_v3")["runs"][0], run_check("deepseek_v3", True)["runs"][0]]
    v = {(x["rule"], x["function"]): x for x in verdicts.judge(FIXTURE, runs)}
    assert v[("MTP001", "Qwen3NextMTP.forward")]["verdict"] == "CONFIRMED"
    assert v[("MTP001", "Qwen3NextMTP.forward")]["evidence"][1]["layers"] == [0]
    assert v[("MTP002", "SpecDecodeBaseProposer.propose")]["verdict"] == "CONFIRMED"
    assert v[("MTP001", "DeepSeekMTP.forward")]["verdict"] == "REFUTED"
    assert v[("MTP004", "Qwen3NextMTP.compute_logits")]["verdict"] == "NOT EXERCISED"
    # A CPU run drafts with the V1 proposer: a V2 speculator's loop is not what ran.
    v2 = v[("MTP002", "StandaloneARSpeculator._multi_step_decode")]
    assert v2["verdict"] == "NOT EXERCISED" and "EagleProposer" in v2["reason"]
    q35 = v[("MTP001", "Qwen3_5MTP.forward")]
    assert q35["verdict"] == "NOT EXERCISED" and "--arch qwen3_5" in q35["reason"]


def test_findings_option_end_to_end(tmp_path, runtime_py):
    f = tmp_path / "scan.json"
    f.write_text(json.dumps(FIXTURE))
    r = cli("check", "--arch", "qwen3_next", "--k", "3", "--runner", "v1", "--findings", str(f),
            "--format", "json", "--batch")  # its two runs (shipped, forced) share one import of vLLM
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert [(x["runner"], x["mode"]) for x in doc["runs"]] == [("v1", "shipped"), ("v1", "forced")]
    got = [(x["rule"], x["classes"][0], x["verdict"]) for x in doc["verdicts"]]
    assert ("MTP001", "Qwen3NextMTP", "CONFIRMED") in got
    assert ("MTP002", "Qwen3NextMTP", "CONFIRMED") in got
    assert ("MTP001", "DeepSeekMTP", "NOT EXERCISED") in got


def _qwen3_next_fix(runtime_py, tmp_path) -> Path:
    """A diff that makes Qwen3NextMTP.forward pass spec_step_idx on (built from the installed file)."""
    src = subprocess.run([runtime_py, "-c", "import importlib.util as u; "
                          "print(u.find_spec('vllm').submodule_search_locations[0])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    rel = "vllm/model_executor/models/qwen3_next_mtp.py"
    old = (Path(src).parent / rel).read_text()
    call = "input_ids, positions, hidden_states, intermediate_tensors, inputs_embeds\n        )"
    assert call in old
    new = old.replace(call, "input_ids, positions, hidden_states, intermediate_tensors, inputs_embeds,\n"
                            "            spec_step_idx=kwargs.get(\"spec_step_idx\", 0),\n        )")
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{rel}", f"b/{rel}"))
    p = tmp_path / "fix.diff"
    p.write_text(diff)
    return p


def test_patch_overlay_makes_step_reach_layer(tmp_path, runtime_py):
    diff = _qwen3_next_fix(runtime_py, tmp_path)
    r = cli("check", "--arch", "qwen3_next", "--k", "3", "--runner", "v1", "--force-step-idx",
            "--patch", str(diff), "--format", "json")
    assert r.returncode == 0, r.stderr[-2000:]
    (run,) = json.loads(r.stdout)["runs"]
    assert run["patch"]["files"] == ["vllm/model_executor/models/qwen3_next_mtp.py"]
    assert run["step_i_runs_layer_i"], run["layer_sequence"]
    # The installed vLLM is untouched.
    assert "spec_step_idx=kwargs.get" not in subprocess.run(
        [runtime_py, "-c", "import inspect, vllm.model_executor.models.qwen3_next_mtp as m; "
                           "print(inspect.getsource(m.Qwen3NextMTP.forward))"],
        capture_output=True, text=True, env={"PYTHONPATH": str(Path(__file__).parents[2] / "runtime_check/stubs")},
    ).stdout


def _assert_one_line_error(r, needle, quiet=True):
    """The error is one line. With -q it is all of stderr; without, only
    progress lines ("mtp-audit: starting vLLM ...") come before it."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    errors = [x for x in lines if x.startswith("mtp-audit: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], r.stderr
    assert needle in errors[0]
    if quiet:
        assert len(lines) == 1, r.stderr
    else:
        assert all(x.startswith("mtp-audit: ") for x in lines), r.stderr
    assert "Traceback" not in r.stderr


def test_patch_that_does_not_apply_is_one_line_naming_every_failing_file(tmp_path, runtime_py):
    """A diff of our own against the installed vLLM (made-up context lines): the error, before
    any engine starts, names each file with a hunk that does not apply, with its counts."""
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"],
                                               "model_type": "deepseek_v3", "num_nextn_predict_layers": 2}))
    diff = Path(__file__).resolve().parents[1] / "data" / "runtime" / "not-applying.diff"
    r = cli("check", "-q", "--model", str(d), "--k", "2", "--runner", "v1", "--patch", str(diff))
    _assert_one_line_error(r, ": vllm/__init__.py: 1 of 2 hunks failed; vllm/envs.py: 1 of 1 hunk failed")
    assert "patch does not apply to vLLM 0." in r.stderr and "version.py" not in r.stderr


def test_error_unknown_arch(runtime_py):
    _assert_one_line_error(cli("check", "--arch", "llama9", "--k", "3"), "unknown architecture")
    _assert_one_line_error(cli("synth", "llama9", "--out", "/tmp/x"), "unknown architecture")


def test_k_the_draft_cannot_take_is_a_rejected_outcome(runtime_py):
    # Not ours to refuse: vLLM's speculative config rejects K=4 with 3 MTP layers (4 % 3 != 0).
    r = cli("check", "--arch", "deepseek_v3", "--mtp-layers", "3", "--k", "4", "--runner", "v1", "--format", "json")
    assert r.returncode == 0, r.stderr[-2000:]
    (run,) = json.loads(r.stdout)["runs"]
    assert (run["outcome"], run["exception"]) == ("rejected", "ValidationError")
    assert "num_speculative_tokens:4 must be divisible by n_predict=3" in run["message"]
    assert run["site"]["path"] == "vllm/config/speculative.py"


def test_error_no_config(tmp_path, runtime_py):
    _assert_one_line_error(cli("check", "--model", str(tmp_path), "--k", "3"), "no config.json")


def test_engine_that_cannot_load_weights_is_a_rejected_outcome(tmp_path, runtime_py):
    d = tmp_path / "m"
    r = cli("synth", "deepseek_v3", "--mtp-layers", "3", "--out", str(d))
    assert r.returncode == 0, r.stderr
    (d / "model.safetensors").unlink()  # the engine cannot load weights: vLLM's refusal is the outcome
    r = cli("check", "--model", str(d), "--k", "3", "--runner", "v1", "--format", "json")
    assert r.returncode == 0, r.stderr[-2000:]
    (run,) = json.loads(r.stdout)["runs"]
    assert run["outcome"] == "rejected" and run["stage"] == "start" and run["steps"] == []
    assert run["exception"] and run["message"] and run["site"]["path"].startswith("vllm/")


def test_error_no_vllm(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexec python3 -S -I \"$@\"\n")
    fake.chmod(0o755)
    r = cli("check", "--arch", "deepseek_v3", "--k", "3", env={"MTP_AUDIT_RUNTIME_PYTHON": str(fake)})
    _assert_one_line_error(r, "vLLM is not installed")


def test_error_timeout(runtime_py):
    _assert_one_line_error(cli("check", "-q", "--arch", "glm4_moe", "--k", "3", "--runner", "v1", "--timeout", "3"),
                           "did not finish within")
    _assert_one_line_error(cli("check", "--arch", "glm4_moe", "--k", "3", "--runner", "v1", "--timeout", "3"),
                           "did not finish within", quiet=False)


def test_autofix_validated_by_the_engine(tmp_path, runtime_py):
    """`mtp-audit fix --diff` on the installed vLLM, replayed by the runtime checker on the
    V2 runner as shipped (no forcing): Qwen3-Next now runs layer i on draft step i."""
    import sys

    site = subprocess.run([runtime_py, "-c", "import importlib.util as u; print(u.find_spec('vllm').submodule_search_locations[0])"],
                          capture_output=True, text=True, env={"PYTHONPATH": ""}).stdout.strip()
    root = Path(site).parent
    fix = subprocess.run(
        [sys.executable, "-m", "auditor.cli", "fix", str(root), "--diff", "--no-cache",
         "--file", "vllm/model_executor/models/qwen3_next_mtp.py"],
        capture_output=True, text=True, cwd=Path(__file__).parents[2],
    )
    assert fix.returncode == 0, fix.stderr
    assert fix.stdout.startswith("--- a/vllm/model_executor/models/qwen3_next_mtp.py")
    diff = tmp_path / "autofix.diff"
    diff.write_text(fix.stdout)
    r = cli("check", "--arch", "qwen3_next", "--k", "3", "--runner", "v2", "--patch", str(diff), "--format", "json")
    assert r.returncode == 0, r.stderr[-2000:]
    (run,) = json.loads(r.stdout)["runs"]
    assert (run["runner"], run["mode"]) == ("v2", "shipped")
    assert run["step_i_runs_layer_i"], run["layer_sequence"]
    assert sorted(set(run["layer_sequence"])) == [0, 1, 2]
    assert all(r["inner_spec_step_idx"] == r["step"] for r in run["steps"])
