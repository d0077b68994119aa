"""The autofix a rule declares: it threads the parameter the finding is about, and it
repairs every dropping call (two defects in one function are two findings)."""

from __future__ import annotations

from scan_helpers import by_rule, scan_tree, write_tree

from auditor.common.config import Config
from auditor.services.fix import apply_fixes
from rules import all_rules

SRC = '''
import torch.nn as nn


class Predictor(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(config.n)])

    def forward(self, hidden_states, draft_layer: int = 0):
        return self.layers[draft_layer](hidden_states)


class WrapperMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = Predictor(config)

    def forward(self, hidden_states, **kwargs):
        h = self.model(hidden_states)
        return self.model(h)
'''


def test_fix_threads_the_parameter_of_the_finding_and_both_calls(tmp_path):
    root = write_tree(tmp_path, {"vllm/models/m_mtp.py": SRC})
    config = Config(threaded_params=["spec_step_idx", "draft_layer"])
    scan = scan_tree(root, config)
    drops = by_rule(scan, "MTP001")
    assert [f.parameter for f in drops] == ["draft_layer", "draft_layer"]
    assert len({f.fingerprint for f in drops}) == 2
    report = apply_fixes(scan, root, all_rules())
    assert not report.refused and len(report.fixed) == 2
    new = (root / "vllm/models/m_mtp.py").read_text()
    assert "def forward(self, hidden_states, draft_layer: int = 0, **kwargs):" in new
    assert "self.model(hidden_states, draft_layer=draft_layer)" in new
    assert "self.model(h, draft_layer=draft_layer)" in new
    assert "spec_step_idx" not in new
    assert not by_rule(scan_tree(root, config), "MTP001")
