"""Small trees for MTP007's examples and tests: a draft loop that threads the step, a
CUDA-graph wrapper, and the places that install it (kept tiny on purpose)."""

from __future__ import annotations

from rules._examples import LOADER, PREDICTOR

# A draft model whose forward selects a layer by the step (the _examples predictor,
# wrapped; ``decorator`` goes above the wrapper class).
def model(decorator: str = "") -> str:
    return PREDICTOR + f'''

{decorator}
class WrapperMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = Predictor(config)

    def forward(self, input_ids, positions, hidden_states, spec_step_idx: int = 0):
        return self.model(input_ids, positions, hidden_states, spec_step_idx)
'''


# A proposer whose draft loop passes step i to ``self.model`` (a registry-built model).
PROPOSER = '''
from vllm.loader import get_model


class Proposer:
    def __init__(self, config):
        self.config = config
        self.num_speculative_tokens = config.num_speculative_tokens

    def load_model(self):
        self.model = get_model(self.config)

    def propose(self, input_ids, positions, hidden_states):
        out = []
        for token_index in range(self.num_speculative_tokens - 1):
            hidden_states = self.model(input_ids, positions, hidden_states, spec_step_idx=token_index + 1)
            out.append(hidden_states)
        return out
'''

# A graph wrapper: captures on the first call per key, replays afterwards. The key is the
# batch from a forward context, plus key_fn(*args, **kwargs) when one is given.
GRAPHS = '''
import torch

from vllm.context import current_batch


class GraphWrapper:
    def __init__(self, runnable, key_fn=None):
        self.runnable = runnable
        self.key_fn = key_fn
        self.graphs = {}
        self.outputs = {}

    def __call__(self, *args, **kwargs):
        key = current_batch()
        if self.key_fn is not None:
            key = (key, self.key_fn(*args, **kwargs))
        graph = self.graphs.get(key)
        if graph is None:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.outputs[key] = self.runnable(*args, **kwargs)
            self.graphs[key] = graph
        graph.replay()
        return self.outputs[key]
'''

CONTEXT = "def current_batch():\n    return 8\n"


def runner(install: str, guard: str | None = "graphs_enabled()") -> str:
    """A model runner that builds the drafter and, in load_model, wraps its model."""
    body = f"self.drafter.model = {install}"
    if guard is not None:
        body = f"if {guard}:\n            {body}"
    return f'''
import os

from vllm.graphs import GraphWrapper
from vllm.spec_decode.proposer import Proposer


def graphs_enabled():
    return os.environ.get("USE_GRAPHS") == "1"


class Runner:
    def __init__(self, config):
        self.drafter = Proposer(config)

    def load_model(self):
        self.drafter.load_model()
        {body}
'''


UNKEYED = "GraphWrapper(self.drafter.model)"
KEYED = 'GraphWrapper(self.drafter.model, key_fn=lambda *args, **kwargs: kwargs["spec_step_idx"])'


def wrapper_tree(install: str, guard: str | None = "graphs_enabled()") -> dict[str, str]:
    return {
        "vllm/loader.py": LOADER,
        "vllm/context.py": CONTEXT,
        "vllm/graphs.py": GRAPHS,
        "vllm/models/m_mtp.py": model(),
        "vllm/spec_decode/proposer.py": PROPOSER,
        "vllm/runner.py": runner(install, guard),
    }


# A speculator that captures its whole draft loop as one graph: the loop runs (and
# selects layer i at step i) while the graph is recorded.
LOOP_CAPTURE = '''
import torch

from vllm.loader import get_model


class GraphManager:
    def capture(self, forward_fn):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            forward_fn()
        self.graph = graph

    def replay(self):
        self.graph.replay()


class Speculator:
    def __init__(self, config):
        self.config = config
        self.num_speculative_steps = config.num_speculative_tokens
        self.manager = GraphManager()

    def load_model(self):
        self.model = get_model(self.config)

    def capture(self):
        self.manager.capture(self.generate_drafts)

    def generate_drafts(self):
        hidden_states = self.hidden_states
        for step in range(self.num_speculative_steps):
            hidden_states = self.model(self.input_ids, self.positions, hidden_states, spec_step_idx=step)
        return hidden_states
'''


def loop_capture_tree() -> dict[str, str]:
    return {
        "vllm/loader.py": LOADER,
        "vllm/models/m_mtp.py": model(),
        "vllm/spec_decode/speculator.py": LOOP_CAPTURE,
    }


COMPILE_DECORATOR = "def support_torch_compile(cls=None, **kwargs):\n    return cls\n"


def compile_tree(decorator: str = "@support_torch_compile") -> dict[str, str]:
    src = model(decorator).replace(
        "import torch.nn as nn\n", "import torch.nn as nn\n\nfrom vllm.compilation import support_torch_compile\n", 1
    )
    return {
        "vllm/loader.py": LOADER,
        "vllm/compilation.py": COMPILE_DECORATOR,
        "vllm/models/m_mtp.py": src,
        "vllm/spec_decode/proposer.py": PROPOSER,
    }
