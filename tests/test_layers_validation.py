"""Rejections outside the speculative config's own methods (issue 18), on small trees written
here (:mod:`trees` shape): the runner's own check of what it supports (V2's
``VllmConfig._validate_v2_model_runner``: a list collected by guarded appends, raised when
not empty), and a drafter's check while it loads the draft model (``hasattr`` of a head
method on the model a registry loader built)."""

from __future__ import annotations

import pytest
from scan_helpers import write_tree
from test_layers import planned_scan
from trees import gate_tree

from auditor.analyses.dispatch import Setting

_VLLM_CONFIG = '''
from elsewhere import HAS_TRITON


class VllmConfig:
    def _get_v2_model_runner_unsupported_features(self):
        unsupported = []
        speculative_config = self.speculative_config
        if self.parallel_config.pipeline_parallel_size > 1:
            unsupported.append("pipeline parallelism")
        if speculative_config is not None:
            if speculative_config.method == "ngram":
                unsupported.append("ngram")
            if speculative_config.parallel_drafting and speculative_config.method != "dflash":
                unsupported.append("parallel drafting")
        return unsupported

    def _validate_v2_model_runner(self):
        if not HAS_TRITON:
            raise ValueError("Model Runner V2 requires Triton.")
        unsupported = self._get_v2_model_runner_unsupported_features()
        if unsupported:
            raise ValueError(f"Model Runner V2 does not yet support: {', '.join(unsupported)}")
'''

_LOADING = '''
    def load_model(self):
        self.model = get_model(self.vllm_config)
        self._check_head()

    def _check_head(self):
        if self.use_local_argmax:
            if not hasattr(self.model, "get_top_tokens"):
                raise ValueError("draft model does not implement get_top_tokens()")
'''


def _files(drafter_extra: str = "", model_extra: str = "", model_bases: str = "nn.Module") -> dict[str, str]:
    files = gate_tree()
    files["vllm/config/vllm.py"] = _VLLM_CONFIG
    spec = files["vllm/spec_decode/speculators.py"]
    spec = spec.replace('''    def load_model(self):
        self.model = get_model(self.vllm_config)
''', _LOADING).replace('''        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens
''', '''        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens
        self.use_local_argmax = vllm_config.speculative_config.use_local_argmax_reduction
''')
    files["vllm/spec_decode/speculators.py"] = spec + drafter_extra
    model = files["vllm/models/deep_mtp.py"].replace("class DeepMTP(nn.Module):", f"class DeepMTP({model_bases}):")
    files["vllm/models/deep_mtp.py"] = model + model_extra
    return files


def _plans(tmp_path, settings: list[Setting], **variant: str):
    root = write_tree(tmp_path / "t", _files(**variant))
    return planned_scan(root, settings)[1]


def _deep(runner: str, **options: object) -> Setting:
    return Setting(runner, 2, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 2),),
                   options=tuple(sorted(options.items())))


def test_v2_rejects_what_its_runner_check_collects_with_the_message_and_line(tmp_path):
    plans = _plans(tmp_path, [_deep("v2", parallel_drafting=True), _deep("v2", parallel_drafting=False),
                              _deep("v2"), _deep("v1", parallel_drafting=True)])
    rejected, off, unset, v1 = plans
    assert rejected.outcome == "rejected", rejected.steps
    r = rejected.rejections[0]
    assert (r.path, r.line, r.function) == ("vllm/config/vllm.py", 23, "VllmConfig._validate_v2_model_runner")
    assert "Model Runner V2 does not yet support" in r.message
    # The pipeline-parallel append is not decided (the configuration leaves it unknown), and
    # it comes first in the list: the message says so.
    assert "(unsupported: parallel drafting; an item not decided may come first)" in r.message
    # Decided against, or unknown (an option the configuration leaves unset): a plan.
    assert off.outcome == "plan" and unset.outcome == "plan"
    # V1 does not run V2's check (this tree has no V1 factory: what V1 does is unknown, not rejected)
    assert v1.outcome == "unknown" and not v1.rejections


