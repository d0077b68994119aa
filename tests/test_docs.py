"""The docs describe the code as it is: every repository path (``auditor/...``, ``rules/...``,
``tests/...``, ``bench/...``, ``runtime_check/...``) and every dotted module of ours
(``auditor.services.layers.PlanQuery``) named in README.md and docs/ exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "auditor").rglob("*.md"))]
PATH = re.compile(r"(?<![\w./-])((?:auditor|rules|tests|bench|runtime_check)/[\w./-]*[\w/])")
DOTTED = re.compile(r"(?<![\w./-])((?:auditor|rules|runtime_check)(?:\.[A-Za-z_]\w*)+)")


def _module_exists(root: Path, dotted: str) -> bool:
    """``a.b.c.Name``: the longest prefix of it that is a module or package of ours defines
    (or imports) the next name; an attribute of that name is not checked."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:n])
        source = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if source.is_file():
            return n == len(parts) or re.search(rf"\b{re.escape(parts[n])}\b", source.read_text(encoding="utf-8")) is not None
    return False


def missing(root: Path, docs: list[Path]) -> list[str]:
    out = []
    for doc in docs:
        text = doc.read_text(encoding="utf-8")
        for m in PATH.finditer(text):
            if "NNN" in m.group(1):  # a template (rules/mtpNNN_name.py)
                continue
            if not (root / m.group(1)).exists():
                out.append(f"{doc.relative_to(root)}: {m.group(1)}")
        for m in DOTTED.finditer(text):
            if not _module_exists(root, m.group(1)):
                out.append(f"{doc.relative_to(root)}: {m.group(1)}")
    return out


def test_every_module_path_the_docs_name_exists():
    assert not missing(ROOT, DOCS)


def test_a_stale_path_in_a_doc_is_found(tmp_path):
    (tmp_path / "auditor").mkdir()
    (tmp_path / "auditor" / "__init__.py").write_text("")
    (tmp_path / "auditor" / "engine.py").write_text("def run_scan():\n    pass\n")
    doc = tmp_path / "README.md"
    doc.write_text("See `auditor/engine.py`, `auditor/analysis.py`, auditor.engine.run_scan and auditor.cli_options.\n")
    assert missing(tmp_path, [doc]) == ["README.md: auditor/analysis.py", "README.md: auditor.cli_options"]
