"""A defect that goes only because a new finding hides it is *masked*, not fixed (issue 18
item 10): a compiled forward (MTP007) cannot freeze a step that a wrapper now drops
(MTP001) or that the loop no longer passes (MTP002); the step is still not threaded. The
decision is by what the new finding means (its ``Meaning``) and where it sits (on the gone
finding's route), never by rule code. Trees are our own (rules/_capture_examples)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_runner import invoke  # noqa: E402
from scan_helpers import git, scan_tree, write_tree  # noqa: E402

from auditor.model.findings import THREADED_TO_EAGLE, ClassRef, Finding, FindingRef, Hop, Meaning, Severity  # noqa: E402
from auditor.output.json_format import load_schema  # noqa: E402
from auditor.services.history.compare import gone  # noqa: E402
from auditor.services.lint_changes import classify, masks, meanings_of  # noqa: E402
from rules import all_rules  # noqa: E402
from rules._capture_examples import compile_tree  # noqa: E402
from rules._examples import wrapper  # noqa: E402
from trees import DROPPING_WRAPPER, EAGLE_STYLE_LOOP  # noqa: E402

MODEL, PROPOSER = "vllm/models/m_mtp.py", "vllm/spec_decode/proposer.py"
THREADING_CALL = "hidden_states = self.model(input_ids, positions, hidden_states, spec_step_idx=token_index + 1)"
PASSING_FORWARD = ("    def forward(self, input_ids, positions, hidden_states, spec_step_idx: int = 0):\n"
                   "        return self.model(input_ids, positions, hidden_states, spec_step_idx)\n")
DYNAMIC = '@support_torch_compile(dynamic_arg_dims={"hidden_states": 0, "spec_step_idx": 0})'


def frozen() -> dict[str, str]:
    """The base: the loop threads the step into a compiled forward that freezes it (MTP007)."""
    return compile_tree()


def dropped() -> dict[str, str]:
    """The compiled wrapper now takes ``**kwargs`` and drops the step (MTP001 at its forward)."""
    files = compile_tree()
    src = files[MODEL]
    assert PASSING_FORWARD in src
    files[MODEL] = src.replace(PASSING_FORWARD, "    def forward(self, input_ids, positions, hidden_states, **kwargs):\n"
                                                f"        {DROPPING_WRAPPER}\n")
    return files


def eagle_style() -> dict[str, str]:
    """The loop no longer passes the step (an MTP002, where it used to thread it)."""
    files = compile_tree()
    assert THREADING_CALL in files[PROPOSER]
    files[PROPOSER] = files[PROPOSER].replace(THREADING_CALL, "hidden_states = self.model(input_ids, positions, hidden_states)")
    return files


def really_fixed(unrelated_drop: bool = False) -> dict[str, str]:
    """The step is made dynamic for the compiler (MTP007 fixed); optionally the change also
    adds a dropping wrapper in another model file, off the compiled forward's route."""
    files = compile_tree(DYNAMIC)
    if unrelated_drop:
        files["vllm/models/other_mtp.py"] = (wrapper(DROPPING_WRAPPER).replace("Predictor", "OtherPredictor")
                                             .replace("WrapperMTP", "OtherMTP"))
    return files


def changes(tmp_path: Path, head_files: dict[str, str]):
    base = scan_tree(write_tree(tmp_path / "base", frozen())).result
    head = scan_tree(write_tree(tmp_path / "head", head_files)).result
    introduced = [f for f in head.findings if f.fingerprint not in {g.fingerprint for g in base.findings}]
    got = classify(base, head, introduced, "HEAD~1", meanings_of(all_rules()), removed=gone(base.findings, head.findings))
    (capture,) = [f for f in base.findings if f.rule == "MTP007"]  # the base does what the test says
    return got, introduced, capture


