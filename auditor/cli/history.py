"""The ``history``, ``diff`` and ``bisect`` commands (mounted by :mod:`auditor.cli`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..common.atomic import emit
from .options import (
    registered_rules,
    BisectFormat,
    CacheDirOpt,
    ConfigOpt,
    ExitZeroOpt,
    NoCacheOpt,
    OutputOpt,
    QuietOpt,
    ReportFormat,
    RepoArg,
    WorkersOpt,
)

if TYPE_CHECKING:
    from ..common.config import Config
    from ..common.progress import Progress

ReportFormatOpt = Annotated[ReportFormat, typer.Option("--format", "-f", metavar="FORMAT", help="Report format: text, markdown, html or json.")]


def _settings(config: Optional[Path], no_cache: bool, cache_dir: Optional[Path]) -> "tuple[Config, Optional[Path]]":
    from .app import cache_root, load_settings

    return load_settings(None, config, [], []), cache_root(no_cache, cache_dir)


def history_command(
    repo: RepoArg,
    start: Annotated[Optional[str], typer.Option("--from", metavar="TAG", help="First release (tag or version, e.g. 0.22.1), inclusive.")] = None,
    end: Annotated[Optional[str], typer.Option("--to", metavar="TAG", help="Last release (tag or version), inclusive.")] = None,
    tags: Annotated[
        Optional[str],
        typer.Option("--tags", metavar="REGEX", help="Regular expression release tags must match (default: final releases such as v0.10.1 and v0.10.1.1).")
    ] = None,
    pre: Annotated[bool, typer.Option("--pre", help="Include pre-releases (rc, alpha, beta).")] = False,
    format: ReportFormatOpt = ReportFormat.text,
    output: OutputOpt = None,
    quiet: QuietOpt = False,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    config: ConfigOpt = None,
    workers: WorkersOpt = None,
    layers: Annotated[bool, typer.Option("--layers", help="Since when step i reaches MTP layer i, per architecture and runner (instead of findings).")] = False,
    k: Annotated[Optional[int], typer.Option("--k", min=2, max=64, help="With --layers: num_speculative_tokens (default 3).")] = None,
    layer_count: Annotated[Optional[int], typer.Option("--layer-count", min=2, max=64, help="With --layers: the layer count each model is given (default 3).")] = None,
    runner: Annotated[Optional[str], typer.Option("--runner", metavar="v1|v2", help="With --layers: one runner (default both).")] = None,
) -> None:
    """Findings of every release tag: introduced, fixed, kept."""
    from ..services.history import run_history
    from ..output.history import render
    from ..common.progress import Progress

    cfg, cache = _settings(config, no_cache, cache_dir)
    progress = Progress(quiet)
    if layers or k is not None or layer_count is not None or runner is not None:
        _layer_history(repo, start, end, tags, pre, format, output, progress, cfg, cache, workers, layers, k, layer_count, runner)
        return
    hist = run_history(repo, start, end, tags, pre, cfg, cache, workers, progress, rules=registered_rules())
    emit(render(hist, format.value), output)
    t = hist.timing
    progress.line(f"{len(hist.releases)} releases in {t['seconds']:.1f}s ({t['scanned']} scanned, {t['from_cache']} from cache)")


def _layer_history(repo: Path, start: Optional[str], end: Optional[str], tags: Optional[str], pre: bool, format: ReportFormat,
                   output: Optional[Path], progress: "Progress", cfg: "Config", cache: Optional[Path], workers: Optional[int],
                   layers: bool, k: Optional[int], layer_count: Optional[int], runner: Optional[str]) -> None:
    from ..common.errors import UsageError
    from ..services.history.layers import render, run_layer_history
    from .layers import RUNNERS

    if not layers:
        raise UsageError("--k, --layer-count and --runner go with --layers")
    if runner is not None and runner not in RUNNERS:
        raise UsageError(f"--runner takes {' or '.join(RUNNERS)}, got {runner!r}")
    hist = run_layer_history(repo, start, end, tags, pre, cfg, cache, workers, progress, rules=registered_rules(),
                             k=3 if k is None else k, layers=3 if layer_count is None else layer_count,
                             runners=(runner,) if runner else RUNNERS)
    emit(render(hist, format.value), output)
    t = hist.timing
    progress.line(f"{len(hist.releases)} releases in {t['seconds']:.1f}s ({t['scanned']} planned, {t['from_cache']} from cache)")


def diff_command(
    repo: RepoArg,
    base: Annotated[str, typer.Argument(metavar="A", show_default=False, help="The base revision: a tag, version (0.22.1), branch or commit.")],
    head: Annotated[str, typer.Argument(metavar="B", show_default=False, help="The revision compared with A.")],
    format: ReportFormatOpt = ReportFormat.text,
    output: OutputOpt = None,
    exit_zero: ExitZeroOpt = False,
    quiet: QuietOpt = False,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    config: ConfigOpt = None,
    workers: WorkersOpt = None,
) -> None:
    """What changed between two revisions (exit 1 if B adds findings).

    Lists the findings B introduced and fixed compared with A, and counts those that
    stay. A and B may be tags, versions (0.22.1 for v0.22.1), branches or commits."""
    from ..services.history import run_diff
    from ..output.history import render
    from ..common.progress import Progress

    cfg, cache = _settings(config, no_cache, cache_dir)
    hist = run_diff(repo, base, head, cfg, cache, workers, Progress(quiet), rules=registered_rules())
    emit(render(hist, format.value), output)
    delta = hist.deltas[-1]
    raise typer.Exit(1 if delta is not None and delta.introduced and not exit_zero else 0)


def bisect_command(
    repo: RepoArg,
    fingerprint: Annotated[str, typer.Argument(metavar="ID", show_default=False, help="The finding's id (fingerprint) or a unique prefix.")],
    good: Annotated[str, typer.Option("--good", metavar="A", show_default=False, help="An older revision.")],
    bad: Annotated[str, typer.Option("--bad", metavar="B", show_default=False, help="A newer revision (A must be its ancestor).")],
    format: Annotated[BisectFormat, typer.Option("--format", "-f", metavar="FORMAT", help="Output format: text or json.")] = BisectFormat.text,
    output: OutputOpt = None,
    quiet: QuietOpt = False,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    config: ConfigOpt = None,
    workers: WorkersOpt = None,
) -> None:
    """Find the commit that introduced or fixed a finding.

    A binary search between --good and --bad, reading commits from git objects."""
    from ..services.history import run_bisect
    from ..output.history import render_bisect
    from ..common.progress import Progress

    cfg, cache = _settings(config, no_cache, cache_dir)
    res = run_bisect(repo, fingerprint, good, bad, cfg, cache, workers, Progress(quiet), rules=registered_rules())
    emit(render_bisect(res, format.value), output)
