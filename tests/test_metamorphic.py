"""Metamorphic tests on real vLLM code (release 0.22.1): edits that do not change what the
code does must not change the findings.

Each test copies the release's ``vllm/`` to a temporary directory, applies one
behaviour-preserving edit, scans, and compares the set of ``(rule, fingerprint)`` with a
scan of the unedited copy. Edits are made with ``ast`` positions, never by textual search
and replace, so they touch exactly the intended names and blocks.

A fingerprint hashes the rule, the file, the enclosing function, the callee and a
rule-chosen key (README, "Output formats"). Renaming a local, reordering methods, and adding
comments or blank lines change none of these. Moving a class to another module changes the
*file* of everything inside that class, so:

* moving a class that holds no finding (the predictor ``Qwen3_5MultiTokenPredictor``, whose
  ``forward`` selects the layer) must leave every fingerprint unchanged; only the trace hop
  into the predictor now names the new file;
* moving a class that holds a finding (the wrapper ``Qwen3_5MTP``) changes that finding's
  path and therefore its fingerprint, by design (a fingerprint is per file, like SARIF's
  ``partialFingerprints`` are per artifact). "Does not change" then means: the same findings
  by rule, function, callee and message exist, the moved ones now at the new path, and every
  other fingerprint is unchanged.
"""

from __future__ import annotations

import ast
import io
import re
import shutil
import tokenize
from pathlib import Path

import pytest

from auditor.facts.cache import FactsCache
from auditor.common.config import Config
from auditor.engine.scan import run_scan
from auditor.source.trees import DirectoryTree
from rules import all_rules

pytestmark = pytest.mark.release

VERSION = "0.22.1"
MODELS = "vllm/model_executor/models"
QWEN35 = f"{MODELS}/qwen3_5_mtp.py"
EDITED_FILES = [
    QWEN35,
    f"{MODELS}/qwen3_next_mtp.py",
    f"{MODELS}/deepseek_mtp.py",
    f"{MODELS}/glm4_moe_mtp.py",
    "vllm/v1/spec_decode/llm_base_proposer.py",
    "vllm/v1/worker/gpu/spec_decode/eagle/speculator.py",
]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    from release_cache import release_root

    return release_root(VERSION)


@pytest.fixture(scope="module")
def facts_cache(tmp_path_factory):
    # Shared by the tests of this module: keyed by path and content, so each scan parses
    # only the files its edit touched.
    return tmp_path_factory.mktemp("facts-cache")


def copy_release(release: Path, dest: Path) -> Path:
    shutil.copytree(release / "vllm", dest / "vllm", symlinks=True)
    return dest


def scan(root: Path, cache: Path):
    return run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(cache), 2).result


@pytest.fixture(scope="module")
def baseline(release, facts_cache, tmp_path_factory):
    root = copy_release(release, tmp_path_factory.mktemp("baseline"))
    result = scan(root, facts_cache)
    rules = {f.rule for f in result.findings}
    assert {"MTP001", "MTP002"} <= rules, rules
    assert any(f.path == QWEN35 for f in result.findings)
    return result


def fingerprints(result) -> set[tuple[str, str]]:
    return {(f.rule, f.fingerprint) for f in result.findings}


def same_findings_apart_from_lines(a, b) -> None:
    assert fingerprints(a) == fingerprints(b)
    key = lambda f: (f.rule, f.path, f.function, f.callee, f.message)  # noqa: E731
    assert sorted(map(key, a.findings)) == sorted(map(key, b.findings))
    assert [p.to_json() for p in a.problems] == [p.to_json() for p in b.problems]


# --------------------------------------------------------------------------- edits