_EXTENDED = _VLLM_CONFIG.replace('''        return unsupported

    def _validate''', '''        if self.parallel_config.use_ubatching:
            unsupported.extend(self._get_dbo_unsupported_features())
        return unsupported

    def _get_dbo_unsupported_features(self):
        return ["dual batch overlap"]

    def _validate''')


@pytest.mark.parametrize("guard", ["self.parallel_config.use_ubatching", "True"])
def test_a_collected_list_that_is_also_extended_is_still_read(tmp_path, guard):
    """``unsupported.extend(...)`` adds what another list holds (none or several items): the
    list is still read (vLLM 0.31.0-0.33.0 collect that way), an extend is never taken to
    make it non-empty, and the message says an undecided item may precede the known ones."""
    files = _files()
    files["vllm/config/vllm.py"] = _EXTENDED.replace("if self.parallel_config.use_ubatching:", f"if {guard}:")
    root = write_tree(tmp_path / "t", files)
    rejected, unset = planned_scan(root, [_deep("v2", parallel_drafting=True), _deep("v2")])[1]
    assert rejected.outcome == "rejected", rejected.steps
    assert "(unsupported: parallel drafting; an item not decided may come first)" in rejected.rejections[0].message
    # An extend whose guard holds may still add nothing: without parallel drafting the list's
    # emptiness stays undecided, and the configuration is not rejected.
    assert unset.outcome == "plan" and not unset.rejections


def test_a_list_whose_every_item_is_decided_names_them_all(tmp_path):
    files = _files()
    files["vllm/config/vllm.py"] = _VLLM_CONFIG.replace("self.parallel_config.pipeline_parallel_size > 1", "False")
    root = write_tree(tmp_path / "t", files)
    (rejected,) = planned_scan(root, [_deep("v2", parallel_drafting=True)])[1]
    assert rejected.rejections[0].message.endswith("(unsupported: parallel drafting)")


# V1's own check (vLLM 0.29.0+ ``VllmConfig._validate_v1_model_runner``, run when V1 is used).
_V1_CHECK = '''
    def _get_v1_model_runner_unsupported_features(self):
        unsupported = []
        if self.parallel_config.prefill_context_parallel_size > 1:
            unsupported.append("prefill context parallel")
        if self.speculative_config:
            if self.speculative_config.enable_adaptive_verification:
                unsupported.append("adaptive draft verification")
        return unsupported

    def _validate_v1_model_runner(self):
        unsupported = self._get_v1_model_runner_unsupported_features()
        if unsupported:
            raise ValueError(f"Model Runner V1 does not support: {', '.join(unsupported)}")
'''


def test_each_runner_runs_its_own_check_of_what_it_supports(tmp_path):
    files = _files()
    files["vllm/config/vllm.py"] = _VLLM_CONFIG + _V1_CHECK
    root = write_tree(tmp_path / "t", files)
    v1, v2, v1_off, v1_pd = planned_scan(root, [_deep("v1", enable_adaptive_verification=True),
                                                 _deep("v2", enable_adaptive_verification=True),
                                                 _deep("v1", enable_adaptive_verification=False),
                                                 _deep("v1", parallel_drafting=True)])[1]
    assert v1.outcome == "rejected", v1.steps
    r = v1.rejections[0]
    assert (r.path, r.function) == ("vllm/config/vllm.py", "VllmConfig._validate_v1_model_runner")
    assert r.message.endswith("(unsupported: adaptive draft verification; an item not decided may come first)")
    # V2 does not run V1's check, nor V1 V2's; an option decided off rejects nothing (this tree
    # has no V1 factory: what V1 then does is unknown, not rejected).
    assert v2.outcome == "plan" and not v2.rejections
    assert (v1_off.outcome, v1_pd.outcome) == ("unknown", "unknown") and not v1_off.rejections and not v1_pd.rejections


