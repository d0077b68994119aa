"""``mtp-audit scan``, ``graph`` and ``explain``: one scan of a tree (:mod:`auditor.services.scan`),
reported, exported as a call graph, or one finding shown hop by hop."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ..common.atomic import emit
from ..common.gc_pause import paused_until_exit
from ..common.progress import Progress
from .app import EXIT_CLEAN, EXIT_FINDINGS
from .options import (
    BaselineOpt,
    CacheDirOpt,
    ConfigOpt,
    ExitZeroOpt,
    FormatOpt,
    GraphFormat,
    IgnoreOpt,
    InstalledOpt,
    NoCacheOpt,
    OutputFormat,
    OutputOpt,
    PathArg,
    PluginOpt,
    PluginReleaseOpt,
    QuietOpt,
    ReleaseOpt,
    SelectOpt,
    WorkersOpt,
)

if TYPE_CHECKING:
    from ..services.baseline import GoneEntries


def _ids(entries: "list[dict[str, Any]]") -> str:
    ids = [str(e["fingerprint"]) for e in entries]
    return f"{', '.join(ids[:5])}{' …' if len(ids) > 5 else ''}"


def report_gone_baseline(gone: "GoneEntries", baseline: Optional[Path]) -> None:
    """Say which baseline entries are gone (their findings are) and can be removed: fixed,
    or behaviour changes when their rule's reports are by design (never called fixed)."""
    if not gone:
        return
    if gone.masked:
        n = len(gone.masked)
        hidden = "; ".join(f"{e['fingerprint']} by {', '.join(str(b) for b in by)}" for e, by in gone.masked[:5])
        typer.echo(f"mtp-audit: {n} baseline entr{'y is' if n == 1 else 'ies are'} masked, not fixed: a new finding on "
                   f"{'its' if n == 1 else 'their'} route hides {'it' if n == 1 else 'them'} ({hidden}"
                   f"{' …' if n > 5 else ''}); keep {'it' if n == 1 else 'them'}", err=True)
    if not (gone.fixed or gone.behaviour_changes):
        return
    shrink = f"run `mtp-audit baseline create --force -o {baseline}` to shrink it"
    fixed, changed = gone.fixed, gone.behaviour_changes
    if not changed:
        typer.echo(f"mtp-audit: {len(fixed)} baseline entr{'y is' if len(fixed) == 1 else 'ies are'} fixed and can be "
                   f"removed ({_ids(fixed)}): {shrink}", err=True)
        return
    n = len(fixed) + len(changed)
    what = f"{len(fixed)} fixed" + (f" ({_ids(fixed)})" if fixed else "")
    what += (f", {len(changed)} behaviour change{'' if len(changed) == 1 else 's'} "
             f"(by design, not {'a fix' if len(changed) == 1 else 'fixes'}: {_ids(changed)})")
    typer.echo(f"mtp-audit: {n} baseline entr{'y is' if n == 1 else 'ies are'} gone and can be removed: {what}: {shrink}",
               err=True)


def scan(
    path: PathArg = None,
    installed: InstalledOpt = False,
    release: ReleaseOpt = None,
    format: FormatOpt = OutputFormat.text,
    output: OutputOpt = None,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    exit_zero: ExitZeroOpt = False,
    reachability: Annotated[
        bool, typer.Option("--reachability", help="Text report: add the table of which MTP layers each draft loop reaches.")
    ] = False,
    fail_on_parse_error: Annotated[
        bool, typer.Option("--fail-on-parse-error", help="Exit 1 when a file cannot be parsed (it is listed either way).")
    ] = False,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    config: ConfigOpt = None,
    workers: WorkersOpt = None,
    baseline: BaselineOpt = None,
    quiet: QuietOpt = False,
    plugin: PluginOpt = None,
    plugin_release: PluginReleaseOpt = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Text report: every hop of every call chain and every affected class.")
    ] = False,
) -> None:
    """Find where spec_step_idx is lost on its way to the MTP layers.

    Scans a vLLM tree (PATH, --installed or --release) and reports every place a draft
    step index is dropped between the speculative draft loop and the MTP layer selection.
    Exit 1 when there are findings, 2 on bad input."""
    from ..output import render
    from ..common.inputs import default_config, refuse_output_over_inputs
    from ..engine.mtp_presence import require_mtp_code
    from ..services.scan import PARSE_FAILURES, apply_baseline, scan_target

    refuse_output_over_inputs(output, [("--config", config), ("--baseline", baseline), ("pyproject.toml", default_config(path))],
                              [path, *(plugin or [])])
    paused_until_exit()  # the scan's heap is garbage once the report is made, and the process ends
    scan_, cfg = scan_target(path, installed, release, cache_dir, no_cache, config, select, ignore, workers, Progress(quiet),
                             reuse_result=True, plugins=plugin, plugin_releases=plugin_release)
    result = scan_.result
    require_mtp_code(result, str(path or release or "the installed vLLM"))
    report_gone_baseline(apply_baseline(result, baseline, list(result.findings), cfg), baseline)
    color = output is None and sys.stdout is not None and sys.stdout.isatty()
    emit(render(result, format.value, color=color, reachability=reachability, verbose=verbose), output)
    active = [f for f in result.findings if not f.suppressed]
    unparsed = [p for p in result.problems if p.kind in PARSE_FAILURES]
    # A file that could not be read may hold a finding: the scan is not clean, it is incomplete.
    unreadable = [p for p in result.problems if p.kind == "unreadable"]
    if unreadable:
        Progress(quiet).line(f"{len(unreadable)} file(s) could not be read ({unreadable[0].path}"
                             f"{' …' if len(unreadable) > 1 else ''}): what they hold is unknown, so the exit code is 1")
    failed = ((active or unreadable) and not exit_zero) or (fail_on_parse_error and unparsed)
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_CLEAN)


