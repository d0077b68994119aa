"""Loops (issue 18): a step counted in a loop-carried variable varies; a step the analysis
cannot classify is UNKNOWN (never CONSTANT), and MTP002 never reports it."""

from __future__ import annotations

from pathlib import Path

import pytest
from scan_helpers import by_rule, scan_tree, write_tree

from auditor.analyses import LoopProvider, StepKind
from rules._examples import LOADER, wrapper

_PROPOSER = '''
from vllm.loader import get_model


class Proposer:
    def __init__(self, config):
        self.num_speculative_tokens = config.num_speculative_tokens

    def load_model(self):
        self.model = get_model(self.config)

    def next_index(self):
        return 0

    def propose(self, input_ids, positions, hidden_states):
        out = []
        step = 0
{before}
        for _ in range(self.num_speculative_tokens - 1):
{body}
        return out
'''


def _tree(tmp_path: Path, body: str, before: str = "") -> Path:
    indent = lambda text: "\n".join("            " + line for line in text.strip().splitlines())  # noqa: E731
    return write_tree(tmp_path / "t", {
        "vllm/loader.py": LOADER,
        "vllm/models/m_mtp.py": wrapper("return self.model(input_ids, positions, hidden_states, spec_step_idx)",
                                        "self, input_ids, positions, hidden_states, spec_step_idx=0"),
        "vllm/spec_decode/proposer.py": _PROPOSER.format(body=indent(body), before=indent(before)[4:] if before else ""),
    })


def _kinds(scan) -> set[StepKind]:
    loops = scan.analysis.get(LoopProvider)
    results = loops.loop_results()
    assert results, "the draft loop reaches the model"
    return {e.kind for r in results for e in r.entries if e.method == "forward"}


@pytest.mark.parametrize("body", [
    "out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=step))\nstep += 1",
    "out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=step))\nstep = step + 1",
    "idx = step\nout.append(self.model(input_ids, positions, hidden_states, spec_step_idx=idx))\nstep += 1",
])
def test_a_loop_carried_counter_varies(tmp_path, body):
    scan = scan_tree(_tree(tmp_path, body))
    assert _kinds(scan) == {StepKind.VARYING}
    assert not by_rule(scan, "MTP002")


@pytest.mark.parametrize("body", [
    "idx = self.next_index()\nout.append(self.model(input_ids, positions, hidden_states, spec_step_idx=idx))",
    "out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=len(out)))",
    "out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=self.cursor))\nself.cursor = self.next_index()",
])
def test_a_step_the_analysis_cannot_classify_is_unknown_and_not_reported(tmp_path, body):
    scan = scan_tree(_tree(tmp_path, body, before="self.cursor = 0"))
    assert _kinds(scan) == {StepKind.UNKNOWN}
    assert not by_rule(scan, "MTP002")


def test_a_constant_step_is_still_constant_and_reported(tmp_path):
    scan = scan_tree(_tree(tmp_path, "out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=step))"))
    assert _kinds(scan) == {StepKind.CONSTANT}  # `step` is never changed in the loop
    assert len(by_rule(scan, "MTP002")) == 1
