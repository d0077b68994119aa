"""A forward that runs every layer of its container at every step (``for layer in
self.layers`` in a model that only hands the step on: Gemma4MTP's shape), on small trees
written here: the plan's per-step ``forward_layers`` and its outputs, the reachability row's
``forward_stack``, ``history --layers``' cell, the forced view and ``runtime check --plan``;
and a draft config given for a draft checkpoint of its own (the speculative config names a
``model``), run through the override code as vLLM loads it."""

from __future__ import annotations

import json

from scan_helpers import write_tree
from test_layers import planned_scan
from test_layers_step_inert import _READS_NOTHING, _plan
from test_layers_stepless import CONSTANT, _files

from auditor.analyses.dispatch import DispatchProvider, Setting
from auditor.model.layer_history import PlanCell
from auditor.output.layer_history import cell_text
from auditor.output.layers import plan_json, render_matrix, render_text
from auditor.services.forced_plan import forced_plan
from auditor.services.history.layers import plan_cell
from runtime_check import plan_compare
from runtime_check.plan_compare import Agreement

_STACK = _READS_NOTHING.replace('''        for i in range(self.pattern_len):
            x = self.layers[str(i)](x)
''', '''        for layer in self.layers.values():
            x = layer(x)
''')


def test_a_step_that_runs_the_whole_stack_lists_every_layer_in_order(tmp_path):
    plans, row = _plan(tmp_path, predictor=_STACK)
    one, two = plans  # one layer built (K=3), two layers built (K=2)
    assert [(s.forward_layer, s.forward_layers, s.verdict) for s in one.steps] == [(0, (0,), CONSTANT)] * 3
    assert [(s.forward_layer, s.forward_layers, s.verdict) for s in two.steps] == [(None, (0, 1), CONSTANT)] * 2
    # JSON: forward_layer kept (null: no single layer), forward_layers added, in every view.
    doc = plan_json(two, "t")
    assert [(s["forward_layer"], s["forward_layers"]) for s in doc["steps"]] == [(None, [0, 1])] * 2
    assert doc["compiled"] is not None
    assert [s["forward_layers"] for s in doc["compiled"]["steps"]] == [[0, 1]] * 2
    assert [s["forward_layers"] for s in plan_json(one, "t")["steps"]] == [[0]] * 3
    # Text and the --all matrix write the stack as its layers joined.
    assert "  0     0+1      -     " in render_text([two], "t")
    assert "| 0+1,0+1 |" in render_matrix([two], "markdown", "t", 2, 2)
    # The reachability row names the stack the model iterates.
    assert row is not None and row.loops and all(lp.stack == "FlatPredictor.layers" for lp in row.loops)
    assert all(lp.to_json()["forward_stack"] == "FlatPredictor.layers" for lp in row.loops)


def test_history_cells_keep_the_stack_and_a_stack_reaches_no_layer_i(tmp_path):
    plans, _row = _plan(tmp_path, predictor=_STACK)
    cell = plan_cell(plans[1])
    assert cell.stacks == ((0, 1), (0, 1)) and cell.forward == (None, None)
    assert cell_text(cell) == "0+1,0+1 / -,-"
    assert not cell.forward_reaches(2)
    back = PlanCell.from_json(json.loads(json.dumps(cell.to_json())))
    assert back == cell and cell.to_json()["forward_stacks"] == [[0, 1], [0, 1]]
    # A cell cached before the field existed reads as no stack.
    old = {k: v for k, v in cell.to_json().items() if k != "forward_stacks"}
    assert PlanCell.from_json(old).step_stacks() == (None, None)


def test_the_forced_view_of_a_stack_is_the_shipped_one(tmp_path):
    files = _files(check="pass", kwargs="**kwargs")
    model = files["vllm/models/flat_mtp.py"]
    model = model.replace('''
    def forward(self, x, **kwargs):
        return self.model(x)
''', '''
    def forward(self, x, spec_step_idx=0):
        return self.model(x, spec_step_idx)
''').replace('''
    def forward(self, x):
        for i in range(self.pattern_len):
            x = self.layers[str(i)](x)
        return x
''', _STACK)
    files["vllm/models/flat_mtp.py"] = model
    root = write_tree(tmp_path / "t", files)
    setting = Setting("v2", 2, architecture="FlatMTPModel", fields=(("num_nextn_predict_layers", 2),))
    scan, (plan,) = planned_scan(root, [setting])
    assert scan.analysis is not None
    forced = forced_plan(scan.analysis.get(DispatchProvider), plan, scan.result.findings)
    assert forced is not None
    assert [(f.forward_layer, f.forward_layers, f.head_layer) for f in forced.steps] == [(None, (0, 1), None)] * 2
    assert [s["forward_layers"] for s in plan_json(plan, "t", forced)["forced"]["steps"]] == [[0, 1]] * 2


