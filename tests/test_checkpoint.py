"""Checkpoint-aware plans (issue 21 item 4): MTP layers found from safetensors headers alone.

The checkpoints are written here: real safetensors files (8-byte header length, JSON header,
zero-filled data) in the layouts real checkpoints use -- a DeepSeek-V3-style index whose MTP
layer is `model.layers.61.*` after 61 decoder layers, and a Qwen3.5-style index with a separate
`mtp.layers.*` module under a multimodal `text_config` -- plus the runtime checker's own
synthesized layout (runtime_check/archs.py, the tensor list the driver turns into files).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from auditor.output import checkpoint as checkpoint_text
from auditor.services import checkpoint as checkpoint_plan
from auditor.source import checkpoint
from runtime_check import archs

DTYPE_BYTES = {"BF16": 2, "F32": 4, "F8_E4M3": 1}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, tuple[int, ...]]]) -> int:
    """A real safetensors file with zero data; returns its data bytes."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    off = 0
    for name, (dtype, shape) in tensors.items():
        n = DTYPE_BYTES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        f.truncate(8 + len(raw) + off)
    return off


def write_index(model: Path, shards: dict[str, dict[str, tuple[str, tuple[int, ...]]]], cfg: dict) -> None:
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps(cfg))
    wmap = {}
    total = 0
    for shard, tensors in shards.items():
        total += write_safetensors(model / shard, tensors)
        wmap.update({name: shard for name in tensors})
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total},
                                                                     "weight_map": wmap}))


def _ds_layer(p: str, mtp: bool) -> dict[str, tuple[str, tuple[int, ...]]]:
    t = {f"{p}.input_layernorm.weight": ("BF16", (64,)), f"{p}.self_attn.q_a_proj.weight": ("F8_E4M3", (32, 64)),
         f"{p}.self_attn.kv_a_proj_with_mqa.weight": ("F8_E4M3", (40, 64)),
         f"{p}.mlp.experts.0.gate_proj.weight": ("F8_E4M3", (16, 64)),
         f"{p}.mlp.experts.0.gate_proj.weight_scale_inv": ("F32", (1, 1))}
    if mtp:
        t |= {f"{p}.enorm.weight": ("BF16", (64,)), f"{p}.hnorm.weight": ("BF16", (64,)),
              f"{p}.eh_proj.weight": ("BF16", (64, 128)), f"{p}.shared_head.head.weight": ("BF16", (256, 64)),
              f"{p}.shared_head.norm.weight": ("BF16", (64,)), f"{p}.embed_tokens.weight": ("BF16", (256, 64))}
    return t


@pytest.fixture
def deepseek_v3(tmp_path: Path) -> Path:
    """61 decoder layers in 2 shards, MTP layer in a third (as DeepSeek-V3 ships it)."""
    shards: dict[str, dict[str, tuple[str, tuple[int, ...]]]] = {
        "model-00001-of-00003.safetensors": {"model.embed_tokens.weight": ("BF16", (256, 64))},
        "model-00002-of-00003.safetensors": {"model.norm.weight": ("BF16", (64,)), "lm_head.weight": ("BF16", (256, 64))},
        "model-00003-of-00003.safetensors": _ds_layer("model.layers.61", mtp=True),
    }
    for i in range(61):
        shards["model-00001-of-00003.safetensors" if i < 30 else "model-00002-of-00003.safetensors"] |= \
            _ds_layer(f"model.layers.{i}", mtp=False)
    cfg = {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 61, "num_nextn_predict_layers": 1}
    write_index(tmp_path / "ds", shards, cfg)
    return tmp_path / "ds"


def _plan(runner: str, n: int | None, forward: list[int | None], heads: list[int | None] | None = None) -> dict:
    heads = heads or [None] * len(forward)
    return {"runner": runner, "k": len(forward), "num_mtp_layers": n, "model_class": {"class": "X"},
            "steps": [{"step": i, "forward_layer": f, "head_layer": h} for i, (f, h) in enumerate(zip(forward, heads))]}


def test_deepseek_v3_layout_mtp_layer_is_the_one_after_the_decoder(deepseek_v3: Path) -> None:
    ck = checkpoint.read_checkpoint(deepseek_v3)
    assert ck.num_hidden_layers == 61 and len(ck.files) == 3
    (layer,) = ck.layers
    want = sum(checkpoint.read_header(deepseek_v3 / "model-00003-of-00003.safetensors").values())
    assert (layer.index, layer.prefix, layer.bytes, layer.tensors) == (0, "model.layers.61", want, 11)
    doc = checkpoint_plan.checkpoint_json(ck, _plan("v1", 1, [0, 0, 0], [0, 0, 0]))
    assert doc["mtp_layers"] == [{"index": 0, "prefix": "model.layers.61", "tensors": 11, "bytes": want,
                                  "built": True, "runs": True}]
    assert doc["dead_weight_bytes"] == 0


