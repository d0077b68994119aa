"""Issue 12 (static half): the capture/compile analysis and MTP007, one small tree per
wrapper kind — an unkeyed graph wrapper, a keyed one, a wrapper installed by an
installer method per caller, a whole draft loop captured as one graph, and a compile
decorator."""

from __future__ import annotations

from pathlib import Path

import pytest
from scan_helpers import scan_tree, write_tree

from auditor.analyses import CaptureProvider, FreezeKind, KeyKind
from auditor.common.config import Config
from auditor.facts.extract import extract
from auditor.engine.scan import Scan
from auditor.model.findings import Finding, Severity
from rules._capture_examples import (
    CONTEXT,
    GRAPHS,
    KEYED,
    PROPOSER,
    UNKEYED,
    compile_tree,
    loop_capture_tree,
    model,
    wrapper_tree,
)
from rules._examples import LOADER


def _scan(tmp_path: Path, files: dict[str, str], config: Config | None = None) -> tuple[Scan, CaptureProvider]:
    scan = scan_tree(write_tree(tmp_path, dict(files)), config)
    assert scan.analysis is not None
    return scan, scan.analysis.get(CaptureProvider)


def _mtp007(scan: Scan) -> list[Finding]:
    return [f for f in scan.result.findings if f.rule == "MTP007"]


# -- facts ------------------------------------------------------------------


def test_facts_record_with_blocks_branches_and_decorator_arguments() -> None:
    src = (
        "@compile_me(dynamic_arg_dims={'x': 0, 'y': -1}, enable_if=on)\n"
        "class A:\n"
        "    def f(self):\n"
        "        if a() and b is not None:\n"
        "            with torch.cuda.graph(g):\n"
        "                self.run()\n"
        "        else:\n"
        "            g.replay()\n"
    )
    cls = extract(src, "a.py", "a", False).classes["A"]
    (dec,) = cls.decorator_facts
    assert dec.func == ("compile_me",) and dec.called
    assert dec.dict_keys == {"dynamic_arg_dims": ("x", "y")}
    fn = cls.methods["f"]
    (w,) = fn.withs
    assert w.items[0].called == ("torch", "cuda", "graph")
    assert [c.func for c in fn.calls[w.first_call:w.end_call]] == [("self", "run")]
    assert [b.text for b in fn.branches] == ["a() and b is not None", "not (a() and b is not None)"]
    replay = next(c for c in fn.calls if c.func == ("g", "replay"))
    assert replay.branches == (1,)


# -- graph wrappers ---------------------------------------------------------


def test_unkeyed_wrapper_freezes_the_step(tmp_path: Path) -> None:
    scan, cap = _scan(tmp_path, wrapper_tree(UNKEYED))
    (wrapper,) = cap.wrappers().values()
    assert wrapper.name == "GraphWrapper"
    assert wrapper.key_kind is KeyKind.KEY_FN and wrapper.key_fn_param == "key_fn"
    assert wrapper.capture.note.startswith("captures a graph: with torch.cuda.graph")
    (inst,) = cap.installations()
    assert (inst.site[1], inst.slot, inst.key_fn, inst.key_includes) == ("Runner.load_model", ("drafter", "model"), None, ())
    (f,) = _mtp007(scan)
    assert (f.path, f.line, f.function, f.callee) == ("vllm/runner.py", 19, "Runner.load_model", "GraphWrapper")
    assert f.severity is Severity.WARNING
    assert "keyed by the batch only (no key_fn is passed)" in f.message
    assert "Proposer.propose passes a per-step spec_step_idx through self.model" in f.message
    assert 'reached only when graphs_enabled() [= os.environ.get("USE_GRAPHS") == "1"]' in f.message
    # The trace leads from the installation through the capture to the layer selection.
    assert f.trace[0].path == "vllm/runner.py"
    assert f.trace[-1].note == "selects self.layers[spec_step_idx % self.num_mtp_layers]"
    assert [c.name for c in f.affected_classes] == ["WrapperMTP"]


def test_early_return_above_the_installation_is_part_of_the_guard(tmp_path: Path) -> None:
    files = wrapper_tree(UNKEYED)
    files["vllm/runner.py"] = files["vllm/runner.py"].replace(
        "        self.drafter.load_model()\n",
        '        self.drafter.load_model()\n        if os.environ.get("EAGER") == "1":\n            return\n',
    )
    scan, cap = _scan(tmp_path, files)
    (inst,) = cap.installations()
    assert inst.guards[0] == 'os.environ.get("EAGER") != "1"'
    (f,) = _mtp007(scan)
    assert 'reached only when os.environ.get("EAGER") != "1" and graphs_enabled()' in f.message


