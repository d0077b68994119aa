"""MTP005 binds a step passed by position through each callee's signature (issue 18,
item 7): where it lands in another parameter, the finding at the call keeps one id
however many classes it lists (item 9), apart from the TypeError finding at the same call."""

from __future__ import annotations

from scan_helpers import by_rule, scan_tree, write_tree

from auditor.model.findings import Meaning

SPECULATORS = "vllm/spec_decode/speculators.py"

# A V2-shaped tree (ours): one factory builds the eagle-style speculator for the MTP and
# EAGLE methods; its loop passes the step by position to the loaded model. The registry
# holds an MTP model whose forward takes it there, and EAGLE heads (``head_params``).
_TREE = {
    "vllm/loader.py": "def get_model(config):\n    raise NotImplementedError\n",
    "vllm/config/speculative.py": '''
class SpeculativeConfig:
    @staticmethod
    def hf_config_override(hf_config):
        if hf_config.model_type == "deep":
            hf_config.model_type = "deep_mtp"
            hf_config.update({"architectures": ["DeepMTPModel"]})
        return hf_config

    def use_eagle(self):
        return self.method in ("eagle", "mtp")
''',
    "vllm/spec_decode/__init__.py": '''
def init_speculator(vllm_config):
    speculative_config = vllm_config.speculative_config
    if speculative_config.use_eagle():
        from vllm.spec_decode.speculators import EagleSpeculator

        return EagleSpeculator(vllm_config)
    raise NotImplementedError(speculative_config.method)
''',
    SPECULATORS: '''
from vllm.loader import get_model


class EagleSpeculator:
    def __init__(self, vllm_config):
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens

    def load_model(self):
        self.model = get_model(self.vllm_config)

    def propose(self, x):
        for step in range(self.num_speculative_steps):
            x = self.model(x, step)
        return x
''',
    "vllm/models/deep_mtp.py": '''
import torch.nn as nn


class DeepMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_mtp_layers = config.num_nextn_predict_layers
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])

    def forward(self, x, spec_step_idx: int = 0):
        return self.layers[spec_step_idx % self.num_mtp_layers](x)
''',
}


def _tree(*heads: tuple[str, str]) -> dict[str, str]:
    """The tree with EAGLE heads ``(name, forward parameters)``."""
    files = dict(_TREE)
    entries = ['    "DeepMTPModel": ("deep_mtp", "DeepMTP"),']
    for i, (name, params) in enumerate(heads):
        entries.append(f'    "Eagle{i}Model": ("eagle{i}", "{name}"),')
        files[f"vllm/models/eagle{i}.py"] = (
            f"import torch.nn as nn\n\n\nclass {name}(nn.Module):\n    def forward({params}):\n        return x\n")
    files["vllm/models/registry.py"] = "_SPECULATIVE_DECODING_MODELS = {\n" + "\n".join(entries) + "\n}\n"
    return files


def _misbound(tmp_path, files: dict[str, str]) -> list:
    return [f for f in by_rule(scan_tree(write_tree(tmp_path, files)), "MTP005") if f.meaning is Meaning.STEP_LOST]


def test_the_id_does_not_move_when_another_class_binds_the_step_elsewhere(tmp_path):
    first = ("EagleHead", "self, x, h=None")
    before = _misbound(tmp_path / "one", _tree(first))
    after = _misbound(tmp_path / "two", _tree(first, ("EagleQwenHead", "self, x, h=None, spec_step_idx=0")))
    assert [f.path for f in before] == [SPECULATORS] and [f.path for f in after] == [SPECULATORS]
    assert {c.name for c in before[0].affected_classes} == {"EagleHead"}
    assert {c.name for c in after[0].affected_classes} == {"EagleHead", "EagleQwenHead"}
    assert "EagleQwenHead.forward (h; spec_step_idx keeps its default)" in after[0].message
    assert before[0].fingerprint == after[0].fingerprint


def test_a_typeerror_and_a_misbinding_at_one_call_are_two_findings(tmp_path):
    """One head has no room for the step (TypeError), another takes it in ``h``: two
    defects at the call, with distinct ids and meanings."""
    files = _tree(("EagleHead", "self, x"), ("EagleQwenHead", "self, x, h=None, spec_step_idx=0"))
    found = by_rule(scan_tree(write_tree(tmp_path, files)), "MTP005")
    assert sorted((f.meaning.value if f.meaning else "", f.callee) for f in found) == [
        ("cannot-take", "EagleHead.forward"), ("step-lost", "EagleQwenHead.forward")]
    assert len({f.fingerprint for f in found}) == 2

