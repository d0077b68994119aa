"""A layer count a helper computes (issue 18, Inkling's ``self.num_mtp_layers =
_select_mtp_depth_count(n_predict, num_spec)``, ``min(n, K)``): the constructor's definition is
evaluated over the build's configuration, its locals through their single definitions and the
helper run with its statements extracted on demand (never executed). A helper that raises for
the configuration, or one the evaluator cannot run, leaves the count unknown. Small trees
written here (:mod:`trees` shape), never vLLM's code."""

from __future__ import annotations

from scan_helpers import write_tree
from test_layers import planned_scan
from trees import gate_tree

from auditor.analyses.dispatch import Setting

_MODEL = '''
import torch.nn as nn


def _pick(n_predict, num_spec):
    count = min(n_predict, num_spec) if num_spec else n_predict
    if count <= 0:
        raise ValueError("at least one layer")
    return count


class DeepMTP(nn.Module):
    def __init__(self, vllm_config, prefix=""):
        super().__init__()
        config = vllm_config.speculative_config.draft_model_config.hf_config
        n_predict = config.num_nextn_predict_layers
        num_spec = vllm_config.speculative_config.num_speculative_tokens
        self.num_mtp_layers = {count}
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])

    def forward(self, x, spec_step_idx: int = 0):
        return self.layers[spec_step_idx % self.num_mtp_layers](x)
'''


def _plans(tmp_path, count: str, *settings):
    tree = gate_tree()
    tree["vllm/models/deep_mtp.py"] = _MODEL.replace("{count}", count)
    return planned_scan(write_tree(tmp_path, tree), list(settings))[1]


def _deep(k: int, n: int) -> Setting:
    return Setting("v2", k, "mtp", "cuda", "DeepMTPModel", (("num_nextn_predict_layers", n),))


def test_a_count_a_helper_computes_from_the_field_and_k_is_evaluated(tmp_path):
    fewer, more = _plans(tmp_path, "_pick(n_predict, num_spec)", _deep(2, 3), _deep(4, 3))
    assert (fewer.num_mtp_layers, [s.forward_layer for s in fewer.steps]) == (2, [0, 1])  # min(3, 2)
    assert (more.num_mtp_layers, [s.forward_layer for s in more.steps]) == (3, [0, 1, 2, 0])  # min(3, 4)


def test_a_helper_that_raises_or_cannot_be_run_leaves_the_count_unknown(tmp_path):
    zero, = _plans(tmp_path / "a", "_pick(n_predict, num_spec)", _deep(2, 0))  # min(0, 2) <= 0: raises
    assert zero.num_mtp_layers is None
    opaque, = _plans(tmp_path / "b", "self._count(n_predict, num_spec)", _deep(2, 3))  # a method on self: not run
    assert opaque.num_mtp_layers is None
    assert any("computed from" in n for n in opaque.notes), opaque.notes
