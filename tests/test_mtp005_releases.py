"""MTP005 on real releases (issue 18): a call that passes the step is bound against every
class a route can load there, step-aware or not, and the seed PR's change (the step added
to the eagle-style proposer's model call) is flagged against the EAGLE heads it would crash.

What vLLM does, read from its source (0.33.0):

* ``init_speculator`` builds ``MultiModuleMTPSpeculator`` when
  ``speculative_config.use_multi_module_mtp()`` (``method == "mtp"`` and
  ``min(num_nextn_predict_layers, K) > 1``); its ``compute_draft_logits`` calls
  ``self.model.compute_logits(hidden_states, spec_step_idx=spec_step_idx)``.
* ``hf_config_override`` maps ``model_type == "nemotron_h_mtp"`` to ``NemotronHMTPModel``
  (``n_predict = num_nextn_predict_layers``), registered as ``nemotron_h_mtp.NemotronHMTP``,
  whose ``compute_logits(self, hidden_states)`` has no step parameter and no ``**kwargs``:
  TypeError on that route. NemotronHMTP's ``forward`` takes ``**kwargs`` and never reads
  the step, so no rule considered the class before.
* ``EagleProposer`` (V1, built when ``use_eagle()``, i.e. for ``eagle``/``eagle3`` as for
  ``mtp``) runs ``SpecDecodeBaseProposer.propose``, whose draft loop builds
  ``model_kwargs = {...}`` and calls ``self.model(**model_kwargs)``;
  ``EagleLlamaForCausalLM.forward(self, input_ids, positions, hidden_states,
  inputs_embeds=None)`` cannot take ``spec_step_idx``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from release_cache import release_cache_dir, release_root
from scan_helpers import by_rule, scan_release, git

from auditor.common.config import Config
from auditor.engine.scan import run_scan
from auditor.facts.cache import FactsCache
from auditor.model.findings import Meaning
from auditor.source.trees import DirectoryTree
from rules import all_rules

pytestmark = pytest.mark.release

BASE_PROPOSER = "vllm/v1/spec_decode/llm_base_proposer.py"


def test_a_head_that_cannot_take_the_step_on_the_multi_module_route():
    scan = scan_release("0.33.0")
    hits = [f for f in by_rule(scan, "MTP005") if f.function == "MultiModuleMTPSpeculator.compute_draft_logits"]
    assert len(hits) == 1
    f = hits[0]
    # Only NemotronHMTP: ParseAuxMTPModel's override fixes one layer, so the multi-module
    # gate (min(n_predict, K) > 1) never opens for it.
    assert {(c.path, c.name) for c in f.affected_classes} == {("vllm/model_executor/models/nemotron_h_mtp.py", "NemotronHMTP")}
    assert "NemotronHMTP.compute_logits" in f.message and "no spec_step_idx and no **kwargs" in f.message
    assert "reached only when speculative_config.use_multi_module_mtp() is True (V2 builds MultiModuleMTPSpeculator)" \
        in f.message
    # Every class listed is one the route can load: none takes the step there.
    assert all(c.name not in ("DeepSeekMTP", "Qwen3_5MTP") for c in f.affected_classes)
    # The id is the call's, not the classes': the same key as the finding at the next call site.
    assert f.fingerprint_key == "spec_step_idx|self.model.compute_logits"


def test_no_eagle_head_is_reported_where_vllm_passes_no_step():
    """vLLM's own eagle-style loops pass no step, so the EAGLE heads they load are never a
    TypeError: no MTP005 lists one (the routes that load them are eagle-method routes)."""
    scan = scan_release("0.33.0")
    listed = {c.name for f in by_rule(scan, "MTP005") for c in f.affected_classes}
    assert not {n for n in listed if n.startswith("Eagle")}


def _copy_release(version: str, dest: Path) -> Path:
    src = release_root(version)
    shutil.copytree(src / "vllm", dest / "vllm", ignore=lambda d, names: [
        n for n in names if not n.endswith(".py") and not (Path(d) / n).is_dir()])
    return dest


def _apply_seed_change(root: Path) -> Path:
    """The seed PR's change to the eagle proposer's draft loop, on 0.33.0's base proposer:
    the step joins the draft model's keyword arguments."""
    path = root / BASE_PROPOSER
    text = path.read_text()
    anchor = '                "inputs_embeds": inputs_embeds,\n            }\n            if self.pass_hidden_states_to_model:'
    assert text.count(anchor) == 1
    path.write_text(text.replace(anchor, anchor.replace(
        '"inputs_embeds": inputs_embeds,\n', '"inputs_embeds": inputs_embeds,\n                "spec_step_idx": token_index + 1,\n', 1)))
    return path