def _function(tree: ast.Module, qualname: str) -> ast.FunctionDef:
    cls, _, name = qualname.rpartition(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                    return item
    raise AssertionError(f"{qualname} not found")


def rename_local(src: str, qualname: str, old: str, new: str) -> str:
    """Rename a local variable of one function: exactly its ``ast.Name`` occurrences."""
    func = _function(ast.parse(src), qualname)
    spots = sorted(
        {(n.lineno, n.col_offset) for n in ast.walk(func) if isinstance(n, ast.Name) and n.id == old}, reverse=True
    )
    assert len(spots) >= 2, f"{old} is not a local of {qualname}"
    assert new not in src
    lines = src.splitlines(keepends=True)
    for line, col in spots:
        text = lines[line - 1]
        assert text[col : col + len(old)] == old
        lines[line - 1] = text[:col] + new + text[col + len(old) :]
    return "".join(lines)


def _start(node: ast.AST) -> int:
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def reorder_methods(src: str) -> tuple[str, int]:
    """Reverse the order of the methods of every top-level class (each method carries the
    comments and blank lines above it). Classes defining a name twice (property setters) are
    left alone: there the order matters."""
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    edits = []
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        methods = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        names = [m.name for m in methods]
        if len(methods) < 2 or len(set(names)) != len(names):
            continue
        if cls.body.index(methods[0]) + len(methods) != len(cls.body):
            continue  # statements between or after the methods: keep it simple
        first = _start(methods[0])
        chunks, prev_end = [], first - 1
        for i, m in enumerate(methods):
            begin = prev_end + 1 if i else first
            chunks.append("".join(lines[begin - 1 : m.end_lineno]))
            prev_end = m.end_lineno
        body = "".join(c if c.endswith("\n") else c + "\n" for c in reversed(chunks))
        edits.append((first, methods[-1].end_lineno, body))
    for first, last, body in sorted(edits, reverse=True):
        lines[first - 1 : last] = [body]
    return "".join(lines), len(edits)


def add_comments_and_blank_lines(src: str) -> str:
    """A comment and a blank line above every def/class (and its decorators), a comment at the
    end of every line that ends a statement or continues a bracketed expression, and blank
    lines at the top of the file."""
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    ends: dict[int, int] = {}
    commented: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            commented.add(tok.start[0])
        elif tok.type in (tokenize.NEWLINE, tokenize.NL) and tok.string:
            ends[tok.start[0]] = tok.start[1]
    for line, col in ends.items():
        if line in commented or not lines[line - 1].strip():
            continue
        text = lines[line - 1]
        lines[line - 1] = text[:col] + "  # metamorphic: trailing comment" + text[col:]
    starts = sorted({_start(n) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))},
                    reverse=True)
    for line in starts:
        indent = re.match(r"\s*", lines[line - 1]).group(0)
        lines.insert(line - 1, f"{indent}# metamorphic: a comment above\n\n")
    return "\n\n# metamorphic: leading comment\n\n" + "".join(lines)


def move_class(root: Path, src_rel: str, names: list[str], new_module: str) -> Path:
    """Move top-level classes to ``new_module`` (same package), with the source module's
    imports, and import them back into the source module (the registry still names it)."""
    path = root / src_rel
    src = path.read_text()
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    header_end = next(_start(n) for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))) - 1
    header = "".join(lines[:header_end])
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in names]
    assert [c.name for c in classes] == names
    moved = ["".join(lines[_start(c) - 1 : c.end_lineno]) for c in classes]
    for c in sorted(classes, key=_start, reverse=True):
        del lines[_start(c) - 1 : c.end_lineno]
    pkg = ".".join(Path(src_rel).with_suffix("").parts[:-1])
    back = f"from {pkg}.{new_module} import {', '.join(names)}  # noqa: E402, F401\n"
    lines.insert(header_end, back)
    path.write_text("".join(lines))
    # Anything the moved classes use from the rest of the source module comes along by import.
    rest = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name not in names}
    rest |= {t.id for n in tree.body if isinstance(n, ast.Assign) and n.lineno > header_end
             for t in n.targets if isinstance(t, ast.Name)}
    rest = sorted(rest)
    extra = f"from {pkg}.{Path(src_rel).stem} import {', '.join(rest)}  # noqa: F401\n" if rest else ""
    new = path.with_name(new_module + ".py")
    new.write_text(header + extra + "\n\n" + "\n\n".join(moved))
    ast.parse(new.read_text())
    ast.parse(path.read_text())
    return new


