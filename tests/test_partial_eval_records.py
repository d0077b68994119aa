"""The partial evaluator on enum members, plain dataclass records and unpackings (issue 18:
a start-up guard that reads what a call returns, ``batch_desc, sync = dispatch(...)`` then
``if batch_desc.cg_mode == CUDAGraphMode.FULL``). Each known value is checked against CPython
running the same fixture source (ours, never scanned code); what the evaluator does not model
stays unknown."""

from __future__ import annotations

import sys
import textwrap
import types

import pytest
from scan_helpers import write_tree

from auditor.analyses.dispatch.syntax import TreeWorld
from auditor.analyses.partial_eval import EnumMember, Evaluator, Obj, Unknown
from auditor.common.config import Config
from auditor.facts.cache import FactsCache
from auditor.index.index import Index
from auditor.source.trees import DirectoryTree

PATH = "vllm/records.py"
SRC = textwrap.dedent('''
    import enum
    from dataclasses import dataclass


    class Mode(enum.Enum):
        NONE = 0
        FULL = 2
        SAME_AS_FULL = 2
        PAIR = (FULL, NONE)


    @dataclass
    class Desc:
        mode: Mode
        n: int
        k: int = 3


    @dataclass
    class Checked:
        mode: Mode

        def __post_init__(self):
            self.mode = Mode.FULL


    class Plain:
        def __init__(self, mode):
            self.mode = mode


    def pick(eager, dp):
        if eager:
            desc = Desc(mode=Mode.NONE, n=1)
        else:
            desc = Desc(mode=Mode.FULL, n=2)
        if dp == 1:
            return desc, None
        return pair(desc, dp)


    def pair(desc, dp):
        return (desc, dp)


    def is_full(eager, dp):
        desc, sync = pick(eager, dp)
        return desc.mode == Mode.FULL


    def default_k(eager, dp):
        desc, sync = pick(eager, dp)
        return desc.k == 3


    def positional_k():
        return Desc(Mode.NONE, 1).k == 3


    def alias():
        return Mode.FULL == Mode.SAME_AS_FULL


    def pair_vs_full():
        return Mode.PAIR == Mode.FULL


    def post_init_mode():
        return Checked(mode=Mode.NONE).mode == Mode.NONE


    def plain_equal():
        return Plain(Mode.NONE) == Plain(Mode.NONE)


    def unpack_dict():
        a, b = {"x": 1, "y": 2}
        return a == "x"


    def divides(k, n):
        return k > n and k % n != 0


    def more_than_one(k):
        return k > 1


    def branch_divides(k, n):
        if k % n == 1:
            return Desc(mode=Mode.FULL, n=k)
        return Desc(mode=Mode.NONE, n=k)


    def unpack_short():
        a, b = pick(True, 1)[0], 5
        return b == 5
''')


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = write_tree(tmp_path_factory.mktemp("records"), {PATH: SRC})
    index = Index(DirectoryTree(root), Config(), FactsCache(None))
    return TreeWorld(index)


def _evaluate(world: TreeWorld, func: str, **args):
    fn = world.index.function((PATH, func))
    assert fn is not None and fn.body, f"{func} keeps no statement tree"
    return Evaluator(world).run_joined((PATH, func), fn, args).returned


def _cpython(func: str, **args):
    module = types.ModuleType("records_fixture")
    sys.modules[module.__name__] = module  # (dataclasses looks its module up)
    try:
        exec(compile(SRC, PATH, "exec"), module.__dict__)  # our own fixture, never scanned code
        return getattr(module, func)(**args)
    finally:
        del sys.modules[module.__name__]


@pytest.mark.parametrize("func,args", [
    ("is_full", {"eager": True, "dp": 1}),   # the record built on the eager path, its field compared
    ("is_full", {"eager": False, "dp": 1}),
    ("default_k", {"eager": True, "dp": 1}),  # a field the keywords leave out: its literal default
    ("alias", {}),                              # two names of one member
    ("unpack_short", {}),
])
def test_a_known_answer_is_what_cpython_computes(world, func, args):
    got = _evaluate(world, func, **args)
    assert not isinstance(got, Unknown), got
    assert got == _cpython(func, **args)


