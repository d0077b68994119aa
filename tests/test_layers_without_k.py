"""A speculative config given no ``num_speculative_tokens`` (issue 18: ``--speculative-config`` as
``vllm serve`` takes it; K may be left out). Its validation is judged with K unset: a check that
rejects an unset K rejects the configuration, unless a validation statement before it may
set K (vLLM defaults it from the draft's ``n_predict`` when a draft model is named): where the
construction run sets K on every path (and no later validation method may rewrite it), the plan
is made with that K; otherwise the outcome is unknown and no step is planned. Small trees written here (:mod:`trees`
shape), never vLLM's code."""

from __future__ import annotations

import json

from scan_helpers import write_tree
from test_layers import planned_scan
from trees import gate_tree

from auditor.analyses.dispatch import Setting

_VALIDATION = '''
    model: str | None = None
    num_speculative_tokens: int | None = None

    def __post_init__(self):
        if self.model is not None:
            n_predict = getattr(self.draft_model_config.hf_config, "n_predict", None)
            if n_predict is not None and self.num_speculative_tokens is None:
                self.num_speculative_tokens = n_predict

    def _verify_args(self):
        if self.num_speculative_tokens is None:
            raise ValueError("num_speculative_tokens must be provided")
'''


def _plans(tmp_path, *settings):
    files = gate_tree()
    files["vllm/config/speculative.py"] = files["vllm/config/speculative.py"].replace(
        "    def use_multi_module_mtp(self):", _VALIDATION.strip("\n") + "\n\n    def use_multi_module_mtp(self):")
    return planned_scan(write_tree(tmp_path, files), list(settings))[1]


TARGET = json.dumps({"model_type": "deep", "num_nextn_predict_layers": 2})


def test_k_left_out_is_judged_unset(tmp_path):
    rejected, = _plans(tmp_path, Setting("v2", None, target_config=TARGET))
    (r,) = rejected.rejections
    assert rejected.outcome == "rejected" and rejected.steps == ()
    assert (r.function, r.message) == ("SpeculativeConfig._verify_args", 'ValueError("num_speculative_tokens must be provided")')


def test_k_left_out_with_no_model_stays_unset_through_the_earlier_method_and_a_given_k_plans(tmp_path):
    named, given = _plans(tmp_path, Setting("v2", None, target_config=TARGET, options=(("model", None),)),
                          Setting("v2", 2, target_config=TARGET))
    assert given.outcome == "plan" and [s.forward_layer for s in given.steps] == [0, 1]
    # ``model`` given as None is the class's default: __post_init__ leaves K unset on every path.
    assert named.outcome == "rejected"
    assert given.rejections == ()


def _post_init_k(source: str, **fields):
    """K as CPython leaves it after the validation snippet's ``__post_init__``, on a stand-in
    object whose draft hf config carries ``n_predict`` 2 (what the tree's override writes)."""
    ns: dict = {}
    exec("class Spec:\n" + source, ns)  # our own snippet, not vLLM's code
    spec = ns["Spec"].__new__(ns["Spec"])
    hf = type("HF", (), {"n_predict": 2})()
    spec.draft_model_config = type("Draft", (), {"hf_config": hf})()
    for name, value in {"model": None, "num_speculative_tokens": None, **fields}.items():
        setattr(spec, name, value)
    spec.__post_init__()
    return spec.num_speculative_tokens


def test_k_left_out_with_a_model_named_is_planned_with_the_k_the_construction_derives(tmp_path):
    plan, = _plans(tmp_path, Setting("v2", None, target_config=TARGET, options=(("model", "some/checkpoint"),)))
    derived = _post_init_k(_VALIDATION, model="some/checkpoint")
    assert derived == 2
    assert plan.outcome == "plan" and not plan.rejections
    assert plan.setting.k is None and plan.setting.k_derived == derived
    assert [s.forward_layer for s in plan.steps] == [0, 1]
    assert plan.notes[0].startswith("num_speculative_tokens not given: the speculative config's construction sets it to 2")
    # the decision that read K is listed (``self.num_speculative_tokens is None`` -> True)
    assert any("num_speculative_tokens is None" in d.condition and d.value is True for d in plan.decisions)


