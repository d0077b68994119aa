"""``mtp-audit releases import``: a git repository of vLLM releases built from their sdists
(:mod:`auditor.source.releases`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import command, group
from .options import CacheDirOpt, QuietOpt

app = group("Build a git repository of vLLM releases from their sdists.")


@command("import", app)
def import_command(
    versions: Annotated[
        list[str], typer.Argument(metavar="VERSION...", show_default=False, help="Release versions to import, e.g. 0.9.2 0.10.0")
    ],
    into: Annotated[
        Path, typer.Option("--into", metavar="DIR", show_default=False, help="Repository directory to create or append to (a bare git repo).")
    ],
    cache_dir: CacheDirOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Build (or extend) a git repository with one tagged commit per vLLM release sdist."""
    from ..common.progress import Progress
    from ..source.releases import run_import

    progress = Progress(quiet)
    result = run_import(versions, into, cache_dir, progress=progress.interactive, log=progress.phase)
    for tag in result.skipped:
        typer.echo(f"skipped {tag} (tag exists)")
    for tag in result.created:
        typer.echo(f"created {tag} {result.commits[tag][:12]}")
    typer.echo(f"{into}: {len(result.created)} created, {len(result.skipped)} skipped")
