"""Shared, reusable cache of real vLLM release sdists for tests.

``release_root("0.10.0")`` returns the directory holding ``vllm/`` of that release,
downloading it through the configured package index on first use only. The cache is
``$MTP_AUDIT_CACHE_DIR`` when set, else ``<repo>/.cache/mtp-audit`` (gitignored), so
downloads survive between test runs and are shared by every test module.

Tests that use it should be marked ``@pytest.mark.release``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from auditor.source.fetch import fetch_release

REPO_ROOT = Path(__file__).resolve().parent.parent


def release_cache_dir() -> Path:
    env = os.environ.get("MTP_AUDIT_CACHE_DIR")
    return Path(env).expanduser() if env else REPO_ROOT / ".cache" / "mtp-audit"


@lru_cache(maxsize=None)
def release_root(version: str) -> Path:
    """Directory containing the ``vllm/`` package of release ``version`` (fetched once), with
    its facts in the shared facts cache (see :func:`_warm_facts`)."""
    root = fetch_release(version, release_cache_dir(), progress=False)
    _warm_facts(version, root)
    return root


def _warm_facts(version: str, root: Path) -> None:
    """Scan a release once into the shared facts cache, under a lock per release.

    With pytest-xdist, files that scan the same releases in the same order (the sweep, the
    route views, the history and layers tests) run on different workers at the same time;
    without the lock each worker parsed every release again, in parallel. The first worker
    to ask scans; the others wait and then read its facts. A mark per release and extractor
    digest says it is done (an extractor change writes facts under other keys, so it warms
    again). Every test still runs its own scan."""
    from filelock import FileLock

    from auditor.common.config import Config
    from auditor.engine.scan import run_scan
    from auditor.facts.cache import FactsCache, extractor_digest
    from auditor.source.trees import DirectoryTree
    from rules import all_rules

    marks = release_cache_dir() / "facts-warm"
    marks.mkdir(parents=True, exist_ok=True)
    mark = marks / f"{version}-{extractor_digest()}"
    if mark.is_file():
        return
    with FileLock(str(mark) + ".lock"):
        if not mark.is_file():
            run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(release_cache_dir()), 2)
            mark.touch()


def shared_cache_dir(tmp_path_factory) -> Path:
    """``$MTP_AUDIT_CACHE_DIR`` when set, else a fresh per-session temporary directory."""
    env = os.environ.get("MTP_AUDIT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return tmp_path_factory.getbasetemp() / "mtp-audit-cache"


def fresh_cache_dir(path: Path) -> Path:
    """A new cache directory at ``path`` with no results, plans or answers in it, whose facts
    are the shared release cache's (``<cache>/facts`` is a link to them).

    A facts entry is keyed on the file's content and on the extractor's code, so reading one
    extracted by another test is exactly what a user's second scan of that file does. What a
    test using this proves about a *first* run (nothing read from the result or plan cache)
    still holds; only the per-file parsing is shared, instead of repeated per test."""
    shared = release_cache_dir() / "facts"
    shared.mkdir(parents=True, exist_ok=True)
    path.mkdir(parents=True, exist_ok=True)
    (path / "facts").symlink_to(shared, target_is_directory=True)
    return path
