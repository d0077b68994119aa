"""Baselines and bisect on a by-design report that went away (issue 18 item 10): like lint and
history, they call it a behaviour change, never fixed; a defect that went away is fixed. The
meaning comes from the rule registry (a baseline entry records only the rule code)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_runner import invoke  # noqa: E402
from scan_helpers import git, write_tree  # noqa: E402

from auditor.model.findings import Meaning  # noqa: E402
from auditor.model.history import BEHAVIOUR_CHANGED, FIXED  # noqa: E402
from auditor.services.baseline import sort_gone  # noqa: E402
from auditor.services.history import run_bisect  # noqa: E402
from auditor.services.lint_changes import meanings_of  # noqa: E402
from rules import all_rules  # noqa: E402
from rules._examples import draft_tree, wrapper  # noqa: E402
from trees import DROPPING_WRAPPER, EAGLE_STYLE_LOOP, PASSING_WRAPPER, THREADED_LOOP  # noqa: E402

EAGLE_STYLE, THREADED = EAGLE_STYLE_LOOP, THREADED_LOOP
GOOD, BAD = wrapper(PASSING_WRAPPER), wrapper(DROPPING_WRAPPER)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """v0.1.0: an eagle-style loop over a wrapper that drops the step (MTP002 + MTP001); one
    commit threads the step in the loop (the design changes), the next in the wrapper (the
    fix); v0.2.0. Returns the path and the commit ids by name."""
    return _history(tmp_path_factory.mktemp("gone") / "r", ((EAGLE_STYLE, BAD), (THREADED, BAD), (THREADED, GOOD)))


def _history(path: Path, trees: tuple[tuple[str, str], ...]) -> tuple[Path, dict[str, str]]:
    """A repository of three commits, v0.1.0, "design" and "fix" (tagged v0.2.0), each the
    draft tree of its (loop, model); returns the path and the commit ids by name."""
    ids = {}
    for name, (loop, model) in zip(("v0.1.0", "design", "fix"), trees, strict=True):
        write_tree(path, draft_tree(loop, model=model))
        if name == "v0.1.0":
            git(path, "init", "-q", "-b", "main")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", name)
        ids[name] = git(path, "rev-parse", "HEAD").strip()
    git(path, "tag", "v0.1.0", ids["v0.1.0"])
    git(path, "tag", "v0.2.0", ids["fix"])
    return path, ids


def scan_json(path: Path, cache: Path, *extra: str) -> dict:
    res = invoke("scan", str(path), "-f", "json", "-q", "--cache-dir", str(cache), *extra)
    assert res.returncode in (0, 1), res.stderr
    return json.loads(res.stdout)


def test_a_baseline_entry_whose_by_design_report_is_gone_is_a_behaviour_change(repo, tmp_path: Path) -> None:
    path, ids = repo
    cache, baseline = tmp_path / "c", tmp_path / "baseline.json"
    git(path, "checkout", "-q", "v0.1.0")
    try:
        found = {f["rule"]: f["fingerprint"] for f in scan_json(path, cache)["findings"]}
        assert set(found) == {"MTP001", "MTP002"}, found  # the tree does what the test says
        assert invoke("baseline", "create", str(path), "-o", str(baseline), "-q", "--cache-dir", str(cache)).returncode == 0
    finally:
        git(path, "checkout", "-q", "main")
    # at v0.2.0 both findings are gone: the defect is fixed, the by-design report changed
    scan = invoke("scan", str(path), "--baseline", str(baseline), "-q", "--cache-dir", str(cache))
    lint = invoke("lint", str(path), "--base", "v0.1.0", "--baseline", str(baseline), "-q", "--cache-dir", str(cache))
    expected = (f"mtp-audit: 2 baseline entries are gone and can be removed: 1 fixed ({found['MTP001']}), "
                f"1 behaviour change (by design, not a fix: {found['MTP002']})")
    assert expected in scan.stderr and expected in lint.stderr, (scan.stderr, lint.stderr)
    assert "entries are fixed" not in scan.stderr
    assert scan.returncode == 0 and lint.returncode == 0  # nothing new: exit codes unchanged
    stats = scan_json(path, cache, "--baseline", str(baseline))["stats"]
    assert stats["baseline_fixed"] == [found["MTP001"]]
    assert stats["baseline_behaviour_changes"] == [found["MTP002"]]
    # only the design changed (the wrapper still drops the step): no entry is called fixed
    git(path, "checkout", "-q", ids["design"])
    try:
        only = invoke("scan", str(path), "--baseline", str(baseline), "-q", "--cache-dir", str(cache))
    finally:
        git(path, "checkout", "-q", "main")
    assert only.returncode == 0 and "is fixed" not in only.stderr
    assert (f"1 baseline entry is gone and can be removed: 0 fixed, 1 behaviour change "
            f"(by design, not a fix: {found['MTP002']})") in only.stderr


def test_baseline_entries_are_sorted_by_the_registered_rules_meaning_not_a_code() -> None:
    by_design = {r.code for r in all_rules() if getattr(r, "meaning", None) is Meaning.BY_DESIGN}
    assert "MTP002" in by_design and "MTP001" not in by_design
    entries = [{"fingerprint": "a", "rule": "MTP001"}, {"fingerprint": "b", "rule": "MTP002"}, {"fingerprint": "c"}]
    gone = sort_gone(entries, meanings_of(all_rules()), new=[])
    assert [e["fingerprint"] for e in gone.fixed] == ["a", "c"] and [e["fingerprint"] for e in gone.behaviour_changes] == ["b"]
    # the meaning decides: the same entries under a registry that declares otherwise
    swapped = sort_gone(entries, {"MTP001": Meaning.BY_DESIGN, "MTP002": None}, new=[])
    assert [e["fingerprint"] for e in swapped.behaviour_changes] == ["a"]


def test_bisect_names_the_commit_that_changed_the_behaviour_not_a_fix(repo, tmp_path: Path) -> None:
    path, ids = repo
    cache = tmp_path / "c"
    found = {f["rule"]: f["fingerprint"] for f in scan_json(path, cache)["findings"]}
    assert found == {}  # v0.2.0 (main) has neither
    git(path, "checkout", "-q", "v0.1.0")
    try:
        found = {f["rule"]: f["fingerprint"] for f in scan_json(path, cache)["findings"]}
    finally:
        git(path, "checkout", "-q", "main")
    changed = run_bisect(path, found["MTP002"], "v0.1.0", "v0.2.0", cache_dir=cache, workers=1, rules=all_rules())
    assert changed.direction == BEHAVIOUR_CHANGED and changed.commit == ids["design"]
    fixed = run_bisect(path, found["MTP001"], "v0.1.0", "v0.2.0", cache_dir=cache, workers=1, rules=all_rules())
    assert fixed.direction == FIXED and fixed.commit == ids["fix"]
    text = invoke("bisect", str(path), found["MTP002"], "--good", "v0.1.0", "--bad", "v0.2.0", "--cache-dir", str(cache))
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0] == (f"{ids['design']} is the first commit where finding {found['MTP002']} "
                                           "is gone: the behaviour changed (by design, not a fix)")
    doc = json.loads(invoke("bisect", str(path), found["MTP002"], "--good", "v0.1.0", "--bad", "v0.2.0",
                            "--cache-dir", str(cache), "-f", "json").stdout)
    assert doc["direction"] == "behaviour-changed" and doc["commit"] == ids["design"]


@pytest.fixture(scope="module")
def appearing(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The other way: v0.1.0 threads the step over a wrapper that drops it (MTP001); one
    commit makes the loop eagle-style (an MTP002 appears where the step was threaded), the
    next fixes the wrapper; v0.2.0."""
    return _history(tmp_path_factory.mktemp("appears") / "r", ((THREADED, BAD), (EAGLE_STYLE, BAD), (EAGLE_STYLE, GOOD)))


