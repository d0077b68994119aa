"""``layers --all`` gives each model its layer count where the model reads it (issue 18), on
small trees written here (:mod:`trees` shape): a model reading its count from the nested text
config gets it there (so V2's gate, which reads the top level, sees its default), and a model
that builds one layer whatever the config says gets the count on the field dispatch's count
gate reads (a checkpoint's MTP layer count), not on the field that only places its layer."""

from __future__ import annotations

from scan_helpers import write_tree
from trees import gate_tree

from auditor.analyses.dispatch import DispatchProvider
from auditor.common.config import Config
from auditor.engine.scan import run_scan
from auditor.facts.cache import FactsCache
from auditor.services.layers import PlanQuery, matrix_settings
from auditor.source.trees import DirectoryTree
from rules import all_rules

_MODELS = '''
import torch.nn as nn


class NestPredictor(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        config = vllm_config.model_config.hf_config.text_config
        self.num_mtp_layers = config.num_nextn_predict_layers
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])

    def forward(self, x, spec_step_idx=0):
        return self.layers[spec_step_idx % self.num_mtp_layers](x)


class NestMTP(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = NestPredictor(vllm_config=vllm_config)

    def forward(self, x, spec_step_idx=0):
        return self.model(x, spec_step_idx)


class StackPredictor(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        text_config = vllm_config.model_config.hf_config
        self.num_mtp_layers = text_config.num_hidden_layers
        self.layers = nn.ModuleList([Block(vllm_config.cache_config) for _ in range(self.num_mtp_layers)])

    def forward(self, x, spec_step_idx=0):
        return self.layers[spec_step_idx % self.num_mtp_layers](x)


class StackMTP(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = StackPredictor(vllm_config=vllm_config)

    def forward(self, x, spec_step_idx=0):
        return self.model(x, spec_step_idx)


class Block(nn.Module):
    def __init__(self, cache_config):
        super().__init__()


class OnePredictor(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        config = vllm_config.model_config.hf_config
        self.mtp_start_layer_idx = config.num_hidden_layers
        self.num_mtp_layers = 1
        self.layers = nn.ModuleDict({str(i): nn.Linear(4, 4) for i in range(
            self.mtp_start_layer_idx, self.mtp_start_layer_idx + self.num_mtp_layers)})

    def forward(self, x, spec_step_idx=0):
        return self.layers[str(self.mtp_start_layer_idx + spec_step_idx % self.num_mtp_layers)](x)


class OneMTP(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = OnePredictor(vllm_config=vllm_config)

    def forward(self, x, spec_step_idx=0):
        return self.model(x, spec_step_idx)
'''


def _matrix(tmp_path):
    files = gate_tree()
    files["vllm/models/registry.py"] = files["vllm/models/registry.py"].replace(
        "}\n", '    "NestMTPModel": ("more_mtp", "NestMTP"),\n    "OneMTPModel": ("more_mtp", "OneMTP"),\n'
        '    "StackMTPModel": ("more_mtp", "StackMTP"),\n}\n')
    files["vllm/models/more_mtp.py"] = _MODELS
    query = PlanQuery(lambda dispatch: matrix_settings(dispatch, ["v2"], 3, 3))
    scan = run_scan(DirectoryTree(write_tree(tmp_path / "t", files)), Config(), all_rules(), FactsCache(None), 1,
                    queries=[query])
    assert scan.analysis is not None
    dispatch = scan.analysis.get(DispatchProvider)
    return {s.architecture: (s, dispatch.plan(s)) for s in query.settings}


def test_a_count_read_from_the_nested_text_config_is_written_there(tmp_path):
    by_arch = _matrix(tmp_path)
    setting, plan = by_arch["NestMTPModel"]
    assert setting.fields == (("text_config.num_nextn_predict_layers", 3),)
    assert (plan.num_mtp_layers, plan.layer_field) == (3, "text_config.num_nextn_predict_layers")
    # V2's gate reads the top level (default 1): the eagle-style speculator, layer 0 each step.
    assert plan.proposer is not None and plan.proposer[1] == "EagleStyleSpeculator"
    assert [s.forward_layer for s in plan.steps] == [0, 0, 0]
    # A model reading the top level is given it there, and the gate opens.
    setting, plan = by_arch["DeepMTPModel"]
    assert setting.fields == (("num_nextn_predict_layers", 3),)
    assert plan.proposer is not None and plan.proposer[1] == "MultiModuleSpeculator"


def test_a_model_that_builds_one_layer_is_given_the_count_on_the_count_gates_field(tmp_path):
    setting, plan = _matrix(tmp_path)["OneMTPModel"]
    assert setting.fields == (("num_nextn_predict_layers", 3),)  # not num_hidden_layers (the offset)
    assert plan.proposer is not None and plan.proposer[1] == "MultiModuleSpeculator"
    assert plan.num_mtp_layers == 1
    assert [s.forward_layer for s in plan.steps] == [0, 0, 0]


def test_a_dotted_set_field_goes_into_the_nested_config(tmp_path):
    from auditor.analyses.dispatch.factory_runs import set_fields
    from auditor.analyses.partial_eval import Obj
    from auditor.services.layers import parse_set

    given = parse_set(["text_config.num_nextn_predict_layers=3", "n_predict=2"])
    fields = set_fields({"text_config": Obj("text_config", {"hidden_size": 8}, closed=True)}, given)
    text = fields["text_config"]
    assert isinstance(text, Obj) and text.fields == {"hidden_size": 8, "num_nextn_predict_layers": 3}
    assert fields["n_predict"] == 2


def test_the_count_is_the_field_the_size_attribute_reads_not_one_the_layers_are_built_with(tmp_path):
    setting, plan = _matrix(tmp_path)["StackMTPModel"]
    assert setting.fields == (("num_hidden_layers", 3),)  # not cache_config (an argument of each layer)
    assert plan.num_mtp_layers == 3
