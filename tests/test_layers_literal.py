"""A module container built from a literal (``nn.ModuleDict({"a": X(), "b": Y()})``,
``nn.ModuleList([a, b])``): as many layers as entries, and a read of it at a constant key
(``self.layers["b"]``, ``self.layers[-1]``) a fixed selection of that entry, whatever the step
(Inkling's predictor in 0.26.0: ``nn.ModuleDict({"0": ...})`` read as ``self.layers["0"]``).
A key the literal lacks, keys not all literal, or a container changed after it is built stay
unknown. Small trees written here (tests/trees.py's gate tree, its DeepMTP replaced)."""

from __future__ import annotations

import ast

from scan_helpers import write_tree
from test_layers import planned_scan
from trees import gate_tree

from auditor.analyses.dispatch import Setting
from auditor.facts.extract import extract
from auditor.facts.statements import literal_entries

CONSTANT = "constant — eagle-style by design"

_MODEL = '''
import torch.nn as nn


class DeepMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        if config.hidden_size < 0:
            raise ValueError("no")
        self.layers = {build}
{more}
    def forward(self, x, spec_step_idx: int = 0):
        if spec_step_idx > 8:  # reads the step (so the model is not one that only hands it on)
            raise ValueError("step")
        return self.layers[{key}](x)
'''

_DICT = 'nn.ModuleDict({"a": nn.Linear(4, 4), "b": nn.Linear(4, 4)})'
_LIST = "nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)])"


def _plans(tmp_path, build: str, key: str, more: str = "", ks=(3,)):
    files = gate_tree()
    files["vllm/models/deep_mtp.py"] = _MODEL.format(build=build, key=key, more=more)
    root = write_tree(tmp_path / "t", files)
    # num_nextn_predict_layers 5: the config's count is not what the literal builds.
    settings = [Setting("v2", k, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 5),)) for k in ks]
    scan, plans = planned_scan(root, settings)
    rows = {r.model_class.name: r for r in scan.result.reachability}
    return plans, rows["DeepMTP"]


def test_the_extractor_records_a_literal_collections_entries_and_a_dicts_keys():
    def at(src: str):
        return literal_entries(ast.parse(src, mode="eval").body)

    assert at('nn.ModuleDict({"0": A(), "1": B(), "0": C()})') == (2, ("0", "1"))
    assert at("nn.ModuleList([A(), B()])") == (2, None)
    assert at("nn.ModuleList((A(),))") == (1, None)
    assert at("nn.ModuleList([A(), *more])") == (None, None)
    assert at('nn.ModuleDict({"0": A(), name: B()})') == (None, None)
    assert at('nn.ModuleDict({0: A()})') == (None, None)
    assert at('nn.ModuleDict({"0": A(), **more})') == (None, None)
    assert at("nn.ModuleList([A() for _ in range(n)])") == (None, None)
    facts = extract("class M:\n    def __init__(self):\n        self.layers = nn.ModuleDict({'x': A()})\n"
                    "        self.layers += [B()]\n", "m.py", "m", False)
    init = facts.classes["M"].methods["__init__"]
    assert [(a.entries, a.keys) for a in init.attr_assigns] == [(1, ("x",))]
    assert init.aug_attrs == (("self", "layers"),)


def test_a_constant_key_of_a_literal_dict_is_that_entry_at_every_step(tmp_path):
    plans, row = _plans(tmp_path, _DICT, '"b"')
    plan = plans[0]
    assert plan.proposer is not None and plan.proposer[1] == "MultiModuleSpeculator"  # it passes a varying step
    assert (plan.num_mtp_layers, plan.layer_field) == (2, None)
    assert any("builds 2 MTP layer(s) whatever the config says (self.layers built from a literal of 2 entries" in n
               for n in plan.notes), plan.notes
    assert [(s.forward_layer, s.head_layer, s.verdict) for s in plan.steps] == [(1, None, CONSTANT)] * 3
    assert 'selects self.layers["b"] at a constant key, entry 1' in plan.steps[0].why
    assert plan.steps[0].lost is None  # no step is lost: the model selects no layer by the step
    assert row.loops and all(lp.verdict is not None and lp.verdict.value == "constant" and not lp.steps_reach_layers
                             for lp in row.loops), row.loops
    assert all("at a constant key" in lp.detail and "layer 1" in lp.detail for lp in row.loops)


def test_an_int_index_of_a_literal_list_is_that_entry(tmp_path):
    for key, layer in (("1", 1), ("2", 2)):
        plans, _ = _plans(tmp_path / key, _LIST, key, ks=(2,))
        assert plans[0].num_mtp_layers == 3
        assert [(s.forward_layer, s.verdict) for s in plans[0].steps] == [(layer, CONSTANT)] * 2, key


def test_a_step_selection_of_a_literal_list_counts_its_entries(tmp_path):
    plans, _ = _plans(tmp_path, "nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])", "spec_step_idx")
    plan = plans[0]
    assert plan.num_mtp_layers == 2  # the literal's entries, not the config's 5
    assert [(s.forward_layer, s.verdict) for s in plan.steps] == [(0, "threaded"), (1, "threaded"), (0, "threaded")]


