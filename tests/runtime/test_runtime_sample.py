"""CI sample of the agreement matrix: one run per architecture class (dense, MoE, MLA, hybrid
linear-attention) compared with `mtp-audit layers` on the engine's own installed vLLM, plus
the two engine outcomes that are not a run (a rejected configuration, a draft model that
raises on step 1). Six engine starts; the full matrix is bench/runtime_agreement.py.

The plans are the static side's; each agreement test asserts that the comparison agrees,
so a wrong plan or a wrong observation fails here."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime_check import archs
from runtime_check.cli import render_text

from .conftest import cli, static_layers

pytestmark = pytest.mark.runtime

# (arch, class, runner, K, layers): every class, both runners, the two plan shapes (layer 0 on
# every step as V1's loops pass no step; step i -> layer i on V2's multi-module loop).
SAMPLE = [
    ("exaone_moe", "MoE", "v1", 2, 2),
    ("glm4_moe_lite", "MLA", "v2", 2, 2),
    ("qwen3_next", "hybrid linear-attention", "v2", 2, 2),
    # Dense MLP: Qwen3.5 dense (MiMo, the other dense one, disagreed on its head before the
    # routes work, D1 in bench/runtime/agreement-0.32.0.md; it agrees since; its V2 raise is below).
    ("qwen3_5", "dense", "v1", 2, 2),
]


_ALL_PLANS: dict[tuple[int, int], list[dict[str, Any]]] = {}


def _all_plans(vllm_package: str, k: int, n: int) -> list[dict[str, Any]]:
    """`layers --all` for (K, layers), asked once per module (the sample's cases share one)."""
    if (k, n) not in _ALL_PLANS:
        _ALL_PLANS[(k, n)] = static_layers(vllm_package, "--all", "--layers", str(n), k=k)["plans"]
    return _ALL_PLANS[(k, n)]


def _plan_file(vllm_package: str, key: str, k: int, n: int, tmp_path) -> str:
    want = archs.ARCHS[key].draft_architecture
    plans = [p for p in _all_plans(vllm_package, k, n) if p["architecture"] == want]
    assert plans, f"`layers --all` has no plan for {want}"
    path = tmp_path / f"plan-{key}.json"
    path.write_text(json.dumps({"plans": plans}))
    return str(path)


def _check(*args: str) -> tuple[int, dict[str, Any]]:
    r = cli("check", *args, "--format", "json")
    assert r.returncode in (0, 1), r.stderr[-3000:]
    # an engine run takes seconds to minutes: it says so on stderr when it starts and ends
    assert "mtp-audit: starting vLLM: check" in r.stderr and "vLLM run finished in" in r.stderr, r.stderr[-2000:]
    return r.returncode, json.loads(r.stdout)


@pytest.mark.parametrize("key,klass,runner,k,n", SAMPLE, ids=[s[1] for s in SAMPLE])
def test_sample_plan_agrees_with_engine(vllm_package, tmp_path, key, klass, runner, k, n):
    plan = _plan_file(vllm_package, key, k, n, tmp_path)
    rc, doc = _check("--arch", key, "--k", str(k), "--mtp-layers", str(n), "--runner", runner, "--plan", plan)
    (run,) = doc["runs"]
    (c,) = doc["plan_comparison"]
    assert run["outcome"] == "ran" and run["runner"] == runner and run["num_mtp_layers"] == n
    assert c["agreement"] == "agree" and rc == 0, json.dumps(c, indent=1)
    assert [s["step"] for s in c["steps"]] == list(range(k))


def test_rejected_configuration_is_an_outcome(runtime_py):
    # K=3 on a draft with 2 MTP layers: vLLM's speculative config refuses it (3 % 2 != 0).
    rc, doc = _check("--arch", "mimo", "--k", "3", "--mtp-layers", "2", "--runner", "v1")
    assert rc == 0
    (run,) = doc["runs"]
    assert run["outcome"] == "rejected" and run["stage"] == "start" and run["steps"] == []
    assert run["exception"] == "ValidationError"
    assert "num_speculative_tokens:3 must be divisible by n_predict=2" in run["message"]
    assert run["site"]["path"] == "vllm/config/speculative.py" and isinstance(run["site"]["line"], int)


def test_raising_draft_model_is_an_outcome(runtime_py):
    # MiMo's draft model asserts spec_step_idx == 0; V2's multi-module loop passes step 1.
    rc, doc = _check("--arch", "mimo", "--k", "2", "--mtp-layers", "2", "--runner", "v2")
    assert rc == 0
    assert ("outcome: raises AssertionError: mimo_mtp only support predict one token now "
            "(vllm/model_executor/models/mimo_mtp.py:") in render_text(doc)
    (run,) = doc["runs"]
    assert run["outcome"] == "raises" and run["stage"] == "generate"
    assert run["site"]["function"] == "forward" and run["site"]["path"].endswith("mimo_mtp.py")
    # Step 0 ran layer 0; step 1 reached the wrapper with spec_step_idx=1 and raised before a layer ran.
    assert [(s["step"], s["wrapper_spec_step_idx"], s["layers"]) for s in run["steps"][:2]] == [(0, 0, [0]), (1, 1, [])]
