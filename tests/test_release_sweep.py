"""Every final vLLM release X.Y.Z from 0.10.0 to 0.34.0 scans without a crash.

The versions come from the package index (``auditor.fetch.list_sdists``): final releases
with exactly three release components and an sdist, no pre/post/dev/local versions and
no yanked files. When the marker expression deselects ``release`` tests, or the index
cannot be reached, the list falls back to the releases already complete in the shared
test cache (so collection never blocks on the network for an unrelated test run).

Each release is fetched once into the shared test cache (``release_cache``) and scanned
once (``release_scan``, module-scoped per release) with ``workers=2`` and the persistent facts
cache under the same directory, so unchanged files are analysed once across releases and
across test runs. Two checks read that scan: the sweep's own (below) and every view against
the routes (:mod:`route_views`, issue 18); the scan asks the view check's plans before the
freeze, as ``layers --all`` does. A per-version table (files, findings by rule, problems,
seconds of the scan with its plans) is written to ``test-artifacts/release-sweep.{json,md}``
and printed at the end of the module (``-s``).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest
from packaging.version import Version
from release_cache import REPO_ROOT, first_scan, release_cache_dir, release_root
from route_views import plan_query, view_problems

from auditor.facts.cache import FactsCache
from auditor.common.config import Config
from auditor.engine.scan import Scan, run_scan
from auditor.common.errors import FetchError
from auditor.model.findings import ScanResult, Severity
from auditor.services.layers import PlanQuery
from auditor.source.trees import DirectoryTree
from rules import all_rules

pytestmark = pytest.mark.release

FIRST, LAST = Version("0.10.0"), Version("0.34.0")
RULE_CODE = re.compile(r"^MTP00\d$")
PROBLEM_KINDS = {"parse-error", "decode-error", "unreadable", "too-large", "symlink"}
ARTIFACTS = REPO_ROOT / "test-artifacts"

_ROWS: dict[str, dict] = {}


def _in_range(v: str) -> bool:
    try:
        ver = Version(v)
    except Exception:
        return False
    return (
        len(ver.release) == 3
        and not (ver.is_prerelease or ver.is_postrelease or ver.is_devrelease or ver.local)
        and FIRST <= ver <= LAST
    )


def _cached_versions() -> list[str]:
    rel = release_cache_dir() / "releases"
    out = []
    if rel.is_dir():
        for d in rel.iterdir():
            if d.name.startswith("vllm-") and (d / ".complete").is_file() and _in_range(d.name[5:]):
                out.append(d.name[5:])
    return out


def _index_versions() -> list[str]:
    from auditor.source.fetch import list_sdists

    sdists, _ = list_sdists()
    return [s.version for s in sdists if not s.yanked and _in_range(s.version)]


def _release_tests_selected(config) -> bool:
    markexpr = config.getoption("markexpr", default="") or ""
    if not markexpr:
        return True
    try:  # pytest's own evaluator (private module, stable since pytest 6)
        from _pytest.mark.expression import Expression

        def matcher(name: str, **kwargs) -> bool:
            return name == "release"

        return bool(Expression.compile(markexpr).evaluate(matcher))
    except Exception:
        return "release" in markexpr and "not release" not in markexpr


def sweep_versions(config) -> list[str]:
    """The sweep's releases, oldest first."""
    versions: list[str] = []
    if _release_tests_selected(config):
        try:
            versions = _index_versions()
        except FetchError as exc:
            warnings.warn(f"release sweep: package index unreachable ({exc}); using cached releases only")
    if not versions:
        versions = _cached_versions()
    return sorted(set(versions), key=Version)


def parametrize_versions(metafunc) -> None:
    """``version`` over the sweep's releases, oldest first, module-scoped: pytest runs every
    test of one release before the next, so the release's scan (``release_scan``) is made once
    and dropped before the next is made."""
    if "version" not in metafunc.fixturenames:
        return
    versions = sweep_versions(metafunc.config)
    if not versions:
        metafunc.parametrize("version", [pytest.param("none", marks=pytest.mark.skip("no releases available"))],
                             scope="module")
        return
    metafunc.parametrize("version", versions, scope="module")


def pytest_generate_tests(metafunc):
    parametrize_versions(metafunc)


@dataclass(frozen=True)
class ReleaseScan:
    root: Path
    tree: DirectoryTree
    scan: Scan
    query: PlanQuery  # the route views' plans (its settings are read after the scan)
    seconds: float


@pytest.fixture(scope="module")
def release_scan(version: str) -> ReleaseScan:
    """The release's one scan, with the route views' plans asked before the freeze."""
    try:
        root = release_root(version)
    except FetchError as exc:
        pytest.skip(f"cannot fetch vllm {version}: {exc}")
    tree = DirectoryTree(root)
    query = plan_query()
    started = time.perf_counter()
    with first_scan(version):  # the shared facts cache (the history and layers tests' too)
        scan = run_scan(tree, Config(), all_rules(), FactsCache(release_cache_dir()), workers=2, queries=[query])
    return ReleaseScan(Path(root), tree, scan, query, time.perf_counter() - started)