def test_a_drafter_rejects_a_draft_model_without_the_head_method_it_needs(tmp_path):
    plans = _plans(tmp_path, [_deep("v2", use_local_argmax_reduction=True), _deep("v2", use_local_argmax_reduction=False)])
    assert plans[0].outcome == "rejected", plans[0].steps
    r = plans[0].rejections[0]
    assert (r.path, r.function, r.when) == ("vllm/spec_decode/speculators.py", "MultiModuleSpeculator._check_head", "load")
    assert "does not implement get_top_tokens()" in r.message
    assert plans[1].outcome == "plan"


def test_a_model_with_the_head_method_or_a_base_the_tree_does_not_hold_is_not_rejected(tmp_path):
    has = _plans(tmp_path / "a", [_deep("v2", use_local_argmax_reduction=True)],
                 model_extra="\n    def get_top_tokens(self, x):\n        return x\n")
    assert has[0].outcome == "plan"
    foreign = _plans(tmp_path / "b", [_deep("v2", use_local_argmax_reduction=True)], model_bases="nn.Module, Mixin")
    assert foreign[0].outcome == "plan"  # Mixin (not in the tree) may define it: unknown


def test_a_check_the_drafter_overrides_away_is_not_reached(tmp_path):
    # The shape of Step3p5MTPProposer._maybe_share_lm_head in vLLM 0.29.0: a bare return.
    override = '''

class SkippingSpeculator(MultiModuleSpeculator):
    def _check_head(self):
        return
'''
    files = _files(drafter_extra=override)
    files["vllm/spec_decode/__init__.py"] = files["vllm/spec_decode/__init__.py"].replace(
        "import MultiModuleSpeculator\n\n        return MultiModuleSpeculator(", "import SkippingSpeculator\n\n        return SkippingSpeculator(")
    plan = planned_scan(write_tree(tmp_path / "t", files), [_deep("v2", use_local_argmax_reduction=True)])[1][0]
    assert plan.proposer is not None and plan.proposer[1] == "SkippingSpeculator"
    assert plan.outcome == "plan", plan.rejections


def test_a_load_method_that_calls_its_base_through_super_reaches_the_base_check(tmp_path):
    # The shape of vLLM 0.30.0's AutoRegressiveSpeculator.load_model: super().load_model(...)
    # then its own work; the base's load_model runs the head check.
    override = '''

class ChainedSpeculator(MultiModuleSpeculator):
    def load_model(self):
        super().load_model()
        if not self.use_local_argmax:
            return
'''
    files = _files(drafter_extra=override)
    files["vllm/spec_decode/__init__.py"] = files["vllm/spec_decode/__init__.py"].replace(
        "import MultiModuleSpeculator\n\n        return MultiModuleSpeculator(", "import ChainedSpeculator\n\n        return ChainedSpeculator(")
    on, off = planned_scan(write_tree(tmp_path / "t", files), [_deep("v2", use_local_argmax_reduction=True),
                                                               _deep("v2", use_local_argmax_reduction=False)])[1]
    assert on.proposer is not None and on.proposer[1] == "ChainedSpeculator"
    assert on.outcome == "rejected", (on.steps, on.notes)
    r = on.rejections[0]
    assert (r.function, r.when) == ("MultiModuleSpeculator._check_head", "load") and "get_top_tokens" in r.message
    assert off.outcome == "plan"


