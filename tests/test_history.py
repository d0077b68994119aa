"""history / diff / bisect over git repositories (synthetic ones built here, and real releases)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import git
import pytest
import typer
from typer.testing import CliRunner

from auditor.common.config import Config
from auditor.common.errors import AuditError, GitError, UsageError
from auditor.cli.history import bisect_command, diff_command, history_command
from auditor.services.history import ResultCache, compare, run_bisect, run_diff, run_history
from auditor.model.findings import Finding, Severity
from rules import all_rules
from rules._examples import draft_tree, wrapper

ACTOR = git.Actor("Test", "test@example.invalid")

# A wrapper that drops the step (MTP001), the same wrapper after code moved inside its
# file, and the fixed wrapper. The draft loop passes the step, so the reachability of
# WrapperMTP is ✗ while the wrapper drops it and ✓ once it is fixed.
LOOP = "out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=token_index + 1))"
DROPS = wrapper("return self.model(input_ids, positions, hidden_states)")
MOVED = (
    "\n\ndef unrelated_helper(x):\n    '''Code added above the wrapper: every line moves.'''\n"
    "    y = x + 1\n    return y * 2\n\n" + DROPS
)
FIXED = wrapper("return self.model(input_ids, positions, hidden_states, **kwargs)")
OTHER_DROPS = wrapper("return self.model(input_ids, positions, hidden_states)").replace("WrapperMTP", "OtherMTP")
REGISTRY = """_SPECULATIVE_DECODING_MODELS = {
    "WrapperMTP": ("m_mtp", "WrapperMTP"),
    "OtherMTP": ("n_mtp", "OtherMTP"),
}
"""
MODEL = "vllm/models/m_mtp.py"
OTHER = "vllm/models/n_mtp.py"


def tree_files(model: str) -> dict[str, str]:
    files = draft_tree(LOOP, model=model)
    files["vllm/__init__.py"] = ""
    files["vllm/models/__init__.py"] = ""
    files["vllm/spec_decode/__init__.py"] = ""
    files["vllm/models/registry.py"] = REGISTRY
    return files


def commit(repo: git.Repo, files: dict[str, str | None], message: str) -> git.Commit:
    root = Path(repo.working_tree_dir)
    for rel, text in files.items():
        if text is None:
            repo.index.remove([rel], working_tree=True)
            continue
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        repo.index.add([rel])
    return repo.index.commit(message, author=ACTOR, committer=ACTOR)


def build_repo(path: Path) -> dict[str, str]:
    """v0.0.1 (no vllm/), v0.1.0 drops, v0.2.0 moved (drops), v0.2.1rc1, v0.3.0 fixed, v0.4.0 new drop.

    Returns commit ids by name, including ``fix`` (the commit that fixed the wrapper)
    and ``intro`` (the commit that introduced OtherMTP's drop).
    """
    repo = git.Repo.init(path, initial_branch="main")
    ids: dict[str, str] = {}
    ids["v0.0.1"] = commit(repo, {"README.md": "nothing here yet\n"}, "initial: docs only").hexsha
    repo.create_tag("v0.0.1")
    ids["v0.1.0"] = commit(repo, tree_files(DROPS), "add MTP wrapper").hexsha
    repo.create_tag("v0.1.0")
    commit(repo, {"vllm/util.py": "X = 1\n"}, "util")
    ids["v0.2.0"] = commit(repo, {MODEL: MOVED}, "refactor: move code around").hexsha
    repo.create_tag("v0.2.0")
    ids["v0.2.1rc1"] = commit(repo, {"vllm/util.py": "X = 2\n"}, "rc").hexsha
    repo.create_tag("v0.2.1rc1")
    for i in range(3):
        commit(repo, {"vllm/util.py": f"X = {10 + i}\n"}, f"chore {i}")
    ids["fix"] = commit(repo, {MODEL: FIXED}, "Forward spec_step_idx in WrapperMTP").hexsha
    for i in range(4):
        commit(repo, {"vllm/util.py": f"X = {20 + i}\n"}, f"chore after fix {i}")
    ids["v0.3.0"] = repo.head.commit.hexsha
    repo.create_tag("v0.3.0", message="annotated release tag")
    for i in range(2):
        commit(repo, {"vllm/util.py": f"X = {30 + i}\n"}, f"chore before intro {i}")
    ids["intro"] = commit(repo, {OTHER: OTHER_DROPS}, "Add OtherMTP").hexsha
    for i in range(5):
        commit(repo, {"vllm/util.py": f"X = {40 + i}\n"}, f"chore after intro {i}")
    ids["v0.4.0"] = repo.head.commit.hexsha
    repo.create_tag("v0.4.0")
    commit(repo, {"vllm/util.py": "X = 99\n"}, "unreleased work")
    repo.close()
    return ids


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("synth") / "repo"
    return path, build_repo(path)


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "cache"


def app() -> typer.Typer:
    a = typer.Typer(pretty_exceptions_enable=False)
    a.command("history")(history_command)
    a.command("diff")(diff_command)
    a.command("bisect")(bisect_command)
    return a


def invoke(*args: str):
    return CliRunner().invoke(app(), [str(a) for a in args])


def assert_one_line_error(result, kind=AuditError, contains: str = ""):
    assert isinstance(result.exception, kind), (result.exception, result.output)
    msg = str(result.exception)
    assert msg and "\n" not in msg
    assert contains in msg, msg


def mtp001(findings):
    return [f for f in findings if f.rule == "MTP001"]


# --------------------------------------------------------------------------- history


def test_history_introduced_persisted_fixed_and_skipped(synth, cache):
    path, ids = synth
    hist = run_history(path, config=Config(), cache_dir=cache, workers=1, rules=all_rules())
    refs = [r.ref for r in hist.releases]
    assert refs == ["v0.0.1", "v0.1.0", "v0.2.0", "v0.3.0", "v0.4.0"]  # no rc without --pre
    skipped = hist.releases[0]
    assert not skipped.scanned and "no vllm/" in skipped.skipped and skipped.commit == ids["v0.0.1"]
    assert hist.deltas[0] is None

    r1, r2, r3, r4 = hist.releases[1:]
    d1, d2, d3, d4 = hist.deltas[1:]
    assert r1.commit == ids["v0.1.0"] and r3.commit == ids["v0.3.0"]  # annotated tag peeled
    (drop,) = mtp001(r1.result.findings)
    assert drop.function == "WrapperMTP.forward" and drop.path == MODEL
    assert d1.base is None and mtp001(d1.introduced) == [drop]

    # v0.2.0: the code moved (other line) but it is the same finding: persisted
    (moved,) = mtp001(r2.result.findings)
    assert moved.line != drop.line and moved.fingerprint == drop.fingerprint
    assert d2.base == "v0.1.0"
    assert not mtp001(d2.introduced) and not mtp001(d2.fixed)
    assert [f.fingerprint for f in mtp001(d2.persisted)] == [drop.fingerprint]

    # v0.3.0: fixed
    assert not mtp001(r3.result.findings)
    assert [f.fingerprint for f in mtp001(d3.fixed)] == [drop.fingerprint]
    assert not mtp001(d3.introduced)

    # v0.4.0: a new wrapper drops it
    (other,) = mtp001(d4.introduced)
    assert other.function == "OtherMTP.forward" and other.path == OTHER

    # reachability: the loop passes the step, the wrapper drops it until v0.3.0
    def reach(rel, name):
        rows = [rc for rc in rel.result.reachability if rc.model_class.name == name]
        return any(lp.steps_reach_layers for rc in rows for lp in rc.loops) if rows else None

    assert [reach(r, "WrapperMTP") for r in (r1, r2, r3, r4)] == [False, False, True, True]


def test_history_pre_and_range(synth, cache):
    path, _ = synth
    hist = run_history(path, start="v0.1.0", end="0.3.0", include_pre=True, cache_dir=cache, workers=1, rules=all_rules())
    assert [r.ref for r in hist.releases] == ["v0.1.0", "v0.2.0", "v0.2.1rc1", "v0.3.0"]
    hist = run_history(path, pattern=r"^v0\.[23]\.", cache_dir=cache, workers=1, rules=all_rules())
    assert [r.ref for r in hist.releases] == ["v0.2.0", "v0.3.0"]
    with pytest.raises(UsageError, match="newer than"):
        run_history(path, start="v0.3.0", end="v0.1.0", cache_dir=cache, rules=all_rules())


def test_result_cache_reused_and_corrupt_entry_recomputed(synth, cache):
    path, _ = synth
    first = run_history(path, cache_dir=cache, workers=1, rules=all_rules())
    assert first.timing["scanned"] == 4 and first.timing["from_cache"] == 0
    second = run_history(path, cache_dir=cache, workers=1, rules=all_rules())
    assert second.timing["scanned"] == 0 and second.timing["from_cache"] == 4
    from auditor.output.history import render

    assert render(first, "json") == render(second, "json")  # a cached result is the same result
    entries = sorted((cache / "results").rglob("*.json"))
    assert len(entries) == 4
    entries[0].write_text("{not json")
    entries[1].write_text(json.dumps({"v": 1, "tree": "x", "key": "y", "result": {}}))
    third = run_history(path, cache_dir=cache, workers=1, rules=all_rules())
    assert third.timing["scanned"] == 2 and third.timing["from_cache"] == 2
    assert render(third, "json") == render(first, "json")
    assert not list((cache / "results").rglob(".tmp-*"))
    # another configuration is another key
    other = run_history(path, config=Config(select=["MTP001"]), cache_dir=cache, workers=1, rules=all_rules())
    assert other.timing["scanned"] == 4
    assert {f.rule for r in other.scanned() for f in r.result.findings} == {"MTP001"}
    # no cache at all works too
    assert run_history(path, cache_dir=None, workers=1, rules=all_rules()).timing["scanned"] == 4
    assert ResultCache(None).get("0" * 40) is None


def test_history_cli_formats(synth, cache, tmp_path):
    path, _ = synth
    res = invoke("history", path, "--cache-dir", cache, "--format", "json", "--quiet")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["kind"] == "history" and doc["version"] == 1
    assert [r["status"] for r in doc["releases"]] == ["skipped", "scanned", "scanned", "scanned", "scanned"]
    rel2 = doc["releases"][2]
    assert rel2["base"] == "v0.1.0" and rel2["introduced"] == [] and rel2["fixed"] == []
    assert set(rel2["persisted"]) == {f["fingerprint"] for f in rel2["findings"]}
    assert doc["releases"][3]["fixed"][0]["function"] == "WrapperMTP.forward"
    row = next(c for c in doc["layer_matrix"]["classes"] if c["name"] == "WrapperMTP")
    assert row["cells"] == {"v0.1.0": False, "v0.2.0": False, "v0.3.0": True, "v0.4.0": True}
    for fmt in ("markdown", "html", "text"):
        out = tmp_path / f"h.{fmt}"
        res = invoke("history", path, "--cache-dir", cache, "-f", fmt, "-o", out)  # not --quiet: no TTY, no bar
        assert res.exit_code == 0, res.output
        assert res.stdout == "" and out.read_text()
        assert "━" not in res.output  # no progress bar when stderr is not a terminal
    md = (tmp_path / "h.markdown").read_text()
    assert "| release | commit | findings | introduced | fixed | behaviour changes | persisted |" in md
    assert "**skipped**" in md and "<" not in md.replace("\\<", "")
    text = (tmp_path / "h.text").read_text()
    assert "SKIPPED" in text and "persisted  MTP001" in text


def test_progress_bar_on_a_terminal(synth, cache, monkeypatch, capsys):
    import sys

    from auditor.common.progress import Progress

    path, _ = synth
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert Progress(False).interactive and not Progress(True).enabled
    run_history(path, cache_dir=cache, workers=1, progress=Progress(False), rules=all_rules())
    err = capsys.readouterr().err
    assert "history: release" in err and "5/5" in err


def test_progress_lines_when_not_a_terminal(synth, cache, tmp_path):
    """In a log (stderr not a terminal) every release gets a line; -q silences them."""
    path, _ = synth
    out = tmp_path / "h.txt"
    res = invoke("history", path, "--cache-dir", cache, "-o", out)
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("mtp-audit: history: release")]
    assert lines == [f"mtp-audit: history: release {i}/5: {t}" for i, t in enumerate(["v0.0.1", "v0.1.0", "v0.2.0", "v0.3.0", "v0.4.0"], 1)]
    assert "5 releases in" in res.stderr
    res = invoke("history", path, "--cache-dir", cache, "-o", out, "-q")
    assert res.exit_code == 0 and res.stderr == ""


# --------------------------------------------------------------------------- errors


def test_repository_without_tags(tmp_path, cache):
    repo = git.Repo.init(tmp_path / "r", initial_branch="main")
    commit(repo, tree_files(DROPS), "untagged")
    res = invoke("history", tmp_path / "r", "--cache-dir", cache)
    assert res.exit_code != 0
    assert_one_line_error(res, GitError, "no release tags")


def test_empty_and_missing_repositories(tmp_path, cache):
    git.Repo.init(tmp_path / "empty")
    assert_one_line_error(invoke("history", tmp_path / "empty", "--cache-dir", cache), GitError, "empty")
    assert_one_line_error(invoke("history", tmp_path / "nope", "--cache-dir", cache), GitError, "no such directory")
    (tmp_path / "plain").mkdir()
    assert_one_line_error(invoke("history", tmp_path / "plain", "--cache-dir", cache), GitError, "not a git repository")


def test_bad_refs(synth, cache):
    path, _ = synth
    assert_one_line_error(invoke("history", path, "--from", "v9.9.9x", "--cache-dir", cache), GitError, "v9.9.9x")
    assert_one_line_error(invoke("history", path, "--from", "v9.0.0", "--cache-dir", cache), GitError, "no release tags between")
    assert_one_line_error(invoke("history", path, "--tags", "(", "--cache-dir", cache), GitError, "bad tag pattern")
    assert_one_line_error(invoke("diff", path, "v0.1.0", "nosuchref", "--cache-dir", cache), GitError, "nosuchref")
    assert_one_line_error(invoke("diff", path, "v0.0.1", "v0.1.0", "--cache-dir", cache), GitError, "no vllm/")
    assert_one_line_error(
        invoke("bisect", path, "abcd", "--good", "v0.1.0", "--bad", "deadbeef" * 5, "--cache-dir", cache), GitError
    )
    assert_one_line_error(
        invoke("bisect", path, "xyz!", "--good", "v0.1.0", "--bad", "v0.3.0", "--cache-dir", cache), UsageError
    )
    assert_one_line_error(
        invoke("bisect", path, "abcd", "--good", "v0.3.0", "--bad", "v0.1.0", "--cache-dir", cache),
        GitError,
        "not an ancestor",
    )


def test_shallow_clone(synth, tmp_path, cache):
    path, ids = synth
    shallow = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{path}", str(shallow)], check=True, capture_output=True
    )
    res = invoke("history", shallow, "--cache-dir", cache)
    assert_one_line_error(res, GitError, "shallow")
    assert_one_line_error(invoke("diff", shallow, "v0.1.0", "HEAD", "--cache-dir", cache), GitError, "shallow")
    res = invoke("bisect", shallow, "abcd", "--good", ids["v0.2.0"], "--bad", "HEAD", "--cache-dir", cache)
    assert_one_line_error(res, GitError, "shallow")


# --------------------------------------------------------------------------- diff


def test_diff_any_two_refs(synth, cache):
    path, ids = synth
    hist = run_diff(path, "v0.2.0", ids["intro"], cache_dir=cache, workers=1, rules=all_rules())
    assert [r.ref for r in hist.releases] == ["v0.2.0", ids["intro"]]
    d = hist.deltas[1]
    assert [f.function for f in mtp001(d.fixed)] == ["WrapperMTP.forward"]
    assert [f.function for f in mtp001(d.introduced)] == ["OtherMTP.forward"]
    res = invoke("diff", path, "v0.2.0", "v0.4.0", "--cache-dir", cache, "-f", "json")
    assert res.exit_code == 1  # v0.4.0 introduces a finding
    doc = json.loads(res.stdout)
    assert doc["kind"] == "diff" and len(doc["releases"]) == 2
    assert invoke("diff", path, "v0.2.0", "v0.4.0", "--cache-dir", cache, "--exit-zero").exit_code == 0
    assert invoke("diff", path, "v0.1.0", "v0.2.0", "--cache-dir", cache).exit_code == 0  # only moved


def test_compare_pairs_moved_files_and_changed_callees():
    def f(path, function, callee, key="k", rule="MTP001"):
        return Finding(rule, Severity.ERROR, path, 1, 0, function, callee, "m", fingerprint_key=key).finalize()

    a = f("vllm/a/eagle.py", "P.propose", "forward")
    b = f("vllm/b/eagle.py", "P.propose", "forward")  # file moved
    c = f("vllm/x.py", "W.forward", "P.forward")
    c2 = f("vllm/x.py", "W.forward", "P.forward, P.get_top_tokens")  # callee set grew
    gone = f("vllm/y.py", "Y.forward", "Z.forward")
    new = f("vllm/z.py", "N.forward", "Z.forward")
    d = compare([a, c, gone], [b, c2, new], "v1")
    assert [x.fingerprint for x in d.introduced] == [new.fingerprint]
    assert [x.fingerprint for x in d.fixed] == [gone.fingerprint]
    assert {x.fingerprint for x in d.persisted} == {b.fingerprint, c2.fingerprint}
    assert d.moved == {b.fingerprint: a.fingerprint, c2.fingerprint: c.fingerprint}


# --------------------------------------------------------------------------- bisect


def test_bisect_finds_the_fix(synth, cache):
    path, ids = synth
    hist = run_history(path, end="v0.1.0", cache_dir=cache, workers=1, rules=all_rules())
    fp = mtp001(hist.releases[-1].result.findings)[0].fingerprint
    res = run_bisect(path, fp[:8], "v0.1.0", "v0.4.0", cache_dir=cache, workers=1, rules=all_rules())
    assert res.direction == "fixed" and res.commit == ids["fix"]
    assert res.subject == "Forward spec_step_idx in WrapperMTP"
    assert res.finding.fingerprint == fp and res.finding.function == "WrapperMTP.forward"
    assert res.scans <= 2 + (res.candidates - 1).bit_length()
    out = invoke("bisect", path, fp, "--good", "v0.1.0", "--bad", "v0.4.0", "--cache-dir", cache)
    assert out.exit_code == 0, out.output
    assert ids["fix"] in out.stdout and "fixed" in out.stdout and "Forward spec_step_idx in WrapperMTP" in out.stdout
    assert "WrapperMTP.forward" in out.stdout


def test_bisect_finds_the_introduction(synth, cache):
    path, ids = synth
    hist = run_history(path, start="v0.4.0", cache_dir=cache, workers=1, rules=all_rules())
    fp = next(f.fingerprint for f in hist.releases[0].result.findings if f.function == "OtherMTP.forward")
    res = run_bisect(path, fp, "v0.3.0", "v0.4.0", cache_dir=cache, workers=1, rules=all_rules())
    assert res.direction == "introduced" and res.commit == ids["intro"] and res.subject == "Add OtherMTP"
    assert res.finding.path == OTHER
    out = invoke("bisect", path, fp, "--good", "v0.3.0", "--bad", "v0.4.0", "--cache-dir", cache, "-f", "json")
    doc = json.loads(out.stdout)
    assert doc["commit"] == ids["intro"] and doc["direction"] == "introduced"
    # present at both ends / unknown: one-line usage errors
    assert_one_line_error(
        invoke("bisect", path, fp, "--good", "v0.4.0", "--bad", "HEAD", "--cache-dir", cache), UsageError, "present at both"
    )
    assert_one_line_error(
        invoke("bisect", path, "ffff", "--good", "v0.3.0", "--bad", "v0.4.0", "--cache-dir", cache), UsageError, "no finding"
    )


# --------------------------------------------------------------------------- real releases

RELEASES = ["0.18.0", "0.22.1", "0.26.0", "0.33.0"]
MULTI_MODULE = "vllm/v1/worker/gpu/spec_decode/multi_module_mtp/speculator.py"


@pytest.fixture(scope="module")
def release_history(tmp_path_factory):
    """Two history runs over an imported release repository, with a cold cache first."""
    from release_cache import fresh_cache_dir, release_cache_dir

    from auditor.source.releases import import_releases

    base = tmp_path_factory.mktemp("releases")
    repo = base / "releases.git"
    import_releases(RELEASES, repo, cache_dir=release_cache_dir(), progress=False)
    # a fresh result cache, so the first run scans every release (facts are shared: see fresh_cache_dir)
    cold = fresh_cache_dir(base / "cache")
    first = run_history(repo, cache_dir=cold, rules=all_rules())
    second = run_history(repo, cache_dir=cold, rules=all_rules())
    return repo, first, second


@pytest.mark.release
def test_release_history_qwen_drops_persist(release_history):
    _, hist, _ = release_history
    assert [r.ref for r in hist.releases] == [f"v{v}" for v in RELEASES]
    assert all(r.scanned for r in hist.releases)
    for fn in ("Qwen3_5MTP.forward", "Qwen3NextMTP.forward"):
        fps = []
        for rel, delta in zip(hist.releases, hist.deltas):
            hits = [f for f in rel.result.findings if f.rule == "MTP001" and f.function == fn]
            assert len(hits) == 1, (rel.ref, fn)
            fps.append(hits[0].fingerprint)
            if delta.base is not None:
                assert hits[0] in delta.persisted, (rel.ref, fn)
                assert not [f for f in delta.fixed if f.function == fn]
        assert len(set(fps)) == 1, f"{fn} should keep its fingerprint across releases: {fps}"


@pytest.mark.release
def test_release_history_multi_module_speculator_appears(release_history):
    _, hist, _ = release_history

    def threads(rel) -> bool:
        return any(
            lp.loop.startswith(MULTI_MODULE + ":") and lp.steps_reach_layers
            for rc in rel.result.reachability
            if rc.model_class.name == "DeepSeekMTP"
            for lp in rc.loops
        )

    def has_file(rel) -> bool:
        return any(
            lp.loop.startswith(MULTI_MODULE + ":") for rc in rel.result.reachability for lp in rc.loops
        ) or any(f.path == MULTI_MODULE for f in rel.result.findings)

    present = [has_file(r) for r in hist.releases]
    assert present[-1], "0.33.0 has the multi-module MTP speculator"
    first = present.index(True)
    assert not any(present[:first]) and all(present[first:])
    assert all(threads(r) for r in hist.releases[first:])
    assert not any(threads(r) for r in hist.releases[:first])
    from auditor.output.history import to_json

    doc = to_json(hist)
    row = next(c for c in doc["layer_matrix"]["classes"] if c["name"] == "DeepSeekMTP")
    assert row["cells"]["v0.33.0"] is True


@pytest.mark.release
def test_release_history_no_flapping_from_code_moves(release_history):
    _, hist, _ = release_history
    deltas = [d for d in hist.deltas if d is not None]
    for prev, cur in zip(deltas, deltas[1:]):
        fixed = {(f.fingerprint, f.rule, f.function) for f in prev.fixed}
        introduced = {(f.fingerprint, f.rule, f.function) for f in cur.introduced}
        assert not fixed & introduced, f"fixed in {prev.base}->… then re-introduced: {fixed & introduced}"
    for d in deltas[1:]:
        # nothing fixed and introduced in one step with the same rule and function (a move)
        fixed = {(f.rule, f.function, f.callee) for f in d.fixed}
        assert not fixed & {(f.rule, f.function, f.callee) for f in d.introduced}


@pytest.mark.release
def test_release_history_second_run_reads_every_release_from_the_cache(release_history):
    # What the cache saves is measured by bench/ (timed unit tests are not the place); here:
    # the second run scans nothing and answers the same.
    _, first, second = release_history
    from auditor.output.history import render

    assert first.timing["scanned"] == len(RELEASES) and first.timing["from_cache"] == 0
    assert render(first, "json") == render(second, "json")
    assert second.timing["from_cache"] == len(RELEASES) and second.timing["scanned"] == 0


def test_diff_shows_only_what_changed_and_takes_version_numbers(synth, cache):
    """`diff A B` is about B versus A: A's own findings are not listed as introduced."""
    path, _ = synth
    res = invoke("diff", path, "0.3.0", "0.4.0", "--cache-dir", cache, "-q")  # versions, as history --from takes
    assert res.exit_code == 1, res.output
    lines = res.stdout.splitlines()
    assert "first scanned" not in res.stdout
    assert lines[1].startswith("v0.3.0 (") and "-> v0.4.0 (" in lines[1]
    assert lines[1].endswith("1 introduced, 0 fixed, 0 unchanged")
    assert [ln.split()[0:2] for ln in lines[2:]] == [["introduced", "MTP001"]] and "OtherMTP.forward" in lines[2]
    # code that only moved: nothing changed, nothing listed
    res = invoke("diff", path, "v0.1.0", "v0.2.0", "--cache-dir", cache, "-q")
    assert res.exit_code == 0
    assert "0 introduced, 0 fixed, 1 unchanged" in res.stdout and "introduced MTP" not in res.stdout
    for fmt in ("markdown", "html"):
        out = invoke("diff", path, "v0.1.0", "v0.2.0", "--cache-dir", cache, "-q", "-f", fmt).stdout
        assert "first scanned" not in out and "Persisting" not in out
    res = invoke("diff", path, "9.9.9", "v0.2.0", "--cache-dir", cache)
    assert_one_line_error(res, GitError, "9.9.9")
