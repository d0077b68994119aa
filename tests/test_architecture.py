"""Layering: no import cycle among our modules at module level, and the engine never
imports the rules package (the command line hands the engine its rules)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("auditor", "rules", "runtime_check")
# The analysis engine: everything a scan runs, apart from the command line and reports.
ENGINE = ("auditor.engine", "auditor.analyses", "auditor.index", "auditor.facts", "auditor.source", "auditor.model",
          "auditor.common")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            if "stubs" not in p.parts:
                out[_module_name(p)] = p
    return out


def _absolute(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue  # annotations only: never executed
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, is_pkg, node)
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(node.orelse)
                if isinstance(node, ast.Try):
                    for h in node.handlers:
                        visit(h.body)
                    visit(node.finalbody)
            elif not top_level_only:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.stmt):
                        visit([child])
                    elif hasattr(child, "body") and isinstance(getattr(child, "body"), list):
                        visit(getattr(child, "body"))
                if hasattr(node, "body") and isinstance(getattr(node, "body"), list):
                    visit(getattr(node, "body"))

    visit(tree.body)
    return found


def _graph(top_level_only: bool) -> nx.DiGraph:
    mods = _modules()
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for m, p in mods.items():
        for imp in _imports(m, p, top_level_only):
            if imp in mods and imp != m:
                g.add_edge(m, imp)
            # `from pkg import mod` imports the package's __init__ too
            parent = imp.rsplit(".", 1)[0]
            if parent in mods and parent != m and not m.startswith(parent + "."):
                g.add_edge(m, parent)
    return g


def test_no_import_cycle_at_module_level():
    g = _graph(top_level_only=True)
    cycles = list(nx.simple_cycles(g))
    assert not cycles, f"module-level import cycles: {cycles[:5]}"


def test_the_engine_never_imports_the_rules_package():
    mods = _modules()
    for m, p in sorted(mods.items()):
        if not m.startswith(ENGINE):
            continue
        bad = {i for i in _imports(m, p, top_level_only=False) if i == "rules" or i.startswith("rules.")}
        assert not bad, f"{m} imports {sorted(bad)}"


def test_the_checker_sees_a_cycle(tmp_path, monkeypatch):
    """The cycle test can fail: two modules importing each other are found."""
    pkg = tmp_path / "auditor"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("from .a import x\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__), "PACKAGES", ("auditor",))
    assert list(nx.simple_cycles(_graph(top_level_only=True)))