def test_an_undecided_test_whose_other_arm_raises_too_still_rejects(tmp_path):
    # V2's DraftModelSpeculator._validate_local_argmax_reduction (0.26.0): an early raise on an
    # option the configuration leaves unset, then the head check: rejected by one of the two.
    check = '''
    def _check_head(self):
        if not self.use_local_argmax:
            return
        if self.sample_method == "probabilistic":
            raise ValueError("not compatible with probabilistic sampling")
        if not hasattr(self.model, "get_top_tokens"):
            raise ValueError("draft model does not implement get_top_tokens()")
'''
    files = _files()
    spec = files["vllm/spec_decode/speculators.py"]
    start = spec.index("    def _check_head(self):")
    end = spec.index("    def propose", start)
    spec = spec[:start] + check.lstrip("\n") + "\n" + spec[end:]
    files["vllm/spec_decode/speculators.py"] = spec.replace(
        "        self.use_local_argmax = vllm_config.speculative_config.use_local_argmax_reduction\n",
        "        self.use_local_argmax = vllm_config.speculative_config.use_local_argmax_reduction\n"
        "        self.sample_method = vllm_config.speculative_config.draft_sample_method\n")
    root = write_tree(tmp_path / "t", files)
    on, off = planned_scan(root, [_deep("v2", use_local_argmax_reduction=True), _deep("v2")])[1]
    assert on.outcome == "rejected" and "get_top_tokens" in on.rejections[0].message, on.steps
    assert off.outcome == "plan"  # the first test is undecided and its other arm returns: no rejection


# A drafter's constructor that raises under an ``if`` arm of a method it calls under another
# (the shape of vLLM 0.27.0's SpecDecodeBaseProposer.__init__ / _init_parallel_drafting_params).
_INIT = '''
    def __init__(self, vllm_config):
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens
        self.speculative_config = vllm_config.speculative_config
        self.draft_model_config = self.speculative_config.draft_model_config
        self.parallel = self.speculative_config.parallel_drafting
        if self.parallel:
            self._init_parallel()
'''

_PARALLEL = '''
    def _init_parallel(self):
        hf = self.draft_model_config.hf_config
        extra = getattr(hf, "mask_config", None)
        if extra and "mask_token_id" in extra:
            self.token = extra["mask_token_id"]
        elif hasattr(hf, "pard_token"):
            self.token = hf.pard_token
        else:
            raise ValueError("parallel drafting needs a pard_token")
'''


def _init_files(parallel: str = _PARALLEL) -> dict[str, str]:
    files = gate_tree()
    spec = files["vllm/spec_decode/speculators.py"]
    old = '''
    def __init__(self, vllm_config):
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens
'''
    assert old in spec
    files["vllm/spec_decode/speculators.py"] = spec.replace(old, _INIT + parallel, 1)
    return files


def _deep_fields(runner: str, fields: tuple[tuple[str, object], ...] = (), **options: object) -> Setting:
    return Setting(runner, 2, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 2), *fields),
                   options=tuple(sorted(options.items())))


def test_a_drafter_constructor_rejects_through_a_method_it_calls_under_an_if(tmp_path):
    files = _init_files()
    text = files["vllm/spec_decode/speculators.py"]
    line = text[:text.index('raise ValueError("parallel drafting')].count("\n") + 1
    root = write_tree(tmp_path / "t", files)
    on, off, token = planned_scan(root, [_deep_fields("v2", parallel_drafting=True), _deep_fields("v2", parallel_drafting=False),
                                         _deep_fields("v2", (("pard_token", 7),), parallel_drafting=True)])[1]
    assert on.outcome == "rejected", (on.steps, on.notes)
    r = on.rejections[0]
    assert (r.path, r.function, r.when) == ("vllm/spec_decode/speculators.py", "MultiModuleSpeculator._init_parallel", "build")
    assert "needs a pard_token" in r.message and r.line == line
    assert off.outcome == "plan" and token.outcome == "plan"  # the arm not taken; the elif arm taken


def test_an_undecided_constructor_test_keeps_the_plan_and_is_noted(tmp_path):
    # parallel_drafting left unset: the arm that calls the method is undecided.
    root = write_tree(tmp_path / "a", _init_files())
    unset = planned_scan(root, [_deep_fields("v2")])[1][0]
    assert unset.outcome == "plan", unset.rejections
    assert any("raise(s) of the drafter while it is built" in n and "speculators.py" in n for n in unset.notes), unset.notes
    # The local the tests read is assigned only under an arm: not placed, unknown.
    guarded = _PARALLEL.replace('''        hf = self.draft_model_config.hf_config
''', '''        hf = None
        if self.num_speculative_steps:
            hf = self.draft_model_config.hf_config
''').replace("        hf = None\n", "")
    root = write_tree(tmp_path / "b", _init_files(guarded))
    plan = planned_scan(root, [_deep_fields("v2", parallel_drafting=True)])[1][0]
    assert plan.outcome == "plan", plan.rejections
    assert any("raise(s) of the drafter while it is built" in n for n in plan.notes), plan.notes


