"""Layering, read from every import in the code (module level, function level and
``TYPE_CHECKING`` blocks alike, as an AST walk over each file):

* data flows one way — each package of ``auditor/`` may import only from its own layer and
  the layers below it (:data:`LAYERS`, bottom first), ``rules`` sits between the analyses
  and the engine, and ``runtime_check`` (its own tool) imports nothing of ``auditor``;
* renderers (``auditor.output``) read result models only (:data:`RENDERER_READS`);
* no import cycle among our modules, function-level imports included;
* the engine never imports the rules package at run time (the command line hands the
  engine its rules).

Each check is shown to fail on a planted violation.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("auditor", "rules", "runtime_check")

# Bottom first. A module may import from its own layer and any layer below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("auditor",),  # the package root: its version only
    ("auditor.common",),  # errors, paths, atomic writes, progress, settings
    ("auditor.model",),  # result models
    ("auditor.source",),
    ("auditor.facts",),
    ("auditor.index",),
    ("auditor.analyses",),
    ("auditor.fix",),  # what a rule's autofix is, and the codemod it runs
    ("rules",),
    ("auditor.engine",),
    ("auditor.output",),  # renderers (see RENDERER_READS)
    ("auditor.services",),
    ("auditor.cli", "runtime_check"),
)
# What renderers may read besides the result models and common helpers: the dispatch
# analysis's plan types (annotations only) and the rules' metadata (names, documentation).
RENDERER_READS = ("auditor.common", "auditor.model", "auditor.output", "rules",
                  "auditor.analyses.dispatch")
# The engine's packages: they never import the rules package at run time.
ENGINE = ("auditor.engine", "auditor.analyses", "auditor.index", "auditor.facts", "auditor.source", "auditor.model",
          "auditor.common")


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (or module.name for `from module import name`)
    line: int
    type_only: bool  # inside `if TYPE_CHECKING:`
    nested: bool  # inside a function or class body


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    out = {}
    for pkg in packages:
        for p in (root / pkg).rglob("*.py"):
            if "stubs" not in p.parts:
                out[_module_name(p, root)] = p
    return out


def _absolute(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str, path: Path) -> list[Import]:
    """Every import statement of the file, wherever it stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, type_only: bool, nested: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                visit(child, True, nested)
            for child in node.orelse:
                visit(child, type_only, nested)
            return
        if isinstance(node, ast.Import):
            found.extend(Import(module, a.name, node.lineno, type_only, nested) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, is_pkg, node)
            found.append(Import(module, base, node.lineno, type_only, nested))
            found.extend(Import(module, f"{base}.{a.name}", node.lineno, type_only, nested) for a in node.names)
        inner = nested or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, type_only, inner)

    visit(tree, False, False)
    return found


def _ours(target: str, mods: dict[str, Path]) -> str | None:
    """The module of ours ``target`` names (``pkg.mod.name`` -> ``pkg.mod``), if any."""
    while target:
        if target in mods:
            return target
        target = target.rpartition(".")[0]
    return None


