"""A reachability row gives the verdict ``layers`` gives when the step is lost (issue 18:
every view summarises the same routes): the loop hands the forward the step, and a
per-layer head (``compute_logits``) selects with step 0, or the forward itself never gets it.
The row is no ✓ "step i -> layer i"; it is ``lost``, at the selection the plan names.
Trees written here (:func:`trees.gate_tree` with a per-layer head)."""

from __future__ import annotations

import json

from scan_helpers import write_tree
from test_layers import planned_scan
from trees import gate_tree

from auditor.analyses.dispatch import Setting
from auditor.model.findings import LoopReach, ReachVerdict, ScanResult
from auditor.model.history import History, Release
from auditor.output.history import matrix

_SETTING = Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3),))
_HEAD = '''
    def compute_logits(self, x, spec_step_idx: int = 0):
        return self.layers[spec_step_idx % self.num_mtp_layers](x)
'''


def _tree(tmp_path, head_call: str, forward_call: str = "self.model(x, spec_step_idx=step)"):
    files = gate_tree()
    files["vllm/models/deep_mtp.py"] += _HEAD
    files["vllm/spec_decode/speculators.py"] = files["vllm/spec_decode/speculators.py"].replace(
        "            x = self.model(x, spec_step_idx=step)\n",
        f"            x = {forward_call}\n            x = {head_call}\n", 1)
    return write_tree(tmp_path / "t", files)


def _multi_row(scan) -> LoopReach:
    (row,) = [lp for r in scan.result.reachability if r.model_class.name == "DeepMTP" for lp in r.loops
              if "MultiModuleSpeculator.propose" in lp.loop]
    return row


def test_a_head_at_step_0_is_lost_in_the_row_as_in_the_plan(tmp_path):
    scan, (plan,) = planned_scan(_tree(tmp_path, "self.model.compute_logits(x)"), [_SETTING])
    assert [(s.forward_layer, s.head_layer) for s in plan.steps] == [(0, 0), (1, 0), (2, 0)]
    (verdict,) = {s.verdict for s in plan.steps}
    assert verdict.startswith("lost at ")
    row = _multi_row(scan)
    assert row.verdict is ReachVerdict.LOST and not row.steps_reach_layers
    assert row.lost is not None and row.lost.method == "compute_logits" and row.lost.function == "DeepMTP.compute_logits"
    assert row.lost_at == verdict  # the same place, or the same finding, as layers names
    assert row.lost == plan.steps[0].lost  # the plan's own typed fact
    assert row.detail.startswith(verdict)
    # JSON: the verdict and where, loaded back as written; the history matrix has no ✓ for it
    doc = scan.result.to_json()
    (loop,) = [lp for r in doc["reachability"] if r["class"]["name"] == "DeepMTP" for lp in r["loops"]
               if "MultiModuleSpeculator.propose" in lp["loop"]]
    assert loop["verdict"] == "lost" and loop["lost"]["method"] == "compute_logits"
    assert ScanResult.from_json(json.loads(json.dumps(doc))).to_json() == doc
    _, cells, notes = matrix(History("t", "history", [Release(ref="r", result=scan.result)], [None]))
    assert cells["DeepMTP"]["r"] is False
    assert f"no ({verdict}): {row.loop}" in notes["DeepMTP"]["r"]  # the cell's tooltip says where


def test_a_head_handed_the_step_is_threaded_in_both(tmp_path):
    scan, (plan,) = planned_scan(_tree(tmp_path, "self.model.compute_logits(x, spec_step_idx=step)"), [_SETTING])
    assert {s.verdict for s in plan.steps} == {"threaded"}
    row = _multi_row(scan)
    assert row.verdict is ReachVerdict.THREADED and row.steps_reach_layers and row.lost is None