def test_an_attribute_a_constructor_sets_after_the_call_is_not_read_before_it(tmp_path):
    # The flag is set after the call that reads it (and a method the constructor calls first
    # sets another value): unknown at the call, so no rejection.
    late = _INIT.replace('''        self.parallel = self.speculative_config.parallel_drafting
        if self.parallel:
            self._init_parallel()
''', '''        self._setup()
        if self.parallel:
            self._init_parallel()
        self.parallel = self.speculative_config.parallel_drafting

    def _setup(self):
        self.parallel = self.num_speculative_steps > 0
''')
    files = gate_tree()
    spec = files["vllm/spec_decode/speculators.py"]
    files["vllm/spec_decode/speculators.py"] = spec.replace('''
    def __init__(self, vllm_config):
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens
''', late + _PARALLEL, 1)
    plan = planned_scan(write_tree(tmp_path / "t", files), [_deep_fields("v2", parallel_drafting=True)])[1][0]
    assert plan.outcome == "plan", plan.rejections


def test_a_method_on_the_way_that_reassigns_the_attribute_makes_it_unknown(tmp_path):
    # The constructor's callee replaces the draft config before it calls the checking method:
    # the constructor's own definition is not the value the check reads.
    files = _init_files()
    spec = files["vllm/spec_decode/speculators.py"]
    files["vllm/spec_decode/speculators.py"] = spec.replace('''        if self.parallel:
            self._init_parallel()
''', '''        if self.parallel:
            self._outer()

    def _outer(self):
        self.draft_model_config = self.pick_config()
        self._init_parallel()
''', 1)
    plan = planned_scan(write_tree(tmp_path / "t", files), [_deep_fields("v2", parallel_drafting=True)])[1][0]
    assert plan.outcome == "plan", plan.rejections
    assert any("raise(s) of the drafter while it is built" in n for n in plan.notes), plan.notes


_HEAD_SHARING = '''
from vllm.loader import get_model


def _should_share(model):
    if not getattr(model, "has_own_head", False):
        return True
    return getattr(model, "lm_head", None) is not None


def install_head(model, head, quantization):
    if not (head is not None and _should_share(model)):
        if quantization is not None:
            raise ValueError("head_quantization needs a drafter that shares the target head.")
        return None
    model.lm_head = head
    return head


def load_draft(target_model, vllm_config):
    quantization = vllm_config.speculative_config.head_quantization
    model = get_model(vllm_config)  # (handed the config: what it reads of it after the load is unknown)
    install_head(model, getattr(target_model, "lm_head", None), quantization)
    return model
'''


def _sharing_files(model_extra: str) -> dict[str, str]:
    files = _files(model_extra=model_extra)
    files["vllm/spec_decode/loading.py"] = _HEAD_SHARING
    spec = files["vllm/spec_decode/speculators.py"]
    spec = spec.replace(
        "    def load_model(self):\n        self.model = get_model(self.vllm_config)\n",
        "    def load_model(self, target_model):\n        self.model = load_draft(target_model, self.vllm_config)\n")
    spec = spec.replace("    def __init__(self, vllm_config):\n",
                        "    def __init__(self, vllm_config):\n        self.vllm_config = vllm_config\n", 1)
    files["vllm/spec_decode/speculators.py"] = "from vllm.spec_decode.loading import load_draft\n" + spec
    return files


