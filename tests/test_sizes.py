"""Size limits for the code in ``auditor/``: a class has at most CLASS_LINES lines and
CLASS_METHODS methods, a module at most MODULE_LINES lines. A module or class beyond them
is doing more than one thing: split it by concern. Both checks fail on planted violations."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLASS_LINES = 400
CLASS_METHODS = 25
MODULE_LINES = 1200


def oversized(root: Path) -> list[str]:
    out = []
    for p in sorted(root.rglob("*.py")):
        text = p.read_text(encoding="utf-8")
        rel = p.relative_to(root.parent).as_posix()
        lines = len(text.splitlines())
        if lines > MODULE_LINES:
            out.append(f"{rel}: {lines} lines (module limit {MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.ClassDef):
                continue
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            methods = sum(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in node.body)
            if length > CLASS_LINES:
                out.append(f"{rel}:{node.lineno} class {node.name}: {length} lines (limit {CLASS_LINES})")
            if methods > CLASS_METHODS:
                out.append(f"{rel}:{node.lineno} class {node.name}: {methods} methods (limit {CLASS_METHODS})")
    return out


def test_modules_and_classes_of_auditor_stay_within_the_limits():
    found = oversized(ROOT / "auditor")
    assert not found, "\n".join(found)


def test_a_planted_large_class_and_module_are_found(tmp_path):
    pkg = tmp_path / "auditor"
    pkg.mkdir()
    methods = "".join(f"    def m{i}(self):\n        return {i}\n" for i in range(CLASS_METHODS + 1))
    (pkg / "wide.py").write_text("class Wide:\n" + methods)
    (pkg / "long.py").write_text("class Long:\n    x = 1\n" + "    y = 2\n" * CLASS_LINES)
    (pkg / "big.py").write_text("x = 1\n" * (MODULE_LINES + 1))
    (pkg / "fine.py").write_text("class Fine:\n    def m(self):\n        return 1\n")
    found = oversized(pkg)
    assert [f.split(":")[0] for f in found] == ["auditor/big.py", "auditor/long.py", "auditor/wide.py"], found
