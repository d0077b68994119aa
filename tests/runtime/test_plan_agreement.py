"""The static plan agrees with the engine (issue 11 item 6, issue 14 item 5).

For every architecture the runtime checker synthesizes, `mtp-audit layers` is run statically
on the vLLM *installed in the runtime environment* (the package directory, never imported)
and its per-step forward layer, head layer, drafter and draft model class are compared, per
runner and mode, with what `runtime check` observed on the same engine (K=3, 3 MTP layers).
Shipped runs are compared with the plan's `steps`, forced runs (`--force-step-idx`) with its
`forced` view. The engine runs are the session-cached ones of conftest.run_check (shared with
the other runtime tests), so this module adds the runs no other test needs (about 9).

Two static inputs: `--all --layers 3` (each architecture's layer-count field, which must be
the field the synthetic checkpoint declares) and `--hf-config` with the synthetic target's
own config.json (vLLM's override code picks the draft architecture).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime_check import archs, plan_compare

from .conftest import SHARED_ARCHS, cli, static_layers

pytestmark = pytest.mark.runtime

# The five architectures whose K=3 / 3-layer runs conftest.run_check shares with the other
# runtime tests; every other architecture class is in test_runtime_sample.py, and all of them
# in bench/runtime_agreement.py (a K=3 / 3-layer run of each would not fit the CI budget).
ALL = SHARED_ARCHS
K = 3
N = 3  # conftest.run_check synthesizes K layers
CASES = [(a, r, m) for a in ALL for r in ("v1", "v2") for m in ("shipped", "forced")]
# The config fields the synthetic checkpoints size their MTP layers with.
LAYER_FIELDS = ("mtp_num_hidden_layers", "num_nextn_predict_layers", "n_predict")


def _layers(*args: str) -> Any:
    return static_layers(*args, k=K)


@pytest.fixture(scope="module")
def all_plans(vllm_package: str) -> dict[str, list[dict[str, Any]]]:
    doc = _layers(vllm_package, "--all", "--layers", str(N))
    out: dict[str, list[dict[str, Any]]] = {}
    for p in doc["plans"]:
        out.setdefault(p["architecture"], []).append(p)
    return out


_HF_PLANS: dict[str, list[dict[str, Any]]] = {}


@pytest.fixture(scope="module")
def hf_plans(vllm_package: str, tmp_path_factory: pytest.TempPathFactory):
    def go(key: str) -> list[dict[str, Any]]:
        if key not in _HF_PLANS:
            cfg = tmp_path_factory.mktemp(key) / "config.json"
            cfg.write_text(json.dumps(archs.ARCHS[key].build_config(N)))
            doc = _layers(vllm_package, "--hf-config", str(cfg))
            _HF_PLANS[key] = plan_compare.load_plans_doc(doc)
        return _HF_PLANS[key]

    return go


def _assert_agrees(plans: list[dict[str, Any]], run: dict[str, Any]) -> None:
    c = plan_compare.compare_run(plans, run)
    text = plan_compare.render_text(plan_compare.to_json([c]))
    assert c.agreement is plan_compare.Agreement.AGREE, text
    assert [s.step for s in c.steps] == list(range(K)), text


@pytest.mark.parametrize("arch,runner,mode", CASES)
def test_layers_plan_agrees_with_engine(all_plans, run_check, arch, runner, mode):
    a = archs.ARCHS[arch]
    plans = all_plans.get(a.draft_architecture)
    assert plans, f"`layers --all` has no plan for {a.draft_architecture}"
    cfg = a.build_config(N)
    (field,) = [f for f in LAYER_FIELDS if f in cfg]
    for p in plans:  # the static side sized the model with the field the checkpoint declares
        assert p["layer_count_field"] == field and p["num_mtp_layers"] == N
    (run,) = run_check(arch, forced=mode == "forced", runner=runner)["runs"]
    assert run["runner"] == runner and run["mode"] == mode
    _assert_agrees(plans, run)


@pytest.mark.parametrize("arch,runner,mode", CASES)
def test_hf_config_plan_agrees_with_engine(hf_plans, run_check, arch, runner, mode):
    plans = hf_plans(arch)
    assert {p["architecture"] for p in plans} == {archs.ARCHS[arch].draft_architecture}
    (run,) = run_check(arch, forced=mode == "forced", runner=runner)["runs"]
    _assert_agrees(plans, run)


def test_check_plan_reports_disagreement_and_exits_1(hf_plans, tmp_path, runtime_py):
    # Qwen3-Next's plan (layer 0 every step, no per-layer head) against a GLM-4 MoE run
    # (layers and heads 0,1,2): the comparison must say where they differ, and exit 1.
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"plans": hf_plans("qwen3_next")}))
    r = cli("check", "--arch", "glm4_moe", "--k", "3", "--runner", "v2", "--plan", str(plan), "--format", "json")
    assert r.returncode == 1, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["plan_disagrees"] is True
    (c,) = doc["plan_comparison"]
    assert (c["runner"], c["mode"], c["agreement"]) == ("v2", "shipped", "disagree")
    assert c["drafter"] == "agree" and c["model_class"] == "disagree"
    assert [s["forward"] for s in c["steps"]] == ["agree", "disagree", "disagree"]
    assert [s["head"] for s in c["steps"]] == ["disagree"] * 3
    assert [s["observed_forward"][0] for s in c["steps"]] == [[0], [1], [2]]
