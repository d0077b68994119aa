"""The ``mtp-audit`` command line (typer).

Every error reaches the user as one line, ``mtp-audit: error: <message>``, and exit
code 2: the tool's own errors (:class:`~auditor.errors.AuditError`) and usage errors
found by the parser alike (:func:`main` runs the command in non-standalone mode so that
they come back here instead of being drawn as a box). Shared options are declared once
in :mod:`auditor.cli_options`.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional, Sequence, TypeVar, cast

import typer

from .. import __version__
from ..common.atomic import emit
from .options import (
    PluginOpt,
    PluginReleaseOpt,
    registered_rules,
    BaselineOpt,
    CacheDirOpt,
    ConfigOpt,
    ExitZeroOpt,
    FailOn,
    FormatOpt,
    GraphFormat,
    IgnoreOpt,
    InstalledOpt,
    NoCacheOpt,
    OutputFormat,
    OutputOpt,
    PathArg,
    QuietOpt,
    ReleaseOpt,
    SelectOpt,
    WorkersOpt,
)
from ..common.errors import AuditError, ConfigError, UsageError
from ..common.progress import Progress

if TYPE_CHECKING:
    from rules.base import Rule

    from ..common.config import Config
    from ..engine.scan import Scan
    from ..model.findings import Finding, ScanResult
    from ..source.trees import DirectoryTree, SourceTree

try:  # typer >= 0.24 carries its own copy of click
    from typer._click import exceptions as click_exceptions
    from typer.core import TyperCommand, TyperGroup
except ImportError:  # pragma: no cover - older typer on click
    from click import exceptions as click_exceptions  # type: ignore[no-redef,import-not-found,unused-ignore]
    from typer.core import TyperCommand, TyperGroup


class Command(TyperCommand):
    """Usage lines in one style: ``PATH`` when required, ``[PATH]`` when optional."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if getattr(param, "param_type_name", "") != "argument":
                continue
            name = (param.metavar or (param.name or "").upper()).rstrip(".")
            if param.nargs != 1:
                name += "..."
            pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        """Arguments by name only (no ``<path>`` type tag), then the options."""
        args, opts = [], []
        for param in self.get_params(ctx):
            kind = getattr(param, "param_type_name", "")
            if kind == "argument" and not getattr(param, "hidden", False):
                args.append(((param.metavar or (param.name or "").upper()), getattr(param, "help", None) or ""))
            elif kind == "option":
                record = param.get_help_record(ctx)
                if record is not None:
                    opts.append(record)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        if opts:
            with formatter.section("Options"):
                formatter.write_dl(opts)


class Group(TyperGroup):
    pass


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

app = typer.Typer(
    name="mtp-audit",
    help="Audit vLLM for a lost spec_step_idx between speculative draft loops and MTP layer selection.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
    context_settings=CONTEXT,
    cls=Group,
)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _err(message: str) -> None:
    typer.echo(f"mtp-audit: error: {message}", err=True)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"mtp-audit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_version_callback, help="Print the version and exit.")
    ] = False,
) -> None:
    """Audit vLLM for a lost spec_step_idx between speculative draft loops and MTP layer selection."""


_F = TypeVar("_F", bound=Callable[..., Any])


def command(name: Optional[str] = None, app_: typer.Typer = app) -> Callable[[_F], _F]:
    """Register a command of ``app_`` with the :class:`Command` help and usage style."""
    register: Callable[[_F], _F] = app_.command(name, cls=Command)
    return register


# --------------------------------------------------------------------------
# rule codes


def check_codes(codes: Sequence[str], where: str, exact: bool = False) -> list[str]:
    """``codes`` upper-cased; an unknown code (or, unless ``exact``, a prefix matching no
    rule) is an error naming the code and the known ones."""
    known = [r.code for r in registered_rules()]
    out = []
    for raw in codes:
        code = raw.strip().upper()
        if not code:
            continue
        ok = code in known if exact else any(k.startswith(code) for k in known)
        if not ok:
            raise UsageError(f"unknown rule code {raw.strip()!r} in {where} (known: {', '.join(known)})")
        out.append(code)
    return out


