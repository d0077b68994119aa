"""Dispatch makes the scan precise (issue 11): a draft loop of a drafter that no MTP
dispatch builds is not reported against MTP classes, and one behind a gate says when it runs.
Trees written here, in the shapes of vLLM's factories."""

from __future__ import annotations

from scan_helpers import by_rule, scan_tree, write_tree

from trees import gate_tree as _tree

_DRAFT_ONLY = '''

class DraftOnlySpeculator:
    def __init__(self, vllm_config):
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens

    def load_model(self):
        self.model = get_model(self.vllm_config)

    def propose(self, x):
        for step in range(self.num_speculative_steps):
            x = self.model(x)
        return x
'''


def _files(with_factory: bool = True) -> dict[str, str]:
    files = _tree()
    files["vllm/spec_decode/speculators.py"] += _DRAFT_ONLY
    files["vllm/spec_decode/__init__.py"] = files["vllm/spec_decode/__init__.py"].replace(
        "    raise NotImplementedError",
        '    elif speculative_config.method == "draft_model":\n'
        "        from vllm.spec_decode.speculators import DraftOnlySpeculator\n\n"
        "        return DraftOnlySpeculator(vllm_config)\n"
        "    raise NotImplementedError",
    )
    if not with_factory:
        files["vllm/spec_decode/__init__.py"] = "\n"
    return files


def test_a_loop_no_mtp_dispatch_builds_is_not_reported_against_mtp_classes(tmp_path):
    scan = scan_tree(write_tree(tmp_path / "t", _files()))
    mtp002 = {f.function: f for f in by_rule(scan, "MTP002")}
    assert "DraftOnlySpeculator.propose" not in mtp002
    eagle = mtp002["EagleStyleSpeculator.propose"]
    assert "reached only when speculative_config.use_multi_module_mtp() is False (V2 builds EagleStyleSpeculator)" in eagle.message
    rows = {r.model_class.name: r for r in scan.result.reachability}
    labels = [lp.loop for lp in rows["DeepMTP"].loops]
    assert not any("DraftOnlySpeculator" in label for label in labels), labels
    multi = next(lp for lp in rows["DeepMTP"].loops if "MultiModuleSpeculator.propose" in lp.loop)
    assert multi.steps_reach_layers
    assert multi.detail.endswith("reached only when speculative_config.use_multi_module_mtp() is True (V2 builds MultiModuleSpeculator)")


def test_without_dispatch_code_every_loop_is_reported_as_before(tmp_path):
    scan = scan_tree(write_tree(tmp_path / "t", _files(with_factory=False)))
    mtp002 = {f.function: f for f in by_rule(scan, "MTP002")}
    assert "DraftOnlySpeculator.propose" in mtp002
    assert "reached only when" not in mtp002["EagleStyleSpeculator.propose"].message
