"""Shared, reusable cache of real vLLM release sdists for tests.

``release_root("0.10.0")`` returns the directory holding ``vllm/`` of that release,
downloading it through the configured package index on first use only. The cache is
``$MTP_AUDIT_CACHE_DIR`` when set, else ``<repo>/.cache/mtp-audit`` (gitignored), so
downloads survive between test runs and are shared by every test module.

Tests that use it should be marked ``@pytest.mark.release``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from auditor.source.fetch import fetch_release

REPO_ROOT = Path(__file__).resolve().parent.parent


def release_cache_dir() -> Path:
    env = os.environ.get("MTP_AUDIT_CACHE_DIR")
    return Path(env).expanduser() if env else REPO_ROOT / ".cache" / "mtp-audit"


@lru_cache(maxsize=None)
def release_root(version: str) -> Path:
    """Directory containing the ``vllm/`` package of release ``version`` (fetched once)."""
    return fetch_release(version, release_cache_dir(), progress=False)


@contextmanager
def first_scan(version: str) -> Iterator[None]:
    """Held around a test's scan of a release into the shared facts cache
    (``FactsCache(release_cache_dir())``): the first process to scan the release parses it,
    the others wait for it and then read its facts.

    With pytest-xdist, files that scan the same releases in the same order (the sweep, the
    route views, the history and layers tests) run on different workers at the same time;
    without the lock each parsed every release again, in parallel. A mark per release and
    extractor digest says it is done (an extractor change writes facts under other keys, so
    the first scan after it parses again). Every test still runs its own scan."""
    from filelock import FileLock

    from auditor.facts.cache import extractor_digest

    marks = release_cache_dir() / "facts-warm"
    marks.mkdir(parents=True, exist_ok=True)
    mark = marks / f"{version}-{extractor_digest()}"
    if mark.is_file():
        yield
        return
    lock = FileLock(str(mark) + ".lock")
    lock.acquire()
    if mark.is_file():  # another worker scanned it while this one waited
        lock.release()
        yield
        return
    try:
        yield
        mark.touch()
    finally:
        lock.release()


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