def _split(values: Optional[list[str]]) -> list[str]:
    return [c for v in values or [] for c in v.split(",") if c.strip()]


# --------------------------------------------------------------------------
# shared target/settings handling


def open_target(path: Optional[Path], installed: bool, release: Optional[str], cache_dir: Optional[Path], progress: Progress) -> "DirectoryTree":
    from ..source.trees import DirectoryTree, locate_installed, locate_root

    chosen = sum([path is not None, installed, release is not None])
    if chosen != 1:
        raise UsageError("give exactly one target: PATH, --installed or --release X.Y.Z")
    if release is not None:
        from ..source.fetch import fetch_release

        root = fetch_release(release, cache_dir=cache_dir, progress=progress.interactive, log=progress.phase)
        return DirectoryTree(root, label=root.name)
    if installed:
        return DirectoryTree(locate_installed())
    assert path is not None
    return DirectoryTree(locate_root(path))


def load_settings(root: Optional[Path], config_path: Optional[Path], select: Optional[list[str]], ignore: Optional[list[str]]) -> "Config":
    """The configuration (``--config``, else ``root``'s pyproject.toml) with ``--select``/``--ignore``
    applied; every rule code in it is checked."""
    from ..common.config import load_config

    if config_path is not None and not config_path.is_file():
        raise UsageError(f"configuration file not found: {config_path}")
    source = config_path if config_path is not None else (root / "pyproject.toml" if root else None)
    cfg = load_config(source)
    origin = f"{source}: tool.mtp-audit"
    try:
        cfg.select = check_codes(cfg.select, f"{origin}.select")
        cfg.ignore = check_codes(cfg.ignore, f"{origin}.ignore")
        severity = dict(zip(check_codes(list(cfg.severity), f"{origin}.severity", exact=True), cfg.severity.values()))
    except UsageError as exc:
        raise ConfigError(str(exc)) from None
    cfg.severity = severity
    if select:
        cfg.select = check_codes(_split(select), "--select")
        if not cfg.select:
            raise UsageError("--select needs at least one rule code (e.g. --select MTP001)")
    if ignore:
        cfg.ignore = check_codes(_split(ignore), "--ignore")
    return cfg


def with_plugins(
    tree: "DirectoryTree",
    plugins: Optional[list[Path]],
    plugin_releases: Optional[list[str]],
    cache_dir: Optional[Path],
    progress: Progress,
) -> "SourceTree":
    """vLLM's tree combined with platform plugins' trees into one import namespace, every
    path remembering its root."""
    if not plugins and not plugin_releases:
        return tree
    import re

    from ..source.fetch import fetch_release, project_key
    from ..source.trees import CombinedTree, Root, locate_plugin

    roots = [Root("vllm", tree, False)]
    for p in plugins or []:
        plugin = locate_plugin(p)
        roots.append(Root(plugin.label, plugin, True))
    for spec in plugin_releases or []:
        name, sep, version = spec.partition("==")
        if not sep or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name.strip()) or not version.strip():
            raise UsageError(f"--plugin-release wants NAME==VERSION (e.g. vllm-ascend==0.30.0rc2), got {spec!r}")
        name, version = project_key(name.strip()), version.strip()
        root = fetch_release(version, cache_dir=cache_dir, progress=progress.interactive, log=progress.phase, project=name)
        plugin = locate_plugin(root, name=name)
        plugin.label = f"{name}-{version.lstrip('v')}"
        roots.append(Root(name, plugin, True))
    return CombinedTree(roots)


@dataclass(frozen=True)
class PluginLint:
    """``lint`` inside a platform plugin's repository: its packages, and how each side of
    the change is combined with the pinned vLLM tree."""

    packages: tuple[str, ...]
    host: "Callable[[SourceTree], SourceTree]"
    config_root: Optional[Path]


