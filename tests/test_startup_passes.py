"""Start-up passes (issue 18, auditor/analyses/dispatch/startup.py), on small trees written
here: a worker whose start-up warm-up (run only when the engine compiles) calls the runner's
profile run, which runs the drafter's draft loop over every step, into a draft model that
asserts step 0. Compiled, the failing step runs at start-up: ``rejected``; eager, the warm-up
is skipped: ``raises at step 1``. A warm-up that runs step 0 only leaves ``raises at step 1``
in both; one behind a setting the configuration leaves unknown says so."""

from __future__ import annotations

import pytest
from scan_helpers import write_tree
from test_layers import planned_scan

from auditor.analyses.dispatch import DispatchProvider, Setting
from auditor.analyses.dispatch.env_defaults import Raises, env_defaults
from test_forward_reads import _MODEL as _FORWARD_READS_MODEL
from trees import _model, gate_tree

_FORWARD = "    def forward(self, x, spec_step_idx: int = 0):\n"
# gate_tree's DeepMTP, asserting a single step.
_ONE_STEP_MODEL = _model("DeepMTP", "num_nextn_predict_layers").replace(
    _FORWARD, _FORWARD + '        assert spec_step_idx == 0, "one step only"\n')

_PLATFORM = '''
class CpuPlatform:
    @classmethod
    def check_and_update_config(cls, vllm_config):
        parallel_config = vllm_config.parallel_config
        if parallel_config.worker_cls == "auto":
            parallel_config.worker_cls = "vllm.worker.cpu_worker.CPUWorker"
        vllm_config.compilation_config.cudagraph_capture_sizes = []
'''

_ENVS = '''
import os

environment_variables = {
    "VLLM_SKIP_WARMUP": lambda: bool(int(os.getenv("VLLM_SKIP_WARMUP", "0"))),
}
'''

_COMPILATION = '''
import enum


class CompilationMode(enum.IntEnum):
    NONE = 0
    VLLM_COMPILE = 3
'''

_WORKER = '''
from vllm import envs
from vllm.config.compilation import CompilationMode
from vllm.worker.model_runner import ModelRunner


class CPUWorker:
    def __init__(self, vllm_config):
        self.compilation_config = vllm_config.compilation_config
        self.cache_config = vllm_config.cache_config
        self.model_runner = ModelRunner(vllm_config)

    def _should_warm_up_model(self):
        if envs.VLLM_SKIP_WARMUP:
            return False
        return {gate}

    def determine_available_memory(self):
        if self._should_warm_up_model():
            self.model_runner.warm_up()
        return 0
'''

_RUNNER = '''
from vllm.spec_decode import init_speculator


class ModelRunner:
    def __init__(self, vllm_config):
        self.speculator = init_speculator(vllm_config)

    def warm_up(self):
        self.profile_run()

    def profile_run(self):
        self._dummy_run(8, is_profile=True)

    def _dummy_run(self, num_tokens, is_profile=False):
        if not is_profile:
            return None
        if self.speculator is not None:
            {dispatch}
        return None
'''

_DIRECT = "self.speculator.{call}(num_tokens)"
# The drafter's loop runs unless a captured graph is replayed instead.
_REPLAY_OR_LOOP = '''if self.batch_desc.cg_mode == CUDAGraphMode.FULL:
                self.graphs[self.batch_desc].replay()
            else:
                self.speculator.{call}(num_tokens)'''

# A drafter warm-up that runs the draft model once, at step 0 (V1's dummy_run hands no step).
_STEP_ZERO = '''

    def dummy_run(self, x):
        return self.model(x)
'''

# A profile run on both sides of a test the configuration leaves unknown (vLLM's GPU worker).
_EITHER_WAY = '''
    def compile_or_warm_up_model(self):
        if self.cache_config.kv_cache_memory_bytes:
            self.model_runner.profile_run()
            return 1
        self.model_runner.profile_run()
        return 0
'''