def graph(
    path: PathArg = None,
    installed: InstalledOpt = False,
    release: ReleaseOpt = None,
    format: Annotated[GraphFormat, typer.Option("--format", "-f", metavar="FORMAT", help="Graph format: dot, json (node-link) or graphml.")] = GraphFormat.dot,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", metavar="FILE", help="Write the graph to FILE instead of stdout.")] = None,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    config: ConfigOpt = None,
    plugin: PluginOpt = None,
    plugin_release: PluginReleaseOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Export the call graph the analysis examined.

    Nodes are functions; edges say how the step index is passed along each call."""
    from ..output.graph import render_graph
    from ..common.inputs import default_config, refuse_output_over_inputs
    from ..services.scan import scan_target

    refuse_output_over_inputs(output, [("--config", config), ("pyproject.toml", default_config(path))], [path, *(plugin or [])])
    paused_until_exit()
    scan_, _ = scan_target(path, installed, release, cache_dir, no_cache, config, None, None, None, Progress(quiet),
                           plugins=plugin, plugin_releases=plugin_release)
    assert scan_.analysis is not None
    emit(render_graph(scan_.analysis.graph.build_graph(), format.value), output)


def explain(
    finding_id: Annotated[str, typer.Argument(metavar="ID", show_default=False, help="A finding's id (as `scan` prints it) or a unique prefix of it.")],
    path: PathArg = None,
    installed: InstalledOpt = False,
    release: ReleaseOpt = None,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    config: ConfigOpt = None,
    plugin: PluginOpt = None,
    plugin_release: PluginReleaseOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Show one finding's call chain with the code at every hop."""
    from rich.console import Console
    from rich.syntax import Syntax

    from ..services.scan import find_finding, scan_target

    paused_until_exit()
    scan_, _ = scan_target(path, installed, release, cache_dir, no_cache, config, None, None, None, Progress(quiet),
                           plugins=plugin, plugin_releases=plugin_release)
    assert scan_.analysis is not None
    f = find_finding(scan_, finding_id)
    # Piped or redirected: no width limit, so that code lines are never cut or folded.
    tty = sys.stdout.isatty()
    console = Console(highlight=False, soft_wrap=True, width=None if tty else 10_000)
    console.print(f"[bold]{f.rule}[/] {f.severity.value} {f.path}:{f.line}:{f.column + 1} {f.function}")
    console.print(f.message, markup=False)
    if f.affected_classes:
        console.print("affected: " + ", ".join(str(c) for c in f.affected_classes), markup=False)
    tree = scan_.analysis.index.tree
    for i, hop in enumerate(f.trace, 1):
        console.print(f"\n[bold]{i}.[/] {hop.path}:{hop.line} {hop.function} — {hop.note}", markup=True)
        try:
            lines = tree.read(hop.path).decode("utf-8", "replace").splitlines()
        except OSError:
            continue
        start = max(1, hop.line - 2)
        code = "\n".join(lines[start - 1 : hop.line + 2])
        if tty:
            console.print(Syntax(code, "python", line_numbers=True, start_line=start, highlight_lines={hop.line}, word_wrap=True))
        else:
            width = len(str(start + code.count("\n")))
            for n, text in enumerate(code.split("\n"), start):
                marker = ">" if n == hop.line else " "
                sys.stdout.write(f"{marker}{n:>{width}} {text}\n")
    sys.stdout.flush()
