"""A head method that uses an attribute the draft model's constructors set to None for the
configuration (issue 18, :mod:`auditor.analyses.dispatch.head_reads`), on small trees written
here (:mod:`trees` shape): the drafter samples the first draft token before its draft loop
through a helper that calls ``self.model.get_top_tokens(...)`` under an option; the model
defines ``get_top_tokens``, which uses ``self.masked``, and its constructor stores None in
``self.masked`` unless the draft config asks for ordered embeddings. The call raises at step
0 (``AttributeError`` on None, or the assert first); a test the evaluator cannot decide, or
another writer of the attribute, keeps the plan."""

from __future__ import annotations

from scan_helpers import write_tree
from test_layers import planned_scan
from trees import sampling_drafter_tree

from auditor.analyses.dispatch import Setting

_SAMPLE = '''
    def _sample(self, x, meta):
        if self.local_argmax:
            return self.model.get_top_tokens(x)
        return self.model.compute_logits(x)
'''

_CHILD = '''

class ChildSpeculator(MultiModuleSpeculator):
    def _sample(self, x, meta):
        if self._graphs:
            return x
        return super()._sample(x, meta)
'''

_EMBEDDER = '''
class Embedder(nn.Module):
    def get_top_tokens(self, x):
        return x
'''

_IF_ELSE = '''
        if getattr(config, "use_ordered", False):
            self.masked = Embedder()
        else:
            self.masked = None
'''

_HEAD = '''
    def compute_logits(self, x):
        return x

    def get_top_tokens(self, x):
{body}
'''

_USE = "        return self.masked.get_top_tokens(x)"
_ASSERT = "        assert self.masked is not None\n        return self.masked.get_top_tokens(x)"


def _files(store: str = _IF_ELSE, body: str = _USE, model_more: str = "", drafter_more: str = "") -> dict[str, str]:
    files = sampling_drafter_tree(_SAMPLE)
    files["vllm/spec_decode/speculators.py"] += drafter_more
    model = files["vllm/models/deep_mtp.py"]
    layers = "        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])\n"
    assert layers in model
    model = model.replace(layers, layers + store.lstrip("\n"), 1).replace("class DeepMTP(nn.Module):",
                                                                          _EMBEDDER + "\n\nclass DeepMTP(nn.Module):")
    files["vllm/models/deep_mtp.py"] = model + _HEAD.format(body=body) + model_more
    return files


def _deep(fields: tuple[tuple[str, object], ...] = (), **options: object) -> Setting:
    return Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3), *fields),
                   options=tuple(sorted(options.items())))


def _plans(tmp_path, settings: list[Setting], **variant: str):
    return planned_scan(write_tree(tmp_path / "t", _files(**variant)), settings)[1]


def _line(tmp_path, text: str) -> int:
    lines = (tmp_path / "t" / "vllm/models/deep_mtp.py").read_text().splitlines()
    return next(i for i, t in enumerate(lines, 1) if t.strip() == text)


def test_a_head_method_using_an_attribute_set_to_none_raises_at_step_0(tmp_path):
    on, ordered, off = _plans(tmp_path, [_deep(use_local_argmax_reduction=True),
                                         _deep((("use_ordered", True),), use_local_argmax_reduction=True),
                                         _deep(use_local_argmax_reduction=False)])
    assert on.outcome == "raises" and on.step_raise is not None, (on.steps, on.notes)
    r = on.step_raise
    assert (r.step, r.path, r.function) == (0, "vllm/models/deep_mtp.py", "DeepMTP.get_top_tokens")
    assert r.line == _line(tmp_path, "return self.masked.get_top_tokens(x)")
    assert r.message == "AttributeError(\"'NoneType' object has no attribute 'get_top_tokens'\")"
    assert [s.verdict for s in on.steps] == ["raises at step 0"] * 3
    # The config builds the embedder: the head method works, the steps run as planned.
    assert ordered.outcome == "plan" and [s.forward_layer for s in ordered.steps] == [0, 1, 2]
    # The drafter never calls the head method.
    assert off.outcome == "plan"


