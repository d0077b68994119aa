"""``mtp-audit fix``: apply the rules' autofixes (:mod:`auditor.services.fix`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import EXIT_CLEAN, EXIT_FINDINGS
from .options import CacheDirOpt, ConfigOpt, NoCacheOpt


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
    from ..services.fix import fix_tree

    report = fix_tree(path, select, not diff, only, cache_dir, no_cache, config)
    if diff:
        sys.stdout.write(report.diff())
    for f, reason in report.refused:
        typer.echo(f"refused {f.rule} at {f.path}:{f.line} {f.function}: {reason}", err=True)
    verb = "would fix" if diff else "fixed"
    typer.echo(f"{verb} {len(report.fixed)} finding(s) in {len(report.changed)} file(s); refused {len(report.refused)}", err=True)
    raise typer.Exit(EXIT_FINDINGS if report.refused else EXIT_CLEAN)