@pytest.mark.parametrize("func,args", [
    ("is_full", {"eager": Unknown("eager"), "dp": 1}),  # NONE on one path, FULL on the other
    ("is_full", {"eager": False, "dp": Unknown("dp")}),  # a callee the evaluator does not run (pair)
    ("is_full", {"eager": True, "dp": 4}),
    ("positional_k", {}),    # which field a positional argument binds is not modelled: no defaults
    ("pair_vs_full", {}),    # a member whose value is no literal: only its own name is known equal
    ("post_init_mode", {}),  # __post_init__ may rewrite the fields: no record
    ("plain_equal", {}),     # a class's __eq__ decides
    ("unpack_dict", {}),     # a dict unpacks its keys
])
def test_what_is_not_modelled_stays_unknown(world, func, args):
    assert isinstance(_evaluate(world, func, **args), Unknown)


def test_a_member_is_an_enum_member_and_a_record_an_object_of_its_class(world):
    assert world.class_attr((PATH, "Mode"), "FULL") == EnumMember((PATH, "Mode"), "FULL", 2)
    assert world.class_attr((PATH, "Mode"), "_private") is None
    # Not an enum: a class attribute through the class's MRO (CPython: ``Desc.k == 3``); through
    # an object of the dataclass it is the field the constructor set (unknown here).
    assert world.class_attr((PATH, "Desc"), "k") == 3
    assert world.class_attr((PATH, "Desc"), "k", instance=True) is None
    assert world.record_fields((PATH, "Desc")) == {"k": 3}
    assert world.record_fields((PATH, "Checked")) is None and world.record_fields((PATH, "Plain")) is None
    fn = world.index.function((PATH, "pick"))
    paths = Evaluator(world).run((PATH, "pick"), fn, {"eager": True, "dp": 1})
    (desc, sync), = [p.returned for p in paths]
    assert isinstance(desc, Obj) and desc.cls == (PATH, "Desc") and sync is None


def test_an_expression_that_raises_is_unknown_and_says_what_python_raises(world):
    # k % 0 with both operands known: CPython raises ZeroDivisionError; the evaluator's value is
    # unknown and carries that exception, and an ``and`` whose first operand is false never
    # evaluates it (as Python).
    with pytest.raises(ZeroDivisionError) as exc:
        _cpython("divides", k=2, n=0)
    got = _evaluate(world, "divides", k=2, n=0)
    assert isinstance(got, Unknown) and got.raises == f"ZeroDivisionError: {exc.value}"
    assert _evaluate(world, "divides", k=0, n=0) is False is _cpython("divides", k=0, n=0)
    # A test that raises ends its path raising (no fork on it).
    fn = world.index.function((PATH, "branch_divides"))
    (path,) = Evaluator(world).run((PATH, "branch_divides"), fn, {"k": 2, "n": 0})
    assert path.raised is not None and path.raised.startswith("ZeroDivisionError: integer modulo by zero")


@pytest.mark.parametrize("k", [None, "2"])
def test_ordering_values_python_cannot_order_raises_its_type_error(world, k):
    """``None > 1`` (K not given, compared before vLLM defaults it): CPython raises TypeError;
    the evaluator's value carries that exception, worded as CPython words it."""
    with pytest.raises(TypeError) as exc:
        _cpython("more_than_one", k=k)
    got = _evaluate(world, "more_than_one", k=k)
    assert isinstance(got, Unknown) and got.raises == f"TypeError: {exc.value}"
    assert _evaluate(world, "more_than_one", k=3) is True is _cpython("more_than_one", k=3)
    assert isinstance(_evaluate(world, "more_than_one", k=Unknown("k")), Unknown)
    assert not _evaluate(world, "more_than_one", k=Unknown("k")).raises
