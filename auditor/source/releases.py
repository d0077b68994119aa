"""Build a small git repository of vLLM releases from their sdists, one tagged commit each.

``import_releases(["0.9.2", "0.10.0"], into=Path("releases.git"))`` fetches each
release (``auditor.fetch``), commits the ``.py`` files of its ``vllm/`` package plus a
few top-level metadata files (``TOP_LEVEL_FILES``), and tags the commit ``vX.Y.Z``.
The result is a bare repository that ``GitTree``/``history`` read like a vLLM clone.

* Commits form one linear branch (``main``) in the order they were imported; the
  versions of one call are imported in version order. A version imported later than a
  newer one (say 0.9.0 after 0.10.0) is appended on top: consumers order releases by
  tag version (``gittree.list_release_tags``), never by commit order.
* Author, committer, dates and messages are fixed functions of the sdist (the date is
  the sdist's upload time on the index when known), so importing the same versions in
  the same order produces the same commit ids.
* Existing tags are skipped, never rewritten. A directory that is not empty and not a
  repository made by this tool (git config ``mtp-audit.releases = true``) is refused.
* All requested releases are fetched before the repository is touched, so a bad
  version leaves it unchanged. Objects are written with gitpython; no work tree exists.
"""

from __future__ import annotations

import datetime as _dt
import os
import stat
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Callable, Optional

import git
from git.index.fun import write_tree_from_cache
from git.index.typ import BaseIndexEntry, IndexEntry
from gitdb.base import IStream
from packaging.version import InvalidVersion, Version

from ..common.errors import GitError
from .fetch import parse_version, fetch_release, release_metadata
from .gittree import open_repo

BRANCH = "main"
CONFIG_SECTION = "mtp-audit"
CONFIG_OPTION = "releases"
ACTOR = git.Actor("mtp-audit release import", "mtp-audit@localhost")
#: top-level files of the sdist committed beside vllm/ when present (all small)
TOP_LEVEL_FILES = ("PKG-INFO", "pyproject.toml", "setup.py", "LICENSE")
_FALLBACK_EPOCH = 946684800  # 2000-01-01T00:00:00Z, when nothing better is known


@dataclass
class ImportResult:
    created: list[str] = field(default_factory=list)  # tags made by this call, in order
    skipped: list[str] = field(default_factory=list)  # tags that already existed
    commits: dict[str, str] = field(default_factory=dict)  # tag -> commit id (created ones)


def _is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not any(path.iterdir())


def _is_ours(repo: git.Repo) -> bool:
    try:
        reader = repo.config_reader("repository")
        return reader.get_value(CONFIG_SECTION, CONFIG_OPTION, default=False) in (True, "true", 1)
    except Exception:  # noqa: BLE001 - unreadable config means "not ours"
        return False


def _open_or_create(into: Path) -> git.Repo:
    into = into.expanduser()
    if into.exists() and not into.is_dir():
        raise GitError(f"refusing to import into {into}: it is a file, not a directory")
    if not into.exists() or _is_empty_dir(into):
        try:
            into.mkdir(parents=True, exist_ok=True)
            repo = git.Repo.init(into, bare=True)
            repo.git.symbolic_ref("HEAD", f"refs/heads/{BRANCH}")
            with repo.config_writer("repository") as cw:
                cw.set_value(CONFIG_SECTION, CONFIG_OPTION, "true")
        except (OSError, git.GitCommandError) as exc:
            raise GitError(f"cannot create a repository in {into}: {_one_line(exc)}") from None
        return repo
    try:
        repo = open_repo(into)
    except GitError:
        raise GitError(
            f"refusing to import into {into}: the directory is not empty and not a releases repository made by mtp-audit"
        ) from None
    if not _is_ours(repo):
        raise GitError(
            f"refusing to import into {into}: it is a git repository not made by mtp-audit "
            f"(no '{CONFIG_SECTION}.{CONFIG_OPTION}' in its config)"
        )
    return repo


def _one_line(exc: BaseException) -> str:
    text = getattr(exc, "stderr", None) or str(exc)
    return " ".join(str(text).split())


def _files_to_commit(root: Path) -> list[tuple[str, Path, int]]:
    """(repo path, file on disk, git mode) for vllm/**/*.py and the top-level metadata files."""
    out: list[tuple[str, Path, int]] = []
    pkg = root / "vllm"
    for dirpath, dirnames, filenames in os.walk(pkg, followlinks=False):
        dirnames[:] = sorted(
            d for d in dirnames
            if not d.startswith(".") and d != "__pycache__" and not os.path.islink(os.path.join(dirpath, d))
        )
        for name in filenames:
            if not name.endswith(".py"):
                continue
            full = Path(dirpath) / name
            st = full.lstat()
            if not stat.S_ISREG(st.st_mode):
                continue  # symlinks and oddities are not committed
            mode = 0o100755 if st.st_mode & 0o111 else 0o100644
            out.append((full.relative_to(root).as_posix(), full, mode))
    for name in TOP_LEVEL_FILES:
        full = root / name
        if full.is_file() and not full.is_symlink():
            out.append((name, full, 0o100644))
    out.sort(key=lambda t: t[0].encode())
    return out


