"""Tiny synthetic MTP checkpoints: configs and tensor layouts, per architecture.

Pure Python (no torch): the driver turns the (name, shape) lists into random tensors.
Tensor names follow the Hugging Face checkpoints that vLLM's loaders read (the names
vLLM's ``load_weights`` maps, not vLLM's fused parameter names).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

# Small, but within the CPU kernels' limits: attention head_dim >= 32 and the CPU
# gated-delta-net kernel's linear head dims of 64.
H = 128  # hidden size
V = 1024  # vocab
I_DENSE = 256
I_MOE = 64
N_EXPERTS = 4
TOPK = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 32
LIN_K_HEADS = 2
LIN_V_HEADS = 2
LIN_K_DIM = 64
LIN_V_DIM = 64
CONV_K = 4

Tensors = list[tuple[str, tuple[int, ...]]]


@dataclass(frozen=True)
class Arch:
    key: str
    title: str
    target_architecture: str
    # Class names of the draft model vLLM builds for this target (wrapper, inner predictor).
    draft_architecture: str
    model_classes: tuple[str, ...]
    build_config: Callable[[int], dict]
    build_tensors: Callable[[dict], Tensors]
    aliases: tuple[str, ...] = field(default_factory=tuple)
    # The config class of a model whose model_type neither transformers nor vLLM knows (its
    # checkpoints ship it as remote code): (class name, model_type). synth writes it as
    # REMOTE_CONFIG_FILE, a plain PretrainedConfig subclass, and points auto_map at it.
    remote_config: tuple[str, str] | None = None


REMOTE_CONFIG_FILE = "configuration_mtp_audit.py"


def remote_config_source(class_name: str, model_type: str) -> str:
    """The whole remote-code config file synth writes: no logic beyond PretrainedConfig. The
    driver trusts remote code only for a model directory whose file is exactly this text."""
    return ("# Written by mtp-audit runtime synth: a config class for a synthetic checkpoint.\n"
            "from transformers import PretrainedConfig\n\n\n"
            f"class {class_name}(PretrainedConfig):\n"
            f"    model_type = {model_type!r}\n")


def _dense_mlp(p: str, inter: int = I_DENSE) -> Tensors:
    return [(f"{p}.gate_proj.weight", (inter, H)), (f"{p}.up_proj.weight", (inter, H)),
            (f"{p}.down_proj.weight", (H, inter))]


def _experts(p: str) -> Tensors:
    out: Tensors = []
    for e in range(N_EXPERTS):
        out += _dense_mlp(f"{p}.experts.{e}", I_MOE)
    return out


def _qwen_moe(p: str) -> Tensors:
    return ([(f"{p}.gate.weight", (N_EXPERTS, H))] + _experts(p)
            + _dense_mlp(f"{p}.shared_expert", I_MOE) + [(f"{p}.shared_expert_gate.weight", (1, H))])


def _ds_moe(p: str) -> Tensors:
    return ([(f"{p}.gate.weight", (N_EXPERTS, H)), (f"{p}.gate.e_score_correction_bias", (N_EXPERTS,))]
            + _experts(p) + _dense_mlp(f"{p}.shared_experts", I_MOE))


def _norms(p: str) -> Tensors:
    return [(f"{p}.input_layernorm.weight", (H,)), (f"{p}.post_attention_layernorm.weight", (H,))]


# ---------------------------------------------------------------- Qwen3-Next / Qwen3.5
# 3 linear-attention layers + 1 full-attention layer: with 3 full-attention MTP layers the
# full-attention bucket has 4 layers, the linear one 3 (< 1.5x), so vLLM makes one KV-cache
# group of 4 per type and every MTP layer lands in the same group (the drafter requires it).
QWEN_LAYER_TYPES = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]


def _qwen_gated_attn(p: str) -> Tensors:
    return [(f"{p}.q_proj.weight", (HEADS * HEAD_DIM * 2, H)),  # query + output gate
            (f"{p}.k_proj.weight", (KV_HEADS * HEAD_DIM, H)),
            (f"{p}.v_proj.weight", (KV_HEADS * HEAD_DIM, H)),
            (f"{p}.o_proj.weight", (H, HEADS * HEAD_DIM)),
            (f"{p}.q_norm.weight", (HEAD_DIM,)), (f"{p}.k_norm.weight", (HEAD_DIM,))]


def _gdn(p: str, fused: bool) -> Tensors:
    kd, vd = LIN_K_HEADS * LIN_K_DIM, LIN_V_HEADS * LIN_V_DIM
    if fused:  # Qwen3-Next ships the projections fused
        proj = [(f"{p}.in_proj_qkvz.weight", (2 * kd + 2 * vd, H)),
                (f"{p}.in_proj_ba.weight", (2 * LIN_V_HEADS, H))]
    else:  # Qwen3.5 ships them separately
        proj = [(f"{p}.in_proj_qkv.weight", (2 * kd + vd, H)), (f"{p}.in_proj_z.weight", (vd, H)),
                (f"{p}.in_proj_b.weight", (LIN_V_HEADS, H)), (f"{p}.in_proj_a.weight", (LIN_V_HEADS, H))]
    return proj + [(f"{p}.conv1d.weight", (2 * kd + vd, 1, CONV_K)),
                   (f"{p}.A_log", (LIN_V_HEADS,)), (f"{p}.dt_bias", (LIN_V_HEADS,)),
                   (f"{p}.norm.weight", (LIN_V_DIM,)), (f"{p}.out_proj.weight", (H, vd))]


def _qwen_common_config(n_mtp: int) -> dict:
    return {
        "vocab_size": V, "hidden_size": H, "num_hidden_layers": len(QWEN_LAYER_TYPES),
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
        "hidden_act": "silu", "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "partial_rotary_factor": 0.25, "attention_bias": False,
        "attn_output_gate": True, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "layer_types": list(QWEN_LAYER_TYPES), "full_attention_interval": 4,
        "linear_conv_kernel_dim": CONV_K, "linear_key_head_dim": LIN_K_DIM,
        "linear_value_head_dim": LIN_V_DIM, "linear_num_key_heads": LIN_K_HEADS,
        "linear_num_value_heads": LIN_V_HEADS,
    }


def _qwen_moe_config() -> dict:
    return {"num_experts": N_EXPERTS, "num_experts_per_tok": TOPK, "moe_intermediate_size": I_MOE,
            "shared_expert_intermediate_size": I_MOE, "decoder_sparse_step": 1,
            "mlp_only_layers": [], "norm_topk_prob": True, "intermediate_size": I_DENSE}


def _qwen_tensors(cfg: dict, *, moe: bool, fused_gdn: bool, n_mtp: int) -> Tensors:
    out: Tensors = [("model.embed_tokens.weight", (V, H)), ("model.norm.weight", (H,)),
                    ("lm_head.weight", (V, H))]
    mlp = _qwen_moe if moe else _dense_mlp
    for i, kind in enumerate(QWEN_LAYER_TYPES):
        p = f"model.layers.{i}"
        out += _norms(p) + mlp(f"{p}.mlp")
        out += _gdn(f"{p}.linear_attn", fused_gdn) if kind == "linear_attention" else _qwen_gated_attn(f"{p}.self_attn")
    out += [("mtp.fc.weight", (H, 2 * H)), ("mtp.norm.weight", (H,)),
            ("mtp.pre_fc_norm_hidden.weight", (H,)), ("mtp.pre_fc_norm_embedding.weight", (H,))]
    for k in range(n_mtp):
        p = f"mtp.layers.{k}"
        out += _norms(p) + _qwen_gated_attn(f"{p}.self_attn") + mlp(f"{p}.mlp")
    return out


def qwen3_next_config(n: int) -> dict:
    c = _qwen_common_config(n) | _qwen_moe_config()
    c.update(architectures=["Qwen3NextForCausalLM"], model_type="qwen3_next", num_nextn_predict_layers=n)
    return c


def qwen3_5_config(n: int) -> dict:
    c = _qwen_common_config(n)
    c.update(architectures=["Qwen3_5ForCausalLM"], model_type="qwen3_5_text",
             intermediate_size=I_DENSE, mtp_num_hidden_layers=n)
    return c


def qwen3_5_moe_config(n: int) -> dict:
    c = _qwen_common_config(n) | _qwen_moe_config()
    c.update(architectures=["Qwen3_5MoeForCausalLM"], model_type="qwen3_5_moe_text", mtp_num_hidden_layers=n)
    return c


# ---------------------------------------------------------------- DeepSeek-V3 / GLM-4 MoE
Q_LORA = 64
KV_LORA = 512  # the CPU MLA decode kernel only takes kv_lora_rank + rope = 576
ROPE_D = 64
NOPE_D = 32
V_D = 32
TARGET_LAYERS = 2  # layer 0 dense (first_k_dense_replace=1), layer 1 MoE


def _mla(p: str) -> Tensors:
    return [(f"{p}.q_a_proj.weight", (Q_LORA, H)), (f"{p}.q_a_layernorm.weight", (Q_LORA,)),
            (f"{p}.q_b_proj.weight", (HEADS * (NOPE_D + ROPE_D), Q_LORA)),
            (f"{p}.kv_a_proj_with_mqa.weight", (KV_LORA + ROPE_D, H)),
            (f"{p}.kv_a_layernorm.weight", (KV_LORA,)),
            (f"{p}.kv_b_proj.weight", (HEADS * (NOPE_D + V_D), KV_LORA)),
            (f"{p}.o_proj.weight", (H, HEADS * V_D))]


def _glm_attn(p: str) -> Tensors:
    return [(f"{p}.q_proj.weight", (HEADS * HEAD_DIM, H)), (f"{p}.q_proj.bias", (HEADS * HEAD_DIM,)),
            (f"{p}.k_proj.weight", (KV_HEADS * HEAD_DIM, H)), (f"{p}.k_proj.bias", (KV_HEADS * HEAD_DIM,)),
            (f"{p}.v_proj.weight", (KV_HEADS * HEAD_DIM, H)), (f"{p}.v_proj.bias", (KV_HEADS * HEAD_DIM,)),
            (f"{p}.o_proj.weight", (H, HEADS * HEAD_DIM))]


def _ds_style_tensors(cfg: dict, attn: Callable[[str], Tensors]) -> Tensors:
    n_mtp = cfg["num_nextn_predict_layers"]
    out: Tensors = [("model.embed_tokens.weight", (V, H)), ("model.norm.weight", (H,)),
                    ("lm_head.weight", (V, H))]
    for i in range(TARGET_LAYERS + n_mtp):
        p = f"model.layers.{i}"
        out += _norms(p) + attn(f"{p}.self_attn")
        out += _dense_mlp(f"{p}.mlp") if i < cfg["first_k_dense_replace"] else _ds_moe(f"{p}.mlp")
        if i >= TARGET_LAYERS:  # MTP layer: its own projections, norms, head and embedding copy
            out += [(f"{p}.enorm.weight", (H,)), (f"{p}.hnorm.weight", (H,)),
                    (f"{p}.eh_proj.weight", (H, 2 * H)), (f"{p}.shared_head.norm.weight", (H,)),
                    (f"{p}.shared_head.head.weight", (V, H)), (f"{p}.embed_tokens.weight", (V, H))]
    return out


def _ds_common(n: int) -> dict:
    return {
        "vocab_size": V, "hidden_size": H, "intermediate_size": I_DENSE, "moe_intermediate_size": I_MOE,
        "num_hidden_layers": TARGET_LAYERS, "num_nextn_predict_layers": n,
        "num_attention_heads": HEADS, "n_shared_experts": 1, "n_routed_experts": N_EXPERTS,
        "num_experts_per_tok": TOPK, "routed_scaling_factor": 1.0, "n_group": 1, "topk_group": 1,
        "first_k_dense_replace": 1, "norm_topk_prob": True, "hidden_act": "silu",
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "attention_bias": False,
    }


def deepseek_v3_config(n: int) -> dict:
    c = _ds_common(n)
    c.update(architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
             num_key_value_heads=HEADS, q_lora_rank=Q_LORA, kv_lora_rank=KV_LORA,
             qk_rope_head_dim=ROPE_D, qk_nope_head_dim=NOPE_D, v_head_dim=V_D,
             topk_method="noaux_tc", scoring_func="sigmoid", moe_layer_freq=1, rope_scaling=None)
    return c


def glm4_moe_config(n: int) -> dict:
    c = _ds_common(n)
    c.update(architectures=["Glm4MoeForCausalLM"], model_type="glm4_moe", num_key_value_heads=KV_HEADS,
             head_dim=HEAD_DIM, partial_rotary_factor=0.5, attention_bias=True, use_qk_norm=False)
    return c


# ---------------------------------------------------------------- MiMo (Qwen2 target)
# MiMo's checkpoint keeps its MTP layers 0-indexed under `model.mtp_layers.{i}` with the
# transformer block's tensors at the layer's own level (vLLM maps them into `.mtp_block.`).
MIMO_TARGET_LAYERS = 2


def _qwen2_attn(p: str) -> Tensors:
    return [(f"{p}.q_proj.weight", (HEADS * HEAD_DIM, H)), (f"{p}.q_proj.bias", (HEADS * HEAD_DIM,)),
            (f"{p}.k_proj.weight", (KV_HEADS * HEAD_DIM, H)), (f"{p}.k_proj.bias", (KV_HEADS * HEAD_DIM,)),
            (f"{p}.v_proj.weight", (KV_HEADS * HEAD_DIM, H)), (f"{p}.v_proj.bias", (KV_HEADS * HEAD_DIM,)),
            (f"{p}.o_proj.weight", (H, HEADS * HEAD_DIM))]


def _dense_common() -> dict:
    return {"vocab_size": V, "hidden_size": H, "intermediate_size": I_DENSE,
            "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
            "hidden_act": "silu", "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def mimo_config(n: int) -> dict:
    c = _dense_common()
    # MiMo's own model_type needs remote code; its config is Qwen2's plus the MTP count, and
    # vLLM picks the MTP draft by the architecture name.
    # At least as many target layers as MTP layers, as in every real checkpoint: MiMo's loader
    # maps `model.mtp_layers.{i}.` to `{i + num_hidden_layers}` for every i < n, one prefix after
    # another (WeightsMapper, models/utils.py), so with fewer target layers than MTP layers
    # layer 0's weights are mapped twice (0 -> 2 -> 4) and a layer never loads.
    c.update(architectures=["MiMoForCausalLM"], model_type="qwen2", num_hidden_layers=max(MIMO_TARGET_LAYERS, n),
             num_nextn_predict_layers=n, use_sliding_window=False)
    return c


def _mimo_tensors(cfg: dict) -> Tensors:
    out: Tensors = [("model.embed_tokens.weight", (V, H)), ("model.norm.weight", (H,)),
                    ("lm_head.weight", (V, H))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}"
        out += _norms(p) + _qwen2_attn(f"{p}.self_attn") + _dense_mlp(f"{p}.mlp")
    for k in range(cfg["num_nextn_predict_layers"]):
        p = f"model.mtp_layers.{k}"
        out += [(f"{p}.token_layernorm.weight", (H,)), (f"{p}.hidden_layernorm.weight", (H,)),
                (f"{p}.input_proj.weight", (H, 2 * H)), (f"{p}.final_layernorm.weight", (H,))]
        out += _norms(p) + _qwen2_attn(f"{p}.self_attn") + _dense_mlp(f"{p}.mlp")
    return out


# ---------------------------------------------------------------- ERNIE 4.5 MoE
# The checkpoint has one MTP block, flat: `model.mtp_{emb_norm,hidden_norm,linear_proj,block}.0`.
ERNIE_TARGET_LAYERS = 2  # layer 0 dense, layer 1 MoE (moe_layer_start_index=1)


def _llama_attn(p: str) -> Tensors:
    return [(f"{p}.q_proj.weight", (HEADS * HEAD_DIM, H)), (f"{p}.k_proj.weight", (KV_HEADS * HEAD_DIM, H)),
            (f"{p}.v_proj.weight", (KV_HEADS * HEAD_DIM, H)), (f"{p}.o_proj.weight", (H, HEADS * HEAD_DIM))]


def ernie_config(n: int) -> dict:
    c = _dense_common()
    c.update(architectures=["Ernie4_5_MoeForCausalLM"], model_type="ernie4_5_moe",
             num_hidden_layers=ERNIE_TARGET_LAYERS, num_nextn_predict_layers=n, use_bias=False,
             moe_intermediate_size=I_MOE, moe_k=TOPK, moe_num_experts=N_EXPERTS, moe_num_shared_experts=1,
             moe_layer_start_index=1, moe_layer_end_index=ERNIE_TARGET_LAYERS - 1, moe_layer_interval=1)
    return c


def _ernie_tensors(cfg: dict) -> Tensors:
    out: Tensors = [("model.embed_tokens.weight", (V, H)), ("model.norm.weight", (H,)),
                    ("lm_head.weight", (V, H))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}"
        out += _norms(p) + _llama_attn(f"{p}.self_attn")
        if i < cfg["moe_layer_start_index"]:
            out += _dense_mlp(f"{p}.mlp")
        else:
            out += ([(f"{p}.mlp.gate.weight", (N_EXPERTS, H)),
                     (f"{p}.mlp.moe_statics.e_score_correction_bias", (1, N_EXPERTS))]
                    + _experts(f"{p}.mlp") + _dense_mlp(f"{p}.mlp.shared_experts", I_MOE))
    # vLLM's ERNIE loader maps exactly one flat MTP block (`.0.`), whatever the config says.
    out += [("model.mtp_emb_norm.0.weight", (H,)), ("model.mtp_hidden_norm.0.weight", (H,)),
            ("model.mtp_linear_proj.0.weight", (H, 2 * H))]
    out += (_norms("model.mtp_block.0") + _llama_attn("model.mtp_block.0.self_attn")
            + _dense_mlp("model.mtp_block.0.mlp"))
    return out


# ---------------------------------------------------------------- GLM-4 MoE Lite (MLA)
def glm4_moe_lite_config(n: int) -> dict:
    c = _ds_common(n)
    c.update(architectures=["Glm4MoeLiteForCausalLM"], model_type="glm4_moe_lite",
             num_key_value_heads=HEADS, q_lora_rank=Q_LORA, kv_lora_rank=KV_LORA,
             qk_rope_head_dim=ROPE_D, qk_nope_head_dim=NOPE_D, v_head_dim=V_D,
             mlp_layer_types=["dense"] + ["sparse"] * (TARGET_LAYERS - 1 + n))
    return c



# ---------------------------------------------------------------- EXAONE MoE
# Qwen3-Next-style MTP block (`mtp.fc`, `mtp.pre_fc_norm_*`, `mtp.layers.{k}` with dense MLPs).
# Every layer full attention: the drafter needs its layers in one KV-cache group, and a
# sliding-window target layer would make a second group.
EXAONE_TARGET_LAYERS = 2


def _qk_norm_attn(p: str) -> Tensors:
    return _llama_attn(p) + [(f"{p}.q_norm.weight", (HEAD_DIM,)), (f"{p}.k_norm.weight", (HEAD_DIM,))]


def exaone_moe_config(n: int) -> dict:
    # At least as many target layers as MTP layers, as in every real checkpoint: an MTP layer
    # reads `mlp_layer_types[k]` with its own index k (exaone_moe.py, ExaoneMoeDecoderLayer).
    t = max(EXAONE_TARGET_LAYERS, n)
    c = _dense_common()
    c.update(architectures=["ExaoneMoeForCausalLM"], model_type="exaone_moe",
             num_hidden_layers=t, num_nextn_predict_layers=n,
             layer_types=["full_attention"] * t, mtp_layer_types=["full_attention"] * n,
             sliding_window=4096, mlp_layer_types=["dense"] + ["sparse"] * (t - 1),
             first_k_dense_replace=1, moe_intermediate_size=I_MOE, num_experts=N_EXPERTS,
             num_experts_per_tok=TOPK, num_shared_experts=1, norm_topk_prob=True,
             routed_scaling_factor=1.0, n_group=1, topk_group=1)
    return c


def _exaone_moe_tensors(cfg: dict) -> Tensors:
    out: Tensors = [("model.embed_tokens.weight", (V, H)), ("model.norm.weight", (H,)),
                    ("lm_head.weight", (V, H))]
    for i, kind in enumerate(cfg["mlp_layer_types"]):
        p = f"model.layers.{i}"
        out += _norms(p) + _qk_norm_attn(f"{p}.self_attn")
        if kind == "dense":
            out += _dense_mlp(f"{p}.mlp")
        else:
            out += ([(f"{p}.mlp.gate.weight", (N_EXPERTS, H)), (f"{p}.mlp.e_score_correction_bias", (N_EXPERTS,))]
                    + _experts(f"{p}.mlp") + _dense_mlp(f"{p}.mlp.shared_experts", I_MOE))
    out += [("mtp.fc.weight", (H, 2 * H)), ("mtp.norm.weight", (H,)),
            ("mtp.pre_fc_norm_hidden.weight", (H,)), ("mtp.pre_fc_norm_embedding.weight", (H,))]
    for k in range(cfg["num_nextn_predict_layers"]):
        p = f"mtp.layers.{k}"
        out += _norms(p) + _qk_norm_attn(f"{p}.self_attn") + _dense_mlp(f"{p}.mlp")
    return out



# ---------------------------------------------------------------- Nemotron-H (Mamba-2 hybrid)
# Target: Mamba-2, attention, MLP layers (`backbone.layers.{i}.mixer`); MTP: one attention
# block under `mtp.layers.0` (vLLM's Nemotron-H MTP takes exactly one MTP layer, and of the
# MTP block types only attention runs on CPU: the MoE one is non-gated, a CUDA-only kernel).
NEMO_PATTERN = "M*-"
MAMBA_HEADS = 4
MAMBA_HEAD_DIM = 64
SSM_STATE = 64
N_GROUPS = 1


def nemotron_h_config(n: int) -> dict:
    kinds = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    return {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "vocab_size": V,
            "hidden_size": H, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
            "head_dim": HEAD_DIM, "hybrid_override_pattern": NEMO_PATTERN,
            "layers_block_type": [kinds[c] for c in NEMO_PATTERN], "num_hidden_layers": len(NEMO_PATTERN),
            "intermediate_size": I_DENSE, "mlp_hidden_act": "relu2", "ssm_state_size": SSM_STATE,
            "mamba_num_heads": MAMBA_HEADS, "mamba_head_dim": MAMBA_HEAD_DIM, "n_groups": N_GROUPS,
            "conv_kernel": CONV_K, "expand": 2, "chunk_size": 64, "use_conv_bias": True, "use_bias": False,
            "num_nextn_predict_layers": n, "mtp_hybrid_override_pattern": "*",
            "mtp_layers_block_type": ["attention"], "tie_word_embeddings": False, "torch_dtype": "bfloat16",
            "max_position_embeddings": 4096, "layer_norm_epsilon": 1e-5}


def _nemotron_h_tensors(cfg: dict) -> Tensors:
    out: Tensors = [("backbone.embeddings.weight", (V, H)), ("backbone.norm_f.weight", (H,)),
                    ("lm_head.weight", (V, H))]
    inter = MAMBA_HEADS * MAMBA_HEAD_DIM
    conv_dim = inter + 2 * N_GROUPS * SSM_STATE
    for i, kind in enumerate(cfg["hybrid_override_pattern"]):
        p = f"backbone.layers.{i}"
        out.append((f"{p}.norm.weight", (H,)))
        if kind == "M":
            out += [(f"{p}.mixer.in_proj.weight", (inter + conv_dim + MAMBA_HEADS, H)),
                    (f"{p}.mixer.conv1d.weight", (conv_dim, 1, CONV_K)), (f"{p}.mixer.conv1d.bias", (conv_dim,)),
                    (f"{p}.mixer.A_log", (MAMBA_HEADS,)), (f"{p}.mixer.D", (MAMBA_HEADS,)),
                    (f"{p}.mixer.dt_bias", (MAMBA_HEADS,)), (f"{p}.mixer.norm.weight", (inter,)),
                    (f"{p}.mixer.out_proj.weight", (H, inter))]
        elif kind == "*":
            out += _llama_attn(f"{p}.mixer")
        else:
            out += [(f"{p}.mixer.up_proj.weight", (I_DENSE, H)), (f"{p}.mixer.down_proj.weight", (H, I_DENSE))]
    for k in range(cfg["num_nextn_predict_layers"]):
        p = f"mtp.layers.{k}"
        out += [(f"{p}.enorm.weight", (H,)), (f"{p}.hnorm.weight", (H,)), (f"{p}.eh_proj.weight", (H, 2 * H)),
                (f"{p}.norm.weight", (H,)), (f"{p}.final_layernorm.weight", (H,))] + _llama_attn(f"{p}.mixer")
    return out



# ---------------------------------------------------------------- openPangu Ultra MoE (MLA)
# DeepSeek-V3's layout; its model_type is only known to its checkpoints' remote code.
def pangu_ultra_moe_config(n: int) -> dict:
    c = deepseek_v3_config(n)
    c.update(architectures=["PanguUltraMoEForCausalLM"], model_type="pangu_ultra_moe",
             router_enable_expert_bias=True,
             auto_map={"AutoConfig": f"{REMOTE_CONFIG_FILE[:-3]}.PanguUltraMoEConfig"})
    return c


def _pangu_tensors(cfg: dict) -> Tensors:
    # The two loaders disagree on the router's expert bias: the target's maps
    # `mlp.e_score_correction_bias` onto `mlp.gate.e_score_correction_bias` (and so cannot read
    # the latter name: it would become `gate.gate`), the MTP loader reads
    # `mlp.gate.e_score_correction_bias` as is (and has no parameter for the former). Each
    # layer gets the name its own loader reads (docs/runtime-architectures.md).
    mtp = tuple(f"model.layers.{i}." for i in range(TARGET_LAYERS, TARGET_LAYERS + cfg["num_nextn_predict_layers"]))
    return [(name if name.startswith(mtp) else
             name.replace(".mlp.gate.e_score_correction_bias", ".mlp.e_score_correction_bias"), shape)
            for name, shape in _ds_style_tensors(cfg, _mla)]



# ---------------------------------------------------------------- Hunyuan V3 (HY-V3) MoE
# DeepSeek-style MTP layers `model.layers.{N+k}` (enorm, hnorm, eh_proj, final_layernorm, the
# block's own tensors); the MTP head is the target's lm_head. MoE: `mlp.gate`, `mlp.expert_bias`,
# `mlp.shared_mlp`, `mlp.experts.{e}`.
HY_TARGET_LAYERS = 2  # layer 0 dense (first_k_dense_replace=1), the rest MoE


def hy_v3_config(n: int) -> dict:
    c = _dense_common()
    c.update(architectures=["HYV3ForCausalLM"], model_type="hy_v3", num_hidden_layers=HY_TARGET_LAYERS,
             num_nextn_predict_layers=n, num_experts=N_EXPERTS, num_experts_per_tok=TOPK, num_shared_experts=1,
             moe_intermediate_size=I_MOE, expert_hidden_dim=I_MOE, route_norm=True, attention_head_dim=HEAD_DIM,
             rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, first_k_dense_replace=1,
             mlp_layer_types=["dense"] + ["sparse"] * (HY_TARGET_LAYERS - 1 + n))
    return c


def _hy_v3_tensors(cfg: dict) -> Tensors:
    out: Tensors = [("model.embed_tokens.weight", (V, H)), ("model.norm.weight", (H,)),
                    ("lm_head.weight", (V, H))]
    n_target = cfg["num_hidden_layers"]
    for i in range(n_target + cfg["num_nextn_predict_layers"]):
        p = f"model.layers.{i}"
        out += _norms(p) + _llama_attn(f"{p}.self_attn")
        if i < cfg["first_k_dense_replace"]:
            out += _dense_mlp(f"{p}.mlp")
        else:
            out += ([(f"{p}.mlp.gate.weight", (N_EXPERTS, H)), (f"{p}.mlp.expert_bias", (N_EXPERTS,))]
                    + _experts(f"{p}.mlp") + _dense_mlp(f"{p}.mlp.shared_mlp", I_MOE))
        if i >= n_target:
            out += [(f"{p}.enorm.weight", (H,)), (f"{p}.hnorm.weight", (H,)),
                    (f"{p}.eh_proj.weight", (H, 2 * H)), (f"{p}.final_layernorm.weight", (H,))]
    return out



# ---------------------------------------------------------------- Step-3.5
# vLLM's own Step3p5Config. Layers 1..num_hidden_layers-1 are MoE (`moe.gate`,
# `moe.router_bias`, `moe.share_expert`, experts packed 3-D as `moe.{gate,up,down}_proj.weight`)
# and vLLM requires at least one; the MTP layers (indices >= num_hidden_layers) are dense. No
# `sliding_window`: every layer full attention, one KV-cache group for the drafter. MTP
# layers: `model.layers.{N+k}` with enorm, hnorm, eh_proj, shared_head.{norm,output} and the
# block's tensors.
STEP_TARGET_LAYERS = 2


def step3p5_config(n: int) -> dict:
    return {"architectures": ["Step3p5ForCausalLM"], "model_type": "step3p5", "hidden_size": H,
            "intermediate_size": I_DENSE, "num_attention_heads": HEADS, "num_attention_groups": KV_HEADS,
            "num_hidden_layers": STEP_TARGET_LAYERS, "max_seq_len": 4096, "max_position_embeddings": 4096,
            "vocab_size": V, "rms_norm_eps": 1e-6, "use_moe": True, "moe_num_experts": N_EXPERTS,
            "moe_top_k": TOPK, "moe_intermediate_size": I_MOE, "share_expert_dim": I_MOE, "head_dim": HEAD_DIM,
            "rope_theta": 10000.0, "num_nextn_predict_layers": n, "tie_word_embeddings": False,
            "torch_dtype": "bfloat16"}


def _step3p5_tensors(cfg: dict) -> Tensors:
    out: Tensors = [("model.embed_tokens.weight", (V, H)), ("model.norm.weight", (H,)),
                    ("lm_head.weight", (V, H))]
    n_target = cfg["num_hidden_layers"]
    for i in range(n_target + cfg["num_nextn_predict_layers"]):
        p = f"model.layers.{i}"
        out += _norms(p) + _qk_norm_attn(f"{p}.self_attn")
        if 1 <= i < n_target:
            m = f"{p}.moe"
            out += [(f"{m}.gate.weight", (N_EXPERTS, H)), (f"{m}.router_bias", (N_EXPERTS,)),
                    (f"{m}.gate_proj.weight", (N_EXPERTS, I_MOE, H)), (f"{m}.up_proj.weight", (N_EXPERTS, I_MOE, H)),
                    (f"{m}.down_proj.weight", (N_EXPERTS, H, I_MOE))]
            # The checkpoint's shared expert sits beside `moe`: Step3p5ForCausalLM's
            # hf_to_vllm_mapper maps `.share_expert.` to `.moe.share_expert.` (step3p5.py), and
            # a name already under `moe` is mapped past every parameter and silently skipped
            # (the shared expert then runs on uninitialised memory: NaN logits).
            out += _dense_mlp(f"{p}.share_expert", I_MOE)
        else:
            out += _dense_mlp(f"{p}.mlp")
        if i >= n_target:
            out += [(f"{p}.enorm.weight", (H,)), (f"{p}.hnorm.weight", (H,)), (f"{p}.eh_proj.weight", (H, 2 * H)),
                    (f"{p}.shared_head.norm.weight", (H,)), (f"{p}.shared_head.output.weight", (V, H))]
    return out


ARCHS: dict[str, Arch] = {a.key: a for a in [
    Arch("qwen3_5", "Qwen3.5 dense", "Qwen3_5ForCausalLM", "Qwen3_5MTP",
         ("Qwen3_5MTP", "Qwen3_5MultiTokenPredictor"), qwen3_5_config,
         lambda c: _qwen_tensors(c, moe=False, fused_gdn=False, n_mtp=c["mtp_num_hidden_layers"]),
         ("qwen3.5", "qwen3_5_dense", "qwen3_5_text", "qwen3_5_mtp")),
    Arch("qwen3_5_moe", "Qwen3.5 MoE", "Qwen3_5MoeForCausalLM", "Qwen3_5MoeMTP",
         ("Qwen3_5MoeMTP", "Qwen3_5MTP", "Qwen3_5MultiTokenPredictor"), qwen3_5_moe_config,
         lambda c: _qwen_tensors(c, moe=True, fused_gdn=False, n_mtp=c["mtp_num_hidden_layers"]),
         ("qwen3.5-moe", "qwen3_5_moe_text")),
    Arch("qwen3_next", "Qwen3-Next", "Qwen3NextForCausalLM", "Qwen3NextMTP",
         ("Qwen3NextMTP", "Qwen3NextMultiTokenPredictor"), qwen3_next_config,
         lambda c: _qwen_tensors(c, moe=True, fused_gdn=True, n_mtp=c["num_nextn_predict_layers"]),
         ("qwen3-next", "qwen3_next_mtp")),
    Arch("glm4_moe", "GLM-4 MoE", "Glm4MoeForCausalLM", "Glm4MoeMTPModel",
         ("Glm4MoeMTP", "Glm4MoeMultiTokenPredictor"), glm4_moe_config,
         lambda c: _ds_style_tensors(c, _glm_attn), ("glm4-moe", "glm4_moe_mtp", "glm")),
    Arch("deepseek_v3", "DeepSeek-V3 (MLA)", "DeepseekV3ForCausalLM", "DeepSeekMTPModel",
         ("DeepSeekMTP", "DeepSeekMultiTokenPredictor"), deepseek_v3_config,
         lambda c: _ds_style_tensors(c, _mla), ("deepseek-v3", "deepseek_mtp", "deepseek")),
    Arch("mimo", "MiMo (Qwen2 dense)", "MiMoForCausalLM", "MiMoMTPModel",
         ("MiMoMTP", "MiMoMultiTokenPredictor"), mimo_config, _mimo_tensors, ("mimo_mtp",)),
    Arch("ernie", "ERNIE 4.5 MoE", "Ernie4_5_MoeForCausalLM", "ErnieMTPModel",
         ("ErnieMTP", "ErnieMultiTokenPredictor"), ernie_config, _ernie_tensors,
         ("ernie4_5_moe", "ernie_mtp", "ernie4.5")),
    Arch("glm4_moe_lite", "GLM-4 MoE Lite (MLA)", "Glm4MoeLiteForCausalLM", "Glm4MoeLiteMTPModel",
         ("Glm4MoeLiteMTP", "Glm4MoeLiteMultiTokenPredictor"), glm4_moe_lite_config,
         lambda c: _ds_style_tensors(c, _mla), ("glm4-moe-lite", "glm4_moe_lite_mtp")),
    Arch("exaone_moe", "EXAONE MoE", "ExaoneMoeForCausalLM", "ExaoneMoeMTP",
         ("ExaoneMoeMTP", "ExaoneMoeMultiTokenPredictor"), exaone_moe_config, _exaone_moe_tensors,
         ("exaone-moe", "exaone_moe_mtp", "k-exaone")),
    Arch("nemotron_h", "Nemotron-H (Mamba-2 hybrid)", "NemotronHForCausalLM", "NemotronHMTPModel",
         ("NemotronHMTP", "NemotronHMultiTokenPredictor"), nemotron_h_config, _nemotron_h_tensors,
         ("nemotron-h", "nemotron_h_mtp")),
    Arch("openpangu", "openPangu Ultra MoE (MLA)", "PanguUltraMoEForCausalLM", "OpenPanguMTPModel",
         ("OpenPanguMTP", "OpenPanguMultiTokenPredictor"), pangu_ultra_moe_config,
         _pangu_tensors, ("pangu", "pangu_ultra_moe", "openpangu_mtp"),
         remote_config=("PanguUltraMoEConfig", "pangu_ultra_moe")),
    Arch("hy_v3", "Hunyuan V3 MoE", "HYV3ForCausalLM", "HYV3MTPModel",
         ("HYV3MTP", "HYV3MultiTokenPredictor"), hy_v3_config, _hy_v3_tensors, ("hy-v3", "hunyuan_v3", "hy_v3_mtp")),
    Arch("step3p5", "Step-3.5", "Step3p5ForCausalLM", "Step3p5MTP",
         ("Step3p5MTP", "Step3p5AMultiTokenPredictor"), step3p5_config, _step3p5_tensors, ("step3.5", "step3p5_mtp")),
]}


def resolve(name: str) -> Arch | None:
    n = name.strip().lower().replace("-", "_").replace(".", "_")
    for a in ARCHS.values():
        if n == a.key or n in {x.lower().replace("-", "_").replace(".", "_") for x in a.aliases}:
            return a
        if n == a.target_architecture.lower():
            return a
    return None


def arch_for_class(class_name: str) -> Arch | None:
    """The architecture whose draft model uses ``class_name`` (wrapper or predictor)."""
    hits = [a for a in ARCHS.values() if class_name in a.model_classes]
    # Prefer the arch whose own wrapper it is (Qwen3_5MTP belongs to dense first).
    for a in hits:
        if a.model_classes[0] == class_name:
            return a
    return hits[0] if hits else None


def arch_for_config(cfg: dict) -> Arch | None:
    for name in cfg.get("architectures") or []:
        for a in ARCHS.values():
            if name in (a.target_architecture, a.draft_architecture):
                return a
    return None


def num_mtp_layers(cfg: dict) -> int:
    for key in ("mtp_num_hidden_layers", "num_nextn_predict_layers", "n_predict"):
        if cfg.get(key):
            return int(cfg[key])
    tc = cfg.get("text_config") or {}
    return int(tc.get("mtp_num_hidden_layers") or tc.get("num_nextn_predict_layers") or 0)