def _layer(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), i)
    return None if best is None else best[1]


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def upward_imports(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    mods = modules(root, packages)
    bad: list[str] = []
    for m, p in sorted(mods.items()):
        mine = _layer(m)
        seen: set[tuple[int, str]] = set()
        for imp in imports(m, p):
            target = _ours(imp.target, mods)
            if target is None or target == m or (imp.line, target) in seen:
                continue
            seen.add((imp.line, target))
            theirs = _layer(target)
            if mine is None or theirs is None:
                bad.append(f"{m}:{imp.line} imports {target}: a module outside LAYERS")
            elif theirs > mine:
                bad.append(f"{m}:{imp.line} imports {target} (layer {LAYERS[theirs][0]} is above {LAYERS[mine][0]})")
            elif m.startswith("runtime_check") and target.startswith("auditor"):
                bad.append(f"{m}:{imp.line} imports {target}: runtime_check is its own tool")
    return bad


def renderer_reads(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    mods = modules(root, packages)
    bad: list[str] = []
    for m, p in sorted(mods.items()):
        if not _within(m, ("auditor.output",)):
            continue
        for imp in imports(m, p):
            target = _ours(imp.target, mods)
            if target is None or target == "auditor" or _within(target, RENDERER_READS):
                continue
            line = f"{m}:{imp.line} imports {target}"
            if line not in bad:
                bad.append(line)
    return bad


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> nx.DiGraph:
    """Our modules and who imports whom at run time (annotation-only imports left out)."""
    mods = modules(root, packages)
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for m, p in mods.items():
        for imp in imports(m, p):
            if imp.type_only:
                continue
            target = _ours(imp.target, mods)
            if target is not None and target != m and not m.startswith(target + "."):
                g.add_edge(m, target)
    return g


# --------------------------------------------------------------------------- the checks


def test_imports_point_down_the_layers():
    bad = upward_imports()
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_renderers_read_result_models_only():
    bad = renderer_reads()
    assert not bad, "renderers reading beyond result models:\n" + "\n".join(bad)


def test_no_import_cycle():
    cycles = list(nx.simple_cycles(import_graph()))
    assert not cycles, f"import cycles (function-level imports included): {cycles[:5]}"


def test_the_engine_never_imports_the_rules_package():
    mods = modules()
    for m, p in sorted(mods.items()):
        if not _within(m, ENGINE):
            continue
        bad = {i.target for i in imports(m, p) if not i.type_only and (i.target == "rules" or i.target.startswith("rules."))}
        assert not bad, f"{m} imports {sorted(bad)}"


def test_every_package_of_auditor_has_a_layer():
    assert not [m for m in modules() if _layer(m) is None]


# --------------------------------------------------------------------------- planted violations


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for d in ("auditor", "auditor/index", "auditor/cli", "auditor/output", "auditor/engine", "auditor/model"):
        (tmp_path / d).mkdir(parents=True, exist_ok=True)
        (tmp_path / d / "__init__.py").touch()
    return tmp_path


def test_a_planted_upward_import_in_a_function_is_found(tmp_path):
    root = _plant(tmp_path, {
        "auditor/index/index.py": "def load():\n    from ..cli.app import main\n    return main\n",
        "auditor/cli/app.py": "def main():\n    pass\n",
    })
    assert upward_imports(root, ("auditor",)) == [
        "auditor.index.index:2 imports auditor.cli.app (layer auditor.cli is above auditor.index)"]


def test_a_planted_type_only_upward_import_is_found(tmp_path):
    root = _plant(tmp_path, {
        "auditor/model/findings.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..engine.scan import Scan\n",
        "auditor/engine/scan.py": "class Scan:\n    pass\n",
    })
    assert len(upward_imports(root, ("auditor",))) == 1


def test_a_planted_renderer_reading_the_engine_is_found(tmp_path):
    root = _plant(tmp_path, {
        "auditor/output/text.py": "from ..engine.scan import Scan\nfrom ..model.findings import Finding\n",
        "auditor/engine/scan.py": "class Scan:\n    pass\n",
        "auditor/model/findings.py": "class Finding:\n    pass\n",
    })
    assert renderer_reads(root, ("auditor",)) == ["auditor.output.text:1 imports auditor.engine.scan"]


def test_a_planted_cycle_through_a_function_level_import_is_found(tmp_path):
    root = _plant(tmp_path, {
        "auditor/engine/a.py": "from . import b\n",
        "auditor/engine/b.py": "def f():\n    from .a import x\n",
    })
    assert list(nx.simple_cycles(import_graph(root, ("auditor",))))


def _rule_code_literals(root: Path, package: str) -> list[str]:
    import re

    code = re.compile(r"MTP\d{3}")
    found = []
    for p in sorted((root / package).rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings and code.fullmatch(n.value):
                found.append(f"{p.relative_to(root)}:{n.lineno} {n.value!r}")
    return found


def test_analyses_never_name_a_rule_code():
    """What a finding means is its typed ``meaning`` (declared by its rule); analyses never
    select findings by rule code."""
    assert not _rule_code_literals(ROOT, "auditor/analyses")


def test_a_planted_rule_code_in_an_analysis_is_found(tmp_path):
    (tmp_path / "auditor" / "analyses").mkdir(parents=True)
    (tmp_path / "auditor" / "analyses" / "x.py").write_text('"""MTP001 in a docstring is prose."""\nLOSING = ("MTP001",)\n')
    assert _rule_code_literals(tmp_path, "auditor/analyses") == ["auditor/analyses/x.py:2 'MTP001'"]


# Rule output: what a scan's rules report. Analyses compute facts (where a step is lost, which
# gate a configuration closes, where a compiled forward freezes it); the services layer joins
# them with findings (auditor/services/citations.py).
RULE_OUTPUT = ("auditor.model.findings.Finding", "auditor.model.findings.Meaning")


def analyses_reading_rule_output(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    mods = modules(root, packages)
    return [f"{m}:{imp.line} imports {imp.target}" for m, p in sorted(mods.items()) if _within(m, ("auditor.analyses",))
            for imp in imports(m, p) if imp.target in RULE_OUTPUT]


def test_analyses_never_read_rule_output():
    assert analyses_reading_rule_output() == []


def test_a_planted_analysis_reading_findings_is_found(tmp_path):
    root = _plant(tmp_path, {
        "auditor/analyses/__init__.py": "",
        "auditor/analyses/planner.py": "def plan(findings):\n    from ..model.findings import Finding, Hop\n",
        "auditor/model/findings.py": "class Finding:\n    pass\nclass Hop:\n    pass\n",
    })
    assert analyses_reading_rule_output(root, ("auditor",)) == [
        "auditor.analyses.planner:2 imports auditor.model.findings.Finding"]


def private_rule_imports(tests: Path) -> list[str]:
    """Tests importing a private name of a rule module (a rule's internals are no fixture)."""
    found = []
    for p in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rules.mtp"):
                found += [f"{p.name}:{node.lineno} {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    return found


def test_tests_take_their_fixtures_from_tests():
    assert not private_rule_imports(ROOT / "tests")


def test_a_planted_private_rule_import_is_found(tmp_path):
    (tmp_path / "test_x.py").write_text("from rules.mtp006_gate_reads_other_field import _tree\n")
    assert private_rule_imports(tmp_path) == ["test_x.py:1 rules.mtp006_gate_reads_other_field._tree"]
