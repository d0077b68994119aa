"""Analysis settings: vLLM's conventions, overridable from ``[tool.mtp-audit]`` in pyproject.toml."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass
class Config:
    # Keyword arguments threaded from draft loops to layer selection.
    threaded_params: list[str] = field(default_factory=lambda: ["spec_step_idx"])
    # A `for` loop whose iterable mentions one of these counts is a draft loop.
    draft_loop_counts: list[str] = field(
        default_factory=lambda: ["num_speculative_tokens", "num_speculative_steps", "num_spec_tokens"]
    )
    # Functions that build the draft model from the architecture registry.
    loaders: list[str] = field(default_factory=lambda: ["get_model"])
    # Module-level tables mapping architecture -> (module, class) for draft models.
    registry_tables: list[str] = field(default_factory=lambda: ["_SPECULATIVE_DECODING_MODELS"])
    # -- issue 12 (capture/compile) --
    # Calls and context managers that capture a CUDA graph (torch's API; a dotted name
    # matches a call chain ending in it), and the method that replays one.
    graph_capture_apis: list[str] = field(default_factory=lambda: ["torch.cuda.graph", "capture_begin"])
    graph_replay_apis: list[str] = field(default_factory=lambda: ["replay"])
    # Class decorators that compile a model's forward (vLLM's, with its argument names).
    compile_decorators: list[str] = field(default_factory=lambda: ["support_torch_compile"])
    # ... their keyword arguments naming the arguments compiled as dynamic (dict keys),
    # and the one holding a condition under which the class is compiled at all.
    compile_dynamic_args: list[str] = field(default_factory=lambda: ["dynamic_arg_dims", "mark_unbacked_dims"])
    compile_condition_args: list[str] = field(default_factory=lambda: ["enable_if"])
    # --- issue 11 (dispatch): vLLM's names, found in the code under these names ---
    # Functions that pick the drafter per runner (if/elif chains that build a proposer).
    dispatch_factories: dict[str, list[str]] = field(
        default_factory=lambda: {"v1": ["GPUModelRunner.__init__"], "v2": ["init_speculator"]}
    )
    # Functions that rewrite the target's hf config into the draft's (they write `override-field`).
    config_overrides: list[str] = field(default_factory=lambda: ["hf_config_override"])
    # Methods of configuration objects that only read them (transformers' documented
    # getters): the partial evaluator does not make a config unknown when code it cannot
    # run calls one of these on it (any other such call may change the config).
    pure_methods: list[str] = field(default_factory=lambda: ["get_text_config", "to_dict", "to_json_string"])
    # Getters that return the sub-config under one of these fields, else the config itself
    # (transformers' documented ``PretrainedConfig.get_text_config()``): evaluated on a
    # config whose fields are known (issue 18: a draft model reads its layer count there).
    sub_config_getters: dict[str, list[str]] = field(
        default_factory=lambda: {"get_text_config": ["decoder", "generator", "text_config", "text_encoder"]}
    )
    override_field: list[str] = field(default_factory=lambda: ["architectures"])
    # Attribute/parameter names of the configuration objects the dispatch code reads.
    dispatch_roles: dict[str, str] = field(
        default_factory=lambda: {
            "root": "vllm_config",
            "speculative": "speculative_config",
            "method": "method",
            "k": "num_speculative_tokens",
            "draft": "draft_model_config",
            "hf": "hf_config",
            "model": "model_config",  # issue 18: a draft model is built with the draft's config in this role
            "draft_name": "model",  # issue 18: the speculative config names its draft model here (set for MTP)
            "target": "target_model_config",  # the target's model config the engine hands the speculative config
            # a model config's text config: what its hf config's get_text_config() returns (vLLM's
            # ModelConfig sets it so in __post_init__, get_hf_text_config)
            "hf_text": "hf_text_config",
        }
    )
    # Issue 18: methods of the speculative-config class whose guarded raises reject a
    # configuration (``layers`` answers ``rejected`` with the message and file:line).
    validation_methods: list[str] = field(default_factory=lambda: ["__post_init__", "_verify_args"])
    # Issue 18: per runner, the engine config's checks of what that runner supports (vLLM's
    # ``VllmConfig._validate_v2_model_runner`` and, from 0.29.0, ``_validate_v1_model_runner``,
    # the one run for the runner used): their guarded raises reject a configuration as the
    # speculative config's validation does.
    runner_validations: dict[str, list[str]] = field(
        default_factory=lambda: {"v1": ["VllmConfig._validate_v1_model_runner"],
                                 "v2": ["VllmConfig._validate_v2_model_runner"]}
    )
    # Issue 18: per runner, the engine config's property that is true when vLLM uses that runner
    # (vLLM 0.22.1-0.33.0 ``VllmConfig.use_v2_model_runner``: the environment, the model, what V2
    # supports); a runner without one is used when the other's is false (two runners).
    runner_selectors: dict[str, list[str]] = field(
        default_factory=lambda: {"v2": ["VllmConfig.use_v2_model_runner"]}
    )
    # ... and what the selector is run with beyond the question, for a server started with its
    # engine arguments at their defaults on one CUDA GPU (vLLM's documented defaults): a name
    # under the engine config's role (``vllm_config.``) is a field of it, a plain one a
    # module-level name (Triton installed, as vLLM's CUDA requirements have it). An answer that
    # read one says so.
    runner_choice_assumptions: dict[str, str] = field(default_factory=lambda: {
        "HAS_TRITON": "true", "vllm_config.attention_config.hisparse_config": "null",
        "vllm_config.watermark_config": "null", "vllm_config.parallel_config.pipeline_parallel_size": "1",
        "vllm_config.parallel_config.use_ubatching": "false"})
    # Issue 18: the engine's check of the process environment, run before any config is built
    # (vLLM 0.31.0+ ``Platform.validate_environ``, earlier ``envs.validate_environ``): with the
    # environment given (``layers --env``), a raise on every path rejects the configuration.
    env_validations: list[str] = field(default_factory=lambda: ["Platform.validate_environ", "validate_environ"])
    # Issue 18: methods of a drafter whose guarded raises reject a configuration while it
    # loads the draft model (vLLM's ``load_model``: an option the draft model cannot serve).
    drafter_load_methods: list[str] = field(default_factory=lambda: ["load_model"])
    # Issue 18 (agreement matrix, auditor/analyses/dispatch/weight_names.py): the attribute of
    # a draft model class holding its checkpoint-name mapper (vLLM's ``hf_to_vllm_mapper``,
    # handed to the loader by its ``load_weights``), how each of the mapper's fields matches a
    # name (vLLM's ``WeightsMapper``: "substr", "prefix", "suffix"; "regex" and "renaming" are
    # not read), and the load-time checks that reject a model whose parameters no checkpoint
    # name reached (vLLM's strict check, then the loader's raise for a name no module has).
    weight_mapper_attrs: list[str] = field(default_factory=lambda: ["hf_to_vllm_mapper"])
    weight_mapper_fields: dict[str, str] = field(default_factory=lambda: {
        "orig_to_new_substr": "substr", "orig_to_new_stacked": "substr", "orig_to_new_prefix": "prefix",
        "orig_to_new_suffix": "suffix", "orig_to_new_regex": "regex", "orig_to_new_renaming": "renaming"})
    weight_load_checks: list[str] = field(default_factory=lambda: [
        "DefaultModelLoader.track_weights_loading", "AutoWeightsLoader._load_module"])
    # Base classes outside the tree that define none of the head methods (torch's nn.Module,
    # typing's Protocol and Generic, abc's ABC, object): a draft model whose other bases are all
    # in the tree has a head method only if they do.
    head_free_bases: list[str] = field(default_factory=lambda: [
        "nn.Module", "torch.nn.Module", "Protocol", "typing.Protocol", "Generic", "typing.Generic", "ABC", "abc.ABC",
        "object"])
    # Config base classes outside the tree (transformers' PretrainedConfig, as it was spelled
    # before and after 5.0) and the names an object of theirs may have beyond the fields its
    # config.json gives: their documented attributes, properties, class attributes and methods in
    # transformers 4.4x-5.x, as a union. A plain read of any other name a config.json and its
    # config class of the tree lack raises AttributeError, as CPython does.
    config_bases: list[str] = field(default_factory=lambda: [
        "transformers.PretrainedConfig", "transformers.PreTrainedConfig",
        "transformers.configuration_utils.PretrainedConfig", "transformers.configuration_utils.PreTrainedConfig"])
    config_base_attributes: list[str] = field(default_factory=lambda: [
        # instance attributes and properties
        "return_dict", "output_hidden_states", "output_attentions", "torchscript", "torch_dtype", "dtype",
        "use_bfloat16", "tf_legacy_loss", "pruned_heads", "tie_word_embeddings", "chunk_size_feed_forward",
        "is_encoder_decoder", "is_decoder", "cross_attention_hidden_size", "add_cross_attention", "tie_encoder_decoder",
        "architectures", "finetuning_task", "id2label", "label2id", "num_labels", "tokenizer_class", "prefix",
        "bos_token_id", "pad_token_id", "eos_token_id", "sep_token_id", "decoder_start_token_id", "task_specific_params",
        "problem_type", "name_or_path", "transformers_version", "use_return_dict", "per_layer_config",
        "is_heterogeneous", "rope_scaling", "rope_parameters", "gradient_checkpointing", "use_cache",
        # generation parameters older releases keep on the config
        "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
        "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty",
        "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences",
        "output_scores", "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id",
        "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
        # class attributes
        "model_type", "base_config_key", "sub_configs", "has_no_defaults_at_init", "keys_to_ignore_at_inference",
        "attribute_map", "base_model_tp_plan", "base_model_fsdp_plan", "base_model_pp_plan", "base_model_ep_plan",
        "is_composition",
        # methods
        "from_pretrained", "from_dict", "from_json_file", "get_config_dict", "save_pretrained", "push_to_hub",
        "to_dict", "to_diff_dict", "to_json_string", "to_json_file", "update", "update_from_string",
        "get_text_config", "dict_torch_dtype_to_str", "dict_dtype_to_str", "register_for_auto_class", "validate",
        "validate_output_attentions", "validate_architecture", "validate_token_ids", "validate_layer_type",
        "convert_rope_params_to_dict", "standardize_rope_params", "validate_rope", "is_custom_code"])
    # Library functions outside the tree that build and return an object, never None (torch's
    # tensor factories, as documented): ``x = torch.empty(...)`` then ``if x is not None`` is
    # decided; nothing else of what they return is known.
    object_factories: list[str] = field(default_factory=lambda: [
        "torch.empty", "torch.zeros", "torch.ones", "torch.full", "torch.tensor", "torch.arange",
        "torch.empty_like", "torch.zeros_like", "torch.ones_like", "torch.full_like"])
    # Depth and size limits of the searches (auditor.search_limits: names as the note prints them).
    search_limits: dict[str, int] = field(default_factory=dict)
    # Platform -> the directory of its per-platform model copies (vllm/models/<family>/<dir>/).
    platform_dirs: dict[str, str] = field(
        default_factory=lambda: {"cuda": "nvidia", "rocm": "amd", "xpu": "xpu", "cpu": "cpu"}
    )
    # Fields of vLLM's compilation config listing the batch sizes it captures as CUDA
    # graphs, and per platform the module of its platform class: a platform whose module
    # sets one of these fields to an empty list, unconditionally, captures no graph (its
    # compiled view keeps only torch.compile's freeze); one that never sets it keeps the
    # default (graphs); anything else, or no module, leaves the graph freeze undecided.
    graph_capture_sizes: list[str] = field(default_factory=lambda: ["cudagraph_capture_sizes"])
    platform_modules: dict[str, str] = field(
        default_factory=lambda: {"cuda": "vllm/platforms/cuda.py", "rocm": "vllm/platforms/rocm.py",
                                 "xpu": "vllm/platforms/xpu.py", "cpu": "vllm/platforms/cpu.py"}
    )
    head_methods: list[str] = field(default_factory=lambda: ["compute_logits", "get_top_tokens"])
    # Attributes of the draft's model config that vLLM's model registry reads off the draft
    # model class (``SpeculativeDraftModel.speculator_config_class``: a class it holds, given
    # by its qualified name, or None when the class declares none).
    draft_class_attrs: list[str] = field(default_factory=lambda: ["speculator_config_class"])
    # Issue 18 (start-up passes, auditor/analyses/dispatch/startup.py): the fields of vLLM's
    # parallel config a platform's module sets to its worker class (a dotted name), and the
    # worker methods the engine calls at start-up, before it serves (profiling, warm-up).
    worker_class_fields: list[str] = field(default_factory=lambda: ["worker_cls"])
    startup_methods: list[str] = field(default_factory=lambda: ["determine_available_memory",
                                                                "compile_or_warm_up_model"])
    # Where the engine mode shows on a worker's and a runner's ``self`` (and ``vllm_config``):
    # ``enforce_eager`` (eager: True, compiled: False) and the compilation mode (eager: 0,
    # vLLM's ``CompilationMode.NONE``; compiled: any other, 1 or more).
    engine_mode_fields: dict[str, str] = field(default_factory=lambda: {
        "enforce_eager": "model_config.enforce_eager", "compilation_mode": "compilation_config.mode"})
    # What the start-up judgement assumes of state the code reads at run time (JSON values):
    # one pipeline stage (vLLM's default pipeline_parallel_size = 1), one data-parallel rank
    # (its default data_parallel_size = 1), a text-only target (its model config has no
    # multimodal config: vLLM sets one only for a multimodal model), a decoder target (not
    # encoder-only: a draft proposes tokens a decoder verifies). A key is a field of
    # ``self`` or, dotted, of the config object it names (under ``vllm_config``; also read
    # through a ``self`` attribute the constructor copies it into). A judgement that used one
    # says so.
    startup_assumptions: dict[str, str] = field(default_factory=lambda: {
        "is_first_pp_rank": "true", "is_last_pp_rank": "true", "model_config.multimodal_config": "null",
        "parallel_config.data_parallel_size": "1", "is_encoder_only": "false"})
    # Issue 18: where vLLM names the config class it loads a checkpoint's config.json into, per
    # model type ("<file>:<table>", a table of strings: vLLM's ``_CONFIG_REGISTRY``), and the
    # package the class names resolve in (its imports, or a table naming each class's module).
    # A config.json of such a model type takes the class's literal ``__init__`` defaults.
    config_registries: dict[str, str] = field(default_factory=lambda: {
        "vllm/transformers_utils/config.py:_CONFIG_REGISTRY": "vllm/transformers_utils/configs/__init__.py"})
    # Modules whose attributes are environment variables read from a table of lambdas (vLLM's
    # ``envs``): planned with every variable unset, each is the default its lambda computes
    # (read, never run).
    env_modules: list[str] = field(default_factory=lambda: ["vllm.envs"])
    proposer_entries: list[str] = field(default_factory=lambda: ["propose"])
    # Speculative methods that load MTP draft models (a scan pairs draft loops with MTP
    # classes only through drafters the factories build for these methods).
    mtp_methods: list[str] = field(default_factory=lambda: ["mtp"])
    # Issue 18 (MTP005): other speculative methods whose drafters load a draft model class
    # from the registry tables (EAGLE heads). Their routes only say which classes a call
    # that passes the step can reach (a class that cannot take it raises TypeError).
    draft_model_methods: list[str] = field(default_factory=lambda: ["eagle", "eagle3"])
    # --- end issue 11 ---
    # Calls by which a platform plugin registers a model class for an architecture
    # (``ModelRegistry.register_model("Arch", "pkg.mod:Class")``; issue 13).
    plugin_register_calls: list[str] = field(default_factory=lambda: ["register_model"])
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    severity: dict[str, str] = field(default_factory=dict)

    def runners(self) -> tuple[str, ...]:
        """The model runners a plan can be asked for: those with drafter factories."""
        return tuple(self.dispatch_factories)

    def platforms(self) -> tuple[str, ...]:
        """The platforms a plan can be asked for: those with per-platform model copies."""
        return tuple(self.platform_dirs)

    def rule_enabled(self, code: str) -> bool:
        if self.select and not any(code.startswith(s) for s in self.select):
            return False
        return not any(code.startswith(s) for s in self.ignore)


_LIST_KEYS = {"threaded_params", "draft_loop_counts", "loaders", "registry_tables", "select", "ignore",
              "graph_capture_apis", "graph_replay_apis", "compile_decorators", "compile_dynamic_args",
              "compile_condition_args",
              "config_overrides", "override_field", "head_methods", "proposer_entries", "mtp_methods", "draft_model_methods",
              "validation_methods", "drafter_load_methods", "head_free_bases", "object_factories",
              "config_bases", "config_base_attributes",
              "plugin_register_calls", "pure_methods", "graph_capture_sizes", "worker_class_fields",
              "startup_methods", "env_modules", "weight_mapper_attrs", "weight_load_checks", "draft_class_attrs",
              "env_validations"}
_STR_DICT_KEYS = {"dispatch_roles", "platform_dirs", "platform_modules", "engine_mode_fields", "startup_assumptions",
                  "runner_choice_assumptions",
                  "config_registries",
                  "weight_mapper_fields"}
_LIST_DICT_KEYS = {"dispatch_factories", "sub_config_getters", "runner_validations", "runner_selectors"}
_TOML_NAMES = {f.name.replace("_", "-"): f.name for f in fields(Config)}
_SEVERITIES = {"error", "warning", "note"}


def load_config(pyproject: Path | None) -> Config:
    cfg = Config()
    if pyproject is None or not pyproject.is_file():
        return cfg
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{pyproject}: cannot read configuration: {exc}") from None
    section = data.get("tool", {}).get("mtp-audit")
    if section is None:
        return cfg
    if not isinstance(section, dict):
        raise ConfigError(f"{pyproject}: [tool.mtp-audit] must be a table")
    return apply_settings(cfg, section, str(pyproject))


def apply_settings(cfg: Config, section: dict[str, Any], origin: str) -> Config:
    for key, value in section.items():
        name = _TOML_NAMES.get(key) or (key if key in {f.name for f in fields(Config)} else None)
        if name is None:
            known = ", ".join(sorted(_TOML_NAMES))
            raise ConfigError(f"{origin}: unknown key tool.mtp-audit.{key} (known: {known})")
        if name in _LIST_KEYS:
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ConfigError(f"{origin}: tool.mtp-audit.{key} must be a list of non-empty strings")
            if name == "threaded_params" and not value:
                raise ConfigError(f"{origin}: tool.mtp-audit.{key} must name at least one parameter")
            setattr(cfg, name, list(value))
        elif name in _STR_DICT_KEYS or name in _LIST_DICT_KEYS:
            _check_dict(name, key, value, origin, lists=name in _LIST_DICT_KEYS)
            merged = dict(getattr(cfg, name))
            merged.update(value)
            setattr(cfg, name, merged)
        elif name == "search_limits":
            from .search_limits import check

            problem = check(value)
            if problem:
                raise ConfigError(f"{origin}: tool.mtp-audit.{key} {problem}")
            cfg.search_limits = {**cfg.search_limits, **value}
        elif name == "severity":
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and v in _SEVERITIES for k, v in value.items()
            ):
                raise ConfigError(
                    f"{origin}: tool.mtp-audit.severity must map rule codes to one of error, warning, note"
                )
            cfg.severity = dict(value)
    return cfg


def _check_dict(name: str, key: str, value: Any, origin: str, lists: bool) -> None:
    """issue 11: tables of strings (or of lists of strings)."""
    def ok(v: Any) -> bool:
        if lists:
            return isinstance(v, list) and all(isinstance(x, str) and x for x in v)
        return isinstance(v, str) and bool(v)

    if not isinstance(value, dict) or not all(isinstance(k, str) and ok(v) for k, v in value.items()):
        what = "lists of non-empty strings" if lists else "non-empty strings"
        raise ConfigError(f"{origin}: tool.mtp-audit.{key} must map names to {what}")
    if name == "dispatch_roles":
        unknown = set(value) - {"root", "speculative", "method", "k", "draft", "hf"}
        if unknown:
            raise ConfigError(f"{origin}: tool.mtp-audit.{key} has unknown role(s) {', '.join(sorted(unknown))}")
