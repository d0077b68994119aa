"""Baselines: today's findings recorded by id, so that only new ones are reported
(``baseline create``, ``scan/lint --baseline``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..common.atomic import write_atomic
from ..common.errors import UsageError
from ..model.findings import Finding

BASELINE_VERSION = 1


def write_baseline(findings: list[Finding], path: Path) -> int:
    entries = sorted(
        ({"fingerprint": f.fingerprint, "rule": f.rule, "path": f.path, "function": f.function} for f in findings if not f.suppressed),
        key=lambda e: (e["path"], e["rule"], e["fingerprint"]),
    )
    doc = {"version": BASELINE_VERSION, "tool": "mtp-audit", "findings": entries}
    try:
        write_atomic(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    except OSError as exc:
        raise UsageError(f"cannot write baseline {path}: {exc.strerror or exc}") from None
    return len(entries)


def read_baseline(path: Path) -> list[dict[str, Any]]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"baseline file not found: {path}") from None
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