def test_a_load_time_raise_in_module_functions_the_load_method_calls_with_the_built_model(tmp_path):
    # The shape of vLLM 0.34.0's load_eagle_model -> share_target_lm_head: a draft model that keeps
    # its own heads (a class attribute says so, and it has no top-level lm_head) cannot take the
    # quantized copy of the target's head, whatever the target's head is.
    own = "\n    has_own_head = True\n"
    files = _sharing_files(own)
    assert "load_draft(target_model, self.vllm_config)" in files["vllm/spec_decode/speculators.py"]
    on, off = planned_scan(write_tree(tmp_path / "a", files), [_deep("v2", head_quantization="fp8"),
                                                               _deep("v2", head_quantization=None)])[1]
    assert on.outcome == "rejected", (on.steps, on.notes)
    (r,) = on.rejections
    assert (r.path, r.function, r.when) == ("vllm/spec_decode/loading.py", "install_head", "load")
    assert r.message == 'ValueError("head_quantization needs a drafter that shares the target head.")'
    assert off.outcome == "plan"
    # A model that shares (no such attribute), or one whose own head may exist: no rejection.
    shares = planned_scan(write_tree(tmp_path / "b", _sharing_files("")), [_deep("v2", head_quantization="fp8")])[1]
    assert shares[0].outcome == "plan"
    maybe = planned_scan(write_tree(tmp_path / "c", _sharing_files(own + "\n    def attach(self, head):\n"
                                                                   "        self.lm_head = head\n")),
                         [_deep("v2", head_quantization="fp8")])[1]
    assert maybe[0].outcome == "plan", maybe[0].rejections


def test_the_module_function_check_matches_cpython(tmp_path):
    # The snippet run by CPython (our own code, not vLLM's) with a model that keeps its own head.
    ns: dict = {}
    exec(_HEAD_SHARING.replace("from vllm.loader import get_model\n", ""), ns)
    model = type("Own", (), {"has_own_head": True})()
    for head in (None, object()):
        try:
            ns["install_head"](model, head, "fp8")
        except ValueError as e:
            assert "shares the target head" in str(e)
        else:
            raise AssertionError("raises whatever the target head")
    assert ns["install_head"](type("Shares", (), {})(), head := object(), "fp8") is head


_READS_MODEL = '''
    def load_model(self):
        self.model = get_model(self.vllm_config)
        if self.use_local_argmax:
            flat = self.model.mask_hidden.view(-1)
'''


def _reading_files(model_extra: str) -> dict[str, str]:
    files = _files(model_extra=model_extra)
    files["vllm/spec_decode/speculators.py"] = files["vllm/spec_decode/speculators.py"].replace(
        _LOADING.split("\n    def _check_head")[0] + "\n", _READS_MODEL.lstrip("\n"))
    return files


def test_a_load_method_reading_an_attribute_the_loaded_model_lacks_is_said(tmp_path):
    # The shape of vLLM 0.32.0's SpecDecodeBaseProposer.load_model with parallel drafting:
    # ``self.model.mask_hidden`` on a draft model class that has none. Other code may set it on
    # the model first (not followed): a note, not a rejection.
    files = _reading_files("")
    assert "self.model.mask_hidden" in files["vllm/spec_decode/speculators.py"]
    on, off = planned_scan(write_tree(tmp_path / "a", files), [_deep("v2", use_local_argmax_reduction=True),
                                                               _deep("v2", use_local_argmax_reduction=False)])[1]
    said = [n for n in on.notes if "reads an attribute no class of the draft model defines" in n]
    assert on.outcome == "plan" and not on.rejections
    assert said and "vllm/spec_decode/speculators.py:" in said[0]
    assert "AttributeError(\"'DeepMTP' object has no attribute 'mask_hidden'\")" in said[0]
    assert off.outcome == "plan" and not any("no class of the draft model defines" in n for n in off.notes)
    # CPython's words for it
    try:
        type("DeepMTP", (), {})().mask_hidden  # noqa: B018
    except AttributeError as e:
        assert str(e) == "'DeepMTP' object has no attribute 'mask_hidden'"


