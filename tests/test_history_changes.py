"""history and diff on design changes (issue 18 item 10): a by-design report (MTP002) that goes
away between two releases is a behaviour change, ``eagle-style -> threaded``, never counted
as fixed; a removed defect (MTP001) is fixed. The classification is lint's own, so on the same
two revisions ``history``, ``diff`` and ``lint`` list the same fixed ids and the same changes."""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from scan_helpers import git, ids_by_rule, write_tree  # noqa: E402

from auditor.cli.history import diff_command, history_command  # noqa: E402
from auditor.common.config import Config  # noqa: E402
from auditor.facts.cache import FactsCache  # noqa: E402
from auditor.model.findings import EAGLE_TO_THREADED, LAYER_0, LAYER_I, THREADED_TO_EAGLE  # noqa: E402
from auditor.services.history import run_diff, run_history  # noqa: E402
from auditor.services.lint import run_lint  # noqa: E402
from rules import all_rules  # noqa: E402
from rules._examples import draft_tree, wrapper  # noqa: E402
from trees import DROPPING_WRAPPER, EAGLE_STYLE_LOOP, PASSING_WRAPPER, THREADED_LOOP  # noqa: E402

EAGLE_STYLE, THREADED = EAGLE_STYLE_LOOP, THREADED_LOOP
GOOD, BAD = wrapper(PASSING_WRAPPER), wrapper(DROPPING_WRAPPER)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """v0.1.0: an eagle-style loop over a wrapper that drops the step (MTP002 + MTP001).
    v0.2.0 threads the step in the loop (a design change) and in the wrapper (a fix).
    v0.3.0 goes back to the eagle-style loop (the opposite change, and a new report)."""
    path = tmp_path_factory.mktemp("histchanges") / "r"
    for tag, loop, model in (("v0.1.0", EAGLE_STYLE, BAD), ("v0.2.0", THREADED, GOOD), ("v0.3.0", EAGLE_STYLE, GOOD)):
        write_tree(path, draft_tree(loop, model=model))
        if tag == "v0.1.0":
            git(path, "init", "-q", "-b", "main")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"release {tag}")
        git(path, "tag", tag)
    return path


@pytest.fixture(scope="module")
def ids(tmp_path_factory) -> dict[str, str]:
    """The base release's findings, by rule, from a plain scan of the same tree."""
    return ids_by_rule(tmp_path_factory.mktemp("histbase") / "t", draft_tree(EAGLE_STYLE, model=BAD),
                       {"MTP001", "MTP002"})


def test_history_calls_a_vanished_by_design_report_a_behaviour_change_not_fixed(repo: Path, ids, tmp_path: Path) -> None:
    hist = run_history(repo, config=Config(), cache_dir=tmp_path / "c", rules=all_rules())
    assert [r.ref for r in hist.scanned()] == ["v0.1.0", "v0.2.0", "v0.3.0"]
    _, threaded, back = hist.deltas
    assert threaded is not None and back is not None
    assert [(f.rule, f.fingerprint) for f in threaded.fixed] == [("MTP001", ids["MTP001"])]
    (change,) = threaded.behaviour_changes
    assert (change.change, change.finding.rule, change.finding.fingerprint) == (EAGLE_TO_THREADED, "MTP002", ids["MTP002"])
    assert [(s.model_class.name, s.before, s.after) for s in change.steps] == [("Predictor", LAYER_0, LAYER_I)]
    # Back to eagle-style: the report is new (introduced) and is the opposite change; nothing fixed.
    assert back.fixed == [] and [f.rule for f in back.introduced] == ["MTP002"]
    (change,) = back.behaviour_changes
    assert change.change == THREADED_TO_EAGLE and change.finding.fingerprint == back.introduced[0].fingerprint


def test_history_diff_and_lint_agree_on_what_is_fixed(repo: Path, tmp_path: Path) -> None:
    """The same two revisions through ``history``, ``diff`` and ``lint``: the same fixed ids
    and the same behaviour changes (kind, rule and id)."""
    def said(fixed, changes) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
        return ([(f.rule, f.fingerprint) for f in fixed],
                [(c.change, c.finding.rule, c.finding.fingerprint) for c in changes])

    cache = tmp_path / "c"
    hist = run_history(repo, start="v0.1.0", end="v0.2.0", config=Config(), cache_dir=cache, rules=all_rules())
    diff = run_diff(repo, "v0.1.0", "v0.2.0", config=Config(), cache_dir=cache, rules=all_rules())
    lint = run_lint(repo, "v0.1.0", "v0.2.0", Config(), FactsCache(cache), cache, rules=all_rules())
    assert hist.deltas[-1] is not None and diff.deltas[-1] is not None and lint.result.lint is not None
    from_lint = said(lint.result.lint.fixed, lint.result.lint.behaviour_changes)
    assert from_lint[0] and from_lint[1]  # both kinds are there to agree on
    assert said(hist.deltas[-1].fixed, hist.deltas[-1].behaviour_changes) == from_lint
    assert said(diff.deltas[-1].fixed, diff.deltas[-1].behaviour_changes) == from_lint


