"""``mtp-audit layers``: which MTP layer runs at each draft step, for one model and one
configuration, per runner — with the dispatch decisions that lead there. The work is
:func:`auditor.services.layers.layers_document`; the JSON form is documented and
versioned in ``docs/layers.md``."""

from __future__ import annotations

from .options import (
    AllOpt,
    ArchOpt,
    CacheDirOpt,
    ConfigOpt,
    EngineModeOpt,
    CleanEnvOpt,
    EnvOpt,
    HfConfigOpt,
    KOpt,
    LayerCountOpt,
    LayersFormat,
    LayersFormatOpt,
    MethodOpt,
    ModelDirOpt,
    NoCacheOpt,
    OutputOpt,
    QuietOpt,
    PathArg,
    PlanInstalledOpt,
    PlanPluginOpt,
    PlanPluginReleaseOpt,
    PlanReleaseOpt,
    PlatformOpt,
    RunnerOpt,
    SetOpt,
    SpecConfigOpt,
)


def layers_command(
    path: PathArg = None,
    installed: PlanInstalledOpt = False,
    release: PlanReleaseOpt = None,
    arch: ArchOpt = None,
    hf_config: HfConfigOpt = None,
    model: ModelDirOpt = None,
    k: KOpt = None,
    all_: AllOpt = False,
    layers: LayerCountOpt = 3,
    runner: RunnerOpt = None,
    method: MethodOpt = None,
    set_: SetOpt = None,
    platform: PlatformOpt = "cuda",
    format: LayersFormatOpt = LayersFormat.text,
    output: OutputOpt = None,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    config: ConfigOpt = None,
    plugin: PlanPluginOpt = None,
    plugin_release: PlanPluginReleaseOpt = None,
    speculative_config: SpecConfigOpt = None,
    engine_mode: EngineModeOpt = "both",
    env: EnvOpt = None,
    clean_env: CleanEnvOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Which MTP layer runs at each draft step for one model and configuration, and why."""
    from ..common.atomic import emit
    from ..common.errors import UsageError
    from ..common.inputs import default_config, refuse_output_over_inputs
    from ..common.progress import Progress
    from ..services.layers import layers_document

    refuse_output_over_inputs(output, [("--hf-config", hf_config), ("--config", config), ("pyproject.toml", default_config(path)),
                                       *((("--model", model / name) for name in ("config.json", "model.safetensors",
                                                                                  "model.safetensors.index.json"))
                                         if model is not None else ())],
                              [path, *(plugin or [])])
    progress = Progress(quiet)
    from ..common.gc_pause import paused_until_exit

    paused_until_exit()  # the scan's heap is garbage once the document is made, and the process ends
    if model is not None:
        from ..services.checkpoint import checkpoint_layers_document

        if hf_config is not None or arch is not None or all_:
            raise UsageError("--model DIR plans DIR/config.json: leave out --hf-config, --arch and --all")

        def plan(fmt: str) -> str:
            return layers_document(path, installed, release, None, model / "config.json", k, False, layers, runner,
                                   method, set_, platform, fmt, cache_dir, no_cache, config, plugin, plugin_release,
                                   speculative_config=speculative_config, engine_mode=engine_mode, progress=progress,
                                   env=env, clean_env=clean_env)

        emit(checkpoint_layers_document(model, format.value, plan), output)
        return
    text = layers_document(path, installed, release, arch, hf_config, k, all_, layers, runner, method, set_, platform,
                           format.value, cache_dir, no_cache, config, plugin, plugin_release,
                           speculative_config=speculative_config, engine_mode=engine_mode, progress=progress, env=env,
                           clean_env=clean_env)
    emit(text, output)