COMPILED_GATE = "self.compilation_config.mode != CompilationMode.NONE"


def _plans(tmp_path, gate: str = COMPILED_GATE, call: str = "propose", replay: bool = False, graphs: bool = False,
           either_way: bool = False, model: str = _ONE_STEP_MODEL, method: str = _STEP_ZERO, runner: str = _RUNNER):
    files = gate_tree()
    files["vllm/models/deep_mtp.py"] = model
    if call != "propose":  # a method of the multi-module speculator
        head, sep, tail = files["vllm/spec_decode/speculators.py"].partition("\n\nclass EagleStyleSpeculator")
        files["vllm/spec_decode/speculators.py"] = head + method + sep + tail
    files["vllm/platforms/cpu.py"] = _PLATFORM if not graphs else _PLATFORM.replace(
        "        vllm_config.compilation_config.cudagraph_capture_sizes = []\n", "")
    files["vllm/envs.py"] = _ENVS
    files["vllm/config/compilation.py"] = _COMPILATION
    files["vllm/worker/cpu_worker.py"] = _WORKER.replace("{gate}", gate) + (_EITHER_WAY if either_way else "")
    files["vllm/worker/model_runner.py"] = runner.replace("{dispatch}", _REPLAY_OR_LOOP if replay else _DIRECT).replace(
        "{call}", call)
    root = write_tree(tmp_path / "t", files)
    setting = Setting("v2", 2, platform="cpu", architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 2),))
    return planned_scan(root, [setting])[1][0]


def test_a_compiled_warm_up_that_runs_the_draft_loop_rejects_at_start_up(tmp_path):
    plan = _plans(tmp_path)
    # Eager: the warm-up is skipped (compilation mode NONE), the assert fails while serving.
    assert plan.outcome == "raises" and plan.raises_at_step == 1
    assert [s.verdict for s in plan.steps] == ["threaded", "raises at step 1"]
    assert not any("start-up" in n for n in plan.notes)
    view = plan.compiled
    assert view is not None and view.outcome == "rejected"
    assert [s.verdict for s in view.steps] == ["rejected", "rejected"]
    (r,) = view.rejections
    assert (r.path, r.function, r.when) == ("vllm/models/deep_mtp.py", "DeepMTP.forward", "startup")
    assert "one step only" in r.message
    why = view.steps[0].why
    assert why.startswith("rejected at start-up: CPUWorker.determine_available_memory (vllm/worker/cpu_worker.py:")
    assert "ModelRunner._dummy_run" in why and "MultiModuleSpeculator.propose" in why and "step 1 fails" in why


def test_a_warm_up_that_runs_step_zero_only_leaves_the_raise_in_both_modes(tmp_path):
    plan = _plans(tmp_path, call="dummy_run")
    assert plan.outcome == "raises" and plan.raises_at_step == 1
    view = plan.compiled
    assert view is not None and view.outcome is None
    assert [s.verdict for s in view.steps] == ["threaded", "raises at step 1"]


def test_a_warm_up_behind_an_unknown_setting_is_said_not_guessed(tmp_path):
    plan = _plans(tmp_path, gate="self.cache_config.kv_cache_memory_bytes is None")
    assert plan.outcome == "raises" and plan.raises_at_step == 1
    view = plan.compiled
    assert view is not None and view.outcome is None
    assert "a start-up pass may run the draft loop" in view.why and "_should_warm_up_model()" in view.why
    assert any(n.startswith("eager: a start-up pass may run the draft loop") for n in plan.notes)


def test_a_warm_up_in_both_modes_rejects_the_eager_plan_too(tmp_path):
    plan = _plans(tmp_path, gate="not envs.VLLM_SKIP_WARMUP")
    assert plan.outcome == "rejected" and [s.verdict for s in plan.steps] == ["rejected", "rejected"]
    assert plan.rejections[0].when == "startup" and plan.compiled is None


