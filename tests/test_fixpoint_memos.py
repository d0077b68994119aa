"""Mutually recursive memo queries share one fixpoint (issue 18): ``attr_types`` and
``returned_types`` call each other; their answers must not depend on which is asked first."""

from __future__ import annotations

import itertools

from scan_helpers import write_tree

from auditor.analyses.analysis import Analysis
from auditor.analyses import FixpointMemo, Limits
import auditor.analyses.base as base
from auditor.facts.cache import FactsCache
from auditor.common.config import Config
from auditor.index.index import Index
from auditor.source.trees import DirectoryTree

_TREE = {
    "vllm/m.py": '''
class B:
    pass


class C:
    pass


class A:
    def __init__(self, flag):
        self.x = self.make(flag)
        self.y = B()
        self.z = self.other(flag)

    def make(self, flag):
        if flag:
            return self.x
        if flag > 1:
            return self.z
        return self.y

    def other(self, flag):
        if flag:
            return self.make(flag)
        return C()
''',
}

_A = ("vllm/m.py", "A")
_QUERIES = {
    "attr x": lambda t: t.attr_types(_A, "x"),
    "attr z": lambda t: t.attr_types(_A, "z"),
    "returns make": lambda t: t.returned_types(("vllm/m.py", "A.make"), _A),
    "returns other": lambda t: t.returned_types(("vllm/m.py", "A.other"), _A),
}


def _fresh(tmp_path):
    root = tmp_path / "t"
    if not root.exists():
        write_tree(root, _TREE)
    index = Index(DirectoryTree(root), Config(), FactsCache(None), 1)
    index.load_seeds()
    for path in index.files:
        index.load(path)
    return Analysis(index, Config()).types


def test_mutually_recursive_type_queries_answer_the_same_in_every_order(tmp_path):
    answers: dict[tuple[str, ...], dict[str, set[str]]] = {}
    for order in itertools.permutations(_QUERIES):
        types = _fresh(tmp_path)
        got = {name: {c[1] for c in _QUERIES[name](types)} for name in order}
        # and once more, from the memo
        again = {name: {c[1] for c in _QUERIES[name](types)} for name in order}
        assert got == again, order
        answers[order] = got
    expected = {"attr x": {"B", "C"}, "attr z": {"B", "C"}, "returns make": {"B", "C"}, "returns other": {"B", "C"}}
    for order, got in answers.items():
        assert got == expected, (order, got)


def test_two_memos_on_one_stack_iterate_a_cycle_through_both():
    limits = Limits()
    stack = base.FixpointStack()
    evens: FixpointMemo[int, frozenset[int]] = FixpointMemo(frozenset, limits, "evens", stack=stack)
    odds: FixpointMemo[int, frozenset[int]] = FixpointMemo(frozenset, limits, "odds", stack=stack)
    # even n reaches n and odd (n + 1) % 4; odd n reaches n and even (n + 1) % 4: one cycle 0-1-2-3.

    def even(n: int) -> frozenset[int]:
        return evens.query(n, lambda: frozenset({n}) | odd((n + 1) % 4))

    def odd(n: int) -> frozenset[int]:
        return odds.query(n, lambda: frozenset({n}) | even((n + 1) % 4))

    assert odd(1) == {0, 1, 2, 3}
    assert even(0) == {0, 1, 2, 3} and even(2) == {0, 1, 2, 3} and odd(3) == {0, 1, 2, 3}
