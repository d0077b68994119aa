"""Small vLLM-shaped trees the dispatch tests scan (written by the tests, never vLLM's code).

:func:`gate_tree`: two MTP families behind one dispatch gate — ``DeepMTP`` sizes its layers
from ``num_nextn_predict_layers`` (the field the gate reads), ``QwenMTP`` from
``mtp_num_hidden_layers`` (never set by the override code unless ``qwen_extra`` sets it).
The MTP006 rule documents itself with a tree of the same shape; this copy belongs to the
tests, so that editing the rule's examples never changes what the tests check.
"""

from __future__ import annotations

_SPEC = '''
class SpeculativeConfig:
    @staticmethod
    def hf_config_override(hf_config):
        if hf_config.model_type == "deep":
            n_predict = getattr(hf_config, "num_nextn_predict_layers", None)
            hf_config.update({"n_predict": n_predict, "architectures": ["DeepMTPModel"]})
        if hf_config.model_type == "qwen":
            hf_config.model_type = "qwen_mtp"
            n_predict = getattr(hf_config, "mtp_num_hidden_layers", None)
            hf_config.update({"n_predict": n_predict, "architectures": ["QwenMTP"]{qwen_extra}})
        return hf_config

    def use_multi_module_mtp(self):
        if self.method != "mtp" or self.draft_model_config is None:
            return False
        num_mtp_layers = getattr(self.draft_model_config.hf_config, "num_nextn_predict_layers", 1)
        return min(num_mtp_layers, self.num_speculative_tokens) > 1
'''

_FACTORY = '''
def init_speculator(vllm_config):
    speculative_config = vllm_config.speculative_config
    if speculative_config.use_multi_module_mtp():
        from vllm.spec_decode.speculators import MultiModuleSpeculator

        return MultiModuleSpeculator(vllm_config)
    elif speculative_config.method == "mtp":
        from vllm.spec_decode.speculators import EagleStyleSpeculator

        return EagleStyleSpeculator(vllm_config)
    raise NotImplementedError(speculative_config.method)
'''

_SPECULATORS = '''
from vllm.loader import get_model


class MultiModuleSpeculator:
    def __init__(self, vllm_config):
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens

    def load_model(self):
        self.model = get_model(self.vllm_config)

    def propose(self, x):
        for step in range(self.num_speculative_steps):
            x = self.model(x, spec_step_idx=step)
        return x


class EagleStyleSpeculator(MultiModuleSpeculator):
    def propose(self, x):
        for step in range(self.num_speculative_steps):
            x = self.model(x)
        return x
'''


def _model(name: str, field: str) -> str:
    return f'''
import torch.nn as nn


class {name}(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_mtp_layers = config.{field}
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])

    def forward(self, x, spec_step_idx: int = 0):
        return self.layers[spec_step_idx % self.num_mtp_layers](x)
'''


def gate_tree(qwen_extra: str = "") -> dict[str, str]:
    return {
        "vllm/loader.py": "def get_model(config):\n    raise NotImplementedError\n",
        "vllm/config/speculative.py": _SPEC.replace("{qwen_extra}", qwen_extra),
        "vllm/spec_decode/__init__.py": _FACTORY,
        "vllm/spec_decode/speculators.py": _SPECULATORS,
        "vllm/models/registry.py": (
            "_SPECULATIVE_DECODING_MODELS = {\n"
            '    "DeepMTPModel": ("deep_mtp", "DeepMTP"),\n'
            '    "QwenMTP": ("qwen_mtp", "QwenMTP"),\n'
            "}\n"
        ),
        "vllm/models/deep_mtp.py": _model("DeepMTP", "num_nextn_predict_layers"),
        "vllm/models/qwen_mtp.py": _model("QwenMTP", "mtp_num_hidden_layers"),
    }


# A draft loop and a wrapper in two states each (rules/_examples.draft_tree / wrapper), for the
# tests that commit one change of design and one fix and read what history, lint and
# baselines call each.
EAGLE_STYLE_LOOP = "out.append(self.model(input_ids, positions, hidden_states))"
THREADED_LOOP = "out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=token_index + 1))"
PASSING_WRAPPER = "return self.model(input_ids, positions, hidden_states, **kwargs)"
DROPPING_WRAPPER = "return self.model(input_ids, positions, hidden_states)"


# A drafter's propose that samples the first draft token before its draft loop and every
# later one inside it, through ``self._sample`` (each test writes its own ``_sample``).
_SAMPLING_PROPOSE = '''
    def propose(self, x, meta):
        x = self.model(x, spec_step_idx=0)
        tok = self._sample(x, meta)
        for step in range(1, self.num_speculative_steps):
            x = self.model(x, spec_step_idx=step)
            tok = self._sample(x, meta)
        return tok
'''


def sampling_drafter_tree(sample: str) -> dict[str, str]:
    """:func:`gate_tree` whose multi-module drafter samples each draft token through
    ``sample`` (the source of its ``_sample`` method) in place of the plain draft loop, and
    keeps the speculative config's ``use_local_argmax_reduction`` in ``self.local_argmax``:
    the shape of a drafter that samples through a head method chosen by an option."""
    files = gate_tree()
    propose = _SAMPLING_PROPOSE + sample
    spec = files["vllm/spec_decode/speculators.py"].replace('''    def propose(self, x):
        for step in range(self.num_speculative_steps):
            x = self.model(x, spec_step_idx=step)
        return x
''', propose, 1).replace('''        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens
''', '''        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens
        self.local_argmax = vllm_config.speculative_config.use_local_argmax_reduction
''', 1)
    assert propose in spec and "self.local_argmax =" in spec
    files["vllm/spec_decode/speculators.py"] = spec
    return files
