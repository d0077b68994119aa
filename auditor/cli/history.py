"""``mtp-audit history``, ``diff`` and ``bisect``: findings across the releases and commits
of a git repository (:mod:`auditor.services.history`), rendered by
:mod:`auditor.output.history` and :mod:`auditor.output.layer_history`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..common.atomic import emit
from ..common.progress import Progress
from .options import (
    BisectFormat,
    CacheDirOpt,
    ConfigOpt,
    ExitZeroOpt,
    HistoryKOpt,
    HistoryLayerCountOpt,
    HistoryRunnerOpt,
    NoCacheOpt,
    OutputOpt,
    QuietOpt,
    ReportFormat,
    RepoArg,
    WorkersOpt,
)

ReportFormatOpt = Annotated[ReportFormat, typer.Option("--format", "-f", metavar="FORMAT", help="Report format: text, markdown, html or json.")]


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
    k: HistoryKOpt = None,
    layer_count: HistoryLayerCountOpt = None,
    runner: HistoryRunnerOpt = None,
) -> None:
    """Findings of every release tag: introduced, fixed, kept."""
    from ..services.history import history_settings, run_history, run_layer_history_asked

    cfg, cache = history_settings(config, no_cache, cache_dir)
    progress = Progress(quiet)
    if layers or k is not None or layer_count is not None or runner is not None:
        from ..output.layer_history import render as render_layers

        layer_hist = run_layer_history_asked(repo, start, end, tags, pre, cfg, cache, workers, progress, layers, k, layer_count, runner)
        emit(render_layers(layer_hist, format.value), output)
        t = layer_hist.timing
        progress.line(f"{len(layer_hist.releases)} releases in {t['seconds']:.1f}s ({t['scanned']} planned, {t['from_cache']} from cache)")
        return
    from ..output.history import render
    from ..services.settings import registered_rules

    hist = run_history(repo, start, end, tags, pre, cfg, cache, workers, progress, rules=registered_rules())
    emit(render(hist, format.value), output)
    t = hist.timing
    progress.line(f"{len(hist.releases)} releases in {t['seconds']:.1f}s ({t['scanned']} scanned, {t['from_cache']} from cache)")


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
    from ..output.history import render
    from ..services.history import history_settings, run_diff
    from ..services.settings import registered_rules

    cfg, cache = history_settings(config, no_cache, cache_dir)
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
    from ..output.history import render_bisect
    from ..services.history import history_settings, run_bisect
    from ..services.settings import registered_rules

    cfg, cache = history_settings(config, no_cache, cache_dir)
    res = run_bisect(repo, fingerprint, good, bad, cfg, cache, workers, Progress(quiet), rules=registered_rules())
    emit(render_bisect(res, format.value), output)
