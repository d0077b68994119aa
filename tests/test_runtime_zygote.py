"""The zygote's rules (runtime_check/zygote.py), without an engine: which runs may share one
import of vLLM, and the preloading of a finished run's modules."""

from __future__ import annotations

import sys

from runtime_check import zygote


def test_runs_that_must_not_share_the_import_are_refused():
    # A patch overlay replaces vLLM modules before their import: its own process.
    assert "own process" in zygote.refusal(["check", "--model", "/m", "--k", "2", "--patch", "/p.diff"], "v1")
    # The runner is fixed before the import (VLLM_USE_V2_MODEL_RUNNER, V2's Triton stub).
    assert zygote.refusal(["check", "--model", "/m", "--k", "2", "--runner", "v2"], "v1") == \
        "a v2 run cannot share a v1 zygote"
    assert zygote.refusal(["check", "--model", "/m", "--k", "2"], "v2") == "a v1 run cannot share a v2 zygote"
    assert zygote.refusal(["serve"], "v1") == "not a driver run: ['serve']"


def test_runs_of_the_zygote_runner_and_synth_are_accepted():
    assert zygote.refusal(["check", "--model", "/m", "--k", "2", "--runner", "v2"], "v2") is None
    assert zygote.refusal(["check", "--model", "/m", "--k", "2"], "v1") is None  # the driver's default
    assert zygote.refusal(["synth", "--arch", "glm4_moe", "--out", "/o"], "v2") is None


def test_preload_imports_new_modules_in_order_and_reports_failures():
    for name in ("colorsys", "this_module_does_not_exist_mtp_audit"):
        sys.modules.pop(name, None)
    n, failed = zygote.preload(["json", "colorsys", "this_module_does_not_exist_mtp_audit", "__main__"])
    assert n == 1 and "colorsys" in sys.modules  # json was there already; __main__ is never re-imported
    assert failed == ["this_module_does_not_exist_mtp_audit"]
    assert "this_module_does_not_exist_mtp_audit" not in sys.modules
