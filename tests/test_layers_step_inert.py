"""A draft model that takes the step and only hands it on to methods that never read it
(issue 18: Gemma4MTP's shape: ``forward(..., spec_step_idx)`` calls ``self.model(...,
spec_step_idx)``, which runs every layer and never reads it): layer 0 at every step, in the
plan and in the reachability row; any other use of the step keeps the plan unknown. Small
trees written here (:mod:`test_layers_stepless`'s)."""

from __future__ import annotations

from scan_helpers import write_tree
from test_layers import planned_scan
from test_layers_stepless import CONSTANT, _files, _flat

_HANDS_ON = '''
    def forward(self, x, spec_step_idx=0):
        return self.model(x, {arg})
'''

_READS_NOTHING = '''
    def forward(self, x, spec_step_idx=0):
        for i in range(self.pattern_len):
            x = self.layers[str(i)](x)
        return x
'''


def _plan(tmp_path, arg: str = "spec_step_idx", predictor: str = _READS_NOTHING, preamble: str = ""):
    files = _files(check="pass", kwargs="**kwargs")
    model = files["vllm/models/flat_mtp.py"]
    model = model.replace('''
    def forward(self, x, **kwargs):
        return self.model(x)
''', _HANDS_ON.format(arg=arg))
    model = model.replace('''
    def forward(self, x):
        for i in range(self.pattern_len):
            x = self.layers[str(i)](x)
        return x
''', predictor)
    files["vllm/models/flat_mtp.py"] = preamble + model
    root = write_tree(tmp_path / "t", files)
    scan, plans = planned_scan(root, [_flat("v2", 3, 1), _flat("v2", 2, 2)])
    rows = {r.model_class.name: r for r in scan.result.reachability}
    return plans, rows.get("FlatMTP")


def test_a_step_handed_on_to_a_module_that_never_reads_it_runs_layer_0_every_step(tmp_path):
    plans, row = _plan(tmp_path)
    for plan in plans:
        assert plan.outcome == "plan"
        assert [(s.forward_layer, s.head_layer, s.verdict) for s in plan.steps] == [(0, None, CONSTANT)] * plan.setting.k
        assert "FlatMTP takes spec_step_idx and only hands it on" in plan.steps[0].why
    assert row is not None and row.loops
    assert all(lp.verdict.value != "unknown" and not lp.steps_reach_layers for lp in row.loops), row.loops
    assert all("only hands it on" in lp.detail for lp in row.loops)


def test_a_step_the_module_reads_otherwise_keeps_the_plan_unknown(tmp_path):
    # A ``while`` on the step is a use no other fact records: the step is not arg-only.
    reads = _READS_NOTHING.replace("        for i in range(self.pattern_len):\n",
                                   "        i = 0\n        while i < spec_step_idx:\n            i += 1\n"
                                   "        for i in range(self.pattern_len):\n")
    plans, row = _plan(tmp_path, predictor=reads)
    for plan in plans:
        assert {s.verdict for s in plan.steps} == {"unknown"}, plan.steps
    assert row is not None and all(lp.verdict.value == "unknown" for lp in row.loops)


def test_a_step_handed_to_code_the_analysis_cannot_resolve_keeps_the_plan_unknown(tmp_path):
    plans, row = _plan(tmp_path, arg="scale(spec_step_idx)", preamble="from elsewhere import scale\n")
    for plan in plans:
        assert {s.verdict for s in plan.steps} == {"unknown"}, plan.steps
    assert row is not None and all(lp.verdict.value == "unknown" for lp in row.loops)


def test_a_model_that_runs_its_whole_stack_names_no_single_layer_unless_it_builds_one(tmp_path):
    # Gemma4's shape: ``for layer in self.layers`` at every step, whatever the step.
    stack = _READS_NOTHING.replace('''        for i in range(self.pattern_len):
            x = self.layers[str(i)](x)
''', '''        for layer in self.layers.values():
            x = layer(x)
''')
    plans, row = _plan(tmp_path, predictor=stack)
    one, two = plans  # one layer built, two layers built
    assert [(s.forward_layer, s.verdict) for s in one.steps] == [(0, CONSTANT)] * 3
    assert [(s.forward_layer, s.verdict) for s in two.steps] == [(None, CONSTANT)] * 2
    assert "every layer of FlatPredictor.layers" in two.steps[0].why and "(2 layers)" in two.steps[0].why
    assert row is not None and all("every layer of FlatPredictor.layers" in lp.detail for lp in row.loops)
