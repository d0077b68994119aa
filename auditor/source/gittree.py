"""A :class:`~auditor.source.SourceTree` read straight from git objects.

``GitTree(repo, rev)`` lists and reads the ``.py`` files of ``vllm/`` at a commit
without checking anything out: the work tree and the index are never touched. Blob
ids (``blob_sha``) let the engine key its per-file cache without reading content.

Also the helpers ``history`` needs: release tags in version order and the commits
between two revisions in topological order.
"""

from __future__ import annotations

import re
from pathlib import Path

import git
from gitdb.exc import BadName, BadObject
from packaging.version import InvalidVersion, Version

from ..common.errors import GitError
from .trees import MAX_FILE_BYTES, FileTooLarge

PACKAGE = "vllm"


class NoVllmInTree(GitError):
    """The commit exists but its tree has no ``vllm/`` package (history marks the row skipped)."""


# --------------------------------------------------------------------------- repository


def open_repo(repo: str | Path | git.Repo) -> git.Repo:
    """Open a repository (work tree root, ``.git`` dir or bare repo); GitError if it is not one."""
    if isinstance(repo, git.Repo):
        return repo
    path = Path(repo).expanduser()
    if not path.exists():
        raise GitError(f"no such directory: {path}")
    try:
        return git.Repo(path, search_parent_directories=False)
    except git.InvalidGitRepositoryError:
        raise GitError(f"not a git repository: {path}") from None
    except git.NoSuchPathError:
        raise GitError(f"no such directory: {path}") from None
    except git.GitCommandNotFound:
        raise GitError("the git command is not installed (needed to read repositories)") from None


def _repo_name(repo: git.Repo) -> str:
    return str(Path(repo.working_tree_dir or repo.git_dir))


def is_shallow(repo: git.Repo) -> bool:
    return (Path(repo.common_dir) / "shallow").is_file()


def _has_commits(repo: git.Repo) -> bool:
    try:
        return bool(repo.git.rev_list("--all", "--max-count=1").strip())
    except git.GitCommandError:
        return False


def resolve_commit(repo: str | Path | git.Repo, rev: str) -> git.Commit:
    """The commit ``rev`` names (tags peeled); GitError with one line when it cannot."""
    repo = open_repo(repo)
    if not _has_commits(repo):
        raise GitError(f"repository {_repo_name(repo)} is empty (no commits)")
    if not rev or rev.startswith("-") or "\n" in rev:
        raise GitError(f"bad revision {rev!r} in {_repo_name(repo)}")
    try:
        sha = repo.git.rev_parse("--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}").strip()
    except git.GitCommandError:
        sha = ""
    if not sha:
        hint = ""
        if re.fullmatch(r"[0-9a-fA-F]{7,40}", rev) and is_shallow(repo):
            hint = " (the repository is a shallow clone that may lack it: git fetch --unshallow)"
        raise GitError(f"unknown revision {rev!r} in {_repo_name(repo)}{hint}")
    try:
        commit = repo.commit(sha)
        commit.tree  # noqa: B018 - forces reading the commit object
    except (BadName, BadObject, ValueError, git.GitCommandError):
        raise GitError(f"commit {sha[:12]} is missing from {_repo_name(repo)} (shallow or damaged clone)") from None
    return commit


# --------------------------------------------------------------------------- the tree


