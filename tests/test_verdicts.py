"""Verdict logic of the runtime checker on recorded runs (pure Python, no engine)."""

from __future__ import annotations

from runtime_check import verdicts


V1_MRO = ("vllm.v1.spec_decode.eagle.EagleProposer", "vllm.v1.spec_decode.llm_base_proposer.SpecDecodeBaseProposer")
V2_MRO = ("vllm.v1.worker.gpu.spec_decode.multi_module_mtp.speculator.MultiModuleMTPSpeculator",
          "vllm.v1.worker.gpu.spec_decode.speculator.DraftModelSpeculator")


def run(mode, layers_per_step, proposer_mro=V1_MRO, runner="v1", heads=None, logits_follow=True):
    """A recorded run: V1 shipped loops pass no step to the wrapper; V2's multi-module
    speculator and forced runs pass step i on draft step i."""
    passes = runner == "v2" or mode == "forced"
    steps = [{"propose": i // 3, "step": i % 3, "wrapper": "Qwen3NextMTP", "inner": "Qwen3NextMultiTokenPredictor",
              "wrapper_spec_step_idx": i % 3 if passes else None,
              "wrapper_received": ("forced" if mode == "forced" else "keyword") if passes else "absent",
              "inner_spec_step_idx": 0, "inner_received": "default", "layers": [layer],
              "logits_spec_step_idx": i % 3 if passes and logits_follow else None,
              "logits_received": "keyword" if passes and logits_follow else "absent",
              "head_layers": [] if heads is None else [heads[i]]}
             for i, layer in enumerate(layers_per_step)]
    return {"arch": "qwen3_next", "mode": mode, "runner": runner, "k": 3, "num_mtp_layers": 3, "steps": steps,
            "vllm_version": "0.32.0",
            "wrapper_class": "vllm.model_executor.models.qwen3_next_mtp.Qwen3NextMTP",
            "inner_class": "vllm.model_executor.models.qwen3_next_mtp.Qwen3NextMultiTokenPredictor",
            "proposer": proposer_mro[0], "proposer_mro": list(proposer_mro),
            "layer_sequence": list(layers_per_step)}


def finding(rule, function, path, cls="Qwen3NextMTP"):
    return {"rule": rule, "function": function, "path": path, "line": 1, "fingerprint": rule + function,
            "affected_classes": [{"path": "vllm/model_executor/models/qwen3_next_mtp.py", "name": cls}]}


DOC = {"findings": [
    finding("MTP001", "Qwen3NextMTP.forward", "vllm/model_executor/models/qwen3_next_mtp.py"),
    finding("MTP002", "SpecDecodeBaseProposer.propose", "vllm/v1/spec_decode/llm_base_proposer.py"),
    finding("MTP002", "StandaloneARSpeculator._multi_step_decode",
            "vllm/v1/worker/gpu/spec_decode/standalone_ar/speculator.py"),
    finding("MTP001", "DeepSeekMTP.forward", "vllm/model_executor/models/deepseek_mtp.py", cls="DeepSeekMTP"),
]}


def by_function(results):
    return {r["function"]: r for r in results}


def test_layer_zero_everywhere_confirms():
    v = by_function(verdicts.judge(DOC, [run("shipped", [0] * 9), run("forced", [0] * 9)]))
    assert v["Qwen3NextMTP.forward"]["verdict"] == "CONFIRMED"
    assert v["SpecDecodeBaseProposer.propose"]["verdict"] == "CONFIRMED"
    assert v["Qwen3NextMTP.forward"]["evidence"][4]["layers"] == [0]


def test_step_i_reaching_layer_i_refutes():
    v = by_function(verdicts.judge(DOC, [run("forced", [0, 1, 2] * 3)]))
    assert v["Qwen3NextMTP.forward"]["verdict"] == "REFUTED"


def test_a_loop_that_did_not_run_is_not_exercised():
    v = by_function(verdicts.judge(DOC, [run("shipped", [0] * 9)]))
    standalone = v["StandaloneARSpeculator._multi_step_decode"]
    assert standalone["verdict"] == "NOT EXERCISED" and "EagleProposer" in standalone["reason"]
    assert v["DeepSeekMTP.forward"]["verdict"] == "NOT EXERCISED"
    assert "--arch deepseek_v3" in v["DeepSeekMTP.forward"]["reason"]


