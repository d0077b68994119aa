"""Helpers for tests that scan small trees written on the fly or real releases."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from auditor.facts.cache import FactsCache
from auditor.common.config import Config
from auditor.engine.scan import Scan, run_scan
from auditor.source.trees import DirectoryTree
from rules import all_rules


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
    # Every directory under vllm/ is a package, as in the real tree.
    for d in [root / "vllm", *(root / "vllm").rglob("*")]:
        if d.is_dir() and not (d / "__init__.py").exists():
            (d / "__init__.py").write_text("")
    return root


def scan_tree(root: Path, config: Config | None = None, cache_dir: Path | None = None, workers: int = 1) -> Scan:
    return run_scan(DirectoryTree(root), config or Config(), all_rules(), FactsCache(cache_dir), workers)


@lru_cache(maxsize=None)
def scan_release(version: str) -> Scan:
    from release_cache import first_scan, release_cache_dir, release_root

    root = release_root(version)
    with first_scan(version):
        return run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(release_cache_dir()), 2)


def ids_by_rule(root: Path, files: dict[str, str | bytes], expected: set[str]) -> dict[str, str]:
    """The fingerprints of a tree's findings, by rule; the tree has at least the ``expected``
    rules' findings (it does what the test says)."""
    found = {f.rule: f.fingerprint for f in scan_tree(write_tree(root, files)).result.findings}
    assert set(found) >= expected, found
    return found


def by_rule(scan: Scan, rule: str) -> list:
    return [f for f in scan.result.findings if f.rule == rule]


# A git identity and configuration for the repositories tests make (no user or system config read).
GIT_ENV = dict(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t",
               GIT_CONFIG_NOSYSTEM="1", GIT_ALLOW_PROTOCOL="file")


def git(repo: Path, *args: str) -> str:
    """``git ARGS`` in ``repo`` (a test's own repository); its stdout. Fails the test on an error."""
    import os
    import subprocess

    return subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=repo, check=True,
                          capture_output=True, text=True, env={**os.environ, **GIT_ENV}).stdout