_UNDECIDED = '''
    model: str | None = None
    num_speculative_tokens: int | None = None

    def __post_init__(self):
        if self.target_model_config.uses_something():
            self.num_speculative_tokens = 1
        else:
            self.num_speculative_tokens = 2

    def _verify_args(self):
        if self.num_speculative_tokens is None:
            raise ValueError("num_speculative_tokens must be provided")
'''

_WRITTEN_LATER = '''
    model: str | None = None
    num_speculative_tokens: int | None = None

    def __post_init__(self):
        self.num_speculative_tokens = 2

    def _verify_args(self):
        if self.model is None:
            self.num_speculative_tokens = 5
'''

_CHECKED_BEFORE = '''
    model: str | None = None
    num_speculative_tokens: int | None = None

    def __post_init__(self):
        if self.num_speculative_tokens not in (None, 1):
            raise ValueError("only one trained step")
        if self.num_speculative_tokens is None:
            self.num_speculative_tokens = 2
'''


def _with(tmp_path, source, *settings):
    files = gate_tree()
    files["vllm/config/speculative.py"] = files["vllm/config/speculative.py"].replace(
        "    def use_multi_module_mtp(self):", source.strip("\n") + "\n\n    def use_multi_module_mtp(self):")
    return planned_scan(write_tree(tmp_path, files), list(settings))[1]


def test_a_k_an_unknown_guard_decides_is_not_derived(tmp_path):
    plan, = _with(tmp_path, _UNDECIDED, Setting("v2", None, target_config=TARGET))
    assert plan.outcome == "unknown" and plan.steps == () and plan.setting.k_derived is None
    assert any("num_speculative_tokens not given: what vLLM then uses is not derived" in n for n in plan.notes)


def test_a_k_a_later_validation_method_may_rewrite_is_not_derived(tmp_path):
    plan, = _with(tmp_path, _WRITTEN_LATER, Setting("v2", None, target_config=TARGET))
    assert plan.setting.k_derived is None and plan.steps == ()


def test_a_check_before_the_derivation_sees_k_as_given(tmp_path):
    # vLLM checks ``K not in (None, 1)`` before it defaults K: a K left out passes the check
    # (CPython: the snippet derives 2 without raising), a K of 2 given does not.
    assert _post_init_k(_CHECKED_BEFORE) == 2
    left_out, given = _with(tmp_path, _CHECKED_BEFORE, Setting("v2", None, target_config=TARGET),
                            Setting("v2", 2, target_config=TARGET))
    assert left_out.outcome == "plan" and left_out.setting.k_derived == 2 and not left_out.rejections
    assert [s.forward_layer for s in left_out.steps] == [0, 1]
    assert given.outcome == "rejected" and given.rejections[0].message == 'ValueError("only one trained step")'


_THROUGH_HELPER = '''
    model: str | None = None
    num_speculative_tokens: int | None = None

    def __post_init__(self):
        self._defaults()

    def _defaults(self):
        self.num_speculative_tokens = 1

    def _verify_args(self):
        k = self.num_speculative_tokens
        if k is None:
            raise ValueError("num_speculative_tokens must be provided")
'''


def test_a_k_a_helper_sets_before_a_check_that_reads_it_through_a_local_is_not_judged_unset(tmp_path):
    files = gate_tree()
    files["vllm/config/speculative.py"] = files["vllm/config/speculative.py"].replace(
        "    def use_multi_module_mtp(self):", _THROUGH_HELPER.strip("\n") + "\n\n    def use_multi_module_mtp(self):")
    (plan,) = planned_scan(write_tree(tmp_path, files), [Setting("v2", None, target_config=TARGET)])[1]
    # (the helper sets K: the plan is made with it, and the check after it does not reject)
    assert plan.outcome == "plan" and not plan.rejections and plan.setting.k_derived == 1


_NO_METHOD = '''
    method: str | None = None
    model: str | None = None
    num_speculative_tokens: int | None = None

    def __post_init__(self):
        if self.method is None:
            self.method = "draft_model"
        if self.model is None and self.num_speculative_tokens is not None:
            if self.method == "mtp":
                self.model = "<target>"
            else:
                raise ValueError("num_speculative_tokens was provided but without speculative model.")
'''


