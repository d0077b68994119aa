"""Every rule's VALID/INVALID examples are scanned: INVALID must trigger it, VALID must not."""

from __future__ import annotations

import pytest
from scan_helpers import by_rule, scan_tree, write_tree

from rules import all_rules

CASES = [
    pytest.param(rule, kind, i, example, id=f"{rule.code}-{kind}-{i}")
    for rule in all_rules()
    for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for i, example in enumerate(examples)
]


def test_every_rule_has_examples_and_docs():
    codes = [r.code for r in all_rules()]
    assert codes == ["MTP001", "MTP002", "MTP003", "MTP004", "MTP005", "MTP900"]
    for r in all_rules():
        assert r.VALID and r.INVALID, r.code
        assert len(r.doc()) > 200, f"{r.code} needs real documentation in its docstring"
        assert r.name and r.summary


@pytest.mark.parametrize("rule,kind,index,example", CASES)
def test_rule_example(tmp_path, rule, kind, index, example):
    scan = scan_tree(write_tree(tmp_path, example))
    hits = by_rule(scan, rule.code)
    if kind == "invalid":
        assert hits, f"{rule.code} INVALID[{index}] produced no finding"
        for f in hits:
            assert f.trace, "every finding carries its call chain"
            assert f.fingerprint and len(f.fingerprint) == 16
    else:
        assert not hits, f"{rule.code} VALID[{index}] was flagged: {[h.message for h in hits]}"
