"""``layers --env NAME=VALUE`` (issue 18): the environment the server runs with is an input of
the engine's check of it (``env-validations``), run before any config is built.

What vLLM does, read from its source: 0.34.0's ``Platform.validate_environ`` (called by
``EngineArgs.create_engine_config`` first) raises ``ValueError("VLLM_USE_V2_MODEL_RUNNER=0 is no
longer supported: Model Runner V1 has been removed. Unset this variable.")`` for any value but
"1", which only logs that it is redundant; 0.33.0's version only checks that a ``VLLM_`` variable
is one ``vllm.envs`` knows, and raises for an unknown one only under ``hard_fail``
(``--fail-on-environ-validation``, not given here: unknown)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from auditor.common.errors import UsageError
from auditor.services.layers import parse_env

DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "num_hidden_layers": 61,
               "num_nextn_predict_layers": 1, "hidden_size": 7168, "vocab_size": 129280}


def test_the_environment_as_given_sorted():
    assert parse_env(["B=2", "A=x=y", "C="]) == (("A", "x=y"), ("B", "2"), ("C", ""))
    assert parse_env(["A=1", "A=1"]) == (("A", "1"),)


@pytest.mark.parametrize("values,fragment", [
    (["NOEQUALS"], "--env expects NAME=VALUE"),
    (["=1"], "--env expects NAME=VALUE"),
    (["A B=1"], "--env expects NAME=VALUE"),
    (["A=1", "A=2"], "given twice"),
])
def test_a_bad_variable_is_one_clear_error(values, fragment):
    with pytest.raises(UsageError, match=fragment):
        parse_env(values)


def _layers(tmp_path, release: str, *args: str) -> tuple[int, dict, str]:
    """``layers`` on one runner (its JSON: the plan), as ``{"plans": [plan]}``."""
    target = tmp_path / "config.json"
    target.write_text(json.dumps(DEEPSEEK_V3))
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "layers", "--release", release, "--hf-config", str(target),
                        "--k", "2", "--runner", "v2", "-f", "json", "-q", *args],
                       capture_output=True, text=True, env=dict(os.environ), timeout=600)
    doc = json.loads(r.stdout) if r.returncode in (0, 1) and r.stdout else {}
    return r.returncode, {"plans": [doc]} if doc else {}, r.stderr


@pytest.mark.release
def test_0_34_rejects_the_removed_runner_where_the_environment_asks_for_it(tmp_path):
    rc, doc, err = _layers(tmp_path, "0.34.0", "--env", "VLLM_USE_V2_MODEL_RUNNER=0")
    assert rc in (0, 1), err
    (plan,) = doc["plans"]
    assert plan["env"] == {"VLLM_USE_V2_MODEL_RUNNER": "0"} and plan["outcome"] == "rejected"
    first = plan["rejections"][0]
    assert first["path"] == "vllm/platforms/interface.py" and first["function"] == "Platform.validate_environ"
    assert "VLLM_USE_V2_MODEL_RUNNER={value} is no longer supported: Model Runner V1" in first["message"]  # as written
    assert len(plan["rejections"]) == 1  # one check, however many configured names locate it
    # "1" is accepted (a warning in vLLM); without --env nothing is assumed of the environment.
    for args in (("--env", "VLLM_USE_V2_MODEL_RUNNER=1"), ()):
        rc, doc, err = _layers(tmp_path, "0.34.0", *args)
        (plan,) = doc["plans"]
        assert plan["outcome"] == "plan" and [s["forward_layer"] for s in plan["steps"]] == [0, 0], (args, plan)
        assert ("env" in plan) == bool(args)


@pytest.mark.release
def test_0_33_takes_the_v1_switch_and_leaves_an_unknown_variable_to_hard_fail(tmp_path):
    rc, doc, err = _layers(tmp_path, "0.33.0", "--env", "VLLM_USE_V2_MODEL_RUNNER=0")
    (plan,) = doc["plans"]
    assert plan["outcome"] == "plan", plan["rejections"]
    rc, doc, err = _layers(tmp_path, "0.33.0", "--env", "VLLM_NO_SUCH_VARIABLE=1")
    (plan,) = doc["plans"]
    assert plan["outcome"] == "plan"
    assert any("validate_environ may reject this environment" in n and "Unknown vLLM environment variable" in n
               for n in plan["notes"]), plan["notes"]


def test_a_bad_env_option_exits_2_with_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "layers", "--release", "0.34.0", "--arch",
                        "DeepSeekMTPModel", "--k", "2", "--env", "NOEQUALS"],
                       capture_output=True, text=True, env=dict(os.environ), timeout=600)
    assert r.returncode == 2 and "--env expects NAME=VALUE" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
