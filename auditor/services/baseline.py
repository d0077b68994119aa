"""Baselines: today's findings recorded by id, so that only new ones are reported
(``baseline create``, ``scan/lint --baseline``). An entry whose finding is gone is fixed,
or, when its rule's reports are by design, a behaviour change, or, when a finding that is
not in the baseline sits on its route and stops the step there, masked (:func:`sort_gone`,
with lint's and history's own rules, :func:`~auditor.services.lint_changes.by_design` and
:func:`~auditor.services.lint_changes.masks`). An entry records its finding's route (the
site and the trace's functions) and affected classes for that; an entry written before it
did cannot be masked."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..common.safe_write import MixedLineEndings, ReadOnlyFile, TextShape, encode_text, read_text, write_file
from ..common.errors import UsageError
from ..model.findings import ClassRef, Finding, FindingRef, Hop, Meaning, Severity
from .lint_changes import by_design, masks, route

BASELINE_VERSION = 1


def check_replaceable(path: Path, force: bool) -> None:
    """UsageError when ``path`` exists and is neither a baseline (merged) nor ``force``d."""
    if force or not (path.exists() or path.is_symlink()):
        return
    try:
        read_baseline(path)
    except UsageError:
        raise UsageError(f"{path} exists and is not a mtp-audit baseline; give --force to replace it") from None


def write_baseline(findings: list[Finding], path: Path, force: bool = False) -> int:
    """Write the findings' ids to ``path``; the number of entries written.

    An existing baseline is merged, not replaced: its entries (some added by hand, some for
    findings of another configuration) are kept beside the new ones; ``force`` replaces it.
    An existing file that is not a baseline (a pyproject.toml given by mistake) is refused
    unless ``force``."""
    entries = [{"fingerprint": f.fingerprint, "rule": f.rule, "path": f.path, "function": f.function,
                "route": [list(site) for site in sorted(route(f))],
                "classes": [[c.path, c.name] for c in f.affected_classes]}
               for f in findings if not f.suppressed]
    shape = TextShape()
    if not force and (path.exists() or path.is_symlink()):
        try:
            old = read_baseline(path)
        except UsageError:
            raise UsageError(f"{path} exists and is not a mtp-audit baseline; give --force to replace it") from None
        have = {e["fingerprint"] for e in entries}
        entries += [e for e in old if e["fingerprint"] not in have]
        try:
            shape = read_text(path)[1]  # the merged file keeps its line ends (a CRLF checkout stays CRLF)
        except (OSError, ValueError, MixedLineEndings):
            pass  # read as a baseline above; a shape it cannot tell is written as the tool writes it
    entries.sort(key=lambda e: (str(e.get("path", "")), str(e.get("rule", "")), e["fingerprint"]))
    doc = {"version": BASELINE_VERSION, "tool": "mtp-audit", "findings": entries}
    try:
        write_file(path, encode_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", shape))
    except ReadOnlyFile as exc:
        raise UsageError(f"cannot write baseline: {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot write baseline {path}: {exc.strerror or exc}") from None
    return len(entries)


def read_baseline(path: Path) -> list[dict[str, Any]]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"baseline file not found: {path}") from None
    except RecursionError:
        raise UsageError(f"baseline {path} is not a mtp-audit baseline: JSON nested too deeply") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"baseline {path} is not a mtp-audit baseline: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != BASELINE_VERSION or not isinstance(doc.get("findings"), list):
        raise UsageError(f"baseline {path} is not a mtp-audit baseline (version {BASELINE_VERSION})")
    return [e for e in doc["findings"] if isinstance(e, dict) and isinstance(e.get("fingerprint"), str)]


def apply_baseline(findings: list[Finding], entries: list[dict[str, Any]]) -> tuple[list[Finding], list[dict[str, Any]]]:
    """Drop findings recorded in the baseline; return (remaining, baseline entries whose
    findings are gone: :func:`sort_gone` says which are fixed)."""
    known = {e["fingerprint"] for e in entries}
    present = {f.fingerprint for f in findings}
    remaining = [f for f in findings if f.fingerprint not in known]
    fixed = [e for e in entries if e["fingerprint"] not in present]
    return remaining, fixed


@dataclass
class GoneEntries:
    """Baseline entries whose findings are gone, sorted as lint sorts what a change removes."""

    fixed: list[dict[str, Any]] = field(default_factory=list)
    behaviour_changes: list[dict[str, Any]] = field(default_factory=list)  # by-design reports gone: not fixes
    # defects hidden by a finding that is not in the baseline: (entry, the findings that hide it); not fixed
    masked: list[tuple[dict[str, Any], list[FindingRef]]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.fixed or self.behaviour_changes or self.masked)


def _recorded(entry: dict[str, Any]) -> Finding | None:
    """The entry's finding as far as it is recorded (rule, site, route, classes): enough for
    :func:`masks`; None for an entry without a route (written before entries had one, or by hand)."""
    sites, classes = entry.get("route"), entry.get("classes", [])
    if not isinstance(sites, list) or not isinstance(classes, list):
        return None
    pairs = [s for s in sites if isinstance(s, list) and len(s) == 2 and all(isinstance(x, str) for x in s)]
    refs = [ClassRef(c[0], c[1]) for c in classes if isinstance(c, list) and len(c) == 2 and all(isinstance(x, str) for x in c)]
    return Finding(str(entry.get("rule", "")), Severity.WARNING, str(entry.get("path", "")), 0, 0,
                   str(entry.get("function", "")), "", "", trace=[Hop(p, 0, fn, "") for p, fn in pairs],
                   affected_classes=refs, fingerprint=str(entry["fingerprint"]))


def sort_gone(gone: list[dict[str, Any]], meanings: Mapping[str, Meaning | None], *,
              new: list[Finding]) -> GoneEntries:
    """``gone`` split by the meaning of each entry's rule code (``meanings``: code -> the
    meaning its registered rule declares; an entry records the code, not the meaning), and
    whether one of ``new`` (the tree's findings that are not in the baseline) masks it."""
    out = GoneEntries()
    for entry in gone:
        if by_design(entry.get("rule"), meanings):
            out.behaviour_changes.append(entry)
            continue
        was = _recorded(entry)
        by = sorted({FindingRef(g.rule, g.fingerprint) for g in new if was is not None and masks(g, was, meanings)},
                    key=lambda r: (r.rule, r.fingerprint))
        if by:
            out.masked.append((entry, by))
        else:
            out.fixed.append(entry)
    return out