def test_a_v1_shipped_run_does_not_decide_mtp001():
    # V1's loop passes no step: the wrapper's drop is not on its path.
    v = by_function(verdicts.judge(DOC, [run("shipped", [0] * 9)]))
    assert v["Qwen3NextMTP.forward"]["verdict"] == "NOT EXERCISED"
    assert "shipped run whose draft loop passes the step" in v["Qwen3NextMTP.forward"]["reason"]


def test_a_v2_shipped_run_decides_mtp001_before_a_forced_one():
    shipped = run("shipped", [0] * 9, V2_MRO, runner="v2")
    forced = run("forced", [0, 1, 2] * 3)  # would refute; the shipped loop wins
    v = by_function(verdicts.judge(DOC, [forced, shipped]))["Qwen3NextMTP.forward"]
    assert v["verdict"] == "CONFIRMED"
    assert (v["runner"], v["mode"]) == ("v2", "shipped")
    assert "qwen3_next v2 shipped K=3 layers=3 (vLLM 0.32.0)" in v["reason"]
    assert {(e["runner"], e["mode"]) for e in v["evidence"]} == {("v2", "shipped")}
    assert [e["wrapper_spec_step_idx"] for e in v["evidence"][:3]] == [0, 1, 2]


def test_a_v2_shipped_run_reaching_each_layer_refutes_mtp001():
    v = by_function(verdicts.judge(DOC, [run("shipped", [0, 1, 2] * 3, V2_MRO, runner="v2")]))
    assert v["Qwen3NextMTP.forward"]["verdict"] == "REFUTED"
    # The V1 loop did not run: its MTP002 stays undecided, naming the drafter that did.
    assert v["SpecDecodeBaseProposer.propose"]["verdict"] == "NOT EXERCISED"
    assert "MultiModuleMTPSpeculator" in v["SpecDecodeBaseProposer.propose"]["reason"]


def _mtp003():
    f = finding("MTP003", "DraftModelSpeculator.sample_draft", "vllm/v1/worker/gpu/spec_decode/speculator.py")
    f["trace"] = [{"function": "MultiModuleMTPSpeculator._generate_drafts", "line": 1, "note": "draft loop",
                   "path": "vllm/v1/worker/gpu/spec_decode/multi_module_mtp/speculator.py"}]
    return {"findings": [f]}


def test_mtp003_confirmed_when_the_logits_entry_misses_the_step():
    r = run("shipped", [0, 1, 2] * 3, V2_MRO, runner="v2", heads=[0] * 9, logits_follow=False)
    (v,) = verdicts.judge(_mtp003(), [r])
    assert v["verdict"] == "CONFIRMED" and v["runner"] == "v2"


def test_mtp003_refuted_when_heads_follow_the_layers():
    r = run("shipped", [0, 1, 2] * 3, V2_MRO, runner="v2", heads=[0, 1, 2] * 3)
    (v,) = verdicts.judge(_mtp003(), [r])
    assert v["verdict"] == "REFUTED"


def test_mtp003_not_exercised_by_another_drafter_or_a_forced_run():
    (v,) = verdicts.judge(_mtp003(), [run("shipped", [0] * 9), run("forced", [0, 1, 2] * 3)])
    assert v["verdict"] == "NOT EXERCISED" and "EagleProposer" in v["reason"]


def test_a_loop_is_judged_only_if_it_ran_a_draft_step():
    # The drafter's class owns both loops, but only propose's loop was on the stack of a draft step.
    doc = {"findings": [
        finding("MTP002", "SpecDecodeBaseProposer.propose", "vllm/v1/spec_decode/llm_base_proposer.py"),
        finding("MTP002", "SpecDecodeBaseProposer.dummy_run", "vllm/v1/spec_decode/llm_base_proposer.py")]}
    r = run("shipped", [0] * 9)
    r["draft_loop_frames"] = ["vllm.v1.spec_decode.llm_base_proposer.SpecDecodeBaseProposer.propose",
                              "vllm.v1.worker.gpu_model_runner.GPUModelRunner.propose_draft_token_ids"]
    v = by_function(verdicts.judge(doc, [r]))
    assert v["SpecDecodeBaseProposer.propose"]["verdict"] == "CONFIRMED"
    dummy = v["SpecDecodeBaseProposer.dummy_run"]
    assert dummy["verdict"] == "NOT EXERCISED" and "ran no draft step" in dummy["reason"]