def test_the_seed_change_on_the_eagle_proposer_is_flagged(tmp_path):
    """The seed PR's change, replayed on 0.33.0: the step added to the base proposer's
    ``model_kwargs``. Its EAGLE-method routes load EAGLE heads whose forward cannot take it."""
    root = _copy_release("0.33.0", tmp_path)
    path = _apply_seed_change(root)
    scan = run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(release_cache_dir()), 2)
    # The draft loop's model call (the first pass's call, before the loop, is reported too:
    # the keys of a dict named ``model_kwargs`` are gathered over the whole function).
    loop_call = next(i for i, line in enumerate(path.read_text().splitlines(), 1)
                     if "ret_hidden_states = self.model(**model_kwargs)" in line and i > 700)
    hits = [f for f in by_rule(scan, "MTP005") if f.path == BASE_PROPOSER and f.line == loop_call]
    assert len(hits) == 1, [(f.line, f.message) for f in by_rule(scan, "MTP005")]
    f = hits[0]
    assert f.function == "SpecDecodeBaseProposer.propose"
    names = {c.name for c in f.affected_classes}
    assert "EagleLlamaForCausalLM" in names
    assert "EagleLlamaForCausalLM.forward" in f.callee
    assert "(speculative method eagle, eagle3)" in f.message
    # MTP classes take the step (it is their parameter): they are not listed.
    assert not names & {"DeepSeekMTP", "Glm4MoeMTP", "Qwen3_5MTP"}
    # Without the change there is no such finding (it is the change that introduces it).
    assert not [g for g in by_rule(scan_release("0.33.0"), "MTP005") if g.function == "SpecDecodeBaseProposer.propose"]




