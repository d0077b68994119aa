"""``mtp-audit rules``: the registered rules, or one rule's documentation."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..common.errors import UsageError
from ..services.settings import registered_rules


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