def _stack_plan(fwd: list[list[int] | None]) -> dict:
    return {"runner": "v2", "k": len(fwd), "num_mtp_layers": 2, "proposer": {"class": "P", "path": "p.py"},
            "model_class": {"class": "M", "path": "m.py"},
            "steps": [{"step": i, "forward_layer": None, "forward_layers": f, "head_layer": None}
                      for i, f in enumerate(fwd)]}


def _stack_run(layers: list[list[int]]) -> dict:
    return {"runner": "v2", "mode": "shipped", "k": len(layers), "num_mtp_layers": 2, "proposer": "vllm.x.P",
            "wrapper_class": "vllm.models.m.M",
            "steps": [{"propose": 0, "step": i, "layers": ran, "head_layers": []} for i, ran in enumerate(layers)]}


def test_runtime_check_compares_a_stack_step_with_every_layer_the_engine_ran():
    c = plan_compare.compare_run([_stack_plan([[0, 1], [0, 1]])], _stack_run([[0, 1], [0, 1]]))
    assert c.agreement is Agreement.AGREE, c
    assert [s.planned_forward_layers for s in c.steps] == [[0, 1], [0, 1]]
    assert "forward planned 0+1 ran 0,1: agree" in plan_compare.render_text(plan_compare.to_json([c]))
    c = plan_compare.compare_run([_stack_plan([[0, 1], [0, 1]])], _stack_run([[0, 1], [1]]))
    assert [s.forward for s in c.steps] == [Agreement.AGREE, Agreement.DISAGREE]
    # An unknown stack (null) agrees with nothing.
    c = plan_compare.compare_run([_stack_plan([None, None])], _stack_run([[0, 1], [0, 1]]))
    assert c.agreement is Agreement.DISAGREE


# A draft checkpoint of its own: its config.json names the assistant's model type, which the
# override rewrites to the MTP one; the multi-module gate reads the rewritten type.
_ASSISTANT = '''
        if hf_config.model_type == "flat_assistant":
            hf_config.model_type = "flat_mtp"
            hf_config.update({"architectures": ["FlatMTPModel"]})
'''


def _checkpoint_files() -> dict[str, str]:
    files = _files(check="pass", kwargs="**kwargs")
    spec = files["vllm/config/speculative.py"]
    spec = spec.replace('''        if hf_config.model_type == "flat" and''', _ASSISTANT.lstrip("\n") + '''        if hf_config.model_type == "flat" and''', 1)
    spec = spec.replace('''        if self.method != "mtp" or self.draft_model_config is None:
            return False''', '''        if self.method != "mtp" or self.draft_model_config is None:
            return False
        if self.draft_model_config.hf_config.model_type != "flat_mtp":
            return False''', 1)
    files["vllm/config/speculative.py"] = spec
    return files


def test_a_draft_checkpoints_own_config_is_run_through_the_override(tmp_path):
    root = write_tree(tmp_path / "t", _checkpoint_files())
    fields = (("model_type", "flat_assistant"), ("num_nextn_predict_layers", 2))
    own = Setting("v2", 2, architecture="FlatMTPModel", fields=fields, options=(("model", "assistant-ckpt"),))
    taken = Setting("v2", 2, architecture="FlatMTPModel", fields=fields)
    scan, (p_own, p_taken) = planned_scan(root, [own, taken])
    assert scan.analysis is not None
    runs = scan.analysis.get(DispatchProvider).factory_runs
    hf_own, decisions = runs.draft_config(own)[:2]
    hf_taken = runs.draft_config(taken).hf
    # Rewritten by the override as vLLM loads the checkpoint; taken as given without one.
    assert hf_own is not None and hf_own.fields["model_type"] == "flat_mtp"
    assert hf_taken is not None and hf_taken.fields["model_type"] == "flat_assistant"
    assert any('"flat_assistant"' in d.condition and d.value is True for d in decisions)
    # The gate reads the rewritten type: the checkpoint's draft gets the multi-module drafter.
    assert p_own.proposer is not None and p_own.proposer[1] == "MultiModuleSpeculator"
    assert p_taken.proposer is not None and p_taken.proposer[1] == "EagleStyleSpeculator"
    assert any('"flat_assistant"' in d.condition for d in p_own.decisions)


def test_an_object_value_of_a_checkpoints_config_is_a_sub_config(tmp_path):
    root = write_tree(tmp_path / "t", _checkpoint_files())
    fields = (("model_type", "flat_assistant"), ("text_config", {"num_nextn_predict_layers": 2}))
    own = Setting("v2", 2, architecture="FlatMTPModel", fields=fields, options=(("model", "assistant-ckpt"),))
    scan, (plan,) = planned_scan(root, [own])
    assert scan.analysis is not None
    hf = scan.analysis.get(DispatchProvider).factory_runs.draft_config(own).hf
    assert hf is not None and hf.fields["text_config"].fields == {"num_nextn_predict_layers": 2}
    assert plan.num_mtp_layers == 2 and plan.layer_field == "hf_config.text_config.num_nextn_predict_layers"
