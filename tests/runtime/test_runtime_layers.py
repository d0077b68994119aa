"""A real vLLM engine (V1 runner), K=3, 3 MTP layers: which physical MTP layer runs at each
draft step. The V2 runner's runs are in test_runtime_v2.py."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.runtime

from .conftest import SHARED_ARCHS

ALL = SHARED_ARCHS


@pytest.mark.parametrize("arch", ALL)
def test_as_shipped_runs_layer0_only(run_check, arch):
    doc = run_check(arch)  # also proves the synthetic checkpoint loads in vLLM
    (run,) = doc["runs"]
    assert run["mode"] == "shipped" and run["k"] == 3 and run["num_mtp_layers"] == 3
    assert run["propose_calls"] >= 2
    steps = run["steps"]
    assert [r["step"] for r in steps[:3]] == [0, 1, 2]
    assert all(r["layers"] == [0] for r in steps)
    assert run["layer_calls"]["0"] == len(steps) and run["layer_calls"]["1"] == run["layer_calls"]["2"] == 0
    assert run["layer0_only"] and not run["step_i_runs_layer_i"]
    assert all(len(t) == 6 for t in run["generated_token_ids"])
    # On a CPU the registry's model inspection ran in the engine's process (driver.inspect_models_in_process)
    assert run["model_inspection"] == ("in-process" if run["device"] == "cpu" else "subprocess")
    # ... and the engine got a KV cache of the size the driver gives on a CPU, not 1 GiB
    assert run["kv_cache_memory_bytes"] == (64 << 20 if run["device"] == "cpu" else None)


@pytest.mark.parametrize("arch", ["deepseek_v3", "glm4_moe"])
def test_forced_step_reaches_each_layer(run_check, arch):
    (run,) = run_check(arch, forced=True)["runs"]
    assert run["step_i_runs_layer_i"]
    assert [r["layers"] for r in run["steps"][:3]] == [[0], [1], [2]]
    assert all(r["inner_spec_step_idx"] == r["step"] for r in run["steps"])
    assert run["layer_calls"]["0"] == run["layer_calls"]["1"] == run["layer_calls"]["2"] > 0


def test_forced_step_lost_in_qwen3_next_wrapper(run_check):
    (run,) = run_check("qwen3_next", forced=True)["runs"]
    assert run["layer0_only"]
    # The step reached the wrapper but not the predictor (it got its default).
    assert [r["wrapper_spec_step_idx"] for r in run["steps"][:3]] == [0, 1, 2]
    assert all(r["inner_received"] == "default" and r["inner_spec_step_idx"] == 0 for r in run["steps"])


def test_text_table(run_check):
    # The text of a forced run (the command's own text output is test_runtime_v2's README test).
    from runtime_check.cli import render_text

    out = render_text(run_check("glm4_moe", forced=True))
    assert "mode=forced" in out and "per-layer calls:" in out
    assert "step i runs layer i: yes" in out
