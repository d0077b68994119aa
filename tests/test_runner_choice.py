"""Which runner vLLM uses (issue 18, dispatch/runner_choice.py): vLLM's own selector
(``runner-selectors``: ``VllmConfig.use_v2_model_runner``) run over the question, on small trees
written here, and the environment module's table computed over the environment given
(dispatch/env_defaults.py)."""

from __future__ import annotations

from scan_helpers import write_tree
from test_layers import planned_scan
from trees import gate_tree

from auditor.analyses.dispatch import Setting
from auditor.analyses.dispatch.env_defaults import Raises, env_defaults, env_values

_ENVS = b'''
import os


def maybe_convert_bool(value):
    """None stays None."""
    if value is None:
        return None
    return bool(int(value))


environment_variables = {
    "VLLM_USE_V2_MODEL_RUNNER": lambda: maybe_convert_bool(os.getenv("VLLM_USE_V2_MODEL_RUNNER", None)),
    "VLLM_FLAG": lambda: "VLLM_FLAG" in os.environ,
    "VLLM_LEVEL": lambda: int(os.environ.get("VLLM_LEVEL", "0")),
    "VLLM_OPAQUE": lambda: compute(),
}
'''

_SELECTOR = '''
import vllm.envs as envs


class VllmConfig:
    @property
    def use_v2_model_runner(self):
        use_v2 = envs.VLLM_USE_V2_MODEL_RUNNER
        if use_v2 is not None:
            return use_v2
        unsupported = self._get_v2_model_runner_unsupported_features()
        if unsupported:
            return False
        return True

    def _get_v2_model_runner_unsupported_features(self):
        unsupported = []
        if self.speculative_config.parallel_drafting:
            unsupported.append("parallel drafting")
        if self.parallel_config.pipeline_parallel_size > 1:
            unsupported.append("pipeline parallelism")
        return unsupported
'''


def test_the_environment_table_is_computed_over_the_environment_given():
    assert env_values(_ENVS, {"VLLM_USE_V2_MODEL_RUNNER": "1"})["VLLM_USE_V2_MODEL_RUNNER"] is True
    assert env_values(_ENVS, {"VLLM_USE_V2_MODEL_RUNNER": "0"})["VLLM_USE_V2_MODEL_RUNNER"] is False
    unset = env_defaults(_ENVS)
    assert unset["VLLM_USE_V2_MODEL_RUNNER"] is None and unset["VLLM_FLAG"] is False and unset["VLLM_LEVEL"] == 0
    given = env_values(_ENVS, {"VLLM_FLAG": "", "VLLM_LEVEL": "3"})
    assert given["VLLM_FLAG"] is True and given["VLLM_LEVEL"] == 3
    # A value vLLM's own code fails on (int("yes")): reading it raises that; a call the table
    # makes that is not read: unknown (left out).
    assert env_values(_ENVS, {"VLLM_USE_V2_MODEL_RUNNER": "yes"})["VLLM_USE_V2_MODEL_RUNNER"] == \
        Raises("ValueError: invalid literal for int() with base 10: 'yes'")
    assert "VLLM_OPAQUE" not in unset


def _tree(tmp_path, selector: str = _SELECTOR):
    files = gate_tree()
    files["vllm/envs.py"] = _ENVS.decode()
    if selector:
        files["vllm/config/vllm.py"] = selector
    return write_tree(tmp_path / "t", files)


def _deep(runner: str, env: dict[str, str] | None = None, **options: object) -> Setting:
    return Setting(runner, 2, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 2),),
                   options=tuple(sorted(options.items())), env=tuple(sorted((env or {}).items())))


def test_the_environment_decides_the_runner(tmp_path):
    forced = {"VLLM_USE_V2_MODEL_RUNNER": "1"}
    v1, v2, off_v1, off_v2 = planned_scan(_tree(tmp_path), [
        _deep("v1", forced), _deep("v2", forced),
        _deep("v1", {"VLLM_USE_V2_MODEL_RUNNER": "0"}), _deep("v2", {"VLLM_USE_V2_MODEL_RUNNER": "0"})])[1]
    assert (v1.runner_used, v2.runner_used, off_v1.runner_used, off_v2.runner_used) == (False, True, True, False)
    c = v2.runner_choice
    assert c.selector.function == "VllmConfig.use_v2_model_runner" and "is True (VLLM_USE_V2_MODEL_RUNNER=1)" in c.why


def test_without_the_environment_the_runner_depends_on_it(tmp_path):
    (plan,) = planned_scan(_tree(tmp_path), [_deep("v2", parallel_drafting=True)])[1]
    assert plan.runner_used is None
    assert "envs.VLLM_USE_V2_MODEL_RUNNER" in plan.runner_choice.depends_on, plan.runner_choice


def test_a_feature_the_runner_does_not_support_decides_the_fallback(tmp_path):
    # The environment given (another variable set, the runner's unset): what V2 does not
    # support is collected; parallel drafting is, so V1 is used whatever else the list holds.
    # (The evaluator follows a list through an undecided append only as the paths' join: an
    # append after one leaves the list unknown, so here the decided append comes first.)
    env = {"VLLM_FLAG": "1"}
    v2, v1, plain = planned_scan(_tree(tmp_path), [_deep("v2", env, parallel_drafting=True),
                                                   _deep("v1", env, parallel_drafting=True), _deep("v2", env)])[1]
    assert (v2.runner_used, v1.runner_used) == (False, True), v2.runner_choice
    # Without it the list holds an item the configuration leaves undecided: not derived, and said on what.
    assert plain.runner_used is None and plain.runner_choice.depends_on, plain.runner_choice