def plugin_lint(path: Path, vllm: Optional[Path], vllm_release: Optional[str], cache_dir: Optional[Path], progress: Progress) -> Optional[PluginLint]:
    if vllm is None and vllm_release is None:
        return None
    if vllm is not None and vllm_release is not None:
        raise UsageError("give one of --vllm PATH and --vllm-release X.Y.Z")
    from ..services.lint import repo_for
    from ..source.trees import CombinedTree, DirectoryTree, Root, locate_plugin, locate_root

    if vllm_release is not None:
        from ..source.fetch import fetch_release

        host_tree = DirectoryTree(fetch_release(vllm_release, cache_dir=cache_dir, progress=progress.interactive, log=progress.phase),
                                  label=f"vllm-{vllm_release.lstrip('v')}")
    else:
        assert vllm is not None
        host_tree = DirectoryTree(locate_root(vllm))
    repo = repo_for(path)
    work = Path(repo.working_tree_dir or path)
    plugin = locate_plugin(work)
    if plugin.root != work.resolve():
        raise UsageError(f"the plugin's packages must be at the repository root {work} (found under {plugin.root})")

    def host(tree: "SourceTree") -> "SourceTree":
        # run_lint hands over the plugin's side of the change: a DirectoryTree or a GitTree
        # listing the plugin's packages.
        return CombinedTree([Root("vllm", host_tree, False), Root(plugin.label, cast("DirectoryTree", tree), True)])

    return PluginLint(plugin.packages, host, host_tree.root)


def cache_root(no_cache: bool, cache_dir: Optional[Path]) -> Optional[Path]:
    from ..common.paths import default_cache_dir

    return None if no_cache else (cache_dir or default_cache_dir())


def scan_target(
    path: Optional[Path],
    installed: bool,
    release: Optional[str],
    cache_dir: Optional[Path],
    no_cache: bool,
    config: Optional[Path],
    select: Optional[list[str]],
    ignore: Optional[list[str]],
    workers: Optional[int],
    progress: Optional[Progress] = None,
    reuse_result: bool = False,
    plugins: Optional[list[Path]] = None,
    plugin_releases: Optional[list[str]] = None,
) -> "tuple[Scan, Config]":
    """Open the target (with any platform plugins), load the settings and scan;
    ``reuse_result``: an unchanged tree may return the cached result (no analysis object)."""
    from ..facts.cache import FactsCache
    from ..engine.scan import run_scan
    from ..engine.result_cache import ResultCache

    progress = progress or Progress(quiet=True)
    vllm_tree = open_target(path, installed, release, cache_dir, progress)
    tree = with_plugins(vllm_tree, plugins, plugin_releases, cache_dir, progress)
    cfg = load_settings(getattr(vllm_tree, "root", None), config, select, ignore)
    facts = FactsCache(cache_root(no_cache, cache_dir))
    results = ResultCache(facts.root.parent) if reuse_result and facts.root is not None else None
    progress.phase(f"scanning {tree.label}")
    scan = run_scan(tree, cfg, registered_rules(), facts, workers, results, progress=progress.phase)
    t = scan.timing
    how = "unchanged tree, result from cache" if t.get("result_cached") else f"{t['files_parsed']} files parsed, {t['cache_hits']} from cache"
    progress.line(f"scanned in {t['seconds']:.2f}s ({how})")
    return scan, cfg


def _apply_baseline(result: "ScanResult", baseline: Optional[Path], everything: "Optional[list[Finding]]", cfg: "Optional[Config]" = None) -> None:
    """Hide baseline findings. An entry is called fixed only when its finding is really gone
    from the tree (``everything``: all of its findings, not only the reported ones) and its
    rule ran."""
    if baseline is None:
        return
    from ..engine.suppress import apply_baseline, read_baseline

    entries = read_baseline(baseline)
    remaining, _ = apply_baseline(result.findings, entries)
    _, fixed = apply_baseline(everything if everything is not None else result.findings, entries)
    if cfg is not None:
        fixed = [e for e in fixed if not isinstance(e.get("rule"), str) or cfg.rule_enabled(e["rule"])]
    result.stats["baseline_hidden"] = len(result.findings) - len(remaining)
    result.stats["baseline_fixed"] = [e["fingerprint"] for e in fixed]
    result.findings = remaining
    if fixed:
        typer.echo(
            f"mtp-audit: {len(fixed)} baseline entr{'y is' if len(fixed) == 1 else 'ies are'} fixed and can be removed "
            f"({', '.join(e['fingerprint'] for e in fixed[:5])}{' …' if len(fixed) > 5 else ''}): "
            f"run `mtp-audit baseline create` again to shrink {baseline}",
            err=True,
        )


