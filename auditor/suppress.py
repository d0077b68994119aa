"""Inline suppressions (``# mtp-audit: ignore[MTP002] reason``) and baselines.

A suppression comment applies to a finding when it stands on the finding's line or
on the ``def`` line of the function the finding is in. A reason is required: a
suppression without one suppresses nothing and is reported. A suppression that
matches no finding is reported too, so stale ones get cleaned up, and so is one
naming a rule code the tool does not know (a typo would silently suppress nothing).
All three reports use rule code MTP900.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Collection, Iterable, Optional

from .safe_write import ReadOnlyFile, write_file
from .errors import UsageError
from .model import Finding

MARKER = b"mtp-audit:"
_COMMENT = re.compile(r"#\s*mtp-audit:\s*ignore\[([^\]]*)\]\s*(.*)$")


@dataclass
class Suppression:
    path: str
    line: int
    codes: tuple[str, ...]
    reason: str
    used: bool = False


def parse_suppressions(path: str, text: str) -> list[Suppression]:
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if "mtp-audit:" not in line:
            continue
        m = _COMMENT.search(line)
        if not m:
            continue
        codes = tuple(c.strip().upper() for c in m.group(1).split(",") if c.strip())
        out.append(Suppression(path, i, codes, m.group(2).strip()))
    return out


class ProblemKind(str, Enum):
    UNKNOWN_CODE = "unknown"
    MISSING_REASON = "reason"
    UNUSED = "unused"


@dataclass(frozen=True)
class SuppressionProblem:
    """A suppression comment that is wrong: the suppression rule (MTP900) reports these."""

    suppression: Suppression
    kind: ProblemKind
    unknown_codes: tuple[str, ...] = ()  # for UNKNOWN_CODE: the codes no rule has
    known_codes: tuple[str, ...] = ()  # ... and the ones that exist


def apply_suppressions(
    findings: list[Finding],
    suppressions: Iterable[Suppression],
    def_lines: dict[tuple[str, str], int],
    known_codes: Optional[Collection[str]] = None,
) -> list[SuppressionProblem]:
    """Mark suppressed findings; return the suppressions that are wrong (unknown code, no
    reason, unused). ``known_codes``: the rule codes of the tool (None: not checked)."""
    by_line: dict[tuple[str, int], list[Suppression]] = {}
    sups = list(suppressions)
    for s in sups:
        by_line.setdefault((s.path, s.line), []).append(s)
    for f in findings:
        lines = [f.line]
        def_line = def_lines.get((f.path, f.function))
        if def_line:
            lines.append(def_line)
        for ln in lines:
            for s in by_line.get((f.path, ln), []):
                if f.rule in s.codes or not s.codes:
                    if s.reason:
                        f.suppressed = True
                    s.used = True
    problems = []
    for s in sups:
        unknown = tuple(c for c in s.codes if known_codes is not None and c not in known_codes)
        if unknown:
            problems.append(SuppressionProblem(s, ProblemKind.UNKNOWN_CODE, unknown, tuple(sorted(known_codes or ()))))
        elif not s.reason:
            problems.append(SuppressionProblem(s, ProblemKind.MISSING_REASON))
        elif not s.used:
            problems.append(SuppressionProblem(s, ProblemKind.UNUSED))
    return problems


# ---------------------------------------------------------------------------
# baselines
BASELINE_VERSION = 1


def write_baseline(findings: list[Finding], path: Path, force: bool = False) -> int:
    """Write the findings' ids to ``path``; the number of entries written.

    An existing baseline is merged, not replaced: its entries (some added by hand, some for
    findings of another configuration) are kept beside the new ones; ``force`` replaces it.
    An existing file that is not a baseline (a pyproject.toml given by mistake) is refused
    unless ``force``."""
    entries = [{"fingerprint": f.fingerprint, "rule": f.rule, "path": f.path, "function": f.function}
               for f in findings if not f.suppressed]
    if not force and (path.exists() or path.is_symlink()):
        try:
            old = read_baseline(path)
        except UsageError:
            raise UsageError(f"{path} exists and is not a mtp-audit baseline; give --force to replace it") from None
        have = {e["fingerprint"] for e in entries}
        entries += [e for e in old if e["fingerprint"] not in have]
    entries.sort(key=lambda e: (str(e.get("path", "")), str(e.get("rule", "")), e["fingerprint"]))
    doc = {"version": BASELINE_VERSION, "tool": "mtp-audit", "findings": entries}
    try:
        write_file(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")
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
    """Drop findings recorded in the baseline; return (remaining, baseline entries now fixed)."""
    known = {e["fingerprint"] for e in entries}
    present = {f.fingerprint for f in findings}
    remaining = [f for f in findings if f.fingerprint not in known]
    fixed = [e for e in entries if e["fingerprint"] not in present]
    return remaining, fixed
