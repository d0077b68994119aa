"""MTP005 binds a step passed by position through each callee's signature (issue 18,
item 7): where it lands in another parameter, the finding at the call keeps one id
however many classes it lists (item 9), apart from the TypeError finding at the same call."""

from __future__ import annotations

from scan_helpers import by_rule, scan_tree, write_tree

from auditor.model.findings import Meaning
from rules.mtp005_step_rejected import _routes

SPECULATORS = "vllm/spec_decode/speculators.py"


def _with_second_head(files: dict[str, str]) -> dict[str, str]:
    """The same tree with one more registered EAGLE head, whose step parameter comes
    after another optional one."""
    out = dict(files)
    out["vllm/models/registry.py"] = files["vllm/models/registry.py"].replace(
        "}\n", '    "EagleQwenModel": ("qwen_eagle", "EagleQwenHead"),\n}\n')
    out["vllm/models/qwen_eagle.py"] = (
        "import torch.nn as nn\n\n\nclass EagleQwenHead(nn.Module):\n"
        "    def forward(self, x, h=None, spec_step_idx=0):\n        return x\n")
    return out


def _misbound(tmp_path, files: dict[str, str]) -> list:
    return [f for f in by_rule(scan_tree(write_tree(tmp_path, files)), "MTP005") if f.meaning is Meaning.STEP_LOST]


def test_the_id_does_not_move_when_another_class_binds_the_step_elsewhere(tmp_path):
    one = _routes(", step", head_params="self, x, h=None")
    before = _misbound(tmp_path / "one", one)
    after = _misbound(tmp_path / "two", _with_second_head(one))
    assert [f.path for f in before] == [SPECULATORS] and [f.path for f in after] == [SPECULATORS]
    assert {c.name for c in before[0].affected_classes} == {"EagleHead"}
    assert {c.name for c in after[0].affected_classes} == {"EagleHead", "EagleQwenHead"}
    assert "EagleQwenHead.forward (h; spec_step_idx keeps its default)" in after[0].message
    assert before[0].fingerprint == after[0].fingerprint


def test_a_typeerror_and_a_misbinding_at_one_call_are_two_findings(tmp_path):
    """One head has no room for the step (TypeError), another takes it in ``h``: two
    defects at the call, with distinct ids and meanings."""
    files = _with_second_head(_routes(", step"))
    found = by_rule(scan_tree(write_tree(tmp_path, files)), "MTP005")
    assert sorted((f.meaning.value if f.meaning else "", f.callee) for f in found) == [
        ("cannot-take", "EagleHead.forward"), ("step-lost", "EagleQwenHead.forward")]
    assert len({f.fingerprint for f in found}) == 2