# --------------------------------------------------------------------------
@command()
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
) -> None:
    """Find where spec_step_idx is lost on its way to the MTP layers.

    Scans a vLLM tree (PATH, --installed or --release) and reports every place a draft
    step index is dropped between the speculative draft loop and the MTP layer selection.
    Exit 1 when there are findings, 2 on bad input."""
    from ..output import render

    scan_, cfg = scan_target(path, installed, release, cache_dir, no_cache, config, select, ignore, workers, Progress(quiet),
                             reuse_result=True, plugins=plugin, plugin_releases=plugin_release)
    result = scan_.result
    _apply_baseline(result, baseline, list(result.findings), cfg)
    emit(render(result, format.value, color=output is None and sys.stdout.isatty(), reachability=reachability), output)
    active = [f for f in result.findings if not f.suppressed]
    unparsed = [p for p in result.problems if p.kind in PARSE_FAILURES]
    failed = (active and not exit_zero) or (fail_on_parse_error and unparsed)
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_CLEAN)


PARSE_FAILURES = ("parse-error", "decode-error")


@command()
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
) -> None:
    """Export the call graph the analysis examined.

    Nodes are functions; edges say how the step index is passed along each call."""
    import networkx as nx

    scan_, _ = scan_target(path, installed, release, cache_dir, no_cache, config, None, None, None,
                           plugins=plugin, plugin_releases=plugin_release)
    assert scan_.analysis is not None
    g = scan_.analysis.graph.build_graph()
    if format == GraphFormat.json:
        data = nx.node_link_data(g, edges="edges")
        text = json.dumps(data, indent=1, sort_keys=True, default=str) + "\n"
    elif format == GraphFormat.graphml:
        text = "\n".join(nx.generate_graphml(g)) + "\n"
    else:
        text = _to_dot(g)
    emit(text, output)


def _to_dot(g: Any) -> str:
    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ["digraph mtp_audit {", "  node [shape=box, fontsize=10];"]
    for n, data in sorted(g.nodes(data=True)):
        lines.append(f"  {q(n)} [label={q(data.get('function', n))}];")
    for u, v, data in sorted(g.edges(data=True), key=lambda e: (e[0], e[1], e[2].get("line", 0))):
        passing = ",".join(f"{k[5:]}={val}" for k, val in sorted(data.items()) if k.startswith("pass_"))
        label = q(f"L{data.get('line')} {passing}")
        lines.append(f"  {q(u)} -> {q(v)} [label={label}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


@command()
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
) -> None:
    """Show one finding's call chain with the code at every hop."""
    from rich.console import Console
    from rich.syntax import Syntax

    scan_, _ = scan_target(path, installed, release, cache_dir, no_cache, config, None, None, None,
                           plugins=plugin, plugin_releases=plugin_release)
    assert scan_.analysis is not None
    matches = [f for f in scan_.result.findings if f.fingerprint.startswith(finding_id.lower())]
    if not matches:
        raise UsageError(f"no finding with id {finding_id!r} in this tree (ids are the fingerprints `scan` prints)")
    if len(matches) > 1:
        raise UsageError(f"id {finding_id!r} is ambiguous: {', '.join(f.fingerprint for f in matches)}")
    f = matches[0]
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


