"""``layers --plugin``: a platform plugin's runner decides the drafter with a factory of
its own, and drives it through its own entry method (a small fixture tree written here;
the real vllm-ascend case is in tests/test_plugin_release.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scan_helpers import write_tree

from auditor.analyses.dispatch import Plan, Setting
from auditor.facts.cache import FactsCache
from auditor.common.config import Config
from auditor.services.layers import plan_tree
from auditor.source.trees import CombinedTree, DirectoryTree, Root, locate_plugin
from rules import all_rules
from trees import gate_tree as _tree

# vLLM's V1 runner: its own factory builds the EAGLE-style drafter (step 0 every step).
_RUNNER = '''
from vllm.spec_decode.speculators import EagleStyleSpeculator, MultiModuleSpeculator


class GPUModelRunner:
    def __init__(self, vllm_config, device):
        self.vllm_config = vllm_config
        self.speculative_config = vllm_config.speculative_config
        if self.speculative_config.method == "mtp":
            self.drafter = EagleStyleSpeculator(vllm_config)
        elif self.speculative_config.method == "multi":
            self.drafter = MultiModuleSpeculator(vllm_config)

    def propose_draft_token_ids(self, x):
        return self.drafter.propose(x)
'''

_PYPROJECT = '''
[project]
name = "vllm-myplug"
version = "0.1"

[project.entry-points."vllm.platform_plugins"]
myplug = "myplug:register"
'''

# The plugin's runner subclasses vLLM's and picks its drafter with a factory of its own;
# the drafter's draft loop runs through a bound method kept in an attribute.
_PLUGIN = {
    "myplug/__init__.py": "def register():\n    return 'myplug.platform.MyPlatform'\n",
    "myplug/worker/runner.py": '''
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
from myplug.spec_decode import get_method


class MyRunner(GPUModelRunner):
    def __init__(self, vllm_config, device):
        self.vllm_config = vllm_config
        self.speculative_config = vllm_config.speculative_config
        self.drafter = self._get_drafter()

    def _get_drafter(self):
        return get_method(self.speculative_config.method, self.vllm_config, self)

    def propose_draft_token_ids(self, x):
        return self.drafter._propose(x)
''',
    "myplug/spec_decode/__init__.py": '''
from myplug.spec_decode.proposers import PlugEagleProposer, PlugMTPProposer


def get_method(method, vllm_config, runner):
    if method == "eagle":
        return PlugEagleProposer(vllm_config)
    elif method in ("mtp", "other"):
        return PlugMTPProposer(vllm_config)
    raise ValueError(method)
''',
    "myplug/spec_decode/proposers.py": '''
from vllm.spec_decode.speculators import MultiModuleSpeculator


class PlugEagleProposer(MultiModuleSpeculator):
    def _propose(self, x):
        for step in range(self.num_speculative_steps):
            x = self.model(x)
        return x


class PlugMTPProposer(MultiModuleSpeculator):
    def __init__(self, vllm_config):
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens
        self._runnable = self._run_draft

    def _propose(self, x):
        run = self._runnable
        return run(x)

    def _run_draft(self, x):
        for step in range(self.num_speculative_steps):
            x = self.model(x, spec_step_idx=step)
        return x
''',
}

SETTING = Setting("v1", 3, "mtp", "cuda", "DeepMTPModel", (("num_nextn_predict_layers", 3),))


def _vllm(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "vllm-src", {**_tree(), "vllm/v1/worker/gpu_model_runner.py": _RUNNER})


def _plugin(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "myplug-src"
    for rel, text in {"pyproject.toml": _PYPROJECT, **files}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _plan(tree) -> Plan:
    (plan,) = plan_tree(tree, Config(), all_rules(), FactsCache(None), lambda _d: [SETTING], 1)
    return plan


def _combined(tmp_path: Path, files: dict[str, str]) -> CombinedTree:
    return CombinedTree([Root("vllm", DirectoryTree(_vllm(tmp_path)), False),
                         Root("vllm-myplug", locate_plugin(_plugin(tmp_path, files)), True)])


def test_vllm_alone_plans_its_own_factory(tmp_path):
    plan = _plan(DirectoryTree(_vllm(tmp_path)))
    assert plan.proposer == ("vllm/spec_decode/speculators.py", "EagleStyleSpeculator")
    assert [(s.forward_layer, s.verdict) for s in plan.steps] == [(0, "constant — eagle-style by design")] * 3


def test_plugin_runner_factory_and_entry_method_decide(tmp_path):
    plan = _plan(_combined(tmp_path, _PLUGIN))
    assert plan.proposer == ("myplug/spec_decode/proposers.py", "PlugMTPProposer")
    assert plan.proposer_site is not None and plan.proposer_site.function == "get_method"
    # ``method`` (the factory's parameter) is bound to the configured method: "mtp".
    assert [(d.condition, d.value) for d in plan.decisions] == [
        ('method == "eagle"', False), ('method in ("mtp", "other")', True)]
    assert plan.loop is not None and plan.loop.function == "PlugMTPProposer._run_draft"
    assert [(s.forward_layer, s.verdict) for s in plan.steps] == [(0, "threaded"), (1, "threaded"), (2, "threaded")]


def test_plugin_factory_without_a_runner_subclass_is_not_used(tmp_path):
    files = {k: v for k, v in _PLUGIN.items() if k != "myplug/worker/runner.py"}
    plan = _plan(_combined(tmp_path, files))
    assert plan.proposer == ("vllm/spec_decode/speculators.py", "EagleStyleSpeculator")


def test_layers_cli_takes_plugin(tmp_path):
    vllm, plug = _vllm(tmp_path), _plugin(tmp_path, _PLUGIN)
    env = {**os.environ, "MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-m", "auditor.cli", "layers", str(vllm), "--plugin", str(plug), "--runner", "v1",
                          "--arch", "DeepMTPModel", "--set", "num_nextn_predict_layers=3", "--k", "3"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "drafter:     PlugMTPProposer (myplug/spec_decode/proposers.py" in run.stdout
    assert "loop:        PlugMTPProposer._run_draft" in run.stdout
    bad = subprocess.run([sys.executable, "-m", "auditor.cli", "layers", str(vllm), "--plugin", str(tmp_path / "nope"),
                          "--arch", "DeepMTPModel", "--k", "3"], capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2 and bad.stderr.startswith("mtp-audit: error:")