def test_without_a_selector_a_tree_with_one_runners_factory_uses_that_runner(tmp_path):
    # This tree's only drafter factory is V2's (init_speculator); nothing selects.
    v1, v2 = planned_scan(_tree(tmp_path, selector=""), [_deep("v1"), _deep("v2")])[1]
    assert (v1.runner_used, v2.runner_used) == (False, True)
    assert "drafter factory for runner v2 only" in v2.runner_choice.why


_DEFAULTS_SELECTOR = '''
import vllm.envs as envs
from vllm.triton_utils import HAS_TRITON


class VllmConfig:
    @property
    def use_v2_model_runner(self):
        if self.attention_config.hisparse_config is not None:
            return True
        use_v2 = envs.VLLM_USE_V2_MODEL_RUNNER
        if use_v2 is not None:
            return use_v2
        if not HAS_TRITON:
            return False
        return True
'''


def test_an_environment_with_nothing_set_and_the_stated_defaults_decide(tmp_path):
    """``--clean-env``: no variable set; the engine argument and module-level name the selector
    reads first are taken from ``runner-choice-assumptions`` and the answer says so. Without
    the environment it stays "depends on"."""
    root = _tree(tmp_path, _DEFAULTS_SELECTOR)
    (root / "vllm" / "triton_utils.py").write_text("import importlib\nHAS_TRITON = importlib.util.find_spec('triton') is not None\n")
    clean = Setting("v2", 2, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 2),), env_given=True)
    unknown = Setting("v2", 2, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 2),))
    got, open_env = planned_scan(root, [clean, unknown])[1]
    c = got.runner_choice
    assert c.used is True, c
    assert c.assumed == ("HAS_TRITON", "vllm_config.attention_config.hisparse_config"), c.assumed
    assert "no vLLM variable set; assuming HAS_TRITON=true" in c.why
    assert open_env.runner_used is None and "envs.VLLM_USE_V2_MODEL_RUNNER" in open_env.runner_choice.depends_on


def test_an_environment_value_the_table_cannot_parse_rejects_the_configuration(tmp_path):
    """The selector reads the variable on every path and the read raises (vLLM's ``int("yes")``):
    no runner is chosen, and the configuration is rejected at the read, whichever runner is asked."""
    v1, v2 = planned_scan(_tree(tmp_path), [_deep("v1", {"VLLM_USE_V2_MODEL_RUNNER": "yes"}),
                                            _deep("v2", {"VLLM_USE_V2_MODEL_RUNNER": "yes"})])[1]
    for plan in (v1, v2):
        assert plan.outcome == "rejected" and plan.runner_used is None, plan.runner_choice
        (r,) = plan.rejections
        assert (r.path, r.function, r.when) == ("vllm/config/vllm.py", "VllmConfig.use_v2_model_runner", "validation")
        assert r.message == "ValueError: invalid literal for int() with base 10: 'yes'"


_TEXT_CHECK = '''
    def __post_init__(self):
        target = self.target_model_config
        if (self.method == "mtp" and target is not None and target.model_impl == "other"
                and getattr(target.hf_text_config, "num_mtp_layers", None) is not None):
            raise NotImplementedError("another backend's MTP")
'''


def test_a_model_configs_text_config_is_what_its_hf_configs_getter_returns(tmp_path):
    """``model_config.hf_text_config`` (vLLM's ModelConfig sets it to ``get_text_config()`` of its
    hf config): a field a flat config.json lacks is absent there, so a test that needs it is
    decided even when another operand is unknown; one nested under ``text_config`` is found."""
    files = gate_tree()
    files["vllm/config/speculative.py"] = files["vllm/config/speculative.py"] + _TEXT_CHECK
    files["vllm/envs.py"] = _ENVS.decode()
    root = write_tree(tmp_path / "t", files)
    flat = '{"architectures": ["DeepForCausalLM"], "model_type": "deep", "num_nextn_predict_layers": 2}'
    nested = ('{"architectures": ["DeepForCausalLM"], "model_type": "deep", "num_nextn_predict_layers": 2, '
              '"text_config": {"num_mtp_layers": 2}}')
    plain, with_text = planned_scan(root, [Setting("v2", 2, target_config=flat), Setting("v2", 2, target_config=nested)])[1]
    assert plain.outcome == "plan" and not any("validation raise" in n for n in plain.notes), plain.notes
    # Nested: the text config holds the field; the backend test stays unknown, so the raise is undecided.
    assert with_text.outcome == "plan" and any("1 validation raise" in n for n in with_text.notes), with_text.notes


def test_the_text_says_how_to_give_the_environment_when_the_choice_needs_it(tmp_path):
    from auditor.output.layers import render_text

    unknown, given = planned_scan(_tree(tmp_path), [_deep("v2"), _deep("v2", {"VLLM_USE_V2_MODEL_RUNNER": "1"})])[1]
    hint = "(--env NAME=VALUE or --clean-env gives your server's environment)"
    assert hint in render_text([unknown], "t")
    assert hint not in render_text([given], "t") and "vLLM uses runner v2 here" in render_text([given], "t")