def invoke(*args: object):
    app = typer.Typer(pretty_exceptions_enable=False)
    app.command("history")(history_command)
    app.command("diff")(diff_command)
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, (result.exception, result.output)
    return result.stdout


def test_history_json_counts_and_lists_behaviour_changes_apart_from_fixed(repo: Path, ids, tmp_path: Path) -> None:
    doc = json.loads(invoke("history", repo, "--format", "json", "--cache-dir", tmp_path / "c"))
    first, threaded, back = doc["releases"]
    assert first["behaviour_changes"] == [] and first["counts"]["behaviour_changes"] == 0
    assert threaded["counts"]["fixed"] == 1 and threaded["counts"]["behaviour_changes"] == 1
    assert [(f["rule"], f["fingerprint"]) for f in threaded["fixed"]] == [("MTP001", ids["MTP001"])]
    (change,) = threaded["behaviour_changes"]
    assert (change["change"], change["finding"]["rule"], change["finding"]["fingerprint"]) == (
        EAGLE_TO_THREADED, "MTP002", ids["MTP002"])
    assert change["steps"] == [{"class": {"path": "vllm/models/m_mtp.py", "name": "Predictor"}, "before": LAYER_0,
                                "after": LAYER_I, "detail": change["steps"][0]["detail"], "related": []}]
    assert [c["change"] for c in back["behaviour_changes"]] == [THREADED_TO_EAGLE] and back["fixed"] == []


def test_history_text_markdown_and_html_show_the_change_not_a_fix(repo: Path, ids, tmp_path: Path) -> None:
    cache = tmp_path / "c"
    text = invoke("history", repo, "--cache-dir", cache).splitlines()
    header = text[2].split()
    assert header[:6] == ["release", "findings", "new", "fixed", "changed", "kept"]
    row = text[4].split()  # v0.2.0: 1 finding gone as fixed, 1 behaviour change
    assert row[0] == "v0.2.0" and row[3:5] == ["1", "1"]
    fixed = [line for line in text if line.startswith("  fixed ")]
    changed = [line for line in text if line.startswith("  changed ")]
    assert len(fixed) == 1 and "MTP001" in fixed[0] and ids["MTP001"] in fixed[0]
    assert len(changed) == 2 and changed[0].startswith(f"  changed    {EAGLE_TO_THREADED}: MTP002 ")
    assert ids["MTP002"] in changed[0] and changed[1].startswith(f"  changed    {THREADED_TO_EAGLE}: MTP002 ")
    md = invoke("history", repo, "--format", "markdown", "--cache-dir", cache)
    assert "| release | commit | findings | introduced | fixed | behaviour changes | persisted |" in md
    assert "### Behaviour changes: by design, not fixes (1)" in md and "### Fixed (1)" in md
    def md_escaped(s: str) -> str:
        return s.replace(">", "\\>")

    assert f"| {md_escaped(EAGLE_TO_THREADED)} | MTP002 |" in md
    assert md_escaped(f"Predictor: {LAYER_0} -> {LAYER_I}") in md
    page = invoke("history", repo, "--format", "html", "--cache-dir", cache)
    assert "<th>behaviour changes</th>" in page and f"<td>{html.escape(EAGLE_TO_THREADED)}</td><td>MTP002</td>" in page
    out = invoke("diff", repo, "v0.1.0", "v0.2.0", "--cache-dir", cache).splitlines()
    assert out[1].endswith("0 introduced, 1 fixed, 0 unchanged, 1 behaviour change (by design, not fixes)")
    assert [line.split()[1] for line in out[2:]] == ["MTP001", EAGLE_TO_THREADED.split()[0]]


def test_a_finding_whose_file_moved_is_fixed_for_neither_lint_nor_history(tmp_path: Path) -> None:
    """Both pair what is gone the same way before they classify it: a wrapper that still
    drops the step in a renamed file persists (moved); nobody calls it fixed."""
    path = tmp_path / "r"
    files = draft_tree(THREADED, model=BAD)
    write_tree(path, files)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    git(path, "tag", "v0.1.0")
    git(path, "mv", "vllm/models/m_mtp.py", "vllm/models/moved_mtp.py")
    git(path, "commit", "-q", "-m", "move the model file")
    git(path, "tag", "v0.2.0")
    cache = tmp_path / "c"
    hist = run_history(path, config=Config(), cache_dir=cache, rules=all_rules())
    delta = hist.deltas[-1]
    assert delta is not None and [f.rule for f in delta.persisted] == ["MTP001"] and len(delta.moved) == 1
    assert delta.fixed == [] and delta.behaviour_changes == []
    lint = run_lint(path, "v0.1.0", "v0.2.0", Config(), FactsCache(cache), cache, rules=all_rules())
    assert lint.result.lint is not None
    assert lint.result.lint.fixed == [] and lint.fixed == [] and lint.result.stats["fixed"] == 0