class GitTree:
    """The ``vllm/`` sources of one commit, read from git objects.

    ``label`` defaults to ``<rev>@<short sha>``. Paths are POSIX paths relative to the
    repository root (``vllm/model_executor/models/deepseek_mtp.py``).
    """

    def __init__(self, repo: str | Path | git.Repo, rev: str = "HEAD", label: str = "",
                 packages: tuple[str, ...] = (PACKAGE,)) -> None:
        self.repo = open_repo(repo)
        self.packages = packages  # top-level packages listed (a platform plugin's own; issue 13)
        self._owns_repo = not isinstance(repo, git.Repo)
        self.rev = rev
        self.commit = resolve_commit(self.repo, rev)
        self.commit_sha: str = self.commit.hexsha
        tree = self.commit.tree
        for package in packages:
            try:
                entry = tree[package]
            except KeyError:
                entry = None
            if entry is None or entry.type != "tree":
                raise NoVllmInTree(f"{rev} ({self.commit_sha[:12]}) has no {package}/ directory at the repository root")
        self.label = label or f"{rev}@{self.commit_sha[:12]}"
        self._entries: dict[str, tuple[str, int]] | None = None  # path -> (blob sha, size)
        self._files: list[str] | None = None
        self._problems: list[tuple[str, str, str]] = []

    # -- listing -------------------------------------------------------------

    def _list(self) -> None:
        if self._files is not None:
            return
        out = self.repo.git.execute(
            ["git", "ls-tree", "-r", "-l", "-z", "--full-tree", self.commit_sha, "--", *(p + "/" for p in self.packages)],
            stdout_as_string=False,
        )
        entries: dict[str, tuple[str, int]] = {}
        problems: list[tuple[str, str, str]] = []
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, raw_path = record.partition(b"\t")
            mode, otype, sha, size = meta.split()
            try:
                path = raw_path.decode("utf-8")
            except UnicodeDecodeError:
                problems.append((raw_path.decode("utf-8", "replace"), "unreadable", "file name is not UTF-8"))
                continue
            parts = path.split("/")
            if any(p.startswith(".") or p == "__pycache__" for p in parts[1:-1]):
                continue
            if otype == b"commit":
                problems.append((path, "submodule", "git submodule not followed"))
                continue
            if not path.endswith(".py"):
                continue
            if mode == b"120000":
                target = self.repo.odb.stream(bytes.fromhex(sha.decode())).read().decode("utf-8", "replace")
                problems.append((path, "symlink", "symbolic link not followed: " + target))
                continue
            if otype != b"blob":
                continue
            entries[path] = (sha.decode(), int(size) if size.isdigit() else -1)
        self._entries = entries
        self._files = sorted(entries)
        self._problems = problems

    def python_files(self) -> list[str]:
        self._list()
        assert self._files is not None
        return list(self._files)

    def problems(self) -> list[tuple[str, str, str]]:
        self._list()
        return list(self._problems)

    # -- content -------------------------------------------------------------

    def _entry(self, relpath: str) -> tuple[str, int]:
        self._list()
        assert self._entries is not None
        try:
            return self._entries[relpath]
        except KeyError:
            raise FileNotFoundError(f"{relpath} is not a Python file of {'/, '.join(self.packages)}/ at {self.label}") from None

    def files_containing(self, needles: list[bytes]) -> set[str]:
        """Python files whose bytes contain any of ``needles`` (``git grep``, without reading
        every blob through Python)."""
        self._list()
        args = ["git", "grep", "-l", "-F", "-I", "--full-name"]
        for n in needles:
            args += ["-e", n.decode("utf-8", "surrogateescape")]
        args += [self.commit_sha, "--", *(p + "/" for p in self.packages)]
        try:
            out = self.repo.git.execute(args, stdout_as_string=False, with_exceptions=False)
        except git.GitCommandError:
            return set(self._files or [])
        found = set()
        prefix = self.commit_sha.encode() + b":"
        for line in out.splitlines():
            path = line[len(prefix):] if line.startswith(prefix) else line
            found.add(path.decode("utf-8", "replace"))
        assert self._entries is not None
        return found & set(self._entries)

    def blob_sha(self, relpath: str) -> str:
        """The git blob id of ``relpath`` (hex), without reading its content."""
        return self._entry(relpath)[0]

    def size(self, relpath: str) -> int:
        return self._entry(relpath)[1]

    def read(self, relpath: str) -> bytes:
        sha, size = self._entry(relpath)
        if size > MAX_FILE_BYTES:
            raise FileTooLarge(f"{size} bytes, over the {MAX_FILE_BYTES} byte limit")
        try:
            data: bytes = self.repo.odb.stream(bytes.fromhex(sha)).read()
            return data
        except (BadObject, BadName, ValueError, git.GitCommandError) as exc:
            raise OSError(f"cannot read blob {sha[:12]} for {relpath}: {exc}") from None

    # -- lifetime ------------------------------------------------------------

    def close(self) -> None:
        """Stop git's helper processes (only for a repository this tree opened itself)."""
        if self._owns_repo:
            self.repo.close()

    def __enter__(self) -> "GitTree":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- history helpers


def tag_version(tag: str) -> Version | None:
    text = tag[1:] if tag[:1] in ("v", "V") else tag
    try:
        return Version(text)
    except InvalidVersion:
        return None


def list_release_tags(
    repo: str | Path | git.Repo, pattern: str = r"^v\d+\.\d+\.\d+$", include_pre: bool = False
) -> list[str]:
    """Tag names matching ``pattern``, ordered as versions (``v0.9.2`` < ``v0.10.0``).

    Tags that do not parse as versions are left out; so are pre-, dev- and (unless
    ``include_pre``) release-candidate versions. Tags that do not point (after peeling)
    at a commit are left out too.
    """
    repo = open_repo(repo)
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise GitError(f"bad tag pattern {pattern!r}: {exc}") from None
    out = repo.git.for_each_ref("refs/tags", format="%(refname:strip=2)\t%(objecttype)\t%(*objecttype)")
    tags: list[tuple[Version, str]] = []
    for line in out.splitlines():
        name, _, rest = line.partition("\t")
        otype, _, peeled = rest.partition("\t")
        if (peeled or otype) != "commit":
            continue
        if not rx.search(name):
            continue
        v = tag_version(name)
        if v is None:
            continue
        if (v.is_prerelease or v.is_devrelease) and not include_pre:
            continue
        tags.append((v, name))
    tags.sort()
    return [name for _, name in tags]


def commits_between(repo: str | Path | git.Repo, good: str, bad: str) -> list[str]:
    """Commits reachable from ``bad`` but not from ``good``, parents before children.

    The list ends with ``bad``'s commit; ``good`` is excluded. ``good`` must be an
    ancestor of ``bad``. This is the candidate list a bisection walks.
    """
    repo = open_repo(repo)
    g = resolve_commit(repo, good)
    b = resolve_commit(repo, bad)
    if g.hexsha == b.hexsha:
        return []
    if not repo.is_ancestor(g, b):
        hint = " (or the shallow clone lacks the history between them)" if is_shallow(repo) else ""
        raise GitError(f"{good} ({g.hexsha[:12]}) is not an ancestor of {bad} ({b.hexsha[:12]}){hint}")
    out = repo.git.rev_list("--topo-order", "--reverse", f"{g.hexsha}..{b.hexsha}")
    return [line for line in out.splitlines() if line]