@command("rules")
def rules_cmd(code: Annotated[Optional[str], typer.Argument(metavar="CODE", show_default=False, help="Show one rule's documentation.")] = None) -> None:
    """List the rules, or print one rule's documentation."""
    known = registered_rules()
    if code is None:
        for r in known:
            typer.echo(f"{r.code}  {r.severity.value:<7}  {r.name:<24} {r.summary}")
        return
    for r in known:
        if r.code == code.upper():
            typer.echo(f"{r.code} {r.name} ({r.severity.value})\n\n{r.doc()}")
            return
    raise UsageError(f"unknown rule {code!r}; known: {', '.join(r.code for r in known)}")


@command()
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
) -> None:
    """Report only the findings a change introduces (a pre-merge gate).

    Both sides are analysed as whole trees. Exit 1 when the change introduces a finding
    at or above --fail-on, or when a changed file no longer parses (reported like a
    finding, rule MTP901)."""
    from ..facts.cache import FactsCache
    from ..services.lint import fails, run_lint
    from ..model.findings import Severity
    from ..output import render

    if base is None:
        raise UsageError("lint needs --base REF: the ref to compare with (e.g. --base origin/main)")
    progress = Progress(quiet)
    in_plugin = plugin_lint(path, vllm, vllm_release, cache_dir, progress)
    config_root = path.resolve() if (path / "vllm").is_dir() else (in_plugin.config_root if in_plugin else None)
    cfg = load_settings(config_root, config, select, ignore)
    root = cache_root(no_cache, cache_dir)
    outcome = run_lint(path.resolve(), base, head, cfg, FactsCache(root), root, workers, progress, rules=registered_rules(),
                       packages=in_plugin.packages if in_plugin else ("vllm",), host=in_plugin.host if in_plugin else None)
    _apply_baseline(outcome.result, baseline, outcome.head_findings, cfg)
    emit(render(outcome.result, format.value), output)
    changed, new = outcome.result.stats.get("changed_files", 0), len(outcome.result.findings)
    progress.line(f"{changed} changed file{'' if changed == 1 else 's'}, {new} new finding{'' if new == 1 else 's'}")
    raise typer.Exit(EXIT_FINDINGS if fails(outcome.result.findings, Severity(fail_on.value)) else EXIT_CLEAN)


baseline_app = typer.Typer(help="Record today's findings so that only new ones are reported.", no_args_is_help=True, cls=Group, rich_markup_mode=None)
app.add_typer(baseline_app, name="baseline")