def test_a_compiled_forward_whose_step_a_wrapper_now_drops_is_masked_not_fixed(tmp_path: Path) -> None:
    got, introduced, capture = changes(tmp_path, dropped())
    (drop,) = introduced
    assert (drop.rule, drop.function, drop.meaning) == ("MTP001", "WrapperMTP.forward", Meaning.STEP_LOST)
    assert got.fixed == [] and got.behaviour_changes == []
    (masked,) = got.masked
    assert masked.finding.fingerprint == capture.fingerprint
    assert masked.by == [FindingRef("MTP001", drop.fingerprint)]


def test_a_loop_that_stops_passing_the_step_masks_the_capture_and_changes_the_behaviour(tmp_path: Path) -> None:
    got, introduced, capture = changes(tmp_path, eagle_style())
    (report,) = introduced
    assert report.rule == "MTP002"
    assert [c.change for c in got.behaviour_changes] == [THREADED_TO_EAGLE]
    assert got.fixed == []
    (masked,) = got.masked
    assert (masked.finding.fingerprint, masked.by) == (capture.fingerprint, [FindingRef("MTP002", report.fingerprint)])


def test_a_real_fix_is_fixed_even_beside_a_new_drop_off_its_route(tmp_path: Path) -> None:
    got, introduced, capture = changes(tmp_path, really_fixed())
    assert introduced == [] and [f.fingerprint for f in got.fixed] == [capture.fingerprint] and got.masked == []
    got, introduced, capture = changes(tmp_path / "other", really_fixed(unrelated_drop=True))
    assert [(f.rule, f.function) for f in introduced] == [("MTP001", "OtherMTP.forward")]  # new, elsewhere
    assert [f.fingerprint for f in got.fixed] == [capture.fingerprint] and got.masked == []


def _finding(rule: str, path: str, function: str, callee: str = "", classes: tuple[str, ...] = (),
             trace: tuple[tuple[str, str], ...] = ()) -> Finding:
    return Finding(rule, Severity.WARNING, path, 1, 0, function, callee, "m",
                   trace=[Hop(p, 1, fn, "") for p, fn in trace],
                   affected_classes=[ClassRef(MODEL, c) for c in classes]).finalize()


FROZEN = _finding("MTP007", MODEL, "M", "@c", ("M",),
                  ((PROPOSER, "Multi.propose"), (MODEL, "M.forward")))


def test_what_masks_is_the_new_findings_meaning_and_site_not_its_code() -> None:
    on_route = _finding("X1", MODEL, "M.forward")
    off_route = _finding("X1", "vllm/other.py", "O.forward")
    assert masks(on_route, FROZEN, {"X1": Meaning.STEP_LOST})
    assert masks(on_route, FROZEN, {"X1": Meaning.CANNOT_TAKE})
    assert masks(on_route, FROZEN, {"X1": Meaning.BY_DESIGN})
    assert not masks(off_route, FROZEN, {"X1": Meaning.STEP_LOST})
    # another frozen step, or a finding of a rule that declares nothing, hides nothing
    assert not masks(on_route, FROZEN, {"X1": Meaning.STEP_FROZEN}) and not masks(on_route, FROZEN, {})
    # a finding's own meaning (stamped by the engine) wins over its rule's declaration
    stamped = _finding("X1", MODEL, "M.forward")
    stamped.meaning = Meaning.STEP_LOST
    assert masks(stamped, FROZEN, {"X1": Meaning.STEP_FROZEN})


def test_a_gate_that_never_opens_masks_what_lay_past_the_drafter_it_guards() -> None:
    gate = {"X6": Meaning.GATE_CLOSED}
    closed = _finding("X6", "vllm/config.py", "Spec.use_multi", callee="Multi", classes=("M",))
    assert masks(closed, FROZEN, gate)
    assert not masks(_finding("X6", "vllm/config.py", "Spec.use_multi", callee="Multi", classes=("Other",)), FROZEN, gate)
    assert not masks(_finding("X6", "vllm/config.py", "Spec.use_multi", callee="Eagle", classes=("M",)), FROZEN, gate)


