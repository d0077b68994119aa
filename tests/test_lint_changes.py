"""lint on design changes (issue 18 item 10), on small trees we write: a removed by-design
report (MTP002) is a behaviour change, ``eagle-style -> threaded``, never a fix; a removed
defect (MTP001) is fixed, listed by rule and id; a by-design report the change adds where
the step used to be threaded is the opposite change and also a new finding."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scan_helpers import scan_tree, write_tree, git  # noqa: E402

from auditor.model.findings import (  # noqa: E402
    EAGLE_TO_THREADED,
    EAGLE_TO_UNREACHED,
    LAYER_0,
    LAYER_I,
    NOT_REACHED,
    THREADED_TO_EAGLE,
    Meaning,
)
from auditor.output import render  # noqa: E402
from auditor.output.json_format import load_schema  # noqa: E402
from auditor.services.history.compare import gone  # noqa: E402
from auditor.services.lint_changes import classify, meanings_of  # noqa: E402
from rules import all_rules  # noqa: E402
from rules._examples import draft_tree, wrapper  # noqa: E402

THREADED = "out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=token_index + 1))"
EAGLE_STYLE = "out.append(self.model(input_ids, positions, hidden_states))"
MODEL = "vllm/models/m_mtp.py"
LOOP = ("vllm/spec_decode/proposer.py", "Proposer.propose")




GOOD = wrapper("return self.model(input_ids, positions, hidden_states, **kwargs)")
BAD = wrapper("return self.model(input_ids, positions, hidden_states)")


def scan(tmp_path: Path, name: str, loop: str, model: str = GOOD):
    return scan_tree(write_tree(tmp_path / name, draft_tree(loop, model=model))).result


def changes(base, head, meanings=None):
    introduced = [f for f in head.findings if f.fingerprint not in {g.fingerprint for g in base.findings}]
    return classify(base, head, introduced, "HEAD~1", meanings_of(all_rules()) if meanings is None else meanings,
                    removed=gone(base.findings, head.findings)), introduced


def test_a_loop_that_starts_threading_the_step_is_a_behaviour_change_not_a_fix(tmp_path: Path) -> None:
    base, head = scan(tmp_path, "base", EAGLE_STYLE), scan(tmp_path, "head", THREADED)
    (loop_report,) = [f for f in base.findings if f.rule == "MTP002"]  # the tree does what the test says
    got, introduced = changes(base, head)
    assert got.fixed == [] and introduced == []
    (change,) = got.behaviour_changes
    assert change.change == EAGLE_TO_THREADED
    assert (change.finding.rule, change.finding.fingerprint) == ("MTP002", loop_report.fingerprint)
    assert (change.finding.path, change.finding.function) == LOOP
    assert [(s.model_class.name, s.before, s.after) for s in change.steps] == [("Predictor", LAYER_0, LAYER_I)]


ASSERTS_STEP_0 = GOOD.replace(
    "        layer = self.layers[spec_step_idx % self.num_mtp_layers]\n",
    "        assert spec_step_idx == 0, 'one token only'\n        layer = self.layers[spec_step_idx % self.num_mtp_layers]\n")


def test_a_model_that_asserts_step_0_raises_at_step_1_once_the_loop_threads(tmp_path: Path) -> None:
    assert ASSERTS_STEP_0 != GOOD
    base = scan(tmp_path, "base", EAGLE_STYLE, ASSERTS_STEP_0)
    head_scan = scan_tree(write_tree(tmp_path / "head", draft_tree(THREADED, model=ASSERTS_STEP_0)))
    # The reachability table alone says it (issue 18: its row carries the route's outcome,
    # the assert layers plans from), and the dispatch callback agrees.
    plain, _ = changes(base, head_scan.result)
    assert [(c.change, s.after) for c in plain.behaviour_changes for s in c.steps] == [
        (EAGLE_TO_THREADED, "raises at step 1")]
    got = classify(base, head_scan.result, [], "HEAD~1", meanings_of(all_rules()),
                   removed=gone(base.findings, head_scan.result.findings), raises=head_scan.analysis.dispatch.loop_step_raise)
    (change,) = got.behaviour_changes
    assert change.change == EAGLE_TO_THREADED  # the loop threads the step; the model cannot take step 1
    (step,) = change.steps
    assert (step.model_class.name, step.before, step.after) == ("Predictor", LAYER_0, "raises at step 1")
    assert step.detail.startswith(f"{MODEL}:") and "Predictor.forward: assert spec_step_idx == 0" in step.detail
    # A model without the assert keeps its answer.
    good = scan_tree(write_tree(tmp_path / "good", draft_tree(THREADED, model=GOOD)))
    base2 = scan(tmp_path, "base2", EAGLE_STYLE)
    got = classify(base2, good.result, [], "HEAD~1", meanings_of(all_rules()),
                   removed=gone(base2.findings, good.result.findings), raises=good.analysis.dispatch.loop_step_raise)
    assert [s.after for c in got.behaviour_changes for s in c.steps] == [LAYER_I]


def test_the_decision_is_the_rules_declared_meaning_not_its_code(tmp_path: Path) -> None:
    base, head = scan(tmp_path, "base", EAGLE_STYLE), scan(tmp_path, "head", THREADED)
    declared = meanings_of(all_rules())
    assert declared["MTP002"] is Meaning.BY_DESIGN and declared["MTP001"] is Meaning.STEP_LOST
    # Without the declaration the same removal would be a fix: the rule's meaning decides.
    got, _ = changes(base, head, {code: m for code, m in declared.items() if code != "MTP002"})
    assert [f.rule for f in got.fixed] == ["MTP002"] and got.behaviour_changes == []


def test_a_wrapper_that_stops_dropping_the_step_is_fixed_by_rule_and_id(tmp_path: Path) -> None:
    base, head = scan(tmp_path, "base", THREADED, BAD), scan(tmp_path, "head", THREADED, GOOD)
    (drop,) = [f for f in base.findings if f.rule == "MTP001"]
    got, introduced = changes(base, head)
    assert [(f.rule, f.fingerprint, f.function) for f in got.fixed] == [("MTP001", drop.fingerprint, "WrapperMTP.forward")]
    assert got.behaviour_changes == [] and introduced == []


def test_a_loop_that_stops_threading_the_step_is_introduced_and_a_behaviour_change(tmp_path: Path) -> None:
    base, head = scan(tmp_path, "base", THREADED), scan(tmp_path, "head", EAGLE_STYLE)
    got, introduced = changes(base, head)
    assert [f.rule for f in introduced] == ["MTP002"]  # the gate still sees it
    assert got.fixed == []
    (change,) = got.behaviour_changes
    assert change.change == THREADED_TO_EAGLE and change.finding.fingerprint == introduced[0].fingerprint
    assert [(s.model_class.name, s.before, s.after) for s in change.steps] == [("Predictor", LAYER_I, LAYER_0)]


def test_a_loop_that_no_longer_drafts_with_the_model_is_not_reached_not_fixed(tmp_path: Path) -> None:
    base, head = scan(tmp_path, "base", EAGLE_STYLE), scan(tmp_path, "head", "out.append(hidden_states)")
    got, introduced = changes(base, head)
    assert got.fixed == [] and introduced == []
    (change,) = got.behaviour_changes
    assert change.change == EAGLE_TO_UNREACHED
    assert [(s.model_class.name, s.before, s.after) for s in change.steps] == [("Predictor", LAYER_0, NOT_REACHED)]


def test_a_loop_run_as_a_subclass_is_matched_by_its_own_method() -> None:
    """The V2 runner's default eagle-style speculator runs its base class's loop: the
    reachability table labels it ``… (as Sub)``, the report names ``Base.propose``."""
    from auditor.model.findings import ClassReachability, ClassRef, Finding, LoopReach, ScanResult, Severity

    model = ClassRef("vllm/models/m_mtp.py", "Predictor")
    report = Finding("MTP002", Severity.WARNING, "vllm/spec/base.py", 12, 8, "Base.propose", "forward", "constant step",
                     affected_classes=[model]).finalize()

    def side(threads: bool, findings: list[Finding]) -> ScanResult:
        reach = LoopReach("vllm/spec/base.py:12 Base.propose (as Sub)", threads, "why")
        return ScanResult("t", findings=findings, reachability=[ClassReachability(model, ["P"], ["n"], [reach])])

    got = classify(side(False, [report]), side(True, []), [], "HEAD~1", meanings_of(all_rules()), removed=gone([report], []))
    (change,) = got.behaviour_changes
    assert change.change == EAGLE_TO_THREADED
    assert [(s.before, s.after) for s in change.steps] == [(LAYER_0, LAYER_I)]


def test_a_row_the_linted_side_calls_unknown_is_unknown_in_lint_too() -> None:
    """Lint's steps are the two sides' reachability rows: an unknown row (a route decided
    past a cut, a step that cannot be classified) is ``unknown``, never ``layer 0``."""
    from auditor.model.findings import (
        EAGLE_TO_UNKNOWN,
        STEP_UNKNOWN,
        ClassReachability,
        ClassRef,
        Finding,
        LoopReach,
        ReachVerdict,
        ScanResult,
        Severity,
    )

    model = ClassRef("vllm/models/m_mtp.py", "Predictor")
    report = Finding("MTP002", Severity.WARNING, "vllm/spec/base.py", 12, 8, "Base.propose", "forward", "constant step",
                     affected_classes=[model]).finalize()

    def side(reach: LoopReach, findings: list[Finding]) -> ScanResult:
        return ScanResult("t", findings=findings, reachability=[ClassReachability(model, ["P"], ["n"], [reach])])

    constant = LoopReach("vllm/spec/base.py:12 Base.propose", False, "why")
    unknown = LoopReach("vllm/spec/base.py:12 Base.propose", False, "unknown: past a cut", verdict=ReachVerdict.UNKNOWN)
    got = classify(side(constant, [report]), side(unknown, []), [], "HEAD~1", meanings_of(all_rules()), removed=gone([report], []))
    (change,) = got.behaviour_changes
    assert change.change == EAGLE_TO_UNKNOWN
    assert [(s.before, s.after) for s in change.steps] == [(LAYER_0, STEP_UNKNOWN)]


# --- the command, on a git repository of the same tree: both formats list both ---



@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """Base: an eagle-style loop over a wrapper that drops the step. The change threads the
    step in the loop (a design change) and in the wrapper (a fix)."""
    path = tmp_path_factory.mktemp("lintchanges") / "r"
    write_tree(path, draft_tree(EAGLE_STYLE, model=BAD))
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    write_tree(path, draft_tree(THREADED, model=GOOD))
    git(path, "commit", "-q", "-am", "thread the step")
    return path


def lint(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "auditor.cli", "lint", str(repo), "--base", "HEAD~1", "--head", "HEAD",
                           "--cache-dir", str(repo.parent / "cache"), *args],
                          capture_output=True, text=True, timeout=300)


def test_lint_json_lists_fixed_ids_and_the_behaviour_change(repo: Path, tmp_path: Path) -> None:
    base = scan_tree(write_tree(tmp_path / "base", draft_tree(EAGLE_STYLE, model=BAD))).result
    ids = {f.rule: f.fingerprint for f in base.findings}
    assert set(ids) >= {"MTP001", "MTP002"}, ids
    r = lint(repo, "-f", "json")
    assert r.returncode == 0, r.stderr  # nothing new: a design change alone does not fail the gate
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, load_schema())
    assert doc["findings"] == [] and doc["stats"]["fixed"] == 1 and doc["stats"]["behaviour_changes"] == 1
    assert [(f["rule"], f["fingerprint"]) for f in doc["lint"]["fixed"]] == [("MTP001", ids["MTP001"])]
    (change,) = doc["lint"]["behaviour_changes"]
    assert (change["change"], change["finding"]["rule"], change["finding"]["fingerprint"]) == (
        EAGLE_TO_THREADED, "MTP002", ids["MTP002"])
    assert r.stderr.strip().splitlines()[-1] == "mtp-audit: 2 changed files, 0 new findings, 1 fixed, 1 behaviour change"
    assert lint(repo, "-f", "json").stdout == r.stdout  # deterministic


def test_lint_text_has_a_fixed_section_and_a_behaviour_section(repo: Path) -> None:
    out = lint(repo).stdout.splitlines()
    fixed = out.index("Fixed by the change (1)")
    assert out[fixed + 1].startswith("  MTP001 wrapper-drops-step  vllm/models/m_mtp.py:")
    assert out[fixed + 1].endswith("]") and "WrapperMTP.forward → Predictor.forward  [id " in out[fixed + 1]
    changed = out.index("Behaviour changes (1): by design, not fixes")
    assert out[changed + 1].startswith("  eagle-style -> threaded  vllm/spec_decode/proposer.py:")
    assert "Proposer.propose  (was MTP002 loop-constant-step [id " in out[changed + 1]
    assert out[changed + 2] == "    layer 0 at every step -> step i -> layer i: 1 MTP class(es): Predictor"
    assert out[-1].startswith("0 findings")


def test_lint_text_without_fixes_or_design_changes_prints_no_sections(tmp_path: Path) -> None:
    base = scan(tmp_path, "base", THREADED)
    got, _ = changes(base, base)
    base.lint = got
    assert "Fixed by the change" not in render(base, "text") and "Behaviour changes" not in render(base, "text")


def test_lint_text_verbose_names_every_class_with_its_steps_before_and_after(repo: Path) -> None:
    out = lint(repo, "--verbose").stdout.splitlines()
    changed = out.index("Behaviour changes (1): by design, not fixes")
    assert "(EAGLE-style reuse, intentional per vLLM maintainers)" in out[changed + 2]  # the report's own message
    (line,) = [ln for ln in out[changed:] if ln.startswith("    Predictor (")]
    assert line.startswith("    Predictor (vllm/models/m_mtp.py): layer 0 at every step -> step i -> layer i; step i selects")
