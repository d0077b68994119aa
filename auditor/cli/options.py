"""Options and arguments shared by the ``mtp-audit`` commands, declared once (``Annotated`` style).

Every command takes its parameters from here, so that an option is spelled, described and
validated the same way wherever it appears. The runners and platforms a plan can be asked
for come from the configuration (``[tool.mtp-audit]`` ``dispatch_factories`` and
``platform_dirs``), checked once the target's configuration is loaded; the help shows the
defaults.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

PathArg = Annotated[
    Optional[Path],
    typer.Argument(metavar="PATH", show_default=False, help="vLLM repository root (holding vllm/) or the vllm package directory."),
]
RepoArg = Annotated[
    Path,
    typer.Argument(metavar="REPO", show_default=False, help="A git repository of vLLM (a clone, or one made by `releases import`)."),
]
InstalledOpt = Annotated[bool, typer.Option("--installed", help="Scan the vLLM installed in this Python environment (read, never imported).")]
ReleaseOpt = Annotated[
    Optional[str],
    typer.Option("--release", metavar="X.Y.Z", help="Download and scan the source distribution of a vLLM release (e.g. 0.33.0)."),
]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", metavar="FILE", help="Write the report to FILE instead of stdout.")]
SelectOpt = Annotated[
    Optional[list[str]],
    typer.Option("--select", metavar="CODES", help="Only these rule codes or prefixes (repeat or comma-separate, e.g. MTP001,MTP002)."),
]
IgnoreOpt = Annotated[Optional[list[str]], typer.Option("--ignore", metavar="CODES", help="Skip these rule codes or prefixes.")]
ExitZeroOpt = Annotated[bool, typer.Option("--exit-zero", help="Exit 0 even when there are findings.")]
PluginOpt = Annotated[
    Optional[list[Path]],
    typer.Option("--plugin", metavar="PLUGIN_ROOT", help="Audit vLLM together with this platform plugin (its repository or sdist root, or its package directory); repeatable."),
]
PluginReleaseOpt = Annotated[
    Optional[list[str]],
    typer.Option("--plugin-release", metavar="NAME==VERSION", help="Download a platform plugin's source distribution from the package index and audit it with vLLM; repeatable."),
]
CacheDirOpt = Annotated[
    Optional[Path],
    typer.Option("--cache-dir", metavar="DIR", help="Cache directory (default: $MTP_AUDIT_CACHE_DIR, else ~/.cache/mtp-audit)."),
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the analysis caches.")]
ConfigOpt = Annotated[
    Optional[Path],
    typer.Option("--config", metavar="FILE", help="A pyproject.toml with a [tool.mtp-audit] table (default: the scanned tree's)."),
]
BaselineOpt = Annotated[
    Optional[Path],
    typer.Option("--baseline", metavar="FILE", help="Hide findings recorded in this baseline file (see `baseline create`)."),
]
WorkersOpt = Annotated[
    Optional[int],
    typer.Option("--workers", metavar="N", min=1, max=64, help="Parser processes for a cold scan (default: CPU count, at most 4)."),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress or timing lines on stderr.")]


class OutputFormat(str, Enum):
    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"


class GraphFormat(str, Enum):
    dot = "dot"
    json = "json"
    graphml = "graphml"


class ReportFormat(str, Enum):
    text = "text"
    markdown = "markdown"
    html = "html"
    json = "json"


class BisectFormat(str, Enum):
    text = "text"
    json = "json"


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    note = "note"


FormatOpt = Annotated[OutputFormat, typer.Option("--format", "-f", metavar="FORMAT", help="Report format: text, json, sarif or github.")]


class LayersFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    html = "html"


def _choices(names: tuple[str, ...]) -> str:
    return "<" + "|".join(names) + ">"


def _defaults() -> tuple[tuple[str, ...], tuple[str, ...]]:
    from ..common.config import Config

    cfg = Config()
    return cfg.runners(), cfg.platforms()


RUNNERS, PLATFORMS = _defaults()

# `layers`: the question asked of the dispatch analysis.
PlanInstalledOpt = Annotated[bool, typer.Option("--installed", help="The vLLM installed in this Python environment (not imported).")]
PlanReleaseOpt = Annotated[Optional[str], typer.Option("--release", metavar="X.Y.Z", help="A vLLM release's source distribution.")]
ArchOpt = Annotated[Optional[str], typer.Option("--arch", help="A registered draft architecture (e.g. DeepSeekMTPModel).")]
HfConfigOpt = Annotated[
    Optional[Path], typer.Option("--hf-config", help="The target model's config.json: vLLM's override code picks the draft.")
]
ModelDirOpt = Annotated[
    Optional[Path], typer.Option("--model", help="A model directory (config.json + safetensors): plan its config and "
                                 "report the MTP layers its checkpoint carries, built and run (headers only).")
]
KOpt = Annotated[Optional[int], typer.Option("--k", min=1, max=64, help="num_speculative_tokens (with --all: default 3).")]
AllOpt = Annotated[bool, typer.Option("--all", help="Every registered MTP architecture x runner (the matrix).")]
LayerCountOpt = Annotated[int, typer.Option("--layers", min=1, max=64, help="With --all: the layer count each model is given.")]
RunnerOpt = Annotated[
    Optional[str], typer.Option("--runner", metavar=_choices(RUNNERS), help=f"{' or '.join(RUNNERS)} (default: both).")
]
MethodOpt = Annotated[Optional[str], typer.Option(
    "--method", help="speculative method (default: mtp; with --speculative-config, the method it gives).")]
SpecConfigOpt = Annotated[Optional[str], typer.Option(
    "--speculative-config", metavar="JSON",
    help="The speculative config exactly as `vllm serve --speculative-config` takes it (JSON text, @file or a file path): "
         "method, num_speculative_tokens and options such as draft_sample_method, use_local_argmax_reduction.")]
EngineModeOpt = Annotated[str, typer.Option(
    "--engine-mode", metavar="eager|compiled|both",
    help="Which engine the answer is for: eager, compiled (torch.compile + CUDA graphs, vLLM's default) or both.")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", metavar="FIELD=VALUE", help="A draft hf-config field (repeatable).")]
EnvOpt = Annotated[Optional[list[str]], typer.Option(
    "--env", metavar="NAME=VALUE",
    help="An environment variable the server runs with (repeatable): the engine's check of the environment "
         "runs over the variables given (and no other vLLM reads).")]
CleanEnvOpt = Annotated[bool, typer.Option(
    "--clean-env",
    help="The server runs with no vLLM environment variable set beyond those --env gives (the environment is "
         "then known; without --env or --clean-env it is not).")]
PlatformOpt = Annotated[
    str, typer.Option("--platform", metavar=_choices(PLATFORMS), help="Which per-platform model copy is imported.")
]
LayersFormatOpt = Annotated[LayersFormat, typer.Option("--format", "-f")]
PlanPluginOpt = Annotated[
    Optional[list[Path]],
    typer.Option("--plugin", metavar="PLUGIN_ROOT", help="Plan with this platform plugin (its repository or sdist root, or package directory): its runner's own dispatch decides; repeatable."),
]
PlanPluginReleaseOpt = Annotated[
    Optional[list[str]],
    typer.Option("--plugin-release", metavar="NAME==VERSION", help="Download a platform plugin's source distribution and plan with it; repeatable."),
]

# `history --layers`
HistoryKOpt = Annotated[Optional[int], typer.Option("--k", min=2, max=64, help="With --layers: num_speculative_tokens (default 3).")]
HistoryLayerCountOpt = Annotated[
    Optional[int], typer.Option("--layer-count", min=2, max=64, help="With --layers: the layer count each model is given (default 3).")
]
HistoryRunnerOpt = Annotated[
    Optional[str], typer.Option("--runner", metavar="|".join(RUNNERS), help="With --layers: one runner (default both).")
]