# --- the commands, on a git repository: base, the dropping wrapper, then a real fix ---


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("masked") / "r"
    ids = {}
    for name, files in (("v0.1.0", frozen()), ("drop", dropped()), ("v0.2.0", really_fixed())):
        if name == "v0.2.0":
            (path / MODEL).unlink()  # a tree written over the last one: start the model file afresh
        write_tree(path, files)
        if name == "v0.1.0":
            git(path, "init", "-q", "-b", "main")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", name)
        ids[name] = git(path, "rev-parse", "HEAD").strip()
        if name.startswith("v"):
            git(path, "tag", name)
    return path, ids


def _lint(path: Path, base: str, head: str, *extra: str):
    res = invoke("lint", str(path), "--base", base, "--head", head, "-q", "--cache-dir", str(path.parent / "cache"), *extra)
    assert res.returncode in (0, 1), res.stderr
    return res


def test_lint_lists_the_masked_capture_in_every_format_never_as_fixed(repo) -> None:
    path, ids = repo
    doc = json.loads(_lint(path, "v0.1.0", ids["drop"], "-f", "json").stdout)
    jsonschema.validate(doc, load_schema())
    lint = doc["lint"]
    assert lint["fixed"] == []
    (masked,) = lint["masked"]
    (drop,) = doc["findings"]
    assert masked["finding"]["rule"] == "MTP007" and masked["by"] == [{"rule": "MTP001", "fingerprint": drop["fingerprint"]}]
    assert doc["stats"]["masked"] == 1 and doc["stats"]["fixed"] == 0
    capture = masked["finding"]["fingerprint"]

    text = _lint(path, "v0.1.0", ids["drop"]).stdout
    assert "Fixed by the change" not in text
    assert "Masked by the change (1): not fixed, a new finding hides them" in text
    assert f"[id {capture}]" in text and f"masked by MTP001 {drop['fingerprint']}" in text

    sarif = json.loads(_lint(path, "v0.1.0", ids["drop"], "-f", "sarif").stdout)["runs"][0]
    gone_results = [r for r in sarif["results"] if r.get("baselineState") == "absent"]
    assert [(r["ruleId"], r["kind"], r["properties"]["lintChange"]) for r in gone_results] == [("MTP007", "informational", "masked")]
    assert gone_results[0]["properties"]["maskedBy"] == [f"MTP001 {drop['fingerprint']}"]
    assert sarif["properties"]["lint"]["fixed"] == 0 and sarif["properties"]["lint"]["masked"] == 1

    github = _lint(path, "v0.1.0", ids["drop"], "-f", "github").stdout
    notices = [line for line in github.splitlines() if line.startswith("::notice")]
    assert len(notices) == 1 and "title=masked%3A MTP007" in notices[0] and "fixed" not in notices[0].split("::")[1]
    assert f"masked by MTP001 [id {drop['fingerprint']}]" in notices[0]

    # the real fix, from the same base: fixed, nothing masked
    doc = json.loads(_lint(path, "v0.1.0", "v0.2.0", "-f", "json").stdout)
    assert [f["fingerprint"] for f in doc["lint"]["fixed"]] == [capture] and doc["lint"]["masked"] == []


