"""A step handed on through an attribute (issue 18, HY V4's MTP: the wrapper's ``forward`` and
``compute_logits`` store their ``spec_step_idx`` on the predictor, which selects with
``i = self.spec_step_idx % n`` then ``self.layers[str(base + i)]``): the selection reads the
side channel through a local. A loop that threads the step reaches the forward's selection
with it and the head's with the wrapper's default; one that passes nothing reaches both with
the default (layer 0). Small trees written here (:mod:`trees` shape), never vLLM's code."""

from __future__ import annotations

from scan_helpers import write_tree
from test_layers import planned_scan
import trees
from trees import gate_tree

from auditor.analyses.dispatch import Setting

_MODEL = '''
import torch.nn as nn


class DeepPredictor(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.base = 40
        self.n = config.num_nextn_predict_layers
        self.spec_step_idx = 0
        self.layers = nn.ModuleDict({str(self.base + i): nn.Linear(4, 4) for i in range(self.n)})

    def forward(self, x):
        current = self.spec_step_idx % self.n
        return self.layers[str(self.base + current)](x)

    def compute_logits(self, h):
        current = self.spec_step_idx % self.n
        return self.layers[str(self.base + current)](h)


class DeepMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = DeepPredictor(config)

    def forward(self, x, spec_step_idx: int = 0):
        self.model.spec_step_idx = spec_step_idx
        return self.model(x)

    def compute_logits(self, h, spec_step_idx: int = 0):
        self.model.spec_step_idx = spec_step_idx
        return self.model.compute_logits(h)
'''

# The tree's speculators, each step also computing its logits (without the step).
_SPECULATORS = trees._SPECULATORS.replace("spec_step_idx=step)\n", "spec_step_idx=step)\n            x = self.model.compute_logits(x)\n") \
    .replace("x = self.model(x)\n", "x = self.model(x)\n            x = self.model.compute_logits(x)\n")


def _plans(tmp_path, n: int):
    tree = gate_tree()
    tree["vllm/models/deep_mtp.py"] = _MODEL
    tree["vllm/spec_decode/speculators.py"] = _SPECULATORS
    root = write_tree(tmp_path, tree)
    setting = Setting("v2", 3, "mtp", "cuda", "DeepMTPModel", (("num_nextn_predict_layers", n),))
    _, (plan,) = planned_scan(root, [setting])
    return plan


def test_a_threaded_step_reaches_the_forward_through_the_side_channel_and_the_head_gets_the_default(tmp_path):
    plan = _plans(tmp_path, 3)
    assert plan.proposer[1] == "MultiModuleSpeculator"
    assert [s.forward_layer for s in plan.steps] == [0, 1, 2]
    # compute_logits is called without the step: its own default 0 is what it stores.
    assert [s.head_layer for s in plan.steps] == [0, 0, 0]


def test_a_loop_that_passes_no_step_reaches_layer_0_through_the_side_channel(tmp_path):
    plan = _plans(tmp_path, 1)
    assert plan.proposer[1] == "EagleStyleSpeculator"
    assert [(s.forward_layer, s.head_layer) for s in plan.steps] == [(0, 0)] * 3
    assert all(s.verdict.startswith("constant") for s in plan.steps), [s.verdict for s in plan.steps]
