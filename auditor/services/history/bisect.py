"""``bisect``: the commit that introduced (or fixed) one finding, by binary search. What that
commit did is what ``history`` says of it and its parent (the same ``classify`` lint
applies): a by-design report that goes, or that appears where the loop used to thread the
step, is a behaviour change, not a fix nor a new defect; a defect that goes because a new
finding on its route hides it is masked, not fixed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

from ...common.config import Config
from ...common.errors import GitError, UsageError
from ...source.gittree import PACKAGE, commits_between
from ...model.findings import Finding, FindingRef, Meaning
from ...common.progress import Progress

if TYPE_CHECKING:
    from ...engine.scan import RuleClass
from .compare import compare_scans, find, identity
from ...model.history import BEHAVIOUR_CHANGED, FIXED, INTRODUCED, MASKED, BisectResult, Release
from ..lint_changes import by_design, meanings_of
from .scan import Scanner, resolve_ref


def run_bisect(
    repo: str | Path,
    fingerprint: str,
    good: str,
    bad: str,
    config: Optional[Config] = None,
    cache_dir: Optional[Path] = None,
    workers: Optional[int] = None,
    progress: Optional[Progress] = None,
    *,
    rules: Sequence["RuleClass"],
) -> BisectResult:
    """The first commit in ``good..bad`` whose presence of the finding matches ``bad``'s, and
    what it did (:func:`_sorted_as_history`): introduced, fixed, masked, or the behaviour changed.

    Presence is by fingerprint, or by rule + function + callee when the file moved.
    A commit without ``vllm/`` counts as not having the finding.
    """
    fp = fingerprint.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{1,64}", fp):
        raise UsageError(f"bad fingerprint {fingerprint!r}: fingerprints are hex ids as `scan` prints them")
    scanner = Scanner(repo, config, cache_dir, workers, rules=rules)
    try:
        good, bad = (resolve_ref(scanner.repo, ref) for ref in (good, bad))
        commits = commits_between(scanner.repo, good, bad)
        if not commits:
            raise UsageError(f"--good {good} and --bad {bad} are the same commit: nothing to bisect")
        ends = {}
        for ref, what in ((good, "--good"), (bad, "--bad")):
            rel = scanner.release(ref)
            if not rel.scanned:
                raise GitError(f"{what} {ref} ({rel.commit[:12]}) has no {PACKAGE}/ directory at the repository root")
            ends[what] = rel
        g_findings = ends["--good"].result.findings  # type: ignore[union-attr]
        b_findings = ends["--bad"].result.findings  # type: ignore[union-attr]
        matches = sorted({f.fingerprint for f in g_findings + b_findings if f.fingerprint.startswith(fp)})
        if not matches:
            raise UsageError(f"no finding with fingerprint {fingerprint!r} at {good} or {bad}")
        if len(matches) > 1:
            raise UsageError(f"fingerprint {fingerprint!r} is ambiguous: {', '.join(matches)}")
        fp = matches[0]
        sample = find(g_findings + b_findings, fp)
        assert sample is not None
        ident = identity(sample)
        at_good = find(g_findings, fp, ident)
        at_bad = find(b_findings, fp, ident)
        if (at_good is None) == (at_bad is None):
            where = "present at both" if at_good is not None else "absent at both"
            raise UsageError(f"finding {fp} is {where} --good {good} and --bad {bad}: nothing to bisect")
        want = at_bad is not None  # the state the first "bad" commit has
        meanings = meanings_of(rules)

        seen: dict[int, Release] = {len(commits) - 1: ends["--bad"]}
        steps: list[tuple[str, bool]] = []
        total = max(1, (len(commits) - 1).bit_length())
        with (progress or Progress(quiet=True)).steps("bisect: step", total) as step:
            lo, hi = 0, len(commits) - 1
            while lo < hi:
                mid = (lo + hi) // 2
                step(commits[mid][:12])
                rel = seen[mid] = scanner.release(commits[mid])
                found = find(rel.result.findings, fp, ident) if rel.result is not None else None
                steps.append((commits[mid], found is not None))
                if (found is not None) == want:
                    hi = mid
                else:
                    lo = mid + 1
        first = lo
        # the revision before the first "bad" one (--good when it is the first candidate)
        for at in (first - 1, first):
            if at >= 0 and at not in seen:
                seen[at] = scanner.release(commits[at])
        before, after = (ends["--good"] if first == 0 else seen[first - 1]), seen[first]
        if want:
            finding = (find(after.result.findings, fp, ident) if after.result is not None else None) or at_bad
        else:  # the last revision that still had it: the one before the change, or --good
            finding = (find(before.result.findings, fp, ident) if before.result is not None else None) or at_good
        assert finding is not None
        direction, change, masked_by = _sorted_as_history(before, after, finding, want, meanings)
        commit = scanner.repo.commit(commits[first])
        subject = commit.summary if isinstance(commit.summary, str) else commit.summary.decode("utf-8", "replace")
        return BisectResult(
            fingerprint=fp,
            direction=direction,
            good=good,
            bad=bad,
            commit=commit.hexsha,
            subject=subject,
            date=commit.committed_datetime.isoformat(),
            finding=finding,
            candidates=len(commits),
            scans=1 + len(seen),  # --good, then every candidate scanned (--bad among them)
            steps=steps,
            change=change,
            masked_by=masked_by,
        )
    finally:
        scanner.close()


def _sorted_as_history(before: Release, after: Release, finding: Finding, appears: bool,
                       meanings: Mapping[str, Optional[Meaning]]) -> tuple[str, str, list[FindingRef]]:
    """What the commit found did to ``finding``, as ``history`` sorts that pair of revisions
    (:func:`~.compare.compare_scans`, lint's own ``classify``): (direction, the behaviour
    change's kind or "", the findings that mask it). A pair history cannot compare (a side
    without MTP code) falls back to the rule's meaning."""
    ident = identity(finding)

    def same(f: Finding) -> bool:
        return f.fingerprint == finding.fingerprint or identity(f) == ident

    if before.result is not None and after.result is not None:
        delta = compare_scans(before.result, after.result, before.ref, meanings)
        for c in delta.behaviour_changes:
            if c.removed != appears and same(c.finding):
                return BEHAVIOUR_CHANGED, c.change, []
        if not appears:
            for m in delta.masked:
                if same(m.finding):
                    return MASKED, "", list(m.by)
            if any(same(f) for f in delta.fixed):
                return FIXED, "", []
    if appears:
        return INTRODUCED, "", []
    return (BEHAVIOUR_CHANGED if by_design(finding.rule, meanings) else FIXED), "", []
