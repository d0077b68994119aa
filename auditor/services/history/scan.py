"""Scanning revisions of a git repository: one :class:`Scanner`, the ``history`` and ``diff`` runs.

Every revision is read straight from git objects (:class:`~auditor.gittree.GitTree`),
never checked out; the facts cache and the per-revision result cache make repeated
runs cheap.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

import git
from packaging.version import Version

from ...facts.cache import FactsCache
from ...common.config import Config
from ...common.errors import GitError, UsageError
from ...source.gittree import PACKAGE, GitTree, NoVllmInTree, tag_version, is_shallow, list_release_tags, open_repo, resolve_commit
from ...common.progress import Progress
from ...engine.mtp_presence import NO_MTP_CODE, has_mtp_code, hidden_files

if TYPE_CHECKING:
    from ...engine.scan import RuleClass
from ...engine.result_cache import ResultCache
from ..lint_changes import meanings_of
from .compare import compare_scans
from ...model.history import Delta, History, Release

#: default --tags pattern: final releases, including 4-part and .postN versions (v0.10.1.1)
DEFAULT_TAG_PATTERN = r"^v\d+\.\d+\.\d+(\.\d+|\.post\d+)?$"
#: the default pattern with --pre: release candidates, alphas and betas too
DEFAULT_PRE_PATTERN = r"^v\d+\.\d+\.\d+(\.\d+|\.post\d+)?((a|b|rc)\d+)?$"

_VERSION_FORM = re.compile(r"\d+(\.\d+)+([.-]?(post|rc|a|b)\d+)?")


class Scanner:
    """Scans revisions of one repository, sharing the facts cache and the result cache."""

    def __init__(
        self,
        repo: str | Path | git.Repo,
        config: Optional[Config] = None,
        cache_dir: Optional[Path] = None,
        workers: Optional[int] = None,
        *,
        rules: Sequence["RuleClass"],
    ) -> None:
        self.repo = open_repo(repo)
        self.rules = list(rules)
        self.config = config or Config()
        self.facts = FactsCache(cache_dir)
        self.results = ResultCache(cache_dir)
        self.workers = workers
        self.scans = 0  # revisions analysed (not served from the result cache)

    @property
    def name(self) -> str:
        return str(Path(self.repo.working_tree_dir or self.repo.git_dir))

    def release(self, ref: str) -> Release:
        """Scan ``ref``; a tree without ``vllm/`` gives a skipped Release, not an error."""
        from ...engine.scan import run_scan

        commit = resolve_commit(self.repo, ref)
        rel = Release(
            ref=ref,
            commit=commit.hexsha,
            date=commit.committed_datetime.isoformat(),
            subject=commit.summary if isinstance(commit.summary, str) else commit.summary.decode("utf-8", "replace"),
        )
        started = time.perf_counter()
        try:
            tree = GitTree(self.repo, commit.hexsha, label=f"{ref}@{commit.hexsha[:12]}")
        except NoVllmInTree:
            rel.skipped = f"no {PACKAGE}/ directory in this tree"
            return rel
        rel.tree = tree.commit.tree[PACKAGE].hexsha
        scan = run_scan(tree, self.config, self.rules, self.facts, self.workers, self.results, tree_id=rel.tree)
        if scan.analysis is not None:
            self.scans += 1
        if not has_mtp_code(scan.result):
            # not "fixed": a tree without MTP code cannot tell (a move, a vendored copy, docs only)
            hidden = hidden_files(scan.result)
            rel.skipped = f"{NO_MTP_CODE} in this tree" + (
                f" ({len(hidden)} file(s) could not be read or parsed, e.g. {hidden[0]})" if hidden else "")
            rel.seconds = time.perf_counter() - started
            return rel
        rel.result, rel.from_cache = scan.result, scan.analysis is None
        rel.seconds = time.perf_counter() - started
        return rel

    def close(self) -> None:
        self.repo.close()


def scan_refs(scanner: Scanner, refs: list[str], kind: str, progress: Optional[Progress] = None, label: str = "scanning") -> History:
    started = time.perf_counter()
    progress = progress or Progress(quiet=True)
    releases: list[Release] = []
    with progress.steps(label, len(refs)) as step:
        for ref in refs:
            step(ref)
            releases.append(scanner.release(ref))
    deltas: list[Optional[Delta]] = []
    prev: Optional[Release] = None
    meanings = meanings_of(scanner.rules)
    for rel in releases:
        if not rel.scanned:
            deltas.append(None)
            continue
        assert rel.result is not None
        if prev is None:
            deltas.append(Delta(None, introduced=list(rel.result.findings)))
        else:
            assert prev.result is not None
            deltas.append(compare_scans(prev.result, rel.result, prev.ref, meanings))
        prev = rel
    timing = {
        "seconds": time.perf_counter() - started,
        "scanned": scanner.scans,
        "from_cache": sum(1 for r in releases if r.from_cache),
    }
    return History(scanner.name, kind, releases, deltas, timing)


# --------------------------------------------------------------------------- history


def _bound(repo: git.Repo, tags: list[str], ref: str, what: str) -> Version:
    """The version a --from/--to bound stands for (a tag name or a version number)."""
    v = tag_version(ref)
    if v is not None:
        return v
    # an arbitrary ref: accepted when it is a tag whose version we can read
    resolve_commit(repo, ref)  # a clear error for a bad ref
    raise UsageError(f"{what} {ref!r} is not a release tag or version (history walks tags in version order)")


def select_tags(
    repo: git.Repo, start: Optional[str], end: Optional[str], pattern: Optional[str], include_pre: bool
) -> list[str]:
    pattern = pattern or (DEFAULT_PRE_PATTERN if include_pre else DEFAULT_TAG_PATTERN)
    name = str(Path(repo.working_tree_dir or repo.git_dir))
    if not _has_commits(repo):
        raise GitError(f"repository {name} is empty (no commits)")
    tags = list_release_tags(repo, pattern, include_pre)
    shallow = is_shallow(repo)
    if not tags:
        hint = " (it is a shallow clone: git fetch --unshallow --tags)" if shallow else ""
        raise GitError(f"no release tags matching {pattern!r} in {name}{hint}")
    lo = _bound(repo, tags, start, "--from") if start else None
    hi = _bound(repo, tags, end, "--to") if end else None
    if lo is not None and hi is not None and lo > hi:
        raise UsageError(f"--from {start} is newer than --to {end}")
    chosen = [t for t in tags if (lo is None or tag_version(t) >= lo) and (hi is None or tag_version(t) <= hi)]  # type: ignore[operator]
    if not chosen:
        raise GitError(f"no release tags between {start or tags[0]} and {end or tags[-1]} in {name}")
    if shallow:  # every chosen tag's commit and tree must be present
        for t in chosen:
            try:
                resolve_commit(repo, t)
            except GitError as exc:
                raise GitError(f"{exc} (shallow clone: git fetch --unshallow --tags)") from None
    return chosen


def _has_commits(repo: git.Repo) -> bool:
    try:
        return bool(repo.git.rev_list("--all", "--max-count=1").strip())
    except git.GitCommandError:
        return False


def run_history(
    repo: str | Path,
    start: Optional[str] = None,
    end: Optional[str] = None,
    pattern: Optional[str] = None,
    include_pre: bool = False,
    config: Optional[Config] = None,
    cache_dir: Optional[Path] = None,
    workers: Optional[int] = None,
    progress: Optional[Progress] = None,
    *,
    rules: Sequence["RuleClass"],
) -> History:
    scanner = Scanner(repo, config, cache_dir, workers, rules=rules)
    try:
        tags = select_tags(scanner.repo, start, end, pattern, include_pre)
        return scan_refs(scanner, tags, "history", progress, "history: release")
    finally:
        scanner.close()


# --------------------------------------------------------------------------- diff


def run_diff(
    repo: str | Path,
    base: str,
    head: str,
    config: Optional[Config] = None,
    cache_dir: Optional[Path] = None,
    workers: Optional[int] = None,
    progress: Optional[Progress] = None,
    *,
    rules: Sequence["RuleClass"],
) -> History:
    """Scan ``base`` and ``head``; a version number (``0.22.1``) names the release tag ``v0.22.1``."""
    scanner = Scanner(repo, config, cache_dir, workers, rules=rules)
    try:
        refs = [resolve_ref(scanner.repo, ref) for ref in (base, head)]
        hist = scan_refs(scanner, refs, "diff", progress, "diff: revision")
    finally:
        scanner.close()
    for rel in hist.releases:
        if not rel.scanned:
            raise GitError(f"{rel.ref} ({rel.commit[:12]}) has no {PACKAGE}/ directory at the repository root")
    return hist


def resolve_ref(repo: git.Repo, ref: str) -> str:
    """``ref`` itself when git knows it; else the release tag a bare version stands for
    (``0.22.1`` -> ``v0.22.1``, as ``history --from`` accepts). A clear error otherwise."""
    try:
        resolve_commit(repo, ref)
        return ref
    except GitError as exc:
        msg = str(exc)
    if _VERSION_FORM.fullmatch(ref):
        for tag in (f"v{ref}", f"V{ref}"):
            try:
                resolve_commit(repo, tag)
                return tag
            except GitError:
                continue
    if is_shallow(repo) and "shallow" not in msg:
        msg += " (the repository is a shallow clone: git fetch --unshallow --tags)"
    raise GitError(msg)