def test_an_arm_that_replays_a_graph_is_not_taken_where_none_is_captured(tmp_path):
    plan = _plans(tmp_path, replay=True)
    assert plan.compiled is not None and plan.compiled.outcome == "rejected"


def test_where_graphs_are_captured_the_replay_arm_leaves_it_unknown(tmp_path):
    plan = _plans(tmp_path / "g", replay=True, graphs=True)
    view = plan.compiled
    assert view is not None and view.outcome is None
    assert "batch_desc.cg_mode == CUDAGraphMode.FULL" in view.why


def test_environment_defaults_are_read_with_every_variable_unset():
    src = b'''
import os
environment_variables = {
    "A": lambda: bool(int(os.getenv("A", "0"))),
    "B": lambda: os.environ.get("B", "x").lower(),
    "C": lambda: int(os.getenv("C", "0")) if "C" in os.environ else None,
    "D": lambda: os.getenv("D", "1") in ("1", "true"),
    "E": lambda: some_call(),
    "F": lambda: int(os.getenv("F", "nope")),
}
'''
    # F's default is text int() rejects: vLLM's read raises that, and so does the value's.
    assert env_defaults(src) == {"A": False, "B": "x", "C": None, "D": True,
                                 "F": Raises("ValueError: invalid literal for int() with base 10: 'nope'")}


def test_a_call_made_on_both_sides_of_an_unknown_test_is_made(tmp_path):
    plan = _plans(tmp_path, gate="self.cache_config.kv_cache_memory_bytes is None", either_way=True)
    assert plan.outcome == "rejected" and plan.rejections[0].when == "startup"
    assert "CPUWorker.compile_or_warm_up_model" in plan.steps[0].why


# A draft model whose per-layer module's inherited forward reads an attribute the block it
# builds lacks (test_forward_reads' tree): every call of the forward raises, whatever the step.
_LACKING_MODEL = _FORWARD_READS_MODEL.format(read="        if self.block.use_gather:\n            x = x + 1",
                                             block="OtherBlock()", pan_init="nn.Module.__init__(self)",
                                             other_bases="nn.Module", other_init="", extra="")
# The drafter's dummy run calls the draft model in a loop that runs once or K times (V1's).
_DUMMY_LOOP = '''

    def dummy_run(self, x, is_graph_capturing=False):
        only_one = is_graph_capturing or self.parallel_drafting
        for _ in range(1 if only_one else self.num_speculative_steps):
            self.model(x)
'''
# ... in a loop over steps 1..K-1, which may not run at all.
_DUMMY_LATER_STEPS = '''

    def dummy_run(self, x):
        for _ in range(1, self.num_speculative_steps):
            self.model(x)
'''
# The same over a count the caller hands in.
_DUMMY_HANDED_STEPS = '''

    def dummy_run(self, x, steps=None):
        for _ in range(1, steps):
            self.model(x)
'''
# A drafter warm-up that never calls the draft model.
_NO_MODEL_CALL = '''

    def dummy_run(self, x):
        return x
'''


@pytest.mark.parametrize("method", [_STEP_ZERO, _DUMMY_LOOP], ids=["direct", "loop"])
def test_a_compiled_dummy_run_that_calls_a_forward_that_always_raises_rejects_at_start_up(tmp_path, method):
    plan = _plans(tmp_path, call="dummy_run", model=_LACKING_MODEL, method=method)
    # Eager: the warm-up is skipped, the read raises at step 0 while serving.
    assert plan.outcome == "raises" and plan.raises_at_step == 0
    assert plan.step_raise is not None and plan.step_raise.any_call
    assert not any("start-up" in n for n in plan.notes)
    view = plan.compiled
    assert view is not None and view.outcome == "rejected"
    (r,) = view.rejections
    assert (r.path, r.function, r.when) == ("vllm/models/deep_mtp.py", "BaseLayer.forward", "startup")
    assert "no attribute 'use_gather'" in r.message
    why = view.steps[0].why
    assert why.startswith("rejected at start-up: CPUWorker.determine_available_memory (vllm/worker/cpu_worker.py:")
    assert "MultiModuleSpeculator.dummy_run" in why and "calls the draft model's forward before serving" in why
    assert "the draft model's forward fails at vllm/models/deep_mtp.py:" in why


