"""The ``mtp-audit`` command line (typer)."""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from .atomic import emit
from .errors import AuditError, UsageError

app = typer.Typer(
    name="mtp-audit",
    help="Audit vLLM for a lost spec_step_idx between speculative draft loops and MTP layer selection.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class OutputFormat(str, Enum):
    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"


class GraphFormat(str, Enum):
    dot = "dot"
    json = "json"
    graphml = "graphml"


def _err(message: str) -> None:
    typer.echo(f"mtp-audit: error: {message}", err=True)


# --------------------------------------------------------------------------
# shared target/option handling
PathArg = typer.Argument(None, help="vLLM repository root (holding vllm/) or the vllm package directory.")
InstalledOpt = typer.Option(False, "--installed", help="Scan the vLLM installed in this Python environment (not imported).")
ReleaseOpt = typer.Option(None, "--release", metavar="X.Y.Z", help="Download and scan the source distribution of a vLLM release.")
CacheDirOpt = typer.Option(None, "--cache-dir", help="Cache directory (default: $MTP_AUDIT_CACHE_DIR or ~/.cache/mtp-audit).")
NoCacheOpt = typer.Option(False, "--no-cache", help="Do not read or write the per-file analysis cache.")
ConfigOpt = typer.Option(None, "--config", help="pyproject.toml with a [tool.mtp-audit] table (default: the scanned tree's, if any).")
BaselineOpt = typer.Option(None, "--baseline", help="Hide findings recorded in this baseline file (see `baseline create`).")
WorkersOpt = typer.Option(None, "--workers", min=1, max=64, help="Parser processes for a cold scan (default: CPU count, at most 4).")
PluginOpt = typer.Option(None, "--plugin", metavar="PLUGIN_ROOT", help="Audit vLLM together with this platform plugin (its repository or sdist root, or its package directory); repeatable.")
PluginReleaseOpt = typer.Option(None, "--plugin-release", metavar="NAME==VERSION", help="Download a platform plugin's source distribution from the package index and audit it with vLLM; repeatable.")


def open_target(path: Optional[Path], installed: bool, release: Optional[str], cache_dir: Optional[Path], quiet: bool = False):
    from .source import DirectoryTree, locate_installed, locate_root

    chosen = sum([path is not None, installed, release is not None])
    if chosen != 1:
        raise UsageError("give exactly one target: PATH, --installed or --release X.Y.Z")
    if release is not None:
        from .fetch import fetch_release

        root = fetch_release(release, cache_dir=cache_dir, progress=not quiet and sys.stderr.isatty())
        return DirectoryTree(root, label=f"vllm-{release.lstrip('v')}")
    if installed:
        return DirectoryTree(locate_installed())
    assert path is not None
    return DirectoryTree(locate_root(path))


def with_plugins(tree, plugins: Optional[list[Path]], plugin_releases: Optional[list[str]], cache_dir: Optional[Path], quiet: bool = False):
    """Issue 13: vLLM's tree combined with platform plugins' trees into one namespace."""
    if not plugins and not plugin_releases:
        return tree
    import re

    from .source import CombinedTree, Root, locate_plugin

    roots = [Root("vllm", tree, False)]
    for p in plugins or []:
        roots.append(_plugin_root(locate_plugin(p)))
    for spec in plugin_releases or []:
        name, sep, version = spec.partition("==")
        if not sep or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name.strip()) or not version.strip():
            raise UsageError(f"--plugin-release wants NAME==VERSION (e.g. vllm-ascend==0.30.0rc2), got {spec!r}")
        from .fetch import fetch_release, project_key

        name, version = project_key(name.strip()), version.strip()
        root = fetch_release(version, cache_dir=cache_dir, progress=not quiet and sys.stderr.isatty(), project=name)
        plugin = locate_plugin(root, name=name)
        plugin.label = f"{name}-{version.lstrip('v')}"
        roots.append(Root(name, plugin, True))
    return CombinedTree(roots)


def _plugin_root(tree):
    from .source import Root

    return Root(tree.label, tree, True)


def load_settings(tree, config_path: Optional[Path], select: list[str], ignore: list[str]):
    from .config import load_config

    if config_path is not None and not config_path.is_file():
        raise UsageError(f"configuration file not found: {config_path}")
    root = getattr(tree, "root", None)
    cfg = load_config(config_path if config_path is not None else (root / "pyproject.toml" if root else None))
    if select:
        cfg.select = _codes(select)
    if ignore:
        cfg.ignore = _codes(ignore)
    return cfg


def _codes(values: list[str]) -> list[str]:
    out = []
    for v in values:
        for code in v.split(","):
            code = code.strip().upper()
            if code:
                if not code.startswith("MTP"):
                    raise UsageError(f"unknown rule code {code!r}: codes look like MTP001")
                out.append(code)
    return out