def test_unconditional_installation_is_an_error(tmp_path: Path) -> None:
    scan, _ = _scan(tmp_path, wrapper_tree(UNKEYED, guard=None))
    (f,) = _mtp007(scan)
    assert f.severity is Severity.ERROR and "reached only when" not in f.message


def test_keyed_wrapper_is_clean(tmp_path: Path) -> None:
    scan, cap = _scan(tmp_path, wrapper_tree(KEYED))
    (inst,) = cap.installations()
    assert inst.key_includes == ("spec_step_idx",)
    assert inst.key_fn is not None and "spec_step_idx" in inst.key_fn
    assert _mtp007(scan) == []


def test_key_fn_that_ignores_the_step_is_reported(tmp_path: Path) -> None:
    install = 'GraphWrapper(self.drafter.model, key_fn=lambda *args, **kwargs: kwargs["positions"].shape)'
    scan, _ = _scan(tmp_path, wrapper_tree(install))
    (f,) = _mtp007(scan)
    assert "keyed by key_fn=lambda" in f.message and "which does not read spec_step_idx" in f.message


def test_wrapper_keyed_on_the_call_arguments_directly(tmp_path: Path) -> None:
    graphs = GRAPHS.replace(
        "        key = current_batch()\n", '        key = (current_batch(), kwargs["spec_step_idx"])\n'
    )
    files = wrapper_tree(UNKEYED)
    files["vllm/graphs.py"] = graphs
    scan, cap = _scan(tmp_path, files)
    (wrapper,) = cap.wrappers().values()
    assert wrapper.key_kind is KeyKind.KEY_FN and wrapper.key_params == ("spec_step_idx",)
    (inst,) = cap.installations()
    assert inst.key_fn is None and inst.key_includes == ("spec_step_idx",)
    assert _mtp007(scan) == []


def test_a_class_that_captures_but_never_replays_is_not_a_wrapper(tmp_path: Path) -> None:
    files = wrapper_tree(UNKEYED)
    files["vllm/graphs.py"] = GRAPHS.replace("        graph.replay()\n", "")
    scan, cap = _scan(tmp_path, files)
    assert cap.wrappers() == {} and _mtp007(scan) == []


# An installer method: the manager builds the wrapper from what its caller passes, and
# the call goes through the manager's runner (vLLM's V2 CudaGraphManager shape).
MANAGER = '''
from vllm.graphs import GraphWrapper


class Manager:
    def __init__(self):
        self.runner = None

    def init_runner(self, model, key_fn=None):
        if self.runner is None:
            self.runner = GraphWrapper(model, key_fn=key_fn)

    def run(self, model, inputs):
        if self.runner is None:
            return model(**inputs)
        return self.runner(**inputs)
'''


def speculator(install: str) -> str:
    return f'''
from vllm.loader import get_model
from vllm.manager import Manager


class Speculator:
    def __init__(self, config):
        self.config = config
        self.num_speculative_steps = config.num_speculative_tokens
        self.manager = Manager()

    def load_model(self):
        self.model = get_model(self.config)

    def capture(self):
        {install}

    def generate(self, hidden_states):
        for step in range(self.num_speculative_steps):
            hidden_states = self.run_model(hidden_states, step)
        return hidden_states

    def run_model(self, hidden_states, step):
        inputs = dict(input_ids=None, positions=None, hidden_states=hidden_states, spec_step_idx=step)
        return self.manager.run(self.model, inputs)
'''


def _manager_tree(install: str) -> dict[str, str]:
    return {
        "vllm/loader.py": LOADER,
        "vllm/context.py": CONTEXT,
        "vllm/graphs.py": GRAPHS,
        "vllm/manager.py": MANAGER,
        "vllm/models/m_mtp.py": model(),
        "vllm/spec_decode/speculator.py": speculator(install),
    }


def test_installer_method_without_key_fn_is_reported_at_its_caller(tmp_path: Path) -> None:
    scan, cap = _scan(tmp_path, _manager_tree("self.manager.init_runner(self.model)"))
    (inst,) = [i for i in cap.installations() if i.site[1] == "Speculator.capture"]
    assert inst.slot == ("manager", "runner") and inst.key_fn is None
    (f,) = _mtp007(scan)
    assert (f.path, f.line, f.function) == ("vllm/spec_decode/speculator.py", 16, "Speculator.capture")
    assert "self.model is wrapped in GraphWrapper (Manager.init_runner) and stored in manager.runner" in f.message
    assert "Speculator.generate passes a per-step spec_step_idx" in f.message
    assert f.severity is Severity.ERROR  # the only guard is a presence test (`is None`)