def test_the_assert_before_the_use_is_the_raise(tmp_path):
    on, = _plans(tmp_path, [_deep(use_local_argmax_reduction=True)], body=_ASSERT)
    r = on.step_raise
    assert on.outcome == "raises" and r is not None, on.notes
    assert r.line == _line(tmp_path, "assert self.masked is not None")
    assert r.message == "assert self.masked is not None"


def test_the_asserts_message_is_in_the_raise(tmp_path):
    body = _ASSERT.replace("assert self.masked is not None", 'assert self.masked is not None, "needs the mask"')
    on, = _plans(tmp_path, [_deep(use_local_argmax_reduction=True)], body=body)
    assert on.step_raise is not None and on.step_raise.message == "assert self.masked is not None, 'needs the mask'"


def test_a_conditional_value_and_a_guarded_reassignment_are_decided(tmp_path):
    store = "        self.masked = Embedder() if getattr(config, 'use_ordered', False) else None\n"
    on, ordered = _plans(tmp_path / "a", [_deep(use_local_argmax_reduction=True),
                                          _deep((("use_ordered", True),), use_local_argmax_reduction=True)], store=store)
    assert on.outcome == "raises" and ordered.outcome == "plan", (on.notes, ordered.notes)
    store = ("        self.masked = None\n        if getattr(config, 'use_ordered', False):\n"
             "            self.masked = Embedder()\n")
    on, ordered = _plans(tmp_path / "b", [_deep(use_local_argmax_reduction=True),
                                          _deep((("use_ordered", True),), use_local_argmax_reduction=True)], store=store)
    assert on.outcome == "raises" and ordered.outcome == "plan", (on.notes, ordered.notes)


def test_an_undecided_test_or_another_writer_keeps_the_plan(tmp_path):
    # The draft config leaves the field unset and the constructor reads it without a default.
    store = "        if config.use_ordered:\n            self.masked = Embedder()\n        else:\n            self.masked = None\n"
    undecided, = _plans(tmp_path / "a", [_deep(use_local_argmax_reduction=True)], store=store)
    assert undecided.outcome == "plan" and undecided.step_raise is None
    assert any("self.masked" in n and "undecided" in n for n in undecided.notes), undecided.notes
    # A method other than the constructors may store something else first.
    other = "\n    def load_weights(self, weights):\n        self.masked = Embedder()\n"
    written, = _plans(tmp_path / "b", [_deep(use_local_argmax_reduction=True)], model_more=other)
    assert written.outcome == "plan" and written.step_raise is None
    # A use under a test the evaluator cannot decide is not reached for sure.
    guarded = "        if x is not None:\n            return self.masked.get_top_tokens(x)\n        return x"
    maybe, = _plans(tmp_path / "c", [_deep(use_local_argmax_reduction=True)], body=guarded)
    assert maybe.outcome == "plan" and maybe.step_raise is None


def test_a_super_call_of_the_drafter_is_followed(tmp_path):
    # The subclass's sampler reaches the base's through super() when its graphs are not set:
    # the constructor's empty list, written later only by a private method the load method
    # runs only when the model's attribute is not None.
    drafter = _CHILD + '''
    def __init__(self, vllm_config):
        super().__init__(vllm_config)
        self._graphs = []

    def load_model(self):
        super().load_model()
        if getattr(self.model, "masked", None) is not None:
            self._setup_graphs()

    def _setup_graphs(self):
        self._graphs = [1]
'''
    files = _files(drafter_more=drafter)
    files["vllm/spec_decode/__init__.py"] = files["vllm/spec_decode/__init__.py"].replace(
        "MultiModuleSpeculator", "ChildSpeculator")
    root = write_tree(tmp_path / "t", files)
    on, = planned_scan(root, [_deep(use_local_argmax_reduction=True)])[1]
    assert on.proposer is not None and on.proposer[1] == "ChildSpeculator", on.proposer
    assert on.outcome == "raises" and on.step_raise is not None, on.notes
    assert on.step_raise.function == "DeepMTP.get_top_tokens"
