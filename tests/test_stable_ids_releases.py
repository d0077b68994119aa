"""Stable ids on real releases (issue 18): a finding's fingerprint never depends on the
set of classes it affects. vLLM 0.28.0, 0.30.0 and 0.32.0 each have the MTP007 of the
multi-module speculator's graph capture (``MultiModuleMTPSpeculator.capture``) with more
affected classes than the release before (26, 31, 32; 0.26.0 does not have it); its id must
be one id, a baseline recorded on the first release must not call it fixed while it is
still there, and ``bisect`` must name the release that introduced it. (The MTP001 in
``Step3p5MTPProposer._sample_draft_tokens_for_step`` this test first followed is gone since
the routes work: vLLM builds that proposer only for Step-3.5, whose class has no
``get_top_tokens``.)"""

from __future__ import annotations

import pytest
from scan_helpers import scan_release

from auditor.services.baseline import apply_baseline, write_baseline
from auditor.services.history.compare import identity
from rules import all_rules

GROWING = ["0.28.0", "0.30.0", "0.32.0"]
RULE, FUNCTION = "MTP007", "MultiModuleMTPSpeculator.capture"


def _capture(version: str):
    hits = [f for f in scan_release(version).result.findings if f.rule == RULE and f.function == FUNCTION]
    assert len(hits) == 1, (version, hits)
    return hits[0]


@pytest.mark.release
def test_the_id_stays_while_the_set_of_affected_classes_grows():
    found = [_capture(v) for v in GROWING]
    sizes = [len(f.affected_classes) for f in found]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1], sizes  # the premise: the set grows
    assert len({f.fingerprint for f in found}) == 1, [f.fingerprint for f in found]


def moved_ids(before: list, after: list) -> dict:
    """The defects (rule, file, function, the callee's method names, parameter) that are
    there in both lists, as often or more often in ``after``, yet lost an id of ``before``.
    One function may hold the same defect twice (two calls): then both ids must survive,
    and a third call added later gets a new one."""
    def ids(findings: list) -> dict:
        out: dict = {}
        for f in findings:
            out.setdefault((f.path, *identity(f), f.parameter), set()).add(f.fingerprint)
        return out

    old, new = ids(before), ids(after)
    return {k: (sorted(old[k]), sorted(new[k])) for k in old.keys() & new.keys()
            if len(new[k]) >= len(old[k]) and old[k] - new[k]}


def test_moved_ids_counts_a_second_call_as_a_new_defect_and_a_changed_id_as_moved():
    from auditor.model.findings import Finding, Severity

    def f(fp: str) -> Finding:
        return Finding(rule="MTP003", severity=Severity.ERROR, path="p.py", line=1, column=0, function="C.m",
                       callee="compute_logits", message="", fingerprint=fp, parameter="spec_step_idx")

    assert moved_ids([f("a")], [f("a"), f("b")]) == {}  # one more call: the old id survives
    assert moved_ids([f("a"), f("b")], [f("a")]) == {}  # one call fewer: not a move
    assert moved_ids([f("a")], [f("c")]) != {}  # the same defect under a new id


@pytest.mark.release
@pytest.mark.parametrize("old,new", [("0.28.0", "0.30.0"), ("0.30.0", "0.32.0"), ("0.32.0", "0.33.0")])
def test_no_finding_changes_id_between_these_releases_while_it_stays(old: str, new: str):
    """Every finding that is the same defect in two consecutive releases (rule, file,
    function and the callee's method names) keeps its id. 0.28.0 -> 0.30.0 gives a
    compile decorator arguments (``@support_torch_compile(…)``) and a second
    ``compute_logits`` call in one function."""
    moved = moved_ids(scan_release(old).result.findings, scan_release(new).result.findings)
    assert not moved, (old, new, moved)


@pytest.mark.release
def test_a_baseline_does_not_claim_fixed_what_is_still_there(tmp_path):
    path = tmp_path / "baseline.json"
    write_baseline(scan_release(GROWING[0]).result.findings, path)
    from auditor.services.baseline import read_baseline

    entries = read_baseline(path)
    for version in GROWING[1:]:
        findings = scan_release(version).result.findings
        remaining, fixed = apply_baseline(findings, entries)
        capture = _capture(version)
        assert capture not in remaining, version  # known: not reported as new
        assert capture.fingerprint not in {e["fingerprint"] for e in fixed}, version  # and not claimed fixed


@pytest.fixture(scope="module")
def release_repo(tmp_path_factory):
    from release_cache import release_cache_dir

    from auditor.source.releases import import_releases

    repo = tmp_path_factory.mktemp("releases") / "releases.git"
    import_releases(["0.26.0", *GROWING], repo, cache_dir=release_cache_dir(), progress=False)
    return repo


@pytest.mark.release
def test_bisect_names_the_release_that_introduced_it(release_repo, tmp_path):
    import git
    from release_cache import fresh_cache_dir

    from auditor.services.history.bisect import run_bisect

    fp = _capture(GROWING[-1]).fingerprint
    cache = fresh_cache_dir(tmp_path / "cache")
    res = run_bisect(release_repo, fp, "v0.26.0", f"v{GROWING[-1]}", cache_dir=cache, workers=1,
                     rules=all_rules())
    repo = git.Repo(release_repo)
    assert res.direction == "introduced"
    assert res.commit == repo.commit(f"v{GROWING[0]}").hexsha, (res.commit, res.subject, res.steps)
    assert res.finding.function == FUNCTION
