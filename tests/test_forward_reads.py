"""A per-step read of an attribute the per-layer module's sub-module lacks (issue 18,
:mod:`auditor.analyses.dispatch.forward_reads`), on small trees written here (:mod:`trees`
shape): the draft model's layers are ``PanLayer``s, which inherit ``BaseLayer.forward``;
it reads ``self.block.use_gather``, but ``PanLayer.__init__`` (which does not run the base's)
builds an ``OtherBlock``, which never sets it: ``nn.Module.__getattr__`` raises
``AttributeError`` at step 0. Every variant that leaves something unknown keeps the plan."""

from __future__ import annotations

from scan_helpers import write_tree
from test_layers import planned_scan
from trees import gate_tree

from auditor.analyses.dispatch import Setting

_MODEL = '''
import torch.nn as nn

{extra}

class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.use_gather = False

    def forward(self, x):
        return x


class OtherBlock({other_bases}):
    def __init__(self):
        super().__init__()
{other_init}
    def forward(self, x):
        return x


class BaseLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.block = Block(config)

    def forward(self, x, flag=None):
        x = self.block(x)
{read}
        return x


class PanLayer(BaseLayer):
    def __init__(self, config):
        {pan_init}
        self.block = {block}


class DeepMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_mtp_layers = config.num_nextn_predict_layers
        self.layers = nn.ModuleList([PanLayer(config) for _ in range(self.num_mtp_layers)])

    def forward(self, x, spec_step_idx: int = 0):
        return self.layers[spec_step_idx % self.num_mtp_layers](x)
'''

_READ = "        if self.block.use_gather:\n            x = x + 1"


def _files(read: str = _READ, block: str = "OtherBlock()", pan_init: str = "nn.Module.__init__(self)",
           other_bases: str = "nn.Module", other_init: str = "", extra: str = "") -> dict[str, str]:
    files = gate_tree()
    files["vllm/models/deep_mtp.py"] = _MODEL.format(read=read, block=block, pan_init=pan_init,
                                                      other_bases=other_bases, other_init=other_init, extra=extra)
    return files


def _plan(tmp_path, name: str, **variant: str):
    setting = Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3),))
    return planned_scan(write_tree(tmp_path / name, _files(**variant)), [setting])[1][0]


def test_an_inherited_forward_reading_what_the_built_sub_module_lacks_raises_at_step_0(tmp_path):
    plan = _plan(tmp_path, "raises")
    assert plan.outcome == "raises" and plan.step_raise is not None, plan.steps
    r = plan.step_raise
    assert (r.step, r.path, r.function) == (0, "vllm/models/deep_mtp.py", "BaseLayer.forward")
    assert r.line == _MODEL.split("\n").index("{read}") + 1  # the line of the read, in the file as written
    assert r.message == "AttributeError(\"'OtherBlock' object has no attribute 'use_gather'\")"
    assert [s.verdict for s in plan.steps] == ["raises at step 0"] * 3
    # The same read on the class the base builds: it has the attribute, the steps run.
    ok = _plan(tmp_path, "base block", block="Block(config)")
    assert ok.outcome == "plan" and [s.forward_layer for s in ok.steps] == [0, 1, 2], ok.steps


def test_a_read_that_may_not_fail_keeps_the_plan(tmp_path):
    variants = {
        # OtherBlock has it from a base of the tree.
        "set by a base": {"other_bases": "HasGather", "extra": (
            "class HasGather(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.use_gather = True\n")},
        # OtherBlock sets attributes by name: it may set this one.
        "setattr": {"other_init": "        for k, v in {}.items():\n            setattr(self, k, v)\n"},
        # A base outside the tree may define it.
        "a base outside the tree": {"other_bases": "nn.Module, Mixin"},
        # The sub-module comes from a function: its class is unknown.
        "unknown class": {"block": "make_block()", "extra": "def make_block():\n    return OtherBlock()\n"},
        # The base's __init__ runs too (super): self.block is a Block or an OtherBlock, by order only.
        "the base's __init__ runs": {"pan_init": "super().__init__(config)"},
    }
    for label, variant in variants.items():
        plan = _plan(tmp_path, label.replace(" ", "_").replace("'", ""), **variant)
        assert plan.outcome == "plan", (label, plan.steps)
        assert [s.forward_layer for s in plan.steps] == [0, 1, 2], label
        assert not any("use_gather" in n for n in plan.notes), (label, plan.notes)


def test_a_read_under_a_test_the_evaluator_cannot_decide_is_a_note(tmp_path):
    read = "        if flag is not None:\n            if self.block.use_gather:\n                x = x + 1"
    plan = _plan(tmp_path, "undecided", read=read)
    assert plan.outcome == "plan" and [s.forward_layer for s in plan.steps] == [0, 1, 2], plan.steps
    assert any("self.block.use_gather" in n and "OtherBlock lacks" in n and "cannot decide" in n
               for n in plan.notes), plan.notes
    # Inside a try body (its handler may catch it) or a with body: a note too, never a raise.
    for label, wrapped in {"try": "        try:\n            y = self.block.use_gather\n        except AttributeError:\n"
                                  "            y = False",
                           "with": "        with ctx():\n            y = self.block.use_gather"}.items():
        plan = _plan(tmp_path, label, read=wrapped)
        assert plan.outcome == "plan", (label, plan.steps)
        assert any("self.block.use_gather" in n for n in plan.notes), (label, plan.notes)


def _rows(root) -> list[dict]:
    """The reachability rows (``scan --format json``) of a plain scan of ``root`` (no plan
    asked in its loading phase), DeepMTP's loops."""
    from auditor.common.config import Config
    from auditor.engine.scan import run_scan
    from auditor.facts.cache import FactsCache
    from auditor.source.trees import DirectoryTree
    from rules import all_rules

    scan = run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(None), 1)
    return [lp for r in scan.result.to_json()["reachability"] if r["class"]["name"] == "DeepMTP" for lp in r["loops"]]


def test_the_reachability_rows_say_the_plans_raise(tmp_path):
    # The sub-module's class in a file of its own, which only the read's resolution loads:
    # a plain scan's rows must say what the plan says (the loading phase parses it).
    def split(files: dict[str, str]) -> dict[str, str]:
        model = files["vllm/models/deep_mtp.py"]
        start, end = model.index("class OtherBlock("), model.index("class BaseLayer(")
        files["vllm/models/other_block.py"] = "import torch.nn as nn\n\n\n" + model[start:end]
        files["vllm/models/deep_mtp.py"] = "from vllm.models.other_block import OtherBlock\n" + model[:start] + model[end:]
        return files

    root = write_tree(tmp_path / "rows", split(_files()))
    setting = Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3),))
    plan = planned_scan(root, [setting])[1][0]
    assert plan.outcome == "raises" and plan.step_raise is not None, plan.steps
    rows = _rows(root)
    assert rows and all(lp["verdict"] == "raises" for lp in rows), rows
    want = {"step": 0, "path": plan.step_raise.path, "line": plan.step_raise.line,
            "function": plan.step_raise.function, "message": plan.step_raise.message}
    assert all(lp["raise"] == want for lp in rows), rows
    # The base's block: no raise, in the plan or the rows.
    ok = write_tree(tmp_path / "rows ok", split(_files(block="Block(config)")))
    ok_rows = _rows(ok)
    assert ok_rows and all(lp["raise"] is None and lp["verdict"] != "raises" for lp in ok_rows), ok_rows