def test_installer_method_with_a_step_key_is_clean(tmp_path: Path) -> None:
    install = 'self.manager.init_runner(self.model, key_fn=lambda **kw: kw["spec_step_idx"] % 2)'
    scan, cap = _scan(tmp_path, _manager_tree(install))
    (inst,) = [i for i in cap.installations() if i.site[1] == "Speculator.capture"]
    assert inst.key_includes == ("spec_step_idx",)
    assert _mtp007(scan) == []


# -- whole-loop capture ------------------------------------------------------


def test_whole_draft_loop_captured_as_one_graph_is_recognised_and_clean(tmp_path: Path) -> None:
    scan, cap = _scan(tmp_path, loop_capture_tree())
    (lc,) = cap.loop_captures()
    assert lc.site[1] == "Speculator.capture"
    assert lc.captured[1] == "Speculator.generate_drafts"
    assert lc.capturer[1] == "GraphManager.capture"
    assert lc.loop_line == 32
    assert cap.wrappers() == {}  # a manager that captures a callable is not a call wrapper
    assert _mtp007(scan) == []
    # The loop itself threads the step: nothing else to report either.
    assert [f.rule for f in scan.result.findings] == []


# -- compilation ---------------------------------------------------------------


def test_compile_decorator_freezes_the_step(tmp_path: Path) -> None:
    scan, cap = _scan(tmp_path, compile_tree())
    comp = cap.compiled(("vllm/models/m_mtp.py", "WrapperMTP"))
    assert comp is not None and comp.dynamic_args is None and comp.condition is None
    (f,) = _mtp007(scan)
    assert (f.path, f.line, f.function) == ("vllm/models/m_mtp.py", 18, "WrapperMTP")
    assert f.severity is Severity.WARNING
    assert "not a dynamic argument (inferred from tensor-typed parameters)" in f.message
    assert "reached when torch.compile is on" in f.message
    assert [fs.kind for fs in cap.frozen_steps()] == [FreezeKind.COMPILE]


def test_compile_decorator_settings_are_read(tmp_path: Path) -> None:
    dec = '@support_torch_compile(dynamic_arg_dims={"hidden_states": 0}, enable_if=lambda cfg: cfg.compile_mtp)'
    scan, cap = _scan(tmp_path, compile_tree(dec))
    comp = cap.compiled(("vllm/models/m_mtp.py", "WrapperMTP"))
    assert comp is not None
    assert comp.dynamic_args == ("hidden_states",) and comp.condition == "lambda cfg: cfg.compile_mtp"
    (f,) = _mtp007(scan)
    assert "(hidden_states)" in f.message and "and lambda cfg: cfg.compile_mtp allows it" in f.message


def test_step_marked_dynamic_is_clean(tmp_path: Path) -> None:
    scan, _ = _scan(tmp_path, compile_tree('@support_torch_compile(dynamic_arg_dims={"spec_step_idx": 0})'))
    assert _mtp007(scan) == []


def test_vocabulary_comes_from_the_configuration(tmp_path: Path) -> None:
    files = compile_tree()
    files["vllm/models/m_mtp.py"] = files["vllm/models/m_mtp.py"].replace("support_torch_compile", "compile_model")
    files["vllm/compilation.py"] = files["vllm/compilation.py"].replace("support_torch_compile", "compile_model")
    scan, _ = _scan(tmp_path / "default", files)
    assert _mtp007(scan) == []
    scan, _ = _scan(tmp_path / "configured", files, Config(compile_decorators=["compile_model"]))
    assert len(_mtp007(scan)) == 1


@pytest.mark.parametrize("files", [wrapper_tree(UNKEYED), compile_tree()], ids=["graph", "compile"])
def test_loop_without_the_step_has_no_mtp007(tmp_path: Path, files: dict[str, str]) -> None:
    files = dict(files)
    files["vllm/spec_decode/proposer.py"] = PROPOSER.replace(", spec_step_idx=token_index + 1", "")
    scan, _ = _scan(tmp_path, files)
    assert _mtp007(scan) == []
    assert [f.rule for f in scan.result.findings] == ["MTP002"]  # the constant-step loop, as before
