"""``mtp-audit baseline``: record today's findings so that only new ones are reported."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import command, group
from .options import CacheDirOpt, ConfigOpt, InstalledOpt, NoCacheOpt, PathArg, ReleaseOpt

app = group("Record today's findings so that only new ones are reported.")


@command("create", app)
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
    from ..services.baseline import write_baseline
    from ..services.scan import scan_target

    scan_, _ = scan_target(path, installed, release, cache_dir, no_cache, config, None, None, None, reuse_result=True)
    n = write_baseline(scan_.result.findings, output)
    typer.echo(f"wrote {n} finding(s) to {output}", err=True)
