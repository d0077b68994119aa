"""Building blocks for the rules' VALID/INVALID example trees (kept tiny on purpose)."""

PREDICTOR = '''
import torch.nn as nn


class Predictor(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_mtp_layers = config.num_nextn_predict_layers
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])

    def forward(self, input_ids, positions, hidden_states, spec_step_idx: int = 0):
        layer = self.layers[spec_step_idx % self.num_mtp_layers]
        return layer(hidden_states)
'''


def wrapper(forward_body: str, signature: str = "self, input_ids, positions, hidden_states, **kwargs") -> str:
    return PREDICTOR + f'''

class WrapperMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = Predictor(config)

    def forward({signature}):
        {forward_body}
'''


def proposer(loop_body: str, helpers: str = "") -> str:
    """A draft loop over a model built by the registry loader."""
    return f'''
from vllm.loader import get_model


class Proposer:
    def __init__(self, config):
        self.num_speculative_tokens = config.num_speculative_tokens

    def load_model(self):
        self.model = get_model(self.config)

    def propose(self, input_ids, positions, hidden_states):
        out = []
        for token_index in range(self.num_speculative_tokens - 1):
            {loop_body}
        return out
{helpers}
'''


LOADER = "def get_model(config):\n    raise NotImplementedError\n"


def draft_tree(loop_body: str, helpers: str = "", model: str | None = None) -> dict[str, str]:
    return {
        "vllm/loader.py": LOADER,
        "vllm/models/m_mtp.py": model if model is not None else wrapper(
            "return self.model(input_ids, positions, hidden_states, spec_step_idx)",
            "self, input_ids, positions, hidden_states, spec_step_idx=0",
        ),
        "vllm/spec_decode/proposer.py": proposer(loop_body, helpers),
    }


def tree_proposer_tree(level_body: str, extra: str = "") -> dict[str, str]:
    """A proposer that hands over to a tree drafter when it has a token tree: a loop over
    the levels of the tree (a ``range`` whose count is no draft-step count) that runs the
    draft model; its chain loop threads the step."""
    proposer_src = f'''
from vllm.loader import get_model


class TreeProposer:
    def __init__(self, config):
        self.num_speculative_tokens = config.num_speculative_tokens
        self.cu_drafts_per_level = config.tree_levels

    def load_model(self):
        self.model = get_model(self.config)

    def propose(self, input_ids, positions, hidden_states):
        if self.cu_drafts_per_level:
            return self.propose_tree(input_ids, positions, hidden_states)
        out = []
        for token_index in range(self.num_speculative_tokens - 1):
            out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=token_index + 1))
        return out

    def propose_tree(self, input_ids, positions, hidden_states):
        out = []
        tree_depth = len(self.cu_drafts_per_level)
        for level in range(tree_depth - 1):
            {level_body}
        return out
{extra}
'''
    files = draft_tree("pass")
    files["vllm/spec_decode/proposer.py"] = proposer_src
    return files


_HEADED_MODEL = '''
import torch.nn as nn


class DeepMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_mtp_layers = config.num_nextn_predict_layers
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])
        self.heads = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])

    def forward(self, x, spec_step_idx: int = 0):
        return self.layers[spec_step_idx % self.num_mtp_layers](x)

    def compute_logits(self, x, spec_step_idx: int = 0):
        return self.heads[spec_step_idx % self.num_mtp_layers](x)
'''

GATED_FACTORY = '''
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

_GATED_SPEC = '''
class SpeculativeConfig:
    def use_multi_module_mtp(self):
        num_mtp_layers = getattr(self.draft_model_config.hf_config, "num_nextn_predict_layers", 1)
        return min(num_mtp_layers, self.num_speculative_tokens) > 1
'''


def by_design_tree(base_head: str, base_call: str = "self.head(x)") -> dict[str, str]:
    """A V2-shaped dispatch: the eagle-style speculator runs its base class's loop and head
    helper (``base_head``: the helper's body; it takes the step, the base loop's ``base_call``
    passes none by default),
    as vLLM's V2 eagle-style speculator does; the multi-module one
    overrides both and threads the step."""
    speculators = f'''
from vllm.loader import get_model


class BaseSpeculator:
    def __init__(self, vllm_config):
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens

    def load_model(self):
        self.model = get_model(self.vllm_config)

    def head(self, x, spec_step_idx: int = 0):
        {base_head}

    def propose(self, x):
        for step in range(self.num_speculative_steps):
            x = self.model(x)
            x = {base_call}
        return x


class EagleStyleSpeculator(BaseSpeculator):
    pass


class MultiModuleSpeculator(BaseSpeculator):
    def head(self, x, spec_step_idx):
        return self.model.compute_logits(x, spec_step_idx=spec_step_idx)

    def propose(self, x):
        for step in range(self.num_speculative_steps):
            x = self.model(x, spec_step_idx=step)
            x = self.head(x, step)
        return x
'''
    return {
        "vllm/loader.py": LOADER,
        "vllm/config/speculative.py": _GATED_SPEC,
        "vllm/spec_decode/__init__.py": GATED_FACTORY,
        "vllm/spec_decode/speculators.py": speculators,
        "vllm/models/registry.py": '_SPECULATIVE_DECODING_MODELS = {\n    "DeepMTPModel": ("deep_mtp", "DeepMTP"),\n}\n',
        "vllm/models/deep_mtp.py": _HEADED_MODEL,
    }
