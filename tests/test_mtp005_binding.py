"""MTP005 binds a step passed by position through each callee's signature (issue 18,
item 7): where it lands in another parameter, the finding at the call keeps one id
however many classes it lists (item 9), apart from the TypeError finding at the same call;
and the binding it rests on is CPython's."""

from __future__ import annotations

import inspect

from scan_helpers import by_rule, scan_tree, write_tree

from auditor.analyses.analysis import Analysis
from auditor.common.config import Config
from auditor.facts.cache import FactsCache
from auditor.index.index import Index
from auditor.model.findings import Meaning
from auditor.source.trees import DirectoryTree

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



# (signature after ``self``, call arguments): the binding of each against CPython's own
# (``inspect.Signature.bind`` on the same parameters, built as objects: nothing is executed).
_SHAPES = [
    ("input_ids, positions, hidden_states, intermediate_tensors=None, spec_step_idx=0", "a, b, c, d"),
    ("input_ids, positions, hidden_states, intermediate_tensors=None, spec_step_idx=0", "a, b, c, None, d"),
    ("x, h=None, *, spec_step_idx=0", "a, b"),
    ("x, *rest, spec_step_idx=0", "a, b, c"),
    ("x, h=None, spec_step_idx=0", "a, b, h=c"),
    ("x, h=None, spec_step_idx=0", "a, b, spec_step_idx=c"),
    ("x, /, h=None, **kwargs", "a, x=b"),
    ("x", "a, b"),
]


def _signature(text: str) -> inspect.Signature:
    kinds = inspect.Parameter
    params, kind = [], kinds.POSITIONAL_OR_KEYWORD
    names = [p.strip() for p in text.split(",")]
    if "/" in names:
        params = [kinds(n, kinds.POSITIONAL_ONLY) for n in names[:names.index("/")]]
        names = names[names.index("/") + 1:]
    for n in names:
        if n == "*":
            kind = kinds.KEYWORD_ONLY
        elif n.startswith("**"):
            params.append(kinds(n[2:], kinds.VAR_KEYWORD))
        elif n.startswith("*"):
            params.append(kinds(n[1:], kinds.VAR_POSITIONAL))
            kind = kinds.KEYWORD_ONLY
        else:
            name, _, default = n.partition("=")
            params.append(kinds(name, kind, default=default or kinds.empty))
    return inspect.Signature(params)


def _python_binding(sig: inspect.Signature, call: str) -> tuple[list[str], set[str], int]:
    """(slot of each positional argument, parameters given twice, arguments too many)."""
    args = [a.strip() for a in call.split(",")]
    positional = [a for a in args if "=" not in a]
    keywords = {k: v for k, _, v in (a.partition("=") for a in args if "=" in a)}
    fixed = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    slots = [p.name for p in fixed[:len(positional)]]
    try:
        sig.bind(*positional, **keywords)
    except TypeError as e:
        if "multiple values" in str(e):
            return slots, {str(e).split("'")[1]}, 0
        if "too many positional" in str(e):
            return slots, set(), len(positional) - len(fixed)
        raise
    return slots, set(), 0


def test_the_binding_agrees_with_python(tmp_path):
    classes = "".join(f"\n\nclass C{i}(nn.Module):\n    def forward(self, {sig}):\n        return None\n"
                      for i, (sig, _) in enumerate(_SHAPES))
    callers = "".join(f"\n    def run{i}(self, a, b, c, d, spec_step_idx):\n        return self.c{i}({call})\n"
                      for i, (_, call) in enumerate(_SHAPES))
    inits = "".join(f"        self.c{i} = C{i}()\n" for i in range(len(_SHAPES)))
    src = f"import torch.nn as nn\n{classes}\n\nclass Caller:\n    def __init__(self):\n{inits}{callers}"
    root = write_tree(tmp_path, {"vllm/m_mtp.py": src})
    index = Index(DirectoryTree(root), Config(), FactsCache(None), 1)
    index.load_seeds()
    a = Analysis(index, Config())
    for i, (sig, call) in enumerate(_SHAPES):
        key = ("vllm/m_mtp.py", f"Caller.run{i}")
        fn = a.index.function(key)
        assert fn is not None
        targets = a.calls.targets(key, fn, ("vllm/m_mtp.py", "Caller"), 0)
        assert [t.func[1] for t in targets] == [f"C{i}.forward"]
        b = a.calls.bind(fn.calls[0], fn, targets[0])
        slots, twice, too_many = _python_binding(_signature(sig), call)
        assert b.slots == slots, (sig, call)
        assert set(b.duplicates) == twice, (sig, call)
        assert len(b.extra_positional) == too_many, (sig, call)
