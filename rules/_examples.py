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
