"""Output formats for a :class:`~auditor.model.ScanResult`.

``render(result, fmt)`` turns one scan into the text of one report. Every format is
deterministic: the same result gives the same bytes (no timestamps, no absolute paths
beyond what the result itself holds, stable ordering) and rendering never mutates the
result.

Formats:

``text``
    Human report rendered with rich: findings grouped by file, each with its id, call
    chain and affected MTP classes; skipped files; the layer-reachability table only
    when asked for (``reachability=True``); in a lint result, what the change fixed and
    what it changed by design (:mod:`auditor.output.lint_text`); a one-line summary.
``json``
    The ``ScanResult.to_json()`` document (schema version 1), documented in
    ``JSON_FORMAT.md`` and described by ``scan-result.schema.json`` beside this file.
``sarif``
    SARIF 2.1.0 for GitHub code scanning and other SARIF viewers.
``github``
    GitHub Actions workflow commands (``::error file=...::message``), one per finding
    and one ``::warning`` per skipped file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from auditor.model.findings import ScanResult

if TYPE_CHECKING:
    from rules.base import Rule

FORMATS: tuple[str, ...] = ("text", "json", "sarif", "github")

__all__ = ["FORMATS", "render"]


def _default_rules() -> list[type["Rule"]]:
    from rules import all_rules

    return all_rules()


def render(
    result: ScanResult,
    fmt: str,
    *,
    rules: "list[type[Rule]] | None" = None,
    console_width: int | None = None,
    color: bool = False,
    reachability: bool = False,
    verbose: bool = False,
) -> str:
    """Render ``result`` in format ``fmt`` (one of :data:`FORMATS`).

    ``rules`` is the rule metadata used for rule names and SARIF rule descriptors;
    ``None`` means every registered rule (``rules.all_rules()``). Findings whose rule
    code is not among ``rules`` are still rendered (with the code as their name).
    ``console_width``, ``color``, ``reachability`` (add the layer-reachability
    table) and ``verbose`` (every hop and affected class) only affect ``text``. The returned string ends
    with a newline unless it is empty (``github`` with nothing to report).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown output format {fmt!r} (choose from {', '.join(FORMATS)})")
    # Each format's module is imported when it renders: the text report imports rich (~40 ms),
    # which a JSON answer, or `layers` importing a sibling renderer, never needs.
    if fmt == "json":
        from . import json_format

        return json_format.render(result)
    rule_list = _default_rules() if rules is None else list(rules)
    if fmt == "text":
        from . import text

        return text.render(result, rule_list, width=console_width, color=color, reachability=reachability, verbose=verbose)
    if fmt == "sarif":
        from . import sarif

        return sarif.render(result, rule_list)
    from . import github

    return github.render(result, rule_list)