def test_qwen3_5_layout_separate_mtp_module_under_text_config(tmp_path: Path) -> None:
    lm = "model.language_model"
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {f"{lm}.embed_tokens.weight": ("BF16", (256, 64)),
                                                       "model.visual.blocks.0.attn.qkv.weight": ("BF16", (96, 32)),
                                                       "mtp.fc.weight": ("BF16", (64, 128)),
                                                       "mtp.norm.weight": ("BF16", (64,)),
                                                       "mtp.pre_fc_norm_hidden.weight": ("BF16", (64,))}
    for i in range(4):
        tensors[f"{lm}.layers.{i}.mlp.down_proj.weight"] = ("BF16", (64, 32))
    for i in range(2):  # the checkpoint carries 2 MTP layers
        tensors[f"mtp.layers.{i}.self_attn.q_proj.weight"] = ("BF16", (64, 64))
        tensors[f"mtp.layers.{i}.mlp.down_proj.weight"] = ("BF16", (64, 32 * (i + 1)))
    cfg = {"architectures": ["Qwen3_5ForConditionalGeneration"],
           "text_config": {"num_hidden_layers": 4, "mtp_num_hidden_layers": 1}}
    write_index(tmp_path / "q", {"model-00001-of-00002.safetensors": dict(list(tensors.items())[:6]),
                                 "model-00002-of-00002.safetensors": dict(list(tensors.items())[6:])}, cfg)
    ck = checkpoint.read_checkpoint(tmp_path / "q")
    assert [(l.index, l.prefix, l.bytes) for l in ck.layers] == [(0, "mtp.layers.0", 64 * 64 * 2 + 64 * 32 * 2),
                                                                 (1, "mtp.layers.1", 64 * 64 * 2 + 64 * 64 * 2)]
    assert ck.shared_mtp_bytes == 64 * 128 * 2 + 64 * 2 + 64 * 2
    # The class builds 1 layer (the config's count): layer 1 is never built, dead weight.
    doc = checkpoint_plan.checkpoint_json(ck, _plan("v1", 1, [0, 0, 0]))
    assert [(r["index"], r["built"], r["runs"]) for r in doc["mtp_layers"]] == [(0, True, True), (1, False, False)]
    assert doc["dead_weight_bytes"] == ck.layers[1].bytes
    assert doc["dead_weight_gb"] == round(ck.layers[1].bytes / 1e9, 3)


@pytest.mark.parametrize("arch", ["glm4_moe", "deepseek_v3", "qwen3_next", "qwen3_5"])
def test_synthesized_checkpoints(arch: str, tmp_path: Path) -> None:
    """The runtime checker's synthetic layouts (3 MTP layers): V1-style plan (layer 0 at every
    step) leaves layers 1 and 2 as dead weight; a 0,1,2 plan none; an unknown step decides
    nothing for the layers it might use."""
    a = archs.ARCHS[arch]
    cfg = a.build_config(3)
    model = tmp_path / arch
    model.mkdir()
    (model / "config.json").write_text(json.dumps(cfg))
    sizes = write_safetensors(model / "model.safetensors", {n: ("BF16", s) for n, s in a.build_tensors(cfg)})
    ck = checkpoint.read_checkpoint(model)
    assert ck.total_bytes == sizes
    assert [l.index for l in ck.layers] == [0, 1, 2]
    assert len({l.bytes for l in ck.layers}) == 1  # the three layers are alike
    v1 = checkpoint_plan.checkpoint_json(ck, _plan("v1", 3, [0, 0, 0]))
    assert [r["runs"] for r in v1["mtp_layers"]] == [True, False, False]
    assert v1["dead_weight_bytes"] == 2 * ck.layers[0].bytes
    v2 = checkpoint_plan.checkpoint_json(ck, _plan("v2", 3, [0, 1, 2]))
    assert v2["dead_weight_bytes"] == 0 and all(r["runs"] for r in v2["mtp_layers"])
    unknown = checkpoint_plan.checkpoint_json(ck, _plan("v2", 3, [0, None, None]))
    assert [r["runs"] for r in unknown["mtp_layers"]] == [True, None, None]
    assert unknown["dead_weight_bytes"] == 0 and unknown["undecided_bytes"] == 2 * ck.layers[0].bytes


def test_text_names_dead_weight(deepseek_v3: Path) -> None:
    ck = checkpoint.read_checkpoint(deepseek_v3)
    plan = _plan("v1", 0, [None])
    text = checkpoint_text.render_text(ck, [plan], [checkpoint_plan.checkpoint_json(ck, plan)])
    assert "MTP layer 0 (model.layers.61.*)" in text and "NEVER BUILT" in text


