"""Comparing the findings of two revisions: introduced, fixed, persisting (and moved), and
the behaviour changes (a by-design report gone is not fixed), sorted by lint's own
:func:`~auditor.services.lint_changes.classify`."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Mapping, Optional

from ...model.findings import Finding, Meaning, ScanResult
from ...model.history import Delta
from ..lint_changes import classify


def identity(f: Finding) -> tuple[str, str, str]:
    """What survives a file move: rule, enclosing function and the callee's method names
    (a callee that lists the classes a call reaches, ``A.forward, B.forward``, grows with
    them; its method names do not). Read from what the JSON keeps, so a finding loaded back
    from a cache or a baseline has the same identity."""
    methods = sorted({c.strip().rpartition(".")[2] for c in f.callee.split(",")})
    return (f.rule, f.function, ", ".join(methods))


def compare(base: list[Finding], head: list[Finding], base_ref: Optional[str] = None) -> Delta:
    """Introduced, fixed and persisting findings between two revisions.

    Fingerprints first (line moves are invisible to them); then leftover findings with
    the same rule, function and callee on both sides are paired as moved (persisting).
    """
    base_fp = {f.fingerprint: f for f in base}
    head_fp = {f.fingerprint: f for f in head}
    delta = Delta(base_ref)
    introduced = [f for f in head if f.fingerprint not in base_fp]
    fixed = [f for f in base if f.fingerprint not in head_fp]
    persisted = [f for f in head if f.fingerprint in base_fp]
    # Leftovers are paired in two passes: same rule, function and callee in another file
    # (a move), then same rule, file and function with another callee (the same defect
    # now reaching more or fewer callees). Either way the defect persists.
    still_introduced = sorted(introduced, key=Finding.sort_key)
    for key in (identity, lambda f: (f.rule, f.path, f.function)):
        gone: dict[tuple[str, ...], list[Finding]] = defaultdict(list)
        taken = set(delta.moved.values())
        for f in fixed:
            if f.fingerprint not in taken:
                gone[key(f)].append(f)
        left = []
        for f in still_introduced:
            candidates = gone.get(key(f))
            if candidates:
                # prefer the candidate in a file of the same name (a directory move)
                candidates.sort(key=lambda o: (Path(o.path).name != Path(f.path).name, o.path, o.line))
                delta.moved[f.fingerprint] = candidates.pop(0).fingerprint
                persisted.append(f)
            else:
                left.append(f)
        still_introduced = left
    moved_old = set(delta.moved.values())
    delta.introduced = sorted(still_introduced, key=Finding.sort_key)
    delta.fixed = sorted((f for f in fixed if f.fingerprint not in moved_old), key=Finding.sort_key)
    delta.persisted = sorted(persisted, key=Finding.sort_key)
    return delta


def gone(base: list[Finding], head: list[Finding]) -> list[Finding]:
    """The base's findings that are gone once moved ones are paired (what may be fixed):
    ``lint`` and ``history`` both classify exactly these."""
    return compare(base, head).fixed


def compare_scans(base: ScanResult, head: ScanResult, base_ref: str, meanings: Mapping[str, Optional[Meaning]]) -> Delta:
    """:func:`compare`, then what is gone sorted as ``lint`` sorts it (one function,
    :func:`auditor.services.lint_changes.classify`): a removed by-design report is a
    behaviour change (``eagle-style -> threaded``), not a fix; a by-design report added
    where the step was threaded is one too (and stays introduced); a defect hidden by a
    finding introduced here is masked, not fixed."""
    delta = compare(base.findings, head.findings, base_ref)
    changes = classify(base, head, delta.introduced, base_ref, meanings, removed=delta.fixed)
    delta.fixed, delta.behaviour_changes, delta.masked = changes.fixed, changes.behaviour_changes, changes.masked
    return delta


def find(findings: list[Finding], fingerprint: str, ident: Optional[tuple[str, str, str]] = None) -> Optional[Finding]:
    for f in findings:
        if f.fingerprint == fingerprint:
            return f
    if ident is not None:  # the same defect after its file moved
        for f in findings:
            if identity(f) == ident:
                return f
    return None


