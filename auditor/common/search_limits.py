"""The depth and size limits of the analyses, raisable from ``[tool.mtp-audit.search-limits]``.

Each limit keeps a search finite; when one cuts a search short the report's note names it,
and this table is where the user raises it::

    [tool.mtp-audit.search-limits]
    "draft loop call depth" = 20
    "held-module depth" = 4

Names are those the note prints. A raised limit costs time; a lower one may miss findings.
"""

from __future__ import annotations

from typing import Mapping

#: the configurable limits and their defaults
DEFAULTS: dict[str, int] = {
    "draft loop call depth": 10,
    "held-module depth": 2,
    "model parts": 200,
    "local alias depth": 3,
    "value type depth": 6,
}

OPTION = "[tool.mtp-audit.search-limits]"


def limit(overrides: Mapping[str, int], name: str) -> int:
    return int(overrides.get(name, DEFAULTS[name]))


def check(value: object) -> str:
    """'' when ``value`` is a valid search-limits table, else why not."""
    if not isinstance(value, dict):
        return "must be a table of limit names to whole numbers"
    for k, v in value.items():
        if k not in DEFAULTS:
            return f"has unknown limit {k!r} (known: {', '.join(repr(n) for n in DEFAULTS)})"
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 10_000:
            return f"{k!r} must be a whole number from 1 to 10000"
    return ""


def advice(hit: Mapping[str, int]) -> str:
    """How to raise the limits that were hit (those that can be raised)."""
    raisable = [n for n in sorted(hit) if n in DEFAULTS]
    if not raisable:
        return ""
    example = ", ".join(f'"{n}" = {DEFAULTS[n] * 2}' for n in raisable)
    return f"raise them in pyproject.toml or --config: {OPTION} {example}"
