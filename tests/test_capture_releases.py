"""Issue 12 on real releases: what the capture/compile analysis and MTP007 say, checked
against vLLM's code read by hand (file:line in each test)."""

from __future__ import annotations

import pytest
from scan_helpers import by_rule, scan_release

from auditor.analyses import CaptureProvider, KeyKind
from auditor.model.findings import Finding

pytestmark = pytest.mark.release

RUNNER = "vllm/v1/worker/gpu_model_runner.py"
MULTI_MODULE = "vllm/v1/worker/gpu/spec_decode/multi_module_mtp/speculator.py"


def _graph_findings(version: str) -> list[Finding]:
    return [f for f in by_rule(scan_release(version), "MTP007") if "Wrapper" in f.callee]


def _capture(version: str) -> CaptureProvider:
    scan = scan_release(version)
    assert scan.analysis is not None
    return scan.analysis.get(CaptureProvider)


# GPUModelRunner.load_model wraps the drafter's model in BreakableCUDAGraphWrapper with no
# key_fn when breakable graphs are on (0.26.0 :5402, 0.30.0 :5472, 0.33.0 :5144), and
# Step3p5MTPProposer.propose passes spec_step_idx=token_index + 1 to self.model in its
# draft loop (step3p5.py).
@pytest.mark.parametrize("version,line", [("0.26.0", 5402), ("0.30.0", 5472), ("0.33.0", 5144)])
def test_v1_drafter_graph_wrapper_without_step_key(version: str, line: int) -> None:
    found = [f for f in _graph_findings(version) if f.path == RUNNER]
    assert len(found) == 1, found
    f = found[0]
    assert (f.line, f.function, f.callee) == (line, "GPUModelRunner.load_model", "BreakableCUDAGraphWrapper")
    assert f.severity.value == "warning"  # gated by the switch
    assert f.message.startswith("drafter.model is wrapped in BreakableCUDAGraphWrapper (GPUModelRunner.load_model)")
    assert "stored in drafter.model" in f.message
    assert "Step3p5MTPProposer.propose passes a per-step spec_step_idx through self.model" in f.message
    assert " and is_breakable_cudagraph_enabled() [= bool(envs.VLLM_USE_BREAKABLE_CUDAGRAPH)]" in f.message
    assert "cudagraph_mode != CUDAGraphMode.NONE" in f.message
    # load_model returns early under stock torch.compile, above the installation.
    assert "reached only when self.vllm_config.compilation_config.mode != CompilationMode.STOCK_TORCH_COMPILE" in f.message
    assert f.trace[0].path == RUNNER and f.trace[0].line == line
    assert f.trace[1].path == "vllm/compilation/breakable_cudagraph.py"
    assert f.trace[-1].note.startswith("selects self.")
    # Routes (issue 18): V1 builds Step3p5MTPProposer only for draft model type step3p5_mtp, which
    # the override family of DeepSeek never writes (it writes deepseek_mtp): not paired.
    assert "DeepSeekMTP" not in {c.name for c in f.affected_classes}


def test_v1_drafter_wrapper_key_on_0_33_0() -> None:
    cap = _capture("0.33.0")
    wrappers = {w.name: w for w in cap.wrappers().values()}
    # breakable_cudagraph.py: key = batch_descriptor, plus self.key_fn(*args, **kwargs)
    # when one is given; cuda_graph.py: concrete_cudagraph_entries[batch_descriptor].
    assert wrappers["BreakableCUDAGraphWrapper"].key_kind is KeyKind.KEY_FN
    assert wrappers["BreakableCUDAGraphWrapper"].key_fn_param == "key_fn"
    assert wrappers["CUDAGraphWrapper"].key_kind is KeyKind.BATCH
    (drafter,) = [i for i in cap.installations() if i.site[0] == RUNNER and i.slot == ("drafter", "model")]
    assert drafter.key_fn is None and drafter.key_includes == ()


# multi_module_mtp/speculator.py: capture() calls
#   0.33.0 :125  init_breakable_cg_runner(self.model, key_fn=lambda **kwargs: kwargs["spec_step_idx"] % num_layers)
#   0.30.0 :120  init_breakable_cg_runner(self.model)
# and _run_model hands model_inputs (with spec_step_idx) to run_pw_graph, which calls
# self.breakable_cg_runner(**model_inputs) (gpu/cudagraph_utils.py).
def test_multi_module_speculator_keyed_runner_is_clean_on_0_33_0() -> None:
    assert [f for f in by_rule(scan_release("0.33.0"), "MTP007") if f.path == MULTI_MODULE] == []
    (keyed,) = [i for i in _capture("0.33.0").installations() if i.site[0] == MULTI_MODULE]
    assert (keyed.line, keyed.slot) == (125, ("cudagraph_manager", "breakable_cg_runner"))
    assert keyed.key_fn == 'lambda **kwargs: kwargs["spec_step_idx"] % num_layers'
    assert keyed.key_includes == ("spec_step_idx",)
    assert keyed.via[-1].function == "CudaGraphManager.init_breakable_cg_runner"


def test_multi_module_speculator_unkeyed_runner_on_0_30_0() -> None:
    found = [f for f in _graph_findings("0.30.0") if f.path == MULTI_MODULE]
    assert len(found) == 1, found
    f = found[0]
    assert (f.line, f.function) == (120, "MultiModuleMTPSpeculator.capture")
    assert "stored in cudagraph_manager.breakable_cg_runner" in f.message
    assert "MultiModuleMTPSpeculator._generate_drafts passes a per-step spec_step_idx" in f.message
    assert "reached only when self.cudagraph_manager.use_breakable_cg [= is_breakable_cudagraph_enabled()" in f.message


@pytest.mark.parametrize("version", ["0.18.0", "0.22.1"])
def test_no_drafter_graph_wrapper_before_0_26(version: str) -> None:
    assert _graph_findings(version) == []


def test_whole_loop_capture_of_the_multi_module_speculator_0_33_0() -> None:
    # capture() hands self._generate_drafts (its draft loop, :426) to
    # SpeculatorCudaGraphManager.capture, which captures it under torch.cuda.graph.
    (lc,) = [c for c in _capture("0.33.0").loop_captures() if c.site[0] == MULTI_MODULE]
    assert lc.captured == (MULTI_MODULE, "MultiModuleMTPSpeculator._generate_drafts")
    assert (lc.line, lc.loop_line) == (129, 426)


def test_compiled_mtp_forward_0_33_0() -> None:
    # deepseek_mtp.py:239 @support_torch_compile on DeepSeekMTP, whose forward passes
    # spec_step_idx to DeepSeekMultiTokenPredictor.forward (selects self.layers[...]).
    found = [f for f in by_rule(scan_release("0.33.0"), "MTP007") if f.function == "DeepSeekMTP"]
    assert len(found) == 1
    f = found[0]
    assert (f.path, f.line, f.callee) == ("vllm/model_executor/models/deepseek_mtp.py", 239, "@support_torch_compile")
    assert "not a dynamic argument (inferred from tensor-typed parameters)" in f.message
    assert "compute_logits is not compiled and still selects by step i" in f.message