def test_a_dummy_run_loop_that_may_not_iterate_leaves_the_start_up_unknown(tmp_path):
    plan = _plans(tmp_path, call="dummy_run", model=_LACKING_MODEL, method=_DUMMY_HANDED_STEPS)
    assert plan.outcome == "raises" and plan.raises_at_step == 0
    view = plan.compiled
    assert view is not None and view.outcome is None
    assert [s.verdict for s in view.steps] == ["raises at step 0", "raises at step 0"]
    assert "a start-up pass may call the draft model's forward" in view.why and "inside a loop" in view.why


def test_a_dummy_run_loop_over_the_k_the_constructor_copies_runs_at_k_2(tmp_path):
    # range(1, self.num_speculative_steps): the drafter's __init__ copies K (2 here) from the
    # speculative config and nothing else writes it, so the loop runs once: the warm-up calls
    # the forward that always raises.
    plan = _plans(tmp_path, call="dummy_run", model=_LACKING_MODEL, method=_DUMMY_LATER_STEPS)
    view = plan.compiled
    assert view is not None and view.outcome == "rejected"
    (r,) = view.rejections
    assert (r.function, r.when) == ("BaseLayer.forward", "startup")


def test_a_warm_up_that_never_calls_the_draft_model_keeps_the_raise(tmp_path):
    plan = _plans(tmp_path, call="dummy_run", model=_LACKING_MODEL, method=_NO_MODEL_CALL)
    assert plan.outcome == "raises" and plan.raises_at_step == 0
    view = plan.compiled
    assert view is not None and view.outcome is None and "start-up" not in view.why
    assert [s.verdict for s in view.steps] == ["raises at step 0", "raises at step 0"]


def test_a_dummy_run_behind_an_unknown_setting_is_said_not_guessed(tmp_path):
    plan = _plans(tmp_path, gate="self.cache_config.kv_cache_memory_bytes is None", call="dummy_run",
                  model=_LACKING_MODEL, method=_DUMMY_LOOP)
    assert plan.outcome == "raises" and plan.raises_at_step == 0
    view = plan.compiled
    assert view is not None and view.outcome is None
    assert "a start-up pass may call the draft model's forward" in view.why and "_should_warm_up_model()" in view.why


# V1's dummy run: an early return under a local read from the target's model config (its
# multimodal config), and the drafter's dummy run under a guard on the speculative config.
_GUARDED_RUNNER = '''
from vllm.spec_decode import init_speculator


class ModelRunner:
    def __init__(self, vllm_config):
        self.vllm_config = vllm_config
        self.speculative_config = vllm_config.speculative_config
        self.speculator = init_speculator(vllm_config)

    def warm_up(self):
        self.profile_run()

    def profile_run(self):
        self._dummy_run(8, is_profile=True)

    def _dummy_run(self, num_tokens, is_profile=False):
        mm_config = self.vllm_config.model_config.multimodal_config
        {rebind}if mm_config and mm_config.mm_encoder_only:
            return None
        if self.speculative_config and (
            self.speculative_config.use_multi_module_mtp()
            or self.speculative_config.method == "draft_model_with_a_long_name_for_the_text_limit"
        ):
            self.speculator.dummy_run(num_tokens)
        return None
'''


def _guarded_plan(tmp_path, rebind: str = "", spec_guard: str = ""):
    runner = _GUARDED_RUNNER.replace("{rebind}", rebind)
    if spec_guard:
        runner = runner.replace("self.speculative_config.use_multi_module_mtp()", spec_guard)
    return _plans(tmp_path, call="dummy_run", model=_LACKING_MODEL, method=_STEP_ZERO, runner=runner)