def test_a_forward_that_never_gets_the_step_is_lost_not_constant(tmp_path):
    # The loop hands forward the step; forward takes it in **kwargs and runs the layers
    # without it (a wrapper that drops it): lost in the forward, not "constant by design".
    root = _tree(tmp_path, "self.model.compute_logits(x, spec_step_idx=step)")
    model = root / "vllm/models/deep_mtp.py"
    text = model.read_text()
    wrapped = text.replace("    def forward(self, x, spec_step_idx: int = 0):\n",
                           "    def forward(self, x, **kwargs):\n        return self._run(x)\n\n"
                           "    def _run(self, x, spec_step_idx: int = 0):\n", 1)
    assert wrapped != text
    model.write_text(wrapped)
    scan, (plan,) = planned_scan(root, [_SETTING])
    (verdict,) = {s.verdict for s in plan.steps}
    assert verdict.startswith("lost at ")
    row = _multi_row(scan)
    assert row.verdict is ReachVerdict.LOST and row.lost_at == verdict and not row.steps_reach_layers
    assert row.lost is not None and row.lost.method == "forward" and row.lost.function == "DeepMTP._run"
    assert row.lost == plan.steps[0].lost


def test_an_older_document_without_lost_loads():
    old = {"loop": "a.py:1 P.propose", "step_i_reaches_layer_i": True, "detail": "d", "trace": []}
    row = LoopReach.from_json(old)
    assert row.verdict is ReachVerdict.THREADED and row.lost is None and row.lost_at is None
    assert row.to_json()["lost"] is None


def test_lint_says_where_the_step_is_lost_once_a_by_design_loop_passes_it(tmp_path):
    # The change makes the EAGLE-style loop pass the step to forward but not to the head:
    # its by-design report goes, and the linted side's step is "lost at <the new finding>",
    # not "layer 0 at every step" (the forward selects layer i).
    from scan_helpers import scan_tree

    from auditor.model.findings import LAYER_0
    from auditor.services.history.compare import gone
    from auditor.services.lint_changes import classify, meanings_of
    from rules import all_rules

    base = scan_tree(_tree(tmp_path / "base", "self.model.compute_logits(x, spec_step_idx=step)")).result
    root = _tree(tmp_path / "head", "self.model.compute_logits(x, spec_step_idx=step)")
    speculators = root / "vllm/spec_decode/speculators.py"
    eagle = "class EagleStyleSpeculator(MultiModuleSpeculator):\n    def propose(self, x):\n" \
            "        for step in range(self.num_speculative_steps):\n            x = self.model(x)\n"
    text = speculators.read_text()
    assert eagle in text
    speculators.write_text(text.replace(eagle, eagle.replace("self.model(x)\n", "self.model(x, spec_step_idx=step)\n"
                                                             "            x = self.model.compute_logits(x)\n")))
    head = scan_tree(root).result
    introduced = [f for f in head.findings if f.fingerprint not in {g.fingerprint for g in base.findings}]
    got = classify(base, head, introduced, "base", meanings_of(all_rules()), removed=gone(base.findings, head.findings))
    steps = {(s.model_class.name, s.before, s.after) for c in got.behaviour_changes for s in c.steps}
    (row,) = [lp for r in head.reachability if r.model_class.name == "DeepMTP" for lp in r.loops
              if "EagleStyleSpeculator.propose" in lp.loop]
    assert row.verdict is ReachVerdict.LOST and row.lost_at is not None
    assert ("DeepMTP", LAYER_0, row.lost_at) in steps, steps


def test_a_loop_whose_only_selection_is_a_heads_is_unknown_in_both(tmp_path):
    # forward runs layer 0 by a literal index; only compute_logits selects by the step: no
    # selection through forward is no answer for the plan, nor a ✓ for the row.
    root = _tree(tmp_path, "self.model.compute_logits(x, spec_step_idx=step)")
    model = root / "vllm/models/deep_mtp.py"
    text = model.read_text()
    literal = text.replace("return self.layers[spec_step_idx % self.num_mtp_layers](x)\n\n", "return self.layers[0](x)\n\n", 1)
    assert literal != text
    model.write_text(literal)
    scan, (plan,) = planned_scan(root, [_SETTING])
    assert {s.verdict for s in plan.steps} == {"unknown"}
    row = _multi_row(scan)
    assert row.verdict is ReachVerdict.UNKNOWN and not row.steps_reach_layers
    assert "only in compute_logits" in row.detail
