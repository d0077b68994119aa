"""The environment every engine process starts with (runtime_check.envs.engine_process_env):
glibc hands out zeroed blocks, so the buffers vLLM's start-up profile run reads without
writing are the same on every machine (docs/runtime.md)."""

from __future__ import annotations

from pathlib import Path

from runtime_check import envs
from runtime_check.observer import harness


def test_engine_processes_start_with_zeroed_malloc_unless_the_caller_set_it(monkeypatch):
    monkeypatch.delenv("MALLOC_PERTURB_", raising=False)
    assert envs.engine_process_env()["MALLOC_PERTURB_"] == "255"
    assert envs.engine_process_env({"A": "1"}) == {"A": "1", "MALLOC_PERTURB_": "255"}
    monkeypatch.setenv("MALLOC_PERTURB_", "7")
    assert envs.engine_process_env()["MALLOC_PERTURB_"] == "7"


def test_vllm_serve_gets_it_too(monkeypatch):
    monkeypatch.delenv("MALLOC_PERTURB_", raising=False)
    cfg = harness.ServeConfig(model=Path("/nonexistent"), runner="v1")
    assert harness.serve_env("/usr/bin/python3", cfg)["MALLOC_PERTURB_"] == "255"