def test_bisect_of_a_by_design_report_that_appears_names_the_design_change_not_a_new_defect(appearing, tmp_path: Path) -> None:
    from auditor.model.findings import THREADED_TO_EAGLE
    from auditor.model.history import INTRODUCED

    path, ids = appearing
    cache = tmp_path / "c"
    found = {f["rule"]: f["fingerprint"] for f in scan_json(path, cache)["findings"]}
    assert set(found) == {"MTP002"}, found  # v0.2.0 (main): the eagle-style loop only
    changed = run_bisect(path, found["MTP002"], "v0.1.0", "v0.2.0", cache_dir=cache, workers=1, rules=all_rules())
    assert (changed.direction, changed.change, changed.commit) == (BEHAVIOUR_CHANGED, THREADED_TO_EAGLE, ids["design"])
    assert changed.finding.fingerprint == found["MTP002"]
    text = invoke("bisect", str(path), found["MTP002"], "--good", "v0.1.0", "--bad", "v0.2.0", "--cache-dir", str(cache))
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == (f"{ids['design']} is the first commit where finding {found['MTP002']} appears: the behaviour "
                        "changed (threaded -> eagle-style; by design, not a new defect)")
    assert "change:  threaded -> eagle-style" in lines
    doc = json.loads(invoke("bisect", str(path), found["MTP002"], "--good", "v0.1.0", "--bad", "v0.2.0",
                            "--cache-dir", str(cache), "-f", "json").stdout)
    assert (doc["direction"], doc["change"], doc["commit"]) == ("behaviour-changed", "threaded -> eagle-style", ids["design"])
    # The same report on a loop that is new (nothing threaded before) is introduced: no behaviour changed.
    new_loop = tmp_path / "new"
    write_tree(new_loop, {"vllm/loader.py": "def get_model(config):\n    raise NotImplementedError\n",
                          "vllm/models/m_mtp.py": GOOD})
    git(new_loop, "init", "-q", "-b", "main")
    git(new_loop, "add", "-A")
    git(new_loop, "commit", "-q", "-m", "a model, no loop")
    git(new_loop, "tag", "v0.1.0")
    write_tree(new_loop, draft_tree(EAGLE_STYLE, model=GOOD))
    git(new_loop, "add", "-A")
    git(new_loop, "commit", "-q", "-m", "an eagle-style loop")
    report = {f["rule"]: f["fingerprint"] for f in scan_json(new_loop, cache)["findings"]}["MTP002"]
    added = run_bisect(new_loop, report, "v0.1.0", "main", cache_dir=cache, workers=1, rules=all_rules())
    assert (added.direction, added.change) == (INTRODUCED, "")


def test_bisect_of_a_fixed_defect_is_fixed_beside_the_design_change(appearing, tmp_path: Path) -> None:
    path, ids = appearing
    cache = tmp_path / "c"
    git(path, "checkout", "-q", "v0.1.0")
    try:
        found = {f["rule"]: f["fingerprint"] for f in scan_json(path, cache)["findings"]}
    finally:
        git(path, "checkout", "-q", "main")
    assert set(found) == {"MTP001"}, found
    fixed = run_bisect(path, found["MTP001"], "v0.1.0", "v0.2.0", cache_dir=cache, workers=1, rules=all_rules())
    assert (fixed.direction, fixed.commit, fixed.masked_by) == (FIXED, ids["fix"], [])