def test_a_dummy_run_behind_a_once_assigned_local_and_the_speculative_config_rejects_at_start_up(tmp_path):
    """The local is its one value above the guard (the target's multimodal config, None by
    the start-up assumption of a text-only target); the drafter's guard is the plan's own
    speculative config (method, K, the draft config), evaluated as the routes are."""
    plan = _guarded_plan(tmp_path)
    assert plan.outcome == "raises" and plan.raises_at_step == 0  # eager: no warm-up
    view = plan.compiled
    assert view is not None and view.outcome == "rejected"
    why = view.steps[0].why
    assert "ModelRunner._dummy_run" in why and "MultiModuleSpeculator.dummy_run" in why
    # The answer says what it assumed.
    assert "(assuming model_config.multimodal_config=null)" in why


def test_a_local_bound_twice_keeps_the_start_up_unknown(tmp_path):
    plan = _guarded_plan(tmp_path, rebind="if num_tokens:\n            mm_config = None\n        ")
    view = plan.compiled
    assert view is not None and view.outcome is None
    assert "a start-up pass may call the draft model's forward" in view.why
    assert "mm_config and mm_config.mm_encoder_only" in view.why


def test_a_speculative_config_guard_that_is_false_keeps_the_raise(tmp_path):
    plan = _guarded_plan(tmp_path, spec_guard='self.speculative_config.method == "ngram"')
    view = plan.compiled
    assert view is not None and view.outcome is None and "start-up" not in view.why
    assert [s.verdict for s in view.steps] == ["raises at step 0", "raises at step 0"]


@pytest.mark.release
def test_0_33_cpu_v2_mimo_is_rejected_at_start_up_compiled_and_raises_eager():
    """vLLM 0.33.0 on CPU: the worker's warm-up (compiled) runs the profile run, whose dummy
    run calls the multi-module speculator's propose, whose draft loop reaches MiMo's
    ``assert spec_step_idx == 0`` at step 1 before serving."""
    from release_cache import first_scan, release_cache_dir, release_root

    from auditor.common.config import Config
    from auditor.engine.scan import run_scan
    from auditor.facts.cache import FactsCache
    from auditor.services.layers import PlanQuery
    from auditor.source.trees import DirectoryTree
    from rules import all_rules

    settings = [Setting(r, 2, platform="cpu", architecture="MiMoMTPModel", fields=(("num_nextn_predict_layers", 2),))
                for r in ("v1", "v2")]
    with first_scan("0.33.0"):
        scan = run_scan(DirectoryTree(release_root("0.33.0")), Config(), all_rules(), FactsCache(release_cache_dir()),
                        2, queries=[PlanQuery(lambda _dispatch: settings)])
    assert scan.analysis is not None
    v1, v2 = (scan.analysis.get(DispatchProvider).plan(s) for s in settings)
    assert v1.outcome == "plan" and (v1.compiled is None or v1.compiled.outcome is None)
    assert v2.outcome == "raises" and v2.raises_at_step == 1
    assert any(n.startswith("eager: a start-up pass may run the draft loop") and "_should_warm_up_model()" in n
               for n in v2.notes)
    assert v2.compiled is not None and v2.compiled.outcome == "rejected"
    why = v2.compiled.steps[0].why
    assert why.startswith("rejected at start-up: CPUWorker.determine_available_memory (vllm/v1/worker/cpu_worker.py:")
    assert "MultiModuleMTPSpeculator._generate_drafts" in why and "mimo_mtp.py" in why


