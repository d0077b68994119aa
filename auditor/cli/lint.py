"""``mtp-audit lint``: only the findings a change introduces (a pre-merge gate), for vLLM or
a platform plugin's repository against a pinned vLLM (:mod:`auditor.services.lint`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..common.atomic import emit
from ..common.gc_pause import paused_until_exit
from ..common.errors import UsageError
from ..common.progress import Progress
from .app import EXIT_CLEAN, EXIT_FINDINGS
from .options import (
    BaselineOpt,
    CacheDirOpt,
    ConfigOpt,
    FailOn,
    FormatOpt,
    IgnoreOpt,
    NoCacheOpt,
    OutputFormat,
    OutputOpt,
    QuietOpt,
    SelectOpt,
    WorkersOpt,
)


def lint(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="A git checkout of vLLM (its root holds vllm/).  [default: .]", show_default=False)] = Path("."),
    base: Annotated[Optional[str], typer.Option("--base", metavar="REF", show_default=False, help="Required: the ref to compare with (e.g. origin/main, HEAD~1).")] = None,
    head: Annotated[Optional[str], typer.Option("--head", metavar="REF", show_default=False, help="Lint this ref instead of the work tree.")] = None,
    format: FormatOpt = OutputFormat.text,
    output: OutputOpt = None,
    fail_on: Annotated[FailOn, typer.Option("--fail-on", metavar="SEVERITY", help="Lowest severity of a new finding that fails (exit 1): error, warning or note.")] = FailOn.warning,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    baseline: BaselineOpt = None,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    config: ConfigOpt = None,
    workers: WorkersOpt = None,
    quiet: QuietOpt = False,
    vllm: Annotated[Optional[Path], typer.Option("--vllm", metavar="PATH", help="Lint a platform plugin's repository against this vLLM tree (pinned).")] = None,
    vllm_release: Annotated[Optional[str], typer.Option("--vllm-release", metavar="X.Y.Z", help="Lint a platform plugin's repository against this vLLM release (fetched, cached).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Text report: every hop and affected class, and per MTP class the layer each step selects before and after a behaviour change.")] = False,
) -> None:
    """Report only the findings a change introduces (a pre-merge gate).

    Both sides are analysed as whole trees. Exit 1 when the change introduces a finding
    at or above --fail-on, or when a changed file no longer parses (reported like a
    finding, rule MTP901). The findings the change removes are listed after the new
    ones: defects as fixed (by rule and id), by-design reports (EAGLE-style reuse of
    layer 0) as behaviour changes (eagle-style -> threaded); neither changes the exit."""
    from ..facts.cache import FactsCache
    from ..model.findings import Severity
    from ..output import render
    from ..services.lint import fails, run_lint
    from ..services.scan import apply_baseline
    from ..services.settings import cache_root, load_settings, registered_rules
    from ..services.targets import plugin_lint
    from .scan import report_gone_baseline

    if base is None:
        raise UsageError("lint needs --base REF: the ref to compare with (e.g. --base origin/main)")
    from ..common.inputs import refuse_output_over_inputs

    refuse_output_over_inputs(output, [("--config", config), ("--baseline", baseline), ("pyproject.toml", path / "pyproject.toml")],
                              [path, vllm])
    progress = Progress(quiet)
    in_plugin = plugin_lint(path, vllm, vllm_release, cache_dir, progress)
    config_root = path.resolve() if (path / "vllm").is_dir() else (in_plugin.config_root if in_plugin else None)
    cfg = load_settings(config_root, config, select, ignore)
    root = cache_root(no_cache, cache_dir)
    paused_until_exit()  # each side's scan heap is garbage once the report is made, and the process ends
    outcome = run_lint(path.resolve(), base, head, cfg, FactsCache(root), root, workers, progress, rules=registered_rules(),
                       packages=in_plugin.packages if in_plugin else ("vllm",), host=in_plugin.host if in_plugin else None)
    report_gone_baseline(apply_baseline(outcome.result, baseline, outcome.head_findings, cfg), baseline)
    emit(render(outcome.result, format.value, verbose=verbose), output)
    changed, new = outcome.result.stats.get("changed_files", 0), len(outcome.result.findings)
    gone = outcome.result.lint
    extra = ""
    if gone is not None and gone.fixed:
        extra += f", {len(gone.fixed)} fixed"
    if gone is not None and gone.behaviour_changes:
        n = len(gone.behaviour_changes)
        extra += f", {n} behaviour change{'' if n == 1 else 's'}"
    if gone is not None and gone.masked:
        extra += f", {len(gone.masked)} masked (not fixed)"
    progress.line(f"{changed} changed file{'' if changed == 1 else 's'}, {new} new finding{'' if new == 1 else 's'}{extra}")
    raise typer.Exit(EXIT_FINDINGS if fails(outcome.result.findings, Severity(fail_on.value)) else EXIT_CLEAN)
