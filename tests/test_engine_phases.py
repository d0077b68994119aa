"""The engine's phases: a command's questions are declared as queries the engine asks
while the index loads; once the index is frozen a load raises instead of missing files."""

from __future__ import annotations

import pytest
from scan_helpers import write_tree

from auditor.common.config import Config
from auditor.engine.scan import run_scan
from auditor.facts.cache import FactsCache
from auditor.index.index import IndexFrozen
from auditor.source.trees import DirectoryTree
from rules import all_rules
from rules._examples import draft_tree, wrapper

UNRELATED = "vllm/unrelated.py"


def _tree(tmp_path):
    files = draft_tree("out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=i))",
                       model=wrapper("return self.model(input_ids, positions, hidden_states)"))
    files[UNRELATED] = "def helper(x):\n    return x + 1\n"
    return DirectoryTree(write_tree(tmp_path, files))


class LoadsAFile:
    def __init__(self, path: str) -> None:
        self.path = path
        self.found = None

    def ask(self, analysis):
        self.found = analysis.index.load(self.path)


def test_a_declared_query_loads_what_it_needs_before_the_freeze(tmp_path):
    query = LoadsAFile(UNRELATED)
    scan = run_scan(_tree(tmp_path), Config(), all_rules(), FactsCache(None), 1, queries=[query])
    assert query.found is not None and "helper" in query.found.functions
    assert scan.analysis is not None and scan.analysis.index.lookup(UNRELATED) is query.found


def test_a_load_after_the_freeze_raises(tmp_path):
    scan = run_scan(_tree(tmp_path), Config(), all_rules(), FactsCache(None), 1)
    index = scan.analysis.index
    assert index.frozen and UNRELATED not in index.facts  # not a seed, reached by nothing
    with pytest.raises(IndexFrozen, match="unrelated.py was asked for after the index was frozen"):
        index.load(UNRELATED)
    assert index.lookup(UNRELATED) is None  # lookups during the rules only read what was loaded
