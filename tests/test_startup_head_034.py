"""A start-up pass to a head method every call of which raises, in vLLM 0.34.0's shape (issue 18,
auditor/analyses/dispatch/startup.py), on small trees written here:

* the runner's ``self.speculator`` is what the dispatch factory returns, and the factory computes
  the class it builds (``speculator_cls(...)``): no type of the attribute names the drafter, the
  factory's call does;
* the drafter's ``propose(x, num_speculative_tokens=None)`` defaults its parameter with
  ``if num_speculative_tokens is None: num_speculative_tokens = self.num_speculative_steps`` and
  hands ``skip_sample=num_speculative_tokens == 0`` to its prefill, which returns early when told
  to skip;
* the sample reads the logits cache it is handed (``self.logits``), which the constructor sets to
  None and a private method the base's load method calls (through ``super().load_model()``)
  fills only for probabilistic sampling;
* the head call sits one method deeper (``self.top_tokens(x)`` -> ``self.model.get_top_tokens``).

Greedy local argmax is rejected at start-up; probabilistic sampling (the cache may be filled), a
parameter rebound otherwise than by the default idiom, or no local argmax, are not."""

from __future__ import annotations

from scan_helpers import write_tree
from test_layers import planned_scan
from test_startup_passes import (
    _COMPILATION,
    _EITHER_WAY,
    _ENVS,
    _HEAD_MODEL,
    _PLATFORM,
    _RUNNER,
    _WORKER,
    COMPILED_GATE,
)
from trees import gate_tree

from auditor.analyses.dispatch import Setting

# The dispatch factory computes the class it builds from a qualified name (as vLLM 0.34.0's
# init_speculator resolves its speculator config's ``speculator_class``).
_UTILS = '''
import importlib


def resolve_obj_by_qualname(qualname):
    module_name, obj_name = qualname.rsplit(".", 1)
    module = importlib.import_module(module_name)
    return getattr(module, obj_name)
'''

_FACTORY = '''
from vllm.utils import resolve_obj_by_qualname


def init_speculator(vllm_config):
    speculator_cls = resolve_obj_by_qualname("vllm.spec_decode.speculators.MultiModuleSpeculator")
    return speculator_cls(vllm_config)
'''

_SPECULATORS = '''
from vllm.loader import get_model


def make_cache():
    raise NotImplementedError


class BaseSpeculator:
    def __init__(self, vllm_config):
        self.vllm_config = vllm_config
        self.speculative_config = vllm_config.speculative_config
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens
        self.local_argmax = self.speculative_config.use_local_argmax_reduction
        self.use_logits = self.speculative_config.draft_sample_method == "probabilistic"
        self.logits = None

    def load_model(self):
        self.model = get_model(self.vllm_config)
        if self.use_logits:
            self._init_logits()

    def _init_logits(self):
        self.logits = make_cache()

    def top_tokens(self, x):
        return self.model.get_top_tokens(x)

    def sample(self, x, logits):
        if logits is None and self.local_argmax:
            return self.top_tokens(x)
        return self.model.compute_logits(x)


class MultiModuleSpeculator(BaseSpeculator):
    def __init__(self, vllm_config):
        super().__init__(vllm_config)

    def load_model(self):
        super().load_model()

    def prefill(self, x, skip_sample=False):
        x = self.model(x)
        if skip_sample:
            return x
        return self.sample(x, self.logits)

    def propose(self, x, num_speculative_tokens=None):
        {default}
        x = self.prefill(x, skip_sample=num_speculative_tokens == 0)
        for step in range(1, self.num_speculative_steps):
            x = self.model(x, spec_step_idx=step)
        return x


class EagleStyleSpeculator(MultiModuleSpeculator):
    def propose(self, x):
        for step in range(self.num_speculative_steps):
            x = self.model(x)
        return x
'''

_IDIOM = "if num_speculative_tokens is None:\n            num_speculative_tokens = self.num_speculative_steps"
# The same value, bound otherwise: the parameter is unknown below it.
_OTHER = "num_speculative_tokens = num_speculative_tokens or self.num_speculative_steps"

_GREEDY = (("use_local_argmax_reduction", True),)
_PROBABILISTIC = (("use_local_argmax_reduction", True), ("draft_sample_method", "probabilistic"))


def _plans(tmp_path, options, default: str = _IDIOM):
    files = gate_tree()
    files["vllm/config/speculative.py"] = files["vllm/config/speculative.py"].replace(
        "class SpeculativeConfig:\n", 'class SpeculativeConfig:\n    draft_sample_method: str = "greedy"\n'
        "    use_local_argmax_reduction: bool = False\n")
    files["vllm/utils.py"] = _UTILS
    files["vllm/spec_decode/__init__.py"] = _FACTORY
    files["vllm/spec_decode/speculators.py"] = _SPECULATORS.replace("{default}", default)
    files["vllm/models/deep_mtp.py"] = _HEAD_MODEL
    files["vllm/platforms/cpu.py"] = _PLATFORM
    files["vllm/envs.py"] = _ENVS
    files["vllm/config/compilation.py"] = _COMPILATION
    files["vllm/worker/cpu_worker.py"] = _WORKER.replace("{gate}", COMPILED_GATE) + _EITHER_WAY
    files["vllm/worker/model_runner.py"] = _RUNNER.replace("{dispatch}", "self.speculator.propose(num_tokens)")
    root = write_tree(tmp_path / "t", files)
    settings = [Setting("v2", 2, platform="cpu", architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 2),),
                        options=o) for o in options]
    return planned_scan(root, settings)[1]


def test_a_profile_run_through_a_factory_built_speculator_to_a_raising_head_rejects_at_start_up(tmp_path):
    greedy, probabilistic, plain = _plans(tmp_path, [_GREEDY, _PROBABILISTIC, ()])
    assert greedy.proposer is not None and greedy.proposer[1] == "MultiModuleSpeculator"
    assert greedy.outcome == "rejected", greedy.notes
    (r,) = greedy.rejections
    assert (r.path, r.function, r.when) == ("vllm/models/deep_mtp.py", "DeepMTP.get_top_tokens", "startup")
    why = greedy.steps[0].why
    assert why.startswith("rejected at start-up: CPUWorker.compile_or_warm_up_model") and "ModelRunner._dummy_run" in why
    assert "MultiModuleSpeculator.propose" in why and "MultiModuleSpeculator.prefill" in why
    assert "BaseSpeculator.sample" in why and "BaseSpeculator.top_tokens" in why
    assert "calls the draft model's get_top_tokens before serving" in why
    # Probabilistic sampling: the load may fill the cache the sample is handed, so the call is
    # not known to be made (a note, no rejection); without local argmax it is never made.
    assert probabilistic.outcome != "rejected" and not probabilistic.rejections
    assert plain.outcome != "rejected" and not plain.rejections


def test_a_parameter_rebound_otherwise_than_by_the_default_idiom_keeps_the_start_up_unknown(tmp_path):
    (greedy,) = _plans(tmp_path, [_GREEDY], default=_OTHER)
    assert greedy.outcome != "rejected" and not greedy.rejections
    assert any("a start-up pass may call the draft model's get_top_tokens" in n and "skip_sample" in n
               for n in greedy.notes), greedy.notes