def test_lint_on_the_seed_change_reports_the_new_mtp005(tmp_path):
    """What the seed PR's reviewer said, from ``mtp-audit lint`` on the change: passing the
    step where an EAGLE head can be the draft model raises TypeError."""
    repo = _copy_release("0.33.0", tmp_path / "repo")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "vLLM 0.33.0")
    _apply_seed_change(repo)
    git(repo, "commit", "-qam", "forward spec_step_idx in the eagle proposer")
    env = dict(os.environ, MTP_AUDIT_CACHE_DIR=str(release_cache_dir()))
    r = subprocess.run([sys.executable, "-m", "auditor.cli", "lint", ".", "--base", "HEAD~1", "-f", "json", "-q"],
                       cwd=repo, capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 1, r.stderr
    new = [f for f in json.loads(r.stdout)["findings"] if f["rule"] == "MTP005"]
    assert new and all(f["path"] == BASE_PROPOSER for f in new), new
    assert all("EagleLlamaForCausalLM" in {c["name"] for c in f["affected_classes"]} for f in new)


@pytest.mark.parametrize("version", ["0.22.1", "0.30.0", "0.33.0"])
def test_no_positional_step_binds_into_another_parameter(version):
    """Read from vLLM's source: every call on these releases that passes the step by
    position puts it in the callee's ``spec_step_idx`` slot — the MTP wrappers'
    ``self.model(input_ids, positions, hidden_states, inputs_embeds, spec_step_idx)``
    against their predictors' ``forward(input_ids, positions, previous_hidden_states,
    inputs_embeds=None, spec_step_idx=0)``, ExaoneMoe/Gemma4's six-argument call past
    ``intermediate_tensors``, ERNIE/MiMo's ``compute_logits(hidden_states, self.lm_head,
    spec_step_idx)`` and Bailing's ``compute_logits(hidden_states, spec_step_idx,
    self.lm_head)`` against signatures in those orders. So no MTP005 says the step lands
    elsewhere, and every MTP005 there is a TypeError."""
    found = by_rule(scan_release(version), "MTP005")
    assert not [f for f in found if f.meaning is Meaning.STEP_LOST], [(f.path, f.line, f.message) for f in found]
    assert all(f.meaning is Meaning.CANNOT_TAKE and "TypeError at run time" in f.message for f in found)


BAILING = "vllm/model_executor/models/bailing_moe_mtp.py"


def test_a_step_argument_swapped_with_its_neighbour_is_found(tmp_path):
    """0.33.0's Bailing head with its last two arguments swapped —
    ``compute_logits(hidden_states, self.lm_head, spec_step_idx)`` against
    ``compute_logits(self, hidden_states, spec_step_idx=0, lm_head=None)``: the call binds,
    the step goes into ``lm_head``. One new MTP005 at that call; every other finding keeps
    its id."""
    root = _copy_release("0.33.0", tmp_path)
    path = root / BAILING
    right = "return self.model.compute_logits(hidden_states, spec_step_idx, self.lm_head)"
    text = path.read_text()
    assert text.count(right) == 1
    path.write_text(text.replace(right, "return self.model.compute_logits(hidden_states, self.lm_head, spec_step_idx)"))
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "self.lm_head, spec_step_idx)" in t)
    scan = run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(release_cache_dir()), 2)
    base = scan_release("0.33.0")
    new = [f for f in scan.result.findings if f.fingerprint not in {g.fingerprint for g in base.result.findings}]
    assert [(f.rule, f.path, f.line) for f in new] == [("MTP005", BAILING, line)]
    f = new[0]
    assert f.meaning is Meaning.STEP_LOST
    assert "passes spec_step_idx by position into another parameter of " \
           "BailingMoeV25MultiTokenPredictor.compute_logits (lm_head)" in f.message
    assert "the call binds (no TypeError)" in f.message
    assert {g.fingerprint for g in base.result.findings} <= {g.fingerprint for g in scan.result.findings}


def test_a_draft_that_declares_another_methods_speculator_takes_no_route_of_that_method():
    """vLLM 0.34.0 (``speculator_config.py``, ``_resolve_checkpoint_config_class``): a method
    the user asks for that differs from the ``base_method`` of the speculator config the draft
    model class declares (``speculator_config_class``) is a ValueError ("speculative_config
    requested method=..., but the draft model ... is a ... checkpoint"). The DSpark drafts an
    override writes for ``mtp`` (``Qwen3DSparkModel`` declares ``DSparkSpeculatorConfig``,
    ``base_method = "dspark"``) and the DFlash drafts (``dflash``) loaded as EAGLE heads take no
    route then; a plain EAGLE head (no declared speculator) and an MTP model that declares an
    MTP config of its own (Gemma 4: ``Gemma4MTPSpeculatorConfig``, ``base_method`` inherited
    ``"mtp"``) keep theirs."""
    from auditor.analyses.dispatch import DispatchProvider

    scan = scan_release("0.34.0")
    dispatch = scan.analysis.get(DispatchProvider)
    loads = dispatch.load_routes
    by_method: dict[str, set[str]] = {}
    for rt in loads.load_routes():
        for method in loads.methods(rt):
            by_method.setdefault(method, set()).add(rt.architecture)
    assert not {"Qwen3DSparkModel", "DSparkMiniMaxDraftModel"} & by_method["mtp"]
    assert "Gemma4MTPModel" in by_method["mtp"] and "DeepSeekMTPModel" in by_method["mtp"]
    assert not {a for a in by_method["eagle"] | by_method["eagle3"] if a.startswith("DFlash")}
    assert "EagleLlamaForCausalLM" in by_method["eagle"]
    mtp005 = [c.name for f in by_rule(scan, "MTP005") for c in f.affected_classes]
    assert not [name for name in mtp005 if "DSpark" in name or name.startswith("DFlash")], mtp005