def test_diff_says_masked_and_bisect_names_the_masking_commit(repo, tmp_path: Path) -> None:
    from auditor.model.history import MASKED
    from auditor.services.history import run_bisect

    path, ids = repo
    cache = tmp_path / "c"
    doc = json.loads(invoke("diff", str(path), "v0.1.0", ids["drop"], "-f", "json", "-q", "--cache-dir", str(cache)).stdout)
    (delta,) = [r for r in doc["releases"] if r.get("base")]
    assert delta["fixed"] == [] and [m["finding"]["rule"] for m in delta["masked"]] == ["MTP007"]
    assert delta["counts"]["masked"] == 1
    capture = delta["masked"][0]["finding"]["fingerprint"]
    by = f"MTP001 {delta['masked'][0]['by'][0]['fingerprint']}"
    formats = {fmt: invoke("diff", str(path), "v0.1.0", ids["drop"], "-f", fmt, "-q", "--cache-dir", str(cache)).stdout
               for fmt in ("text", "markdown", "html")}
    assert f"[{capture}] masked by {by}" in formats["text"] and "1 masked (not fixed: a new finding hides it)" in formats["text"]
    assert "### Masked: not fixed, a new finding hides them (1)" in formats["markdown"] and by in formats["markdown"]
    assert '<span class="tag masked">Masked</span> 1' in formats["html"] and capture in formats["html"]
    res = run_bisect(path, capture, "v0.1.0", "v0.2.0", cache_dir=cache, workers=1, rules=all_rules())
    assert res.direction == MASKED and res.commit == ids["drop"], (res.direction, res.commit, res.steps)
    assert [str(b) for b in res.masked_by] and all(b.rule == "MTP001" for b in res.masked_by)
    text = invoke("bisect", str(path), capture, "--good", "v0.1.0", "--bad", "v0.2.0", "--cache-dir", str(cache)).stdout
    assert text.splitlines()[0].startswith(f"{ids['drop']} is the first commit where finding {capture} is gone, masked by MTP001 ")


def test_a_baseline_entry_whose_finding_a_new_one_hides_is_masked_not_fixed(repo, tmp_path: Path) -> None:
    path, ids = repo
    cache, baseline = tmp_path / "c", tmp_path / "baseline.json"

    def scan(ref: str, *extra: str):
        git(path, "checkout", "-q", ref)
        try:
            return invoke("scan", str(path), "-q", "--cache-dir", str(cache), *extra)
        finally:
            git(path, "checkout", "-q", "main")

    git(path, "checkout", "-q", "v0.1.0")
    try:
        assert invoke("baseline", "create", str(path), "-o", str(baseline), "-q", "--cache-dir", str(cache)).returncode == 0
    finally:
        git(path, "checkout", "-q", "main")
    (entry,) = json.loads(baseline.read_text())["findings"]
    assert entry["rule"] == "MTP007" and [MODEL, "WrapperMTP.forward"] in entry["route"]
    assert entry["classes"] == [[MODEL, "WrapperMTP"]]
    # at the commit whose wrapper drops the step: the new MTP001 is reported, the entry is masked
    drop = scan(ids["drop"], "-f", "json", "--baseline", str(baseline))
    doc = json.loads(drop.stdout)
    (new,) = doc["findings"]
    assert doc["stats"]["baseline_masked"] == [entry["fingerprint"]] and doc["stats"]["baseline_fixed"] == []
    assert (f"mtp-audit: 1 baseline entry is masked, not fixed: a new finding on its route hides it "
            f"({entry['fingerprint']} by MTP001 {new['fingerprint']}); keep it") in drop.stderr
    assert "can be removed" not in drop.stderr
    # after the real fix it is fixed
    fixed = scan("v0.2.0", "-f", "json", "--baseline", str(baseline))
    stats = json.loads(fixed.stdout)["stats"]
    assert stats["baseline_fixed"] == [entry["fingerprint"]] and stats["baseline_masked"] == []
    # an entry written before entries had a route cannot be masked: it is fixed, as it was
    old = json.loads(baseline.read_text())
    old["findings"] = [{k: v for k, v in e.items() if k not in ("route", "classes")} for e in old["findings"]]
    baseline.write_text(json.dumps(old))
    stats = json.loads(scan(ids["drop"], "-f", "json", "--baseline", str(baseline)).stdout)["stats"]
    assert stats["baseline_fixed"] == [entry["fingerprint"]] and stats["baseline_masked"] == []