def make_cache(no_cache: bool, cache_dir: Optional[Path]):
    from .cache import FactsCache
    from .paths import default_cache_dir

    return FactsCache(None if no_cache else (cache_dir or default_cache_dir()))


def scan_target(path, installed, release, cache_dir, no_cache, config, select, ignore, workers, quiet=False, reuse_result=False,
                plugins=None, plugin_releases=None):
    """``reuse_result``: an unchanged tree may return the cached result (no analysis object)."""
    from rules import all_rules

    from .engine import run_scan
    from .result_cache import ResultCache

    tree = with_plugins(open_target(path, installed, release, cache_dir, quiet), plugins, plugin_releases, cache_dir, quiet)
    cfg = load_settings(tree, config, select or [], ignore or [])
    facts = make_cache(no_cache, cache_dir)
    results = ResultCache(facts.root.parent) if reuse_result and facts.root is not None else None
    return run_scan(tree, cfg, all_rules(), facts, workers, results)


def _apply_baseline(result, baseline: Optional[Path]) -> None:
    if baseline is None:
        return
    from .suppress import apply_baseline, read_baseline

    remaining, fixed = apply_baseline(result.findings, read_baseline(baseline))
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
@app.command()
def scan(
    path: Optional[Path] = PathArg,
    installed: bool = InstalledOpt,
    release: Optional[str] = ReleaseOpt,
    format: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="Report format."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report to a file instead of stdout."),
    select: Optional[list[str]] = typer.Option(None, "--select", help="Only these rule codes (repeat or comma-separate)."),
    ignore: Optional[list[str]] = typer.Option(None, "--ignore", help="Skip these rule codes."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when there are findings."),
    cache_dir: Optional[Path] = CacheDirOpt,
    no_cache: bool = NoCacheOpt,
    config: Optional[Path] = ConfigOpt,
    workers: Optional[int] = WorkersOpt,
    baseline: Optional[Path] = BaselineOpt,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress or timing on stderr."),
    plugin: Optional[list[Path]] = PluginOpt,
    plugin_release: Optional[list[str]] = PluginReleaseOpt,
) -> None:
    """Scan a vLLM tree for every place spec_step_idx is lost on its way to the MTP layer selection."""
    from .output import render

    scan_ = scan_target(path, installed, release, cache_dir, no_cache, config, select, ignore, workers, quiet, reuse_result=True,
                        plugins=plugin, plugin_releases=plugin_release)
    result = scan_.result
    _apply_baseline(result, baseline)
    emit(render(result, format.value, color=output is None and sys.stdout.isatty()), output)
    if not quiet and format == OutputFormat.text and sys.stderr.isatty():
        t = scan_.timing
        how = "unchanged tree, result from cache" if t.get("result_cached") else f"{t['files_parsed']} parsed, {t['cache_hits']} from cache"
        typer.echo(f"scanned in {t['seconds']:.2f}s ({how})", err=True)
    active = [f for f in result.findings if not f.suppressed]
    raise typer.Exit(EXIT_FINDINGS if active and not exit_zero else EXIT_CLEAN)


@app.command()
def graph(
    path: Optional[Path] = PathArg,
    installed: bool = InstalledOpt,
    release: Optional[str] = ReleaseOpt,
    format: GraphFormat = typer.Option(GraphFormat.dot, "--format", "-f"),
    output: Optional[Path] = typer.Option(None, "--output", "-o"),
    cache_dir: Optional[Path] = CacheDirOpt,
    no_cache: bool = NoCacheOpt,
    config: Optional[Path] = ConfigOpt,
    plugin: Optional[list[Path]] = PluginOpt,
    plugin_release: Optional[list[str]] = PluginReleaseOpt,
) -> None:
    """Export the call graph (functions the analysis examined; edges say how the step is passed)."""
    import networkx as nx

    scan_ = scan_target(path, installed, release, cache_dir, no_cache, config, None, None, None, True,
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


def _to_dot(g) -> str:
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


@app.command()
def explain(
    finding_id: str = typer.Argument(..., metavar="ID", help="A finding's fingerprint (or a unique prefix of it)."),
    path: Optional[Path] = PathArg,
    installed: bool = InstalledOpt,
    release: Optional[str] = ReleaseOpt,
    cache_dir: Optional[Path] = CacheDirOpt,
    no_cache: bool = NoCacheOpt,
    config: Optional[Path] = ConfigOpt,
    plugin: Optional[list[Path]] = PluginOpt,
    plugin_release: Optional[list[str]] = PluginReleaseOpt,
) -> None:
    """Print one finding's call chain with the code at every hop."""
    from rich.console import Console
    from rich.syntax import Syntax

    scan_ = scan_target(path, installed, release, cache_dir, no_cache, config, None, None, None, True,
                        plugins=plugin, plugin_releases=plugin_release)
    matches = [f for f in scan_.result.findings if f.fingerprint.startswith(finding_id.lower())]
    if not matches:
        raise UsageError(f"no finding with id {finding_id!r} in this tree (ids are the fingerprints `scan` prints)")
    if len(matches) > 1:
        raise UsageError(f"id {finding_id!r} is ambiguous: {', '.join(f.fingerprint for f in matches)}")
    f = matches[0]
    console = Console(highlight=False, soft_wrap=True)
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
        console.print(Syntax(code, "python", line_numbers=True, start_line=start, highlight_lines={hop.line}, word_wrap=True))


@app.command("rules")
def rules_cmd(code: Optional[str] = typer.Argument(None, help="Show one rule's documentation.")) -> None:
    """List the rules, or print one rule's documentation."""
    from rules import all_rules

    known = all_rules()
    if code is None:
        for r in known:
            typer.echo(f"{r.code}  {r.severity.value:<7}  {r.name:<24} {r.summary}")
        return
    for r in known:
        if r.code == code.upper():
            typer.echo(f"{r.code} {r.name} ({r.severity.value})\n\n{r.doc()}")
            return
    raise UsageError(f"unknown rule {code!r}; known: {', '.join(r.code for r in known)}")


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    note = "note"


@app.command()
def lint(
    path: Path = typer.Argument(Path("."), help="A git checkout of vLLM (its root holds vllm/), or of a platform plugin with --vllm/--vllm-release."),
    base: str = typer.Option(..., "--base", help="The ref to compare with (e.g. origin/main, HEAD~1)."),
    head: Optional[str] = typer.Option(None, "--head", help="Lint this ref instead of the work tree."),
    format: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f"),
    output: Optional[Path] = typer.Option(None, "--output", "-o"),
    fail_on: FailOn = typer.Option(FailOn.warning, "--fail-on", help="Lowest severity of a new finding that fails (exit 1)."),
    select: Optional[list[str]] = typer.Option(None, "--select"),
    ignore: Optional[list[str]] = typer.Option(None, "--ignore"),
    baseline: Optional[Path] = BaselineOpt,
    cache_dir: Optional[Path] = CacheDirOpt,
    no_cache: bool = NoCacheOpt,
    config: Optional[Path] = ConfigOpt,
    workers: Optional[int] = WorkersOpt,
    vllm: Optional[Path] = typer.Option(None, "--vllm", metavar="PATH", help="Lint a platform plugin's repository against this vLLM tree (pinned)."),
    vllm_release: Optional[str] = typer.Option(None, "--vllm-release", metavar="X.Y.Z", help="Lint a platform plugin's repository against this vLLM release (fetched, cached)."),
) -> None:
    """Report only the findings a change introduces (whole-tree analysis on both sides)."""
    from .paths import default_cache_dir
    from .lint import fails, run_lint
    from .model import Severity
    from .output import render
    from .source import DirectoryTree

    plugin_args = _plugin_lint(path, vllm, vllm_release, cache_dir)  # issue 13
    cfg_tree = DirectoryTree(path.resolve()) if (path / "vllm").is_dir() else plugin_args.get("config_tree")
    cfg = load_settings(cfg_tree, config, select or [], ignore or [])
    cache_root = None if no_cache else (cache_dir or default_cache_dir())
    from rules import all_rules

    outcome = run_lint(path.resolve(), base, head, cfg, make_cache(no_cache, cache_dir), cache_root, workers, rules=all_rules(),
                       packages=plugin_args.get("packages", ("vllm",)), host=plugin_args.get("host"))
    _apply_baseline(outcome.result, baseline)
    emit(render(outcome.result, format.value), output)
    raise typer.Exit(EXIT_FINDINGS if fails(outcome.result.findings, Severity(fail_on.value)) else EXIT_CLEAN)


def _plugin_lint(path: Path, vllm: Optional[Path], vllm_release: Optional[str], cache_dir: Optional[Path]) -> dict:
    """Issue 13: ``lint`` inside a platform plugin's repository, against a pinned vLLM."""
    if vllm is None and vllm_release is None:
        return {}
    if vllm is not None and vllm_release is not None:
        raise UsageError("give one of --vllm PATH and --vllm-release X.Y.Z")
    from .lint import _repo_for
    from .source import CombinedTree, DirectoryTree, Root, locate_plugin, locate_root

    if vllm_release is not None:
        from .fetch import fetch_release

        host_tree = DirectoryTree(fetch_release(vllm_release, cache_dir=cache_dir, progress=sys.stderr.isatty()),
                                  label=f"vllm-{vllm_release.lstrip('v')}")
    else:
        assert vllm is not None
        host_tree = DirectoryTree(locate_root(vllm))
    repo = _repo_for(path)
    work = Path(repo.working_tree_dir or path)
    plugin = locate_plugin(work)
    if plugin.root != work.resolve():
        raise UsageError(f"the plugin's packages must be at the repository root {work} (found under {plugin.root})")

    def host(tree):
        return CombinedTree([Root("vllm", host_tree, False), Root(plugin.label, tree, True)])

    return {"packages": plugin.packages, "host": host, "config_tree": host_tree}


baseline_app = typer.Typer(help="Record today's findings so that only new ones are reported.", no_args_is_help=True)
app.add_typer(baseline_app, name="baseline")


@baseline_app.command("create")
def baseline_create(
    path: Optional[Path] = PathArg,
    installed: bool = InstalledOpt,
    release: Optional[str] = ReleaseOpt,
    output: Path = typer.Option(..., "--output", "-o", help="Baseline file to write."),
    cache_dir: Optional[Path] = CacheDirOpt,
    no_cache: bool = NoCacheOpt,
    config: Optional[Path] = ConfigOpt,
) -> None:
    """Write the current findings' fingerprints to a baseline file."""
    from .suppress import write_baseline

    scan_ = scan_target(path, installed, release, cache_dir, no_cache, config, None, None, None, True)
    n = write_baseline(scan_.result.findings, output)
    typer.echo(f"wrote {n} finding(s) to {output}", err=True)


@app.command()
def fix(
    path: Path = typer.Argument(..., help="vLLM repository root (holding vllm/) or the vllm package directory."),
    select: Optional[list[str]] = typer.Option(None, "--select", help="Rule codes to fix (only MTP001 has an autofix)."),
    diff: bool = typer.Option(False, "--diff", help="Print the unified diff instead of writing files."),
    only: Optional[list[str]] = typer.Option(None, "--file", help="Only fix findings in these files (repeatable; paths relative to the root)."),
    cache_dir: Optional[Path] = CacheDirOpt,
    no_cache: bool = NoCacheOpt,
    config: Optional[Path] = ConfigOpt,
) -> None:
    """Thread spec_step_idx through dropping wrappers (libcst codemod, formatting preserved)."""
    from rules import all_rules

    from .fix import apply_fixes, fixable_codes

    rules = all_rules()
    fixable = set(fixable_codes(rules))
    codes = set(_codes(select)) if select else fixable
    unsupported = codes - fixable
    if unsupported:
        raise UsageError(f"no autofix for {', '.join(sorted(unsupported))} (fixable: {', '.join(sorted(fixable))})")
    scan_ = scan_target(path, False, None, cache_dir, no_cache, config, None, None, None, True, reuse_result=False)
    if only:
        wanted = {p.strip("/") for p in only}
        scan_.result.findings = [f for f in scan_.result.findings if f.path in wanted]
    assert scan_.analysis is not None
    root = scan_.analysis.index.tree.root
    report = apply_fixes(scan_, root, rules, codes, write=not diff)
    if diff:
        sys.stdout.write(report.diff())
    for f, reason in report.refused:
        typer.echo(f"refused {f.rule} at {f.path}:{f.line} {f.function}: {reason}", err=True)
    verb = "would fix" if diff else "fixed"
    typer.echo(f"{verb} {len(report.fixed)} finding(s) in {len(report.changed)} file(s); refused {len(report.refused)}", err=True)
    raise typer.Exit(EXIT_FINDINGS if report.refused else EXIT_CLEAN)


releases_app = typer.Typer(help="Manage a git repository of vLLM releases built from their sdists.", no_args_is_help=True)
app.add_typer(releases_app, name="releases")


def _mount_optional() -> None:
    from .history import bisect_command, diff_command, history_command
    from .releases_import import import_command

    releases_app.command("import")(import_command)
    app.command("history")(history_command)
    app.command("diff")(diff_command)
    app.command("bisect")(bisect_command)
    try:
        from runtime_check.cli import app as runtime_app
    except ImportError:  # the runtime checker ships with the package; guard partial installs
        return
    app.add_typer(runtime_app, name="runtime")


_mount_optional()


def main() -> None:
    try:
        app()
    except AuditError as exc:
        _err(str(exc))
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt:
        _err("interrupted")
        sys.exit(130)
    except Exception as exc:  # never a traceback for the user; MTP_AUDIT_DEBUG=1 shows it
        if os.environ.get("MTP_AUDIT_DEBUG"):
            raise
        _err(f"internal error: {type(exc).__name__}: {exc} (set MTP_AUDIT_DEBUG=1 for details)")
        sys.exit(EXIT_ERROR)


if __name__ == "__main__":
    main()