# --------------------------------------------------------------------------- tests


def test_rename_local_variables(release, baseline, facts_cache, tmp_path):
    root = copy_release(release, tmp_path)
    p = root / QWEN35
    p.write_text(rename_local(p.read_text(), "Qwen3_5MultiTokenPredictor.forward", "current_step_idx", "which_layer"))
    prop = root / "vllm/v1/spec_decode/llm_base_proposer.py"
    prop.write_text(rename_local(prop.read_text(), "SpecDecodeBaseProposer.propose", "token_index", "draft_step"))
    assert "current_step_idx" not in p.read_text()
    same_findings_apart_from_lines(scan(root, facts_cache), baseline)


def test_reorder_methods(release, baseline, facts_cache, tmp_path):
    root = copy_release(release, tmp_path)
    reordered = 0
    for rel in EDITED_FILES:
        p = root / rel
        text, n = reorder_methods(p.read_text())
        ast.parse(text)
        p.write_text(text)
        reordered += n
    assert reordered >= 6
    result = scan(root, facts_cache)
    same_findings_apart_from_lines(result, baseline)
    assert [f.line for f in result.findings] != [f.line for f in baseline.findings]


def test_add_comments_and_blank_lines(release, baseline, facts_cache, tmp_path):
    root = copy_release(release, tmp_path)
    for rel in EDITED_FILES:
        p = root / rel
        text = add_comments_and_blank_lines(p.read_text())
        ast.parse(text)
        p.write_text(text)
    result = scan(root, facts_cache)
    same_findings_apart_from_lines(result, baseline)
    assert all(a.line != b.line for a, b in zip(sorted(result.findings, key=lambda f: f.fingerprint),
                                                 sorted(baseline.findings, key=lambda f: f.fingerprint)))


def test_move_class_without_findings(release, baseline, facts_cache, tmp_path):
    root = copy_release(release, tmp_path)
    new = move_class(root, QWEN35, ["Qwen3_5MultiTokenPredictor"], "qwen3_5_mtp_predictor")
    result = scan(root, facts_cache)
    same_findings_apart_from_lines(result, baseline)
    new_rel = new.relative_to(root).as_posix()
    moved = [f for f in result.findings if f.path == QWEN35 and f.rule == "MTP001"]
    assert moved and all(f.trace[-1].path == new_rel for f in moved)  # the hop into the predictor moved


def test_move_class_with_a_finding(release, baseline, facts_cache, tmp_path):
    root = copy_release(release, tmp_path)
    new = move_class(root, QWEN35, ["Qwen3_5MTP", "Qwen3_5MoeMTP"], "qwen3_5_mtp_wrappers")
    new_rel = new.relative_to(root).as_posix()
    result = scan(root, facts_cache)
    in_moved = lambda f: f.function.split(".")[0] in ("Qwen3_5MTP", "Qwen3_5MoeMTP")  # noqa: E731
    before_moved = [f for f in baseline.findings if f.path == QWEN35 and in_moved(f)]
    after_moved = [f for f in result.findings if f.path == new_rel]
    assert before_moved, "the wrapper's MTP001 is what this test moves"
    key = lambda f: (f.rule, f.function, f.callee, f.message)  # noqa: E731
    assert sorted(map(key, after_moved)) == sorted(map(key, before_moved))
    rest_before = {(f.rule, f.fingerprint) for f in baseline.findings if f not in before_moved}
    rest_after = {(f.rule, f.fingerprint) for f in result.findings if f not in after_moved}
    assert rest_after == rest_before
    # the affected-class list follows the class to its new file
    assert all(any(c.path == new_rel for c in f.affected_classes) for f in after_moved)