def _unknown(plan, row) -> None:
    assert plan.num_mtp_layers is None
    assert {s.verdict for s in plan.steps} == {"unknown"}, plan.steps
    assert all(s.forward_layer is None for s in plan.steps)
    assert "no layer selection on the path" in plan.steps[0].why
    assert row.loops and all(lp.verdict is not None and lp.verdict.value == "unknown" for lp in row.loops)


def test_a_constant_key_the_literal_lacks_stays_unknown(tmp_path):
    plans, row = _plans(tmp_path, _DICT, '"c"')
    _unknown(plans[0], row)


def test_a_list_index_past_its_entries_or_of_another_type_stays_unknown(tmp_path):
    # ``-1`` too: the extractor records no literal value for a negated constant.
    for key in ("3", "-1", '"0"', "True", "0.0"):
        plans, row = _plans(tmp_path / str(abs(hash(key))), _LIST, key, ks=(2,))
        _unknown(plans[0], row)


def test_keys_not_all_literal_stay_unknown(tmp_path):
    build = 'nn.ModuleDict({"a": nn.Linear(4, 4), config.name: nn.Linear(4, 4)})'
    plans, row = _plans(tmp_path, build, '"a"')
    _unknown(plans[0], row)


def test_a_literal_container_changed_after_it_is_built_stays_unknown(tmp_path):
    changes = {
        "store": '        self.layers["c"] = nn.Linear(4, 4)\n',
        "update": '        self.layers.update({"c": nn.Linear(4, 4)})\n',
        "alias": '        layers = self.layers\n        layers.pop("b")\n',
        "helper": '        fill(self.layers)\n',
        "setattr": '        setattr(self.layers, "c", nn.Linear(4, 4))\n',
        "elsewhere": '\n    def grow(self):\n        del self.layers["a"]\n',
        "twice": '        self.layers = nn.ModuleDict({"a": nn.Linear(4, 4)})\n',
    }
    for name, more in changes.items():
        plans, row = _plans(tmp_path / name, _DICT, '"a"', more=more)
        _unknown(plans[0], row)
    plans, row = _plans(tmp_path / "aug", _LIST, "0", more="        self.layers += [nn.Linear(4, 4)]\n")
    _unknown(plans[0], row)
    # Reading it (len, iterating, calling an entry) changes nothing.
    plans, _ = _plans(tmp_path / "reads", _DICT, '"a"', more="        self.n = len(self.layers)\n")
    assert [(s.forward_layer, s.verdict) for s in plans[0].steps] == [(0, CONSTANT)] * 3


def test_a_head_method_reading_a_literal_container_at_a_constant_key_names_that_head(tmp_path):
    files = gate_tree()
    model = _MODEL.format(build=_LIST, key="spec_step_idx % 3", more=(
        '        self.heads = nn.ModuleDict({"main": nn.Linear(4, 4), "alt": nn.Linear(4, 4)})\n'))
    model += """
    def compute_logits(self, x, spec_step_idx: int = 0):
        if spec_step_idx > 8:
            raise ValueError("step")
        return self.heads["alt"](x)
"""
    files["vllm/models/deep_mtp.py"] = model
    files["vllm/spec_decode/speculators.py"] = files["vllm/spec_decode/speculators.py"].replace(
        "            x = self.model(x, spec_step_idx=step)\n",
        "            x = self.model(x, spec_step_idx=step)\n            x = self.model.compute_logits(x, spec_step_idx=step)\n")
    root = write_tree(tmp_path / "t", files)
    setting = Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 5),))
    plan = planned_scan(root, [setting])[1][0]
    assert plan.proposer is not None and plan.proposer[1] == "MultiModuleSpeculator"
    # The forward selects by the step (its literal list: 3 layers); the head is entry 1 of the
    # heads at every step, whatever the step: like a shared head, no step is lost there.
    assert plan.num_mtp_layers == 3
    assert [(s.forward_layer, s.head_layer, s.verdict) for s in plan.steps] == [
        (0, 1, "threaded"), (1, 1, "threaded"), (2, 1, "threaded")], plan.steps
    assert all(s.lost is None for s in plan.steps)


def test_an_assert_on_the_step_beside_a_fixed_selection_fails_at_the_step_the_loop_hands(tmp_path):
    # The selection is fixed; the step still arrives per step (the per-step drafter passes it).
    plans, _ = _plans(tmp_path, _DICT, '"a"', ks=(3,))
    assert plans[0].outcome == "plan"
    files = gate_tree()
    files["vllm/models/deep_mtp.py"] = _MODEL.format(build=_DICT, key='"a"', more="").replace(
        "        return self.layers[", "        assert spec_step_idx < 1\n        return self.layers[")
    root = write_tree(tmp_path / "t2", files)
    setting = Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 5),))
    plan = planned_scan(root, [setting])[1][0]
    assert plan.outcome == "raises" and plan.raises_at_step == 1, plan.steps
    assert [s.forward_layer for s in plan.steps[:1]] == [0]
