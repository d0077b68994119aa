"""``bisect``: the commit that introduced (or fixed) one finding, by binary search. A
by-design report that goes is not fixed: that commit changed the behaviour (the rule lint
and history apply, :func:`auditor.services.lint_changes.by_design`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from ...common.config import Config
from ...common.errors import GitError, UsageError
from ...source.gittree import PACKAGE, commits_between
from ...model.findings import Finding
from ...common.progress import Progress

if TYPE_CHECKING:
    from ...engine.scan import RuleClass
from .compare import find, identity
from ...model.history import BEHAVIOUR_CHANGED, FIXED, INTRODUCED, BisectResult
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
    """The first commit in ``good..bad`` whose presence of the finding matches ``bad``'s:
    where it is introduced, fixed, or (a by-design report gone) where the behaviour changed.

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
        gone = BEHAVIOUR_CHANGED if by_design(sample.rule, meanings_of(rules)) else FIXED
        direction = INTRODUCED if want else gone

        steps: list[tuple[str, bool]] = []
        state: dict[int, Optional[Finding]] = {len(commits) - 1: at_bad}
        total = max(1, (len(commits) - 1).bit_length())
        with (progress or Progress(quiet=True)).steps("bisect: step", total) as step:
            lo, hi = 0, len(commits) - 1
            while lo < hi:
                mid = (lo + hi) // 2
                step(commits[mid][:12])
                rel = scanner.release(commits[mid])
                found = find(rel.result.findings, fp, ident) if rel.result is not None else None
                state[mid] = found
                steps.append((commits[mid], found is not None))
                if (found is not None) == want:
                    hi = mid
                else:
                    lo = mid + 1
        first = lo
        if want:
            finding = state.get(first) or at_bad
        else:
            # the last revision that still had it: the one before the fix, or --good
            finding = state.get(first - 1) if first > 0 and state.get(first - 1) is not None else None
            if finding is None:
                if first > 0:
                    prev = scanner.release(commits[first - 1])
                    finding = find(prev.result.findings, fp, ident) if prev.result is not None else None
                finding = finding or at_good
        commit = scanner.repo.commit(commits[first])
        subject = commit.summary if isinstance(commit.summary, str) else commit.summary.decode("utf-8", "replace")
        assert finding is not None
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
            scans=2 + len(steps),
            steps=steps,
        )
    finally:
        scanner.close()