@pytest.fixture(scope="module", autouse=True)
def _sweep_table():
    yield
    if not _ROWS:
        return
    rows = [_ROWS[v] for v in sorted(_ROWS, key=Version)]
    rules = sorted({r for row in rows for r in row["by_rule"]})
    lines = [
        "| version | files | parsed | " + " | ".join(rules) + " | findings | problems (parse-error) | reach | seconds |",
        "|---|---:|---:|" + "---:|" * len(rules) + "---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['version']} | {row['files']} | {row['files_analysed']} | "
            + " | ".join(str(row["by_rule"].get(r, 0)) for r in rules)
            + f" | {row['findings']} | {row['problems']} ({row['parse_errors']}) | {row['reachability']} |"
            f" {row['seconds']:.1f} |"
        )
    total = sum(r["seconds"] for r in rows)
    lines.append(f"\n{len(rows)} releases, {total:.0f} s of scanning.")
    table = "\n".join(lines)
    try:
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "release-sweep.json").write_text(json.dumps(rows, indent=2) + "\n")
        (ARTIFACTS / "release-sweep.md").write_text(table + "\n")
    except OSError:
        pass
    print("\n" + table)


def _check_relpath(path: str, files: set[str], root: Path, what: str) -> None:
    assert path, f"{what}: empty path"
    p = PurePosixPath(path)
    assert not p.is_absolute() and "\\" not in path, f"{what}: path not relative POSIX: {path!r}"
    assert ".." not in p.parts, f"{what}: path escapes the tree: {path!r}"
    assert path in files, f"{what}: {path!r} is not a .py file of the tree"
    assert (root / path).is_file(), f"{what}: {path!r} does not exist under {root}"


# Whether CPython parses a file, by its bytes: consecutive releases share most files, and the
# same bytes always parse the same way, so each distinct file is parsed once per worker.
_PARSES: dict[bytes, bool] = {}


def _parses(source: bytes, path: str) -> bool:
    key = hashlib.sha256(source).digest()
    if key not in _PARSES:
        try:
            ast.parse(source, filename=path)
            _PARSES[key] = True
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            _PARSES[key] = False
    return _PARSES[key]


def test_release_scans_without_crash(version, release_scan):
    root, tree, scan, seconds = release_scan.root, release_scan.tree, release_scan.scan, release_scan.seconds
    result = scan.result
    assert isinstance(result, ScanResult)

    files = set(tree.python_files())
    assert files, "no .py files under vllm/"
    assert result.stats["files"] == len(files)

    line_counts: dict[str, int] = {}

    def nlines(path: str) -> int:
        if path not in line_counts:
            line_counts[path] = (root / path).read_bytes().count(b"\n") + 1
        return line_counts[path]

    # findings are well-formed
    seen_fp = set()
    for f in result.findings:
        where = f"{f.rule} {f.path}:{f.line}"
        assert RULE_CODE.match(f.rule), f"unexpected rule code {f.rule!r}"
        assert isinstance(f.severity, Severity)
        _check_relpath(f.path, files, root, where)
        assert 1 <= f.line <= nlines(f.path), f"{where}: line out of range"
        assert f.column >= 0, where
        assert f.function and f.message, where
        assert f.fingerprint and f.fingerprint not in seen_fp, f"{where}: missing or duplicate fingerprint"
        seen_fp.add(f.fingerprint)
        for hop in f.trace:
            _check_relpath(hop.path, files, root, f"{where} trace hop")
            assert 1 <= hop.line <= nlines(hop.path), f"{where}: trace hop {hop.path}:{hop.line} out of range"
        for cls in f.affected_classes:
            _check_relpath(cls.path, files, root, f"{where} affected class")
        json.dumps(f.to_json())  # serialisable

    # problems: relative paths, known kinds; no file reported twice
    problem_of = {}
    for p in result.problems:
        assert p.kind in PROBLEM_KINDS, f"unknown problem kind {p.kind!r} for {p.path}"
        assert not PurePosixPath(p.path).is_absolute() and ".." not in PurePosixPath(p.path).parts, p.path
        assert p.path not in problem_of, f"{p.path} reported twice"
        problem_of[p.path] = p

    # every file the scan tried to analyse and that this Python cannot parse is a parse-error problem;
    # every analysed file that parses has facts
    index = scan.analysis.index
    for path, facts in index.facts.items():
        if path in problem_of and problem_of[path].kind in ("unreadable", "too-large", "symlink"):
            continue
        parses = _parses((root / path).read_bytes(), path)
        if not parses:
            assert path in problem_of and problem_of[path].kind in ("parse-error", "decode-error"), (
                f"{path} does not parse but is not a parse-error problem"
            )
            assert facts is None
        else:
            assert path not in problem_of, f"{path} parses but is reported as {problem_of[path]}"
            assert facts is not None, f"{path} parses but has no facts"
    for p in result.problems:
        if p.kind == "parse-error":
            assert p.path in index.facts and index.facts[p.path] is None

    # the rest of the tree was still analysed
    assert result.stats["files_analysed"] > 0
    assert result.findings or result.reachability, "scan produced neither findings nor reachability"
    json.dumps(result.to_json())

    by_rule: dict[str, int] = {}
    for f in result.findings:
        by_rule[f.rule] = by_rule.get(f.rule, 0) + 1
    _ROWS[version] = {
        "version": version,
        "files": len(files),
        "files_analysed": result.stats["files_analysed"],
        "findings": len(result.findings),
        "by_rule": dict(sorted(by_rule.items())),
        "problems": len(result.problems),
        "parse_errors": sum(1 for p in result.problems if p.kind == "parse-error"),
        "problem_list": [p.to_json() for p in result.problems],
        "reachability": len(result.reachability),
        "seconds": round(seconds, 2),
        "files_parsed": scan.timing.get("files_parsed"),
        "cache_hits": scan.timing.get("cache_hits"),
    }


def test_views_agree_with_the_routes(version: str, release_scan: ReleaseScan) -> None:
    """Every view summarises the same routes (:mod:`route_views`)."""
    problems = view_problems(version, release_scan.scan, release_scan.query)
    assert not problems, "\n".join(problems)
