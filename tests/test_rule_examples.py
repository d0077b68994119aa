"""Every rule's VALID/INVALID examples are scanned (as Fixit runs a rule's examples):
VALID must stay silent; INVALID must report, at the line, file and with the message
fragment the example pins."""

from __future__ import annotations

import pytest
from scan_helpers import by_rule, scan_tree, write_tree

from rules import all_rules
from rules.base import Invalid, Valid

CASES = [
    pytest.param(rule, example, id=f"{rule.code}-{'valid' if isinstance(example, Valid) else 'invalid'}-{i}")
    for rule in all_rules()
    for examples in (rule.VALID, rule.INVALID)
    for i, example in enumerate(examples)
]


def test_every_rule_has_examples_and_docs():
    codes = [r.code for r in all_rules()]
    assert codes == ["MTP001", "MTP002", "MTP003", "MTP004", "MTP005", "MTP006", "MTP007", "MTP900"]
    for r in all_rules():
        assert r.VALID and r.INVALID, r.code
        assert all(isinstance(e, Valid) for e in r.VALID), r.code
        assert all(isinstance(e, Invalid) for e in r.INVALID), r.code
        assert len(r.doc()) > 200, f"{r.code} needs real documentation in its docstring"
        assert r.name and r.summary


def test_every_invalid_example_pins_what_it_expects():
    """An INVALID example that only asks for 'some finding' would pass for the wrong one."""
    for r in all_rules():
        for i, e in enumerate(r.INVALID):
            assert e.message, f"{r.code} INVALID[{i}] pins no message fragment"
            assert e.line is not None or e.count is not None, f"{r.code} INVALID[{i}] pins neither line nor count"


@pytest.mark.parametrize("rule,example", CASES)
def test_rule_example(tmp_path, rule, example):
    scan = scan_tree(write_tree(tmp_path, example.files))
    hits = by_rule(scan, rule.code)
    if isinstance(example, Valid):
        assert not hits, f"{rule.code} VALID example was flagged: {[h.message for h in hits]}"
        return
    assert hits, f"{rule.code} INVALID example produced no finding"
    for f in hits:
        assert f.trace, "every finding carries its call chain"
        assert f.fingerprint and len(f.fingerprint) == 16
    if example.count is not None:
        assert len(hits) == example.count, [(h.line, h.message) for h in hits]
        assert len({h.fingerprint for h in hits}) == len(hits), "distinct defects need distinct fingerprints"
    matching = [
        h for h in hits
        if (example.line is None or h.line == example.line)
        and (example.path is None or h.path == example.path)
        and (example.message is None or example.message in h.message)
    ]
    assert matching, f"no {rule.code} finding at {example.path or ''}:{example.line} with {example.message!r}: " + repr(
        [(h.path, h.line, h.message) for h in hits]
    )