# --------------------------------------------------------------------------- MTP007 (issue 12)
def compile_finding(cls="DeepSeekMTP"):
    f = finding("MTP007", cls, "vllm/model_executor/models/deepseek_mtp.py", cls=cls)
    return f | {"callee": "@support_torch_compile"}


def graph_finding():
    f = finding("MTP007", "GPUModelRunner.load_model", "vllm/v1/worker/gpu_model_runner.py", cls="DeepSeekMTP")
    return f | {"callee": "BreakableCUDAGraphWrapper"}


def ds_run(mode, layers, engine_mode, runner="v1", cudagraph_mode="NONE"):
    r = run(mode, layers, runner=runner)
    for s in r["steps"]:
        s["wrapper"], s["inner"] = "DeepSeekMTP", "DeepSeekMultiTokenPredictor"
    return r | {"arch": "deepseek_v3", "engine_mode": engine_mode, "observation": "in-graph-counters",
                "wrapper_class": "vllm.model_executor.models.deepseek_mtp.DeepSeekMTP",
                "inner_class": "vllm.model_executor.models.deepseek_mtp.DeepSeekMultiTokenPredictor",
                "compilation": {"mode": "DYNAMO_TRACE_ONCE" if engine_mode == "compiled" else "NONE",
                                "backend": "inductor", "cudagraph_mode": cudagraph_mode}}


def test_mtp007_compile_confirmed_when_compiled_stays_on_layer0_and_eager_follows():
    runs = [ds_run("forced", [0, 1, 2] * 3, "eager"), ds_run("forced", [0] * 9, "compiled")]
    (v,) = verdicts.judge({"findings": [compile_finding()]}, runs)
    assert v["verdict"] == "CONFIRMED"
    assert v["engine_mode"] == "compiled"
    assert "baked in at the first trace" in v["reason"]
    assert "deepseek_v3 v1 forced compiled K=3" in v["run"]


def test_mtp007_compile_refuted_when_compiled_follows_the_step():
    runs = [ds_run("forced", [0, 1, 2] * 3, "eager"), ds_run("forced", [0, 1, 2] * 3, "compiled")]
    (v,) = verdicts.judge({"findings": [compile_finding()]}, runs)
    assert v["verdict"] == "REFUTED"


def test_mtp007_needs_a_compiled_run_and_an_eager_twin():
    (v,) = verdicts.judge({"findings": [compile_finding()]}, [ds_run("forced", [0, 1, 2] * 3, "eager")])
    assert v["verdict"] == "NOT EXERCISED" and "--engine-mode compiled" in v["reason"]
    (v,) = verdicts.judge({"findings": [compile_finding()]}, [ds_run("forced", [0] * 9, "compiled")])
    assert v["verdict"] == "NOT EXERCISED" and "eager run beside" in v["reason"]


def test_mtp007_eager_on_layer0_cannot_tell_compilation_apart():
    runs = [ds_run("forced", [0] * 9, "eager"), ds_run("forced", [0] * 9, "compiled")]
    (v,) = verdicts.judge({"findings": [compile_finding()]}, runs)
    assert v["verdict"] == "NOT EXERCISED" and "cannot be told apart" in v["reason"]


def test_mtp007_graph_finding_is_not_exercised_without_cuda_graphs():
    runs = [ds_run("forced", [0, 1, 2] * 3, "eager"), ds_run("forced", [0] * 9, "compiled")]
    (v,) = verdicts.judge({"findings": [graph_finding()]}, runs)
    assert v["verdict"] == "NOT EXERCISED" and "gpu_check.sh" in v["reason"]
    runs.append(ds_run("forced", [0] * 9, "compiled", cudagraph_mode="FULL_AND_PIECEWISE"))
    (v,) = verdicts.judge({"findings": [graph_finding()]}, runs)
    assert v["verdict"] == "CONFIRMED"


def test_compiled_runs_do_not_decide_mtp001():
    # A compiled run on layer 0 may be MTP007's freezing: MTP001 is judged by eager runs only.
    f = finding("MTP001", "DeepSeekMTP.forward", "vllm/model_executor/models/deepseek_mtp.py", cls="DeepSeekMTP")
    runs = [ds_run("forced", [0, 1, 2] * 3, "eager"), ds_run("forced", [0] * 9, "compiled")]
    (v,) = verdicts.judge({"findings": [f]}, runs)
    assert v["verdict"] == "REFUTED" and v["engine_mode"] == "eager"
