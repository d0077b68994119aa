"""`scan` against the held-out findings (this session's held-out check of MTP005, MTP002,
MTP003 and MTP001): per release, what an independent reader derived from vLLM 0.24.0-0.31.0
source without looking at this tool (``tests/data/heldout/README.md``;
``heldout_findings.json`` is the reader's file, unchanged). :mod:`heldout_findings_score`
judges each entry: a finding of the question's rule at the entry's function (or with it on
its call chain), or, for a "none found" entry, no such finding beyond the listed ones.

One entry contradicts the reader's own evidence and is asserted the other way round,
with the reason: the answer is checked, never tuned.
"""

from __future__ import annotations

import pytest
from heldout_findings_score import CASES_S14, judge, load_cases
from scan_helpers import scan_release

pytestmark = pytest.mark.release

CASES = load_cases()
# The reader lists a constant-head loop of MultiModuleMTPSpeculator in 0.27.1 and notes in
# the same file that 0.27.1 never constructs that class (its V2 init_speculator has no
# multi-module branch: vllm/v1/worker/gpu/spec_decode/__init__.py). No route runs the loop,
# so the right answer is no finding.
CONTRADICTED = {
    "0.27.1-Q2-v2-multimodule-logits": "MultiModuleMTPSpeculator is never built in 0.27.1 (the reader's own note)",
}


# The eighth reader (heldout_findings_s14.json, vLLM 0.34.0): 23/36 at the start of session 14, 25/36 after it,
# 27/36 in session 15 (a method and draft the construction rejects take no route: DSpark drafts asked as mtp).
# Its entries not yet agreed, each with its class, as strict expected failures.
S14 = load_cases(CASES_S14)
_S14_GATES = ("the reader's gates include exclusions vLLM makes by design (MiniMax-M3 by name, index sharing, a "
              "declared speculator config, MiMo-V2's n_predict pinned to 1, checkpoints already converted): MTP006 "
              "reports a gate that reads another field than the one the model sizes its layers with, and in 0.34.0 "
              "the gate reads n_predict, which every family's override sets")
S14_MISSING = {
    "Q3-01": ("disputed vocabulary: DraftModelSpeculator's compute_draft_logits/get_draft_top_tokens drop the step by "
              "design (every caller hands 0; MultiModuleMTPSpeculator overrides both): the tool says so in its MTP002 "
              "finding, the reader files an MTP001"),
    **{f"Q5-0{i}": _S14_GATES for i in (1, 2, 3, 4, 5, 8)},
    "Q5-06": ("GLM-OCR: the override reads n_predict at the top level while the model sizes its layers from the "
              "text config; whether the top-level config holds the field is transformers' (outside the tree, the "
              "reader's confidence is low): no MTP006 is derived"),
    "Q5-07": ("NemotronH: the gate may choose the multi-module speculator for 2+ layers, which the class's "
              "constructor assert rejects: layers answers rejected (load), no gate finding"),
}


@pytest.mark.parametrize("case", [
    pytest.param(c, id=f"s14-{c['id']}", marks=[pytest.mark.xfail(strict=True, reason=S14_MISSING[c["id"]])]
                 if c["id"] in S14_MISSING else []) for c in S14])
def test_scan_agrees_with_the_eighth_reader(case: dict) -> None:
    agrees, said = judge(case, list(scan_release(case["release"]).result.findings), S14)
    assert agrees, f"{case['id']} ({case['question']}): the scan says {said}"


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in CASES])
def test_scan_agrees_with_the_reader(case: dict) -> None:
    agrees, said = judge(case, list(scan_release(case["release"]).result.findings), CASES)
    if case["id"] in CONTRADICTED:
        assert not agrees, f"{case['id']}: {CONTRADICTED[case['id']]}, yet the scan says {said}"
    else:
        assert agrees, f"{case['id']} ({case['question']}): the scan says {said}"


def test_the_contradicted_entry_is_a_case_and_says_so() -> None:
    """The reader's file itself says the class is never constructed in that release."""
    by_id = {c["id"]: c for c in CASES}
    assert set(CONTRADICTED) <= set(by_id)
    for i in CONTRADICTED:
        words = " ".join(str(v) for c in CASES if c["release"] == by_id[i]["release"] for v in c.values())
        assert "MultiModuleMTPSpeculator is never constructed in 0.27.1" in words