def _write_tree(repo: git.Repo, files: list[tuple[str, Path, int]]) -> str:
    entries: list[IndexEntry] = []
    odb = repo.odb
    for relpath, full, mode in files:
        data = full.read_bytes()
        istream = odb.store(IStream(b"blob", len(data), BytesIO(data)))
        entries.append(IndexEntry.from_base(BaseIndexEntry((mode, istream.binsha, 0, relpath))))
    binsha, _ = write_tree_from_cache(entries, odb, slice(0, len(entries)))
    return binsha.hex()


def _commit_date(root: Path, files: list[tuple[str, Path, int]]) -> str:
    meta = release_metadata(root)
    upload = meta.get("upload_time")
    if isinstance(upload, str) and upload:
        try:
            when = _dt.datetime.fromisoformat(upload.replace("Z", "+00:00"))
            if when.tzinfo is None:
                when = when.replace(tzinfo=_dt.timezone.utc)
            return f"{int(when.timestamp())} +0000"
        except ValueError:
            pass
    try:
        newest = max(int(full.stat().st_mtime) for _, full, _ in files)
        if newest > _FALLBACK_EPOCH:
            return f"{newest} +0000"
    except (OSError, ValueError):
        pass
    return f"{_FALLBACK_EPOCH} +0000"


def _message(version: str, root: Path, nfiles: int) -> str:
    meta = release_metadata(root)
    lines = [f"vLLM {version}", ""]
    lines.append(f"Source: {meta.get('filename', f'vllm-{version}.tar.gz')} ({nfiles} files: vllm/**/*.py and metadata)")
    if meta.get("sha256"):
        lines.append(f"Sdist-SHA256: {meta['sha256']}")
    lines.append("Imported-By: mtp-audit releases import")
    return "\n".join(lines) + "\n"


def _tags(repo: git.Repo) -> set[str]:
    out = repo.git.for_each_ref("refs/tags", format="%(refname:strip=2)")
    return {line for line in out.splitlines() if line}


def _tag_release(tag: str) -> Optional[Version]:
    try:
        return Version(tag[1:]) if tag[:1] == "v" else None
    except InvalidVersion:
        return None


def _branch_tip(repo: git.Repo) -> str | None:
    try:
        sha = repo.git.rev_parse("--verify", "--quiet", f"refs/heads/{BRANCH}^{{commit}}").strip()
    except git.GitCommandError:
        return None
    return sha or None


def run_import(
    versions: list[str],
    into: Path,
    cache_dir: Path | None = None,
    progress: bool = True,
    log: Optional[Callable[[str], None]] = None,
) -> ImportResult:
    """Import ``versions``; see the module docstring. Returns what was created and skipped.

    ``progress``: download bars (a terminal); ``log``: one line per phase (logs)."""
    asked = sorted({parse_version(v) for v in versions}, key=Version)
    if not asked:
        return ImportResult()
    into = Path(into)
    existing: set[str] = set()
    if into.exists() and not _is_empty_dir(into):
        existing = _tags(_open_or_create(into))  # validates before any download
    have = {_tag_release(t): t for t in existing}
    todo = [v for v in asked if Version(v) not in have]
    # fetch everything first: a bad version must leave the repository untouched
    roots: dict[str, Path] = {}
    for i, v in enumerate(todo, 1):
        if log is not None:
            log(f"releases import: fetching {v} ({i}/{len(todo)})")
        root = fetch_release(v, cache_dir, progress=progress, log=log)
        roots[root.name[len("vllm-"):]] = root  # the release's own name: 0.33 -> 0.33.0
    wanted = sorted({*roots, *(have[Version(v)][1:] for v in asked if Version(v) in have)}, key=Version)
    repo = _open_or_create(into)
    result = ImportResult()
    try:
        existing = _tags(repo)
        for v in wanted:
            tag = f"v{v}"
            if tag in existing or v not in roots:
                result.skipped.append(tag)
                continue
            if log is not None:
                log(f"releases import: committing {tag}")
            root = roots[v]
            files = _files_to_commit(root)
            if not any(p.startswith("vllm/") for p, _, _ in files):
                raise GitError(f"release {v} in {root} has no vllm/*.py files to import")
            tree = _write_tree(repo, files)
            parent = _branch_tip(repo)
            date = _commit_date(root, files)
            commit = git.Commit.create_from_tree(
                repo,
                repo.tree(tree),
                _message(v, root, len(files)),
                parent_commits=[repo.commit(parent)] if parent else [],
                head=False,
                author=ACTOR,
                committer=ACTOR,
                author_date=date,
                commit_date=date,
            )
            # the tag first: if we stop between the two, the release is still reachable
            repo.git.update_ref(f"refs/tags/{tag}", commit.hexsha, "")
            repo.git.update_ref(f"refs/heads/{BRANCH}", commit.hexsha, parent or "")
            existing.add(tag)
            result.created.append(tag)
            result.commits[tag] = commit.hexsha
        if result.created:
            repo.git.gc("--auto", "--quiet")
    except git.GitCommandError as exc:
        raise GitError(f"git failed while importing into {into}: {_one_line(exc)}") from None
    except OSError as exc:
        raise GitError(f"cannot write to {into}: {exc.strerror or exc}") from None
    finally:
        repo.close()
    return result


def import_releases(
    versions: list[str], into: Path, cache_dir: Path | None = None, progress: bool = True
) -> list[str]:
    """Import releases into the repository at ``into``; return the tags created (skips excluded)."""
    return run_import(versions, into, cache_dir, progress).created