@pytest.mark.parametrize("damage,message", [
    ("no-config", "no config.json"),
    ("no-weights", "no model.safetensors or model.safetensors.index.json"),
    ("short", "shorter than its 8-byte header length"),
    ("huge-header", "does not fit the file"),
    ("not-json", "header is not JSON"),
    ("truncated", "is truncated"),
    ("missing-shard", "which is not in"),
])
def test_bad_checkpoints_are_one_line_errors(damage: str, message: str, tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    if damage != "no-config":
        (model / "config.json").write_text(json.dumps({"num_hidden_layers": 1}))
    st = model / "model.safetensors"
    if damage == "short":
        st.write_bytes(b"\x01\x02")
    elif damage == "huge-header":
        st.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    elif damage == "not-json":
        st.write_bytes(struct.pack("<Q", 4) + b"nope")
    elif damage == "truncated":
        write_safetensors(st, {"model.layers.1.w": ("BF16", (8, 8))})
        with open(st, "r+b") as f:
            f.truncate(st.stat().st_size - 1)
    elif damage == "missing-shard":
        (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "model-1.safetensors"}}))
    with pytest.raises(checkpoint.CheckpointError) as e:
        checkpoint.read_checkpoint(model)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_reads_headers_only(deepseek_v3: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No tensor data is read: every read of a shard stops at its header."""
    import builtins

    reads: list[int] = []
    real_open = builtins.open

    class Counting:
        def __init__(self, f):  # type: ignore[no-untyped-def]
            self.f = f

        def read(self, n: int = -1) -> bytes:
            data = self.f.read(n)
            reads.append(len(data))
            return data

        def __enter__(self):  # type: ignore[no-untyped-def]
            return self

        def __exit__(self, *a: object) -> None:
            self.f.close()

    def counting_open(path, mode="r", *a, **k):  # type: ignore[no-untyped-def]
        f = real_open(path, mode, *a, **k)
        return Counting(f) if str(path).endswith(".safetensors") and "b" in mode else f

    monkeypatch.setattr(builtins, "open", counting_open)
    ck = checkpoint.read_checkpoint(deepseek_v3)
    headers = sum(8 + struct.unpack("<Q", real_open(deepseek_v3 / f, "rb").read(8))[0] for f in ck.files)
    assert sum(reads) == headers < ck.total_bytes


def _synth_model(tmp_path: Path, arch: str) -> Path:
    a = archs.ARCHS[arch]
    cfg = a.build_config(3)
    model = tmp_path / arch
    model.mkdir()
    (model / "config.json").write_text(json.dumps(cfg))
    write_safetensors(model / "model.safetensors", {n: ("BF16", s) for n, s in a.build_tensors(cfg)})
    return model


def _layers(*args: str) -> "subprocess.CompletedProcess[str]":
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "auditor.cli", "layers", *args], capture_output=True, text=True,
                          timeout=600, cwd=Path(__file__).resolve().parents[1])


@pytest.mark.release
def test_layers_model_on_vllm_0_32_0(tmp_path: Path) -> None:
    """`layers --model DIR` on the real 0.32.0 source: the synthetic GLM-4 MoE checkpoint (3 MTP
    layers, K=3) runs only layer 0 on V1 (layers 1, 2 dead weight) and every layer on V2 --
    what the engine shows (tests/runtime/test_observer_serve.py)."""
    from tests.release_cache import release_root

    model = _synth_model(tmp_path, "glm4_moe")
    root = str(release_root("0.32.0"))
    r = _layers(root, "--model", str(model), "--k", "3", "--format", "json")
    assert r.returncode == 0, r.stderr
    plans = {p["runner"]: p for p in json.loads(r.stdout)["plans"]}
    layer = checkpoint.read_checkpoint(model).layers[0].bytes
    v1, v2 = plans["v1"]["checkpoint"], plans["v2"]["checkpoint"]
    assert [(x["index"], x["built"], x["runs"]) for x in v1["mtp_layers"]] == [(0, True, True), (1, True, False),
                                                                             (2, True, False)]
    assert v1["dead_weight_bytes"] == 2 * layer and v2["dead_weight_bytes"] == 0
    text = _layers(root, "--model", str(model), "--k", "3")
    assert text.returncode == 0, text.stderr
    assert "MTP layer 1 (model.layers.3.*): " in text.stdout and "never runs" in text.stdout
    bad = _layers(root, "--model", str(tmp_path / "none"), "--k", "3")
    assert bad.returncode == 2 and "no such directory" in bad.stderr
    both = _layers(root, "--model", str(model), "--hf-config", str(model / "config.json"), "--k", "3")
    assert both.returncode == 2 and "leave out --hf-config" in both.stderr
