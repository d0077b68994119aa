"""Score `scan` against the held-out findings in ``tests/data/heldout/heldout_findings.json``.

An independent reader derived them from vLLM 0.24.0-0.31.0 source without looking at this
tool (``tests/data/heldout/README.md``): per release, the calls that pass the step into a
draft model that cannot take it (Q1, MTP005), the draft loops that run an MTP draft with a
constant step (Q2, MTP002, or MTP003 where only the head misses it), and the functions that
receive the step and drop it (Q3, MTP001); and, per release and question, where the reader
looked and found none.

``python tests/heldout_findings_score.py`` prints one line per entry and the score.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES = HERE / "data" / "heldout" / "heldout_findings.json"
RULES = {"Q1": ("MTP005",), "Q2": ("MTP002", "MTP003"), "Q3": ("MTP001",)}


def load_cases() -> list[dict[str, Any]]:
    return list(json.loads(CASES.read_text(encoding="utf-8"))["cases"])


def _sites(f: Any) -> set[tuple[str, str]]:
    return {(f.path, f.function)} | {(h.path, h.function) for h in f.trace}


def judge(case: dict[str, Any], findings: list[Any], cases: list[dict[str, Any]]) -> tuple[bool, str]:
    """(agrees, what the scan says) for one entry."""
    rules = RULES[case["question"]]
    mine = [f for f in findings if f.rule in rules]
    if case.get("none"):
        # Absence: no such finding, except at the sites the reader did list for this question.
        listed = {(c["path"], c["function"]) for c in cases
                  if c["release"] == case["release"] and c["question"] == case["question"] and not c.get("none")}
        extra = sorted(f"{f.rule} {f.path}:{f.line} {f.function}" for f in mine if (f.path, f.function) not in listed)
        return not extra, "; ".join(extra) or "none"
    site = (case["path"], case["function"])
    hits = [f for f in mine if site in _sites(f)]
    return bool(hits), "; ".join(sorted(f"{f.rule} {f.path}:{f.line} {f.function}" for f in hits)) or "no finding"


def score(scan_of: Any) -> list[tuple[dict[str, Any], bool, str]]:
    cases = load_cases()
    return [(c, *judge(c, list(scan_of(c["release"]).result.findings), cases)) for c in cases]


def main() -> int:
    sys.path.insert(0, str(HERE))
    from scan_helpers import scan_release

    rows = score(scan_release)
    for c, ok, said in rows:
        print(f"{'agree   ' if ok else 'DISAGREE'} {c['id']}: {said}")
    print(f"score: {sum(ok for _, ok, _ in rows)}/{len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
