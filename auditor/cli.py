"""The ``mtp-audit`` command line (typer)."""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

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
WorkersOpt = typer.Option(None, "--workers", min=1, max=64, help="Parser processes for a cold scan (default: CPU count, at most 4).")


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
    from .cache import FactsCache, default_cache_dir

    return FactsCache(None if no_cache else (cache_dir or default_cache_dir()))


def scan_target(path, installed, release, cache_dir, no_cache, config, select, ignore, workers, quiet=False):
    from .engine import run_scan

    tree = open_target(path, installed, release, cache_dir, quiet)
    cfg = load_settings(tree, config, select or [], ignore or [])
    return run_scan(tree, cfg, make_cache(no_cache, cache_dir), workers)


def _write(text: str, output: Optional[Path]) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    tmp = output.with_name(output.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, output)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror or exc}") from None


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
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress or timing on stderr."),
) -> None:
    """Scan a vLLM tree for every place spec_step_idx is lost on its way to the MTP layer selection."""
    from .output import render

    scan_ = scan_target(path, installed, release, cache_dir, no_cache, config, select, ignore, workers, quiet)
    result = scan_.result
    width = None if output is not None or not sys.stdout.isatty() else None
    _write(render(result, format.value, console_width=width, color=output is None and sys.stdout.isatty()), output)
    if not quiet and format == OutputFormat.text and sys.stderr.isatty():
        t = scan_.timing
        typer.echo(f"scanned in {t['seconds']:.2f}s ({t['files_parsed']} parsed, {t['cache_hits']} from cache)", err=True)
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
) -> None:
    """Export the call graph (functions the analysis examined; edges say how the step is passed)."""
    import networkx as nx

    scan_ = scan_target(path, installed, release, cache_dir, no_cache, config, None, None, None, True)
    g = scan_.analysis.build_graph()
    if format == GraphFormat.json:
        data = nx.node_link_data(g, edges="edges")
        text = json.dumps(data, indent=1, sort_keys=True, default=str) + "\n"
    elif format == GraphFormat.graphml:
        text = "\n".join(nx.generate_graphml(g)) + "\n"
    else:
        text = _to_dot(g)
    _write(text, output)


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
) -> None:
    """Print one finding's call chain with the code at every hop."""
    from rich.console import Console
    from rich.syntax import Syntax

    scan_ = scan_target(path, installed, release, cache_dir, no_cache, config, None, None, None, True)
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


releases_app = typer.Typer(help="Manage a git repository of vLLM releases built from their sdists.", no_args_is_help=True)
app.add_typer(releases_app, name="releases")


def _mount_optional() -> None:
    from .releases_import import import_command

    releases_app.command("import")(import_command)
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
