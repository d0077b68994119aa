"""`mtp-audit runtime observed FILE.jsonl [--plan plan.json] [--format text|json]`: which MTP
layers a served engine ran at each draft position, from the observer's log; with --plan,
whether they agree with the static plan (exit 1 when not). Bad input: one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .. import plan_compare, version_note
from . import logfile


def observed(
    log: Path = typer.Argument(..., help="The observer's log (the file MTP_AUDIT_OBSERVE named)"),
    plan: Optional[Path] = typer.Option(None, "--plan", help="The JSON of `mtp-audit layers ... -f json`: "
                                        "say per position whether it agrees (exit 1 when not)"),
    fmt: str = typer.Option("text", "--format", help="text or json"),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Accepted for every command; this one prints no progress"),
) -> None:
    """Per draft position, the MTP layers a served engine ran (from the observer plugin's log)."""
    try:
        if fmt not in ("text", "json"):
            raise logfile.LogError(f"--format must be text or json, not {fmt!r}")
        plans = plan_compare.load_plans(plan) if plan is not None else None
        engines = logfile.read_log(log)
        comparisons = None if plans is None else [logfile.compare(plans, e) for e in engines]
    except (logfile.LogError, plan_compare.PlanError) as e:
        typer.echo(f"mtp-audit: error: {e}", err=True)
        raise typer.Exit(2)
    if plans is not None:
        # The served engine is whatever vLLM the log's server ran: no --vllm-version to point to.
        for line in version_note.notes(None, plans, [e.get("vllm_version") for e in engines], "vLLM",
                                       hint="(`mtp-audit layers --release {engines}` plans for that engine)"):
            typer.echo(f"mtp-audit: note: {line}", err=True)
    if fmt == "json":
        typer.echo(json.dumps(logfile.to_json(log, engines, comparisons), indent=2))
    else:
        typer.echo(logfile.render_text(log, engines, comparisons), nl=False)
    if comparisons is not None and any(c.agreement != "agree" for c in comparisons):
        raise typer.Exit(1)
