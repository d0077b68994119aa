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
#: The eighth reader's entries (session 14: vLLM 0.34.0; Q4 frozen steps, Q5 gates too).
CASES_S14 = HERE / "data" / "heldout" / "heldout_findings_s14.json"
RULES = {"Q1": ("MTP005",), "Q2": ("MTP002", "MTP003"), "Q3": ("MTP001",), "Q4": ("MTP007",), "Q5": ("MTP006",)}


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if "cases" in data:
        return list(data["cases"])
    # The eighth reader's form: one release, ``entries`` whose ``kind`` is "finding" or "none" and
    # whose ``function`` may name several (``A.f / B.g``) with a remark in parentheses. An entry
    # stands for each function it names; its answer is judged at any of them.
    out = []
    for e in data["entries"]:
        names = [n.split(" (")[0].strip() for n in e["function"].split(" / ")]
        out.append({"id": e["id"], "release": data["release"], "question": e["question"], "path": e["path"],
                    "function": names[0], "functions": names, "none": e["kind"] == "none"})
    return out


def _sites(f: Any) -> set[tuple[str, str]]:
    return {(f.path, f.function)} | {(h.path, h.function) for h in f.trace}


def judge(case: dict[str, Any], findings: list[Any], cases: list[dict[str, Any]]) -> tuple[bool, str]:
    """(agrees, what the scan says) for one entry."""
    rules = RULES[case["question"]]
    mine = [f for f in findings if f.rule in rules]
    sites = {(case["path"], fn) for fn in case["functions"]} if "functions" in case else {(case.get("path"), case.get("function"))}
    if case.get("none") and "functions" in case:
        # The eighth reader's absence is at the places it names: no such finding there.
        extra = sorted(f"{f.rule} {f.path}:{f.line} {f.function}" for f in mine if sites & _sites(f)
                       and not any(sites & {(c["path"], fn) for fn in c["functions"]} for c in cases
                                   if c["question"] == case["question"] and not c["none"]))
        return not extra, "; ".join(extra) or "none"
    if case.get("none"):
        # Absence: no such finding, except at the sites the reader did list for this question.
        listed = {(c["path"], c["function"]) for c in cases
                  if c["release"] == case["release"] and c["question"] == case["question"] and not c.get("none")}
        extra = sorted(f"{f.rule} {f.path}:{f.line} {f.function}" for f in mine if (f.path, f.function) not in listed)
        return not extra, "; ".join(extra) or "none"
    hits = [f for f in mine if sites & _sites(f)]
    return bool(hits), "; ".join(sorted(f"{f.rule} {f.path}:{f.line} {f.function}" for f in hits)) or "no finding"


def score(scan_of: Any, path: Path = CASES) -> list[tuple[dict[str, Any], bool, str]]:
    cases = load_cases(path)
    return [(c, *judge(c, list(scan_of(c["release"]).result.findings), cases)) for c in cases]


def main() -> int:
    sys.path.insert(0, str(HERE))
    from scan_helpers import scan_release

    rows = score(scan_release, Path(sys.argv[sys.argv.index("--cases") + 1]) if "--cases" in sys.argv else CASES)
    for c, ok, said in rows:
        print(f"{'agree   ' if ok else 'DISAGREE'} {c['id']}: {said}")
    print(f"score: {sum(ok for _, ok, _ in rows)}/{len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
