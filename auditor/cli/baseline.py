"""``mtp-audit baseline``: record today's findings so that only new ones are reported."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .app import command, group
from ..common.progress import Progress
from .options import CacheDirOpt, ConfigOpt, InstalledOpt, NoCacheOpt, PathArg, QuietOpt, ReleaseOpt

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
    force: Annotated[bool, typer.Option("--force", help="Replace an existing FILE instead of merging its entries.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Write the current findings' ids to a baseline file.

    An existing baseline is merged: its entries (also those added by hand) are kept beside
    today's findings; --force replaces it. A file that is not a baseline is never replaced
    without --force."""
    from ..common.inputs import default_config, refuse_output_over_inputs
    from ..services.baseline import check_replaceable, write_baseline
    from ..services.scan import scan_target

    refuse_output_over_inputs(output, [("--config", config), ("pyproject.toml", default_config(path))], [path])
    check_replaceable(output, force)  # before the scan: a refusal costs nothing
    progress = Progress(quiet)
    scan_, _ = scan_target(path, installed, release, cache_dir, no_cache, config, None, None, None, progress, reuse_result=True)
    n = write_baseline(scan_.result.findings, output, force=force)
    progress.line(f"wrote {n} finding(s) to {output}")