@pytest.mark.parametrize("defines", [
    "\n    def attach(self):\n        self.register_buffer(\"mask_hidden\", None)\n",
    "\n    def attach(self, name):\n        self.register_buffer(name, None)\n",
    "\n    def attach(self):\n        self.mask_hidden = None\n",
    "\n    mask_hidden = None\n",
])
def test_a_model_that_may_have_the_attribute_is_not_said_to_lack_it(tmp_path, defines):
    plan, = planned_scan(write_tree(tmp_path / "a", _reading_files(defines)), [_deep("v2", use_local_argmax_reduction=True)])[1]
    assert plan.outcome == "plan", plan.rejections
    assert not any("no class of the draft model defines" in n for n in plan.notes), plan.notes


# A drafter attribute its constructor sets to None and a method it calls sets again under the
# configuration's arm (the shape of vLLM 0.32.0's parallel_drafting_hidden_state_tensor: None
# in SpecDecodeBaseProposer.__init__, a tensor in _init_parallel_drafting_params), read by a
# load method's test.
_TENSOR_INIT = _INIT.replace('''        if self.parallel:
''', '''        self.tensor = None
        if self.parallel:
''')
_TENSOR_PARALLEL = _PARALLEL + '''        self.tensor = torch.empty(4)
'''
_TENSOR_LOAD = '''
    def load_model(self):
        self.model = get_model(self.vllm_config)
        if self.parallel and self.tensor is not None:
            raise ValueError("the mask tensor needs a model that has one")
'''


def _tensor_files(parallel: str = _TENSOR_PARALLEL, extra: str = "") -> dict[str, str]:
    files = gate_tree()
    spec = files["vllm/spec_decode/speculators.py"]
    old = '''
    def __init__(self, vllm_config):
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens
'''
    spec = spec.replace(old, _TENSOR_INIT + parallel + extra, 1).replace('''
    def load_model(self):
        self.model = get_model(self.vllm_config)
''', _TENSOR_LOAD, 1)
    assert "self.tensor is not None" in spec and "torch.empty" in spec or "torch.empty" not in parallel
    files["vllm/spec_decode/speculators.py"] = "import torch\n" + spec
    return files


def test_a_drafter_attribute_a_method_the_constructor_calls_sets_again_is_read_as_built(tmp_path):
    # Its value once built: None without parallel drafting, a tensor (``torch.empty``, an
    # object-factories call: not None) with it. The constructor's own ``self.tensor = None``
    # alone would say None either way (and drop the raise).
    root = write_tree(tmp_path / "t", _tensor_files())
    on, off = planned_scan(root, [_deep_fields("v2", (("pard_token", 7),), parallel_drafting=True),
                                  _deep_fields("v2", (("pard_token", 7),), parallel_drafting=False)])[1]
    assert on.outcome == "rejected", (on.notes, on.rejections)
    r = on.rejections[0]
    assert (r.function, r.when) == ("MultiModuleSpeculator.load_model", "load") and "mask tensor" in r.message
    assert off.outcome == "plan" and not any("while it is built or loads" in n for n in off.notes), off.notes


@pytest.mark.parametrize("variant", ["unknown call", "set after the build"])
def test_a_drafter_attribute_the_build_leaves_unknown_keeps_the_plan_and_is_noted(tmp_path, variant):
    if variant == "unknown call":  # a library call not known to return an object: it may return None
        files = _tensor_files(_TENSOR_PARALLEL.replace("torch.empty(4)", "make_tensor(4)"))
    else:  # a method the runner may call after the build sets it too
        files = _tensor_files(extra='''
    def set_tensor(self, tensor):
        self.tensor = tensor
''')
    plan, = planned_scan(write_tree(tmp_path / "t", files),
                         [_deep_fields("v2", (("pard_token", 7),), parallel_drafting=True)])[1]
    assert plan.outcome == "plan", plan.rejections
    assert any("while it is built or loads" in n and "speculators.py" in n for n in plan.notes), plan.notes
