"""What a history, diff or bisect run produces: plain data, no git and no rendering."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional

from .findings import BehaviourChange, Finding, FindingRef, Masked, ScanResult


@dataclass
class Release:
    """One revision of the history: a scanned tree, or a clearly marked skipped one."""

    ref: str
    commit: str = ""
    tree: str = ""  # git id of the vllm/ tree ("" when skipped)
    date: str = ""  # committer date, ISO 8601
    subject: str = ""
    skipped: str = ""  # why the revision was not scanned ("" when it was)
    result: Optional[ScanResult] = None
    seconds: float = 0.0  # not part of any report: differs between cold and warm runs
    from_cache: bool = False

    @property
    def scanned(self) -> bool:
        return self.result is not None


@dataclass
class Delta:
    """What changed from ``base`` (the previous scanned revision) to one revision."""

    base: Optional[str]
    introduced: list[Finding] = field(default_factory=list)  # findings of this revision
    # defects of the base revision that are gone (never a by-design report: see behaviour_changes)
    fixed: list[Finding] = field(default_factory=list)
    persisted: list[Finding] = field(default_factory=list)  # findings of this revision
    # persisting findings whose fingerprint changed: this revision's fingerprint -> base's
    moved: dict[str, str] = field(default_factory=dict)
    # by-design reports removed (eagle-style -> threaded, ...) or added where the step was
    # threaded: a change of behaviour, not a fix (issue 18 item 10, as lint classifies them)
    behaviour_changes: list[BehaviourChange] = field(default_factory=list)
    # defects of the base that are gone only because a finding introduced here hides them
    # (the step stops before their site): not fixed, as lint says
    masked: list[Masked] = field(default_factory=list)


@dataclass
class History:
    repository: str
    kind: str  # "history" or "diff"
    releases: list[Release]
    deltas: list[Optional[Delta]]  # parallel to releases; None for skipped ones
    timing: dict[str, Any] = field(default_factory=dict)  # not part of any report

    def scanned(self) -> list[Release]:
        return [r for r in self.releases if r.scanned]




#: ``BisectResult.direction``: what the commit found did to the finding, as history sorts that
#: pair of revisions (``compare_scans``): it appears (a defect, or a by-design report on a new
#: loop); a defect goes and is fixed; a by-design report goes, or appears where the loop used
#: to thread the step: the behaviour changed (``BisectResult.change`` says which way); a
#: defect goes because a new finding on its route hides it: masked, not fixed.
INTRODUCED, FIXED, BEHAVIOUR_CHANGED, MASKED = "introduced", "fixed", "behaviour-changed", "masked"


@dataclass
class BisectResult:
    fingerprint: str
    direction: str  # INTRODUCED, FIXED, BEHAVIOUR_CHANGED or MASKED
    good: str
    bad: str
    commit: str
    subject: str
    date: str
    finding: Finding  # at the first bad commit (introduced) or the last commit having it (gone)
    candidates: int  # commits between good (excluded) and bad (included)
    scans: int  # revisions examined, endpoints included
    steps: list[tuple[str, bool]] = field(default_factory=list)  # (commit, finding present)
    change: str = ""  # BEHAVIOUR_CHANGED: the BehaviourChange kind ("threaded -> eagle-style", ...)
    masked_by: list[FindingRef] = field(default_factory=list)  # MASKED: the new findings that hide it

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "kind": "bisect",
            "fingerprint": self.fingerprint,
            "direction": self.direction,
            "good": self.good,
            "bad": self.bad,
            "commit": self.commit,
            "subject": self.subject,
            "date": self.date,
            "finding": self.finding.to_json(),
            "candidates": self.candidates,
            "scans": self.scans,
            "steps": [{"commit": c, "present": p} for c, p in self.steps],
            "change": self.change or None,
            "masked_by": [b.to_json() for b in self.masked_by],
        }


def by_rule(findings: list[Finding]) -> dict[str, int]:
    """How many findings each rule has, by rule code."""
    counts: dict[str, int] = defaultdict(int)
    for f in findings:
        counts[f.rule] += 1
    return dict(sorted(counts.items()))
