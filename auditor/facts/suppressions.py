"""Inline suppression comments (``# mtp-audit: ignore[MTP002] reason``): what one says, and
what can be wrong with one (reported by the suppression rule, MTP900). The index notes
which files hold the marker; the engine applies them (:mod:`auditor.engine.suppress`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

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
