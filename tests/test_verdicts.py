"""Verdict logic of the runtime checker on recorded runs (pure Python, no engine)."""

from __future__ import annotations

from runtime_check import verdicts


def run(mode, layers_per_step, proposer_mro=("vllm.v1.spec_decode.eagle.EagleProposer",
                                             "vllm.v1.spec_decode.llm_base_proposer.SpecDecodeBaseProposer")):
    steps = [{"propose": i // 3, "step": i % 3, "wrapper": "Qwen3NextMTP", "inner": "Qwen3NextMultiTokenPredictor",
              "wrapper_spec_step_idx": i % 3, "wrapper_received": "keyword", "inner_spec_step_idx": 0,
              "inner_received": "default", "layers": [layer]} for i, layer in enumerate(layers_per_step)]
    return {"arch": "qwen3_next", "mode": mode, "k": 3, "num_mtp_layers": 3, "steps": steps,
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


def test_without_a_forced_run_mtp001_is_not_decided():
    v = by_function(verdicts.judge(DOC, [run("shipped", [0] * 9)]))
    assert v["Qwen3NextMTP.forward"]["verdict"] == "NOT EXERCISED"