# A draft model whose head method fails whenever it is called for this configuration (its
# constructor leaves the attribute the method asserts on None), and a drafter whose step-0 sample
# runs in a method its warm-up calls before the draft loop, reaching the head method only for
# greedy local-argmax sampling (V2's _prefill -> sample_draft, vLLM 0.28-0.31).
_HEAD_MODEL = _ONE_STEP_MODEL.replace('        assert spec_step_idx == 0, "one step only"\n', "").replace(
    "        super().__init__()\n", "        super().__init__()\n        self.masked = None\n") + '''
    def compute_logits(self, x):
        return x

    def get_top_tokens(self, x):
        assert self.masked is not None
        return x
'''
_PREFILL_SAMPLE = '''

    def __init__(self, vllm_config):
        self.speculative_config = vllm_config.speculative_config
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens
        self.local_argmax = self.speculative_config.use_local_argmax_reduction
        self.logits = None
        if self.speculative_config.draft_sample_method == "probabilistic":
            self.logits = make_cache()

    def sample(self, x, logits):
        if logits is not None:
            return self.model.compute_logits(x)
        elif self.local_argmax:
            return self.model.get_top_tokens(x)
        return self.model.compute_logits(x)

    def prefill(self, x):
        return self.sample(self.model(x), self.logits)

    def dummy_run(self, x):
        self.prefill(x)
        for step in range(1, self.num_speculative_steps):
            x = self.sample(self.model(x, spec_step_idx=step), self.logits)
        return x
'''


def _head_plans(tmp_path, options):
    files = gate_tree()
    files["vllm/config/speculative.py"] = files["vllm/config/speculative.py"].replace(
        "class SpeculativeConfig:\n", 'class SpeculativeConfig:\n    draft_sample_method: str = "greedy"\n'
        "    use_local_argmax_reduction: bool = False\n")
    files["vllm/models/deep_mtp.py"] = _HEAD_MODEL
    head, sep, tail = files["vllm/spec_decode/speculators.py"].partition("\n\nclass EagleStyleSpeculator")
    loop = "    def propose(self, x):\n        for step in range(self.num_speculative_steps):\n" \
           "            x = self.model(x, spec_step_idx=step)\n        return x\n"
    head = head.replace(loop, "    def propose(self, x):\n        return self.dummy_run(x)\n")
    files["vllm/spec_decode/speculators.py"] = head + _PREFILL_SAMPLE + sep + tail
    files["vllm/platforms/cpu.py"] = _PLATFORM
    files["vllm/envs.py"] = _ENVS
    files["vllm/config/compilation.py"] = _COMPILATION
    files["vllm/worker/cpu_worker.py"] = _WORKER.replace("{gate}", COMPILED_GATE) + _EITHER_WAY
    files["vllm/worker/model_runner.py"] = _RUNNER.replace("{dispatch}", _DIRECT).replace("{call}", "dummy_run")
    root = write_tree(tmp_path / "t", files)
    settings = [Setting("v2", 2, platform="cpu", architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 2),),
                        options=o) for o in options]
    return planned_scan(root, settings)[1]


def test_a_warm_up_calling_a_raising_head_method_before_the_loop_rejects_at_start_up(tmp_path):
    greedy, probabilistic, plain = _head_plans(tmp_path, [
        (("use_local_argmax_reduction", True),),
        (("use_local_argmax_reduction", True), ("draft_sample_method", "probabilistic")),
        (),
    ])
    assert greedy.outcome == "rejected", greedy.notes
    (r,) = greedy.rejections
    assert (r.path, r.function, r.when) == ("vllm/models/deep_mtp.py", "DeepMTP.get_top_tokens", "startup")
    why = greedy.steps[0].why
    assert why.startswith("rejected at start-up: CPUWorker.compile_or_warm_up_model") and "calls the draft model's " \
        "get_top_tokens before serving" in why and "MultiModuleSpeculator.sample" in why
    # Probabilistic sampling hands the cache on (self.logits is not None): compute_logits, no raise.
    assert probabilistic.outcome != "rejected" and not probabilistic.rejections
    # Without local argmax the head method is never called.
    assert plain.outcome != "rejected"
