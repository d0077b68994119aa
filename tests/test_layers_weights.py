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


def _renaming_model(rename: str) -> str:
    """A model without a mapper whose own ``load_weights`` runs a hand-written renaming
    method on each checkpoint name (vLLM 0.23/0.24 ERNIE's shape)."""
    return f'''
import torch.nn as nn


class DeepMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.num_mtp_layers = config.num_nextn_predict_layers
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])

    def forward(self, x, spec_step_idx: int = 0):
        return self.layers[spec_step_idx % self.num_mtp_layers](x)

    def load_weights(self, weights):
        params_dict = dict(self.named_parameters())
        for name, loaded_weight in weights:
            if "mtp" in name:
                name = self._rewrite(self.config, name)
            params_dict[name].copy_(loaded_weight)

{rename}'''


_RENAME_ZERO = '''    def _rewrite(self, config, name):
        start = config.num_hidden_layers
        for weight_name in ["mtp_norm", "mtp_proj"]:
            if weight_name in name:
                name = name.replace(f"model.{weight_name}.0.", f"layers.{start}.{weight_name}.")
                return name
        name = name.replace("model.mtp_block.0.", f"layers.{start}.block.")
        return name
'''


def _renaming_plans(tmp_path, rename: str, ns: list[int]):
    files = gate_tree()
    files["vllm/models/deep_mtp.py"] = _renaming_model(rename)
    files["vllm/model_executor/model_loader/default_loader.py"] = _STRICT
    root = write_tree(tmp_path / "t", files)
    settings = [Setting("v2", 2, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", n),)) for n in ns]
    return planned_scan(root, settings)[1]


def test_a_hand_written_renaming_of_layer_0_only_rejects_more_layers_at_load(tmp_path):
    two, one = _renaming_plans(tmp_path, _RENAME_ZERO, [2, 1])
    assert two.outcome == "rejected", two.steps
    (r,) = two.rejections
    assert (r.function, r.when) == ("DefaultModelLoader.track_weights_loading", "weights")
    assert "DeepMTP._rewrite (hand-written, run by load_weights) renames only" in r.condition
    assert "1 of the 2 layer(s)" in r.condition
    assert one.outcome != "rejected"


def test_a_renaming_that_does_more_than_literal_replaces_claims_nothing(tmp_path):
    # A source the function computes (not a literal, nor an f-string over a literal list), or
    # a rewrite other than ``name.replace``: what it renames is not known.
    computed = _RENAME_ZERO.replace('"model.mtp_block.0."', 'config.prefix')
    regex = _RENAME_ZERO.replace('        name = name.replace("model.mtp_block.0.", f"layers.{start}.block.")\n',
                                 '        name = re.sub(r"mtp_block\\.(\\d+)\\.", r"layers.\\1.", name)\n')
    # No per-layer index in any source: every layer's names are renamed.
    every = _RENAME_ZERO.replace('"model.mtp_block.0."', '"model.mtp_block."').replace('.0."', '."')
    for i, rename in enumerate((computed, regex)):
        (two,) = _renaming_plans(tmp_path / str(i), rename, [2])
        assert two.outcome != "rejected", (i, two.rejections)
    (two,) = _renaming_plans(tmp_path / "every", every, [2])
    assert two.outcome != "rejected"


_COUNTED_BY_A_HELPER = '''
import torch.nn as nn
from vllm.platforms import depth_limit


def _depths(n, k):
    if n <= 0:
        raise ValueError("no depth")
    return min(n, k, depth_limit())


class DeepMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_mtp_layers = _depths(config.num_nextn_predict_layers, 4)
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])

    def forward(self, x, spec_step_idx: int = 0):
        return self.layers[spec_step_idx % self.num_mtp_layers](x)
'''


def test_a_threaded_step_over_an_unknown_layer_count_names_only_step_0s_layer(tmp_path):
    # The container is sized by what a helper returns, and the helper calls what the tree does
    # not hold (depth_limit): the count is unknown, so step i > 0 runs layer i mod n for an n the
    # analysis cannot tell (never "layer i"). (A helper it can run is evaluated:
    # tests/test_layers_helper_count.py.)
    files = gate_tree()
    files["vllm/models/deep_mtp.py"] = _COUNTED_BY_A_HELPER
    root = write_tree(tmp_path / "t", files)
    (plan,) = planned_scan(root, [Setting("v2", 3, architecture="DeepMTPModel",
                                          fields=(("num_nextn_predict_layers", 2),))])[1]
    assert plan.num_mtp_layers is None
    assert [s.forward_layer for s in plan.steps] == [0, None, None]
    assert [s.verdict for s in plan.steps] == ["threaded"] * 3
    assert "depends on the layer count, which is unknown" in plan.steps[1].why


def test_a_count_bounded_by_min_or_max_of_literals_is_evaluated(tmp_path):
    # max(getattr(config, "f", 1), 1): the field's value where it is at least 1; min(f, 2) caps it.
    for i, (size, n, want) in enumerate((('max(getattr(config, "num_nextn_predict_layers", 1), 1)', 3, 3),
                                         ("min(config.num_nextn_predict_layers, 2)", 3, 2))):
        files = gate_tree()
        files["vllm/models/deep_mtp.py"] = _COUNTED_BY_A_HELPER.replace(
            "_depths(config.num_nextn_predict_layers, 4)", size)
        root = write_tree(tmp_path / str(i), files)
        (plan,) = planned_scan(root, [Setting("v2", 3, architecture="DeepMTPModel",
                                              fields=(("num_nextn_predict_layers", n),))])[1]
        assert plan.num_mtp_layers == want, (size, plan.notes)
        assert [s.forward_layer for s in plan.steps] == [i % want for i in range(3)]