def test_a_method_left_out_is_the_classs_default_and_its_construction_raise_rejects(tmp_path):
    files = gate_tree()
    files["vllm/config/speculative.py"] = files["vllm/config/speculative.py"].replace(
        "    def use_multi_module_mtp(self):", _NO_METHOD.strip("\n") + "\n\n    def use_multi_module_mtp(self):")
    root = write_tree(tmp_path, files)
    left_out, given = planned_scan(root, [Setting("v2", 3, None, target_config=TARGET),
                                          Setting("v2", 3, "mtp", target_config=TARGET)])[1]
    (r,) = left_out.rejections
    assert left_out.outcome == "rejected" and left_out.steps == ()
    assert (r.function, r.message) == ("SpeculativeConfig.__post_init__",
                                       "ValueError(\"num_speculative_tokens was provided but without speculative model.\")")
    assert given.outcome == "plan" and [s.forward_layer for s in given.steps] == [0, 1, 0]  # 2 layers


_RAISES_EITHER = '''
    model: str | None = None
    num_speculative_tokens: int | None = None

    def __post_init__(self):
        if self.target_model_config.uses_something():
            raise NotImplementedError("not on this backend")
        if self.num_speculative_tokens > 1:
            self.model = "x"
'''


def test_a_construction_that_raises_on_every_path_rejects_whichever_raise_an_unknown_guard_picks(tmp_path):
    # CPython: either way the construction raises (which one, the target's backend decides).
    ns: dict = {}
    exec("class Spec:\n" + _RAISES_EITHER, ns)  # our own snippet
    for uses, exc in ((False, TypeError), (True, NotImplementedError)):
        spec = ns["Spec"].__new__(ns["Spec"])
        spec.model, spec.num_speculative_tokens = None, None
        spec.target_model_config = type("T", (), {"uses_something": lambda self, u=uses: u})()
        try:
            spec.__post_init__()
        except exc:
            pass
        else:
            raise AssertionError(f"{exc.__name__} expected")
    plan, = _with(tmp_path, _RAISES_EITHER, Setting("v2", None, target_config=TARGET))
    (r,) = plan.rejections
    assert plan.outcome == "rejected"
    # the path that takes no unknown guard's true side is named; the other raise is its condition
    assert r.message.startswith("TypeError: '>' not supported between instances of 'NoneType' and 'int'")
    assert "as a guard this configuration leaves unknown decides" in r.condition
    assert "NotImplementedError(\"not on this backend\")" in r.condition


def test_the_derived_k_in_the_header_and_the_json(tmp_path):
    from cli_runner import invoke

    files = gate_tree()
    files["vllm/config/speculative.py"] = files["vllm/config/speculative.py"].replace(
        "    def use_multi_module_mtp(self):", _VALIDATION.strip("\n") + "\n\n    def use_multi_module_mtp(self):")
    root = write_tree(tmp_path / "t", files)
    (tmp_path / "config.json").write_text(TARGET)
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    spec = '{"method": "mtp", "model": "some/checkpoint"}'
    args = ("layers", str(root), "--hf-config", str(tmp_path / "config.json"), "--speculative-config", spec,
            "--runner", "v2", "-q")
    r = invoke(*args, "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["k"] is None and doc["k_derived"] == 2 and doc["outcome"] == "plan"
    assert [s["forward_layer"] for s in doc["steps"]] == [0, 1]
    text = invoke(*args, env=env)
    assert text.returncode == 0 and "K=2 (not given: derived)" in text.stdout.splitlines()[0]
    markdown = invoke(*args, "--format", "markdown", env=env)
    assert markdown.returncode == 0 and "K=2 (not given: derived)" in markdown.stdout, markdown.stdout[:500]
    given = json.loads(invoke("layers", str(root), "--hf-config", str(tmp_path / "config.json"), "--k", "2",
                              "--runner", "v2", "-q", "--format", "json", env=env).stdout)
    assert "k_derived" not in given and given["k"] == 2
