"""The seed pull request's change (vLLM PR #36910), replayed on vLLM 0.17.1 and linted.

Its reviewers said: passing the step in the eagle proposer/speculator loops changes a
behaviour that is by design (EAGLE-style drafting reuses layer 0), and the MTP wrappers'
drop is a real bug. ``lint`` must say the same: the two wrapper MTP001s are *fixed*, listed
by rule and id; the two eagle-style loops' MTP002s are *behaviour changes*
(``eagle-style -> threaded``), per class layer 0 at every step before, step i -> layer i
after — never fixes. The change itself is our own small diff (tests/data/lint/); the
release is fetched into the cache, never committed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from scan_helpers import scan_release, git  # noqa: E402

from auditor.model.findings import EAGLE_TO_THREADED, LAYER_0, LAYER_I  # noqa: E402
from auditor.output.json_format import load_schema  # noqa: E402

pytestmark = pytest.mark.release

RELEASE = "0.17.1"
PATCH = Path(__file__).parent / "data" / "lint" / "seed-pr-36910-on-0.17.1.diff"
WRAPPERS = ["Qwen3_5MTP.forward", "Qwen3NextMTP.forward"]
LOOPS = ["EagleSpeculator.generate_draft", "SpecDecodeBaseProposer.propose"]


@pytest.fixture(scope="module")
def seed_repo(tmp_path_factory) -> Path:
    from release_cache import release_root

    repo = tmp_path_factory.mktemp("seed") / "vllm-0.17.1"
    shutil.copytree(release_root(RELEASE) / "vllm", repo / "vllm", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"vLLM {RELEASE}")
    git(repo, "apply", "-C1", str(PATCH))
    git(repo, "commit", "-q", "-am", "PR #36910: forward spec_step_idx in MTP wrappers and the eagle proposer/speculator")
    return repo


@pytest.fixture(scope="module")
def lint(seed_repo: Path, tmp_path_factory):
    from release_cache import shared_cache_dir

    cache = shared_cache_dir(tmp_path_factory)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "auditor.cli", "lint", ".", "--base", "HEAD~1", *args],
                              cwd=seed_repo, capture_output=True, text=True, timeout=900,
                              env={**os.environ, "MTP_AUDIT_CACHE_DIR": str(cache)})

    return run


@pytest.fixture(scope="module")
def base_ids() -> dict[tuple[str, str], tuple[str, int]]:
    """(rule, function) -> (id, line) of the release's own findings, from a plain scan."""
    return {(f.rule, f.function): (f.fingerprint, f.line) for f in scan_release(RELEASE).result.findings}


def test_the_wrapper_drops_are_fixed_and_listed_by_rule_and_id(lint, base_ids) -> None:
    r = lint("-f", "json")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, load_schema())
    fixed = doc["lint"]["fixed"]
    assert sorted((f["rule"], f["function"]) for f in fixed) == [("MTP001", w) for w in sorted(WRAPPERS)]
    for f in fixed:
        assert f["fingerprint"] == base_ids[(f["rule"], f["function"])][0]  # the id the release's scan gives it
    assert doc["stats"]["fixed"] == 2 and doc["stats"]["behaviour_changes"] == 2


def test_the_eagle_style_loops_are_behaviour_changes_not_fixes(lint, base_ids) -> None:
    doc = json.loads(lint("-f", "json").stdout)
    changes = doc["lint"]["behaviour_changes"]
    assert sorted((c["change"], c["finding"]["rule"], c["finding"]["function"]) for c in changes) == [
        (EAGLE_TO_THREADED, "MTP002", loop) for loop in LOOPS]
    for c in changes:
        assert c["finding"]["fingerprint"] == base_ids[("MTP002", c["finding"]["function"])][0]
        steps = {s["class"]["name"]: (s["before"], s["after"]) for s in c["steps"]}
        assert steps["Qwen3_5MTP"] == steps["Qwen3NextMTP"] == steps["DeepSeekMTP"] == (LAYER_0, LAYER_I)
        # ERNIE's and MiMo's forward assert spec_step_idx == 0 in 0.17.1: the change makes them raise
        # at draft step 1 (what `layers` says of that route), every other class now threads the step.
        raising = {name for name, (_, after) in steps.items() if after != LAYER_I}
        assert raising == {"ErnieMTP", "MiMoMTP"} and {steps[n] for n in raising} == {(LAYER_0, "raises at step 1")}
        assert all("assert spec_step_idx == 0" in s["detail"] for s in c["steps"] if s["class"]["name"] in raising)
        assert {before for before, _ in steps.values()} == {LAYER_0} and len(steps) >= 10
        new_ids = {f["fingerprint"] for f in doc["findings"]}
        assert all(set(s["related"]) <= new_ids for s in c["steps"])
    assert not any(f["rule"] == "MTP002" for f in doc["lint"]["fixed"] + doc["findings"])
    # The warm-up loop the change left alone is still eagle-style: neither fixed nor changed.
    assert ("MTP002", "SpecDecodeBaseProposer.dummy_run") in base_ids
    assert "SpecDecodeBaseProposer.dummy_run" not in {c["finding"]["function"] for c in changes}


def test_the_text_report_has_both_sections(lint, base_ids) -> None:
    r = lint()
    out = r.stdout.splitlines()
    fixed = out.index("Fixed by the change (2)")
    for line, wrapper in zip(out[fixed + 1:fixed + 3], ["Qwen3_5MTP.forward", "Qwen3NextMTP.forward"]):
        fp, at = base_ids[("MTP001", wrapper)]
        assert line.startswith("  MTP001 wrapper-drops-step  vllm/model_executor/models/") and f":{at}  {wrapper} → " in line
        assert line.endswith(f"[id {fp}]")
    changed = out.index("Behaviour changes (2): by design, not fixes")
    fp, at = base_ids[("MTP002", "SpecDecodeBaseProposer.propose")]
    assert f"  eagle-style -> threaded  vllm/v1/spec_decode/eagle.py:{at}  SpecDecodeBaseProposer.propose  (was MTP002 " \
           f"loop-constant-step [id {fp}])" in out[changed + 1:]
    assert r.stderr.strip().splitlines()[-1].endswith(", 2 fixed, 2 behaviour changes")


def test_linting_the_commit_gives_the_same_changes_cached_or_not(lint) -> None:
    """``--head HEAD`` scans the commit (its result cached by git tree id); the second run
    reads that result, which has no analysis, so the linted side is analysed again: both,
    and the work-tree run, give the same lint document."""
    work = json.loads(lint("-f", "json").stdout)["lint"]
    first, second = (json.loads(lint("--head", "HEAD", "-f", "json").stdout)["lint"] for _ in range(2))
    assert work == first == second
