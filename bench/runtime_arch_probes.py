"""The attempts behind docs/runtime-architectures.md for the MTP architectures that
`runtime synth` has no checkpoint for: start vLLM (the runtime environment's) with MTP
speculative decoding on a tiny config and random weights (`load_format="dummy"`: no
checkpoint, so the reason is the engine's, not a tensor name), generate 4 tokens, and print
the outcome: `ran`, or the exception type, message and innermost vLLM frame.

    .venv-runtime/bin/python bench/runtime_arch_probes.py [NAME ...]   (one engine per name)

Each name runs in its own process (one engine per process). Configs are as small as the
CPU kernels allow, with the fields each model's vLLM code reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
H, V = 128, 1024
BASE = dict(vocab_size=V, hidden_size=H, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2,
            head_dim=32, max_position_embeddings=4096, rms_norm_eps=1e-6, rope_theta=10000.0,
            tie_word_embeddings=False, torch_dtype="bfloat16", hidden_act="silu")
MLA = dict(num_key_value_heads=4, kv_lora_rank=512, q_lora_rank=64, qk_rope_head_dim=64, v_head_dim=32,
           qk_nope_head_dim=32, moe_intermediate_size=64, n_shared_experts=1, n_routed_experts=4,
           num_experts_per_tok=2, routed_scaling_factor=1.0, n_group=1, topk_group=1, first_k_dense_replace=1)
CONFIGS: dict[str, tuple[int, dict]] = {  # name: (K, config)
    "deepseek_v32": (2, BASE | MLA | dict(
        architectures=["DeepseekV32ForCausalLM"], model_type="deepseek_v32", num_hidden_layers=2,
        num_nextn_predict_layers=2, topk_method="noaux_tc", scoring_func="sigmoid", index_n_heads=4,
        index_head_dim=64, index_topk=64)),
    "longcat_flash": (1, dict(
        architectures=["LongcatFlashForCausalLM"], model_type="longcat_flash", vocab_size=V, hidden_size=H,
        num_layers=1, num_attention_heads=4, num_key_value_heads=4, ffn_hidden_size=256, q_lora_rank=64,
        kv_lora_rank=512, qk_nope_head_dim=32, qk_rope_head_dim=64, v_head_dim=32, head_dim=64, moe_topk=2,
        n_routed_experts=4, zero_expert_num=2, zero_expert_type="identity", expert_ffn_hidden_size=64,
        routed_scaling_factor=1.0, rms_norm_eps=1e-6, num_nextn_predict_layers=1, mla_scale_q_lora=True,
        mla_scale_kv_lora=True, tie_word_embeddings=False, torch_dtype="bfloat16", max_position_embeddings=4096)),
    "mimo_v2_flash": (1, BASE | dict(
        architectures=["MiMoV2FlashForCausalLM"], model_type="mimo_v2_flash", num_hidden_layers=2, head_dim=64,
        v_head_dim=32, moe_intermediate_size=64, n_routed_experts=4, num_experts_per_tok=2, n_group=1,
        topk_group=1, sliding_window=64, layer_types=["full_attention", "sliding_attention"],
        mlp_layer_types=["dense", "sparse"], hybrid_layer_pattern=[0, 0], layernorm_epsilon=1e-6,
        moe_layer_freq=[0, 1], swa_head_dim=64, swa_num_attention_heads=4, swa_num_key_value_heads=2,
        swa_v_head_dim=32, sliding_window_size=64, num_nextn_predict_layers=1)),
    "nemotron_h_moe_mtp": (1, dict(
        architectures=["NemotronHForCausalLM"], model_type="nemotron_h", vocab_size=V, hidden_size=H,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, layers_block_type=["mamba", "attention", "moe"],
        hybrid_override_pattern="M*E", intermediate_size=256, mlp_hidden_act="relu2", ssm_state_size=64,
        mamba_num_heads=4, mamba_head_dim=64, n_groups=1, conv_kernel=4, expand=2, chunk_size=64,
        n_routed_experts=4, n_shared_experts=1, moe_intermediate_size=64, moe_shared_expert_intermediate_size=64,
        num_experts_per_tok=2, num_nextn_predict_layers=1, mtp_hybrid_override_pattern="*E",
        mtp_layers_block_type=["attention", "moe"], tie_word_embeddings=False, torch_dtype="bfloat16",
        max_position_embeddings=4096)),
    "exaone4_5": (1, BASE | dict(
        architectures=["Exaone4_5_ForConditionalGeneration"], model_type="exaone4_5", num_nextn_predict_layers=1,
        text_config=BASE | dict(model_type="exaone4", num_hidden_layers=2, sliding_window=4096,
                                layer_types=["full_attention"] * 2))),
    "bailing_v2_5": (1, BASE | dict(
        architectures=["BailingMoeV2_5ForCausalLM"], model_type="bailing_hybrid", num_hidden_layers=2,
        num_nextn_predict_layers=1)),
}


def probe(name: str) -> dict:
    k, cfg = CONFIGS[name]
    d = Path(tempfile.mkdtemp(prefix=f"mtp-audit-probe-{name}-"))
    (d / "config.json").write_text(json.dumps(cfg))
    os.environ.update(VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_CPU_KVCACHE_SPACE="1", VLLM_LOGGING_LEVEL="ERROR",
                      VLLM_USE_V2_MODEL_RUNNER="0", HF_HUB_OFFLINE="1")
    from vllm import LLM, SamplingParams

    try:
        llm = LLM(model=str(d), skip_tokenizer_init=True, enforce_eager=True, load_format="dummy",
                  speculative_config={"method": "mtp", "num_speculative_tokens": k}, max_model_len=256,
                  max_num_seqs=2, enable_prefix_caching=False, dtype="bfloat16", seed=0)
        llm.generate([{"prompt_token_ids": [3, 17, 29, 101]}],
                     SamplingParams(max_tokens=4, temperature=0, ignore_eos=True, detokenize=False), use_tqdm=False)
        return {"name": name, "outcome": "ran"}
    except Exception as e:
        frames = traceback.extract_tb(e.__traceback__)
        in_vllm = [f for f in frames if f"{os.sep}vllm{os.sep}" in f.filename]
        f = (in_vllm or frames)[-1]
        path = f.filename[f.filename.rfind(f"{os.sep}vllm{os.sep}") + 1:] if in_vllm else f.filename
        return {"name": name, "outcome": "fails", "exception": type(e).__name__,
                "message": " ".join(str(e).split())[:400], "site": f"{path}:{f.lineno} in {f.name}"}


def main() -> None:
    names = sys.argv[1:] or list(CONFIGS)
    if len(names) == 1 and os.environ.get("MTP_AUDIT_PROBE_CHILD"):
        print("PROBE " + json.dumps(probe(names[0])), flush=True)
        os._exit(0)
    for n in names:
        r = subprocess.run([sys.executable, __file__, n], env={**os.environ, "MTP_AUDIT_PROBE_CHILD": "1",
                           "PYTHONPATH": str(HERE.parent / "runtime_check" / "stubs")},
                           capture_output=True, text=True, timeout=900)
        line = next((x for x in r.stdout.splitlines() if x.startswith("PROBE ")), None)
        print(line[6:] if line else json.dumps({"name": n, "outcome": "no result", "rc": r.returncode,
                                                 "stderr": r.stderr[-300:]}), flush=True)


if __name__ == "__main__":
    main()