@command("create", baseline_app)
def baseline_create(
    output: Annotated[Path, typer.Option("--output", "-o", metavar="FILE", show_default=False, help="The baseline file to write.")],
    path: PathArg = None,
    installed: InstalledOpt = False,
    release: ReleaseOpt = None,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Write the current findings' ids to a baseline file."""
    from ..engine.suppress import write_baseline

    scan_, _ = scan_target(path, installed, release, cache_dir, no_cache, config, None, None, None, reuse_result=True)
    n = write_baseline(scan_.result.findings, output)
    typer.echo(f"wrote {n} finding(s) to {output}", err=True)


@command()
def fix(
    path: Annotated[Path, typer.Argument(metavar="PATH", show_default=False, help="vLLM repository root (holding vllm/) or the vllm package directory.")],
    select: Annotated[Optional[list[str]], typer.Option("--select", metavar="CODES", help="Rule codes to fix (only MTP001 has an autofix).")] = None,
    diff: Annotated[bool, typer.Option("--diff", help="Print the unified diff instead of writing files.")] = False,
    only: Annotated[
        Optional[list[str]], typer.Option("--file", metavar="FILE", help="Only fix findings in this file (repeatable; relative to the root).")
    ] = None,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Thread spec_step_idx through wrappers that drop it (MTP001).

    A libcst codemod: formatting and comments are kept, a call written one argument
    per line stays so."""
    from ..fix.codemod import apply_fixes, fixable_codes

    rules = registered_rules()
    fixable = set(fixable_codes(rules))
    codes = set(check_codes(_split(select), "--select", exact=True)) if select else fixable
    unsupported = codes - fixable
    if unsupported:
        raise UsageError(f"no autofix for {', '.join(sorted(unsupported))} (fixable: {', '.join(sorted(fixable))})")
    scan_, _ = scan_target(path, False, None, cache_dir, no_cache, config, None, None, None)
    assert scan_.analysis is not None
    root = Path(getattr(scan_.analysis.index.tree, "root"))
    if only:
        wanted = {_relative(p, root) for p in only}
        files = set(scan_.analysis.index.tree.python_files())
        missing = sorted(w for w in wanted if w not in files)
        if missing:
            raise UsageError(f"--file {missing[0]}: no such Python file under {root}")
        scan_.result.findings = [f for f in scan_.result.findings if f.path in wanted]
    report = apply_fixes(scan_, root, rules, codes, write=not diff)
    if diff:
        sys.stdout.write(report.diff())
    for f, reason in report.refused:
        typer.echo(f"refused {f.rule} at {f.path}:{f.line} {f.function}: {reason}", err=True)
    verb = "would fix" if diff else "fixed"
    typer.echo(f"{verb} {len(report.fixed)} finding(s) in {len(report.changed)} file(s); refused {len(report.refused)}", err=True)
    raise typer.Exit(EXIT_FINDINGS if report.refused else EXIT_CLEAN)


def _relative(given: str, root: Path) -> str:
    """``--file`` as a root-relative POSIX path (absolute paths and ./ prefixes accepted)."""
    p = Path(given)
    if p.is_absolute():
        try:
            p = p.resolve().relative_to(root.resolve())
        except ValueError:
            raise UsageError(f"--file {given}: not under the scanned root {root}") from None
    return p.as_posix().lstrip("/").removeprefix("./")


releases_app = typer.Typer(help="Build a git repository of vLLM releases from their sdists.", no_args_is_help=True, cls=Group, rich_markup_mode=None)
app.add_typer(releases_app, name="releases")


def _mount() -> None:
    from .history import bisect_command, diff_command, history_command
    from .releases import import_command

    command("import", releases_app)(import_command)
    command("history")(history_command)
    command("diff")(diff_command)
    command("bisect")(bisect_command)
    from .layers import layers_command

    command("layers")(layers_command)
    try:
        from runtime_check.cli import app as runtime_app
    except ModuleNotFoundError as exc:
        # Only a runtime checker that is genuinely not installed is tolerated; an import
        # error inside it (a bug) must surface.
        if exc.name not in ("runtime_check", "runtime_check.cli"):
            raise
        return
    app.add_typer(runtime_app, name="runtime")


_mount()


def _usage_message(exc: Any) -> str:
    msg = exc.format_message().strip().replace("Value error, ", "")
    msg = msg[:1].lower() + msg[1:]
    ctx = getattr(exc, "ctx", None)
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    return " ".join(msg.split()).rstrip(".") + where


def main(argv: Optional[list[str]] = None) -> None:
    cli = typer.main.get_command(app)
    try:
        rc = cli.main(args=argv, prog_name="mtp-audit", standalone_mode=False)
    except click_exceptions.NoArgsIsHelpError as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx is not None else "")
        rc = EXIT_ERROR
    except click_exceptions.UsageError as exc:
        _err(_usage_message(exc))
        rc = EXIT_ERROR
    except click_exceptions.ClickException as exc:
        _err(" ".join(exc.format_message().split()))
        rc = EXIT_ERROR
    except AuditError as exc:
        _err(str(exc))
        rc = EXIT_ERROR
    except (KeyboardInterrupt, typer.Abort):
        _err("interrupted")
        rc = 130
    except BrokenPipeError:
        sys.stderr.close()
        rc = EXIT_FINDINGS
    except Exception as exc:  # never a traceback for the user; MTP_AUDIT_DEBUG=1 shows it
        if os.environ.get("MTP_AUDIT_DEBUG"):
            raise
        _err(f"internal error: {type(exc).__name__}: {exc} (set MTP_AUDIT_DEBUG=1 for details)")
        rc = EXIT_ERROR
    sys.exit(rc if isinstance(rc, int) else EXIT_CLEAN)


if __name__ == "__main__":
    main()
