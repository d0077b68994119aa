"""Layers no checkpoint name reaches (``auditor/analyses/dispatch/weight_names.py``), on small
trees written here (:mod:`trees` shape): a draft model whose literal ``hf_to_vllm_mapper``
renames a per-layer checkpoint prefix for fewer indices than the layer count is rejected at
load, with the checkpoint-name condition and vLLM's strict check's file:line; anything the
mapper does not say literally claims nothing."""

from __future__ import annotations

from scan_helpers import write_tree
from test_layers import planned_scan
from trees import gate_tree

from auditor.analyses.dispatch import Setting

_STRICT = '''
class DefaultModelLoader:
    def track_weights_loading(self, model, loaded_weights):
        weights_to_load = {name for name, _ in model.named_parameters()}
        if loaded_weights is not None:
            weights_not_loaded = weights_to_load - loaded_weights
            if weights_not_loaded:
                raise ValueError(f"Following weights were not initialized from checkpoint: {weights_not_loaded}")
'''

_ONE = '''{
                "model.mtp_norm.0.": f"layers.{start}.norm.",
                "model.mtp_block.0.": f"layers.{start}.block.",
            }'''


def _model(substr: str = _ONE, hand_on: bool = True) -> str:
    load = ("        return loader.load_weights(weights, mapper=self.hf_to_vllm_mapper)\n" if hand_on
            else "        return loader.load_weights(weights)\n")
    return f'''
import torch.nn as nn
from .utils import AutoWeightsLoader, WeightsMapper


class DeepMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        start = config.num_hidden_layers
        self.num_mtp_layers = config.num_nextn_predict_layers
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])
        self.hf_to_vllm_mapper = WeightsMapper(
            orig_to_new_substr={substr},
            orig_to_new_stacked={{".q_proj": (".qkv_proj", "q")}},
        )

    def forward(self, x, spec_step_idx: int = 0):
        return self.layers[spec_step_idx % self.num_mtp_layers](x)

    def load_weights(self, weights):
        loader = AutoWeightsLoader(self)
{load}'''


def _plans(tmp_path, ns: list[int], strict: bool = True, **model: object):
    files = gate_tree()
    files["vllm/models/deep_mtp.py"] = _model(**model)  # type: ignore[arg-type]
    if strict:
        files["vllm/model_executor/model_loader/default_loader.py"] = _STRICT
    root = write_tree(tmp_path / "t", files)
    settings = [Setting("v2", 2, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", n),)) for n in ns]
    return planned_scan(root, settings)[1]


def test_a_mapper_that_renames_fewer_layers_than_the_model_builds_rejects_at_load(tmp_path):
    two, three, one = _plans(tmp_path, [2, 3, 1])
    assert two.outcome == "rejected", two.steps
    r = two.rejections[0]
    assert (r.path, r.line, r.function, r.when) == (
        "vllm/model_executor/model_loader/default_loader.py", 8, "DefaultModelLoader.track_weights_loading", "weights")
    assert "not initialized from checkpoint" in r.message
    # The conclusion depends on the checkpoint's names: the rejection says so.
    assert "when the checkpoint names its MTP layers as the mapper's source prefixes" in r.condition
    assert "model.mtp_block.{i}." in r.condition and "1 of the 2 layer(s)" in r.condition
    assert r.as_json()["condition"] == r.condition
    assert all(s.verdict == "rejected" and r.condition in s.why for s in two.steps)
    assert three.outcome == "rejected" and "2 of the 3 layer(s)" in three.rejections[0].condition
    assert one.outcome == "plan"  # one layer: the mapper's index 0 fills it


def test_a_mapper_that_covers_every_layer_is_not_rejected(tmp_path):
    both = '''{
                "model.mtp_block.0.": f"layers.{start}.block.",
                "model.mtp_block.1.": f"layers.{start + 1}.block.",
            }'''
    assert [p.outcome for p in _plans(tmp_path, [2, 3], substr=both)] == ["plan", "rejected"]


def test_what_the_mapper_does_not_say_literally_claims_nothing(tmp_path):
    comprehension = '{f"model.mtp_block.{i}.": f"layers.{i + start}.block." for i in range(2)}'
    assert _plans(tmp_path / "a", [2], substr=comprehension)[0].outcome == "plan"
    # A source prefix that is the container's own path: unrenamed names land in it.
    own = '{"layers.0.": f"layers.{start}."}'
    assert _plans(tmp_path / "b", [2], substr=own)[0].outcome == "plan"
    # A target outside every layer container of the model.
    elsewhere = '{"model.mtp_block.0.": "heads.0."}'
    assert _plans(tmp_path / "c", [2], substr=elsewhere)[0].outcome == "plan"
    # Another entry that rewrites the other layers' source prefix.
    catch_all = '{"model.mtp_block.0.": f"layers.{start}.block.", "mtp_block.": "mtp."}'
    assert _plans(tmp_path / "d", [2], substr=catch_all)[0].outcome == "plan"


def test_a_mapper_the_loader_is_not_handed_or_a_tree_without_the_check_claims_nothing(tmp_path):
    assert _plans(tmp_path / "a", [2], hand_on=False)[0].outcome == "plan"
    assert _plans(tmp_path / "b", [2], strict=False)[0].outcome == "plan"
