"""What git calls changed, and the work tree as git sees it (``lint``).

``lint`` compares two sides; which files changed is git's answer, not a comparison of
what two listings happen to hold: a git-ignored file (``vllm/_version.py`` written by
the build) is not a change, and a submodule is one entry, never its content.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import git

from ..common.errors import GitError
from .trees import DirectoryTree


def open_unexpanded(path: Path, search_parent_directories: bool) -> git.Repo:
    """``git.Repo(path)`` for the directory ``path`` names. GitPython expands ``$VAR`` and
    ``~`` twice: in the repository path (``expand_vars=False`` stops that) and, always, in
    the working directory of its git command runner (``Git.__init__``), so that every git
    command would run in another repository; that one is set back here."""
    repo = git.Repo(path, search_parent_directories=search_parent_directories, expand_vars=False)
    repo.git._working_dir = repo.working_dir  # private, but the only way to stop the expansion
    return repo


def _z(out: bytes) -> set[str]:
    return {p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p}


def _git(repo: git.Repo, *args: str) -> bytes:
    try:
        out: bytes = repo.git.execute(["git", *args], stdout_as_string=False)
        return out
    except git.GitCommandError as exc:
        detail = " ".join(str(exc.stderr or exc).split())
        raise GitError(f"git {args[0]} failed in {repo.working_tree_dir or repo.git_dir}: {detail}") from None


def changed_files(repo: git.Repo, base_sha: str, head_sha: str | None, packages: Sequence[str]) -> list[str]:
    """Python files under ``packages`` that differ between ``base_sha`` and ``head_sha``
    (None: the work tree, staged or not, plus untracked files git does not ignore)."""
    specs = ["--", *(p + "/" for p in packages)]
    if head_sha is not None:
        paths = _z(_git(repo, "diff", "--name-only", "-z", "--no-renames", "--ignore-submodules=all",
                        base_sha, head_sha, *specs))
    else:
        paths = _z(_git(repo, "diff", "--name-only", "-z", "--no-renames", "--ignore-submodules=all", base_sha, *specs))
        paths |= _z(_git(repo, "ls-files", "-z", "--others", "--exclude-standard", *specs))
    return sorted(p for p in paths if p.endswith(".py"))


def tracked_or_unignored(repo: git.Repo, packages: Sequence[str]) -> frozenset[str]:
    """Files of the work tree that git tracks or would add: neither ignored nor inside a submodule."""
    out = _git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *(p + "/" for p in packages))
    return frozenset(_z(out))


@dataclass
class GitWorkTree(DirectoryTree):
    """A work tree listed as git sees it: the files of :func:`tracked_or_unignored` only."""

    keep: frozenset[str] = field(default_factory=frozenset)

    def python_files(self) -> list[str]:
        if self._files is None:
            self._files = [p for p in super().python_files() if p in self.keep]
        return self._files
